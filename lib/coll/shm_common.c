/*
 * shm_common.c - the state machine of the node's shared-memory collectives
 * (lib/coll/coll_shm.h says what each does). Engine side.
 */
#include "coll_shm.h"
#include "coll_util.h"
#include "config.h"

enum { PH_TURN, PH_INLINE, PH_ADDR, PH_WORK, PH_GATHER, PH_DONE_WAIT };

typedef struct shm_state {
    uint64_t seq;       /* the node's number of this operation */
    int phase;
    int small;          /* inline path */
    int ended;          /* weft__node_end called */
    size_t chunk;       /* bytes per chunk (a multiple of the element size) */
    size_t ci;          /* work cursor: chunk index within the current block */
    int pi;             /* gather cursor: peers done (1 .. p-1) */
    int staged;         /* allreduce through the staging areas (WEFT_SHM_COPY) */
    int sub;            /* staged: the round's part (0 copy in, 1 reduce, 2 copy out) */
    unsigned char *ta, *tb, *tmine; /* chunk scratch (op->tmp) */
    unsigned char *acc; /* reduce_scatter in place: the result, copied out at the end */
} shm_state_t;

_Static_assert(sizeof(shm_state_t) <= WEFT__PRIV_BYTES, "shm state too large");

static inline shm_state_t *S(weft__op_t *op) { return (shm_state_t *)(void *)op->priv; }
static inline weft__node_t *N(weft__op_t *op) { return (weft__node_t *)op->comm->node_state; }

/* Bytes of the data each rank contributes, and whether it goes inline. */
static size_t contribution(const weft__op_t *op)
{
    return op->kind == WEFT__OP_REDUCE_SCATTER ? op->bytes * (size_t)op->comm->size : op->bytes;
}

/* Byte range of block q when count elements are cut into p blocks. */
static void block(const weft__op_t *op, int q, size_t *lo, size_t *hi)
{
    const size_t es = op->bytes / op->count, p = (size_t)op->comm->size;
    *lo = op->count * (size_t)q / p * es;
    *hi = op->count * (size_t)(q + 1) / p * es;
}

weft_status_t weft__shm_start(weft__op_t *op)
{
    shm_state_t *s = S(op);
    memset(s, 0, sizeof *s);
    if (N(op) == NULL) { /* the selection never picks it then: an internal error */
        WEFT__ERROR("comm %d: shm algorithm without the node's shared-memory path", op->comm->id);
        return WEFT_ERR_INTERNAL;
    }
    s->seq = weft__node_begin(N(op));
    s->small = contribution(op) <= WEFT__NODE_INLINE;
    s->phase = PH_TURN;
    if (op->bytes == 0 || s->small) return WEFT_INPROGRESS;
    s->staged = op->kind == WEFT__OP_ALLREDUCE && weft__cfg.shm_copy;
    if (s->staged) return WEFT_INPROGRESS; /* no scratch: the staging areas */
    const size_t es = op->bytes / op->count;
    size_t chunk = weft__cfg.shm_chunk / es * es;
    if (chunk < es) chunk = es;
    s->chunk = chunk;
    WEFT__CHECK(weft__coll_alloc_tmp(op, 3 * chunk));
    s->ta = op->tmp;
    s->tb = s->ta + chunk;
    s->tmine = s->tb + chunk;
    if (op->kind == WEFT__OP_REDUCE_SCATTER && op->sendbuf == op->recvbuf) {
        s->acc = weft__scratch_alloc(op->bytes);
        if (s->acc == NULL) return WEFT_ERR_NO_MEMORY;
    }
    return WEFT_INPROGRESS;
}

void weft__shm_cleanup(weft__op_t *op)
{
    shm_state_t *s = S(op);
    if (!s->ended && N(op) != NULL) weft__node_end(N(op), s->seq); /* failed: let the next run */
    s->ended = 1;
    weft__scratch_free(s->acc);
    s->acc = NULL;
    weft__coll_free_tmp(op);
}

