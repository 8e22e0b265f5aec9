/*
 * test_mpi_calls.c - a plain MPI program (no Weft header) that checks every
 * collective libweft-mpi.so intercepts against MPI's own result, bit for
 * bit: each call is made through its MPI_ name (Weft's, under the preload)
 * and, on copies of the same inputs, through its PMPI_ name (always the MPI
 * library's). Blocking and nonblocking forms (Wait, Test, Waitall, Testany;
 * arrays of collectives mixed with point-to-point requests and
 * MPI_REQUEST_NULL entries completed by Waitany, Waitsome, Testany,
 * Testsome and Testall, with the receive's status checked),
 * odd counts, MPI_IN_PLACE, every root, the vector forms (allgatherv,
 * alltoallv, gatherv, scatterv: uneven and empty blocks in reverse order
 * with gaps that must stay as they were; reduce_scatter: uneven and empty
 * blocks end to end), calls that must fall through (user
 * operations, derived and non-contiguous datatypes, MPI_LAND,
 * MPI_MAXLOC), communicators split, duplicated and freed in a loop,
 * MPI_COMM_SELF, the MPI-4 large-count (_c) forms, and a barrier that must
 * hold every rank. Floating-point
 * inputs served by Weft are small integers, so every summation order gives
 * the same bits; fall-through cases use arbitrary values.
 *
 * Run under mpiexec -n 1..4, with and without LD_PRELOAD=libweft-mpi.so.
 * Exit 0 when every check passed on every rank, 1 otherwise, 2 on bad usage.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#define VERSION "0.1.0"

static int rank, size, errors;
static const char *where = "";

#define MPI_OK(call)                                                                   \
    do {                                                                               \
        int rc_ = (call);                                                              \
        if (rc_ != MPI_SUCCESS) {                                                      \
            fprintf(stderr, "rank %d: %s failed (%d) at line %d [%s]\n", rank, #call,    \
                    rc_, __LINE__, where);                                            \
            errors++;                                                                  \
        }                                                                              \
    } while (0)

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL) {
        fprintf(stderr, "rank %d: out of memory (%zu bytes)\n", rank, n);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

static void same(const char *what, const void *got, const void *ref, size_t bytes)
{
    if (bytes == 0 || memcmp(got, ref, bytes) == 0) return;
    size_t i = 0;
    while (((const unsigned char *)got)[i] == ((const unsigned char *)ref)[i]) i++;
    if (errors < 20)
        fprintf(stderr, "rank %d: %s [%s]: differs from MPI at byte %zu of %zu\n", rank, what,
                where, i, bytes);
    errors++;
}

/* Deterministic bytes per (rank, seed): integers, or small integers as floats. */
static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

enum kind { K_INT32, K_INT64, K_UINT32, K_FLOAT, K_DOUBLE, K_BYTES, K_SHORT, K_ANYDOUBLE };

static void fill(void *buf, size_t n, enum kind k, int seed)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = mix((uint64_t)seed * 1000003u + (uint64_t)rank * 7919u + i + 1);
        switch (k) {
        case K_INT32: ((int32_t *)buf)[i] = (int32_t)(r % 2001) - 1000; break;
        case K_INT64: ((int64_t *)buf)[i] = (int64_t)(r % 7) - 3; break;
        case K_UINT32: ((uint32_t *)buf)[i] = (uint32_t)r; break;
        case K_FLOAT: ((float *)buf)[i] = (float)((int)(r % 201) - 100); break;
        case K_DOUBLE: ((double *)buf)[i] = (double)((int64_t)(r % 20001) - 10000) * 0.5; break;
        case K_BYTES: ((unsigned char *)buf)[i] = (unsigned char)r; break;
        case K_SHORT: ((short *)buf)[i] = (short)(r % 100); break;
        case K_ANYDOUBLE: ((double *)buf)[i] = (double)(r >> 11) * 0x1.0p-53 * 3.7 - 1.1; break;
        }
    }
}

static size_t kind_size(enum kind k)
{
    switch (k) {
    case K_INT64: case K_DOUBLE: case K_ANYDOUBLE: return 8;
    case K_BYTES: return 1;
    case K_SHORT: return 2;
    default: return 4;
    }
}

/* A user-defined operation MPI must apply (not commutative in general). */
static void user_op(void *in, void *inout, int *len, MPI_Datatype *t)
{
    (void)t;
    double *a = in, *b = inout;
    for (int i = 0; i < *len; i++) b[i] = a[i] * 0.75 + b[i] * 1.25 + 0.125;
}

/* The status of a completed collective: not cancelled, and a count that
 * MPI_Get_count reads (MPI leaves the rest of it undefined: MPICH's own
 * collectives count bytes, Weft's under the preload none). */
static void check_coll_status(const MPI_Status *st)
{
    int n = -1, cancelled = -1;
    MPI_OK(MPI_Get_count(st, MPI_BYTE, &n));
    MPI_OK(MPI_Test_cancelled(st, &cancelled));
    if (n < 0 || cancelled != 0) {
        fprintf(stderr, "rank %d: collective's status count %d cancelled %d [%s]\n", rank, n,
                cancelled, where);
        errors++;
    }
}

/* How the nonblocking forms are completed, in turn. */
enum completion { BY_WAIT, BY_TEST, BY_WAITALL, BY_TESTANY, COMPLETIONS };

static void complete(MPI_Request *req, int how)
{
    int done = 0, idx = -1;
    switch (how) {
    case BY_WAIT: {
        MPI_Status st;
        MPI_OK(MPI_Wait(req, &st));
        check_coll_status(&st);
        break;
    }
    case BY_TEST:
        while (!done) MPI_OK(MPI_Test(req, &done, MPI_STATUS_IGNORE));
        break;
    case BY_WAITALL: {
        MPI_Status st[1];
        MPI_OK(MPI_Waitall(1, req, st));
        check_coll_status(&st[0]);
        break;
    }
    case BY_TESTANY:
        while (!done) MPI_OK(MPI_Testany(1, req, &idx, &done, MPI_STATUS_IGNORE));
        if (idx != 0) {
            fprintf(stderr, "rank %d: MPI_Testany index %d [%s]\n", rank, idx, where);
            errors++;
        }
        break;
    }
    if (*req != MPI_REQUEST_NULL) {
        fprintf(stderr, "rank %d: request not released [%s]\n", rank, where);
        errors++;
    }
}

/* The MPI-4 large-count forms (MPI_Count counts, as mpi4py 4 calls them). */
static void test_large_count(MPI_Comm comm)
{
    int csize, crank;
    MPI_Comm_size(comm, &csize);
    MPI_Comm_rank(comm, &crank);
    const MPI_Count n = 1003;
    size_t all = (size_t)n * (size_t)csize;
    int *in = xmalloc(4 * all), *got = xmalloc(4 * all), *ref = xmalloc(4 * all);
    fill(in, all, K_INT32, 77);
    MPI_Request q;
    where = "large-count forms";
    MPI_OK(PMPI_Allreduce_c(in, ref, n, MPI_INT, MPI_SUM, comm));
    MPI_OK(MPI_Allreduce_c(in, got, n, MPI_INT, MPI_SUM, comm));
    same("MPI_Allreduce_c", got, ref, 4 * (size_t)n);
    memset(got, 0, 4 * all);
    MPI_OK(MPI_Iallreduce_c(in, got, n, MPI_INT, MPI_SUM, comm, &q));
    complete(&q, BY_WAIT);
    same("MPI_Iallreduce_c", got, ref, 4 * (size_t)n);
    MPI_OK(PMPI_Reduce_scatter_block_c(in, ref, n / csize, MPI_INT, MPI_MAX, comm));
    MPI_OK(MPI_Reduce_scatter_block_c(in, got, n / csize, MPI_INT, MPI_MAX, comm));
    same("MPI_Reduce_scatter_block_c", got, ref, 4 * (size_t)(n / csize));
    MPI_OK(PMPI_Reduce_c(in, ref, n, MPI_INT, MPI_MIN, 0, comm));
    MPI_OK(MPI_Ireduce_c(in, got, n, MPI_INT, MPI_MIN, 0, comm, &q));
    complete(&q, BY_TEST);
    if (crank == 0) same("MPI_Ireduce_c", got, ref, 4 * (size_t)n);
    memcpy(ref, in, 4 * all);
    memcpy(got, in, 4 * all);
    MPI_OK(PMPI_Bcast_c(ref, n, MPI_INT, csize - 1, comm));
    MPI_OK(MPI_Ibcast_c(got, n, MPI_INT, csize - 1, comm, &q));
    complete(&q, BY_WAITALL);
    same("MPI_Ibcast_c", got, ref, 4 * (size_t)n);
    MPI_OK(PMPI_Alltoall_c(in, n / csize, MPI_INT, ref, n / csize, MPI_INT, comm));
    MPI_OK(MPI_Alltoall_c(in, n / csize, MPI_INT, got, n / csize, MPI_INT, comm));
    same("MPI_Alltoall_c", got, ref, 4 * (size_t)(n / csize) * (size_t)csize);
    MPI_OK(PMPI_Allgather_c(in, n, MPI_INT, ref, n, MPI_INT, comm));
    MPI_OK(MPI_Iallgather_c(in, n, MPI_INT, got, n, MPI_INT, comm, &q));
    complete(&q, BY_TESTANY);
    same("MPI_Iallgather_c", got, ref, 4 * all);
    MPI_OK(PMPI_Gather_c(in, n, MPI_INT, ref, n, MPI_INT, 0, comm));
    MPI_OK(MPI_Gather_c(in, n, MPI_INT, got, n, MPI_INT, 0, comm));
    if (crank == 0) same("MPI_Gather_c", got, ref, 4 * all);
    MPI_OK(PMPI_Scatter_c(in, n, MPI_INT, ref, n, MPI_INT, 0, comm));
    MPI_OK(MPI_Iscatter_c(in, n, MPI_INT, got, n, MPI_INT, 0, comm, &q));
    complete(&q, BY_WAIT);
    same("MPI_Iscatter_c", got, ref, 4 * (size_t)n);
    free(in);
    free(got);
    free(ref);
}

