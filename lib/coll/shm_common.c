/*
 * shm_common.c - the state machine of the node's shared-memory collectives
 * (lib/coll/coll_shm.h says what each does): a job (weft__shm_job_t) that
 * the shm algorithms run as their whole op and the hierarchical allreduce
 * as its phases inside a node. Engine side.
 */
#include "coll_shm.h"
#include "coll_util.h"
#include "config.h"

enum { PH_TURN, PH_INLINE, PH_ADDR, PH_WORK, PH_GATHER, PH_DONE_WAIT };

/* Bytes of the data each rank contributes, and whether it goes inline (the
 * same on every rank: it depends on the job's arguments only). */
static size_t contribution(const weft__shm_job_t *j)
{
    return j->kind == WEFT__OP_REDUCE_SCATTER ? j->bytes * (size_t)j->size : j->bytes;
}

/* Byte range of allreduce block q: the count elements cut into size blocks
 * (weft__block_range, as the hierarchical allreduce cuts its chunks). */
static void block(const weft__shm_job_t *j, int q, size_t *lo, size_t *hi)
{
    weft__block_range(j->count, j->size, q, lo, hi);
    *lo *= j->es;
    *hi *= j->es;
}

/* Does the job reduce (and need the chunk scratch)? */
static bool reduces(const weft__shm_job_t *j)
{
    switch (j->kind) {
    case WEFT__OP_ALLREDUCE: return j->part != WEFT__SHM_AG_HALF;
    case WEFT__OP_REDUCE_SCATTER:
    case WEFT__OP_REDUCE: return true;
    default: return false;
    }
}

static size_t staged_per(const weft__shm_job_t *j);
static size_t staged_rounds(const weft__shm_job_t *j);

/* ---- the choice between the two modes (WEFT_SHM_COPY=auto) --------------------- */
/*
 * Large allreduce, reduce_scatter and allgather run staged or by cross-
 * memory attach. Which mode moves a vector faster depends on where the
 * ranks' cores sit (staging hands every block from one core's cache to
 * another's; cross-memory attach pins every page it reads) and can change
 * while a job runs (a VM's vCPUs move), so it is timed, not predicted: in
 * every size class (powers of two) of each kind, calls MODE_WARM ..
 * MODE_WARM + WEFT__NODE_TRIALS - 1 of each MODE_PERIOD alternate the modes
 * (the first ones of a class find its buffers cold: they run the previous
 * choice, untimed), each rank leaves its time of each (from the moment all
 * ranks arrived to its last publish) in its slot, and the calls after run
 * the mode whose best trial was faster on the slowest rank. Every rank reads
 * the same trials (each wrote its own before it published the operation's
 * last stage, which every rank waits for), so all choose alike with no
 * message.
 */
#define MODE_PERIOD 512u
#define MODE_WARM 2 /* calls of a period before its trials: the buffers' first touch */

/* The job's row of the trials: allreduce, reduce_scatter, allgather run
 * whole may run staged; -1 for the rest (cross-memory attach only). */
static int mode_kind(const weft__shm_job_t *j)
{
    if (j->part != WEFT__SHM_WHOLE) return -1;
    switch (j->kind) {
    case WEFT__OP_ALLREDUCE: return 0;
    case WEFT__OP_REDUCE_SCATTER: return 1;
    case WEFT__OP_ALLGATHER: return 2;
    default: return -1;
    }
}

static int size_class(size_t bytes)
{
    int c = 0;
    while (c < WEFT__NODE_CLASSES - 1 && (bytes - 1) >> (15 + c) != 0) c++;
    return c;
}

static int8_t choose_mode(weft__shm_job_t *j)
{
    double best[2] = {INFINITY, INFINITY};
    for (int k = 0; k < WEFT__NODE_TRIALS; k++) {
        double worst = 0;
        for (int q = 0; q < j->size; q++) {
            const double s = weft__node_trial_get(j->node, q, mode_kind(j), j->cls, k);
            if (s > worst) worst = s;
        }
        if (worst < best[k & 1]) best[k & 1] = worst;
    }
    const int8_t staged = best[1] < best[0];
    static const char *const kinds[WEFT__NODE_MODE_KINDS] = {"allreduce", "reduce_scatter",
                                                             "allgather"};
    WEFT__DEBUG("comm %d: shm: %s of up to %zu bytes: %s (best trials: staged %.1f us, "
                "cross-memory attach %.1f us)",
                j->id, kinds[mode_kind(j)], (size_t)1 << (15 + j->cls),
                staged ? "staged" : "cross-memory attach", best[1] * 1e6, best[0] * 1e6);
    return staged;
}

