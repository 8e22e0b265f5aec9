/*
 * barrier_dissemination.c - dissemination barrier: in round k a rank sends an
 * empty message to rank r+2^k and waits for one from rank r-2^k.
 *
 * Cost (p ranks): ceil(lg p).alpha
 */
#include "coll_util.h"

static double cost(int p, size_t n, const weft__cost_t *c)
{
    WEFT__UNUSED(n);
    return weft__ceil_log2(p) * c->alpha;
}

static weft_status_t post(weft__op_t *op, int k)
{
    static char dummy[1];
    int p = op->comm->size, r = op->comm->rank, d = 1 << k;
    WEFT__CHECK(weft__coll_irecv(op, op->priv, 0, weft__mod(r - d, p)));
    return weft__coll_isend(op, dummy, 0, (r + d) % p);
}

/* Engine side. */
static weft_status_t step(weft__op_t *op)
{
    return weft__rounds_drive(op, weft__ceil_log2(op->comm->size), post, NULL);
}

const weft__algo_impl_t weft__barrier_dissemination_impl = {
    .id = WEFT_ALGO_DISSEMINATION, .kind = WEFT__OP_BARRIER, .cost = cost,
    .start = step, .step = step, .cleanup = NULL,
};