/* The roots tried: the first and the last rank. */
static int next_root(int root, int csize)
{
    return root == 0 && csize > 1 ? csize - 1 : csize;
}

/* ---- reductions ----------------------------------------------------------------- */
typedef struct { MPI_Datatype t; enum kind k; size_t es; MPI_Op op; const char *name; } red_t;

static void test_reductions(MPI_Comm comm, int count, int seed)
{
    int csize, crank;
    MPI_Comm_size(comm, &csize);
    MPI_Comm_rank(comm, &crank);
    MPI_Op uop;
    MPI_OK(MPI_Op_create(user_op, 0, &uop));
    MPI_Datatype contig2d;
    MPI_OK(MPI_Type_contiguous(2, MPI_DOUBLE, &contig2d));
    MPI_OK(MPI_Type_commit(&contig2d));
    const red_t reds[] = {
        {MPI_INT, K_INT32, 4, MPI_SUM, "int sum"},
        {MPI_DOUBLE, K_DOUBLE, 8, MPI_SUM, "double sum"},
        {MPI_FLOAT, K_FLOAT, 4, MPI_MAX, "float max"},
        {MPI_FLOAT, K_FLOAT, 4, MPI_SUM, "float sum"},
        {MPI_LONG, K_INT64, 8, MPI_PROD, "long prod"},
        {MPI_UNSIGNED, K_UINT32, 4, MPI_BXOR, "unsigned bxor"},
        {MPI_INT, K_INT32, 4, MPI_MIN, "int min"},
        {MPI_SHORT, K_SHORT, 2, MPI_SUM, "short sum"},
        {MPI_SHORT, K_SHORT, 2, MPI_MIN, "short min"},
        /* fall through */
        {MPI_DOUBLE, K_ANYDOUBLE, 8, uop, "user op"},
        {MPI_INT, K_INT32, 4, MPI_LAND, "int land"},
        {MPI_2INT, K_INT32, 8, MPI_MAXLOC, "2int maxloc"},
        {contig2d, K_ANYDOUBLE, 16, uop, "contiguous derived, user op"},
    };
    for (size_t r = 0; r < sizeof reds / sizeof reds[0]; r++) {
        const red_t *d = &reds[r];
        size_t n = (size_t)count * d->es, nall = n * (size_t)csize;
        char *in = xmalloc(nall), *got = xmalloc(nall), *ref = xmalloc(nall);
        fill(in, nall / kind_size(d->k), d->k, seed + (int)r);
        char label[160];
        for (int nb = 0; nb < 2; nb++) {
            int how = (seed + (int)r + nb) % COMPLETIONS;
            MPI_Request q;
            /* allreduce, then in place */
            snprintf(label, sizeof label, "%sallreduce %s count %d", nb ? "i" : "", d->name, count);
            where = label;
            MPI_OK(PMPI_Allreduce(in, ref, count, d->t, d->op, comm));
            memset(got, 0x5a, n);
            if (nb) { MPI_OK(MPI_Iallreduce(in, got, count, d->t, d->op, comm, &q)); complete(&q, how); }
            else MPI_OK(MPI_Allreduce(in, got, count, d->t, d->op, comm));
            same("allreduce", got, ref, n);
            memcpy(got, in, n);
            if (nb) { MPI_OK(MPI_Iallreduce(MPI_IN_PLACE, got, count, d->t, d->op, comm, &q)); complete(&q, how); }
            else MPI_OK(MPI_Allreduce(MPI_IN_PLACE, got, count, d->t, d->op, comm));
            same("allreduce in place", got, ref, n);
            /* reduce_scatter_block over csize blocks, then in place */
            snprintf(label, sizeof label, "%sreduce_scatter_block %s count %d", nb ? "i" : "", d->name, count);
            MPI_OK(PMPI_Reduce_scatter_block(in, ref, count, d->t, d->op, comm));
            memset(got, 0x5a, n);
            if (nb) { MPI_OK(MPI_Ireduce_scatter_block(in, got, count, d->t, d->op, comm, &q)); complete(&q, how); }
            else MPI_OK(MPI_Reduce_scatter_block(in, got, count, d->t, d->op, comm));
            same("reduce_scatter_block", got, ref, n);
            memcpy(got, in, nall);
            if (nb) { MPI_OK(MPI_Ireduce_scatter_block(MPI_IN_PLACE, got, count, d->t, d->op, comm, &q)); complete(&q, how); }
            else MPI_OK(MPI_Reduce_scatter_block(MPI_IN_PLACE, got, count, d->t, d->op, comm));
            same("reduce_scatter_block in place", got, ref, n);
            /* reduce to every root, then in place at the root */
            for (int root = 0; root < csize; root = next_root(root, csize)) {
                snprintf(label, sizeof label, "%sreduce %s count %d root %d", nb ? "i" : "", d->name, count, root);
                memset(ref, 0x5a, n);
                MPI_OK(PMPI_Reduce(in, ref, count, d->t, d->op, root, comm));
                memset(got, 0x5a, n);
                if (nb) { MPI_OK(MPI_Ireduce(in, got, count, d->t, d->op, root, comm, &q)); complete(&q, how); }
                else MPI_OK(MPI_Reduce(in, got, count, d->t, d->op, root, comm));
                if (crank == root) same("reduce", got, ref, n);
                /* MPICH 4.0.2 itself crashes in an in-place reduce to a root
                 * other than 0 from a few hundred elements: root 0 only */
                if (root != 0) continue;
                memcpy(got, in, n);
                const void *s = crank == root ? MPI_IN_PLACE : in;
                if (nb) { MPI_OK(MPI_Ireduce(s, got, count, d->t, d->op, root, comm, &q)); complete(&q, how); }
                else MPI_OK(MPI_Reduce(s, got, count, d->t, d->op, root, comm));
                if (crank == root) same("reduce in place", got, ref, n);
            }
        }
        free(in);
        free(got);
        free(ref);
    }
    MPI_OK(MPI_Type_free(&contig2d));
    MPI_OK(MPI_Op_free(&uop));
}

/* ---- data movement ---------------------------------------------------------------- */
static void test_movement(MPI_Comm comm, int count, int seed)
{
    int csize, crank;
    MPI_Comm_size(comm, &csize);
    MPI_Comm_rank(comm, &crank);
    /* every second double of a pair: non-contiguous, must fall through */
    MPI_Datatype strided, pair3;
    MPI_OK(MPI_Type_vector(count > 0 ? count : 1, 1, 2, MPI_DOUBLE, &strided));
    MPI_OK(MPI_Type_commit(&strided));
    MPI_OK(MPI_Type_contiguous(3, MPI_INT, &pair3)); /* contiguous derived: served */
    MPI_OK(MPI_Type_commit(&pair3));
    typedef struct { MPI_Datatype t; int cnt; size_t span; const char *name; } mv_t;
    /* span: bytes of one block in memory (what is compared) */
    const mv_t mvs[] = {
        {MPI_BYTE, count, (size_t)count, "byte"},
        /* named types the interposer sizes from its own table (OSU moves MPI_CHAR) */
        {MPI_CHAR, count, (size_t)count, "char"},
        {MPI_C_DOUBLE_COMPLEX, count, 16u * (size_t)count, "double complex"},
        {MPI_2INT, count, 8u * (size_t)count, "2int"},
        {MPI_INT, count, 4u * (size_t)count, "int"},
        {MPI_DOUBLE, count, 8u * (size_t)count, "double"},
        {pair3, count, 12u * (size_t)count, "contiguous derived"},
        {strided, count > 0 ? 1 : 0, count > 0 ? 16u * (size_t)count - 8u : 0, "vector"},
    };
    for (size_t m = 0; m < sizeof mvs / sizeof mvs[0]; m++) {
        const mv_t *d = &mvs[m];
        size_t blk = d->span, all = blk * (size_t)csize;
        char *in = xmalloc(all), *got = xmalloc(all), *ref = xmalloc(all);
        fill(in, all, K_BYTES, seed + 100 + (int)m);
        char label[160];
        for (int nb = 0; nb < 2; nb++) {
            int how = (seed + (int)m + nb) % COMPLETIONS;
            MPI_Request q;
            /* allgather; in place */
            snprintf(label, sizeof label, "%sallgather %s count %d", nb ? "i" : "", d->name, count);
            where = label;
            memcpy(ref, in, all);
            MPI_OK(PMPI_Allgather(in, d->cnt, d->t, ref, d->cnt, d->t, comm));
            memcpy(got, in, all);
            if (nb) { MPI_OK(MPI_Iallgather(in, d->cnt, d->t, got, d->cnt, d->t, comm, &q)); complete(&q, how); }
            else MPI_OK(MPI_Allgather(in, d->cnt, d->t, got, d->cnt, d->t, comm));
            same("allgather", got, ref, all);
            memcpy(got, in, all);
            memcpy(ref, in, all);
            MPI_OK(PMPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ref, d->cnt, d->t, comm));
            if (nb) { MPI_OK(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, got, d->cnt, d->t, comm, &q)); complete(&q, how); }
            else MPI_OK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, got, d->cnt, d->t, comm));
            same("allgather in place", got, ref, all);
            /* alltoall; in place */
            snprintf(label, sizeof label, "%salltoall %s count %d", nb ? "i" : "", d->name, count);
            memcpy(ref, in, all);
            MPI_OK(PMPI_Alltoall(in, d->cnt, d->t, ref, d->cnt, d->t, comm));
            memcpy(got, in, all);
            if (nb) { MPI_OK(MPI_Ialltoall(in, d->cnt, d->t, got, d->cnt, d->t, comm, &q)); complete(&q, how); }
            else MPI_OK(MPI_Alltoall(in, d->cnt, d->t, got, d->cnt, d->t, comm));
            same("alltoall", got, ref, all);
            if (d->t != strided) { /* MPICH: in-place alltoall needs a contiguous-enough type */
                memcpy(got, in, all);
                memcpy(ref, in, all);
                MPI_OK(PMPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ref, d->cnt, d->t, comm));
                if (nb) { MPI_OK(MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, got, d->cnt, d->t, comm, &q)); complete(&q, how); }
                else MPI_OK(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, got, d->cnt, d->t, comm));
                same("alltoall in place", got, ref, all);
            }
            for (int root = 0; root < csize; root = next_root(root, csize)) {
                /* bcast */
                snprintf(label, sizeof label, "%sbcast %s count %d root %d", nb ? "i" : "", d->name, count, root);
                memcpy(ref, in, blk);
                MPI_OK(PMPI_Bcast(ref, d->cnt, d->t, root, comm));
                memcpy(got, in, blk);
                if (nb) { MPI_OK(MPI_Ibcast(got, d->cnt, d->t, root, comm, &q)); complete(&q, how); }
                else MPI_OK(MPI_Bcast(got, d->cnt, d->t, root, comm));
                same("bcast", got, ref, blk);
                /* gather; in place at the root */
                snprintf(label, sizeof label, "%sgather %s count %d root %d", nb ? "i" : "", d->name, count, root);
                memcpy(ref, in, all);
                MPI_OK(PMPI_Gather(in, d->cnt, d->t, ref, d->cnt, d->t, root, comm));
                memcpy(got, in, all);
                if (nb) { MPI_OK(MPI_Igather(in, d->cnt, d->t, got, d->cnt, d->t, root, comm, &q)); complete(&q, how); }
                else MPI_OK(MPI_Gather(in, d->cnt, d->t, got, d->cnt, d->t, root, comm));
                same("gather", got, ref, all);
                memcpy(ref, in, all);
                memcpy(got, in, all);
                const void *s = crank == root ? MPI_IN_PLACE : in + (size_t)crank * blk;
                MPI_OK(PMPI_Gather(s, d->cnt, d->t, ref, d->cnt, d->t, root, comm));
                if (nb) { MPI_OK(MPI_Igather(s, d->cnt, d->t, got, d->cnt, d->t, root, comm, &q)); complete(&q, how); }
                else MPI_OK(MPI_Gather(s, d->cnt, d->t, got, d->cnt, d->t, root, comm));
                same("gather in place", got, ref, all);
                /* scatter; in place at the root */
                snprintf(label, sizeof label, "%sscatter %s count %d root %d", nb ? "i" : "", d->name, count, root);
                memcpy(ref, in, all);
                MPI_OK(PMPI_Scatter(in, d->cnt, d->t, ref, d->cnt, d->t, root, comm));
                memcpy(got, in, all);
                if (nb) { MPI_OK(MPI_Iscatter(in, d->cnt, d->t, got, d->cnt, d->t, root, comm, &q)); complete(&q, how); }
                else MPI_OK(MPI_Scatter(in, d->cnt, d->t, got, d->cnt, d->t, root, comm));
                same("scatter", got, ref, blk);
                memcpy(ref, in, all);
                memcpy(got, in, all);
                void *rb = crank == root ? MPI_IN_PLACE : NULL;
                MPI_OK(PMPI_Scatter(in, d->cnt, d->t, rb ? rb : ref, d->cnt, d->t, root, comm));
                if (nb) { MPI_OK(MPI_Iscatter(in, d->cnt, d->t, rb ? rb : got, d->cnt, d->t, root, comm, &q)); complete(&q, how); }
                else MPI_OK(MPI_Scatter(in, d->cnt, d->t, rb ? rb : got, d->cnt, d->t, root, comm));
                same("scatter in place", got, ref, crank == root ? all : blk);
            }
        }
        free(in);
        free(got);
        free(ref);
    }
    MPI_OK(MPI_Type_free(&strided));
    MPI_OK(MPI_Type_free(&pair3));
}

