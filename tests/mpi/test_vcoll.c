/*
 * test_vcoll.c - the vector collectives (allgatherv, alltoallv, gatherv,
 * scatterv, reduce_scatterv) compared
 * with MPI's own on MPI_COMM_WORLD (allgatherv also with a reference built
 * locally): blocks of uneven length (empty ones
 * among them) at displacements with gaps and in reverse rank order, whose
 * gaps must come back untouched; blocking, nonblocking (two of each in
 * flight at once, their count arrays overwritten right after the call) and
 * in place; several datatypes; in stream order on a communicator bound to a
 * host stream; bad arguments (and, under WEFT_CHECK_ARGS=1, totals that differ
 * across ranks) refused with the documented
 * status, and the communicator still working after them. Runs under
 * mpiexec -n 1..4.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "mpitest.h"
#include "weft_stream.h"

typedef struct {
    weft_datatype_t dt;
    MPI_Datatype mdt;
} dtpair_t;
static const dtpair_t dts[] = {
    {WEFT_INT32, MPI_INT32_T}, {WEFT_FLOAT64, MPI_DOUBLE}, {WEFT_UINT8, MPI_UINT8_T},
    {WEFT_INT16, MPI_INT16_T},
};
#define NDTS (sizeof dts / sizeof dts[0])

/* Length patterns of the block rank `from` sends rank `to` (elements). */
#define NPAT 4
static int pat_len(int pat, int from, int to, int p)
{
    switch (pat) {
    case 0: return 1 + from + 2 * to;                      /* small, all different */
    case 1: return (from + to) % 2 ? 0 : 3 + from;          /* every other one empty */
    case 2: return (from * 7 + to * 3) % 5 * 1031;          /* large and empty ones */
    default: return from == (to + 1) % p ? 20011 : 0;       /* one block per rank */
    }
}


/* Displacements of n blocks of lengths len[]: reverse order, a gap of
 * `gap` elements before each block. Returns the extent in elements. */
static size_t layout(const int *len, int n, int gap, int *displ)
{
    size_t at = 0;
    for (int r = n - 1; r >= 0; r--) {
        at += (size_t)gap;
        displ[r] = (int)at;
        at += (size_t)len[r];
    }
    return at + (size_t)gap;
}


/* int arrays as the size_t arrays Weft takes */
static void to_sizes(const int *a, size_t *s, int n)
{
    for (int i = 0; i < n; i++) s[i] = (size_t)a[i];
}

/* mode 0 blocking, 1 nonblocking, 2 in place */
static void test_allgatherv(mt_ctx_t *t)
{
    const int p = t->size, me = t->rank;
    int *len = mt_xmalloc(t, sizeof(int) * p), *displ = mt_xmalloc(t, sizeof(int) * p);
    size_t *slen = mt_xmalloc(t, sizeof(size_t) * p), *sdispl = mt_xmalloc(t, sizeof(size_t) * p);
    for (size_t d = 0; d < NDTS; d++)
        for (int pat = 0; pat < NPAT; pat++)
            for (int mode = 0; mode < 3; mode++) {
                const weft_datatype_t dt = dts[d].dt;
                const size_t es = mt_dtype_size(dt);
                for (int r = 0; r < p; r++) len[r] = pat_len(pat, r, 0, p);
                const size_t ext = layout(len, p, 3 + pat, displ);
                char what[128];
                snprintf(what, sizeof what, "allgatherv %s pattern %d mode %d",
                         weft_datatype_name(dt), pat, mode);
                char *in = mt_xmalloc(t, (size_t)len[me] * es), *out = mt_xmalloc(t, ext * es),
                     *ref = mt_xmalloc(t, ext * es);
                mt_fill(in, (size_t)len[me], dt, WEFT_MAX, me, 31 + (uint32_t)pat);
                memset(ref, 0x5c, ext * es); /* the gaps: must stay so */
                memset(out, 0x5c, ext * es);
                /* Every rank's block is known here (mt_fill of its rank), so
                 * the reference is built locally; MPI_Allgatherv checks it
                 * on more than one rank (MPICH 4.0.2 on one rank ignores
                 * displs: its block lands at offset 0). */
                for (int r = 0; r < p; r++)
                    mt_fill(ref + (size_t)displ[r] * es, (size_t)len[r], dt, WEFT_MAX, r,
                            31 + (uint32_t)pat);
                if (p > 1) {
                    char *mref = mt_xmalloc(t, ext * es);
                    memset(mref, 0x5c, ext * es);
                    MPI_Allgatherv(in, len[me], dts[d].mdt, mref, len, displ, dts[d].mdt,
                                   MPI_COMM_WORLD);
                    MT_CHECK(t, memcmp(mref, ref, ext * es) == 0,
                             "%s: MPI_Allgatherv differs from the local reference", what);
                    free(mref);
                }
                to_sizes(len, slen, p);
                to_sizes(displ, sdispl, p);
                weft_request_t req = WEFT_REQUEST_NULL;
                weft_status_t st;
                if (mode == 2) {
                    memcpy(out + (size_t)displ[me] * es, in, (size_t)len[me] * es);
                    st = weft_allgatherv(WEFT_IN_PLACE, 0, out, slen, sdispl, dt, t->comm);
                } else if (mode == 1) {
                    st = weft_iallgatherv(in, (size_t)len[me], out, slen, sdispl, dt, t->comm, &req);
                    /* read during the call only: reusing them now is allowed */
                    memset(slen, 0xff, sizeof(size_t) * p);
                    memset(sdispl, 0xff, sizeof(size_t) * p);
                } else {
                    st = weft_allgatherv(in, (size_t)len[me], out, slen, sdispl, dt, t->comm);
                }
                if (mt_call_done(t, st, mode == 1, &req, what))
                    MT_CHECK(t, memcmp(out, ref, ext * es) == 0, "%s: differs from MPI_Allgatherv",
                             what);
                free(in), free(out), free(ref);
            }
    free(len), free(displ), free(slen), free(sdispl);
}

