/* op.c - operation objects, issuing, and the transfer helpers of lib/coll. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft_internal.h"

/*
 * Op cache: each thread keeps up to OP_CACHE_MAX freed ops for its next
 * weft__op_new. An op is about 1.7 KiB, above glibc's thread cache: every
 * posix_memalign/free pair went through the arena and, with the small blocks
 * MPI and UCX free in between, through malloc_consolidate (5% of a rank's
 * time in a 8-byte ping-pong). An op freed on another thread than the one
 * that made it lands in the freeing thread's cache. A thread's cache is
 * freed when the thread exits (key destructor) or in weft_finalize for the
 * thread that calls it.
 */
#define OP_CACHE_MAX 32
static _Thread_local struct {
    weft__op_t *head;
    int n;
} op_cache;
static pthread_key_t op_cache_key;
static pthread_once_t op_cache_once = PTHREAD_ONCE_INIT;
static int op_cache_key_ok;

/* The cache links ops through their task's list link (unused while cached). */
static weft__op_t *op_next_cached(weft__op_t *op) { return (weft__op_t *)(void *)op->task.next; }

static void op_cache_drain(void)
{
    while (op_cache.head) {
        weft__op_t *op = op_cache.head;
        op_cache.head = op_next_cached(op);
        free(op);
    }
    op_cache.n = 0;
}

static void op_cache_destroy(void *unused)
{
    WEFT__UNUSED(unused);
    op_cache_drain();
}

static void op_cache_key_init(void)
{
    op_cache_key_ok = pthread_key_create(&op_cache_key, op_cache_destroy) == 0;
}

/* Calling thread's cache only. weft_finalize. */
void weft__op_cache_trim(void) { op_cache_drain(); }

/* Caller thread. */
weft_status_t weft__op_new(weft__comm_t *comm, weft__opkind_t kind, weft__op_t **out)
{
    weft__op_t *op = op_cache.head;
    if (op != NULL) {
        op_cache.head = op_next_cached(op);
        op_cache.n--;
    } else if (posix_memalign((void **)&op, 64, sizeof *op) != 0) {
        /* 64-byte aligned: priv is 16-byte aligned inside the struct */
        return WEFT_ERR_NO_MEMORY;
    }
    /* Only the header needs zeroing; xfer[] and priv[] are set by their users. */
    memset(op, 0, offsetof(weft__op_t, xfer));
    op->nxfer = 0;
    op->tmp = NULL;
    op->tmp_bytes = 0;
    weft__task_reset(&op->task, &comm->queue);
    op->ready = NULL;
    op->finish = NULL;
    op->unbound = 0;
    op->owned = NULL;
    op->kind = kind;
    op->comm = comm;
    op->root = -1;
    *out = op;
    return WEFT_SUCCESS;
}

/* Any thread. */
void weft__op_free(weft__op_t *op)
{
    if (op->sop != NULL) weft__stream_op_release(op);
    if (op->owned != NULL) {
        free(op->owned);
        op->owned = NULL;
    }
    if (op_cache.n >= OP_CACHE_MAX) {
        free(op);
        return;
    }
    if (op_cache.n == 0) {
        /* Register the destructor for this thread once it holds something
         * (setting the value again is harmless). */
        pthread_once(&op_cache_once, op_cache_key_init);
        if (!op_cache_key_ok || pthread_setspecific(op_cache_key, &op_cache) != 0) {
            free(op);
            return;
        }
    }
    op->task.next = op_cache.head != NULL ? &op_cache.head->task : NULL;
    op_cache.head = op;
    op_cache.n++;
}

/* op->finish of a widened AVG: divide the wide sum, narrow into the caller's buffer. */
static weft_status_t finish_avg_wide(weft__op_t *op)
{
    if (op->user_count > 0 && op->recvbuf != NULL)
        weft__avg_narrow(op->user_recvbuf, op->recvbuf, op->user_count, op->user_dtype,
                         op->comm->size);
    return WEFT_SUCCESS;
}