/* Number a large whole allreduce, reduce_scatter or allgather among its
 * kind and class's calls (at the job's start, in the order every rank
 * starts them). */
static void count_mode_call(weft__shm_job_t *j)
{
    weft__node_modes_t *m = weft__node_modes(j->node);
    j->cls = size_class(j->bytes);
    j->mode_call = (int)(m->calls[mode_kind(j)][j->cls]++ % MODE_PERIOD);
}

/* Set j->staged at the job's turn: the operations before it on the path
 * have ended here, so the trials they recorded on every rank are readable
 * and the class's choice is up to date (the same on every rank). */
static void settle_mode(weft__shm_job_t *j)
{
    weft__node_modes_t *m = weft__node_modes(j->node);
    const int kind = mode_kind(j), i = j->mode_call;
    int8_t *choice = &m->staged[kind][j->cls];
    if (i >= MODE_WARM && i < MODE_WARM + WEFT__NODE_TRIALS) {
        j->trial = i - MODE_WARM + 1;
        j->staged = (j->trial - 1) & 1;
        j->t0 = 0; /* set once every peer has arrived (weft__shm_job_step) */
    } else {
        if (i == MODE_WARM + WEFT__NODE_TRIALS) *choice = choose_mode(j);
        j->staged = *choice;
    }
    if (j->staged) j->chunk = staged_per(j);
}

/* A trial's time, recorded before the rank's last publish of the job. */
static void record_trial(weft__shm_job_t *j)
{
    if (j->trial == 0) return;
    const double t0 = j->t0 > 0 ? j->t0 : j->tstep; /* everyone arrived during this step */
    weft__node_trial_put(j->node, mode_kind(j), j->cls, j->trial - 1, weft__now() - t0);
}

weft_status_t weft__shm_job_start(weft__shm_job_t *j, uint64_t seq)
{
    j->seq = seq;
    j->rank = weft__node_rank(j->node);
    j->size = weft__node_size(j->node);
    j->phase = PH_TURN;
    j->ended = 0;
    j->es = j->count > 0 ? j->bytes / j->count : 1;
    j->small = contribution(j) <= WEFT__NODE_INLINE;
    j->staged = 0;
    j->trial = 0;
    j->mode_call = -1;
    if (j->bytes == 0 || j->small) return WEFT_INPROGRESS;
    if (mode_kind(j) >= 0) {
        if (weft__cfg.shm_copy == WEFT__SHM_COPY_AUTO) count_mode_call(j); /* settle_mode */
        else j->staged = weft__cfg.shm_copy;
    }
    if (j->staged) { /* no scratch: the staging areas */
        j->chunk = staged_per(j);
        return WEFT_INPROGRESS;
    }
    size_t chunk = weft__cfg.shm_chunk / j->es * j->es;
    if (chunk < j->es) chunk = j->es;
    j->chunk = chunk;
    if (reduces(j)) {
        j->scratch = weft__scratch_alloc(3 * chunk);
        if (j->scratch == NULL) {
            WEFT__ERROR("comm %d: shm: cannot allocate %zu bytes of scratch", j->id, 3 * chunk);
            return WEFT_ERR_NO_MEMORY;
        }
        j->ta = j->scratch;
        j->tb = j->ta + chunk;
        j->tmine = j->tb + chunk;
    }
    if (j->kind == WEFT__OP_REDUCE_SCATTER && j->sendbuf == j->recvbuf) {
        j->acc = weft__scratch_alloc(j->bytes);
        if (j->acc == NULL) {
            WEFT__ERROR("comm %d: shm: cannot allocate %zu bytes of scratch", j->id, j->bytes);
            return WEFT_ERR_NO_MEMORY;
        }
    }
    return WEFT_INPROGRESS;
}

void weft__shm_job_cleanup(weft__shm_job_t *j)
{
    if (!j->ended && j->node != NULL && j->seq != 0)
        weft__node_end(j->node, j->seq); /* failed: let the next run */
    j->ended = 1;
    weft__scratch_free(j->acc);
    weft__scratch_free(j->scratch);
    j->acc = j->scratch = j->ta = j->tb = j->tmine = NULL;
}

/* ---- the shm algorithms: the op's job ------------------------------------------ */
static inline weft__shm_job_t *J(weft__op_t *op) { return (weft__shm_job_t *)(void *)op->priv; }
_Static_assert(sizeof(weft__shm_job_t) <= WEFT__PRIV_BYTES, "shm job too large for op->priv");