static void test_alltoallv(mt_ctx_t *t)
{
    const int p = t->size, me = t->rank;
    int *sl = mt_xmalloc(t, sizeof(int) * p), *sd = mt_xmalloc(t, sizeof(int) * p);
    int *rl = mt_xmalloc(t, sizeof(int) * p), *rd = mt_xmalloc(t, sizeof(int) * p);
    size_t *z = mt_xmalloc(t, sizeof(size_t) * 4 * (size_t)p);
    size_t *zsl = z, *zsd = z + p, *zrl = z + 2 * p, *zrd = z + 3 * p;
    for (size_t d = 0; d < NDTS; d++)
        for (int pat = 0; pat < NPAT; pat++)
            for (int mode = 0; mode < 3; mode++) {
                const weft_datatype_t dt = dts[d].dt;
                const size_t es = mt_dtype_size(dt);
                for (int r = 0; r < p; r++) {
                    sl[r] = pat_len(pat, me, r, p);
                    rl[r] = pat_len(pat, r, me, p);
                }
                if (mode == 2) /* in place: what r sends me, I send r */
                    for (int r = 0; r < p; r++) sl[r] = rl[r] = pat_len(pat, r + me, 0, p);
                const size_t sext = layout(sl, p, 1 + pat, sd), rext = layout(rl, p, 2 + pat, rd);
                char what[128];
                snprintf(what, sizeof what, "alltoallv %s pattern %d mode %d",
                         weft_datatype_name(dt), pat, mode);
                char *in = mt_xmalloc(t, sext * es), *out = mt_xmalloc(t, rext * es),
                     *ref = mt_xmalloc(t, rext * es);
                mt_fill(in, sext, dt, WEFT_MAX, me, 47 + (uint32_t)pat);
                memset(ref, 0x3a, rext * es);
                memset(out, 0x3a, rext * es);
                to_sizes(sl, zsl, p), to_sizes(sd, zsd, p), to_sizes(rl, zrl, p), to_sizes(rd, zrd, p);
                weft_request_t req = WEFT_REQUEST_NULL;
                weft_status_t st;
                if (mode == 2) {
                    /* the blocks to send, laid out as they will be received */
                    mt_fill(out, rext, dt, WEFT_MAX, me, 59 + (uint32_t)pat);
                    memcpy(ref, out, rext * es);
                    MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, dts[d].mdt, ref, rl, rd, dts[d].mdt,
                                  MPI_COMM_WORLD);
                    st = weft_alltoallv(WEFT_IN_PLACE, NULL, NULL, out, zrl, zrd, dt, t->comm);
                } else {
                    MPI_Alltoallv(in, sl, sd, dts[d].mdt, ref, rl, rd, dts[d].mdt, MPI_COMM_WORLD);
                    if (mode == 1) {
                        st = weft_ialltoallv(in, zsl, zsd, out, zrl, zrd, dt, t->comm, &req);
                        memset(z, 0xff, sizeof(size_t) * 4 * (size_t)p);
                    } else {
                        st = weft_alltoallv(in, zsl, zsd, out, zrl, zrd, dt, t->comm);
                    }
                }
                if (mt_call_done(t, st, mode == 1, &req, what))
                    MT_CHECK(t, memcmp(out, ref, rext * es) == 0, "%s: differs from MPI_Alltoallv",
                             what);
                free(in), free(out), free(ref);
            }
    free(sl), free(sd), free(rl), free(rd), free(z);
}

