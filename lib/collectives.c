/*
 * collectives.c - public entry points of every collective except allreduce
 * (reduce_scatter, allgather, bcast, reduce, alltoall, gather, scatter,
 * barrier, allgatherv, alltoallv, gatherv, scatterv, reduce_scatterv) and of point-to-point send/recv/sendrecv. Each validates its
 * arguments, resolves the in-place form, picks the algorithm (lib/select.c)
 * and issues an op through the engine (lib/op.c), as lib/allreduce.c does.
 *
 * In-place resolution (what the algorithms see in op->sendbuf/recvbuf):
 *  - reduce_scatter, alltoall, reduce (root): sendbuf = recvbuf;
 *  - allgather: sendbuf = recvbuf + rank*bytes (own block already there);
 *  - gather (root): sendbuf = recvbuf + root*bytes;
 *  - scatter (root, recvbuf = WEFT_IN_PLACE): recvbuf = sendbuf + root*bytes.
 * Algorithms copy the caller's own block only when the two pointers differ.
 *
 * Point to point: transport tag = (1 << WEFT__COLL_TAG_BITS) | user tag, so
 * user messages never match collective traffic (whose tags are below
 * 2^WEFT__COLL_TAG_BITS); user tags must lie in [0, 2^WEFT__COLL_TAG_BITS).
 *
 * Thread contract: every public function here may be called from any thread
 * after weft_init (collectives on one comm in the same order on all ranks);
 * the static start/step functions run on the engine side.
 */
#include <stdlib.h>
#include <string.h>

#include "weft_internal.h"

#define P2P_TAG_LIMIT (1u << WEFT__COLL_TAG_BITS)

/* ---- shared helpers --------------------------------------------------------- */

static weft_status_t check_rank(const char *what, const char *role, int r, const weft__comm_t *c)
{
    if (r < 0 || r >= c->size) {
        WEFT__ERROR("%s: %s %d out of range [0, %d)", what, role, r, c->size);
        return WEFT_ERR_INVALID_ARG;
    }
    return WEFT_SUCCESS;
}

/* bytes * p must fit (the whole vector of gather-like collectives). */
static weft_status_t check_total(const char *what, size_t bytes, int p)
{
    if (p > 0 && bytes > (size_t)PTRDIFF_MAX / (size_t)p) {
        WEFT__ERROR("%s: %zu bytes per rank times %d ranks overflows", what, bytes, p);
        return WEFT_ERR_COUNT_OVERFLOW;
    }
    return WEFT_SUCCESS;
}

static weft_status_t finish_avg_root(weft__op_t *op)
{
    if (op->comm->rank == op->root) weft__scale_avg(op->recvbuf, op->count, op->dtype, op->comm->size);
    return WEFT_SUCCESS;
}

weft_status_t weft__coll_agree(weft__comm_t *c, weft_status_t st, const weft__coll_args_t *a)
{
    if (c->ctl_check != NULL) {
        /* One MAX over (refused, v, -v) per field: every rank passed the
         * same v exactly when max(v) == -max(-v). */
        long long v[9] = {st != WEFT_SUCCESS, a->count, -a->count, a->dtype, -a->dtype,
                          a->op,            -a->op,   a->root,   -a->root};
        long long m[9];
        weft_status_t ast = weft__ctl_allreduce(c->ctl_check, v, m, 9, WEFT__CTL_LLONG,
                                                WEFT__CTL_MAX);
        if (ast != WEFT_SUCCESS) {
            WEFT__ERROR("%s: the WEFT_CHECK_ARGS agreement failed", weft__coll_name(a->coll));
            if (st == WEFT_SUCCESS) st = ast;
        } else if (st == WEFT_SUCCESS) {
            const char *what = m[0]            ? NULL
                               : m[1] != -m[2] ? "count"
                               : m[3] != -m[4] ? "datatype"
                               : m[5] != -m[6] ? "operation"
                               : m[7] != -m[8] ? "root"
                                               : "";
            if (what == NULL || what[0] != '\0') {
                if (what == NULL)
                    WEFT__ERROR("%s: another rank refused its arguments (WEFT_CHECK_ARGS)",
                                weft__coll_name(a->coll));
                else
                    WEFT__ERROR("%s: the ranks passed different values of the %s "
                                "(WEFT_CHECK_ARGS; this rank: %lld)", weft__coll_name(a->coll), what,
                                what[0] == 'c' ? a->count : what[0] == 'd' ? a->dtype
                                                        : what[0] == 'o' ? a->op : a->root);
                st = WEFT_ERR_INVALID_ARG;
            }
        }
    }
    /* Refused: take this call's tag anyway (see the header). */
    if (st != WEFT_SUCCESS) atomic_fetch_add_explicit(&c->seq, 1, memory_order_relaxed);
    return st;
}

/* Caller thread: select, agree (weft__coll_agree) and build a collective op
 * (*out), ready for weft__issue. */