weft_status_t weft__shm_start(weft__op_t *op)
{
    weft__shm_job_t *j = J(op);
    memset(j, 0, sizeof *j);
    j->node = (weft__node_t *)op->comm->node_state;
    if (j->node == NULL) { /* the selection never picks it then: an internal error */
        WEFT__ERROR("comm %d: shm algorithm without the node's shared-memory path", op->comm->id);
        return WEFT_ERR_INTERNAL;
    }
    j->kind = op->kind;
    j->part = WEFT__SHM_WHOLE;
    j->sendbuf = op->sendbuf;
    j->recvbuf = op->recvbuf;
    j->count = op->count;
    j->bytes = op->bytes;
    j->dtype = op->dtype;
    j->rop = op->rop;
    j->root = op->root; /* one node: node ranks are the comm's */
    j->id = op->comm->id;
    return weft__shm_job_start(j, weft__node_begin(j->node));
}

weft_status_t weft__shm_step(weft__op_t *op) { return weft__shm_job_step(J(op)); }

void weft__shm_cleanup(weft__op_t *op) { weft__shm_job_cleanup(J(op)); }

/* A source of a reduction: this rank's own bytes (or their stash), or a
 * peer's read into scratch. */
static weft_status_t source(weft__shm_job_t *j, int q, uint64_t off, size_t len,
                            unsigned char *tmp, const unsigned char **out)
{
    if (q == j->rank) {
        *out = j->sendbuf == j->recvbuf && j->tmine != NULL
                   ? j->tmine
                   : (const unsigned char *)j->sendbuf + off;
        return WEFT_SUCCESS;
    }
    uint64_t sb = 0, rb = 0;
    weft__node_peer_bufs(j->node, q, &sb, &rb);
    WEFT__CHECK(weft__node_read(j->node, q, tmp, sb + off, len));
    *out = tmp;
    return WEFT_SUCCESS;
}

/* acc[0, len) = input_0 OP input_1 OP ... at byte offset off of every
 * rank's input, in rank order. acc may be this rank's own input (in place):
 * its bytes are stashed first. */
static weft_status_t reduce_chunk(weft__shm_job_t *j, unsigned char *acc, uint64_t off, size_t len)
{
    const int p = j->size;
    const size_t cnt = len / j->es;
    if (j->sendbuf == j->recvbuf) memcpy(j->tmine, (const unsigned char *)j->sendbuf + off, len);
    const unsigned char *a = NULL, *b = NULL;
    WEFT__CHECK(source(j, 0, off, len, j->ta, &a));
    WEFT__CHECK(source(j, 1, off, len, j->tb, &b));
    weft__reduce3(acc, a, b, cnt, j->dtype, j->rop);
    for (int q = 2; q < p; q++) {
        WEFT__CHECK(source(j, q, off, len, j->ta, &a));
        weft__reduce(acc, a, cnt, j->dtype, j->rop);
    }
    return WEFT_SUCCESS;
}

/* ---- small operations: one synchronisation through the inline areas ---------- */
static weft_status_t small_step(weft__shm_job_t *j)
{
    weft__node_t *n = j->node;
    const int p = j->size, r = j->rank;
    const size_t nb = j->bytes, cnt = j->count;
    size_t lo = 0, hi = 0;
    if (j->phase == PH_INLINE) {
        if (!weft__node_inline_free(n, j->seq)) return WEFT_INPROGRESS;
        unsigned char *mine = weft__node_inline(n, r, j->seq);
        if (j->part == WEFT__SHM_AG_HALF) { /* this rank's final block, at its offset */
            block(j, r, &lo, &hi);
            memcpy(mine + lo, (const unsigned char *)j->recvbuf + lo, hi - lo);
        } else if (j->kind != WEFT__OP_BCAST || r == j->root) {
            const void *src = j->kind == WEFT__OP_BCAST ? j->recvbuf : j->sendbuf;
            memcpy(mine, src, contribution(j));
        }
        weft__node_post(n, j->seq, j->sendbuf, j->recvbuf);
        j->phase = PH_ADDR;
    }
    /* who must have posted before this rank reads */
    bool need_all = j->kind != WEFT__OP_BCAST && j->kind != WEFT__OP_REDUCE;
    if (j->kind == WEFT__OP_REDUCE) need_all = r == j->root;
    if (need_all && !weft__node_all_reached(n, j->seq, 1)) return WEFT_INPROGRESS;
    if (j->kind == WEFT__OP_BCAST && r != j->root && !weft__node_reached(n, j->root, j->seq, 1))
        return WEFT_INPROGRESS;
    const unsigned char *in[2];
    switch (j->kind) {
    case WEFT__OP_ALLREDUCE:
        if (j->part == WEFT__SHM_AG_HALF) {
            for (int q = 0; q < p; q++) {
                if (q == r) continue;
                block(j, q, &lo, &hi);
                memcpy((unsigned char *)j->recvbuf + lo,
                       (const unsigned char *)weft__node_inline(n, q, j->seq) + lo, hi - lo);
            }
            break;
        } /* else the whole vector, or (RS_HALF) block r of it: */
        /* fall through */
    case WEFT__OP_REDUCE_SCATTER:
    case WEFT__OP_REDUCE: {
        if (j->kind == WEFT__OP_REDUCE && r != j->root) break;
        size_t off = j->kind == WEFT__OP_REDUCE_SCATTER ? (size_t)r * nb : 0, c = cnt;
        unsigned char *out = j->recvbuf;
        if (j->part == WEFT__SHM_RS_HALF) {
            block(j, r, &lo, &hi);
            off = lo;
            c = (hi - lo) / j->es;
            out += lo;
            if (c == 0) break;
        }
        for (int q = 0; q < 2; q++)
            in[q] = (const unsigned char *)weft__node_inline(n, q, j->seq) + off;
        weft__reduce3(out, in[0], in[1], c, j->dtype, j->rop);
        for (int q = 2; q < p; q++)
            weft__reduce(out, (const unsigned char *)weft__node_inline(n, q, j->seq) + off, c,
                         j->dtype, j->rop);
        break;
    }
    case WEFT__OP_ALLGATHER:
        for (int q = 0; q < p; q++)
            if (q != r) memcpy((unsigned char *)j->recvbuf + (size_t)q * nb,
                               weft__node_inline(n, q, j->seq), nb);
        if ((const unsigned char *)j->sendbuf != (unsigned char *)j->recvbuf + (size_t)r * nb)
            memcpy((unsigned char *)j->recvbuf + (size_t)r * nb, j->sendbuf, nb);
        break;
    case WEFT__OP_BCAST:
        if (r != j->root) memcpy(j->recvbuf, weft__node_inline(n, j->root, j->seq), nb);
        break;
    default:
        return WEFT_ERR_INTERNAL;
    }
    return WEFT_SUCCESS;
}

