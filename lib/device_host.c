/*
 * device_host.c - the host device layer. A host stream is an ordered
 * executor: one thread runs a FIFO of tasks, in enqueue order, and sleeps on
 * a condition variable while the FIFO is empty. Flags are words in ordinary
 * memory; a stream waiting for a flag sleeps on a futex until it is set.
 *
 * Every task is a small heap object (kind + arguments). Tasks of Weft's own
 * steps (flag records/waits, the staging copies of a collective) are marked
 * `always` and run even when the stream has a sticky error, as a CUDA
 * stream's copies do: a rank whose stream failed still gives the other ranks
 * its input. User tasks, reductions and pack/unpack are skipped while it has
 * one.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "weft_internal.h"

typedef enum task_kind { T_FN, T_RECORD, T_WAIT, T_COPY, T_REDUCE, T_PACK, T_UNPACK } task_kind_t;

typedef struct task {
    struct task *next;
    task_kind_t kind;
    int always;
    union {
        struct { weft__host_fn_t fn; void *arg; } fn;
        weft__flag_t *flag;
        struct { void *dst; const void *src; size_t bytes; } copy;
        struct { void *inout; const void *in; size_t count; weft_datatype_t dt; weft_op_t op; } red;
        struct { void *dst; const void *src; weft__strided_t r; } pack;
    } u;
} task_t;

typedef struct host_stream {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t work;     /* signalled when a task is queued or on stop */
    pthread_cond_t idle;     /* broadcast when done == queued */
    task_t *head, *tail;     /* under lock */
    uint64_t queued, done;   /* under lock */
    int stop;                /* under lock */
    int sleeping;            /* under lock: the thread waits on `work` */
    struct weft_stream *s;
} host_stream_t;

/* ---- flags ------------------------------------------------------------------ */
typedef struct host_flag {
    weft__flag_t f;
    _Alignas(64) _Atomic uint32_t word; /* own cache line: the engine polls it */
} host_flag_t;

static weft_status_t h_flag_alloc(const weft__device_t *dev, weft__flag_t **out)
{
    host_flag_t *hf = NULL;
    if (posix_memalign((void **)&hf, 64, sizeof *hf) != 0) return WEFT_ERR_NO_MEMORY;
    atomic_init(&hf->word, 0);
    hf->f.word = &hf->word;
    hf->f.impl = NULL;
    hf->f.dev = dev;
    *out = &hf->f;
    return WEFT_SUCCESS;
}

static void h_flag_free(weft__flag_t *f) { free((host_flag_t *)f); }

static int h_flag_test(weft__flag_t *f)
{
    /* acquire: pairs with the release store in h_flag_set, so whatever the
     * setter wrote before (stream work, a collective's output) is visible. */
    return atomic_load_explicit(f->word, memory_order_acquire) != 0;
}

static void h_flag_set(weft__flag_t *f)
{
    /* The flag may be freed as soon as the store is seen (a stream op's
     * retire list reaps on it: lib/stream.c), so nothing of *f is read after
     * it. The wake then goes to an address that may have been reused: futex
     * waiters re-check their condition, so at worst one wakes for nothing. */
    _Atomic uint32_t *word = f->word;
    /* release: see h_flag_test. */
    atomic_store_explicit(word, 1, memory_order_release);
    weft__futex_wake(word);
}

/* Stream thread: wait until f is set. A stream waits on a flag only for a
 * collective the engine runs, so while it waits it helps the engine progress
 * (try-lock, as a host thread in weft_wait does), with the engine's backoff;
 * after a while without progress it sleeps on the flag's futex (bounded, so
 * it goes back to helping). */
static void flag_block(weft__flag_t *f)
{
    unsigned idle = 0;
    while (atomic_load_explicit(f->word, memory_order_acquire) == 0) {
        if (weft__is_init() && weft__engine_inflight() > 0 && idle < 64) {
            int w = weft__engine_try_progress();
            if (w > 0) {
                idle = 0;
                continue;
            }
            weft__engine_backoff(idle++);
            continue;
        }
        weft__engine_wake(); /* the engine carries on while this thread sleeps */
        long us = weft__cfg.max_sleep_us > 0 ? weft__cfg.max_sleep_us : 50;
        weft__futex_wait(f->word, 0, us * 1000L);
        idle = idle >= 64 ? 0 : idle + 1; /* then help again */
    }
}