static weft_status_t build_coll(weft__comm_t *c, const weft__coll_args_t *args, const void *sendbuf,
                                void *recvbuf, size_t count, size_t bytes, weft_datatype_t dtype,
                                weft_op_t rop, int root, weft__op_t **out)
{
    const weft_coll_t coll = args->coll;
    weft_algo_t algo = weft__select(c, coll, bytes, dtype, rop,
                                    weft__stream_memkind(c, sendbuf, recvbuf, bytes));
    const weft__algo_impl_t *impl = weft__algo_impl(coll, algo);
    weft_status_t st = WEFT_SUCCESS;
    if (impl == NULL || (impl->supports && !impl->supports(dtype, rop))) {
        WEFT__ERROR("%s: algorithm %s cannot serve %s", weft__coll_name(coll),
                    weft_algo_name(algo) ? weft_algo_name(algo) : "?", weft_datatype_name(dtype));
        st = WEFT_ERR_ALGORITHM;
    }
    WEFT__CHECK(weft__coll_agree(c, st, args));
    weft__op_t *op;
    st = weft__op_new(c, (weft__opkind_t)coll, &op);
    if (st != WEFT_SUCCESS) { /* agreed already: keep the order without a second agreement */
        atomic_fetch_add_explicit(&c->seq, 1, memory_order_relaxed);
        return st;
    }
    op->impl = impl;
    op->algo = algo;
    op->sendbuf = sendbuf;
    op->recvbuf = recvbuf;
    op->count = count;
    op->bytes = bytes;
    op->dtype = dtype;
    op->rop = rop;
    op->root = root;
    if (rop == WEFT_AVG && (coll == WEFT_COLL_REDUCE_SCATTER || coll == WEFT_COLL_REDUCE)) {
        op->finish = coll == WEFT_COLL_REDUCE ? finish_avg_root : weft__finish_avg;
        /* summed in a wider type where one exists (as in allreduce.c) */
        if (weft__avg_wide(dtype) != dtype && c->stream == NULL) {
            const size_t in = coll == WEFT_COLL_REDUCE ? count : count * (size_t)c->size;
            st = weft__avg_prepare(op, in, count);
            if (st != WEFT_SUCCESS) {
                weft__op_free(op);
                atomic_fetch_add_explicit(&c->seq, 1, memory_order_relaxed); /* as a refusal */
                return st;
            }
        }
    }
    *out = op;
    return WEFT_SUCCESS;
}

/* Caller thread: build_coll, then issue. */
static weft_status_t issue_coll(weft__comm_t *c, const weft__coll_args_t *args, const void *sendbuf,
                                void *recvbuf, size_t count, size_t bytes, weft_datatype_t dtype,
                                weft_op_t rop, int root, weft_request_t *req)
{
    weft__op_t *op = NULL;
    WEFT__CHECK(build_coll(c, args, sendbuf, recvbuf, count, bytes, dtype, rop, root, &op));
    return weft__issue(op, req);
}

weft_status_t weft__allgather_internal(weft__comm_t *c, const void *mine, void *all, size_t bytes)
{
    const weft__coll_args_t args = {WEFT_COLL_ALLGATHER, (long long)bytes, WEFT_UINT8, -1, -1};
    weft__op_t *op = NULL;
    WEFT__CHECK(build_coll(c, &args, mine, all, bytes, bytes, WEFT_UINT8, WEFT_SUM, -1, &op));
    op->unbound = 1;
    return weft__issue(op, NULL);
}

/* Nonblocking forms: req must be given; it is NULL until the op is issued. */
#define NB_PROLOGUE(req)                                                        \
    do {                                                                        \
        if ((req) == NULL) return WEFT_ERR_INVALID_ARG;                         \
        *(req) = WEFT_REQUEST_NULL;                                             \
    } while (0)

/* In a collective entry point, once c and args are known: a failed check
 * refuses the call through weft__coll_agree (every rank's order kept). */
#define REFUSE_IF(expr)                                                         \
    do {                                                                        \
        const weft_status_t refuse_st_ = (expr);                                \
        if (refuse_st_ != WEFT_SUCCESS) return weft__coll_agree(c, refuse_st_, &args); \
    } while (0)

/* ---- reduce_scatter ------------------------------------------------------------ */
static weft_status_t reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                    weft_datatype_t dtype, weft_op_t rop, weft_comm_t comm,
                                    weft_request_t *req)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    const weft__coll_args_t args = {WEFT_COLL_REDUCE_SCATTER, (long long)recvcount, dtype, rop, -1};
    REFUSE_IF(weft__check_dtype_op(dtype, rop));
    size_t bytes = 0;
    REFUSE_IF(weft__check_buffers(sendbuf, recvbuf, recvcount, dtype, &bytes));
    REFUSE_IF(check_total("reduce_scatter", bytes, c->size));
    if (sendbuf == WEFT_IN_PLACE) sendbuf = recvbuf;
    return issue_coll(c, &args, sendbuf, recvbuf, recvcount, bytes, dtype, rop, -1, req);
}

weft_status_t weft_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                  weft_datatype_t dtype, weft_op_t op, weft_comm_t comm)
{
    return reduce_scatter(sendbuf, recvbuf, recvcount, dtype, op, comm, NULL);
}

weft_status_t weft_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                   weft_datatype_t dtype, weft_op_t op, weft_comm_t comm,
                                   weft_request_t *req)
{
    NB_PROLOGUE(req);
    return reduce_scatter(sendbuf, recvbuf, recvcount, dtype, op, comm, req);
}

/* ---- allgather -------------------------------------------------------------------- */
static weft_status_t allgather(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
                               weft_comm_t comm, weft_request_t *req)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    const weft__coll_args_t args = {WEFT_COLL_ALLGATHER, (long long)count, dtype, -1, -1};
    size_t bytes = 0;
    REFUSE_IF(weft__check_buffers(sendbuf, recvbuf, count, dtype, &bytes));
    REFUSE_IF(check_total("allgather", bytes, c->size));
    if (sendbuf == WEFT_IN_PLACE) sendbuf = (char *)recvbuf + (size_t)c->rank * bytes;
    return issue_coll(c, &args, sendbuf, recvbuf, count, bytes, dtype, WEFT_SUM, -1, req);
}