/* A source of a reduction: this rank's own bytes (or their stash), or a
 * peer's read into scratch. */
static weft_status_t source(weft__op_t *op, int q, uint64_t off, size_t len, unsigned char *tmp,
                            const unsigned char **out)
{
    shm_state_t *s = S(op);
    weft__node_t *n = N(op);
    if (q == op->comm->rank) {
        *out = op->sendbuf == op->recvbuf && s->tmine != NULL
                   ? s->tmine
                   : (const unsigned char *)op->sendbuf + off;
        return WEFT_SUCCESS;
    }
    uint64_t sb = 0, rb = 0;
    weft__node_peer_bufs(n, q, &sb, &rb);
    WEFT__CHECK(weft__node_read(n, q, tmp, sb + off, len));
    *out = tmp;
    return WEFT_SUCCESS;
}

/* acc[0, len) = input_0 OP input_1 OP ... at byte offset off of every
 * rank's input, in rank order. acc may be this rank's own input (in place):
 * its bytes are stashed first. */
static weft_status_t reduce_chunk(weft__op_t *op, unsigned char *acc, uint64_t off, size_t len)
{
    shm_state_t *s = S(op);
    const int p = op->comm->size;
    const size_t cnt = len / (op->bytes / op->count);
    if (op->sendbuf == op->recvbuf) memcpy(s->tmine, (const unsigned char *)op->sendbuf + off, len);
    const unsigned char *a = NULL, *b = NULL;
    WEFT__CHECK(source(op, 0, off, len, s->ta, &a));
    WEFT__CHECK(source(op, 1, off, len, s->tb, &b));
    weft__reduce3(acc, a, b, cnt, op->dtype, op->rop);
    for (int q = 2; q < p; q++) {
        WEFT__CHECK(source(op, q, off, len, s->ta, &a));
        weft__reduce(acc, a, cnt, op->dtype, op->rop);
    }
    return WEFT_SUCCESS;
}

/* ---- small operations: one synchronisation through the inline areas ---------- */
static weft_status_t small_step(weft__op_t *op)
{
    shm_state_t *s = S(op);
    weft__node_t *n = N(op);
    const int p = op->comm->size, r = op->comm->rank;
    const size_t nb = op->bytes, cnt = op->count;
    if (s->phase == PH_INLINE) {
        if (!weft__node_inline_free(n, s->seq)) return WEFT_INPROGRESS;
        const bool root_only = op->kind == WEFT__OP_BCAST;
        if (!root_only || r == op->root) {
            const void *src = root_only ? op->recvbuf : op->sendbuf;
            memcpy(weft__node_inline(n, r, s->seq), src, contribution(op));
        }
        weft__node_post(n, s->seq, op->sendbuf, op->recvbuf);
        s->phase = PH_ADDR;
    }
    /* who must have posted before this rank reads */
    bool need_all = op->kind != WEFT__OP_BCAST && op->kind != WEFT__OP_REDUCE;
    if (op->kind == WEFT__OP_REDUCE) need_all = r == op->root;
    if (need_all && !weft__node_all_reached(n, s->seq, 1)) return WEFT_INPROGRESS;
    if (op->kind == WEFT__OP_BCAST && r != op->root &&
        !weft__node_reached(n, op->root, s->seq, 1))
        return WEFT_INPROGRESS;
    const unsigned char *in[2];
    switch (op->kind) {
    case WEFT__OP_ALLREDUCE:
    case WEFT__OP_REDUCE_SCATTER:
    case WEFT__OP_REDUCE: {
        if (op->kind == WEFT__OP_REDUCE && r != op->root) break;
        const size_t off = op->kind == WEFT__OP_REDUCE_SCATTER ? (size_t)r * nb : 0;
        for (int q = 0; q < 2; q++)
            in[q] = (const unsigned char *)weft__node_inline(n, q, s->seq) + off;
        weft__reduce3(op->recvbuf, in[0], in[1], cnt, op->dtype, op->rop);
        for (int q = 2; q < p; q++)
            weft__reduce(op->recvbuf, (const unsigned char *)weft__node_inline(n, q, s->seq) + off,
                         cnt, op->dtype, op->rop);
        break;
    }
    case WEFT__OP_ALLGATHER:
        for (int q = 0; q < p; q++)
            if (q != r) memcpy((unsigned char *)op->recvbuf + (size_t)q * nb,
                               weft__node_inline(n, q, s->seq), nb);
        if ((const unsigned char *)op->sendbuf != (unsigned char *)op->recvbuf + (size_t)r * nb)
            memcpy((unsigned char *)op->recvbuf + (size_t)r * nb, op->sendbuf, nb);
        break;
    case WEFT__OP_BCAST:
        if (r != op->root) memcpy(op->recvbuf, weft__node_inline(n, op->root, s->seq), nb);
        break;
    default:
        return WEFT_ERR_INTERNAL;
    }
    return WEFT_SUCCESS;
}

