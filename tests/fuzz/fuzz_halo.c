/*
 * fuzz_halo.c - halo plan parameters (weft_halo_plan_create's validation,
 * lib/halo.c) on arbitrary values, and the exchange of every accepted plan
 * whose buffer is small.
 *
 * The validation reads the communicator (size, rank, Cartesian topology),
 * so the harness runs one MPI process: weft_init once, then a plain
 * communicator over MPI_COMM_SELF or a 1x1x1 Cartesian one (made on first
 * use). On one rank a periodic dimension is its own neighbour, so an
 * exchange fills each halo cell from the interior cell it wraps to, and an
 * accumulation adds each halo cell into that cell: both are checked against
 * a reference computed here, element by element.
 *
 * Input (little-endian, missing bytes read as 0):
 *   u8  flags: bit 0 Cartesian comm, bits 1-2 its dimensions - 1 (0..2),
 *              bit 3 exchange, bit 4 accumulate, bit 5 corners
 *   i8  ndims            i32 grid[3]       u8 periodic bits (plan and Cart)
 *   i8  nlead            u64 lead[4]       u64 local[3]
 *   i32 width_lo[3]      i32 width_hi[3]   i8 dtype
 */
#include <string.h>

#include <mpi.h>

#include "fuzz_common.h"
#include "weft_halo.h"
#include "weft_mpi.h"

#define MAX_ELEMS 65536 /* exchange only plans whose buffer is this small */

static weft_comm_t plain;
static weft_comm_t cart[3][8]; /* [ndims - 1][periodic bits] */

/* At exit (libFuzzer's or the replayer's): free the communicators and
 * finalise Weft (and so MPI), so that a leak report names only leaks. */
static void finish(void)
{
    for (int d = 0; d < 3; d++)
        for (int q = 0; q < 8; q++)
            if (cart[d][q] != NULL) weft_comm_destroy(cart[d][q]);
    weft_comm_destroy(plain);
    weft_finalize();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_quiet_stderr();
    /* one process, no UCX memory hooks (they fight the sanitizers) */
    setenv("UCX_MEM_MALLOC_HOOKS", "no", 1);
    setenv("UCX_MEM_MMAP_HOOK_MODE", "none", 1);
    setenv("UCX_MEM_EVENTS", "no", 1);
    setenv("WEFT_MEASURE", "0", 1);
    setenv("WEFT_TRANSPORT", "mpi", 0); /* 3x the inputs a second of UCX here */
    weft_status_t st = weft_init(NULL);
    if (st == WEFT_SUCCESS) st = weft_comm_create(MPI_COMM_SELF, NULL, &plain);
    if (st != WEFT_SUCCESS) {
        fprintf(fuzz_report, "fuzz_halo: Weft set-up failed: %s\n", weft_strerror(st));
        exit(1);
    }
    atexit(finish);
    return 0;
}

static weft_comm_t cart_comm(int nd, int per)
{
    if (cart[nd - 1][per] == NULL) {
        int dims[3] = {1, 1, 1}, periods[3] = {per & 1, (per >> 1) & 1, (per >> 2) & 1};
        MPI_Comm mc;
        if (MPI_Cart_create(MPI_COMM_SELF, nd, dims, periods, 0, &mc) != MPI_SUCCESS ||
            weft_comm_create(mc, NULL, &cart[nd - 1][per]) != WEFT_SUCCESS) {
            fprintf(fuzz_report, "fuzz_halo: cannot make a Cartesian communicator\n");
            exit(1);
        }
        MPI_Comm_free(&mc); /* Weft keeps its own duplicate */
    }
    return cart[nd - 1][per];
}

typedef struct reader {
    const uint8_t *p;
    size_t left;
} reader_t;

static uint64_t take(reader_t *r, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) {
        uint64_t b = 0;
        if (r->left > 0) {
            b = *r->p++;
            r->left--;
        }
        v |= b << (8 * i);
    }
    return v;
}

/* Where element (o, i[3]) takes its value from in an exchange on one rank:
 * its own index (not a filled halo cell) or its owner's. */