weft_status_t weft_allgather(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
                             weft_comm_t comm)
{
    return allgather(sendbuf, recvbuf, count, dtype, comm, NULL);
}

weft_status_t weft_iallgather(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
                              weft_comm_t comm, weft_request_t *req)
{
    NB_PROLOGUE(req);
    return allgather(sendbuf, recvbuf, count, dtype, comm, req);
}

/* ---- bcast ------------------------------------------------------------------------- */
static weft_status_t bcast(void *buf, size_t count, weft_datatype_t dtype, int root, weft_comm_t comm,
                           weft_request_t *req)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    const weft__coll_args_t args = {WEFT_COLL_BCAST, (long long)count, dtype, -1, root};
    REFUSE_IF(weft__dtype_size(dtype) == 0 ? WEFT_ERR_DATATYPE : WEFT_SUCCESS);
    REFUSE_IF(check_rank("bcast", "root", root, c));
    size_t bytes = 0;
    REFUSE_IF(weft__check_buffers(buf, buf, count, dtype, &bytes));
    return issue_coll(c, &args, buf, buf, count, bytes, dtype, WEFT_SUM, root, req);
}

weft_status_t weft_bcast(void *buf, size_t count, weft_datatype_t dtype, int root, weft_comm_t comm)
{
    return bcast(buf, count, dtype, root, comm, NULL);
}

weft_status_t weft_ibcast(void *buf, size_t count, weft_datatype_t dtype, int root, weft_comm_t comm,
                          weft_request_t *req)
{
    NB_PROLOGUE(req);
    return bcast(buf, count, dtype, root, comm, req);
}

/* ---- reduce ------------------------------------------------------------------------- */
static weft_status_t reduce(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
                            weft_op_t rop, int root, weft_comm_t comm, weft_request_t *req)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    const weft__coll_args_t args = {WEFT_COLL_REDUCE, (long long)count, dtype, rop, root};
    REFUSE_IF(weft__check_dtype_op(dtype, rop));
    REFUSE_IF(check_rank("reduce", "root", root, c));
    size_t bytes = 0;
    if (c->rank == root) {
        REFUSE_IF(weft__check_buffers(sendbuf, recvbuf, count, dtype, &bytes));
        if (sendbuf == WEFT_IN_PLACE) sendbuf = recvbuf;
    } else {
        if (sendbuf == WEFT_IN_PLACE) {
            WEFT__ERROR("reduce: WEFT_IN_PLACE is for the root only (rank %d, root %d)", c->rank, root);
            REFUSE_IF(WEFT_ERR_INVALID_ARG);
        }
        REFUSE_IF(weft__check_buffers(sendbuf, sendbuf, count, dtype, &bytes));
        recvbuf = NULL;
    }
    return issue_coll(c, &args, sendbuf, recvbuf, count, bytes, dtype, rop, root, req);
}

weft_status_t weft_reduce(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
                          weft_op_t op, int root, weft_comm_t comm)
{
    return reduce(sendbuf, recvbuf, count, dtype, op, root, comm, NULL);
}

weft_status_t weft_ireduce(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
                           weft_op_t op, int root, weft_comm_t comm, weft_request_t *req)
{
    NB_PROLOGUE(req);
    return reduce(sendbuf, recvbuf, count, dtype, op, root, comm, req);
}

/* ---- alltoall ----------------------------------------------------------------------- */
static weft_status_t alltoall(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
                              weft_comm_t comm, weft_request_t *req)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    const weft__coll_args_t args = {WEFT_COLL_ALLTOALL, (long long)count, dtype, -1, -1};
    size_t bytes = 0;
    REFUSE_IF(weft__check_buffers(sendbuf, recvbuf, count, dtype, &bytes));
    REFUSE_IF(check_total("alltoall", bytes, c->size));
    if (sendbuf == WEFT_IN_PLACE) sendbuf = recvbuf;
    return issue_coll(c, &args, sendbuf, recvbuf, count, bytes, dtype, WEFT_SUM, -1, req);
}

weft_status_t weft_alltoall(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
                            weft_comm_t comm)
{
    return alltoall(sendbuf, recvbuf, count, dtype, comm, NULL);
}

weft_status_t weft_ialltoall(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
                             weft_comm_t comm, weft_request_t *req)
{
    NB_PROLOGUE(req);
    return alltoall(sendbuf, recvbuf, count, dtype, comm, req);
}

/* ---- allgatherv, alltoallv -------------------------------------------------------- */
/* n entries of counts/displs (elements) into byte lengths and offsets, every
 * block's end checked to fit; *extent the furthest end, *total the sum. An
 * empty block's displacement is not looked at (MPI allows any): its offset
 * is 0, and it adds nothing to the extent. */
static weft_status_t v_blocks(const char *what, const char *which, const size_t *counts,
                              const size_t *displs, int n, size_t es, size_t *len, size_t *off,
                              size_t *extent, size_t *total)
{
    if (n > 0 && (counts == NULL || displs == NULL)) {
        WEFT__ERROR("%s: the %s counts or displacements are NULL", what, which);
        return WEFT_ERR_INVALID_ARG;
    }
    const size_t lim = (size_t)PTRDIFF_MAX / es; /* elements */
    size_t ext = 0, sum = 0;
    for (int r = 0; r < n; r++) {
        if (counts[r] == 0) {
            len[r] = off[r] = 0;
            continue;
        }
        if (counts[r] > lim || displs[r] > lim - counts[r] || counts[r] > lim - sum) {
            WEFT__ERROR("%s: %s block of rank %d (%zu elements at %zu) overflows", what, which, r,
                        counts[r], displs[r]);
            return WEFT_ERR_COUNT_OVERFLOW;
        }
        len[r] = counts[r] * es;
        off[r] = displs[r] * es;
        sum += counts[r];
        if (off[r] + len[r] > ext) ext = off[r] + len[r];
    }
    *extent = ext;
    *total = sum;
    return WEFT_SUCCESS;
}

