/*
 * mpitest.c - helpers for Weft's multi-rank test programs (see mpitest.h).
 * Thread contract: the test's main thread only.
 */
#include "mpitest.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mt_init(mt_ctx_t *t, int *argc, char ***argv)
{
    int provided = 0, rc;
    memset(t, 0, sizeof(*t));
    t->name = (argc && *argc > 0 && argv && *argv) ? (*argv)[0] : "mpitest";
    const char *slash = strrchr(t->name, '/');
    if (slash) t->name = slash + 1;

    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "%s: MPI_Init_thread failed\n", t->name);
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &t->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &t->size);
    t->t0 = MPI_Wtime();
    if (provided < MPI_THREAD_MULTIPLE) {
        if (t->rank == 0) printf("%s: skipped: MPI_THREAD_MULTIPLE unavailable\n", t->name);
        MPI_Finalize();
        return 77;
    }
    weft_status_t st = weft_init(NULL);
    if (st != WEFT_SUCCESS) {
        fprintf(stderr, "%s: rank %d: weft_init: %s\n", t->name, t->rank, weft_strerror(st));
        rc = st == WEFT_ERR_THREAD_LEVEL ? 77 : 1;
        MPI_Finalize();
        return rc;
    }
    st = weft_comm_create(MPI_COMM_WORLD, NULL, &t->comm);
    if (st != WEFT_SUCCESS) {
        fprintf(stderr, "%s: rank %d: weft_comm_create: %s\n", t->name, t->rank,
                weft_strerror(st));
        weft_finalize();
        MPI_Finalize();
        return 1;
    }
    return 0;
}