/* ---- large operations: single-copy reads of the peers' buffers ----------------- */
/* Which peers this rank reads (and must see posted first). */
static bool reads_all(const weft__shm_job_t *j)
{
    switch (j->kind) {
    case WEFT__OP_BCAST: return false;
    case WEFT__OP_REDUCE: return j->rank == j->root;
    default: return true;
    }
}

/* Does the job have a gather part (reads blocks the peers own)? */
static bool gathers(const weft__shm_job_t *j)
{
    return (j->kind == WEFT__OP_ALLREDUCE && j->part != WEFT__SHM_RS_HALF) ||
           j->kind == WEFT__OP_ALLGATHER;
}

/* The reduce-scatter part: this rank's block, chunk by chunk (allreduce:
 * published as they are done; reduce: the root's whole vector). */
static weft_status_t work(weft__shm_job_t *j)
{
    weft__node_t *n = j->node;
    const int r = j->rank;
    size_t lo = 0, hi = j->bytes;
    unsigned char *out = j->recvbuf; /* where input offset lo's result goes */
    switch (j->kind) {
    case WEFT__OP_ALLREDUCE:
        if (j->part == WEFT__SHM_AG_HALF) return WEFT_SUCCESS; /* all in the gather phase */
        block(j, r, &lo, &hi);
        out += lo;
        break;
    case WEFT__OP_REDUCE_SCATTER: /* block r of the p-block input into the output */
        lo = (size_t)r * j->bytes;
        hi = lo + j->bytes;
        out = j->acc != NULL ? j->acc : (unsigned char *)j->recvbuf;
        break;
    case WEFT__OP_REDUCE:
        if (r != j->root) return WEFT_SUCCESS;
        break;
    case WEFT__OP_BCAST:
        if (r != j->root) {
            uint64_t sb = 0, rb = 0;
            weft__node_peer_bufs(n, j->root, &sb, &rb);
            WEFT__CHECK(weft__node_read(n, j->root, j->recvbuf, rb, j->bytes));
        }
        return WEFT_SUCCESS;
    case WEFT__OP_ALLGATHER:
        return WEFT_SUCCESS; /* all in the gather phase */
    default:
        return WEFT_ERR_INTERNAL;
    }
    for (size_t off = lo + j->ci * j->chunk; off < hi; off += j->chunk, j->ci++) {
        const size_t len = hi - off < j->chunk ? hi - off : j->chunk;
        WEFT__CHECK(reduce_chunk(j, out + (off - lo), off, len));
        if (j->kind == WEFT__OP_ALLREDUCE && j->part == WEFT__SHM_WHOLE)
            weft__node_publish(n, j->seq, 2 + (uint32_t)j->ci);
    }
    return WEFT_SUCCESS;
}