/* The op's block arrays: one allocation of 4 arrays of p (freed with the op). */
static weft__vblocks_t *v_alloc(int p)
{
    weft__vblocks_t *v = malloc(sizeof *v + 4 * (size_t)p * sizeof(size_t));
    if (v == NULL) return NULL;
    size_t *a = (size_t *)(void *)(v + 1);
    *v = (weft__vblocks_t){a, a + p, a + 2 * (size_t)p, a + 3 * (size_t)p, 0};
    return v;
}

/* Caller thread: build_coll for a vector collective of `count` elements
 * (this rank's share: what it receives, or its own block) with its blocks v
 * (owned by the op from here on, freed here on failure), then issue. */
static weft_status_t issue_v(weft__comm_t *c, const weft__coll_args_t *args, const void *sendbuf,
                             void *recvbuf, size_t count, weft_datatype_t dtype, weft_op_t rop,
                             weft__vblocks_t *v, weft_request_t *req)
{
    weft__op_t *op = NULL;
    const size_t es = weft__dtype_size(dtype);
    weft_status_t st = build_coll(c, args, sendbuf, recvbuf, count, count * es, dtype, rop,
                                  args->root, &op);
    if (st != WEFT_SUCCESS) {
        free(v);
        return st;
    }
    op->owned = v;
    op->arg = v;
    return weft__issue(op, req);
}

static weft_status_t allgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                                const size_t *recvcounts, const size_t *displs,
                                weft_datatype_t dtype, weft_comm_t comm, weft_request_t *req)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    const int p = c->size, me = c->rank;
    const size_t es = weft__dtype_size(dtype);
    /* the agreement's count: the whole vector, the same on every rank */
    size_t total = 0;
    for (int r = 0; recvcounts != NULL && r < p; r++) total += recvcounts[r];
    const weft__coll_args_t args = {WEFT_COLL_ALLGATHERV, (long long)total, dtype, -1, -1};
    REFUSE_IF(es == 0 ? WEFT_ERR_DATATYPE : WEFT_SUCCESS);
    weft__vblocks_t *v = v_alloc(p);
    REFUSE_IF(v == NULL ? WEFT_ERR_NO_MEMORY : WEFT_SUCCESS);
    size_t extent = 0;
    weft_status_t st = v_blocks("allgatherv", "receive", recvcounts, displs, p, es, v->recv_len,
                                v->recv_off, &extent, &total);
    if (st == WEFT_SUCCESS && sendbuf != WEFT_IN_PLACE && sendcount != recvcounts[me]) {
        WEFT__ERROR("allgatherv: sendcount %zu differs from recvcounts[%d] = %zu", sendcount, me,
                    recvcounts[me]);
        st = WEFT_ERR_INVALID_ARG;
    }
    if (st == WEFT_SUCCESS && ((extent > 0 && recvbuf == NULL) ||
                               (sendbuf == NULL && recvcounts[me] > 0))) {
        WEFT__ERROR("allgatherv: NULL buffer for a block that is not empty");
        st = WEFT_ERR_INVALID_ARG;
    }
    if (st != WEFT_SUCCESS) {
        free(v);
        return weft__coll_agree(c, st, &args);
    }
    v->recv_extent = extent;
    if (sendbuf == WEFT_IN_PLACE) sendbuf = (char *)recvbuf + v->recv_off[me];
    return issue_v(c, &args, sendbuf, recvbuf, total, dtype, WEFT_SUM, v, req);
}

weft_status_t weft_allgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                              const size_t *recvcounts, const size_t *displs, weft_datatype_t dtype,
                              weft_comm_t comm)
{
    return allgatherv(sendbuf, sendcount, recvbuf, recvcounts, displs, dtype, comm, NULL);
}

weft_status_t weft_iallgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                               const size_t *recvcounts, const size_t *displs, weft_datatype_t dtype,
                               weft_comm_t comm, weft_request_t *req)
{
    NB_PROLOGUE(req);
    return allgatherv(sendbuf, sendcount, recvbuf, recvcounts, displs, dtype, comm, req);
}

