/*
 * request.c - request handles (completion itself: progress/completion.c).
 *
 * A handle is (generation << 32 | slot + 1). Slots live in chunks that never
 * move and are kept across weft_finalize; a slot's generation changes every
 * time it is released, so a stale copy of a handle - also one from before a
 * weft_finalize + weft_init - is recognised (WEFT_ERR_INVALID_REQUEST)
 * instead of touching someone else's operation.
 */
#include <errno.h>
#include <sched.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "weft_internal.h"

#define CHUNK_SLOTS 1024u
#define MAX_CHUNKS 4096u

typedef struct slot {
    uint32_t gen;     /* written under `lock` (release_locked) */
    _Atomic int in_use; /* set by the issuing thread without the lock (a slot of its
                         * cache), read and cleared under `lock` */
    weft__op_t *op;
    uint32_t next_free;
} slot_t;

static struct {
    pthread_mutex_t lock;
    slot_t *chunks[MAX_CHUNKS];
    uint32_t nslots;
    uint32_t free_head; /* slot index + 1, 0 = none */
} R = {.lock = PTHREAD_MUTEX_INITIALIZER};

static slot_t *slot_at(uint32_t idx) { return &R.chunks[idx / CHUNK_SLOTS][idx % CHUNK_SLOTS]; }

/*
 * Each issuing thread takes free slots SLOT_BATCH at a time (one critical
 * section per batch) and hands them out from its own cache without the
 * lock: the issue of a nonblocking call then touches no shared line for its
 * handle. Slots return to the shared list when released (under the lock, by
 * whichever thread waits or tests), and a thread's cache when the thread
 * exits (key destructor). A cached slot is free (in_use 0): a stale handle
 * naming it is refused as before. Without a key (pthread_key_create failed)
 * a thread takes one slot at a time.
 */
#define SLOT_BATCH 16u
static _Thread_local struct {
    uint32_t head; /* slot index + 1, chained through next_free, 0 = empty */
    uint32_t n;
    int keyed;     /* the destructor will return the cache */
} slot_cache;
static pthread_key_t slot_cache_key;
static pthread_once_t slot_cache_once = PTHREAD_ONCE_INIT;
static int slot_cache_key_ok;

/* Thread exit: the cache back to the shared list. */
static void slot_cache_return(void *unused)
{
    WEFT__UNUSED(unused);
    if (slot_cache.n == 0) return;
    pthread_mutex_lock(&R.lock);
    uint32_t tail = slot_cache.head;
    while (slot_at(tail - 1)->next_free != 0) tail = slot_at(tail - 1)->next_free;
    slot_at(tail - 1)->next_free = R.free_head;
    R.free_head = slot_cache.head;
    pthread_mutex_unlock(&R.lock);
    slot_cache.head = 0;
    slot_cache.n = 0;
}

static void slot_cache_key_init(void)
{
    slot_cache_key_ok = pthread_key_create(&slot_cache_key, slot_cache_return) == 0;
}

/* Fill this thread's empty cache with up to `want` slots from the shared
 * list, a new chunk if it is empty. R.lock held. */
static weft_status_t slot_cache_fill_locked(uint32_t want)
{
    if (R.free_head == 0) {
        uint32_t c = R.nslots / CHUNK_SLOTS;
        if (c >= MAX_CHUNKS) return WEFT_ERR_NO_MEMORY;
        R.chunks[c] = calloc(CHUNK_SLOTS, sizeof(slot_t));
        if (R.chunks[c] == NULL) return WEFT_ERR_NO_MEMORY;
        for (uint32_t i = 0; i < CHUNK_SLOTS; i++) { /* chain the new slots in order */
            R.chunks[c][i].gen = 1;
            R.chunks[c][i].next_free = (i + 1 < CHUNK_SLOTS) ? R.nslots + i + 2 : 0;
        }
        R.free_head = R.nslots + 1;
        R.nslots += CHUNK_SLOTS;
    }
    uint32_t tail = R.free_head, n = 1;
    while (n < want && slot_at(tail - 1)->next_free != 0) {
        tail = slot_at(tail - 1)->next_free;
        n++;
    }
    slot_cache.head = R.free_head;
    slot_cache.n = n;
    R.free_head = slot_at(tail - 1)->next_free;
    slot_at(tail - 1)->next_free = 0;
    return WEFT_SUCCESS;
}