/* gatherv and scatterv at every root in turn (mode 0 blocking, 1 nonblocking,
 * 2 in place at the root): every rank's data is known everywhere (mt_fill
 * of its rank), so the references are built locally; MPI_Gatherv and
 * MPI_Scatterv check them on more than one rank. */
static void test_rooted(mt_ctx_t *t)
{
    const int p = t->size, me = t->rank;
    int *len = mt_xmalloc(t, sizeof(int) * p), *displ = mt_xmalloc(t, sizeof(int) * p);
    size_t *zl = mt_xmalloc(t, sizeof(size_t) * p), *zd = mt_xmalloc(t, sizeof(size_t) * p);
    for (size_t d = 0; d < NDTS; d++)
        for (int pat = 0; pat < NPAT; pat++)
            for (int mode = 0; mode < 3; mode++) {
                const int root = (int)(d + (size_t)pat + (size_t)mode) % p;
                const weft_datatype_t dt = dts[d].dt;
                const size_t es = mt_dtype_size(dt);
                for (int r = 0; r < p; r++) len[r] = pat_len(pat, r, root, p);
                const size_t ext = layout(len, p, 2 + pat, displ);
                to_sizes(len, zl, p);
                to_sizes(displ, zd, p);
                const uint32_t salt = 80 + (uint32_t)(pat + 4 * (int)d);
                char what[128];
                /* gatherv: rank r's block is mt_fill(len[r], r) */
                snprintf(what, sizeof what, "gatherv %s pattern %d mode %d root %d",
                         weft_datatype_name(dt), pat, mode, root);
                char *in = mt_xmalloc(t, (size_t)len[me] * es), *out = mt_xmalloc(t, ext * es);
                char *ref = mt_xmalloc(t, ext * es);
                mt_fill(in, (size_t)len[me], dt, WEFT_MAX, me, salt);
                memset(out, 0x6b, ext * es);
                memset(ref, 0x6b, ext * es);
                for (int r = 0; r < p; r++)
                    mt_fill(ref + (size_t)displ[r] * es, (size_t)len[r], dt, WEFT_MAX, r, salt);
                weft_request_t req = WEFT_REQUEST_NULL;
                weft_status_t st;
                const int at_root = me == root;
                if (mode == 2 && at_root) {
                    memcpy(out + (size_t)displ[me] * es, in, (size_t)len[me] * es);
                    st = weft_gatherv(WEFT_IN_PLACE, 0, out, zl, zd, dt, root, t->comm);
                } else if (mode == 1) {
                    st = weft_igatherv(in, (size_t)len[me], at_root ? out : NULL, at_root ? zl : NULL,
                                       at_root ? zd : NULL, dt, root, t->comm, &req);
                } else {
                    st = weft_gatherv(in, (size_t)len[me], out, zl, zd, dt, root, t->comm);
                }
                if (mt_call_done(t, st, mode == 1, &req, what) && at_root)
                    MT_CHECK(t, memcmp(out, ref, ext * es) == 0, "%s: wrong", what);
                if (p > 1) {
                    char *mref = mt_xmalloc(t, ext * es);
                    memset(mref, 0x6b, ext * es);
                    MPI_Gatherv(in, len[me], dts[d].mdt, mref, len, displ, dts[d].mdt, root,
                                MPI_COMM_WORLD);
                    if (at_root)
                        MT_CHECK(t, memcmp(mref, ref, ext * es) == 0,
                                 "%s: MPI_Gatherv differs from the local reference", what);
                    free(mref);
                }
                free(in), free(out), free(ref);
                /* scatterv: the root's buffer is mt_fill(ext, root) */
                snprintf(what, sizeof what, "scatterv %s pattern %d mode %d root %d",
                         weft_datatype_name(dt), pat, mode, root);
                char *all = mt_xmalloc(t, ext * es), *mine = mt_xmalloc(t, (size_t)len[me] * es);
                mt_fill(all, ext, dt, WEFT_MAX, root, salt + 1);
                memset(mine, 0x6b, (size_t)len[me] * es);
                if (mode == 2 && at_root) {
                    st = weft_scatterv(all, zl, zd, (void *)WEFT_IN_PLACE, 0, dt, root, t->comm);
                    memcpy(mine, all + (size_t)displ[me] * es, (size_t)len[me] * es);
                } else if (mode == 1) {
                    st = weft_iscatterv(at_root ? all : NULL, at_root ? zl : NULL,
                                        at_root ? zd : NULL, mine, (size_t)len[me], dt, root,
                                        t->comm, &req);
                } else {
                    st = weft_scatterv(all, zl, zd, mine, (size_t)len[me], dt, root, t->comm);
                }
                if (mt_call_done(t, st, mode == 1, &req, what))
                    MT_CHECK(t, memcmp(mine, all + (size_t)displ[me] * es, (size_t)len[me] * es) == 0,
                             "%s: wrong", what);
                if (p > 1) {
                    char *mmine = mt_xmalloc(t, (size_t)len[me] * es);
                    MPI_Scatterv(all, len, displ, dts[d].mdt, mmine, len[me], dts[d].mdt, root,
                                 MPI_COMM_WORLD);
                    MT_CHECK(t, memcmp(mmine, all + (size_t)displ[me] * es, (size_t)len[me] * es) == 0,
                             "%s: MPI_Scatterv differs from the local reference", what);
                    free(mmine);
                }
                free(all), free(mine);
            }
    free(len), free(displ), free(zl), free(zd);
}