static weft_status_t alltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                               void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                               weft_datatype_t dtype, weft_comm_t comm, weft_request_t *req)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    const int p = c->size, me = c->rank;
    const size_t es = weft__dtype_size(dtype);
    /* every rank's totals differ: the agreement compares the datatype only */
    const weft__coll_args_t args = {WEFT_COLL_ALLTOALLV, 0, dtype, -1, -1};
    REFUSE_IF(es == 0 ? WEFT_ERR_DATATYPE : WEFT_SUCCESS);
    weft__vblocks_t *v = v_alloc(p);
    REFUSE_IF(v == NULL ? WEFT_ERR_NO_MEMORY : WEFT_SUCCESS);
    const bool in_place = sendbuf == WEFT_IN_PLACE;
    size_t rext = 0, rtotal = 0, sext = 0, stotal = 0;
    weft_status_t st = v_blocks("alltoallv", "receive", recvcounts, rdispls, p, es, v->recv_len,
                                v->recv_off, &rext, &rtotal);
    if (st == WEFT_SUCCESS && in_place) {
        memcpy(v->send_len, v->recv_len, (size_t)p * sizeof(size_t));
        memcpy(v->send_off, v->recv_off, (size_t)p * sizeof(size_t));
    } else if (st == WEFT_SUCCESS) {
        st = v_blocks("alltoallv", "send", sendcounts, sdispls, p, es, v->send_len, v->send_off,
                      &sext, &stotal);
        if (st == WEFT_SUCCESS && sendcounts[me] != recvcounts[me]) {
            WEFT__ERROR("alltoallv: sendcounts[%d] = %zu differs from recvcounts[%d] = %zu", me,
                        sendcounts[me], me, recvcounts[me]);
            st = WEFT_ERR_INVALID_ARG;
        }
    }
    if (st == WEFT_SUCCESS &&
        ((rext > 0 && recvbuf == NULL) || (!in_place && sext > 0 && sendbuf == NULL))) {
        WEFT__ERROR("alltoallv: NULL buffer for a block that is not empty");
        st = WEFT_ERR_INVALID_ARG;
    }
    if (st == WEFT_SUCCESS && !in_place && sendbuf == recvbuf && (sext > 0 || rext > 0)) {
        WEFT__ERROR("alltoallv: sendbuf is recvbuf (in place is sendbuf = WEFT_IN_PLACE)");
        st = WEFT_ERR_INVALID_ARG;
    }
    if (st != WEFT_SUCCESS) {
        free(v);
        return weft__coll_agree(c, st, &args);
    }
    v->recv_extent = rext;
    if (in_place) sendbuf = recvbuf;
    return issue_v(c, &args, sendbuf, recvbuf, rtotal, dtype, WEFT_SUM, v, req);
}

weft_status_t weft_alltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                             void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                             weft_datatype_t dtype, weft_comm_t comm)
{
    return alltoallv(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dtype, comm, NULL);
}

weft_status_t weft_ialltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                              void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                              weft_datatype_t dtype, weft_comm_t comm, weft_request_t *req)
{
    NB_PROLOGUE(req);
    return alltoallv(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dtype, comm, req);
}

/* reduce_scatterv: the receive arrays of v are the input vector's blocks,
 * end to end (MPI_Reduce_scatter has no displacements). */
static weft_status_t reduce_scatterv(const void *sendbuf, void *recvbuf, const size_t *recvcounts,
                                     weft_datatype_t dtype, weft_op_t rop, weft_comm_t comm,
                                     weft_request_t *req)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    const int p = c->size, me = c->rank;
    const size_t es = weft__dtype_size(dtype);
    size_t total = 0; /* the agreement's count: the whole vector, the same on every rank */
    for (int r = 0; recvcounts != NULL && r < p; r++) total += recvcounts[r];
    const weft__coll_args_t args = {WEFT_COLL_REDUCE_SCATTERV, (long long)total, dtype, rop, -1};
    REFUSE_IF(weft__check_dtype_op(dtype, rop));
    if (rop == WEFT_AVG) {
        WEFT__ERROR("reduce_scatterv: WEFT_AVG is not served (reduce with WEFT_SUM, then divide "
                    "by the communicator's size)");
        REFUSE_IF(WEFT_ERR_UNSUPPORTED);
    }
    weft__vblocks_t *v = v_alloc(p);
    REFUSE_IF(v == NULL ? WEFT_ERR_NO_MEMORY : WEFT_SUCCESS);
    weft_status_t st = WEFT_SUCCESS;
    if (p > 0 && recvcounts == NULL) {
        WEFT__ERROR("reduce_scatterv: recvcounts is NULL");
        st = WEFT_ERR_INVALID_ARG;
    }
    const size_t lim = (size_t)PTRDIFF_MAX / (es ? es : 1);
    total = 0;
    for (int r = 0; st == WEFT_SUCCESS && r < p; r++) {
        if (recvcounts[r] > lim - total) {
            WEFT__ERROR("reduce_scatterv: the vector (%zu + %zu elements) overflows", total,
                        recvcounts[r]);
            st = WEFT_ERR_COUNT_OVERFLOW;
            break;
        }
        v->recv_len[r] = recvcounts[r] * es;
        v->recv_off[r] = total * es;
        total += recvcounts[r];
    }
    const bool in_place = sendbuf == WEFT_IN_PLACE;
    /* the input (in place: recvbuf) holds the whole vector; recvbuf
     * otherwise only this rank's block, which may be empty */
    if (st == WEFT_SUCCESS && ((total > 0 && (in_place ? recvbuf : sendbuf) == NULL) ||
                               (recvcounts[me] > 0 && recvbuf == NULL))) {
        WEFT__ERROR("reduce_scatterv: NULL buffer for a vector that is not empty");
        st = WEFT_ERR_INVALID_ARG;
    }
    if (st != WEFT_SUCCESS) {
        free(v);
        return weft__coll_agree(c, st, &args);
    }
    v->recv_extent = total * es;
    if (in_place) sendbuf = recvbuf;
    /* the op's count: this rank's result block */
    return issue_v(c, &args, sendbuf, recvbuf, recvcounts[me], dtype, rop, v, req);
}

weft_status_t weft_reduce_scatterv(const void *sendbuf, void *recvbuf, const size_t *recvcounts,
                                   weft_datatype_t dtype, weft_op_t op, weft_comm_t comm)
{
    return reduce_scatterv(sendbuf, recvbuf, recvcounts, dtype, op, comm, NULL);
}