/* ---- vector forms: allgatherv, alltoallv ------------------------------------------------ */
/* Block lengths in elements, uneven and some zero (base < 0: every block
 * empty): allgatherv's block of rank r; alltoallv's block from rank r to
 * rank s (sym: the same both ways, as an in-place alltoallv needs). */
static int vcount_ag(int base, int r)
{
    return base < 0 || r % 3 == 1 ? 0 : base + 2 * r + 1;
}

static int vcount_a2a(int base, int r, int s, int sym)
{
    if (base < 0) return 0;
    if (sym) return (r + s) % 3 == 1 ? 0 : base + r + s + 1;
    return (r + 2 * s) % 3 == 2 ? 0 : base + 3 * r + s;
}

/* Displacements of the blocks cnt[0..p-1] laid out in reverse rank order,
 * with gap + r elements before block r: the span in elements (a gap after
 * the last block too). The gaps must come back as they were. */
static int vlayout(int p, const int *cnt, int gap, int *displs)
{
    int at = 0;
    for (int r = p - 1; r >= 0; r--) {
        at += gap + r;
        displs[r] = at;
        at += cnt[r];
    }
    return at + gap;
}

static int imax(int a, int b) { return a > b ? a : b; }

/* Every vector form, blocking and nonblocking, in place, with uneven and
 * empty blocks in reverse order with gaps, on built-in and derived types
 * (the non-contiguous and the resized ones must fall through), and with a
 * send type other than the receive type (same bytes): against PMPI_, the
 * whole buffers, gaps included. */
static void test_vector(MPI_Comm comm, int base, int seed)
{
    int csize, crank;
    MPI_Comm_size(comm, &csize);
    MPI_Comm_rank(comm, &crank);
    MPI_Datatype vec, resized, trio;
    MPI_OK(MPI_Type_vector(2, 1, 2, MPI_INT, &vec)); /* size 8, extent 12: falls through */
    MPI_OK(MPI_Type_commit(&vec));
    MPI_OK(MPI_Type_create_resized(MPI_INT, 0, 8, &resized)); /* size 4, extent 8: falls through */
    MPI_OK(MPI_Type_commit(&resized));
    MPI_OK(MPI_Type_contiguous(3, MPI_INT, &trio)); /* contiguous derived: served */
    MPI_OK(MPI_Type_commit(&trio));
    const struct { MPI_Datatype t; const char *name; } vts[] = {
        {MPI_INT, "int"}, {MPI_DOUBLE, "double"}, {MPI_CHAR, "char"},
        {trio, "contiguous derived"}, {vec, "vector"}, {resized, "resized"},
    };
    const size_t p = (size_t)csize;
    int *agc = xmalloc(4 * p), *agd = xmalloc(4 * p), *sc = xmalloc(4 * p), *sd = xmalloc(4 * p);
    int *rc = xmalloc(4 * p), *rd = xmalloc(4 * p), *ic = xmalloc(4 * p), *id = xmalloc(4 * p);
    int *sc3 = xmalloc(4 * p), *sd3 = xmalloc(4 * p), *agc3 = xmalloc(4 * p), *agd3 = xmalloc(4 * p);
    int *agdn = xmalloc(4 * p);
    for (int r = 0; r < csize; r++) {
        agc[r] = vcount_ag(base, r);
        sc[r] = vcount_a2a(base, crank, r, 0);
        rc[r] = vcount_a2a(base, r, crank, 0);
        ic[r] = vcount_a2a(base, crank, r, 1);
    }
    const int agspan = vlayout(csize, agc, 2, agd), sspan = vlayout(csize, sc, 1, sd),
              rspan = vlayout(csize, rc, 3, rd), ispan = vlayout(csize, ic, 2, id);
    /* MPICH 4.0.2's allgatherv on a one-rank communicator puts the block at
     * the start of recvbuf whatever displs[0] says (in place it is right):
     * there, the calls that are not in place use displacement 0 */
    for (int r = 0; r < csize; r++) agdn[r] = csize == 1 ? 0 : agd[r];
    for (int r = 0; r < csize; r++) { /* the same blocks counted in ints (trio = 3 ints) */
        sc3[r] = 3 * sc[r];
        sd3[r] = 3 * sd[r];
        agc3[r] = 3 * agc[r];
        agd3[r] = 3 * agdn[r];
    }
    char label[160];
    for (size_t m = 0; m < sizeof vts / sizeof vts[0]; m++) {
        MPI_Datatype t = vts[m].t;
        MPI_Aint lb = 0, ext = 0;
        MPI_OK(MPI_Type_get_extent(t, &lb, &ext));
        const size_t inb = (size_t)imax(agc[crank], sspan) * (size_t)ext;
        const size_t outb = (size_t)imax(imax(agspan, rspan), ispan) * (size_t)ext;
        char *in = xmalloc(inb), *init = xmalloc(outb), *got = xmalloc(outb), *ref = xmalloc(outb);
        fill(in, inb, K_BYTES, seed + 200 + (int)m);
        fill(init, outb, K_BYTES, seed + 300 + (int)m);
        for (int nb = 0; nb < 2; nb++) {
            int how = (seed + (int)m + nb) % COMPLETIONS;
            MPI_Request q;
            snprintf(label, sizeof label, "%sallgatherv %s base %d", nb ? "i" : "", vts[m].name, base);
            where = label;
            memcpy(ref, init, outb);
            MPI_OK(PMPI_Allgatherv(in, agc[crank], t, ref, agc, agdn, t, comm));
            memcpy(got, init, outb);
            if (nb) { MPI_OK(MPI_Iallgatherv(in, agc[crank], t, got, agc, agdn, t, comm, &q)); complete(&q, how); }
            else MPI_OK(MPI_Allgatherv(in, agc[crank], t, got, agc, agdn, t, comm));
            same("allgatherv", got, ref, outb);
            /* in place: this rank's block is already at agd[crank] (init's bytes) */
            memcpy(ref, init, outb);
            MPI_OK(PMPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ref, agc, agd, t, comm));
            memcpy(got, init, outb);
            if (nb) { MPI_OK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, got, agc, agd, t, comm, &q)); complete(&q, how); }
            else MPI_OK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, got, agc, agd, t, comm));
            same("allgatherv in place", got, ref, outb);
            snprintf(label, sizeof label, "%salltoallv %s base %d", nb ? "i" : "", vts[m].name, base);
            memcpy(ref, init, outb);
            MPI_OK(PMPI_Alltoallv(in, sc, sd, t, ref, rc, rd, t, comm));
            memcpy(got, init, outb);
            if (nb) { MPI_OK(MPI_Ialltoallv(in, sc, sd, t, got, rc, rd, t, comm, &q)); complete(&q, how); }
            else MPI_OK(MPI_Alltoallv(in, sc, sd, t, got, rc, rd, t, comm));
            same("alltoallv", got, ref, outb);
            /* in place: the blocks sent are recvbuf's (symmetric counts); the
             * send arguments are ignored (the interposer must not read them) */
            memcpy(ref, init, outb);
            MPI_OK(PMPI_Alltoallv(MPI_IN_PLACE, sc, sd, MPI_DATATYPE_NULL, ref, ic, id, t, comm));
            memcpy(got, init, outb);
            if (nb) { MPI_OK(MPI_Ialltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, got, ic, id, t, comm, &q)); complete(&q, how); }
            else MPI_OK(MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, got, ic, id, t, comm));
            same("alltoallv in place", got, ref, outb);
        }
        free(in);
        free(init);
        free(got);
        free(ref);
    }
    /* send and receive types differ, the bytes agree (served): trio against 3 ints */
    {
        const size_t inb = (size_t)imax(agc[crank], sspan) * 12u;
        const size_t outb = (size_t)imax(agspan, rspan) * 12u;
        char *in = xmalloc(inb), *init = xmalloc(outb), *got = xmalloc(outb), *ref = xmalloc(outb);
        fill(in, inb, K_BYTES, seed + 400);
        fill(init, outb, K_BYTES, seed + 401);
        for (int nb = 0; nb < 2; nb++) {
            MPI_Request q;
            snprintf(label, sizeof label, "%sallgatherv trio to int base %d", nb ? "i" : "", base);
            where = label;
            memcpy(ref, init, outb);
            MPI_OK(PMPI_Allgatherv(in, agc[crank], trio, ref, agc3, agd3, MPI_INT, comm));
            memcpy(got, init, outb);
            if (nb) { MPI_OK(MPI_Iallgatherv(in, agc[crank], trio, got, agc3, agd3, MPI_INT, comm, &q)); complete(&q, BY_WAIT); }
            else MPI_OK(MPI_Allgatherv(in, agc[crank], trio, got, agc3, agd3, MPI_INT, comm));
            same("allgatherv, two types", got, ref, outb);
            snprintf(label, sizeof label, "%salltoallv int to trio base %d", nb ? "i" : "", base);
            memcpy(ref, init, outb);
            MPI_OK(PMPI_Alltoallv(in, sc3, sd3, MPI_INT, ref, rc, rd, trio, comm));
            memcpy(got, init, outb);
            if (nb) { MPI_OK(MPI_Ialltoallv(in, sc3, sd3, MPI_INT, got, rc, rd, trio, comm, &q)); complete(&q, BY_TEST); }
            else MPI_OK(MPI_Alltoallv(in, sc3, sd3, MPI_INT, got, rc, rd, trio, comm));
            same("alltoallv, two types", got, ref, outb);
        }
        free(in);
        free(init);
        free(got);
        free(ref);
    }
    free(agc); free(agd); free(sc); free(sd); free(rc); free(rd); free(ic); free(id);
    free(sc3); free(sd3); free(agc3); free(agd3); free(agdn);
    MPI_OK(MPI_Type_free(&vec));
    MPI_OK(MPI_Type_free(&resized));
    MPI_OK(MPI_Type_free(&trio));
}