/* The allgather part: allreduce reads every other block from its owner's
 * output as the owner publishes its chunks (the AG half: the owner's block
 * was final when it posted); allgather reads every peer's input. Returns
 * WEFT_INPROGRESS while a chunk is not ready. */
static weft_status_t gather(weft__shm_job_t *j)
{
    weft__node_t *n = j->node;
    const int p = j->size, r = j->rank;
    if (j->kind == WEFT__OP_ALLGATHER && j->pi == 0) {
        unsigned char *mine = (unsigned char *)j->recvbuf + (size_t)r * j->bytes;
        if (mine != (const unsigned char *)j->sendbuf) memcpy(mine, j->sendbuf, j->bytes);
    }
    if (j->pi == 0) j->pi = 1;
    for (; j->pi < p; j->pi++, j->ci = 0) {
        const int q = (r + j->pi) % p;
        uint64_t sb = 0, rb = 0;
        weft__node_peer_bufs(n, q, &sb, &rb);
        if (j->kind == WEFT__OP_ALLGATHER) {
            const size_t off = (size_t)q * j->bytes;
            WEFT__CHECK(weft__node_read(n, q, (unsigned char *)j->recvbuf + off, sb, j->bytes));
            continue;
        }
        size_t lo = 0, hi = 0;
        block(j, q, &lo, &hi);
        for (size_t off = lo + j->ci * j->chunk; off < hi; off += j->chunk, j->ci++) {
            if (j->part == WEFT__SHM_WHOLE &&
                !weft__node_reached(n, q, j->seq, 2 + (uint32_t)j->ci))
                return WEFT_INPROGRESS;
            const size_t len = hi - off < j->chunk ? hi - off : j->chunk;
            WEFT__CHECK(weft__node_read(n, q, (unsigned char *)j->recvbuf + off, rb + off, len));
            weft__engine_events++;
        }
    }
    return WEFT_SUCCESS;
}

static weft_status_t large_step(weft__shm_job_t *j)
{
    weft__node_t *n = j->node;
    const int r = j->rank;
    switch (j->phase) {
    case PH_INLINE: /* (large operations skip the inline areas) */
        weft__node_post(n, j->seq, j->sendbuf, j->recvbuf);
        j->phase = PH_ADDR;
        /* fall through */
    case PH_ADDR:
        if (reads_all(j) ? !weft__node_all_reached(n, j->seq, 1)
                         : j->kind == WEFT__OP_BCAST && r != j->root &&
                               !weft__node_reached(n, j->root, j->seq, 1))
            return WEFT_INPROGRESS;
        j->phase = PH_WORK;
        /* fall through */
    case PH_WORK:
        WEFT__CHECK(work(j));
        j->phase = PH_GATHER;
        j->ci = 0;
        /* fall through */
    case PH_GATHER:
        if (gathers(j)) {
            weft_status_t st = gather(j);
            if (st != WEFT_SUCCESS) return st;
        }
        record_trial(j);
        weft__node_publish(n, j->seq, WEFT__NODE_DONE);
        j->phase = PH_DONE_WAIT;
        /* fall through */
    case PH_DONE_WAIT: {
        /* Wait until nobody reads this rank's buffers any more: every peer
         * for a rank whose buffers they read; bcast / reduce: the root
         * waits for all, the others for the root (reduce) or nobody. */
        bool ok;
        if (j->kind == WEFT__OP_BCAST) ok = r != j->root || weft__node_all_reached(n, j->seq, WEFT__NODE_DONE);
        else if (j->kind == WEFT__OP_REDUCE)
            ok = r == j->root || weft__node_reached(n, j->root, j->seq, WEFT__NODE_DONE);
        else ok = weft__node_all_reached(n, j->seq, WEFT__NODE_DONE);
        if (!ok) return WEFT_INPROGRESS;
        if (j->acc != NULL) memcpy(j->recvbuf, j->acc, j->bytes);
        return WEFT_SUCCESS;
    }
    default:
        return WEFT_ERR_INTERNAL;
    }
}