/* reduce_scatterv against MPI_Reduce_scatter (mode 0 blocking, 1
 * nonblocking, 2 in place: the result at recvbuf's start). */
static void test_reduce_scatterv(mt_ctx_t *t)
{
    static const struct {
        weft_datatype_t dt;
        weft_op_t op;
    } dops[] = {{WEFT_INT32, WEFT_SUM}, {WEFT_FLOAT64, WEFT_MAX}, {WEFT_UINT8, WEFT_BXOR},
                {WEFT_INT16, WEFT_MIN}, {WEFT_FLOAT32, WEFT_SUM}, {WEFT_INT64, WEFT_PROD}};
    const int p = t->size, me = t->rank;
    int *len = mt_xmalloc(t, sizeof(int) * p);
    size_t *zl = mt_xmalloc(t, sizeof(size_t) * p);
    for (size_t d = 0; d < sizeof dops / sizeof dops[0]; d++)
        for (int pat = 0; pat < NPAT; pat++)
            for (int mode = 0; mode < 3; mode++) {
                const weft_datatype_t dt = dops[d].dt;
                const weft_op_t op = dops[d].op;
                const size_t es = mt_dtype_size(dt);
                size_t total = 0;
                for (int r = 0; r < p; r++) {
                    len[r] = pat_len(pat, r, 0, p);
                    zl[r] = (size_t)len[r];
                    total += zl[r];
                }
                char what[128];
                snprintf(what, sizeof what, "reduce_scatterv %s %s pattern %d mode %d",
                         weft_datatype_name(dt), weft_op_name(op), pat, mode);
                char *in = mt_xmalloc(t, total * es), *out = mt_xmalloc(t, total * es);
                char *ref = mt_xmalloc(t, (size_t)len[me] * es);
                mt_fill(in, total, dt, op, me, 101 + (uint32_t)pat);
                MPI_Reduce_scatter(in, ref, len, mt_mpi_dtype(dt), mt_mpi_op(op), MPI_COMM_WORLD);
                weft_request_t req = WEFT_REQUEST_NULL;
                weft_status_t st;
                if (mode == 2) {
                    memcpy(out, in, total * es);
                    st = weft_reduce_scatterv(WEFT_IN_PLACE, out, zl, dt, op, t->comm);
                } else if (mode == 1) {
                    st = weft_ireduce_scatterv(in, out, zl, dt, op, t->comm, &req);
                    memset(zl, 0xff, sizeof(size_t) * p); /* read during the call only */
                } else {
                    st = weft_reduce_scatterv(in, out, zl, dt, op, t->comm);
                }
                if (mt_call_done(t, st, mode == 1, &req, what))
                    mt_compare(t, out, ref, (size_t)len[me], dt, dt == WEFT_FLOAT32 ? 1e-5 : 0.0,
                               what);
                free(in), free(out), free(ref);
            }
    free(len), free(zl);
}

/* An allgatherv and an alltoallv each twice in flight at once, waited on in
 * reverse order. */