weft_status_t weft_ireduce_scatterv(const void *sendbuf, void *recvbuf, const size_t *recvcounts,
                                    weft_datatype_t dtype, weft_op_t op, weft_comm_t comm,
                                    weft_request_t *req)
{
    NB_PROLOGUE(req);
    return reduce_scatterv(sendbuf, recvbuf, recvcounts, dtype, op, comm, req);
}

/* gatherv and scatterv: the blocks' arrays at the root (v), this rank's own
 * block of `own` elements everywhere. The root's layout is its alone: a
 * rank refuses only what it can see (the root its arrays, every rank its own
 * block), as MPI's erroneous arguments; WEFT_CHECK_ARGS=1 makes a refusal
 * anywhere fail the call everywhere. */
static weft_status_t rooted_v(const char *what, weft_coll_t coll, const void *sendbuf,
                              void *recvbuf, const size_t *counts, const size_t *displs, size_t own,
                              weft_datatype_t dtype, int root, weft_comm_t comm,
                              weft_request_t *req)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    const int p = c->size, me = c->rank;
    const bool gather = coll == WEFT_COLL_GATHERV;
    const size_t es = weft__dtype_size(dtype);
    const weft__coll_args_t args = {coll, 0, dtype, -1, root};
    REFUSE_IF(es == 0 ? WEFT_ERR_DATATYPE : WEFT_SUCCESS);
    REFUSE_IF(check_rank(what, "root", root, c));
    /* the side with one block (gather: send; scatter: receive) and the root's many */
    const void *one = gather ? sendbuf : recvbuf;
    void *many = gather ? recvbuf : (void *)sendbuf;
    const bool in_place = one == WEFT_IN_PLACE;
    weft__vblocks_t *v = NULL;
    weft_status_t st = WEFT_SUCCESS;
    if (me == root) {
        v = v_alloc(p);
        REFUSE_IF(v == NULL ? WEFT_ERR_NO_MEMORY : WEFT_SUCCESS);
        size_t *len = gather ? v->recv_len : v->send_len, *off = gather ? v->recv_off : v->send_off;
        size_t extent = 0, total = 0;
        st = v_blocks(what, gather ? "receive" : "send", counts, displs, p, es, len, off, &extent,
                      &total);
        if (st == WEFT_SUCCESS && !in_place && own != counts[me]) {
            WEFT__ERROR("%s: this rank's count %zu differs from the root's counts[%d] = %zu", what,
                        own, me, counts[me]);
            st = WEFT_ERR_INVALID_ARG;
        }
        if (st == WEFT_SUCCESS) {
            if (in_place) own = counts[me];
            if ((extent > 0 && many == NULL) || (!in_place && own > 0 && one == NULL)) {
                WEFT__ERROR("%s: NULL buffer for a block that is not empty", what);
                st = WEFT_ERR_INVALID_ARG;
            }
        }
    } else if (in_place) {
        WEFT__ERROR("%s: WEFT_IN_PLACE is for the root only (rank %d, root %d)", what, me, root);
        st = WEFT_ERR_INVALID_ARG;
    } else {
        size_t bytes = 0;
        st = weft__check_buffers(one, one, own, dtype, &bytes);
    }
    if (st != WEFT_SUCCESS) {
        free(v);
        return weft__coll_agree(c, st, &args);
    }
    if (me == root && in_place) { /* the own block, in the root's many-block buffer */
        char *at = (char *)many + (gather ? v->recv_off[me] : v->send_off[me]);
        if (gather) sendbuf = at;
        else recvbuf = at;
    }
    if (me != root) { /* the root's side is not this rank's */
        if (gather) recvbuf = NULL;
        else sendbuf = NULL;
    }
    return issue_v(c, &args, sendbuf, recvbuf, own, dtype, WEFT_SUM, v, req);
}

weft_status_t weft_gatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                           const size_t *recvcounts, const size_t *displs, weft_datatype_t dtype,
                           int root, weft_comm_t comm)
{
    return rooted_v("gatherv", WEFT_COLL_GATHERV, sendbuf, recvbuf, recvcounts, displs, sendcount,
                    dtype, root, comm, NULL);
}

weft_status_t weft_igatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                            const size_t *recvcounts, const size_t *displs, weft_datatype_t dtype,
                            int root, weft_comm_t comm, weft_request_t *req)
{
    NB_PROLOGUE(req);
    return rooted_v("gatherv", WEFT_COLL_GATHERV, sendbuf, recvbuf, recvcounts, displs, sendcount,
                    dtype, root, comm, req);
}

weft_status_t weft_scatterv(const void *sendbuf, const size_t *sendcounts, const size_t *displs,
                            void *recvbuf, size_t recvcount, weft_datatype_t dtype, int root,
                            weft_comm_t comm)
{
    return rooted_v("scatterv", WEFT_COLL_SCATTERV, sendbuf, recvbuf, sendcounts, displs,
                    recvcount, dtype, root, comm, NULL);
}

weft_status_t weft_iscatterv(const void *sendbuf, const size_t *sendcounts, const size_t *displs,
                             void *recvbuf, size_t recvcount, weft_datatype_t dtype, int root,
                             weft_comm_t comm, weft_request_t *req)
{
    NB_PROLOGUE(req);
    return rooted_v("scatterv", WEFT_COLL_SCATTERV, sendbuf, recvbuf, sendcounts, displs,
                    recvcount, dtype, root, comm, req);
}