/* ---- staged operations (WEFT_SHM_COPY): copies through the segment ------------- */
/*
 * Allreduce, reduce_scatter and allgather, in rounds of one piece per rank
 * of at most j->chunk elements (a quarter of a rank's share, between
 * STAGE_MIN and the node's block size, so that even a small vector runs in
 * a few pipelined rounds; allreduce: its vector cut in p blocks per round,
 * reduce_scatter and allgather: piece t of each rank's block). In round t,
 * rank r (a) copies the pieces of its input that its peers reduce into its
 * input area (allreduce, reduce_scatter) and publishes IN(t); (b) once every
 * peer published IN(t), reduces its own piece over every rank in rank order
 * (its own from its input, the others' from their input areas) into its
 * output and, for allreduce, its result area (allgather: copies its own
 * piece there), and publishes RED(t); (c) copies in round t + 1's pieces
 * (IN(t + 1)) before (d) it copies every peer's result area into its
 * output as the peer publishes RED(t) (allreduce, allgather), and
 * publishes GOT(t): the peer that reduces next finds its inputs there
 * while this rank copies. Round t uses area (abase + t) % AREAS of each kind;
 * an area is written again AREAS rounds later only once every peer published
 * RED (inputs read) or GOT (results read) of the round that used it, and
 * the operation ends once every peer published GOT of the last round, so
 * the next one finds every area free. No page of another process is
 * pinned: every copy is a plain memcpy within the segment. Stages are
 * numbered in publication order (IN(0), RED(0), IN(1), GOT(0), RED(1),
 * IN(2), GOT(1), ...), as the progress word only grows.
 */
#define ST_IN(t) (1u + 3u * (uint32_t)(t) + ((t) == 0 ? 1u : 0u))
#define ST_RED(t) (3u + 3u * (uint32_t)(t))
#define ST_GOT(t) (5u + 3u * (uint32_t)(t))
#define AREAS ((size_t)WEFT__NODE_STAGE_AREAS)
#define STAGE_MIN (16u * 1024u) /* bytes: smaller pieces cost more in synchronisation */
#define STAGE_SUB (8u * 1024u)  /* bytes reduced before their copy to the output (in L1) */
_Static_assert(ST_IN(0) == 2 && ST_RED(0) < ST_IN(1) && ST_IN(1) < ST_GOT(0) &&
                   ST_GOT(0) < ST_RED(1) && ST_IN(2) == ST_GOT(0) + 2,
               "staged stages must grow in publication order");

/* Elements of a piece in a full round (the same on every rank). */
static size_t staged_per(const weft__shm_job_t *j)
{
    const size_t es = j->es, parts = j->kind == WEFT__OP_ALLREDUCE ? 4 * (size_t)j->size : 4;
    size_t per = (j->count + parts - 1) / parts;
    if (per < STAGE_MIN / es) per = STAGE_MIN / es;
    const size_t most = weft__node_stage_chunk(j->node) / es;
    if (per > most) per = most;
    return per > 0 ? per : 1;
}

static size_t staged_rounds(const weft__shm_job_t *j)
{
    const size_t full = j->kind == WEFT__OP_ALLREDUCE ? j->chunk * (size_t)j->size : j->chunk;
    return (j->count + full - 1) / full;
}

/* Rank q's piece of round t: bytes at `in` of q's input, at `out` of the
 * output, at `area` of an input area (where its owner's peers put it for
 * q), `len` long. */
typedef struct piece {
    size_t in, out, area, len;
} piece_t;

static piece_t round_piece(const weft__shm_job_t *j, size_t t, int q)
{
    const size_t es = j->es, p = (size_t)j->size;
    if (j->kind == WEFT__OP_ALLREDUCE) { /* the round's elements cut in p blocks */
        const size_t full = j->chunk * p, first = t * full;
        size_t cnt = j->count - first;
        if (cnt > full) cnt = full;
        const size_t lo = first + cnt * (size_t)q / p, hi = first + cnt * (size_t)(q + 1) / p;
        return (piece_t){lo * es, lo * es, (lo - first) * es, (hi - lo) * es};
    }
    const size_t lo = t * j->chunk, n = j->count - lo < j->chunk ? j->count - lo : j->chunk;
    if (j->kind == WEFT__OP_REDUCE_SCATTER) /* piece t of block q of the input */
        return (piece_t){((size_t)q * j->count + lo) * es, lo * es, (size_t)q * j->chunk * es,
                         n * es};
    /* allgather: piece t of q's input, at block q of the output */
    return (piece_t){lo * es, ((size_t)q * j->count + lo) * es, 0, n * es};
}

/* Copy round t's pieces that the peers reduce into this rank's input area,
 * once the area's previous round (t - AREAS) was read; publishes IN(t). */
static bool staged_copy_in(weft__shm_job_t *j, size_t t)
{
    weft__node_t *n = j->node;
    const int p = j->size, r = j->rank;
    if (j->kind != WEFT__OP_ALLGATHER) {
        if (t >= AREAS && !weft__node_all_reached(n, j->seq, ST_RED(t - AREAS))) return false;
        unsigned char *mine = weft__node_stage(n, r, j->abase + t, 0);
        for (int q = 0; q < p; q++) {
            if (q == r) continue;
            const piece_t pc = round_piece(j, t, q);
            memcpy(mine + pc.area, (const unsigned char *)j->sendbuf + pc.in, pc.len);
        }
    }
    weft__node_publish(n, j->seq, ST_IN(t));
    weft__engine_events++;
    return true;
}