/* The vector forms' large-count (_c) forms: MPI_Count counts, MPI_Aint
 * displacements. */
static void test_vector_large_count(MPI_Comm comm)
{
    int csize, crank;
    MPI_Comm_size(comm, &csize);
    MPI_Comm_rank(comm, &crank);
    const size_t p = (size_t)csize;
    int *ci = xmalloc(4 * p), *di = xmalloc(4 * p), *rci = xmalloc(4 * p), *rdi = xmalloc(4 * p);
    MPI_Count *agc = xmalloc(sizeof(MPI_Count) * p), *sc = xmalloc(sizeof(MPI_Count) * p),
              *rc = xmalloc(sizeof(MPI_Count) * p);
    MPI_Aint *agd = xmalloc(sizeof(MPI_Aint) * p), *sd = xmalloc(sizeof(MPI_Aint) * p),
             *rd = xmalloc(sizeof(MPI_Aint) * p);
    for (int r = 0; r < csize; r++) ci[r] = vcount_ag(101, r);
    const int agspan = vlayout(csize, ci, 2, di);
    for (int r = 0; r < csize; r++) {
        agc[r] = ci[r];
        agd[r] = csize == 1 ? 0 : di[r]; /* MPICH 4.0.2 on one rank: see test_vector */
        ci[r] = vcount_a2a(101, crank, r, 0);
        rci[r] = vcount_a2a(101, r, crank, 0);
    }
    const int sspan = vlayout(csize, ci, 1, di), rspan = vlayout(csize, rci, 3, rdi);
    for (int r = 0; r < csize; r++) {
        sc[r] = ci[r];
        sd[r] = di[r];
        rc[r] = rci[r];
        rd[r] = rdi[r];
    }
    const size_t inb = 8u * (size_t)imax((int)agc[crank], sspan);
    const size_t outb = 8u * (size_t)imax(agspan, rspan);
    char *in = xmalloc(inb), *init = xmalloc(outb), *got = xmalloc(outb), *ref = xmalloc(outb);
    fill(in, inb, K_BYTES, 501);
    fill(init, outb, K_BYTES, 502);
    MPI_Request q;
    where = "vector large-count forms";
    memcpy(ref, init, outb);
    MPI_OK(PMPI_Allgatherv_c(in, agc[crank], MPI_DOUBLE, ref, agc, agd, MPI_DOUBLE, comm));
    memcpy(got, init, outb);
    MPI_OK(MPI_Allgatherv_c(in, agc[crank], MPI_DOUBLE, got, agc, agd, MPI_DOUBLE, comm));
    same("MPI_Allgatherv_c", got, ref, outb);
    memcpy(got, init, outb);
    MPI_OK(MPI_Iallgatherv_c(in, agc[crank], MPI_DOUBLE, got, agc, agd, MPI_DOUBLE, comm, &q));
    complete(&q, BY_WAITALL);
    same("MPI_Iallgatherv_c", got, ref, outb);
    memcpy(ref, init, outb);
    MPI_OK(PMPI_Alltoallv_c(in, sc, sd, MPI_DOUBLE, ref, rc, rd, MPI_DOUBLE, comm));
    memcpy(got, init, outb);
    MPI_OK(MPI_Alltoallv_c(in, sc, sd, MPI_DOUBLE, got, rc, rd, MPI_DOUBLE, comm));
    same("MPI_Alltoallv_c", got, ref, outb);
    memcpy(got, init, outb);
    MPI_OK(MPI_Ialltoallv_c(in, sc, sd, MPI_DOUBLE, got, rc, rd, MPI_DOUBLE, comm, &q));
    complete(&q, BY_TESTANY);
    same("MPI_Ialltoallv_c", got, ref, outb);
    free(ci); free(di); free(rci); free(rdi); free(agc); free(sc); free(rc); free(agd); free(sd);
    free(rd); free(in); free(init); free(got); free(ref);
}

/* Negative displacements (MPI allows them: the blocks lie before the address
 * passed), on the odd ranks only: for allgatherv's receive side and
 * alltoallv's send side there, its receive side on the even ranks. Every rank
 * must still take the same way (Weft), else the call would hang; results
 * against PMPI_. */
static void test_vector_negative(MPI_Comm comm)
{
    int csize, crank;
    MPI_Comm_size(comm, &csize);
    MPI_Comm_rank(comm, &crank);
    const size_t p = (size_t)csize;
    int *agc = xmalloc(4 * p), *agd = xmalloc(4 * p), *sc = xmalloc(4 * p), *sd = xmalloc(4 * p);
    int *rc = xmalloc(4 * p), *rd = xmalloc(4 * p);
    for (int r = 0; r < csize; r++) {
        agc[r] = vcount_ag(9, r);
        sc[r] = vcount_a2a(9, crank, r, 0);
        rc[r] = vcount_a2a(9, r, crank, 0);
    }
    const int agspan = vlayout(csize, agc, 2, agd), sspan = vlayout(csize, sc, 1, sd),
              rspan = vlayout(csize, rc, 3, rd);
    /* the odd ranks pass the buffer's middle and displacements that much lower */
    const int mid = crank % 2 ? imax(agspan, imax(sspan, rspan)) / 2 : 0;
    /* MPICH 4.0.2's one-rank allgatherv ignores displs (see test_vector): 0 there */
    for (int r = 0; r < csize; r++) agd[r] = csize > 1 ? agd[r] - mid : 0;
    for (int r = 0; r < csize; r++) {
        sd[r] -= mid;
        rd[r] -= crank % 2 ? 0 : 5; /* the even ranks: receive side lower by 5 */
    }
    const int rlow = crank % 2 ? 0 : 5;
    const size_t inb = 4u * ((size_t)imax(agc[crank], sspan) + (size_t)mid);
    const size_t outb = 4u * ((size_t)imax(agspan, rspan) + (size_t)rlow + (size_t)mid);
    char *in = xmalloc(inb), *init = xmalloc(outb), *got = xmalloc(outb), *ref = xmalloc(outb);
    fill(in, inb, K_BYTES, 601);
    fill(init, outb, K_BYTES, 602);
    const size_t agoff = csize > 1 ? 4u * (size_t)mid : 0;
    where = "vector forms, negative displacements";
    memcpy(ref, init, outb);
    MPI_OK(PMPI_Allgatherv(in, agc[crank], MPI_INT, ref + agoff, agc, agd, MPI_INT, comm));
    memcpy(got, init, outb);
    MPI_OK(MPI_Allgatherv(in, agc[crank], MPI_INT, got + agoff, agc, agd, MPI_INT, comm));
    same("allgatherv, negative displacements", got, ref, outb);
    MPI_Request q;
    memcpy(ref, init, outb);
    MPI_OK(PMPI_Alltoallv(in + 4u * (size_t)mid, sc, sd, MPI_INT, ref + 4u * (size_t)rlow, rc, rd,
                          MPI_INT, comm));
    memcpy(got, init, outb);
    MPI_OK(MPI_Ialltoallv(in + 4u * (size_t)mid, sc, sd, MPI_INT, got + 4u * (size_t)rlow, rc, rd,
                          MPI_INT, comm, &q));
    complete(&q, BY_WAIT);
    same("ialltoallv, negative displacements", got, ref, outb);
    free(agc); free(agd); free(sc); free(sd); free(rc); free(rd);
    free(in); free(init); free(got); free(ref);
}