static int mt_end(mt_ctx_t *t, int skip, const char *why)
{
    long total = 0;
    int exit_code;
    if (MPI_Reduce(&t->errors, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
        fprintf(stderr, "%s: rank %d: MPI_Reduce of the error count failed\n", t->name, t->rank);
        total = t->errors + 1;
    }
    /* Every rank returns the same exit code. */
    if (MPI_Bcast(&total, 1, MPI_LONG, 0, MPI_COMM_WORLD) != MPI_SUCCESS) total = t->errors + 1;
    if (t->rank == 0) {
        if (total != 0)
            printf("%s: Found %ld errors (%d ranks, %.2f s)\n", t->name, total, t->size,
                   mt_elapsed(t));
        else if (skip)
            printf("%s: skipped: %s\n", t->name, why ? why : "");
        else
            printf("%s: No Errors (%d ranks, %.2f s)\n", t->name, t->size, mt_elapsed(t));
        fflush(stdout);
    }
    exit_code = total != 0 ? 1 : (skip ? 77 : 0);
    if (t->comm) {
        weft_status_t st = weft_comm_destroy(t->comm);
        if (st != WEFT_SUCCESS) {
            fprintf(stderr, "%s: rank %d: weft_comm_destroy: %s\n", t->name, t->rank,
                    weft_strerror(st));
            exit_code = 1;
        }
        t->comm = NULL;
    }
    weft_status_t st = weft_finalize();
    if (st != WEFT_SUCCESS) {
        fprintf(stderr, "%s: rank %d: weft_finalize: %s\n", t->name, t->rank, weft_strerror(st));
        exit_code = 1;
    }
    MPI_Finalize();
    return exit_code;
}

int mt_finish(mt_ctx_t *t) { return mt_end(t, 0, NULL); }

int mt_skip(mt_ctx_t *t, const char *why) { return mt_end(t, 1, why); }

void mt_error(mt_ctx_t *t, const char *fmt, ...)
{
    va_list ap;
    t->errors++;
    fprintf(stderr, "[rank %d] ERROR: ", t->rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void mt_check_fail(mt_ctx_t *t, const char *file, int line, const char *cond, const char *fmt,
                   ...)
{
    va_list ap;
    t->errors++;
    fprintf(stderr, "[rank %d] ERROR: %s:%d: check failed: %s: ", t->rank, file, line, cond);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void mt_info(mt_ctx_t *t, const char *fmt, ...)
{
    static int verbose = -1;
    va_list ap;
    if (verbose < 0) verbose = mt_env_long("MT_VERBOSE", 0) != 0;
    if (!verbose || t->rank != 0) return;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

int mt_status_check(mt_ctx_t *t, weft_status_t st, weft_status_t expected, const char *what,
                    const char *file, int line)
{
    if (st == expected) return 1;
    mt_error(t, "%s:%d: %s returned %s (%d), expected %s", file, line, what,
             weft_status_name(st), (int)st, weft_status_name(expected));
    return 0;
}

/* ---- datatypes ------------------------------------------------------------ */

MPI_Datatype mt_mpi_dtype(weft_datatype_t dt)
{
    switch (dt) {
    case WEFT_INT8: return MPI_INT8_T;
    case WEFT_UINT8: return MPI_UINT8_T;
    case WEFT_INT16: return MPI_INT16_T;
    case WEFT_UINT16: return MPI_UINT16_T;
    case WEFT_INT32: return MPI_INT32_T;
    case WEFT_UINT32: return MPI_UINT32_T;
    case WEFT_INT64: return MPI_INT64_T;
    case WEFT_UINT64: return MPI_UINT64_T;
    case WEFT_FLOAT32: return MPI_FLOAT;
    case WEFT_FLOAT64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
    }
}

MPI_Op mt_mpi_op(weft_op_t op)
{
    switch (op) {
    case WEFT_SUM: case WEFT_AVG: return MPI_SUM;
    case WEFT_PROD: return MPI_PROD;
    case WEFT_MIN: return MPI_MIN;
    case WEFT_MAX: return MPI_MAX;
    case WEFT_BAND: return MPI_BAND;
    case WEFT_BOR: return MPI_BOR;
    case WEFT_BXOR: return MPI_BXOR;
    default: return MPI_OP_NULL;
    }
}

size_t mt_dtype_size(weft_datatype_t dt)
{
    switch (dt) {
    case WEFT_INT8: case WEFT_UINT8: return 1;
    case WEFT_INT16: case WEFT_UINT16: case WEFT_FLOAT16: case WEFT_BFLOAT16: return 2;
    case WEFT_INT32: case WEFT_UINT32: case WEFT_FLOAT32: return 4;
    case WEFT_INT64: case WEFT_UINT64: case WEFT_FLOAT64: return 8;
    default: return 0;
    }
}

int mt_dtype_is_int(weft_datatype_t dt)
{
    return (dt >= WEFT_INT8 && dt <= WEFT_UINT64) || dt == WEFT_INT16 || dt == WEFT_UINT16;
}

int mt_dtype_is_float(weft_datatype_t dt) { return dt >= WEFT_FLOAT16 && dt <= WEFT_FLOAT64; }

int mt_op_valid(weft_datatype_t dt, weft_op_t op)
{
    if (mt_dtype_size(dt) == 0 || op < 0 || op >= WEFT_OP_COUNT) return 0;
    if (op == WEFT_BAND || op == WEFT_BOR || op == WEFT_BXOR) return mt_dtype_is_int(dt);
    return 1;
}

double mt_eps(weft_datatype_t dt)
{
    switch (dt) {
    case WEFT_FLOAT16: return ldexp(1.0, -11);
    case WEFT_BFLOAT16: return ldexp(1.0, -8);
    case WEFT_FLOAT32: return ldexp(1.0, -24);
    case WEFT_FLOAT64: return ldexp(1.0, -53);
    default: return 0.0;
    }
}

/* ---- small floats: an independent reference (frexp/ldexp based) ---------- */

/* A binary format with `mbits` stored mantissa bits and `ebits` exponent bits. */
static double small_to_double(uint16_t h, int mbits, int ebits)
{
    int bias = (1 << (ebits - 1)) - 1;
    unsigned emask = (1u << ebits) - 1;
    unsigned sign = (h >> (mbits + ebits)) & 1u;
    unsigned e = (h >> mbits) & emask;
    unsigned m = h & ((1u << mbits) - 1);
    double v;
    if (e == emask)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp((double)m, 1 - bias - mbits);
    else
        v = ldexp((double)(m | (1u << mbits)), (int)e - bias - mbits);
    return sign ? -v : v;
}

/* Round to nearest, ties to even (nearbyint in the default rounding mode). */
static uint16_t double_to_small(double d, int mbits, int ebits)
{
    int bias = (1 << (ebits - 1)) - 1, emin = 1 - bias, emax = bias, e2;
    unsigned emask = (1u << ebits) - 1;
    uint16_t sign = signbit(d) ? (uint16_t)(1u << (mbits + ebits)) : 0;
    double a = fabs(d), q;
    if (isnan(d)) return (uint16_t)(sign | (emask << mbits) | (1u << (mbits - 1)));
    if (isinf(a)) return (uint16_t)(sign | (emask << mbits));
    if (a == 0.0) return sign;
    (void)frexp(a, &e2);
    int e = e2 - 1; /* a in [2^e, 2^(e+1)) */
    if (e < emin) { /* subnormal; q == 2^mbits becomes the smallest normal */
        q = nearbyint(ldexp(a, mbits - emin));
        return (uint16_t)(sign | (unsigned)q);
    }
    q = nearbyint(ldexp(a, mbits - e));
    if (q >= ldexp(1.0, mbits + 1)) { q = ldexp(q, -1); e++; }
    if (e > emax) return (uint16_t)(sign | (emask << mbits));
    return (uint16_t)(sign | ((unsigned)(e + bias) << mbits) | ((unsigned)q - (1u << mbits)));
}

double mt_half_to_double(uint16_t h) { return small_to_double(h, 10, 5); }
uint16_t mt_double_to_half(double d) { return double_to_small(d, 10, 5); }
double mt_bf16_to_double(uint16_t h) { return small_to_double(h, 7, 8); }
uint16_t mt_double_to_bf16(double d) { return double_to_small(d, 7, 8); }

double mt_get(const void *buf, size_t i, weft_datatype_t dt)
{
    switch (dt) {
    case WEFT_INT8: return ((const int8_t *)buf)[i];
    case WEFT_UINT8: return ((const uint8_t *)buf)[i];
    case WEFT_INT16: return ((const int16_t *)buf)[i];
    case WEFT_UINT16: return ((const uint16_t *)buf)[i];
    case WEFT_INT32: return ((const int32_t *)buf)[i];
    case WEFT_UINT32: return ((const uint32_t *)buf)[i];
    case WEFT_INT64: return (double)((const int64_t *)buf)[i];
    case WEFT_UINT64: return (double)((const uint64_t *)buf)[i];
    case WEFT_FLOAT16: return mt_half_to_double(((const uint16_t *)buf)[i]);
    case WEFT_BFLOAT16: return mt_bf16_to_double(((const uint16_t *)buf)[i]);
    case WEFT_FLOAT32: return ((const float *)buf)[i];
    case WEFT_FLOAT64: return ((const double *)buf)[i];
    default: return 0.0;
    }
}

void mt_set(void *buf, size_t i, weft_datatype_t dt, double v)
{
    switch (dt) {
    case WEFT_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case WEFT_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case WEFT_INT16: ((int16_t *)buf)[i] = (int16_t)v; break;
    case WEFT_UINT16: ((uint16_t *)buf)[i] = (uint16_t)v; break;
    case WEFT_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case WEFT_UINT32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    case WEFT_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case WEFT_UINT64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
    case WEFT_FLOAT16: ((uint16_t *)buf)[i] = mt_double_to_half(v); break;
    case WEFT_BFLOAT16: ((uint16_t *)buf)[i] = mt_double_to_bf16(v); break;
    case WEFT_FLOAT32: ((float *)buf)[i] = (float)v; break;
    case WEFT_FLOAT64: ((double *)buf)[i] = v; break;
    default: break;
    }
}

/* ---- deterministic values ---------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint8_t byte_of(int src, uint32_t salt, size_t i)
{
    uint32_t v = (uint32_t)src * 2654435761u ^ salt * 40503u;
    v += (uint32_t)i * 2246822519u + (uint32_t)(i >> 11);
    return (uint8_t)(v ^ (v >> 13) ^ (v >> 24));
}

void mt_fill_bytes(uint8_t *buf, size_t n, int src, uint32_t salt)
{
    for (size_t i = 0; i < n; i++) buf[i] = byte_of(src, salt, i);
}

size_t mt_bad_bytes(const uint8_t *buf, size_t n, int src, uint32_t salt)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += buf[i] != byte_of(src, salt, i);
    return bad;
}

void mt_fill(void *buf, size_t count, weft_datatype_t dt, weft_op_t op, int rank, uint64_t seed)
{
    int is_signed = dt == WEFT_INT8 || dt == WEFT_INT16 || dt == WEFT_INT32 || dt == WEFT_INT64 ||
                    mt_dtype_is_float(dt);
    int narrow = dt == WEFT_INT8 || dt == WEFT_UINT8, mid = dt == WEFT_INT16 || dt == WEFT_UINT16;
    uint64_t base = mix64(seed * 1000003ull + (uint64_t)rank * 7919ull + (uint64_t)dt * 31ull +
                          (uint64_t)op);
    for (size_t i = 0; i < count; i++) {
        uint64_t h = mix64(base + i);
        double v;
        if (op == WEFT_BAND || op == WEFT_BOR || op == WEFT_BXOR) {
            /* Raw bits: BAND sees mostly-set bits, BOR mostly-clear, BXOR random. */
            uint64_t bits = h;
            if (op == WEFT_BAND) bits |= mix64(h);
            if (op == WEFT_BOR) bits &= mix64(h);
            memcpy((char *)buf + i * mt_dtype_size(dt), &bits, mt_dtype_size(dt));
            continue;
        }
        if (mt_dtype_is_float(dt)) {
            double u = (double)(h >> 11) * ldexp(1.0, -53); /* [0, 1) */
            switch (op) {
            case WEFT_PROD: /* [0.5, 2), random sign: products stay in range */
                v = ldexp(1.0 + u, (int)((h >> 3) & 1u) - 1) * ((h & 1u) ? -1.0 : 1.0);
                break;
            case WEFT_MIN: case WEFT_MAX:
                v = (u - 0.5) * 2000.0;
                break;
            default: /* SUM, AVG: [-1, 1), not exactly representable sums */
                v = 2.0 * u - 1.0;
                break;
            }
        } else {
            /* Integers small enough that p <= 16 ranks never overflow their
             * type on SUM; MIN/MAX use a wider spread. */
            long range;
            switch (op) {
            case WEFT_PROD:
                v = (h % 8 == 0) ? 2.0 : ((is_signed && (h & 16)) ? -1.0 : 1.0);
                if (narrow) v = (h % 16 == 0) ? 2.0 : v;
                mt_set(buf, i, dt, v);
                continue;
            case WEFT_MIN: case WEFT_MAX:
                range = narrow ? 100 : mid ? 30000 : 1000000;
                break;
            default:
                range = narrow ? 7 : mid ? 2000 : 100000;
                break;
            }
            v = (double)(long)(h % (uint64_t)(2 * range + 1)) - (is_signed ? (double)range : 0.0);
            if (!is_signed && v < 0) v = -v;
        }
        mt_set(buf, i, dt, v);
    }
}

/* ---- comparison ------------------------------------------------------------------ */

size_t mt_compare(mt_ctx_t *t, const void *got, const void *ref, size_t count,
                  weft_datatype_t dt, double rtol, const char *what)
{
    size_t es = mt_dtype_size(dt), bad = 0;
    for (size_t i = 0; i < count; i++) {
        int ok;
        if (mt_dtype_is_int(dt) || rtol == 0.0) {
            ok = memcmp((const char *)got + i * es, (const char *)ref + i * es, es) == 0;
            if (!ok && mt_dtype_is_float(dt)) /* NaN vs NaN with other payload */
                ok = isnan(mt_get(got, i, dt)) && isnan(mt_get(ref, i, dt));
        } else {
            double g = mt_get(got, i, dt), r = mt_get(ref, i, dt);
            if (isnan(r) || isnan(g))
                ok = isnan(r) && isnan(g);
            else if (isinf(r) || isinf(g))
                ok = g == r;
            else
                ok = fabs(g - r) <= rtol * fmax(fabs(r), 1.0);
        }
        if (!ok) {
            if (bad < 5)
                fprintf(stderr, "[rank %d]   %s: element %zu of %zu: got %.17g, expected %.17g"
                        " (rtol %.3g)\n", t->rank, what, i, count, mt_get(got, i, dt),
                        mt_get(ref, i, dt), rtol);
            bad++;
        }
    }
    if (bad) mt_error(t, "%s: %zu of %zu elements differ", what, bad, count);
    return bad;
}

int mt_same_on_all(mt_ctx_t *t, const void *buf, size_t bytes, const char *what)
{
    /* Two independent 64-bit hashes of the bytes (FNV-1a and a multiply-mix),
     * compared with rank 0's: equal bits give equal hashes; a difference
     * escapes both only with probability ~2^-128. */
    uint64_t h[3] = {0xcbf29ce484222325ull, 0x243f6a8885a308d3ull, (uint64_t)bytes}, h0[3];
    const unsigned char *p = buf;
    int same, all = 0;
    for (size_t i = 0; i < bytes; i++) {
        h[0] = (h[0] ^ p[i]) * 0x100000001b3ull;
        h[1] = mix64(h[1] + p[i] + i);
    }
    memcpy(h0, h, sizeof(h));
    if (MPI_Bcast(h0, 3, MPI_UINT64_T, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
        mt_error(t, "%s: MPI_Bcast failed", what);
        return 0;
    }
    same = memcmp(h0, h, sizeof(h)) == 0;
    if (!same) mt_error(t, "%s: result differs from rank 0's bits", what);
    if (MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD) != MPI_SUCCESS) {
        mt_error(t, "%s: MPI_Allreduce failed", what);
        return 0;
    }
    return all;
}

double mt_elapsed(const mt_ctx_t *t) { return MPI_Wtime() - t->t0; }

void *mt_xmalloc(mt_ctx_t *t, size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        mt_error(t, "out of memory (%zu bytes)", bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(p, 0xa5, bytes ? bytes : 1);
    return p;
}

int mt_call_done(mt_ctx_t *t, weft_status_t st, int nb, weft_request_t *req, const char *what)
{
    if (!MT_STATUS(t, st, WEFT_SUCCESS, what)) return 0;
    if (nb) {
        st = weft_wait(req);
        if (!MT_STATUS(t, st, WEFT_SUCCESS, what)) return 0;
        MT_CHECK(t, *req == WEFT_REQUEST_NULL, "%s: request not released", what);
    }
    return 1;
}

long mt_env_long(const char *name, long dflt)
{
    const char *s = getenv(name);
    char *end = NULL;
    if (!s || !*s) return dflt;
    long v = strtol(s, &end, 10);
    return (end && *end == '\0') ? v : dflt;
}

/* The nodes as the library should see them, found with MPI alone: groups of
 * WEFT_NODE_RANKS consecutive ranks, or the shared-memory nodes. Collective
 * on the first call; cached. */
static void mt_nodes(mt_ctx_t *t, int *nnodes_out, int *uniform_out)
{
    static int nnodes = -1, uniform = 0;
    if (nnodes < 0) {
        long k = mt_env_long("WEFT_NODE_RANKS", 0);
        MPI_Comm node = MPI_COMM_NULL;
        int rc = k > 0 ? MPI_Comm_split(MPI_COMM_WORLD, (int)(t->rank / k), t->rank, &node)
                       : MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, t->rank,
                                             MPI_INFO_NULL, &node);
        int lr = 0, ls = 0, lead, n = 0, lmin = 0, lmax = 0;
        if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(node, &lr);
        if (rc == MPI_SUCCESS) rc = MPI_Comm_size(node, &ls);
        lead = lr == 0;
        if (rc == MPI_SUCCESS) rc = MPI_Allreduce(&lead, &n, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (rc == MPI_SUCCESS) rc = MPI_Allreduce(&ls, &lmin, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (rc == MPI_SUCCESS) rc = MPI_Allreduce(&ls, &lmax, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (node != MPI_COMM_NULL && MPI_Comm_free(&node) != MPI_SUCCESS) rc = MPI_ERR_OTHER;
        if (rc != MPI_SUCCESS) {
            mt_error(t, "mt_nodes: an MPI call failed (%d)", rc);
            n = 0;
        }
        nnodes = n;
        uniform = lmin == lmax;
    }
    *nnodes_out = nnodes;
    *uniform_out = uniform;
}

int mt_hier_runs(mt_ctx_t *t)
{
    int nnodes = 0, uniform = 0;
    mt_nodes(t, &nnodes, &uniform);
    return nnodes >= 2 && uniform;
}

int mt_shm_runs(mt_ctx_t *t)
{
    int nnodes = 0, uniform = 0;
    mt_nodes(t, &nnodes, &uniform);
    const char *e = getenv("WEFT_SHM");
    return nnodes == 1 && t->size > 1 && (e == NULL || strcmp(e, "0") != 0);
}

int mt_node_path_expected(mt_ctx_t *t)
{
    int nnodes = 0, uniform = 0;
    mt_nodes(t, &nnodes, &uniform);
    const char *e = getenv("WEFT_SHM");
    if (e != NULL && strcmp(e, "0") == 0) return 0;
    if (nnodes == 1) return t->size > 1;
    return nnodes >= 2 && uniform && t->size / nnodes >= 2;
}

int mt_node_path_mapped(mt_ctx_t *t)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (f == NULL) {
        mt_error(t, "mt_node_path_mapped: cannot open /proc/self/maps");
        return -1;
    }
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f) != NULL)
        found = strstr(line, "memfd:weft-node") != NULL;
    if (fclose(f) != 0) {
        mt_error(t, "mt_node_path_mapped: fclose failed");
        return -1;
    }
    return found;
}