/* Caller thread. */
weft_status_t weft__avg_prepare(weft__op_t *op, size_t in_count, size_t out_count)
{
    const weft_datatype_t wide = weft__avg_wide(op->dtype);
    const size_t es = weft__dtype_size(wide);
    if (in_count > (SIZE_MAX / es) - out_count) return WEFT_ERR_COUNT_OVERFLOW;
    char *mem = malloc((in_count + out_count) * es + 1);
    if (mem == NULL) return WEFT_ERR_NO_MEMORY;
    weft__avg_widen(mem, op->sendbuf, in_count, op->dtype);
    op->owned = mem;
    op->user_recvbuf = op->recvbuf;
    op->user_count = op->recvbuf != NULL ? out_count : 0;
    op->user_dtype = op->dtype;
    op->sendbuf = mem;
    op->recvbuf = op->recvbuf != NULL ? mem + in_count * es : NULL;
    op->dtype = wide;
    op->bytes = op->count * es;
    op->finish = finish_avg_wide;
    return WEFT_SUCCESS;
}

/* Any thread. The op belongs to Weft from here on. */
weft_status_t weft__issue(weft__op_t *op, weft_request_t *req)
{
    weft__comm_t *c = op->comm;
    weft_status_t st = (weft_status_t)atomic_load_explicit(&c->error, memory_order_relaxed);
    if (st != WEFT_SUCCESS) {
        weft__op_free(op);
        return WEFT_ERR_COMM_BROKEN;
    }
    /* Every op passes here, so stream binding is decided in one place. */
    st = op->unbound ? WEFT_SUCCESS : weft__stream_prepare(op);
    if (st != WEFT_SUCCESS) {
        weft__op_free(op);
        return st;
    }
    if (op->sop != NULL) {
        /* Stream-bound: order the op after the stream's work; a blocking call
         * hands the op to the stream and returns at once (lib/stream.c). */
        st = weft__stream_issue(op, req == NULL);
        if (st != WEFT_SUCCESS) {
            weft__op_free(op);
            return st;
        }
    }
    weft_request_t handle = WEFT_REQUEST_NULL;
    if (req != NULL) {
        st = weft__request_new(op, &handle);
        if (st != WEFT_SUCCESS) {
            weft__op_free(op);
            return st;
        }
    }
    /* Collectives take the next issue number as their tag: every rank issues
     * the same collectives in the same order, so the numbers agree. Point-to-
     * point ops are not issued by every rank and must not advance it (their
     * tags come from the user's tag, above the collective range). */
    if (op->kind != WEFT__OP_SEND && op->kind != WEFT__OP_RECV)
        op->tag = atomic_fetch_add_explicit(&c->seq, 1, memory_order_relaxed) & WEFT__COLL_TAG_MASK;
    op->timed = WEFT__OBS_ON();
    if (op->timed) {
        op->t_issue = weft__now();
        weft__obs_issue(op);
    } else {
        op->t_issue = 0.0; /* read only for timed ops (trace, profile): no clock read here */
    }
    atomic_fetch_add_explicit(&c->inflight, 1, memory_order_relaxed);
    if (req != NULL) {
        /* Before the submission: a callback may run from then on, and the
         * handle is what it releases. The communicator's callback
         * (weft_comm_set_on_complete) is the request's from its issue; a halo
         * exchange's request lives in its plan, not with the caller. */
        *req = handle;
        const weft__comm_cb_t *cc = atomic_load_explicit(&c->on_complete, memory_order_acquire);
        if (cc != NULL && op->kind != WEFT__OP_HALO)
            weft__task_preset_comm_callback(&op->task, cc->fn, cc->arg, req);
        weft__engine_submit(&op->task, false);
        return WEFT_SUCCESS;
    }
    if (op->sop != NULL) { /* stream semantics: the stream waits, not the host */
        weft__engine_submit(&op->task, false);
        return WEFT_SUCCESS;
    }
    /* Blocking: do not wake the engine; this thread drives the op itself and
     * wakes the engine only if it has to wait long. */
    if (!weft__engine_start_inline(&op->task)) weft__engine_submit(&op->task, true);
    if (WEFT__OP_OBSERVED(op)) weft__obs_wait_done(op); /* times the blocked wait */
    else weft__op_wait_done(op);
    st = op->task.status;
    weft__op_free(op);
    return st;
}

/* ---- the engine's view of an op (progress/progress.h's task class) ---------------- */
/* Each runs on the engine side (progress lock held). */
static bool op_ready(weft__task_t *t)
{
    weft__op_t *op = weft__op_of(t);
    return op->ready == NULL || op->ready(op);
}