/* ---- the executor ----------------------------------------------------------------- */
static void do_pack(void *dst, const void *src, const weft__strided_t *r, int unpack)
{
    for (size_t i = 0; i < r->count; i++) {
        if (unpack)
            memcpy((char *)dst + i * r->stride, (const char *)src + i * r->blocklen, r->blocklen);
        else
            memcpy((char *)dst + i * r->blocklen, (const char *)src + i * r->stride, r->blocklen);
    }
}

/* Stream thread. */
static weft_status_t run_task(task_t *t)
{
    switch (t->kind) {
    case T_FN: return t->u.fn.fn(t->u.fn.arg);
    case T_RECORD: h_flag_set(t->u.flag); return WEFT_SUCCESS;
    case T_WAIT: flag_block(t->u.flag); return WEFT_SUCCESS;
    case T_COPY:
        if (t->u.copy.bytes > 0) memmove(t->u.copy.dst, t->u.copy.src, t->u.copy.bytes);
        return WEFT_SUCCESS;
    case T_REDUCE:
        weft__reduce(t->u.red.inout, t->u.red.in, t->u.red.count, t->u.red.dt, t->u.red.op);
        return WEFT_SUCCESS;
    case T_PACK: do_pack(t->u.pack.dst, t->u.pack.src, &t->u.pack.r, 0); return WEFT_SUCCESS;
    case T_UNPACK: do_pack(t->u.pack.dst, t->u.pack.src, &t->u.pack.r, 1); return WEFT_SUCCESS;
    }
    return WEFT_ERR_INTERNAL;
}

static void *stream_main(void *arg)
{
    host_stream_t *hs = arg;
    pthread_mutex_lock(&hs->lock);
    for (;;) {
        while (hs->head == NULL && !hs->stop) {
            hs->sleeping = 1;
            pthread_cond_wait(&hs->work, &hs->lock);
            hs->sleeping = 0;
        }
        if (hs->head == NULL) break; /* stop, and nothing left */
        task_t *t = hs->head;
        hs->head = t->next;
        if (hs->head == NULL) hs->tail = NULL;
        pthread_mutex_unlock(&hs->lock);

        if (t->always || atomic_load_explicit(&hs->s->error, memory_order_relaxed) == 0) {
            weft_status_t st = run_task(t);
            if (st < 0) {
                WEFT__DEBUG("host stream %p: task failed: %s", (void *)hs->s, weft_strerror(st));
                weft__stream_set_error(hs->s, st);
            }
        }
        free(t);

        pthread_mutex_lock(&hs->lock);
        hs->done++;
        if (hs->done == hs->queued) pthread_cond_broadcast(&hs->idle);
    }
    pthread_mutex_unlock(&hs->lock);
    return NULL;
}

/* Any thread. Takes ownership of t (freed also on error). */
static weft_status_t push(struct weft_stream *s, task_t *t)
{
    host_stream_t *hs = s->impl;
    t->next = NULL;
    pthread_mutex_lock(&hs->lock);
    if (hs->stop) {
        pthread_mutex_unlock(&hs->lock);
        free(t);
        return WEFT_ERR_STREAM;
    }
    if (hs->tail) hs->tail->next = t;
    else hs->head = t;
    hs->tail = t;
    hs->queued++;
    int wake = hs->sleeping;
    pthread_mutex_unlock(&hs->lock);
    if (wake) pthread_cond_signal(&hs->work);
    return WEFT_SUCCESS;
}

static task_t *task_new(task_kind_t kind, int always)
{
    task_t *t = calloc(1, sizeof *t);
    if (t == NULL) {
        WEFT__ERROR("host stream: out of memory for a task");
        return NULL;
    }
    t->kind = kind;
    t->always = always;
    return t;
}

