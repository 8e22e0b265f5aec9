/* allreduce.c - weft_allreduce / weft_iallreduce: validation, selection, issue. */
#include <string.h>

#include "weft_internal.h"

weft_status_t weft__finish_avg(weft__op_t *op)
{
    weft__scale_avg(op->recvbuf, op->count, op->dtype, op->comm->size);
    return WEFT_SUCCESS;
}

weft_status_t weft__check_buffers(const void *sendbuf, const void *recvbuf, size_t count,
                                  weft_datatype_t dtype, size_t *bytes)
{
    size_t es = weft__dtype_size(dtype);
    if (es == 0) return WEFT_ERR_DATATYPE;
    if (count > SIZE_MAX / es || count * es > (size_t)PTRDIFF_MAX) return WEFT_ERR_COUNT_OVERFLOW;
    if (count > 0 && (recvbuf == NULL || sendbuf == NULL)) return WEFT_ERR_INVALID_ARG;
    *bytes = count * es;
    return WEFT_SUCCESS;
}

static weft_status_t allreduce(const void *sendbuf, void *recvbuf, size_t count,
                               weft_datatype_t dtype, weft_op_t rop, weft_comm_t comm,
                               weft_request_t *req)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    const weft__coll_args_t args = {WEFT_COLL_ALLREDUCE, (long long)count, dtype, rop, -1};
    size_t bytes = 0;
    weft_status_t st = weft__check_dtype_op(dtype, rop);
    if (st == WEFT_SUCCESS) st = weft__check_buffers(sendbuf, recvbuf, count, dtype, &bytes);
    if (sendbuf == WEFT_IN_PLACE) sendbuf = recvbuf;
    weft_algo_t algo = WEFT_ALGO_AUTO;
    const weft__algo_impl_t *impl = NULL;
    if (st == WEFT_SUCCESS) {
        algo = weft__select(c, WEFT_COLL_ALLREDUCE, bytes, dtype, rop,
                            weft__stream_memkind(c, sendbuf, recvbuf, bytes));
        impl = weft__algo_impl(WEFT_COLL_ALLREDUCE, algo);
        if (impl == NULL || (impl->supports && !impl->supports(dtype, rop))) {
            WEFT__ERROR("allreduce: algorithm %s cannot serve %s/%s",
                        weft_algo_name(algo) ? weft_algo_name(algo) : "?",
                        weft_datatype_name(dtype), weft_op_name(rop));
            st = WEFT_ERR_ALGORITHM;
        }
    }
    /* a refusal keeps its place in the order; WEFT_CHECK_ARGS agrees first */
    if (WEFT__UNLIKELY(st != WEFT_SUCCESS || c->ctl_check != NULL))
        WEFT__CHECK(weft__coll_agree(c, st, &args));
    weft__op_t *op;
    st = weft__op_new(c, WEFT__OP_ALLREDUCE, &op);
    if (st != WEFT_SUCCESS) {
        atomic_fetch_add_explicit(&c->seq, 1, memory_order_relaxed); /* as a refusal */
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
    if (rop == WEFT_AVG) {
        op->finish = weft__finish_avg;
        /* int8/int32/uint8/uint32/float16: summed in a wider type, so the
         * average never overflows (not on a stream: the input is read now) */
        if (weft__avg_wide(dtype) != dtype && c->stream == NULL) {
            st = weft__avg_prepare(op, count, count);
            if (st != WEFT_SUCCESS) {
                weft__op_free(op);
                atomic_fetch_add_explicit(&c->seq, 1, memory_order_relaxed); /* as a refusal */
                return st;
            }
        }
    }
    return weft__issue(op, req);
}

weft_status_t weft_allreduce(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
                             weft_op_t op, weft_comm_t comm)
{
    return allreduce(sendbuf, recvbuf, count, dtype, op, comm, NULL);
}

weft_status_t weft_iallreduce(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
                              weft_op_t op, weft_comm_t comm, weft_request_t *req)
{
    if (req == NULL) return WEFT_ERR_INVALID_ARG;
    *req = WEFT_REQUEST_NULL;
    return allreduce(sendbuf, recvbuf, count, dtype, op, comm, req);
}
