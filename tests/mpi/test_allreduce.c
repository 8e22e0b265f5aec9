/*
 * test_allreduce.c - weft_allreduce / weft_iallreduce against references,
 * under whatever WEFT_ALLREDUCE_ALGO the environment forces (meson runs it
 * with every algorithm, on 1..4 ranks), then every algorithm in turn through
 * weft_comm_set_algo.
 *
 * What is checked:
 *  - every valid (datatype, op) pair at counts {0, 1, 3, p-1, p, p+1, 17,
 *    1000}, plus 65537 elements and 3 MiB for some float32/int32 ops;
 *    in place and not (alternating over the cases, so each pair sees both);
 *    the cases of one pair are in flight together (weft_iallreduce, waitall);
 *  - reference: MPI_Allreduce of the same input (one call over all cases of
 *    a pair). Exceptions, computed locally from every rank's input (the
 *    inputs are a deterministic function of rank and case, so each rank
 *    regenerates the others'): float16/bfloat16 (MPI has no such type; the
 *    reference is computed in float64 and rounded once), and uint8 MIN/MAX
 *    (MPICH 4.0.2 compares MPI_UINT8_T as signed: measured, max(119, 179)
 *    = 119);
 *  - tolerance (per element, |got - ref| <= rtol * max(|ref|, 1)):
 *      integers and MIN/MAX: bit-exact;
 *      float32/64 SUM/PROD/AVG vs MPI: SUM inputs lie in [-1, 1), so every
 *      partial sum is bounded by sum |x_i| <= p; each side rounds p-1 times,
 *      so each is within (p-1) p eps of the exact sum and they differ by at
 *      most 2 p (p-1) eps; PROD factors lie in [0.5, 2) and each side is
 *      within a relative (p-1) eps; AVG adds one division (2 eps for both).
 *      rtol = (2 p (p-1) + 4) eps, eps = 2^-24 / 2^-53. The bound is per
 *      element, so it does not grow with the count;
 *      float16/bfloat16 vs the float64 reference: Weft rounds to 16 bits
 *      after each of the p-1 reductions (<= p u each, u = 2^-11 / 2^-8) and
 *      the reference once, AVG once more: rtol = (p (p-1) + 4) u;
 *  - all ranks hold identical bits (a hash per case, compared with rank 0's
 *    in one collective at the end);
 *  - the same call twice gives identical bits (several pairs repeated);
 *  - weft_comm_set_algo: each algorithm of the library's table for allreduce
 *    (found through weft_comm_set_algo itself) forced on the comm serves
 *    calls and weft_query_algo reports it; the mpi algorithm refuses
 *    float16/bfloat16 with WEFT_ERR_ALGORITHM.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

#define MAX_CASES 8192
#define MAX_BATCH 16

static mt_ctx_t T;
static int P;

/* Per-case output hashes, compared across ranks at the end. */
static uint64_t hashes[MAX_CASES];
static char descr[MAX_CASES][48];
static int ncases;

static uint64_t fnv(const void *buf, size_t n)
{
    const unsigned char *p = buf;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h ^ n;
}

/* Can the mpi algorithm serve (dt, op)? Mirrors its documented limits. */
static int mpi_algo_can(weft_datatype_t dt, weft_op_t op)
{
    if (dt == WEFT_FLOAT16 || dt == WEFT_BFLOAT16) return 0;
    if ((dt == WEFT_UINT8 || dt == WEFT_UINT16) && (op == WEFT_MIN || op == WEFT_MAX)) return 0;
    return 1;
}

static int needs_local_ref(weft_datatype_t dt, weft_op_t op)
{
    /* MPICH 4.0 compares MPI_UINT8_T and MPI_UINT16_T as signed in MIN/MAX */
    return mt_mpi_dtype(dt) == MPI_DATATYPE_NULL ||
           ((dt == WEFT_UINT8 || dt == WEFT_UINT16) && (op == WEFT_MIN || op == WEFT_MAX));
}