/* ---- large operations: single-copy reads of the peers' buffers ----------------- */
/* Which peers this rank reads (and must see posted first). */
static bool reads_all(const weft__op_t *op)
{
    switch (op->kind) {
    case WEFT__OP_BCAST: return false;
    case WEFT__OP_REDUCE: return op->comm->rank == op->root;
    default: return true;
    }
}

/* The reduce-scatter part: this rank's block, chunk by chunk (allreduce:
 * published as they are done; reduce: the root's whole vector). */
static weft_status_t work(weft__op_t *op)
{
    shm_state_t *s = S(op);
    weft__node_t *n = N(op);
    const int r = op->comm->rank;
    size_t lo = 0, hi = op->bytes;
    unsigned char *out = op->recvbuf; /* where input offset lo's result goes */
    switch (op->kind) {
    case WEFT__OP_ALLREDUCE:
        block(op, r, &lo, &hi);
        out += lo;
        break;
    case WEFT__OP_REDUCE_SCATTER: /* block r of the p-block input into the output */
        lo = (size_t)r * op->bytes;
        hi = lo + op->bytes;
        out = s->acc != NULL ? s->acc : (unsigned char *)op->recvbuf;
        break;
    case WEFT__OP_REDUCE:
        if (r != op->root) return WEFT_SUCCESS;
        break;
    case WEFT__OP_BCAST:
        if (r != op->root) {
            uint64_t sb = 0, rb = 0;
            weft__node_peer_bufs(n, op->root, &sb, &rb);
            WEFT__CHECK(weft__node_read(n, op->root, op->recvbuf, rb, op->bytes));
        }
        return WEFT_SUCCESS;
    case WEFT__OP_ALLGATHER:
        return WEFT_SUCCESS; /* all in the gather phase */
    default:
        return WEFT_ERR_INTERNAL;
    }
    for (size_t off = lo + s->ci * s->chunk; off < hi; off += s->chunk, s->ci++) {
        const size_t len = hi - off < s->chunk ? hi - off : s->chunk;
        WEFT__CHECK(reduce_chunk(op, out + (off - lo), off, len));
        if (op->kind == WEFT__OP_ALLREDUCE) weft__node_publish(n, s->seq, 2 + (uint32_t)s->ci);
    }
    return WEFT_SUCCESS;
}

/* The allgather part: allreduce reads every other block from its owner's
 * output as the owner publishes its chunks; allgather reads every peer's
 * input. Returns WEFT_INPROGRESS while a chunk is not ready. */