/* ---- the interface ---------------------------------------------------------------- */
static weft_status_t h_stream_create(struct weft_stream *s)
{
    weft_status_t st = WEFT_SUCCESS;
    host_stream_t *hs = calloc(1, sizeof *hs);
    if (hs == NULL) return WEFT_ERR_NO_MEMORY;
    hs->s = s;
    if (pthread_mutex_init(&hs->lock, NULL) != 0) {
        st = WEFT_ERR_INTERNAL;
        goto fail_free;
    }
    if (pthread_cond_init(&hs->work, NULL) != 0) {
        st = WEFT_ERR_INTERNAL;
        goto fail_mutex;
    }
    if (pthread_cond_init(&hs->idle, NULL) != 0) {
        st = WEFT_ERR_INTERNAL;
        goto fail_work;
    }
    s->impl = hs;
    int rc = pthread_create(&hs->thread, NULL, stream_main, hs);
    if (rc != 0) {
        WEFT__ERROR("weft_stream_create_host: cannot start the stream thread: %s", strerror(rc));
        st = WEFT_ERR_INTERNAL;
        goto fail_idle;
    }
    return WEFT_SUCCESS;

fail_idle:
    s->impl = NULL;
    pthread_cond_destroy(&hs->idle);
fail_work:
    pthread_cond_destroy(&hs->work);
fail_mutex:
    pthread_mutex_destroy(&hs->lock);
fail_free:
    free(hs);
    return st;
}

static void h_stream_destroy(struct weft_stream *s)
{
    host_stream_t *hs = s->impl;
    if (hs == NULL) return;
    pthread_mutex_lock(&hs->lock);
    hs->stop = 1; /* the thread drains the FIFO, then exits */
    pthread_mutex_unlock(&hs->lock);
    pthread_cond_signal(&hs->work);
    pthread_join(hs->thread, NULL);
    pthread_cond_destroy(&hs->idle);
    pthread_cond_destroy(&hs->work);
    pthread_mutex_destroy(&hs->lock);
    free(hs);
    s->impl = NULL;
}

static weft_status_t h_stream_synchronize(struct weft_stream *s)
{
    host_stream_t *hs = s->impl;
    pthread_mutex_lock(&hs->lock);
    uint64_t target = hs->queued;
    while (hs->done < target) pthread_cond_wait(&hs->idle, &hs->lock);
    pthread_mutex_unlock(&hs->lock);
    return WEFT_SUCCESS;
}

static weft_status_t h_stream_query(struct weft_stream *s)
{
    host_stream_t *hs = s->impl;
    pthread_mutex_lock(&hs->lock);
    int busy = hs->done != hs->queued;
    pthread_mutex_unlock(&hs->lock);
    return busy ? WEFT_INPROGRESS : WEFT_SUCCESS;
}

/* 1 if every task enqueued so far has run (nothing queued, nothing running):
 * a record or a bookkeeping function enqueued now would run at once, so the
 * caller may do it inline and spare the stream thread a wake-up. Any thread. */
static int stream_idle(struct weft_stream *s)
{
    host_stream_t *hs = s->impl;
    pthread_mutex_lock(&hs->lock);
    int idle = hs->head == NULL && hs->done == hs->queued && !hs->stop;
    pthread_mutex_unlock(&hs->lock);
    return idle;
}

static weft_status_t h_launch_host(struct weft_stream *s, weft__host_fn_t fn, void *arg, int always)
{
    /* Weft's own bookkeeping on an idle stream: run it here. (User tasks
     * always run on the stream's thread.) A later enqueue cannot overtake it:
     * enqueues on one stream are ordered by their callers. */
    if (always && stream_idle(s)) {
        weft__stream_set_error(s, fn(arg));
        return WEFT_SUCCESS;
    }
    task_t *t = task_new(T_FN, always);
    if (t == NULL) return WEFT_ERR_NO_MEMORY;
    t->u.fn.fn = fn;
    t->u.fn.arg = arg;
    return push(s, t);
}