static double rtol_for(weft_datatype_t dt, weft_op_t op)
{
    if (!mt_dtype_is_float(dt) || op == WEFT_MIN || op == WEFT_MAX) return 0.0;
    if (dt == WEFT_FLOAT16 || dt == WEFT_BFLOAT16)
        return (P * (P - 1.0) + 4.0) * mt_eps(dt);
    return (2.0 * P * (P - 1.0) + 4.0) * mt_eps(dt);
}

/* Reference of one case computed from every rank's regenerated input. */
static void local_ref(void *ref, size_t n, weft_datatype_t dt, weft_op_t op, uint64_t seed)
{
    size_t es = mt_dtype_size(dt);
    double *acc = calloc(n ? n : 1, sizeof(double));
    void *x = malloc(n * es + 1);
    if (!acc || !x) {
        mt_error(&T, "out of memory for a reference of %zu elements", n);
        free(acc);
        free(x);
        return;
    }
    for (int j = 0; j < P; j++) {
        mt_fill(x, n, dt, op, j, seed);
        for (size_t i = 0; i < n; i++) {
            double v = mt_get(x, i, dt);
            if (j == 0) { acc[i] = v; continue; }
            switch (op) {
            case WEFT_PROD: acc[i] *= v; break;
            case WEFT_MIN: acc[i] = v < acc[i] ? v : acc[i]; break;
            case WEFT_MAX: acc[i] = v > acc[i] ? v : acc[i]; break;
            default: acc[i] += v; break;
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        mt_set(ref, i, dt, op == WEFT_AVG ? acc[i] / P : acc[i]);
    free(acc);
    free(x);
}

/* AVG from an MPI SUM: the same division Weft documents (integers truncate). */
static void divide_ref(void *ref, size_t n, weft_datatype_t dt)
{
    for (size_t i = 0; i < n; i++) {
        switch (dt) {
        case WEFT_INT8: ((int8_t *)ref)[i] = (int8_t)(((int8_t *)ref)[i] / P); break;
        case WEFT_UINT8: ((uint8_t *)ref)[i] = (uint8_t)(((uint8_t *)ref)[i] / (unsigned)P); break;
        case WEFT_INT16: ((int16_t *)ref)[i] = (int16_t)(((int16_t *)ref)[i] / P); break;
        case WEFT_UINT16: ((uint16_t *)ref)[i] = (uint16_t)(((uint16_t *)ref)[i] / (unsigned)P); break;
        case WEFT_INT32: ((int32_t *)ref)[i] /= P; break;
        case WEFT_UINT32: ((uint32_t *)ref)[i] /= (uint32_t)P; break;
        case WEFT_INT64: ((int64_t *)ref)[i] /= P; break;
        case WEFT_UINT64: ((uint64_t *)ref)[i] /= (uint64_t)P; break;
        case WEFT_FLOAT32: ((float *)ref)[i] /= (float)P; break;
        case WEFT_FLOAT64: ((double *)ref)[i] /= (double)P; break;
        default: break;
        }
    }
}

static void record(const void *out, size_t bytes, weft_datatype_t dt, weft_op_t op, size_t n,
                   const char *tag)
{
    if (ncases >= MAX_CASES) return;
    hashes[ncases] = fnv(out, bytes);
    snprintf(descr[ncases], sizeof(descr[0]), "%s %s/%s n=%zu", tag, weft_datatype_name(dt),
             weft_op_name(op), n);
    ncases++;
}

/*
 * Run one batch: the counts in cnt[0..nc) of (dt, op), all in flight at
 * once, seeds seed0 + k, in place when (k + flip) is odd. The outputs stay
 * in *outp (caller frees) for a repeat comparison. Returns 0 if the
 * algorithm refused the pair as expected (nothing to compare).
 */
static int run_batch(weft_datatype_t dt, weft_op_t op, const size_t *cnt, int nc, uint64_t seed0,
                     int flip, const char *tag, unsigned char **outp)
{
    size_t es = mt_dtype_size(dt), total = 0, off[MAX_BATCH + 1];
    weft_request_t req[MAX_BATCH];
    weft_status_t st[MAX_BATCH];
    weft_algo_t algo = WEFT_ALGO_AUTO;
    int refused = 0;

    for (int k = 0; k < nc; k++) {
        off[k] = total;
        total += cnt[k];
    }
    off[nc] = total;
    unsigned char *in = malloc(total * es + 1), *out = malloc(total * es + 1),
                  *ref = malloc(total * es + 1);
    if (!in || !out || !ref) {
        mt_error(&T, "out of memory (%zu elements)", total);
        free(in); free(out); free(ref);
        *outp = NULL;
        return 0;
    }
    for (int k = 0; k < nc; k++) {
        mt_fill(in + off[k] * es, cnt[k], dt, op, T.rank, seed0 + (uint64_t)k);
        memset(out + off[k] * es, 0x5a, cnt[k] * es);
        if ((k + flip) % 2) memcpy(out + off[k] * es, in + off[k] * es, cnt[k] * es);
    }
    /* Issue everything, then wait for everything. */
    for (int k = 0; k < nc; k++) {
        req[k] = WEFT_REQUEST_NULL;
        MT_STATUS(&T, weft_query_algo(T.comm, WEFT_COLL_ALLREDUCE, cnt[k], dt, &algo), WEFT_SUCCESS,
                  "weft_query_algo");
        int inplace = (k + flip) % 2;
        st[k] = weft_iallreduce(inplace ? WEFT_IN_PLACE : in + off[k] * es, out + off[k] * es,
                                cnt[k], dt, op, T.comm, &req[k]);
        if (algo == WEFT_ALGO_MPI && !mpi_algo_can(dt, op)) {
            MT_CHECK(&T, st[k] == WEFT_ERR_ALGORITHM, "%s %s/%s: mpi algorithm accepted the pair (%s)",
                     tag, weft_datatype_name(dt), weft_op_name(op), weft_status_name(st[k]));
            refused = 1;
        } else {
            MT_CHECK(&T, st[k] == WEFT_SUCCESS, "%s weft_iallreduce %s/%s n=%zu: %s", tag,
                     weft_datatype_name(dt), weft_op_name(op), cnt[k], weft_status_name(st[k]));
        }
    }
    for (int k = 0; k < nc; k++) {
        if (req[k] == WEFT_REQUEST_NULL) continue;
        weft_status_t w = weft_wait(&req[k]);
        MT_CHECK(&T, w == WEFT_SUCCESS, "%s weft_wait %s/%s n=%zu: %s", tag, weft_datatype_name(dt),
                 weft_op_name(op), cnt[k], weft_status_name(w));
        MT_CHECK(&T, req[k] == WEFT_REQUEST_NULL, "request not reset by weft_wait");
    }
    if (refused) {
        free(in); free(out); free(ref);
        *outp = NULL;
        return 0;
    }

    /* Reference. */
    if (needs_local_ref(dt, op)) {
        for (int k = 0; k < nc; k++)
            local_ref(ref + off[k] * es, cnt[k], dt, op, seed0 + (uint64_t)k);
    } else if (total > 0) {
        if (MPI_Allreduce(in, ref, (int)total, mt_mpi_dtype(dt), mt_mpi_op(op), MPI_COMM_WORLD) !=
            MPI_SUCCESS)
            mt_error(&T, "MPI_Allreduce reference failed");
        if (op == WEFT_AVG) divide_ref(ref, total, dt);
    }
    for (int k = 0; k < nc; k++) {
        char what[96];
        snprintf(what, sizeof(what), "%s %s/%s n=%zu%s", tag, weft_datatype_name(dt),
                 weft_op_name(op), cnt[k], (k + flip) % 2 ? " in-place" : "");
        mt_compare(&T, out + off[k] * es, ref + off[k] * es, cnt[k], dt, rtol_for(dt, op), what);
        record(out + off[k] * es, cnt[k] * es, dt, op, cnt[k], tag);
    }
    free(in);
    free(ref);
    *outp = out;
    return 1;
}

/* A batch whose outputs are not needed afterwards. */
static void batch(weft_datatype_t dt, weft_op_t op, const size_t *cnt, int nc, uint64_t seed0,
                  int flip, const char *tag)
{
    unsigned char *out = NULL;
    run_batch(dt, op, cnt, nc, seed0, flip, tag, &out);
    free(out);
}

/* The same batch twice: identical bits. */
static void batch_twice(weft_datatype_t dt, weft_op_t op, const size_t *cnt, int nc,
                        uint64_t seed0, const char *tag)
{
    unsigned char *a = NULL, *b = NULL;
    size_t total = 0;
    for (int k = 0; k < nc; k++) total += cnt[k];
    int ra = run_batch(dt, op, cnt, nc, seed0, 0, tag, &a);
    int rb = run_batch(dt, op, cnt, nc, seed0, 0, tag, &b);
    if (ra && rb && a && b)
        MT_CHECK(&T, memcmp(a, b, total * mt_dtype_size(dt)) == 0,
                 "%s %s/%s: two identical calls gave different bits", tag, weft_datatype_name(dt),
                 weft_op_name(op));
    free(a);
    free(b);
}

/* Every rank's case hashes equal rank 0's (one collective). */
static void check_hashes(void)
{
    int n0 = ncases;
    if (MPI_Bcast(&n0, 1, MPI_INT, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
        mt_error(&T, "MPI_Bcast failed");
        return;
    }
    if (n0 != ncases) {
        mt_error(&T, "ran %d cases, rank 0 ran %d", ncases, n0);
        return;
    }
    uint64_t *h0 = malloc((size_t)(n0 ? n0 : 1) * sizeof(uint64_t));
    if (!h0) {
        mt_error(&T, "out of memory");
        return;
    }
    memcpy(h0, hashes, (size_t)n0 * sizeof(uint64_t));
    if (MPI_Bcast(h0, n0, MPI_UINT64_T, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
        mt_error(&T, "MPI_Bcast failed");
    } else {
        int bad = 0;
        for (int i = 0; i < n0; i++)
            if (h0[i] != hashes[i] && bad++ < 5)
                mt_error(&T, "%s: bits differ from rank 0's", descr[i]);
    }
    free(h0);
}

int main(int argc, char **argv)
{
    int rc = mt_init(&T, &argc, &argv);
    if (rc != 0) return rc;
    P = T.size;
    const int hier = mt_hier_runs(&T); /* collective: every rank, once */

    weft_algo_t env_algo = WEFT_ALGO_AUTO;
    const char *env = getenv("WEFT_ALLREDUCE_ALGO");
    if (env && *env && weft_algo_from_name(env, &env_algo) != WEFT_SUCCESS)
        mt_error(&T, "WEFT_ALLREDUCE_ALGO=%s is not an algorithm name", env);
    if (env_algo != WEFT_ALGO_AUTO) {
        weft_algo_t q = WEFT_ALGO_AUTO;
        MT_STATUS(&T, weft_query_algo(T.comm, WEFT_COLL_ALLREDUCE, 1000, WEFT_FLOAT32, &q),
                  WEFT_SUCCESS, "weft_query_algo");
        if (env_algo == WEFT_ALGO_SHM && !mt_shm_runs(&T)) /* gives way to the model's choice */
            MT_CHECK(&T, q != WEFT_ALGO_SHM, "query gives shm without the shared-memory path");
        else if (env_algo == WEFT_ALGO_HIERARCHICAL && !hier)
            MT_CHECK(&T, q != env_algo, "query gives hierarchical on a comm it cannot serve");
        else
            MT_CHECK(&T, q == env_algo, "query gives %s, environment forces %s",
                     weft_algo_name(q), weft_algo_name(env_algo));
    }
    mt_info(&T, "test_allreduce: %d ranks, algorithm %s", P, env && *env ? env : "auto");
    /* The node's shared-memory path is open exactly where it serves: a
     * one-node comm, or (for the hierarchical allreduce's phases inside the
     * nodes) every node of a comm across nodes; WEFT_SHM=0 keeps the
     * transport everywhere. */
    const int want_path = mt_node_path_expected(&T), mapped = mt_node_path_mapped(&T);
    if (mapped >= 0)
        MT_CHECK(&T, mapped == want_path, "node segment %s, expected %s", mapped ? "mapped" : "absent",
                 want_path ? "mapped" : "absent");

    /* 1. Every valid pair at the small counts. */
    const size_t small[] = {0, 1, 3, (size_t)(P - 1), (size_t)P, (size_t)(P + 1), 17, 1000};
    const int nsmall = (int)(sizeof(small) / sizeof(small[0]));
    uint64_t seed = 1;
    int pairno = 0;
    for (int d = 0; d < WEFT_DATATYPE_COUNT; d++)
        for (int o = 0; o < WEFT_OP_COUNT; o++) {
            if (!mt_op_valid((weft_datatype_t)d, (weft_op_t)o)) continue;
            batch((weft_datatype_t)d, (weft_op_t)o, small, nsmall, seed, pairno++ % 2, "env");
            seed += (uint64_t)nsmall;
        }
    mt_info(&T, "  small cases done (%.2f s)", mt_elapsed(&T));

    /* 2. Large counts, float32 and int32 only. */
    const size_t big[] = {65537, (3u << 20) / 4};
    const struct { weft_datatype_t dt; weft_op_t op; } bigpairs[] = {
        {WEFT_FLOAT32, WEFT_SUM}, {WEFT_FLOAT32, WEFT_MAX}, {WEFT_FLOAT32, WEFT_AVG},
        {WEFT_INT32, WEFT_SUM}, {WEFT_INT32, WEFT_MIN}, {WEFT_INT32, WEFT_BXOR},
    };
    for (size_t i = 0; i < sizeof(bigpairs) / sizeof(bigpairs[0]); i++) {
        batch(bigpairs[i].dt, bigpairs[i].op, big, 2, seed, (int)i % 2, "env-big");
        seed += 2;
    }
    mt_info(&T, "  large cases done (%.2f s)", mt_elapsed(&T));

    /* 3. Determinism: the same calls twice. */
    const size_t rep[] = {1, (size_t)P + 1, 1000, 65537};
    batch_twice(WEFT_FLOAT32, WEFT_SUM, rep, 4, 900001, "repeat");
    batch_twice(WEFT_FLOAT64, WEFT_PROD, rep, 3, 900011, "repeat");
    batch_twice(WEFT_FLOAT16, WEFT_SUM, rep, 3, 900021, "repeat");
    batch_twice(WEFT_BFLOAT16, WEFT_AVG, rep, 3, 900031, "repeat");

    /* 4. The shared-memory path's large allreduce, when it runs: with
     * WEFT_SHM_COPY=auto the calls of each size class alternate the two
     * modes in calls 3 - 8 of every 512 and run the faster after, and every
     * rank must choose alike (lib/coll/shm_common.c): 80 batches of 8 in
     * flight, 7 of one class (560 calls: the trials, the choice, the next
     * period's trials and its choice) and 1 of another. */
    weft_algo_t qs = WEFT_ALGO_AUTO;
    MT_STATUS(&T, weft_query_algo(T.comm, WEFT_COLL_ALLREDUCE, 20000, WEFT_FLOAT32, &qs),
              WEFT_SUCCESS, "weft_query_algo");
    if (qs == WEFT_ALGO_SHM) {
        const size_t modes[] = {20000, 20001, 9000, 20002, 20003, 20005, 20006, 20004};
        for (int b = 0; b < 80; b++)
            batch(WEFT_FLOAT32, WEFT_SUM, modes, 8, 700001 + 8 * (uint64_t)b, b % 2, "modes");
        mt_info(&T, "  shm mode trials done (%.2f s)", mt_elapsed(&T));
    }

    /* 5. Each algorithm forced on the communicator: every one the library's
     * table has for allreduce (weft_comm_set_algo accepts exactly those). */
    const size_t per[] = {1, (size_t)P + 1, 1000, 65537};
    int nforced = 0;
    weft_algo_t before = WEFT_ALGO_AUTO; /* the choice without forcing, asked again at the end */
    MT_STATUS(&T, weft_query_algo(T.comm, WEFT_COLL_ALLREDUCE, 1000, WEFT_FLOAT32, &before),
              WEFT_SUCCESS, "weft_query_algo");
    for (int a = WEFT_ALGO_AUTO + 1; a < WEFT_ALGO_COUNT; a++) {
        char tag[32]; /* "set_algo(" + a name of at most 21 characters + ")" */
        weft_algo_t q = WEFT_ALGO_AUTO;
        snprintf(tag, sizeof(tag), "set_algo(%s)", weft_algo_name((weft_algo_t)a));
        weft_status_t sst = weft_comm_set_algo(T.comm, WEFT_COLL_ALLREDUCE, (weft_algo_t)a);
        if (sst == WEFT_ERR_ALGORITHM) continue; /* serves other collectives */
        if (!MT_STATUS(&T, sst, WEFT_SUCCESS, "weft_comm_set_algo")) continue;
        MT_STATUS(&T, weft_query_algo(T.comm, WEFT_COLL_ALLREDUCE, 1000, WEFT_FLOAT32, &q),
                  WEFT_SUCCESS, "weft_query_algo");
        if (a == WEFT_ALGO_NCCL) { /* device buffers only: host buffers run another */
            MT_CHECK(&T, q != WEFT_ALGO_NCCL, "%s: query gives nccl for host buffers", tag);
            continue;
        }
        if (a == WEFT_ALGO_SHM && !mt_shm_runs(&T)) { /* gives way to the model's choice */
            MT_CHECK(&T, q != WEFT_ALGO_SHM && q != WEFT_ALGO_AUTO, "%s: query gives %s without "
                     "the shared-memory path", tag, weft_algo_name(q));
            continue;
        }
        if (a == WEFT_ALGO_HIERARCHICAL && !hier) {
            /* one node, or nodes of different sizes: the cost model's choice
             * runs instead (and is tested as such above) */
            MT_CHECK(&T, q != WEFT_ALGO_HIERARCHICAL && q != WEFT_ALGO_AUTO,
                     "%s: query gives %s on a comm it cannot serve", tag, weft_algo_name(q));
            continue;
        }
        MT_CHECK(&T, q == (weft_algo_t)a, "%s: query gives %s", tag, weft_algo_name(q));
        nforced++;
        batch(WEFT_FLOAT32, WEFT_SUM, per, 4, 700000 + 10 * a, a % 2, tag);
        batch(WEFT_INT64, WEFT_BXOR, per, 3, 700100 + 10 * a, a % 2 + 1, tag);
        batch(WEFT_UINT8, WEFT_MAX, per, 3, 700200 + 10 * a, a % 2, tag);
        batch(WEFT_FLOAT16, WEFT_SUM, per, 3, 700300 + 10 * a, a % 2, tag);
        batch(WEFT_INT32, WEFT_AVG, per, 3, 700400 + 10 * a, a % 2 + 1, tag);
    }
    MT_CHECK(&T, nforced >= 5, "only %d allreduce algorithms accepted", nforced);
    MT_STATUS(&T, weft_comm_set_algo(T.comm, WEFT_COLL_ALLREDUCE, WEFT_ALGO_AUTO), WEFT_SUCCESS,
              "weft_comm_set_algo(auto)");
    /* The same call as before the forcing: the same choice (a communicator
     * keeps its last choice per collective, keyed on what was forced too). */
    weft_algo_t after = WEFT_ALGO_AUTO;
    MT_STATUS(&T, weft_query_algo(T.comm, WEFT_COLL_ALLREDUCE, 1000, WEFT_FLOAT32, &after),
              WEFT_SUCCESS, "weft_query_algo");
    MT_CHECK(&T, after == before, "after set_algo(auto) the query gives %s, before the forcing %s",
             weft_algo_name(after), weft_algo_name(before));
    mt_info(&T, "  forced algorithms done (%.2f s)", mt_elapsed(&T));

    check_hashes();
    return mt_finish(&T);
}