/* ---- reduce_scatter: a reduction cut into blocks of their own lengths ----------------------- */
/* Blocks of vcount_ag(base, r) elements (uneven, some empty; base < 0: all
 * empty), blocking and nonblocking (completed the four ways in turn), then
 * in place (the whole vector in recvbuf, the result at its start): MPI_INT
 * sum, MPI_DOUBLE max, MPI_FLOAT sum of small integers (any order, the same
 * bits) served; a user-defined operation on arbitrary doubles falls
 * through. Against PMPI_Reduce_scatter, bit for bit, with a guard after the
 * block that must stay as it was. A rank whose block is empty passes a NULL
 * recvbuf once (MPI allows it). */
static void test_reduce_scatter(MPI_Comm comm, int base, int seed)
{
    int csize, crank;
    MPI_Comm_size(comm, &csize);
    MPI_Comm_rank(comm, &crank);
    MPI_Op uop;
    MPI_OK(MPI_Op_create(user_op, 1, &uop));
    const red_t reds[] = {
        {MPI_INT, K_INT32, 4, MPI_SUM, "int sum"},
        {MPI_DOUBLE, K_DOUBLE, 8, MPI_MAX, "double max"},
        {MPI_FLOAT, K_FLOAT, 4, MPI_SUM, "float sum"},
        {MPI_DOUBLE, K_ANYDOUBLE, 8, uop, "user op"}, /* falls through */
    };
    int *cnt = xmalloc(4 * (size_t)csize);
    size_t total = 0;
    for (int r = 0; r < csize; r++) total += (size_t)(cnt[r] = vcount_ag(base, r));
    const size_t guard = 16;
    char label[160];
    for (size_t k = 0; k < sizeof reds / sizeof reds[0]; k++) {
        const red_t *d = &reds[k];
        const size_t vb = total * d->es, ob = (size_t)cnt[crank] * d->es + guard;
        const size_t bufb = vb > ob ? vb : ob;
        char *in = xmalloc(vb), *init = xmalloc(bufb), *got = xmalloc(bufb), *ref = xmalloc(bufb);
        fill(in, total, d->k, seed + 1000 + (int)k);
        fill(init, bufb, K_BYTES, seed + 1100 + (int)k);
        for (int nb = 0; nb < 2; nb++) {
            int how = (seed + (int)k + nb) % COMPLETIONS;
            MPI_Request q;
            snprintf(label, sizeof label, "%sreduce_scatter %s base %d", nb ? "i" : "", d->name, base);
            where = label;
            memcpy(ref, init, bufb);
            MPI_OK(PMPI_Reduce_scatter(in, ref, cnt, d->t, d->op, comm));
            memcpy(got, init, bufb);
            if (nb) { MPI_OK(MPI_Ireduce_scatter(in, got, cnt, d->t, d->op, comm, &q)); complete(&q, how); }
            else MPI_OK(MPI_Reduce_scatter(in, got, cnt, d->t, d->op, comm));
            same("reduce_scatter", got, ref, ob);
            /* in place: the result's block at recvbuf's start, the rest MPI's scratch */
            memcpy(ref, in, vb);
            MPI_OK(PMPI_Reduce_scatter(MPI_IN_PLACE, ref, cnt, d->t, d->op, comm));
            memcpy(got, in, vb);
            if (nb) { MPI_OK(MPI_Ireduce_scatter(MPI_IN_PLACE, got, cnt, d->t, d->op, comm, &q)); complete(&q, how); }
            else MPI_OK(MPI_Reduce_scatter(MPI_IN_PLACE, got, cnt, d->t, d->op, comm));
            same("reduce_scatter in place", got, ref, (size_t)cnt[crank] * d->es);
            if (k == 0) { /* an empty block's recvbuf NULL (the reference above) */
                void *rb = cnt[crank] == 0 ? NULL : got;
                memcpy(got, init, bufb);
                if (nb) { MPI_OK(MPI_Ireduce_scatter(in, rb, cnt, d->t, d->op, comm, &q)); complete(&q, BY_WAIT); }
                else MPI_OK(MPI_Reduce_scatter(in, rb, cnt, d->t, d->op, comm));
                memcpy(ref, init, bufb);
                MPI_OK(PMPI_Reduce_scatter(in, ref, cnt, d->t, d->op, comm));
                if (rb != NULL) same("reduce_scatter, empty blocks' recvbuf NULL", got, ref, ob);
            }
        }
        free(in);
        free(init);
        free(got);
        free(ref);
    }
    free(cnt);
    MPI_OK(MPI_Op_free(&uop));
}

/* MPI_Reduce_scatter_c and MPI_Ireduce_scatter_c (MPI_Count recvcounts),
 * in place for the nonblocking one; MPI_Reduce_scatter with equal counts
 * against MPI_Reduce_scatter_block (WEFT_MPI_CALLS names the two apart:
 * tests/interpose/check_verbose.sh); a negative count reported by MPI on
 * MPI_COMM_SELF. */
static void test_reduce_scatter_c(MPI_Comm comm)
{
    int csize, crank;
    MPI_Comm_size(comm, &csize);
    MPI_Comm_rank(comm, &crank);
    MPI_Count *c = xmalloc(sizeof(MPI_Count) * (size_t)csize);
    int *eq = xmalloc(4 * (size_t)csize);
    size_t total = 0;
    for (int r = 0; r < csize; r++) {
        total += (size_t)(c[r] = vcount_ag(203, csize - 1 - r));
        eq[r] = 101;
    }
    const size_t vb = 4 * (total > 101u * (size_t)csize ? total : 101u * (size_t)csize);
    const size_t ob = 4 * (size_t)c[crank];
    int *in = xmalloc(vb), *got = xmalloc(vb), *ref = xmalloc(vb);
    fill(in, vb / 4, K_INT32, 1201);
    MPI_Request q;
    where = "reduce_scatter large-count forms";
    MPI_OK(PMPI_Reduce_scatter_c(in, ref, c, MPI_INT, MPI_SUM, comm));
    memset(got, 0x5a, vb);
    MPI_OK(MPI_Reduce_scatter_c(in, got, c, MPI_INT, MPI_SUM, comm));
    same("MPI_Reduce_scatter_c", got, ref, ob);
    memcpy(got, in, vb);
    MPI_OK(MPI_Ireduce_scatter_c(MPI_IN_PLACE, got, c, MPI_INT, MPI_SUM, comm, &q));
    complete(&q, BY_TESTANY);
    same("MPI_Ireduce_scatter_c in place", got, ref, ob);
    where = "reduce_scatter against reduce_scatter_block";
    MPI_OK(MPI_Reduce_scatter_block(in, ref, 101, MPI_INT, MPI_MIN, comm));
    memset(got, 0x5a, vb);
    MPI_OK(MPI_Reduce_scatter(in, got, eq, MPI_INT, MPI_MIN, comm));
    same("reduce_scatter, equal counts", got, ref, 4 * 101);
    /* a negative count: left to MPI, which reports it (MPI_COMM_SELF,
     * MPI_ERRORS_RETURN). A NULL array goes to MPI too, but Debian's MPICH
     * 4.0.2 then crashes (it sums the counts before it checks them). */
    where = "reduce_scatter, bad arguments";
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    int neg = -1;
    MPI_Count negc = -1;
    if (MPI_Reduce_scatter(in, got, &neg, MPI_INT, MPI_SUM, MPI_COMM_SELF) == MPI_SUCCESS ||
        MPI_Ireduce_scatter_c(in, got, &negc, MPI_INT, MPI_SUM, MPI_COMM_SELF, &q) == MPI_SUCCESS) {
        fprintf(stderr, "rank %d: an erroneous call succeeded [%s]\n", rank, where);
        errors++;
    }
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL));
    free(c); free(eq); free(in); free(got); free(ref);
}

/* ---- rooted vector forms: gatherv, scatterv ---------------------------------------------- */
/* At the first and the last root, blocking and nonblocking: rank r's block
 * of vcount_ag(base, r) elements (uneven, some empty) at the root's
 * displacements in reverse rank order with gaps, the arrays and the root's
 * buffer NULL on the other ranks; in place at the root; a contiguous derived
 * type (served) and a non-contiguous one (falls through, on every rank).
 * Against PMPI_, the whole buffers, gaps included. */