/* ---- gather ----------------------------------------------------------------------------- */
static weft_status_t gather(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
                            int root, weft_comm_t comm, weft_request_t *req)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    const weft__coll_args_t args = {WEFT_COLL_GATHER, (long long)count, dtype, -1, root};
    REFUSE_IF(weft__dtype_size(dtype) == 0 ? WEFT_ERR_DATATYPE : WEFT_SUCCESS);
    REFUSE_IF(check_rank("gather", "root", root, c));
    size_t bytes = 0;
    if (c->rank == root) {
        REFUSE_IF(weft__check_buffers(sendbuf, recvbuf, count, dtype, &bytes));
        if (sendbuf == WEFT_IN_PLACE) sendbuf = (char *)recvbuf + (size_t)root * bytes;
    } else {
        if (sendbuf == WEFT_IN_PLACE) {
            WEFT__ERROR("gather: WEFT_IN_PLACE is for the root only (rank %d, root %d)", c->rank, root);
            REFUSE_IF(WEFT_ERR_INVALID_ARG);
        }
        REFUSE_IF(weft__check_buffers(sendbuf, sendbuf, count, dtype, &bytes));
        recvbuf = NULL;
    }
    /* The root's whole vector must fit: checked on every rank, which all know
     * count and p, so that no rank issues what the root refuses. */
    REFUSE_IF(check_total("gather", bytes, c->size));
    return issue_coll(c, &args, sendbuf, recvbuf, count, bytes, dtype, WEFT_SUM, root, req);
}

weft_status_t weft_gather(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
                          int root, weft_comm_t comm)
{
    return gather(sendbuf, recvbuf, count, dtype, root, comm, NULL);
}

weft_status_t weft_igather(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
                           int root, weft_comm_t comm, weft_request_t *req)
{
    NB_PROLOGUE(req);
    return gather(sendbuf, recvbuf, count, dtype, root, comm, req);
}

/* ---- scatter ------------------------------------------------------------------------------ */
static weft_status_t scatter(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
                             int root, weft_comm_t comm, weft_request_t *req)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    const weft__coll_args_t args = {WEFT_COLL_SCATTER, (long long)count, dtype, -1, root};
    REFUSE_IF(weft__dtype_size(dtype) == 0 ? WEFT_ERR_DATATYPE : WEFT_SUCCESS);
    REFUSE_IF(check_rank("scatter", "root", root, c));
    size_t bytes = 0;
    if (c->rank == root) {
        int in_place = recvbuf == (void *)WEFT_IN_PLACE;
        REFUSE_IF(weft__check_buffers(sendbuf, in_place ? sendbuf : recvbuf, count, dtype, &bytes));
        if (in_place) recvbuf = (char *)sendbuf + (size_t)root * bytes;
    } else {
        if (recvbuf == (void *)WEFT_IN_PLACE) {
            WEFT__ERROR("scatter: WEFT_IN_PLACE is for the root only (rank %d, root %d)", c->rank, root);
            REFUSE_IF(WEFT_ERR_INVALID_ARG);
        }
        REFUSE_IF(weft__check_buffers(recvbuf, recvbuf, count, dtype, &bytes));
        sendbuf = NULL;
    }
    REFUSE_IF(check_total("scatter", bytes, c->size)); /* every rank: as in gather */
    return issue_coll(c, &args, sendbuf, recvbuf, count, bytes, dtype, WEFT_SUM, root, req);
}

weft_status_t weft_scatter(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
                           int root, weft_comm_t comm)
{
    return scatter(sendbuf, recvbuf, count, dtype, root, comm, NULL);
}

weft_status_t weft_iscatter(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
                            int root, weft_comm_t comm, weft_request_t *req)
{
    NB_PROLOGUE(req);
    return scatter(sendbuf, recvbuf, count, dtype, root, comm, req);
}

/* ---- barrier ------------------------------------------------------------------------------- */
static weft_status_t barrier(weft_comm_t comm, weft_request_t *req)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    const weft__coll_args_t args = {WEFT_COLL_BARRIER, -1, -1, -1, -1};
    return issue_coll(c, &args, NULL, NULL, 0, 0, WEFT_UINT8, WEFT_SUM, -1, req);
}

weft_status_t weft_barrier(weft_comm_t comm) { return barrier(comm, NULL); }

weft_status_t weft_ibarrier(weft_comm_t comm, weft_request_t *req)
{
    NB_PROLOGUE(req);
    return barrier(comm, req);
}

/* ---- point to point --------------------------------------------------------------------------- */
/* priv of a point-to-point op: the second half of a sendrecv. */
typedef struct p2p_priv {
    void *rbuf;
    size_t rbytes;
    int src;
    uint32_t rtag;
} p2p_priv_t;
_Static_assert(sizeof(p2p_priv_t) <= WEFT__PRIV_BYTES, "priv too small");

static uint32_t p2p_tag(int user_tag) { return P2P_TAG_LIMIT | (uint32_t)user_tag; }

/* Engine side: post one transfer with an explicit transport tag. */
static weft_status_t p2p_post(weft__op_t *op, int send, void *buf, size_t bytes, int peer, uint32_t tag)
{
    weft__xfer_t *x = &op->xfer[op->nxfer];
    x->eager = 0;
    weft_status_t st = send ? op->comm->tp->isend(op->comm, buf, bytes, peer, tag, x)
                            : op->comm->tp->irecv(op->comm, buf, bytes, peer, tag, x);
    if (st == WEFT_SUCCESS) op->nxfer++;
    return st;
}

/* Engine side. */
static weft_status_t p2p_step(weft__op_t *op) { return weft__coll_test(op); }

static weft_status_t send_start(weft__op_t *op)
{
    WEFT__CHECK(p2p_post(op, 1, (void *)op->sendbuf, op->bytes, op->root, p2p_tag(op->user_tag)));
    return p2p_step(op);
}