static weft_status_t gather(weft__op_t *op)
{
    shm_state_t *s = S(op);
    weft__node_t *n = N(op);
    const int p = op->comm->size, r = op->comm->rank;
    if (op->kind == WEFT__OP_ALLGATHER && s->pi == 0) {
        unsigned char *mine = (unsigned char *)op->recvbuf + (size_t)r * op->bytes;
        if (mine != (const unsigned char *)op->sendbuf) memcpy(mine, op->sendbuf, op->bytes);
    }
    if (s->pi == 0) s->pi = 1;
    for (; s->pi < p; s->pi++, s->ci = 0) {
        const int q = (r + s->pi) % p;
        uint64_t sb = 0, rb = 0;
        weft__node_peer_bufs(n, q, &sb, &rb);
        if (op->kind == WEFT__OP_ALLGATHER) {
            const size_t off = (size_t)q * op->bytes;
            WEFT__CHECK(weft__node_read(n, q, (unsigned char *)op->recvbuf + off, sb, op->bytes));
            continue;
        }
        size_t lo = 0, hi = 0;
        block(op, q, &lo, &hi);
        for (size_t off = lo + s->ci * s->chunk; off < hi; off += s->chunk, s->ci++) {
            if (!weft__node_reached(n, q, s->seq, 2 + (uint32_t)s->ci)) return WEFT_INPROGRESS;
            const size_t len = hi - off < s->chunk ? hi - off : s->chunk;
            WEFT__CHECK(weft__node_read(n, q, (unsigned char *)op->recvbuf + off, rb + off, len));
            weft__engine_events++;
        }
    }
    return WEFT_SUCCESS;
}

static weft_status_t large_step(weft__op_t *op)
{
    shm_state_t *s = S(op);
    weft__node_t *n = N(op);
    const int r = op->comm->rank;
    switch (s->phase) {
    case PH_INLINE: /* (large operations skip the inline areas) */
        weft__node_post(n, s->seq, op->sendbuf, op->recvbuf);
        s->phase = PH_ADDR;
        /* fall through */
    case PH_ADDR:
        if (reads_all(op) ? !weft__node_all_reached(n, s->seq, 1)
                          : op->kind == WEFT__OP_BCAST && r != op->root &&
                                !weft__node_reached(n, op->root, s->seq, 1))
            return WEFT_INPROGRESS;
        s->phase = PH_WORK;
        /* fall through */
    case PH_WORK:
        WEFT__CHECK(work(op));
        s->phase = PH_GATHER;
        s->ci = 0;
        /* fall through */
    case PH_GATHER:
        if (op->kind == WEFT__OP_ALLREDUCE || op->kind == WEFT__OP_ALLGATHER) {
            weft_status_t st = gather(op);
            if (st != WEFT_SUCCESS) return st;
        }
        weft__node_publish(n, s->seq, WEFT__NODE_DONE);
        s->phase = PH_DONE_WAIT;
        /* fall through */
    case PH_DONE_WAIT: {
        /* Wait until nobody reads this rank's buffers any more: every peer
         * for a rank whose buffers they read; bcast / reduce: the root
         * waits for all, the others for the root (reduce) or nobody. */
        bool ok;
        if (op->kind == WEFT__OP_BCAST) ok = r != op->root || weft__node_all_reached(n, s->seq, WEFT__NODE_DONE);
        else if (op->kind == WEFT__OP_REDUCE)
            ok = r == op->root || weft__node_reached(n, op->root, s->seq, WEFT__NODE_DONE);
        else ok = weft__node_all_reached(n, s->seq, WEFT__NODE_DONE);
        if (!ok) return WEFT_INPROGRESS;
        if (s->acc != NULL) memcpy(op->recvbuf, s->acc, op->bytes);
        return WEFT_SUCCESS;
    }
    default:
        return WEFT_ERR_INTERNAL;
    }
}