static void test_vector_rooted(MPI_Comm comm, int base, int seed)
{
    int csize, crank;
    MPI_Comm_size(comm, &csize);
    MPI_Comm_rank(comm, &crank);
    MPI_Datatype vec, trio;
    MPI_OK(MPI_Type_vector(2, 1, 2, MPI_INT, &vec)); /* size 8, extent 12: falls through */
    MPI_OK(MPI_Type_commit(&vec));
    MPI_OK(MPI_Type_contiguous(3, MPI_INT, &trio));
    MPI_OK(MPI_Type_commit(&trio));
    const struct { MPI_Datatype t; const char *name; } vts[] = {
        {MPI_INT, "int"}, {MPI_DOUBLE, "double"}, {trio, "contiguous derived"}, {vec, "vector"},
    };
    const size_t p = (size_t)csize;
    int *cnt = xmalloc(4 * p), *dsp = xmalloc(4 * p);
    for (int r = 0; r < csize; r++) cnt[r] = vcount_ag(base, r);
    const int span = vlayout(csize, cnt, 2, dsp);
    char label[160];
    for (size_t m = 0; m < sizeof vts / sizeof vts[0]; m++) {
        MPI_Datatype t = vts[m].t;
        MPI_Aint lb = 0, ext = 0;
        MPI_OK(MPI_Type_get_extent(t, &lb, &ext));
        const size_t outb = (size_t)span * (size_t)ext;
        char *in = xmalloc(outb), *init = xmalloc(outb), *got = xmalloc(outb), *ref = xmalloc(outb);
        fill(in, outb, K_BYTES, seed + 700 + (int)m);
        fill(init, outb, K_BYTES, seed + 800 + (int)m);
        for (int root = 0; root < csize; root = next_root(root, csize)) {
            const int me = crank == root;
            const int *c = me ? cnt : NULL, *d = me ? dsp : NULL;
            for (int nb = 0; nb < 2; nb++) {
                int how = (seed + (int)m + root + nb) % COMPLETIONS;
                MPI_Request q;
                snprintf(label, sizeof label, "%sgatherv %s base %d root %d", nb ? "i" : "",
                         vts[m].name, base, root);
                where = label;
                memcpy(ref, init, outb);
                MPI_OK(PMPI_Gatherv(in, cnt[crank], t, me ? ref : NULL, c, d, t, root, comm));
                memcpy(got, init, outb);
                if (nb) { MPI_OK(MPI_Igatherv(in, cnt[crank], t, me ? got : NULL, c, d, t, root, comm, &q)); complete(&q, how); }
                else MPI_OK(MPI_Gatherv(in, cnt[crank], t, me ? got : NULL, c, d, t, root, comm));
                same("gatherv", got, ref, outb);
                /* in place: the root's block already at dsp[root] (init's bytes) */
                const void *s = me ? MPI_IN_PLACE : in;
                memcpy(ref, init, outb);
                MPI_OK(PMPI_Gatherv(s, cnt[crank], t, me ? ref : NULL, c, d, t, root, comm));
                memcpy(got, init, outb);
                if (nb) { MPI_OK(MPI_Igatherv(s, cnt[crank], t, me ? got : NULL, c, d, t, root, comm, &q)); complete(&q, how); }
                else MPI_OK(MPI_Gatherv(s, cnt[crank], t, me ? got : NULL, c, d, t, root, comm));
                same("gatherv in place", got, ref, outb);
                snprintf(label, sizeof label, "%sscatterv %s base %d root %d", nb ? "i" : "",
                         vts[m].name, base, root);
                memcpy(ref, init, outb);
                MPI_OK(PMPI_Scatterv(me ? in : NULL, c, d, t, ref, cnt[crank], t, root, comm));
                memcpy(got, init, outb);
                if (nb) { MPI_OK(MPI_Iscatterv(me ? in : NULL, c, d, t, got, cnt[crank], t, root, comm, &q)); complete(&q, how); }
                else MPI_OK(MPI_Scatterv(me ? in : NULL, c, d, t, got, cnt[crank], t, root, comm));
                same("scatterv", got, ref, outb);
                /* in place: the root's block stays in sendbuf, recvbuf untouched */
                void *rb = me ? MPI_IN_PLACE : NULL;
                memcpy(ref, init, outb);
                MPI_OK(PMPI_Scatterv(me ? in : NULL, c, d, t, rb ? rb : ref, cnt[crank], t, root, comm));
                memcpy(got, init, outb);
                if (nb) { MPI_OK(MPI_Iscatterv(me ? in : NULL, c, d, t, rb ? rb : got, cnt[crank], t, root, comm, &q)); complete(&q, how); }
                else MPI_OK(MPI_Scatterv(me ? in : NULL, c, d, t, rb ? rb : got, cnt[crank], t, root, comm));
                same("scatterv in place", got, ref, outb);
            }
        }
        free(in);
        free(init);
        free(got);
        free(ref);
    }
    free(cnt);
    free(dsp);
    MPI_OK(MPI_Type_free(&vec));
    MPI_OK(MPI_Type_free(&trio));
}

/* The rooted vector forms' _c forms at the last root, whose displacements
 * are negative (its buffer's middle passed); the send type differs from the
 * receive type (same bytes: 3 ints against a contiguous type of 3 ints).
 * Then a root's bad arrays on MPI_COMM_SELF (MPI_ERRORS_RETURN): an error,
 * not a hang, on every path. */
static void test_vector_rooted_c(MPI_Comm comm)
{
    int csize, crank;
    MPI_Comm_size(comm, &csize);
    MPI_Comm_rank(comm, &crank);
    MPI_Datatype trio;
    MPI_OK(MPI_Type_contiguous(3, MPI_INT, &trio));
    MPI_OK(MPI_Type_commit(&trio));
    const size_t p = (size_t)csize;
    const int root = csize - 1, me = crank == root;
    int *ci = xmalloc(4 * p), *di = xmalloc(4 * p);
    MPI_Count *c = xmalloc(sizeof(MPI_Count) * p);
    MPI_Aint *d = xmalloc(sizeof(MPI_Aint) * p);
    for (int r = 0; r < csize; r++) ci[r] = vcount_ag(57, r);
    const int span = vlayout(csize, ci, 1, di), mid = span / 2;
    for (int r = 0; r < csize; r++) {
        c[r] = ci[r];
        d[r] = di[r] - mid;
    }
    const size_t outb = 12u * (size_t)span, at = 12u * (size_t)mid;
    char *in = xmalloc(outb), *init = xmalloc(outb), *got = xmalloc(outb), *ref = xmalloc(outb);
    fill(in, outb, K_BYTES, 901);
    fill(init, outb, K_BYTES, 902);
    const MPI_Count own = 3 * (MPI_Count)ci[crank];
    MPI_Request q;
    where = "rooted vector large-count forms";
    memcpy(ref, init, outb);
    MPI_OK(PMPI_Gatherv_c(in, own, MPI_INT, me ? ref + at : NULL, me ? c : NULL, me ? d : NULL,
                          trio, root, comm));
    memcpy(got, init, outb);
    MPI_OK(MPI_Gatherv_c(in, own, MPI_INT, me ? got + at : NULL, me ? c : NULL, me ? d : NULL,
                         trio, root, comm));
    same("MPI_Gatherv_c", got, ref, outb);
    memcpy(got, init, outb);
    MPI_OK(MPI_Igatherv_c(in, own, MPI_INT, me ? got + at : NULL, me ? c : NULL, me ? d : NULL,
                          trio, root, comm, &q));
    complete(&q, BY_TESTANY);
    same("MPI_Igatherv_c", got, ref, outb);
    memcpy(ref, init, outb);
    MPI_OK(PMPI_Scatterv_c(me ? in + at : NULL, me ? c : NULL, me ? d : NULL, trio, ref, own,
                           MPI_INT, root, comm));
    memcpy(got, init, outb);
    MPI_OK(MPI_Scatterv_c(me ? in + at : NULL, me ? c : NULL, me ? d : NULL, trio, got, own,
                          MPI_INT, root, comm));
    same("MPI_Scatterv_c", got, ref, outb);
    memcpy(got, init, outb);
    MPI_OK(MPI_Iscatterv_c(me ? in + at : NULL, me ? c : NULL, me ? d : NULL, trio, got, own,
                           MPI_INT, root, comm, &q));
    complete(&q, BY_WAITALL);
    same("MPI_Iscatterv_c", got, ref, outb);
    /* bad arrays at the root, on one rank (nobody to wait for) */
    where = "rooted vector forms, bad arguments";
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    int one = 1, neg = -1, zero = 0;
    if (MPI_Gatherv(in, 4, MPI_INT, got, &neg, &zero, MPI_INT, 0, MPI_COMM_SELF) == MPI_SUCCESS ||
        MPI_Iscatterv(in, &neg, &zero, MPI_INT, got, 4, MPI_INT, 0, MPI_COMM_SELF, &q) == MPI_SUCCESS ||
        MPI_Gatherv(in, 3, MPI_INT, got, &one, &zero, MPI_INT, 0, MPI_COMM_SELF) == MPI_SUCCESS) {
        fprintf(stderr, "rank %d: an erroneous call succeeded [%s]\n", rank, where);
        errors++;
    }
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL));
    free(ci); free(di); free(c); free(d); free(in); free(init); free(got); free(ref);
    MPI_OK(MPI_Type_free(&trio));
}

/* Several nonblocking calls in flight at once on one communicator, completed
 * together by MPI_Waitall, and by MPI_Testany in whatever order they end. */
static void test_many_inflight(MPI_Comm comm, int count, int seed)
{
    int csize;
    MPI_Comm_size(comm, &csize);
    size_t n = (size_t)count;
    int *a = xmalloc(4 * n), *ra = xmalloc(4 * n), *ga = xmalloc(4 * n);
    double *b = xmalloc(8 * n), *rb = xmalloc(8 * n);
    char *c = xmalloc(n * (size_t)csize), *rc = xmalloc(n * (size_t)csize),
         *gc = xmalloc(n * (size_t)csize);
    for (int round = 0; round < 2; round++) {
        where = round ? "in flight, testany" : "in flight, waitall";
        fill(a, n, K_INT32, seed + 7);
        fill(b, n, K_DOUBLE, seed + 8);
        fill(c, n, K_BYTES, seed + 9);
        MPI_OK(PMPI_Allreduce(a, ra, count, MPI_INT, MPI_SUM, comm));
        memcpy(rb, b, 8 * n);
        MPI_OK(PMPI_Bcast(rb, count, MPI_DOUBLE, csize - 1, comm));
        MPI_OK(PMPI_Allgather(c, count, MPI_BYTE, rc, count, MPI_BYTE, comm));
        MPI_Request q[4];
        MPI_OK(MPI_Iallreduce(a, ga, count, MPI_INT, MPI_SUM, comm, &q[0]));
        MPI_OK(MPI_Ibcast(b, count, MPI_DOUBLE, csize - 1, comm, &q[1]));
        MPI_OK(MPI_Iallgather(c, count, MPI_BYTE, gc, count, MPI_BYTE, comm, &q[2]));
        MPI_OK(MPI_Ibarrier(comm, &q[3]));
        if (round == 0) {
            MPI_Status sts[4];
            MPI_OK(MPI_Waitall(4, q, sts));
        } else {
            int left = 4, seen = 0;
            while (left > 0) {
                int idx = -1, done = 0;
                MPI_OK(MPI_Testany(4, q, &idx, &done, MPI_STATUS_IGNORE));
                if (done && idx >= 0 && idx < 4) {
                    if (seen & (1 << idx)) {
                        fprintf(stderr, "rank %d: Testany gave index %d twice\n", rank, idx);
                        errors++;
                    }
                    seen |= 1 << idx;
                    left--;
                } else if (done) {
                    fprintf(stderr, "rank %d: Testany: done with index %d\n", rank, idx);
                    errors++;
                    break;
                }
            }
        }
        same("iallreduce in flight", ga, ra, 4 * n);
        same("ibcast in flight", b, rb, 8 * n);
        same("iallgather in flight", gc, rc, n * (size_t)csize);
    }
    free(a); free(ra); free(ga); free(b); free(rb); free(c); free(rc); free(gc);
}