/* Source q of this rank's piece of round t, `off` bytes into it. */
static const unsigned char *staged_src(weft__shm_job_t *j, size_t t, int q, const piece_t *pc,
                                       size_t off)
{
    if (q == j->rank) return (const unsigned char *)j->sendbuf + pc->in + off;
    return (const unsigned char *)weft__node_stage(j->node, q, j->abase + t, 0) + pc->area + off;
}

/* This rank's part of round t: reduce its piece into its output (allreduce:
 * and its result area, STAGE_SUB bytes at a time so that the copy reads
 * from L1), or (allgather) copy its piece into its result area and its
 * output. In place: each part of the input is read before its output. */
static void staged_own(weft__shm_job_t *j, size_t t)
{
    const int p = j->size;
    const size_t es = j->es;
    const piece_t pc = round_piece(j, t, j->rank);
    unsigned char *out = (unsigned char *)j->recvbuf + pc.out;
    unsigned char *res = weft__node_stage(j->node, j->rank, j->abase + t, 1);
    if (j->kind == WEFT__OP_ALLGATHER) {
        const unsigned char *in = (const unsigned char *)j->sendbuf + pc.in;
        memcpy(res, in, pc.len);
        if (in != out) memcpy(out, in, pc.len);
        return;
    }
    const bool keep = j->kind == WEFT__OP_ALLREDUCE; /* the peers read the result */
    const size_t step = keep ? (STAGE_SUB / es > 0 ? STAGE_SUB / es * es : es) : pc.len;
    for (size_t off = 0; off < pc.len; off += step) {
        const size_t len = pc.len - off < step ? pc.len - off : step, cnt = len / es;
        unsigned char *dst = keep ? res + off : out + off;
        weft__reduce3(dst, staged_src(j, t, 0, &pc, off), staged_src(j, t, 1, &pc, off), cnt,
                      j->dtype, j->rop);
        for (int q = 2; q < p; q++)
            weft__reduce(dst, staged_src(j, t, q, &pc, off), cnt, j->dtype, j->rop);
        if (keep) memcpy(out + off, dst, len);
    }
}

static weft_status_t staged_step(weft__shm_job_t *j)
{
    weft__node_t *n = j->node;
    const int p = j->size, r = j->rank;
    const size_t nr = staged_rounds(j);
    const bool reads_in = j->kind != WEFT__OP_ALLGATHER,
               results = j->kind != WEFT__OP_REDUCE_SCATTER;
    /* j->sub: 0 copy in round t, 1 own piece, 2 copy in round t + 1, 3 copy out */
    for (; j->ci < nr; j->ci++, j->sub = 1, j->pi = 0) {
        const size_t t = j->ci;
        if (j->sub == 0) {
            if (!staged_copy_in(j, t)) return WEFT_INPROGRESS;
            j->sub = 1;
        }
        if (j->sub == 1) {
            if (reads_in && !weft__node_all_reached(n, j->seq, ST_IN(t))) return WEFT_INPROGRESS;
            if (results && t >= AREAS && !weft__node_all_reached(n, j->seq, ST_GOT(t - AREAS)))
                return WEFT_INPROGRESS;
            staged_own(j, t);
            weft__node_publish(n, j->seq, ST_RED(t));
            weft__engine_events++;
            j->sub = 2;
        }
        if (j->sub == 2) {
            if (t + 1 < nr && !staged_copy_in(j, t + 1)) return WEFT_INPROGRESS;
            j->sub = 3;
            j->pi = results ? 1 : p;
        }
        for (; j->pi < p; j->pi++) { /* copy out the peers' pieces */
            const int q = (r + j->pi) % p;
            if (!weft__node_reached(n, q, j->seq, ST_RED(t))) return WEFT_INPROGRESS;
            const piece_t pc = round_piece(j, t, q);
            memcpy((unsigned char *)j->recvbuf + pc.out, weft__node_stage(n, q, j->abase + t, 1),
                   pc.len);
        }
        if (t + 1 == nr) record_trial(j);
        weft__node_publish(n, j->seq, ST_GOT(t));
    }
    if (nr > 0 && !weft__node_all_reached(n, j->seq, ST_GOT(nr - 1))) return WEFT_INPROGRESS;
    return WEFT_SUCCESS;
}