/* ---- staged allreduce (WEFT_SHM_COPY): copies through the segment -------------- */
/*
 * Rounds of p blocks of up to WEFT__NODE_STAGE_CHUNK bytes. In round t, rank
 * r (a) copies the blocks of its input that its peers reduce into its input
 * area of parity t & 1 and publishes IN(t); (b) once every peer published
 * IN(t), reduces block r over every rank in rank order (its own block from
 * its input, the others' from their input areas) into its result area and
 * its output, and publishes RED(t); (c) copies every peer's result area into
 * its output as the peer publishes RED(t), and publishes GOT(t). An area of
 * parity t & 1 is written again in round t + 2 only once every peer
 * published RED(t) (inputs read) or GOT(t) (results read); the operation
 * ends once every peer published GOT of the last round, so the next one
 * finds the areas free. No page of another process is pinned: every copy
 * is a plain memcpy within the segment.
 */
#define ST_IN(t) (2u + 3u * (uint32_t)(t))
#define ST_RED(t) (3u + 3u * (uint32_t)(t))
#define ST_GOT(t) (4u + 3u * (uint32_t)(t))

static size_t staged_per(const weft__op_t *op) /* elements of a block in a full round */
{
    const size_t es = op->bytes / op->count;
    return WEFT__NODE_STAGE_CHUNK / es;
}

static size_t staged_rounds(const weft__op_t *op)
{
    const size_t full = staged_per(op) * (size_t)op->comm->size;
    return (op->count + full - 1) / full;
}

/* Byte range of block q of round t, and the round's first byte. */
static void round_block(const weft__op_t *op, size_t t, int q, size_t *lo, size_t *hi,
                        size_t *base)
{
    const size_t es = op->bytes / op->count, p = (size_t)op->comm->size;
    const size_t full = staged_per(op) * p, first = t * full;
    size_t cnt = op->count - first;
    if (cnt > full) cnt = full;
    *base = first * es;
    *lo = (first + cnt * (size_t)q / p) * es;
    *hi = (first + cnt * (size_t)(q + 1) / p) * es;
}

static weft_status_t staged_step(weft__op_t *op)
{
    shm_state_t *s = S(op);
    weft__node_t *n = N(op);
    const int p = op->comm->size, r = op->comm->rank;
    const size_t nr = staged_rounds(op), es = op->bytes / op->count;
    const unsigned char *in = op->sendbuf;
    unsigned char *out = op->recvbuf;
    size_t lo, hi, base;
    for (; s->ci < nr; s->ci++, s->sub = 0, s->pi = 0) {
        const size_t t = s->ci;
        const int half = (int)(t & 1);
        if (s->sub == 0) { /* copy in the blocks the peers reduce */
            if (t >= 2 && !weft__node_all_reached(n, s->seq, ST_RED(t - 2))) return WEFT_INPROGRESS;
            unsigned char *mine = weft__node_stage(n, r, half, 0);
            for (int q = 0; q < p; q++) {
                if (q == r) continue;
                round_block(op, t, q, &lo, &hi, &base);
                memcpy(mine + (lo - base), in + lo, hi - lo);
            }
            weft__node_publish(n, s->seq, ST_IN(t));
            s->sub = 1;
            weft__engine_events++;
        }
        if (s->sub == 1) { /* reduce this rank's block */
            if (!weft__node_all_reached(n, s->seq, ST_IN(t))) return WEFT_INPROGRESS;
            if (t >= 2 && !weft__node_all_reached(n, s->seq, ST_GOT(t - 2))) return WEFT_INPROGRESS;
            round_block(op, t, r, &lo, &hi, &base);
            unsigned char *res = weft__node_stage(n, r, half, 1);
            const unsigned char *src[2];
            for (int q = 0; q < 2; q++)
                src[q] = q == r ? in + lo
                                : (const unsigned char *)weft__node_stage(n, q, half, 0) + (lo - base);
            const size_t cnt = (hi - lo) / es;
            if (cnt > 0) {
                weft__reduce3(res, src[0], src[1], cnt, op->dtype, op->rop);
                for (int q = 2; q < p; q++)
                    weft__reduce(res, q == r ? in + lo
                                             : (const unsigned char *)weft__node_stage(n, q, half, 0) +
                                                   (lo - base),
                                 cnt, op->dtype, op->rop);
                memcpy(out + lo, res, hi - lo); /* in place: block r's input was read above */
            }
            weft__node_publish(n, s->seq, ST_RED(t));
            s->sub = 2;
            s->pi = 1;
            weft__engine_events++;
        }
        for (; s->pi < p; s->pi++) { /* copy out the peers' blocks */
            const int q = (r + s->pi) % p;
            if (!weft__node_reached(n, q, s->seq, ST_RED(t))) return WEFT_INPROGRESS;
            round_block(op, t, q, &lo, &hi, &base);
            memcpy(out + lo, weft__node_stage(n, q, half, 1), hi - lo);
        }
        weft__node_publish(n, s->seq, ST_GOT(t));
    }
    if (nr > 0 && !weft__node_all_reached(n, s->seq, ST_GOT(nr - 1))) return WEFT_INPROGRESS;
    return WEFT_SUCCESS;
}