/* Hundreds of requests open at once (the interposer's table of open requests
 * grows past its first size), completed one by one in a scrambled order by
 * MPI_Wait (removals from the middle of the table's runs) and the rest by
 * MPI_Waitall: every result against MPI's own call. */
static void test_many_open(MPI_Comm comm)
{
    enum { NOPEN = 300 };
    int *v = xmalloc(sizeof(int) * NOPEN), *got = xmalloc(sizeof(int) * NOPEN),
        *ref = xmalloc(sizeof(int) * NOPEN);
    MPI_Request *q = xmalloc(sizeof(MPI_Request) * NOPEN);
    MPI_Status *st = xmalloc(sizeof(MPI_Status) * NOPEN); /* not MPI_STATUSES_IGNORE: a GCC 12 false warning */
    where = "many open requests";
    for (int i = 0; i < NOPEN; i++) {
        v[i] = (rank + 1) * (i + 3);
        got[i] = -1;
    }
    MPI_OK(PMPI_Allreduce(v, ref, NOPEN, MPI_INT, MPI_SUM, comm));
    for (int i = 0; i < NOPEN; i++)
        MPI_OK(MPI_Iallreduce(&v[i], &got[i], 1, MPI_INT, MPI_SUM, comm, &q[i]));
    /* every 7th index modulo NOPEN (coprime): a scrambled order, two thirds of them */
    for (int k = 0; k < 2 * NOPEN / 3; k++) {
        int i = (int)((7L * k + 5) % NOPEN);
        MPI_OK(MPI_Wait(&q[i], MPI_STATUS_IGNORE));
        if (q[i] != MPI_REQUEST_NULL) {
            fprintf(stderr, "rank %d: MPI_Wait left request %d active [%s]\n", rank, i, where);
            errors++;
        }
    }
    MPI_OK(MPI_Waitall(NOPEN, q, st));
    same("iallreduce, 300 open", got, ref, sizeof(int) * NOPEN);
    free(v); free(got); free(ref); free(q); free(st);
}

/* The last rank enters late: nobody may leave the barrier before it entered
 * (the ranks share one host clock: the tests run on one node). */