/* Any thread. */
weft_status_t weft__request_new(weft__op_t *op, weft_request_t *req)
{
    if (WEFT__UNLIKELY(slot_cache.n == 0)) {
        if (!slot_cache.keyed) {
            pthread_once(&slot_cache_once, slot_cache_key_init);
            slot_cache.keyed =
                slot_cache_key_ok && pthread_setspecific(slot_cache_key, &slot_cache) == 0;
        }
        pthread_mutex_lock(&R.lock);
        const weft_status_t st = slot_cache_fill_locked(slot_cache.keyed ? SLOT_BATCH : 1);
        pthread_mutex_unlock(&R.lock);
        if (st != WEFT_SUCCESS) return st;
    }
    /* A slot of this thread's cache: free, its gen and next_free last written
     * under R.lock before this thread took it there. */
    const uint32_t idx = slot_cache.head - 1;
    slot_t *s = slot_at(idx);
    slot_cache.head = s->next_free;
    slot_cache.n--;
    s->op = op;
    /* relaxed: whoever may take the op has the handle from this thread (that
     * hand-off orders it); a stale handle's look-up only compares */
    atomic_store_explicit(&s->in_use, 1, memory_order_relaxed);
    *req = ((uint64_t)s->gen << 32) | (uint64_t)(idx + 1);
    return WEFT_SUCCESS;
}

/* The slot index of a live handle, or UINT32_MAX if stale/unknown. R.lock held. */
static uint32_t live_slot(weft_request_t h)
{
    uint32_t idx = (uint32_t)(h & 0xffffffffu);
    uint32_t gen = (uint32_t)(h >> 32);
    if (idx == 0 || idx - 1 >= R.nslots) return UINT32_MAX;
    slot_t *s = slot_at(idx - 1);
    return atomic_load_explicit(&s->in_use, memory_order_relaxed) && s->gen == gen ? idx - 1
                                                                                    : UINT32_MAX;
}

/* Free slot idx. R.lock held. */
static void release_locked(uint32_t idx)
{
    slot_t *s = slot_at(idx);
    atomic_store_explicit(&s->in_use, 0, memory_order_relaxed);
    s->op = NULL;
    s->gen++;
    if (s->gen == 0) s->gen = 1;
    s->next_free = R.free_head;
    R.free_head = idx + 1;
}

/* Free the ops nobody waited for and retire their handles. The chunks and
 * their generations stay (reachable, reused by the next weft_init), so a
 * handle from before a weft_finalize never names an operation of a later
 * init. weft_finalize, engine stopped. */
void weft__request_fini(void)
{
    pthread_mutex_lock(&R.lock);
    for (uint32_t i = 0; i < R.nslots; i++) {
        slot_t *s = slot_at(i);
        if (!atomic_load_explicit(&s->in_use, memory_order_relaxed)) continue;
        weft__op_free(s->op);
        release_locked(i);
    }
    pthread_mutex_unlock(&R.lock);
}

weft_status_t weft_request_on_complete(weft_request_t req, weft_request_callback_t fn, void *arg)
{
    if (!weft__is_init()) return WEFT_ERR_NOT_INITIALIZED;
    if (fn == NULL) return WEFT_ERR_INVALID_ARG;
    weft_status_t st = WEFT_SUCCESS;
    pthread_mutex_lock(&R.lock);
    /* Under the lock a live handle's op cannot be freed: only a taker frees
     * it, and taking needs the lock. */
    const uint32_t i = live_slot(req);
    if (i == UINT32_MAX) {
        st = WEFT_ERR_INVALID_REQUEST;
        goto out;
    }
    weft__op_t *op = slot_at(i)->op;
    if (op->sop != NULL) {
        st = WEFT_ERR_UNSUPPORTED; /* completion belongs to the stream */
        goto out;
    }
    /* cb_fn: written only under this lock; cb_comm_fn: before the handle existed */
    if (op->task.cb_fn != NULL || op->task.cb_comm_fn != NULL) {
        st = WEFT_ERR_INVALID_ARG;
        goto out;
    }
    /* Under R.lock: no second registration, and no taker frees op meanwhile. */
    if (weft__task_on_complete(&op->task, fn, arg)) goto out;
    /* Already complete (its status is visible): run fn here, outside the lock. */
    const weft_status_t op_st = op->task.status;
    pthread_mutex_unlock(&R.lock);
    fn(arg, op_st);
    return WEFT_SUCCESS;
out:
    pthread_mutex_unlock(&R.lock);
    return st;
}

/* ---- completion notices through a file descriptor --------------------------------- */
typedef struct notice {
    int fd;
    uint64_t token;
} notice_t;