static void test_inflight(mt_ctx_t *t)
{
    const int p = t->size, me = t->rank;
    enum { N = 2, B = 777 };
    size_t *cnt = mt_xmalloc(t, sizeof(size_t) * p), *dsp = mt_xmalloc(t, sizeof(size_t) * p);
    int *icnt = mt_xmalloc(t, sizeof(int) * p), *idsp = mt_xmalloc(t, sizeof(int) * p);
    for (int r = 0; r < p; r++) {
        icnt[r] = B + r;
        idsp[r] = r ? idsp[r - 1] + icnt[r - 1] : 0;
        cnt[r] = (size_t)icnt[r];
        dsp[r] = (size_t)idsp[r];
    }
    const size_t tot = (size_t)idsp[p - 1] + (size_t)icnt[p - 1];
    float *gin[N], *gout[N], *aout[N], *ref = mt_xmalloc(t, tot * sizeof(float));
    float *ain = mt_xmalloc(t, (size_t)p * cnt[me] * sizeof(float)), *aref = mt_xmalloc(t, tot * sizeof(float));
    weft_request_t req[2 * N];
    for (int k = 0; k < N; k++) {
        gin[k] = mt_xmalloc(t, cnt[me] * sizeof(float));
        gout[k] = mt_xmalloc(t, tot * sizeof(float));
        aout[k] = mt_xmalloc(t, tot * sizeof(float));
        mt_fill(gin[k], cnt[me], WEFT_FLOAT32, WEFT_MAX, me, 70 + (uint32_t)k);
    }
    /* alltoallv with every block of length cnt[r] for rank r both ways is
     * symmetric only when cnt is the same per peer: send cnt[me] to everyone */
    size_t *same = mt_xmalloc(t, sizeof(size_t) * p), *sdsp = mt_xmalloc(t, sizeof(size_t) * p);
    int *isame = mt_xmalloc(t, sizeof(int) * p), *isdsp = mt_xmalloc(t, sizeof(int) * p);
    for (int r = 0; r < p; r++) {
        same[r] = cnt[me];
        sdsp[r] = (size_t)r * cnt[me];
        isame[r] = icnt[me];
        isdsp[r] = r * icnt[me];
    }
    mt_fill(ain, (size_t)p * cnt[me], WEFT_FLOAT32, WEFT_MAX, me, 90);
    MPI_Alltoallv(ain, isame, isdsp, MPI_FLOAT, aref, icnt, idsp, MPI_FLOAT, MPI_COMM_WORLD);
    for (int k = 0; k < N; k++) {
        MT_STATUS(t, weft_iallgatherv(gin[k], cnt[me], gout[k], cnt, dsp, WEFT_FLOAT32, t->comm,
                                      &req[2 * k]), WEFT_SUCCESS, "iallgatherv in flight");
        MT_STATUS(t, weft_ialltoallv(ain, same, sdsp, aout[k], cnt, dsp, WEFT_FLOAT32, t->comm,
                                     &req[2 * k + 1]), WEFT_SUCCESS, "ialltoallv in flight");
    }
    for (int i = 2 * N - 1; i >= 0; i--)
        MT_STATUS(t, weft_wait(&req[i]), WEFT_SUCCESS, "wait on a vector collective");
    for (int k = 0; k < N; k++) {
        MPI_Allgatherv(gin[k], icnt[me], MPI_FLOAT, ref, icnt, idsp, MPI_FLOAT, MPI_COMM_WORLD);
        MT_CHECK(t, memcmp(gout[k], ref, tot * sizeof(float)) == 0, "iallgatherv %d in flight", k);
        MT_CHECK(t, memcmp(aout[k], aref, tot * sizeof(float)) == 0, "ialltoallv %d in flight", k);
        free(gin[k]), free(gout[k]), free(aout[k]);
    }
    free(cnt), free(dsp), free(icnt), free(idsp), free(ref), free(ain), free(aref);
    free(same), free(sdsp), free(isame), free(isdsp);
}