static double now_realtime(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_barrier(MPI_Comm comm, int nb)
{
    int crank, csize;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    where = nb ? "ibarrier" : "barrier";
    double entered = 0.0;
    if (crank == csize - 1) {
        struct timespec ts = {0, 30 * 1000 * 1000};
        nanosleep(&ts, NULL);
        entered = now_realtime();
    }
    MPI_Request q;
    if (nb) { MPI_OK(MPI_Ibarrier(comm, &q)); complete(&q, BY_TEST); }
    else MPI_OK(MPI_Barrier(comm));
    double left = now_realtime();
    MPI_OK(PMPI_Bcast(&entered, 1, MPI_DOUBLE, csize - 1, comm));
    if (left < entered) {
        fprintf(stderr, "rank %d: left the %s %.6f s before the last rank entered it\n", rank,
                where, entered - left);
        errors++;
    }
}

/* ---- Waitany, Waitsome, Testany, Testsome, Testall on mixed arrays -------------- */
/* The status of the receive of n ints from `from` with tag 77. */
static void check_recv_status(const MPI_Status *st, int from, int n)
{
    int got = -1;
    MPI_OK(MPI_Get_count(st, MPI_INT, &got));
    if (st->MPI_SOURCE != from || st->MPI_TAG != 77 || got != n) {
        fprintf(stderr, "rank %d: receive status source %d tag %d count %d, want %d 77 %d [%s]\n",
                rank, st->MPI_SOURCE, st->MPI_TAG, got, from, n, where);
        errors++;
    }
}

/* A completed index: once each, never an MPI_REQUEST_NULL entry (nulls). */
static void note_index(int idx, int count, unsigned nulls, unsigned *seen)
{
    if (idx < 0 || idx >= count || (nulls & (1u << idx)) || (*seen & (1u << idx))) {
        fprintf(stderr, "rank %d: completion index %d (seen 0x%x) [%s]\n", rank, idx, *seen, where);
        errors++;
        return;
    }
    *seen |= 1u << idx;
}

static void pause_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

enum { A_WAITANY, A_WAITSOME, A_TESTANY, A_TESTSOME, A_TESTALL, A_WAITALL, ARRAY_WAYS };
static const char *const array_ways[ARRAY_WAYS] = {"waitany", "waitsome", "testany", "testsome",
                                                   "testall", "waitall"};


/* Collectives (Weft's under the preload) and point-to-point requests (MPI's
 * always) in one array with MPI_REQUEST_NULL entries, completed by each of
 * the array calls in turn; mixed = 0: the collectives alone. Results against
 * PMPI_, the receive's status, every index once. */
static void test_array_completion(MPI_Comm comm, int count, int seed, int mixed)
{
    int crank, csize;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    const int left = (crank + csize - 1) % csize, right = (crank + 1) % csize;
    size_t n = (size_t)count;
    int *a = xmalloc(4 * n), *ra = xmalloc(4 * n), *ga = xmalloc(4 * n);
    int *snd = xmalloc(4 * n), *rcv = xmalloc(4 * n), *want = xmalloc(4 * n);
    double *b = xmalloc(8 * n), *rb = xmalloc(8 * n);
    for (int way = 0; way < ARRAY_WAYS; way++) {
        char label[64];
        snprintf(label, sizeof label, "%s, %s array", array_ways[way], mixed ? "mixed" : "collectives");
        where = label;
        fill(a, n, K_INT32, seed + way);
        fill(b, n, K_DOUBLE, seed + way + 10);
        fill(snd, n, K_INT32, seed + way + 20);
        memset(rcv, 0, 4 * n);
        MPI_OK(PMPI_Allreduce(a, ra, count, MPI_INT, MPI_SUM, comm));
        memcpy(rb, b, 8 * n);
        MPI_OK(PMPI_Bcast(rb, count, MPI_DOUBLE, csize - 1, comm));
        /* what the left neighbour sends: its own snd */
        MPI_OK(PMPI_Sendrecv(snd, count, MPI_INT, right, 78, want, count, MPI_INT, left, 78, comm,
                             MPI_STATUS_IGNORE));
        enum { NQ = 7 };
        MPI_Request q[NQ];
        unsigned nulls = 0, seen = 0;
        for (int k = 0; k < NQ; k++) q[k] = MPI_REQUEST_NULL;
        MPI_OK(MPI_Iallreduce(a, ga, count, MPI_INT, MPI_SUM, comm, &q[0]));
        nulls |= 1u << 1; /* q[1] stays MPI_REQUEST_NULL */
        if (mixed) MPI_OK(MPI_Irecv(rcv, count, MPI_INT, left, 77, comm, &q[2]));
        else nulls |= 1u << 2;
        MPI_OK(MPI_Ibcast(b, count, MPI_DOUBLE, csize - 1, comm, &q[3]));
        if (mixed) MPI_OK(MPI_Isend(snd, count, MPI_INT, right, 77, comm, &q[4]));
        else nulls |= 1u << 4;
        MPI_OK(MPI_Ibarrier(comm, &q[5]));
        nulls |= 1u << 6;
        const unsigned all = ((1u << NQ) - 1) & ~nulls;
        MPI_Status st[NQ];
        for (int guard = 0; seen != all && guard < 10000000; guard++) {
            int idx = -1, flag = 0, out = 0, ids[NQ];
            switch (way) {
            case A_WAITANY:
                MPI_OK(MPI_Waitany(NQ, q, &idx, &st[0]));
                if (idx == MPI_UNDEFINED) guard = 10000000; /* nothing active: must not happen yet */
                else {
                    note_index(idx, NQ, nulls, &seen);
                    if (idx == 2) check_recv_status(&st[0], left, count);
                }
                break;
            case A_WAITSOME:
            case A_TESTSOME:
                if (way == A_WAITSOME) MPI_OK(MPI_Waitsome(NQ, q, &out, ids, st));
                else MPI_OK(MPI_Testsome(NQ, q, &out, ids, st));
                if (out == MPI_UNDEFINED) guard = 10000000;
                for (int k = 0; k < out && out != MPI_UNDEFINED; k++) {
                    note_index(ids[k], NQ, nulls, &seen);
                    if (ids[k] == 2) check_recv_status(&st[k], left, count);
                }
                if (way == A_WAITSOME && out == 0) {
                    fprintf(stderr, "rank %d: MPI_Waitsome returned no request [%s]\n", rank, where);
                    errors++;
                }
                if (out == 0) pause_us(20);
                break;
            case A_TESTANY:
                MPI_OK(MPI_Testany(NQ, q, &idx, &flag, &st[0]));
                if (flag && idx == MPI_UNDEFINED) guard = 10000000;
                else if (flag) {
                    note_index(idx, NQ, nulls, &seen);
                    if (idx == 2) check_recv_status(&st[0], left, count);
                } else {
                    pause_us(20);
                }
                break;
            case A_TESTALL:
            case A_WAITALL:
                if (way == A_WAITALL) {
                    MPI_OK(MPI_Waitall(NQ, q, st));
                    flag = 1;
                } else {
                    MPI_OK(MPI_Testall(NQ, q, &flag, st));
                }
                if (flag) {
                    seen = all;
                    if (mixed) check_recv_status(&st[2], left, count);
                    for (int k = 0; k < NQ; k += 3) check_coll_status(&st[k]); /* 0, 3: ours; 6: a null entry */
                } else {
                    pause_us(20);
                }
                break;
            }
        }
        if (seen != all) {
            fprintf(stderr, "rank %d: completed 0x%x of 0x%x [%s]\n", rank, seen, all, where);
            errors++;
        }
        for (int k = 0; k < NQ; k++)
            if (q[k] != MPI_REQUEST_NULL) {
                fprintf(stderr, "rank %d: request %d not released [%s]\n", rank, k, where);
                errors++;
            }
        /* nothing active left: the any/some calls say MPI_UNDEFINED */
        int idx = 0, out = 0, ids[NQ], flag = 0;
        MPI_OK(MPI_Waitany(NQ, q, &idx, MPI_STATUS_IGNORE));
        MPI_OK(MPI_Waitsome(NQ, q, &out, ids, st)); /* (MPI_STATUSES_IGNORE: a GCC 12 false warning) */
        if (idx != MPI_UNDEFINED || out != MPI_UNDEFINED) {
            fprintf(stderr, "rank %d: on an empty array index %d outcount %d [%s]\n", rank, idx, out,
                    where);
            errors++;
        }
        MPI_OK(MPI_Testany(NQ, q, &idx, &flag, MPI_STATUS_IGNORE));
        if (!flag || idx != MPI_UNDEFINED) {
            fprintf(stderr, "rank %d: Testany on an empty array flag %d index %d [%s]\n", rank, flag,
                    idx, where);
            errors++;
        }
        same("iallreduce in an array", ga, ra, 4 * n);
        same("ibcast in an array", b, rb, 8 * n);
        if (mixed) same("irecv in an array", rcv, want, 4 * n);
    }
    free(a); free(ra); free(ga); free(snd); free(rcv); free(want); free(b); free(rb);
}

/* MPI_Waitany must not wait for one request while another is the one that
 * can complete: rank 0 waits on [its allreduce, a 1 MiB send to rank 1],
 * and rank 1 joins the allreduce only after it received that message. A
 * Waitany that waited on the allreduce first would hang where the send needs
 * rank 0's MPI progress (either may be reported first: the receiver can pull
 * the message by itself). */
static void test_waitany_order(MPI_Comm comm)
{
    int crank, csize;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    if (csize < 2) return;
    where = "waitany order";
    const int n = 1 << 18; /* 1 MiB of ints: a rendezvous send */
    int *buf = xmalloc(4 * (size_t)n), v = crank + 1, sum = 0, want = csize * (csize + 1) / 2;
    fill(buf, (size_t)n, K_INT32, 99);
    MPI_Request q[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    if (crank == 1) {
        MPI_OK(MPI_Recv(buf, n, MPI_INT, 0, 79, comm, MPI_STATUS_IGNORE));
        MPI_OK(MPI_Iallreduce(&v, &sum, 1, MPI_INT, MPI_SUM, comm, &q[0]));
        MPI_OK(MPI_Wait(&q[0], MPI_STATUS_IGNORE));
    } else {
        /* the send first: under WEFT_CHECK_ARGS=1 Weft agrees on the arguments when a
         * collective is issued, so the MPI_Iallreduce returns only once rank 1 called it */
        if (crank == 0) MPI_OK(MPI_Isend(buf, n, MPI_INT, 1, 79, comm, &q[1]));
        MPI_OK(MPI_Iallreduce(&v, &sum, 1, MPI_INT, MPI_SUM, comm, &q[0]));
        int idx = -1, first = -1;
        MPI_OK(MPI_Waitany(2, q, &idx, MPI_STATUS_IGNORE));
        first = idx;
        MPI_OK(MPI_Waitany(2, q, &idx, MPI_STATUS_IGNORE));
        if ((crank == 0 && (first < 0 || first > 1 || idx != 1 - first)) ||
            (crank != 0 && (first != 0 || idx != MPI_UNDEFINED))) {
            fprintf(stderr, "rank %d: MPI_Waitany gave %d then %d [%s]\n", rank, first, idx, where);
            errors++;
        }
    }
    if (sum != want) {
        fprintf(stderr, "rank %d: allreduce %d, want %d [%s]\n", rank, sum, want, where);
        errors++;
    }
    free(buf);
}

static void usage(FILE *f, const char *prog)
{
    fprintf(f, "usage: %s [--quick] [--vector] [--help] [--version]\n"
               "Checks MPI's collectives (MPI_ names) against their PMPI_ entries bit for bit.\n"
               "  --quick    fewer counts and communicator rounds\n"
               "  --vector   the vector forms (allgatherv, alltoallv, gatherv, scatterv,\n"
               "             reduce_scatter) only\n",
            prog);
}

int main(int argc, char **argv)
{
    int quick = 0, vector_only = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) { usage(stdout, argv[0]); return 0; }
        if (strcmp(argv[i], "--version") == 0) { printf("test_mpi_calls %s\n", VERSION); return 0; }
        if (strcmp(argv[i], "--quick") == 0) { quick = 1; continue; }
        if (strcmp(argv[i], "--vector") == 0) { vector_only = 1; continue; }
        fprintf(stderr, "%s: unknown option '%s'\n", argv[0], argv[i]);
        usage(stderr, argv[0]);
        return 2;
    }
    int provided = -1;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) return 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int q = -1;
    MPI_OK(MPI_Query_thread(&q));
    if (provided != MPI_THREAD_SERIALIZED || q != MPI_THREAD_SERIALIZED) {
        fprintf(stderr, "rank %d: asked for MPI_THREAD_SERIALIZED, provided %d, query %d\n", rank,
                provided, q);
        errors++;
    }
    const int counts_full[] = {0, 1, 3, 17, 1001, 20011};
    const int counts_quick[] = {17, 1001};
    const int *counts = quick ? counts_quick : counts_full;
    int ncounts = quick ? 2 : 6;
    /* the vector forms' block lengths grow from base (-1: every block empty) */
    const int vbases_full[] = {-1, 0, 1, 17, 1001, 20011};
    const int vbases_quick[] = {-1, 1001};
    const int *vbases = quick ? vbases_quick : vbases_full;
    int nvbases = quick ? 2 : 6;
    for (int i = 0; i < nvbases; i++) test_vector(MPI_COMM_WORLD, vbases[i], 20 + i);
    for (int i = 0; i < nvbases; i++) test_vector_rooted(MPI_COMM_WORLD, vbases[i], 40 + i);
    for (int i = 0; i < nvbases; i++) test_reduce_scatter(MPI_COMM_WORLD, vbases[i], 60 + i);
    test_vector_large_count(MPI_COMM_WORLD);
    test_reduce_scatter_c(MPI_COMM_WORLD);
    test_vector_rooted_c(MPI_COMM_WORLD);
    test_vector_negative(MPI_COMM_WORLD);
    if (vector_only) { /* and on a duplicate, MPI_COMM_SELF, a split communicator */
        MPI_Comm dup, half;
        MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
        MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &half));
        test_vector(dup, 33, 5);
        test_vector(MPI_COMM_SELF, 5, 3);
        test_vector(half, 7, 6);
        test_vector_rooted(MPI_COMM_SELF, 5, 3);
        test_vector_rooted(half, 7, 6);
        test_reduce_scatter(MPI_COMM_SELF, 5, 3);
        test_reduce_scatter(half, 7, 6);
        MPI_OK(MPI_Comm_free(&half));
        MPI_OK(MPI_Comm_free(&dup));
        ncounts = 0;
    }
    for (int i = 0; i < ncounts; i++) {
        test_reductions(MPI_COMM_WORLD, counts[i], i);
        test_movement(MPI_COMM_WORLD, counts[i], i);
    }
    if (!vector_only) {
        test_many_inflight(MPI_COMM_WORLD, 4099, 1);
        test_many_open(MPI_COMM_WORLD);
        test_array_completion(MPI_COMM_WORLD, 1001, 11, 1);
        test_array_completion(MPI_COMM_WORLD, 17, 12, 0);
        test_waitany_order(MPI_COMM_WORLD);
        test_large_count(MPI_COMM_WORLD);
        test_barrier(MPI_COMM_WORLD, 0);
        test_barrier(MPI_COMM_WORLD, 1);
        test_reductions(MPI_COMM_SELF, 5, 3);
        test_movement(MPI_COMM_SELF, 5, 3);
        test_vector(MPI_COMM_SELF, 5, 3);
        test_reduce_scatter(MPI_COMM_SELF, 5, 3);
        /* communicators made and freed in a loop: split (reversed order), dup */
        int rounds = quick ? 4 : 12;
        for (int i = 0; i < rounds; i++) {
            MPI_Comm half, dup;
            MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &half));
            MPI_OK(MPI_Comm_dup(i % 2 ? half : MPI_COMM_WORLD, &dup));
            int v = rank + i, s1 = 0, r1 = 0, s2 = 0, r2 = 0;
            where = "split comm";
            MPI_OK(MPI_Allreduce(&v, &s1, 1, MPI_INT, MPI_SUM, half));
            MPI_OK(PMPI_Allreduce(&v, &r1, 1, MPI_INT, MPI_SUM, half));
            same("allreduce on split", &s1, &r1, sizeof s1);
            where = "dup comm";
            MPI_Request rq;
            MPI_OK(MPI_Iallreduce(&v, &s2, 1, MPI_INT, MPI_MAX, dup, &rq));
            MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
            MPI_OK(PMPI_Allreduce(&v, &r2, 1, MPI_INT, MPI_MAX, dup));
            same("iallreduce on dup", &s2, &r2, sizeof s2);
            if (i == 0) {
                test_reductions(half, 33, 5);
                test_movement(dup, 33, 5);
                if (!quick) test_vector(dup, 33, 5);
            }
            if (i == 1) { /* free with an operation in flight; wait afterwards */
                MPI_OK(MPI_Ibcast(&v, 1, MPI_INT, 0, dup, &rq));
                MPI_OK(MPI_Comm_free(&dup));
                MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
            } else {
                MPI_OK(MPI_Comm_free(&dup));
            }
            MPI_OK(MPI_Comm_free(&half));
        }
    }
    int all = 0;
    where = "final";
    MPI_OK(PMPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    if (rank == 0) printf("test_mpi_calls: %d ranks, %d errors\n", size, all);
    MPI_Finalize();
    return all == 0 ? 0 : 1;
}