/* The completion callback of weft_request_notify_fd: on the completing thread. */
static void notice_write(void *arg, weft_status_t status)
{
    notice_t *n = arg;
    const weft_completion_record_t rec = {.token = n->token, .status = (int32_t)status};
    ssize_t w;
    do {
        w = write(n->fd, &rec, sizeof rec);
    } while (w < 0 && errno == EINTR);
    if (w != (ssize_t)sizeof rec)
        WEFT__ERROR("weft_request_notify_fd: writing the completion record of token %llu to fd "
                    "%d failed: %s", (unsigned long long)n->token, n->fd,
                    w < 0 ? strerror(errno) : "short write");
    free(n);
}

weft_status_t weft_request_notify_fd(weft_request_t req, int fd, uint64_t token)
{
    if (!weft__is_init()) return WEFT_ERR_NOT_INITIALIZED;
    if (fd < 0) return WEFT_ERR_INVALID_ARG;
    notice_t *n = malloc(sizeof *n);
    if (n == NULL) return WEFT_ERR_NO_MEMORY;
    n->fd = fd;
    n->token = token;
    const weft_status_t st = weft_request_on_complete(req, notice_write, n);
    if (st != WEFT_SUCCESS) free(n); /* not registered: the callback never runs */
    return st;
}

/*
 * Take live handle h: free its slot and hand its op to the caller, in one
 * critical section, so that two threads waiting on or testing one request
 * never both get the op. With if_done, only once the op completed (under the
 * lock the op cannot be freed: only a taker frees it). Returns 1 (taken,
 * *op set), 0 (if_done and still running) or -1 (stale or unknown handle,
 * or another thread took it).
 */
static int take(weft_request_t h, bool if_done, weft__op_t **op)
{
    int r = -1;
    pthread_mutex_lock(&R.lock);
    uint32_t i = live_slot(h);
    if (i != UINT32_MAX) {
        weft__op_t *o = slot_at(i)->op;
        r = 0;
        if (!if_done || weft__task_done(&o->task)) {
            *op = o;
            release_locked(i);
            r = 1;
        }
    }
    pthread_mutex_unlock(&R.lock);
    return r;
}

/* ---- public ---------------------------------------------------------------------- */
weft_status_t weft_wait(weft_request_t *req)
{
    if (!weft__is_init()) return WEFT_ERR_NOT_INITIALIZED;
    if (req == NULL) return WEFT_ERR_INVALID_ARG;
    if (*req == WEFT_REQUEST_NULL) return WEFT_SUCCESS;
    /* The handle dies here whatever happens next: one lock for lookup and
     * release (waiting on one request from two threads at once is an error,
     * and the second gets WEFT_ERR_INVALID_REQUEST). */
    weft__op_t *op = NULL;
    if (take(*req, false, &op) < 0) return WEFT_ERR_INVALID_REQUEST;
    *req = WEFT_REQUEST_NULL;
    if (op->sop != NULL) {
        /* Stream-bound: the stream waits for the op, the host does not. */
        if (weft__stream_op_wait(op)) return WEFT_SUCCESS;
        weft_status_t sst = op->task.status;
        weft__op_free(op);
        return sst;
    }
    if (WEFT__OP_OBSERVED(op)) weft__obs_wait_done(op); /* times the blocked wait */
    else weft__op_wait_done(op);
    weft_status_t st = op->task.status;
    weft__op_free(op);
    return st;
}

weft_status_t weft_test(weft_request_t *req, int *done)
{
    if (!weft__is_init()) return WEFT_ERR_NOT_INITIALIZED;
    if (req == NULL || done == NULL) return WEFT_ERR_INVALID_ARG;
    *done = 0;
    if (*req == WEFT_REQUEST_NULL) {
        *done = 1;
        return WEFT_SUCCESS;
    }
    weft__op_t *op = NULL;
    int r = take(*req, true, &op);
    if (r == 0) {
        weft__engine_try_progress();
        r = take(*req, true, &op);
    }
    if (r < 0) return WEFT_ERR_INVALID_REQUEST;
    if (r == 0) return WEFT_SUCCESS;
    weft_status_t st = op->task.status;
    /* Stream-bound: the stream still has to take the result (copy back). */
    if (op->sop == NULL || !weft__stream_op_wait(op)) weft__op_free(op);
    *req = WEFT_REQUEST_NULL;
    *done = 1;
    return st;
}

weft_status_t weft_waitall(size_t n, weft_request_t *reqs)
{
    if (!weft__is_init()) return WEFT_ERR_NOT_INITIALIZED;
    if (n > 0 && reqs == NULL) return WEFT_ERR_INVALID_ARG;
    weft_status_t first = WEFT_SUCCESS;
    for (size_t i = 0; i < n; i++) {
        weft_status_t st = weft_wait(&reqs[i]);
        if (st != WEFT_SUCCESS && first == WEFT_SUCCESS) first = st;
    }
    return first;
}