weft_status_t weft__shm_job_step(weft__shm_job_t *j)
{
    weft__node_t *n = j->node;
    if (j->phase == PH_TURN) {
        if (!weft__node_turn(n, j->seq)) return WEFT_INPROGRESS;
        j->phase = PH_INLINE;
        if (j->mode_call >= 0) settle_mode(j);
        if (j->staged) j->abase = weft__node_stage_take(n, staged_rounds(j));
        if (j->bytes == 0) { /* nothing to move; the numbering goes on */
            weft__node_publish(n, j->seq, WEFT__NODE_DONE);
            weft__node_end(n, j->seq);
            j->ended = 1;
            return WEFT_SUCCESS;
        }
    }
    /* A trial times the operation from the moment every rank has arrived:
     * which rank comes first, and how much later the others, is the
     * program's, not the mode's. */
    if (j->trial > 0 && j->t0 == 0) {
        j->tstep = weft__now(); /* the last arrival is after it, if within this step */
        if (weft__node_all_reached(n, j->seq, 1)) j->t0 = j->tstep;
    }
    const int phase = j->phase;
    const size_t ci = j->ci;
    const int pi = j->pi;
    weft_status_t st;
    if (j->small) {
        st = small_step(j);
    } else if (j->staged) {
        if (j->phase == PH_INLINE) {
            weft__node_post(n, j->seq, j->sendbuf, j->recvbuf);
            j->phase = PH_WORK;
        }
        st = staged_step(j);
    } else {
        st = large_step(j);
    }
    if (st == WEFT_INPROGRESS && (phase != j->phase || ci != j->ci || pi != j->pi))
        weft__engine_events++; /* progress the status does not show */
    if (st == WEFT_SUCCESS) {
        weft__node_end(n, j->seq);
        j->ended = 1;
    }
    return st;
}

/* A large operation's prediction: its cross-memory-attach cost (the figures
 * the path measures as it opens) less this fraction. That cost is an upper
 * bound: the path runs its staged mode instead only where timed trials find
 * it faster. The transport's algorithms on one node move the same bytes by
 * the same kernel copy, plus a message protocol per chunk that their costs
 * leave out. On 2 ranks the ring's allreduce cost has the same terms as the
 * path's, so with the upper bound the selection fell to measurement noise
 * (0.3 - 4 % apart at 1 - 16 MiB) and took ring from 1 or 2 MiB in some
 * processes, where the path ran 1.1 - 1.7x faster (doc/design.md,
 * "Selection"). */
#define SHM_LARGE_DISCOUNT 0.10

double weft__shm_cost(weft__opkind_t kind, int p, size_t n, const weft__cost_t *c)
{
    if (c->alpha_shm <= 0 || p < 2 || (c->nnodes > 1)) return INFINITY;
    const double a = c->alpha_shm, b = c->beta_shm, g = c->gamma, dn = (double)n;
    const double f = (double)(p - 1) / p;
    /* small: one synchronisation, the copies into and out of the inline
     * areas (at about the path's per-byte cost) and the reductions */
    double large;
    switch (kind) {
    case WEFT__OP_ALLREDUCE:
        if (n <= WEFT__NODE_INLINE) return a + dn * b + (p - 1) * dn * g;
        large = 2 * a + 2 * f * dn * b + f * dn * g;
        break;
    case WEFT__OP_REDUCE_SCATTER:
        if (n * (size_t)p <= WEFT__NODE_INLINE) return a + p * dn * b + (p - 1) * dn * g;
        large = 2 * a + (p - 1) * dn * (b + g);
        break;
    case WEFT__OP_ALLGATHER:
        if (n <= WEFT__NODE_INLINE) return a + p * dn * b;
        large = 2 * a + (p - 1) * dn * b;
        break;
    case WEFT__OP_BCAST:
        if (n <= WEFT__NODE_INLINE) return a + 2 * dn * b;
        large = 2 * a + dn * b;
        break;
    case WEFT__OP_REDUCE:
        if (n <= WEFT__NODE_INLINE) return a + dn * b + (p - 1) * dn * g;
        large = 2 * a + (p - 1) * dn * (b + g);
        break;
    default:
        return INFINITY;
    }
    return large * (1.0 - SHM_LARGE_DISCOUNT);
}

double weft__shm_halves_cost(int p, size_t n, const weft__cost_t *c)
{
    if (c->alpha_shm <= 0 || p < 2) return INFINITY;
    const double a = c->alpha_shm, b = c->beta_shm, dn = (double)n;
    const double f = (double)(p - 1) / p;
    /* small: each half copies into its inline area and out of the peers'
     * (about n bytes each way); large: each reads the (p-1)/p n bytes of
     * the others' blocks, after a publish and before the final one. The
     * reductions (f n gamma) are the caller's to count. */
    if (n <= WEFT__NODE_INLINE) return 2 * (a + dn * b);
    return 2 * (2 * a + f * dn * b);
}