weft_status_t weft__shm_step(weft__op_t *op)
{
    shm_state_t *s = S(op);
    weft__node_t *n = N(op);
    if (s->phase == PH_TURN) {
        if (!weft__node_turn(n, s->seq)) return WEFT_INPROGRESS;
        s->phase = PH_INLINE;
        if (op->bytes == 0) { /* nothing to move; the numbering goes on */
            weft__node_publish(n, s->seq, WEFT__NODE_DONE);
            weft__node_end(n, s->seq);
            s->ended = 1;
            return WEFT_SUCCESS;
        }
    }
    const int phase = s->phase;
    const size_t ci = s->ci;
    const int pi = s->pi;
    weft_status_t st;
    if (s->small) {
        st = small_step(op);
    } else if (s->staged) {
        if (s->phase == PH_INLINE) {
            weft__node_post(n, s->seq, op->sendbuf, op->recvbuf);
            s->phase = PH_WORK;
        }
        st = staged_step(op);
    } else {
        st = large_step(op);
    }
    if (st == WEFT_INPROGRESS && (phase != s->phase || ci != s->ci || pi != s->pi))
        weft__engine_events++; /* progress the status does not show */
    if (st == WEFT_SUCCESS) {
        weft__node_end(n, s->seq);
        s->ended = 1;
    }
    return st;
}

double weft__shm_cost(weft__opkind_t kind, int p, size_t n, const weft__cost_t *c)
{
    if (c->alpha_shm <= 0 || p < 2 || (c->nnodes > 1)) return INFINITY;
    const double a = c->alpha_shm, b = c->beta_shm, g = c->gamma, dn = (double)n;
    const double f = (double)(p - 1) / p;
    /* small: one synchronisation, the copies into and out of the inline
     * areas (at about the path's per-byte cost) and the reductions */
    switch (kind) {
    case WEFT__OP_ALLREDUCE:
        if (n <= WEFT__NODE_INLINE) return a + dn * b + (p - 1) * dn * g;
        return 2 * a + 2 * f * dn * b + f * dn * g;
    case WEFT__OP_REDUCE_SCATTER:
        if (n * (size_t)p <= WEFT__NODE_INLINE) return a + p * dn * b + (p - 1) * dn * g;
        return 2 * a + (p - 1) * dn * (b + g);
    case WEFT__OP_ALLGATHER:
        if (n <= WEFT__NODE_INLINE) return a + p * dn * b;
        return 2 * a + (p - 1) * dn * b;
    case WEFT__OP_BCAST:
        if (n <= WEFT__NODE_INLINE) return a + 2 * dn * b;
        return 2 * a + dn * b;
    case WEFT__OP_REDUCE:
        if (n <= WEFT__NODE_INLINE) return a + dn * b + (p - 1) * dn * g;
        return 2 * a + (p - 1) * dn * (b + g);
    default:
        return INFINITY;
    }
}