static weft_status_t op_start(weft__task_t *t)
{
    weft__op_t *op = weft__op_of(t);
    t->t_start = op->timed ? weft__now() : weft__now_coarse();
    const weft_status_t st = op->impl->start(op);
    if (WEFT__OP_OBSERVED(op)) weft__obs_start(op, st);
    return st;
}

static weft_status_t op_step(weft__task_t *t)
{
    weft__op_t *op = weft__op_of(t);
    if (WEFT__OP_OBSERVED(op)) return weft__obs_step(op); /* times the step (trace) */
    return op->impl->step(op);
}

static void cancel_xfers(weft__op_t *op)
{
    for (int i = 0; i < op->nxfer; i++)
        if (op->xfer[i].active) op->comm->tp->cancel(op->comm, &op->xfer[i]);
    op->nxfer = 0;
}

/* Cleanup, finish hook, observation; the engine publishes the status returned. */
static weft_status_t op_finish(weft__task_t *t, weft_status_t st)
{
    weft__op_t *op = weft__op_of(t);
    if (st < 0) {
        cancel_xfers(op);
        /* Sticky: later ops on this communicator fail fast. */
        int zero = 0;
        atomic_compare_exchange_strong_explicit(&op->comm->error, &zero, (int)st,
                                                memory_order_relaxed, memory_order_relaxed);
    }
    if (t->started && op->impl && op->impl->cleanup) op->impl->cleanup(op);
    if (st == WEFT_SUCCESS && op->finish) st = op->finish(op);
    if (WEFT__OP_OBSERVED(op)) weft__obs_done(op, st); /* before op may be freed */
    atomic_fetch_sub_explicit(&op->comm->inflight, 1, memory_order_release);
    return st;
}

static void op_describe(const weft__task_t *t, char *buf, size_t cap)
{
    const weft__op_t *op = (const weft__op_t *)(const void *)t;
    const char *algo = weft_algo_name(op->algo);
    snprintf(buf, cap,
             "%s on comm %d (rank %d of %d), tag %u, algorithm %s, phase %d step %d, "
             "%d transfers pending",
             weft__opkind_name(op->kind), op->comm->id, op->comm->rank, op->comm->size, op->tag,
             algo ? algo : "?", op->phase, op->stepno, op->nxfer);
}

const weft__task_class_t weft__op_class = {
    .ready = op_ready,
    .start = op_start,
    .step = op_step,
    .finish = op_finish,
    .describe = op_describe,
};

void weft__op_wait_done(weft__op_t *op)
{
    weft__task_wait(&op->task, op->comm->tp->poll_pause);
}

/* ---- transfer helpers (engine side) ------------------------------------------- */
static int xfer_room(const weft__op_t *op)
{
    if (WEFT__LIKELY(op->nxfer < WEFT__MAX_XFER)) return 1;
    WEFT__ERROR("%s: more than %d transfers in one step", weft__opkind_name(op->kind),
                WEFT__MAX_XFER);
    return 0;
}

static weft_status_t coll_isend(weft__op_t *op, const void *buf, size_t bytes, int peer,
                                int eager)
{
    if (!xfer_room(op)) return WEFT_ERR_INTERNAL;
    weft__xfer_t *x = &op->xfer[op->nxfer];
    x->eager = eager;
    weft_status_t st = op->comm->tp->isend(op->comm, buf, bytes, peer, op->tag, x);
    if (st == WEFT_SUCCESS) op->nxfer++;
    return st;
}

weft_status_t weft__coll_isend(weft__op_t *op, const void *buf, size_t bytes, int peer)
{
    return coll_isend(op, buf, bytes, peer, 0);
}

weft_status_t weft__coll_isend_eager(weft__op_t *op, const void *buf, size_t bytes, int peer)
{
    return coll_isend(op, buf, bytes, peer, 1);
}

static weft_status_t coll_post_dt(weft__op_t *op, const weft__xfer_dt_t *d, int peer, int send)
{
    if (!xfer_room(op)) return WEFT_ERR_INTERNAL;
    weft__xfer_t *x = &op->xfer[op->nxfer];
    x->eager = send; /* packed sends are halo faces */
    weft_status_t st = send ? op->comm->tp->isend_dt(op->comm, d, peer, op->tag, x)
                            : op->comm->tp->irecv_dt(op->comm, d, peer, op->tag, x);
    if (st == WEFT_SUCCESS) op->nxfer++;
    return st;
}

