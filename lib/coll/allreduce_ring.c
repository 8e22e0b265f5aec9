/*
 * allreduce_ring.c - pipelined ring allreduce (bandwidth-optimal).
 *
 * Cost = 2 (p-1) alpha + 2 n (p-1)/p beta + n (p-1)/p gamma
 *        (chunking adds messages, but K chunks in flight hide their latency)
 *
 * The vector is cut into p blocks whose sizes differ by at most one element.
 * Reduce-scatter: in step s = 0 .. p-2 rank r sends block (r - s) mod p to
 * r + 1 and receives block (r - s - 1) mod p from r - 1, reducing it with
 * its own input; afterwards rank r owns block (r + 1) mod p fully reduced.
 * Allgather: in step s = 0 .. p-2 rank r sends block (r + 1 - s) mod p and
 * receives block (r - s) mod p straight into recvbuf.
 *
 * Pipelining: each block is cut into c chunks of about weft__cfg.ring_chunk
 * bytes (0 = one chunk per block; at least 1 KiB), the same c for every block. The 2 (p-1) c
 * (step, chunk) units are handled in groups of K consecutive units of one
 * step. Round t posts the sends and receives of group t and then, while they
 * are in flight, reduces the chunks group t-1 received: so the reduction of
 * chunk j overlaps the transfer of chunk j+1 (and up to 2K chunks are in
 * flight per rank). That needs c >= 2K (a unit's send depends on the unit c
 * places earlier); with c == 1 a round reduces first and posts after.
 * Received chunks go to two alternating sets of K scratch slots.
 *
 * Every reduce-scatter reduction reads sendbuf and writes recvbuf
 * (weft__reduce3: no copy), each block is reduced at one rank only and
 * copied to the others, so all ranks end with identical bits.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coll_util.h"
#include "algo.h"
#include "config.h"

#define RING_DEPTH 4 /* K at most: chunks per direction posted in one round */
#define RING_MAX_CHUNKS (1 << 20)
#define RING_MIN_CHUNK 1024 /* smaller chunks: per-message cost would dominate */

/* The chunk size in use: weft__cfg.ring_chunk (0 = unchunked), at least
 * RING_MIN_CHUNK bytes. Any thread. */
static size_t ring_chunk_bytes(void)
{
    size_t c = weft__cfg.ring_chunk;
    return c == 0 ? 0 : (c < RING_MIN_CHUNK ? RING_MIN_CHUNK : c);
}

typedef struct ring_state {
    int64_t nch;      /* chunks per block */
    int64_t k;        /* units per group */
    int64_t ngroups;  /* 2 (p-1) nch / k */
    int64_t t;        /* next group to post */
    size_t slot_elems; /* capacity of one scratch slot */
    size_t es;        /* element size */
    int overlap;      /* reduce group t-1 after posting group t */
} ring_state_t;
_Static_assert(sizeof(ring_state_t) <= WEFT__PRIV_BYTES, "ring_state_t does not fit op->priv");

/* Elements [*lo, *hi) of chunk c of block b. Pure; engine side. */
static void chunk_range(const weft__op_t *op, const ring_state_t *s, int b, int64_t c, size_t *lo,
                        size_t *hi)
{
    size_t p = (size_t)op->comm->size;
    size_t q = op->count / p, r = op->count % p;
    size_t bs = (size_t)b * q + ((size_t)b < r ? (size_t)b : r);
    size_t bc = q + ((size_t)b < r ? 1 : 0);
    size_t cq = bc / (size_t)s->nch, cr = bc % (size_t)s->nch, uc = (size_t)c;
    *lo = bs + uc * cq + (uc < cr ? uc : cr);
    *hi = *lo + cq + (uc < cr ? 1 : 0);
}

/* a mod p in [0, p). Pure. */
static int mod(int64_t a, int p) { int64_t m = a % p; return (int)(m < 0 ? m + p : m); }

/* Scratch slot receiving unit u (two alternating sets of k). Engine side. */
static void *slot(const weft__op_t *op, const ring_state_t *s, int64_t u)
{
    int64_t g = u / s->k;
    size_t idx = (size_t)((g % 2) * s->k + u % s->k);
    return (char *)op->tmp + idx * s->slot_elems * s->es;
}

/* Post the receive and the send of unit u. Engine side. */
static weft_status_t post_unit(weft__op_t *op, const ring_state_t *s, int64_t u)
{
    const int p = op->comm->size, r = op->comm->rank;
    const int right = (r + 1) % p, left = (r + p - 1) % p;
    int64_t step = u / s->nch, c = u % s->nch;
    size_t lo, hi;
    int sb, rb;
    const char *src;
    char *rbuf = op->recvbuf;

    if (step < p - 1) { /* reduce-scatter */
        sb = mod(r - step, p);
        rb = mod(r - step - 1, p);
        src = step == 0 ? (const char *)op->sendbuf : rbuf;
    } else {           /* allgather */
        int64_t s2 = step - (p - 1);
        sb = mod(r + 1 - s2, p);
        rb = mod(r - s2, p);
        src = rbuf;
    }
    chunk_range(op, s, rb, c, &lo, &hi);
    if (hi > lo) {
        void *dst = step < p - 1 ? slot(op, s, u) : (void *)(rbuf + lo * s->es);
        WEFT__CHECK(weft__coll_irecv(op, dst, (hi - lo) * s->es, left));
    }
    chunk_range(op, s, sb, c, &lo, &hi);
    if (hi > lo) WEFT__CHECK(weft__coll_isend(op, src + lo * s->es, (hi - lo) * s->es, right));
    return WEFT_SUCCESS;
}

