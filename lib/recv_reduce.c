/*
 * recv_reduce.c - a receive that reduces as the message arrives.
 *
 * A transport that unpacks messages piece by piece (weft__xfer_dt_t; UCX
 * calls the unpack from its receive path with the bytes still in its own
 * buffer) lets an algorithm compute out = a OP message without first copying
 * the message into a scratch buffer and reading it back: one pass over memory
 * instead of three. Pieces arrive at byte offsets that need not fall on
 * elements, in any order. Whole elements of a piece are reduced at once; an
 * element cut between two pieces is assembled in a small table of edges and
 * reduced when its last byte has come. A message whose pieces leave more than
 * WEFT__RR_EDGES elements incomplete at once (never seen on one lane, where
 * pieces come in order and at most one element is open) is reported as
 * failed when the transfer completes (weft__rr_failed), never reduced wrong.
 *
 * Thread contract: engine side (the unpack runs inside the transport's
 * progress, under the progress lock). The buffers belong to the op.
 */
#include <string.h>

#include "weft_internal.h"

void weft__rr_init(weft__rr_t *rr, void *out, const void *a, size_t count, weft_datatype_t dtype,
                   weft_op_t op)
{
    memset(rr, 0, sizeof *rr);
    rr->esz = weft__dtype_size(dtype);
    rr->out = out;
    rr->a = a;
    rr->dtype = dtype;
    rr->op = op;
    rr->d.bytes = count * rr->esz;
    rr->d.unpack = weft__rr_unpack;
    rr->d.obj = rr;
}

/* out[e] = a[e] OP the esz bytes at v, for one element e. */
static void reduce_one(weft__rr_t *rr, size_t e, const void *v)
{
    size_t at = e * rr->esz;
    weft__reduce3((char *)rr->out + at, (const char *)rr->a + at, v, 1, rr->dtype, rr->op);
}

/* Bytes [k, k + n) of element e arrived (0 <= k, k + n <= esz, n > 0). */
static void edge_add(weft__rr_t *rr, size_t e, size_t k, const unsigned char *src, size_t n)
{
    int i = 0;
    while (i < rr->nedge && rr->edge[i].elem != e) i++;
    if (i == rr->nedge) {
        if (rr->nedge == WEFT__RR_EDGES) {
            rr->overflow = 1; /* reported by weft__rr_failed */
            return;
        }
        rr->edge[i].elem = e;
        rr->edge[i].got = 0;
        rr->nedge++;
    }
    memcpy(rr->edge[i].v + k, src, n);
    rr->edge[i].got += (unsigned)n;
    if (rr->edge[i].got == rr->esz) {
        reduce_one(rr, e, rr->edge[i].v);
        rr->edge[i] = rr->edge[--rr->nedge];
    }
}

void weft__rr_unpack(const weft__xfer_dt_t *d, size_t offset, const void *src, size_t len)
{
    weft__rr_t *rr = d->obj;
    const unsigned char *p = src;
    const size_t es = rr->esz;
    size_t end = offset + len;
    size_t k = offset % es;
    if (k != 0) { /* the piece starts inside an element */
        size_t n = es - k < len ? es - k : len;
        edge_add(rr, offset / es, k, p, n);
        p += n;
        offset += n;
    }
    size_t whole = (end - offset) / es;
    if (whole > 0) {
        char *out = (char *)rr->out + offset;
        const char *a = (const char *)rr->a + offset;
        if (((uintptr_t)p % es) == 0) {
            weft__reduce3(out, a, p, whole, rr->dtype, rr->op);
        } else { /* the transport's bytes are not aligned for the type: bounce */
            _Alignas(16) unsigned char tmp[2048];
            size_t per = sizeof tmp / es;
            for (size_t i = 0; i < whole; i += per) {
                size_t n = whole - i < per ? whole - i : per;
                memcpy(tmp, p + i * es, n * es);
                weft__reduce3(out + i * es, a + i * es, tmp, n, rr->dtype, rr->op);
            }
        }
        p += whole * es;
        offset += whole * es;
    }
    if (offset < end) /* the piece ends inside an element */
        edge_add(rr, offset / es, 0, p, end - offset);
}

bool weft__rr_failed(const weft__rr_t *rr)
{
    if (!rr->overflow && rr->nedge == 0) return false;
    if (rr->overflow)
        WEFT__ERROR("receive-reduce of %zu bytes: the transport left more than %d elements "
                    "incomplete at once; message not reduced (WEFT_FUSED_REDUCE_MAX=0 turns the "
                    "fused receive off)", rr->d.bytes, WEFT__RR_EDGES);
    else
        WEFT__ERROR("receive-reduce of %zu bytes: %d elements incomplete at the end",
                    rr->d.bytes, rr->nedge);
    return true;
}