static size_t source_of(const weft_halo_params_t *p, const size_t ext[3], size_t o,
                        const size_t i[3], int *filled)
{
    size_t src[3];
    int nhalo = 0, owner = 1;
    for (int d = 0; d < 3; d++) {
        src[d] = i[d];
        if (d >= p->ndims) continue;
        size_t lo = (size_t)p->width_lo[d], n = p->local[d];
        if (i[d] >= lo && i[d] < lo + n) continue;
        nhalo++;
        int periodic = p->periodic[d] != 0;
        if (!periodic) owner = 0;
        src[d] = i[d] < lo ? i[d] + n : i[d] - n; /* widths are at most n */
    }
    *filled = nhalo > 0 && owner && (nhalo == 1 || p->corners);
    return ((o * ext[0] + src[0]) * ext[1] + src[1]) * ext[2] + src[2];
}

static void check_exchange(weft_halo_plan_t plan, const weft_halo_params_t *p, size_t outer,
                           const size_t ext[3], size_t count, size_t es, int accumulate)
{
    uint8_t *buf = malloc(count * es), *orig = malloc(count * es);
    if (buf == NULL || orig == NULL) abort();
    for (size_t e = 0; e < count; e++) {
        if (accumulate) { /* small integers: sums are exact in every type used */
            int v = (int)(e % 97) - 48;
            if (p->dtype == WEFT_INT32) memcpy(buf + e * es, &(int32_t){v}, 4);
            else if (p->dtype == WEFT_FLOAT32) memcpy(buf + e * es, &(float){(float)v}, 4);
            else memcpy(buf + e * es, &(double){v}, 8);
        } else {
            for (size_t b = 0; b < es; b++)
                buf[e * es + b] = (uint8_t)((e >> (8 * (b % 8))) + 13 * b + 1);
        }
    }
    memcpy(orig, buf, count * es);
    weft_status_t st = accumulate ? weft_halo_accumulate(plan, buf) : weft_halo_exchange(plan, buf);
    FUZZ_ASSERT(st == WEFT_SUCCESS, "%s failed: %s", accumulate ? "accumulate" : "exchange",
                weft_strerror(st));
    double *sum = NULL;
    if (accumulate) {
        if ((sum = calloc(count, sizeof *sum)) == NULL) abort();
        for (size_t e = 0; e < count; e++) sum[e] = (double)((int)(e % 97) - 48);
    }
    size_t e = 0, i[3];
    for (size_t o = 0; o < outer; o++)
        for (i[0] = 0; i[0] < ext[0]; i[0]++)
            for (i[1] = 0; i[1] < ext[1]; i[1]++)
                for (i[2] = 0; i[2] < ext[2]; i[2]++, e++) {
                    int filled;
                    size_t s = source_of(p, ext, o, i, &filled);
                    if (!accumulate) {
                        size_t want = filled ? s : e;
                        FUZZ_ASSERT(memcmp(buf + e * es, orig + want * es, es) == 0,
                                    "exchange: element %zu should hold element %zu's value", e,
                                    want);
                    } else if (filled) {
                        sum[s] += (double)((int)(e % 97) - 48);
                    }
                }
    for (e = 0; accumulate && e < count; e++) {
        double got = p->dtype == WEFT_INT32     ? (double)((int32_t *)(void *)buf)[e]
                     : p->dtype == WEFT_FLOAT32 ? (double)((float *)(void *)buf)[e]
                                                : ((double *)(void *)buf)[e];
        FUZZ_ASSERT(got == sum[e], "accumulate: element %zu is %g, expected %g", e, got, sum[e]);
    }
    free(sum);
    free(orig);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader_t r = {data, size};
    weft_halo_params_t p = WEFT_HALO_PARAMS_INITIALIZER;
    int flags = (int)take(&r, 1);
    p.ndims = (int8_t)take(&r, 1);
    for (int d = 0; d < 3; d++) p.grid[d] = (int32_t)take(&r, 4);
    int per = (int)take(&r, 1) & 7;
    for (int d = 0; d < 3; d++) p.periodic[d] = (per >> d) & 1;
    p.nlead = (int8_t)take(&r, 1);
    for (int k = 0; k < WEFT_HALO_MAX_LEAD; k++) p.lead[k] = (size_t)take(&r, 8);
    for (int d = 0; d < 3; d++) p.local[d] = (size_t)take(&r, 8);
    for (int d = 0; d < 3; d++) p.width_lo[d] = (int32_t)take(&r, 4);
    for (int d = 0; d < 3; d++) p.width_hi[d] = (int32_t)take(&r, 4);
    p.dtype = (weft_datatype_t)(int8_t)take(&r, 1);
    p.corners = (flags >> 5) & 1;

    weft_comm_t comm = (flags & 1) ? cart_comm(1 + ((flags >> 1) & 3) % 3, per) : plain;
    weft_halo_plan_t plan = NULL;
    weft_status_t st = weft_halo_plan_create(comm, &p, &plan);
    if (st != WEFT_SUCCESS) {
        FUZZ_ASSERT(st == WEFT_ERR_HALO_PLAN || st == WEFT_ERR_COUNT_OVERFLOW ||
                        st == WEFT_ERR_NO_MEMORY,
                    "plan refused with %s", weft_strerror(st));
        FUZZ_ASSERT(plan == NULL, "a refused plan was returned");
        FUZZ_ASSERT(weft_comm_get_error(comm) == WEFT_SUCCESS, "a refused plan broke the comm");
        return 0;
    }
    /* Accepted: the parameters the plan relies on hold. */
    FUZZ_ASSERT(p.ndims >= 1 && p.ndims <= 3, "ndims %d accepted", p.ndims);
    FUZZ_ASSERT(p.nlead >= 0 && p.nlead <= WEFT_HALO_MAX_LEAD, "nlead %d accepted", p.nlead);
    size_t es = weft_datatype_size(p.dtype), outer = 1, ext[3] = {1, 1, 1}, count = 0;
    FUZZ_ASSERT(es > 0, "datatype %d accepted", (int)p.dtype);
    /* The expected element count, if it is at most MAX_ELEMS (else 0). */
    size_t total = 1;
    for (int k = 0; k < p.nlead; k++) {
        total = p.lead[k] <= MAX_ELEMS ? total * p.lead[k] : 0;
        if (total > MAX_ELEMS) total = 0;
    }
    outer = total;
    int cart_dims = (flags & 1) ? 1 + ((flags >> 1) & 3) % 3 : 0;
    long long procs = 1;
    for (int d = 0; d < p.ndims && !cart_dims; d++)
        procs = p.grid[d] > 0 && procs <= 1 ? procs * p.grid[d] : 2;
    FUZZ_ASSERT(procs == 1, "a grid of more than one process accepted on one rank");
    for (int d = 0; d < p.ndims; d++) {
        int periodic = cart_dims ? (per >> d) & 1 : p.periodic[d];
        FUZZ_ASSERT(p.width_lo[d] >= 0 && p.width_hi[d] >= 0, "negative width accepted");
        FUZZ_ASSERT(p.local[d] > 0, "empty block accepted");
        if (periodic)
            FUZZ_ASSERT(p.local[d] >= (size_t)p.width_lo[d] && p.local[d] >= (size_t)p.width_hi[d],
                        "dimension %d: halo wider than the block it wraps to", d);
        p.periodic[d] = periodic; /* the Cartesian comm's, for the reference */
        if (p.local[d] > MAX_ELEMS || p.width_lo[d] > MAX_ELEMS || p.width_hi[d] > MAX_ELEMS) {
            total = 0;
            continue;
        }
        ext[d] = p.local[d] + (size_t)p.width_lo[d] + (size_t)p.width_hi[d];
        total = total * ext[d] <= MAX_ELEMS ? total * ext[d] : 0;
    }
    FUZZ_ASSERT(weft_halo_buffer_count(plan, &count) == WEFT_SUCCESS, "buffer count");
    if (total > 0) {
        FUZZ_ASSERT(count == total, "buffer count %zu, expected %zu", count, total);
        if (flags & 8) check_exchange(plan, &p, outer, ext, count, es, 0);
        if ((flags & 16) && (p.dtype == WEFT_INT32 || p.dtype == WEFT_FLOAT32 ||
                             p.dtype == WEFT_FLOAT64))
            check_exchange(plan, &p, outer, ext, count, es, 1);
    }
    FUZZ_ASSERT(weft_halo_plan_destroy(plan) == WEFT_SUCCESS, "plan destroy");
    return 0;
}