/* Reduce what the units of group g received (reduce-scatter units only).
 * Engine side. */
static void process_group(weft__op_t *op, const ring_state_t *s, int64_t g)
{
    const int p = op->comm->size, r = op->comm->rank;
    for (int64_t u = g * s->k; u < (g + 1) * s->k; u++) {
        int64_t step = u / s->nch;
        if (step >= p - 1) return; /* allgather: received in place */
        size_t lo, hi;
        chunk_range(op, s, mod(r - step - 1, p), u % s->nch, &lo, &hi);
        if (hi > lo)
            weft__reduce3((char *)op->recvbuf + lo * s->es, (const char *)op->sendbuf + lo * s->es,
                          slot(op, s, u), hi - lo, op->dtype, op->rop);
    }
}

/* Thread contract: engine side. Never blocks. */
static weft_status_t ring_step(weft__op_t *op)
{
    ring_state_t *s = (ring_state_t *)op->priv;
    weft_status_t st;

    for (;;) {
        if (op->nxfer > 0) {
            st = weft__coll_test(op);
            if (st != WEFT_SUCCESS) return st;
        }
        if (s->t > s->ngroups) return WEFT_SUCCESS;
        if (!s->overlap && s->t >= 1) process_group(op, s, s->t - 1);
        if (s->t < s->ngroups)
            for (int64_t u = s->t * s->k; u < (s->t + 1) * s->k; u++)
                WEFT__CHECK(post_unit(op, s, u));
        if (s->overlap && s->t >= 1) process_group(op, s, s->t - 1);
        s->t++; /* nothing posted (empty chunks): the loop goes straight on */
    }
}

/* Thread contract: engine side. Never blocks. */
static weft_status_t ring_start(weft__op_t *op)
{
    ring_state_t *s = (ring_state_t *)op->priv;
    const int p = op->comm->size;

    memset(s, 0, sizeof(*s));
    if (weft__allreduce_trivial(op)) return WEFT_SUCCESS;
    s->es = op->bytes / op->count;
    size_t maxblock = op->count / (size_t)p + (op->count % (size_t)p ? 1 : 0);
    size_t chunk = ring_chunk_bytes();
    int64_t nch = 1;
    if (chunk > 0 && maxblock * s->es > chunk) {
        size_t want = (maxblock * s->es + chunk - 1) / chunk;
        if (want > maxblock) want = maxblock;
        if (want > RING_MAX_CHUNKS) want = RING_MAX_CHUNKS;
        nch = (int64_t)want;
    }
    if (nch >= 2) {
        s->k = nch / 2 < RING_DEPTH ? nch / 2 : RING_DEPTH;
        nch = (nch + s->k - 1) / s->k * s->k; /* groups never straddle two steps */
        s->overlap = 1;
    } else {
        s->k = 1;
        s->overlap = 0;
    }
    s->nch = nch;
    s->ngroups = 2 * (int64_t)(p - 1) * nch / s->k;
    s->slot_elems = (maxblock + (size_t)nch - 1) / (size_t)nch;
    s->t = 0;
    WEFT__CHECK(weft__coll_alloc_tmp(op, 2 * (size_t)s->k * s->slot_elems * s->es));
    return ring_step(op);
}

/* Thread contract: any thread (pure function of its arguments and weft__cfg). */
static double ring_cost(int p, size_t n, const weft__cost_t *c)
{
    if (p <= 1) return 0.0;
    double nb = (double)n, f = (double)(p - 1) / p;
    /* Pipelined: with RING_DEPTH chunks in flight the chunks' latencies
     * overlap their neighbours' transfers and reductions, so the latency
     * term is the unchunked ring's (the 2-rank sweep in doc/benchmarks.md
     * has the pipelined ring level with or ahead of Rabenseifner from
     * 1 MiB, which a per-chunk alpha contradicted). */
    return 2.0 * (p - 1) * c->alpha + 2.0 * nb * f * c->beta + nb * f * c->gamma;
}

const weft__algo_impl_t weft__allreduce_ring_impl = {
    .id = WEFT_ALGO_RING,
    .kind = WEFT__OP_ALLREDUCE,
    .cost = ring_cost,
    .supports = NULL,
    .start = ring_start,
    .step = ring_step,
    .cleanup = weft__coll_free_tmp,
};