weft_status_t weft__coll_isend_dt(weft__op_t *op, const weft__xfer_dt_t *d, int peer)
{
    return coll_post_dt(op, d, peer, 1);
}

weft_status_t weft__coll_irecv_dt(weft__op_t *op, const weft__xfer_dt_t *d, int peer)
{
    return coll_post_dt(op, d, peer, 0);
}

/* Below 2 KiB the piecewise receive costs more than the copy it saves
 * (UCX, 2 ranks: 512 B allreduce 0.73 against 0.70 us, 1 KiB 0.85 against
 * 0.84; 4 KiB 1.30 against 1.38, 8 KiB 1.90 against 2.05); above UCX's eager
 * range a message that UCX must unpack cannot go by its zero-copy rendezvous
 * (16 KiB: 3.87 against 2.91 us), hence WEFT_FUSED_REDUCE_MAX = 8 KiB. */
#define FUSED_MIN_BYTES 2048

bool weft__coll_can_recv_reduce(const weft__op_t *op, size_t bytes)
{
    return op->comm->tp->irecv_dt != NULL && bytes >= FUSED_MIN_BYTES &&
           bytes <= weft__cfg.fused_reduce_max;
}

weft_status_t weft__coll_irecv_reduce(weft__op_t *op, weft__rr_t *rr, void *out, const void *a,
                                      size_t count, int peer)
{
    weft__rr_init(rr, out, a, count, op->dtype, op->rop);
    return coll_post_dt(op, &rr->d, peer, 0);
}

weft_status_t weft__coll_irecv(weft__op_t *op, void *buf, size_t bytes, int peer)
{
    if (!xfer_room(op)) return WEFT_ERR_INTERNAL;
    weft__xfer_t *x = &op->xfer[op->nxfer];
    weft_status_t st = op->comm->tp->irecv(op->comm, buf, bytes, peer, op->tag, x);
    if (st == WEFT_SUCCESS) op->nxfer++;
    return st;
}

weft_status_t weft__coll_test(weft__op_t *op)
{
    if (op->nxfer == 0) return WEFT_SUCCESS;
    int done = 0;
    weft_status_t st = op->comm->tp->testall(op->comm, op->xfer, op->nxfer, &done);
    if (st != WEFT_SUCCESS) return st;
    if (!done) return WEFT_INPROGRESS;
    op->nxfer = 0;
    weft__engine_events++;
    return WEFT_SUCCESS;
}

/* ---- scratch cache (engine side, under the progress lock) ---------------------- */
#define SCRATCH_SLOTS 4
#define SCRATCH_HDR 64 /* keeps the buffer 64-byte aligned; holds its capacity */

static struct {
    void *base[SCRATCH_SLOTS];
    size_t cap[SCRATCH_SLOTS];
} scratch;

void *weft__scratch_alloc(size_t bytes)
{
    int best = -1;
    for (int i = 0; i < SCRATCH_SLOTS; i++)
        if (scratch.base[i] && scratch.cap[i] >= bytes && (best < 0 || scratch.cap[i] < scratch.cap[best]))
            best = i;
    void *base;
    if (best >= 0) {
        base = scratch.base[best];
        scratch.base[best] = NULL;
    } else {
        size_t cap = bytes < 4096 ? 4096 : bytes;
        if (posix_memalign(&base, SCRATCH_HDR, cap + SCRATCH_HDR) != 0) return NULL;
        *(size_t *)base = cap;
    }
    return (char *)base + SCRATCH_HDR;
}

void weft__scratch_free(void *p)
{
    if (p == NULL) return;
    void *base = (char *)p - SCRATCH_HDR;
    size_t cap = *(size_t *)base;
    int slot = -1;
    for (int i = 0; i < SCRATCH_SLOTS; i++) {
        if (scratch.base[i] == NULL) { slot = i; break; }
        if (slot < 0 || scratch.cap[i] < scratch.cap[slot]) slot = i; /* smallest */
    }
    if (scratch.base[slot] != NULL) {
        if (scratch.cap[slot] >= cap) { /* keep the larger ones */
            free(base);
            return;
        }
        free(scratch.base[slot]);
    }
    scratch.base[slot] = base;
    scratch.cap[slot] = cap;
}

void weft__scratch_trim(void)
{
    for (int i = 0; i < SCRATCH_SLOTS; i++) {
        free(scratch.base[i]);
        scratch.base[i] = NULL;
    }
}