static weft_status_t h_record(struct weft_stream *s, weft__flag_t *f)
{
    if (stream_idle(s)) { /* the stream is already past this point */
        h_flag_set(f);
        return WEFT_SUCCESS;
    }
    task_t *t = task_new(T_RECORD, 1);
    if (t == NULL) return WEFT_ERR_NO_MEMORY;
    t->u.flag = f;
    return push(s, t);
}

static weft_status_t h_wait(struct weft_stream *s, weft__flag_t *f)
{
    if (h_flag_test(f)) return WEFT_SUCCESS; /* already set: nothing to wait for */
    task_t *t = task_new(T_WAIT, 1);
    if (t == NULL) return WEFT_ERR_NO_MEMORY;
    t->u.flag = f;
    return push(s, t);
}

static weft_status_t h_copy(struct weft_stream *s, void *dst, const void *src, size_t bytes)
{
    task_t *t = task_new(T_COPY, 1); /* Weft's own step (see the top) */
    if (t == NULL) return WEFT_ERR_NO_MEMORY;
    t->u.copy.dst = dst;
    t->u.copy.src = src;
    t->u.copy.bytes = bytes;
    return push(s, t);
}

static weft_status_t h_reduce(struct weft_stream *s, void *inout, const void *in, size_t count,
                              weft_datatype_t dtype, weft_op_t op)
{
    WEFT__CHECK(weft__check_dtype_op(dtype, op));
    task_t *t = task_new(T_REDUCE, 0);
    if (t == NULL) return WEFT_ERR_NO_MEMORY;
    t->u.red.inout = inout;
    t->u.red.in = in;
    t->u.red.count = count;
    t->u.red.dt = dtype;
    t->u.red.op = op;
    return push(s, t);
}

static weft_status_t h_pack_common(struct weft_stream *s, void *dst, const void *src,
                                   const weft__strided_t *r, task_kind_t kind)
{
    if (r == NULL || (r->count > 1 && r->stride < r->blocklen)) return WEFT_ERR_INVALID_ARG;
    task_t *t = task_new(kind, 0);
    if (t == NULL) return WEFT_ERR_NO_MEMORY;
    t->u.pack.dst = dst;
    t->u.pack.src = src;
    t->u.pack.r = *r;
    return push(s, t);
}

static weft_status_t h_pack(struct weft_stream *s, void *dst, const void *src,
                            const weft__strided_t *r)
{
    return h_pack_common(s, dst, src, r, T_PACK);
}

static weft_status_t h_unpack(struct weft_stream *s, void *dst, const void *src,
                              const weft__strided_t *r)
{
    return h_pack_common(s, dst, src, r, T_UNPACK);
}

static weft_status_t h_host_alloc(void **p, size_t bytes)
{
    void *q = NULL;
    if (posix_memalign(&q, 64, bytes > 0 ? bytes : 1) != 0) return WEFT_ERR_NO_MEMORY;
    *p = q;
    return WEFT_SUCCESS;
}

static void h_host_free(void *p) { free(p); }

static weft__memkind_t h_ptr_kind(const void *p)
{
    WEFT__UNUSED(p);
    return WEFT__MEM_HOST;
}

static const weft__device_t host_device = {
    .name = "host",
    .stream_create = h_stream_create,
    .stream_wrap = NULL, /* a host stream has no foreign handle */
    .stream_destroy = h_stream_destroy,
    .stream_synchronize = h_stream_synchronize,
    .stream_query = h_stream_query,
    .launch_host = h_launch_host,
    .flag_alloc = h_flag_alloc,
    .flag_free = h_flag_free,
    .record = h_record,
    .wait = h_wait,
    .flag_test = h_flag_test,
    .flag_set = h_flag_set,
    .copy = h_copy,
    .reduce = h_reduce,
    .pack = h_pack,
    .unpack = h_unpack,
    .host_alloc = h_host_alloc,
    .host_free = h_host_free,
    .ptr_kind = h_ptr_kind,
};

const weft__device_t *weft__device_host(void) { return &host_device; }
