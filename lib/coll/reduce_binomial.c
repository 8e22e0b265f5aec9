/*
 * reduce_binomial.c - reduce up a binomial tree rooted at `root`: in round k
 * a rank whose relative rank has bit k set sends its partial result to the
 * rank 2^k below and stops; the others add what the rank 2^k above sends.
 * (Every Weft reduction is commutative, so the tree order is free.)
 *
 * Cost (p ranks, n bytes): ceil(lg p).(alpha + n.beta + n.gamma)
 */
#include "coll_util.h"

static double cost(int p, size_t n, const weft__cost_t *c)
{
    return weft__ceil_log2(p) * (c->alpha + (double)n * (c->beta + c->gamma));
}

static int rel(weft__op_t *op) { return weft__mod(op->comm->rank - op->root, op->comm->size); }
static int real(weft__op_t *op, int relrank) { return (relrank + op->root) % op->comm->size; }

/* tmp = [partial result | receive buffer] */
static char *accb(weft__op_t *op) { return op->tmp; }
static char *rbuf(weft__op_t *op) { return (char *)op->tmp + op->bytes; }

/* op->root's rank stops sending after its send round: remember it in priv. */
typedef struct reduce_binomial { int sent; } reduce_binomial_t;
_Static_assert(sizeof(reduce_binomial_t) <= WEFT__PRIV_BYTES, "priv too small");

static weft_status_t post(weft__op_t *op, int k)
{
    reduce_binomial_t *s = (reduce_binomial_t *)op->priv;
    int p = op->comm->size, rr = rel(op), mask = 1 << k;
    if (s->sent) return WEFT_SUCCESS;
    if (rr & mask) {
        s->sent = 1;
        return weft__coll_isend(op, accb(op), op->bytes, real(op, rr - mask));
    }
    if (rr + mask < p) return weft__coll_irecv(op, rbuf(op), op->bytes, real(op, rr + mask));
    return WEFT_SUCCESS;
}

static weft_status_t after(weft__op_t *op, int k)
{
    reduce_binomial_t *s = (reduce_binomial_t *)op->priv;
    int rr = rel(op), mask = 1 << k;
    if (!s->sent && !(rr & mask) && rr + mask < op->comm->size)
        weft__reduce(accb(op), rbuf(op), op->count, op->dtype, op->rop);
    return WEFT_SUCCESS;
}

/* Engine side. */
static weft_status_t step(weft__op_t *op)
{
    weft_status_t st = weft__rounds_drive(op, weft__ceil_log2(op->comm->size), post, after);
    if (st == WEFT_SUCCESS && op->comm->rank == op->root) memcpy(op->recvbuf, accb(op), op->bytes);
    return st;
}

/* Engine side. */
static weft_status_t start(weft__op_t *op)
{
    if (op->bytes == 0) return WEFT_SUCCESS;
    WEFT__CHECK(weft__coll_alloc_tmp(op, 2 * op->bytes));
    memcpy(accb(op), op->sendbuf, op->bytes);
    ((reduce_binomial_t *)op->priv)->sent = 0;
    return step(op);
}

const weft__algo_impl_t weft__reduce_binomial_impl = {
    .id = WEFT_ALGO_BINOMIAL, .kind = WEFT__OP_REDUCE, .cost = cost,
    .start = start, .step = step, .cleanup = weft__coll_free_tmp,
};