static void test_errors(mt_ctx_t *t)
{
    const int p = t->size, me = t->rank;
    size_t *c = mt_xmalloc(t, sizeof(size_t) * p), *d = mt_xmalloc(t, sizeof(size_t) * p);
    int x[8] = {0}, y[64] = {0};
    for (int r = 0; r < p; r++) c[r] = 1, d[r] = (size_t)r;
    MT_STATUS(t, weft_allgatherv(x, 1, y, NULL, d, WEFT_INT32, t->comm), WEFT_ERR_INVALID_ARG,
              "allgatherv NULL counts");
    MT_STATUS(t, weft_allgatherv(x, 2, y, c, d, WEFT_INT32, t->comm), WEFT_ERR_INVALID_ARG,
              "allgatherv sendcount differs from recvcounts[rank]");
    MT_STATUS(t, weft_allgatherv(x, 1, NULL, c, d, WEFT_INT32, t->comm), WEFT_ERR_INVALID_ARG,
              "allgatherv NULL recvbuf");
    MT_STATUS(t, weft_allgatherv(x, 1, y, c, d, (weft_datatype_t)99, t->comm), WEFT_ERR_DATATYPE,
              "allgatherv datatype");
    MT_STATUS(t, weft_iallgatherv(x, 1, y, c, d, WEFT_INT32, t->comm, NULL), WEFT_ERR_INVALID_ARG,
              "iallgatherv NULL request");
    MT_STATUS(t, weft_allgatherv(x, 1, y, c, d, WEFT_INT32, NULL), WEFT_ERR_INVALID_COMM,
              "allgatherv NULL comm");
    d[p - 1] = SIZE_MAX / 2;
    MT_STATUS(t, weft_allgatherv(x, 1, y, c, d, WEFT_INT32, t->comm), WEFT_ERR_COUNT_OVERFLOW,
              "allgatherv displacement overflow");
    d[p - 1] = (size_t)(p - 1);
    MT_STATUS(t, weft_alltoallv(x, c, NULL, y, c, d, WEFT_INT32, t->comm), WEFT_ERR_INVALID_ARG,
              "alltoallv NULL send displacements");
    MT_STATUS(t, weft_alltoallv(x, c, d, y, NULL, d, WEFT_INT32, t->comm), WEFT_ERR_INVALID_ARG,
              "alltoallv NULL receive counts");
    c[me] = 2;
    size_t *c1 = mt_xmalloc(t, sizeof(size_t) * p);
    for (int r = 0; r < p; r++) c1[r] = 1;
    MT_STATUS(t, weft_alltoallv(x, c, d, y, c1, d, WEFT_INT32, t->comm), WEFT_ERR_INVALID_ARG,
              "alltoallv own block lengths differ");
    c[me] = SIZE_MAX / 3;
    MT_STATUS(t, weft_alltoallv(x, c, d, y, c1, d, WEFT_INT32, t->comm), WEFT_ERR_COUNT_OVERFLOW,
              "alltoallv count overflow");
    MT_STATUS(t, weft_ialltoallv(x, c1, d, y, c1, d, WEFT_INT32, t->comm, NULL),
              WEFT_ERR_INVALID_ARG, "ialltoallv NULL request");
    MT_STATUS(t, weft_alltoallv(y, c1, d, y, c1, d, WEFT_INT32, t->comm), WEFT_ERR_INVALID_ARG,
              "alltoallv sendbuf is recvbuf without WEFT_IN_PLACE");
    /* An empty block's displacement is never looked at (MPI allows any):
     * in place too, where the blocks to send are copied first. */
    for (int r = 0; r < p; r++) c[r] = r == me ? 0 : 1, d[r] = r == me ? SIZE_MAX / 2 : (size_t)r;
    for (int r = 0; r < p; r++) y[r] = 10 * me + r;
    if (MT_STATUS(t, weft_alltoallv(WEFT_IN_PLACE, NULL, NULL, y, c, d, WEFT_INT32, t->comm),
                  WEFT_SUCCESS, "alltoallv in place, an empty block far away"))
        for (int r = 0; r < p; r++)
            MT_CHECK(t, r == me || y[r] == 10 * r + me, "alltoallv in place: block %d is %d", r,
                     y[r]);
    MT_STATUS(t, weft_gatherv(x, 1, y, c, d, WEFT_INT32, p, t->comm), WEFT_ERR_INVALID_ARG,
              "gatherv root out of range");
    MT_STATUS(t, weft_scatterv(x, c, d, y, 1, WEFT_INT32, -1, t->comm), WEFT_ERR_INVALID_ARG,
              "scatterv root out of range");
    MT_STATUS(t, weft_igatherv(x, 1, y, c, d, WEFT_INT32, 0, t->comm, NULL), WEFT_ERR_INVALID_ARG,
              "igatherv NULL request");
    MT_STATUS(t, weft_gatherv(x, 1, y, c, d, (weft_datatype_t)99, 0, t->comm), WEFT_ERR_DATATYPE,
              "gatherv datatype");
    if (p > 1) { /* WEFT_IN_PLACE off the root, on every rank that is not root 0 */
        const int root = me == 0 ? 1 : 0;
        MT_STATUS(t, weft_gatherv(WEFT_IN_PLACE, 1, y, c, d, WEFT_INT32, root, t->comm),
                  WEFT_ERR_INVALID_ARG, "gatherv in place off the root");
        MT_STATUS(t, weft_scatterv(x, c, d, (void *)WEFT_IN_PLACE, 1, WEFT_INT32, root, t->comm),
                  WEFT_ERR_INVALID_ARG, "scatterv in place off the root");
    }
    for (int r = 0; r < p; r++) c[r] = 1, d[r] = (size_t)r;
    MT_STATUS(t, weft_gatherv(x, 1, y, NULL, NULL, WEFT_INT32, me, t->comm), WEFT_ERR_INVALID_ARG,
              "gatherv NULL counts at the root (every rank its own root: each refuses alone)");
    MT_STATUS(t, weft_scatterv(x, c, d, y, 3, WEFT_INT32, me, t->comm), WEFT_ERR_INVALID_ARG,
              "scatterv recvcount differs from the root's sendcounts[root]");
    MT_STATUS(t, weft_reduce_scatterv(x, y, c, WEFT_FLOAT32, WEFT_AVG, t->comm),
              WEFT_ERR_UNSUPPORTED, "reduce_scatterv avg");
    MT_STATUS(t, weft_reduce_scatterv(x, y, NULL, WEFT_INT32, WEFT_SUM, t->comm),
              WEFT_ERR_INVALID_ARG, "reduce_scatterv NULL counts");
    MT_STATUS(t, weft_reduce_scatterv(x, y, c, WEFT_FLOAT32, WEFT_BAND, t->comm), WEFT_ERR_DATATYPE,
              "reduce_scatterv band on floats");
    MT_STATUS(t, weft_ireduce_scatterv(x, y, c, WEFT_INT32, WEFT_SUM, t->comm, NULL),
              WEFT_ERR_INVALID_ARG, "ireduce_scatterv NULL request");
    { /* recvbuf NULL where this rank's block is empty (MPI allows it) */
        size_t *z = mt_xmalloc(t, sizeof(size_t) * p);
        int *in = mt_xmalloc(t, sizeof(int) * p), out = -1;
        for (int r = 0; r < p; r++) z[r] = r == 0 ? 1 : 0, in[r] = 0;
        in[0] = 3 + me;
        if (MT_STATUS(t, weft_reduce_scatterv(in, me == 0 ? &out : NULL, z, WEFT_INT32, WEFT_SUM,
                                              t->comm), WEFT_SUCCESS,
                      "reduce_scatterv, NULL recvbuf for an empty block"))
            MT_CHECK(t, me != 0 || out == 3 * p + p * (p - 1) / 2,
                     "reduce_scatterv, one block: %d", out);
        free(z), free(in);
    }
    /* WEFT_CHECK_ARGS=1: ranks whose allgatherv totals differ all fail (no
     * rank waits for a block its peer does not send). */
    if (p > 1 && mt_env_long("WEFT_CHECK_ARGS", 0) == 1) {
        for (int r = 0; r < p; r++) c[r] = 1, d[r] = (size_t)r + (r > 0);
        c[0] = me == 0 ? 2 : 1;
        MT_STATUS(t, weft_allgatherv(x, c[me], y, c, d, WEFT_INT32, t->comm), WEFT_ERR_INVALID_ARG,
                  "allgatherv, totals differ across ranks (WEFT_CHECK_ARGS)");
    }
    /* After the refusals the communicator still works. */
    for (int r = 0; r < p; r++) x[0] = 100 + me, c[r] = 1, d[r] = (size_t)r;
    if (MT_STATUS(t, weft_allgatherv(x, 1, y, c, d, WEFT_INT32, t->comm), WEFT_SUCCESS,
                  "allgatherv after errors"))
        for (int r = 0; r < p; r++)
            MT_CHECK(t, y[r] == 100 + r, "allgatherv after errors: block %d is %d", r, y[r]);
    free(c), free(d), free(c1);
}