static weft_status_t recv_start(weft__op_t *op)
{
    WEFT__CHECK(p2p_post(op, 0, op->recvbuf, op->bytes, op->root, p2p_tag(op->user_tag)));
    return p2p_step(op);
}

static weft_status_t sendrecv_start(weft__op_t *op)
{
    p2p_priv_t *s = (p2p_priv_t *)op->priv;
    WEFT__CHECK(p2p_post(op, 0, s->rbuf, s->rbytes, s->src, s->rtag));
    WEFT__CHECK(p2p_post(op, 1, (void *)op->sendbuf, op->bytes, op->root, p2p_tag(op->user_tag)));
    return p2p_step(op);
}

static const weft__algo_impl_t send_impl = {
    .id = WEFT_ALGO_LINEAR, .kind = WEFT__OP_SEND, .start = send_start, .step = p2p_step,
};
static const weft__algo_impl_t recv_impl = {
    .id = WEFT_ALGO_LINEAR, .kind = WEFT__OP_RECV, .start = recv_start, .step = p2p_step,
};
static const weft__algo_impl_t sendrecv_impl = {
    .id = WEFT_ALGO_LINEAR, .kind = WEFT__OP_SEND, .start = sendrecv_start, .step = p2p_step,
};

/* Caller thread: common checks of one side of a point-to-point call. */
static weft_status_t check_p2p(const char *what, const void *buf, size_t count, weft_datatype_t dtype,
                               int peer, int tag, const weft__comm_t *c, size_t *bytes)
{
    WEFT__CHECK(weft__check_buffers(buf, buf, count, dtype, bytes));
    WEFT__CHECK(check_rank(what, "peer", peer, c));
    if (tag < 0 || (uint32_t)tag >= P2P_TAG_LIMIT) {
        WEFT__ERROR("%s: tag %d outside [0, %u)", what, tag, P2P_TAG_LIMIT);
        return WEFT_ERR_INVALID_ARG;
    }
    return WEFT_SUCCESS;
}

static weft_status_t issue_p2p(weft__comm_t *c, const weft__algo_impl_t *impl, const void *sbuf,
                               void *rbuf, size_t count, size_t bytes, weft_datatype_t dtype, int peer,
                               int tag, const p2p_priv_t *second, weft_request_t *req)
{
    weft__op_t *op;
    WEFT__CHECK(weft__op_new(c, impl->kind, &op));
    op->impl = impl;
    op->algo = impl->id;
    op->sendbuf = sbuf;
    op->recvbuf = rbuf;
    op->count = count;
    op->bytes = bytes;
    op->dtype = dtype;
    op->rop = WEFT_SUM;
    op->root = peer;
    op->user_tag = tag;
    if (second) memcpy(op->priv, second, sizeof *second);
    return weft__issue(op, req);
}

static weft_status_t p2p_send(const void *buf, size_t count, weft_datatype_t dtype, int dest, int tag,
                          weft_comm_t comm, weft_request_t *req)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    size_t bytes = 0;
    WEFT__CHECK(check_p2p("send", buf, count, dtype, dest, tag, c, &bytes));
    return issue_p2p(c, &send_impl, buf, NULL, count, bytes, dtype, dest, tag, NULL, req);
}

static weft_status_t p2p_recv(void *buf, size_t count, weft_datatype_t dtype, int src, int tag,
                          weft_comm_t comm, weft_request_t *req)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    size_t bytes = 0;
    WEFT__CHECK(check_p2p("recv", buf, count, dtype, src, tag, c, &bytes));
    return issue_p2p(c, &recv_impl, NULL, buf, count, bytes, dtype, src, tag, NULL, req);
}

weft_status_t weft_send(const void *buf, size_t count, weft_datatype_t dtype, int dest, int tag,
                        weft_comm_t comm)
{
    return p2p_send(buf, count, dtype, dest, tag, comm, NULL);
}

weft_status_t weft_isend(const void *buf, size_t count, weft_datatype_t dtype, int dest, int tag,
                         weft_comm_t comm, weft_request_t *req)
{
    NB_PROLOGUE(req);
    return p2p_send(buf, count, dtype, dest, tag, comm, req);
}

weft_status_t weft_recv(void *buf, size_t count, weft_datatype_t dtype, int src, int tag,
                        weft_comm_t comm)
{
    return p2p_recv(buf, count, dtype, src, tag, comm, NULL);
}

weft_status_t weft_irecv(void *buf, size_t count, weft_datatype_t dtype, int src, int tag,
                         weft_comm_t comm, weft_request_t *req)
{
    NB_PROLOGUE(req);
    return p2p_recv(buf, count, dtype, src, tag, comm, req);
}

weft_status_t weft_sendrecv(const void *sendbuf, size_t sendcount, int dest, int sendtag, void *recvbuf,
                            size_t recvcount, int src, int recvtag, weft_datatype_t dtype,
                            weft_comm_t comm)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    size_t sbytes = 0, rbytes = 0;
    WEFT__CHECK(check_p2p("sendrecv", sendbuf, sendcount, dtype, dest, sendtag, c, &sbytes));
    WEFT__CHECK(check_p2p("sendrecv", recvbuf, recvcount, dtype, src, recvtag, c, &rbytes));
    p2p_priv_t second = {recvbuf, rbytes, src, p2p_tag(recvtag)};
    return issue_p2p(c, &sendrecv_impl, sendbuf, recvbuf, sendcount, sbytes, dtype, dest, sendtag,
                     &second, NULL);
}