/* The input of a stream-ordered call, written by a task on the stream that
 * first sleeps 20 ms: the collective must wait for it. */
typedef struct late_fill {
    int32_t *buf;
    size_t n;
    int32_t base;
} late_fill_t;

static weft_status_t late_fill(void *arg)
{
    late_fill_t *f = arg;
    struct timespec ts = {0, 20 * 1000 * 1000};
    while (nanosleep(&ts, &ts) != 0) {}
    for (size_t i = 0; i < f->n; i++) f->buf[i] = f->base + (int32_t)i;
    return WEFT_SUCCESS;
}

/* On a communicator bound to a host stream: both calls in stream order
 * (their input written by the task before them), blocking and not. */
static void test_stream_order(mt_ctx_t *t)
{
    const int p = t->size, me = t->rank;
    weft_stream_t s;
    weft_comm_t c;
    if (!MT_STATUS(t, weft_stream_create_host(&s), WEFT_SUCCESS, "stream create")) return;
    if (!MT_STATUS(t, weft_comm_create(MPI_COMM_WORLD, s, &c), WEFT_SUCCESS, "comm create")) {
        weft_stream_destroy(s);
        return;
    }
    size_t *cnt = mt_xmalloc(t, sizeof(size_t) * p), *dsp = mt_xmalloc(t, sizeof(size_t) * p);
    size_t tot = 0;
    for (int r = 0; r < p; r++) cnt[r] = 100 + 13 * (size_t)r, dsp[r] = tot, tot += cnt[r];
    int32_t *in = mt_xmalloc(t, sizeof(int32_t) * cnt[me] * p), *out = mt_xmalloc(t, sizeof(int32_t) * tot);
    for (int nb = 0; nb < 2; nb++) {
        /* allgatherv: rank r's block is base(r) + i */
        late_fill_t f = {in, cnt[me], 1000 * (me + 1) + nb};
        memset(out, 0, sizeof(int32_t) * tot);
        MT_STATUS(t, weft_stream_enqueue(s, late_fill, &f), WEFT_SUCCESS, "enqueue the input");
        weft_request_t req = WEFT_REQUEST_NULL;
        weft_status_t st = nb ? weft_iallgatherv(in, cnt[me], out, cnt, dsp, WEFT_INT32, c, &req)
                              : weft_allgatherv(in, cnt[me], out, cnt, dsp, WEFT_INT32, c);
        MT_STATUS(t, st, WEFT_SUCCESS, "allgatherv on a stream comm");
        if (nb) MT_STATUS(t, weft_wait(&req), WEFT_SUCCESS, "wait (the stream waits)");
        MT_STATUS(t, weft_stream_synchronize(s), WEFT_SUCCESS, "synchronize");
        long bad = 0;
        for (int r = 0; r < p; r++)
            for (size_t i = 0; i < cnt[r]; i++)
                bad += out[dsp[r] + i] != 1000 * (r + 1) + nb + (int32_t)i;
        MT_CHECK(t, bad == 0, "allgatherv on a stream comm (nb %d): %ld wrong", nb, bad);
        /* alltoallv: cnt[me] elements to every rank, cnt[r] from rank r */
        size_t *same = mt_xmalloc(t, sizeof(size_t) * p), *sdsp = mt_xmalloc(t, sizeof(size_t) * p);
        for (int r = 0; r < p; r++) same[r] = cnt[me], sdsp[r] = (size_t)r * cnt[me];
        late_fill_t g = {in, cnt[me] * p, 5000 * (me + 1) + nb};
        memset(out, 0, sizeof(int32_t) * tot);
        MT_STATUS(t, weft_stream_enqueue(s, late_fill, &g), WEFT_SUCCESS, "enqueue the input");
        st = nb ? weft_ialltoallv(in, same, sdsp, out, cnt, dsp, WEFT_INT32, c, &req)
                : weft_alltoallv(in, same, sdsp, out, cnt, dsp, WEFT_INT32, c);
        MT_STATUS(t, st, WEFT_SUCCESS, "alltoallv on a stream comm");
        if (nb) MT_STATUS(t, weft_wait(&req), WEFT_SUCCESS, "wait (the stream waits)");
        MT_STATUS(t, weft_stream_synchronize(s), WEFT_SUCCESS, "synchronize");
        bad = 0;
        for (int r = 0; r < p; r++) /* rank r's block for me starts at me * cnt[r] */
            for (size_t i = 0; i < cnt[r]; i++)
                bad += out[dsp[r] + i] != 5000 * (r + 1) + nb + (int32_t)(me * cnt[r] + i);
        MT_CHECK(t, bad == 0, "alltoallv on a stream comm (nb %d): %ld wrong", nb, bad);
        free(same), free(sdsp);
    }
    free(cnt), free(dsp), free(in), free(out);
    MT_STATUS(t, weft_comm_destroy(c), WEFT_SUCCESS, "comm destroy");
    MT_STATUS(t, weft_stream_destroy(s), WEFT_SUCCESS, "stream destroy");
}

int main(int argc, char **argv)
{
    mt_ctx_t t;
    int rc = mt_init(&t, &argc, &argv);
    if (rc != 0) return rc;
    test_errors(&t);
    test_allgatherv(&t);
    test_alltoallv(&t);
    test_rooted(&t);
    test_reduce_scatterv(&t);
    test_inflight(&t);
    test_stream_order(&t);
    mt_info(&t, "test_vcoll: %.2f s", mt_elapsed(&t));
    return mt_finish(&t);
}
