/*
 * stream.c - streams (public weft_stream_* calls) and stream-associated
 * communicators: how a collective on a communicator bound to a stream is
 * ordered with the stream's other work (doc/streams.md has the timeline).
 *
 * An op on a stream-bound communicator carries a weft__stream_op (op->sop):
 *
 *   issue (caller)   [staged path: copy device -> pinned staging on the stream]
 *                    record `start` on the stream; op->ready polls it, so the
 *                    engine starts the op only after the stream's earlier work.
 *   engine           runs the host algorithm; at completion sets `done`
 *                    (status first, then the flag, release).
 *   stream wait      (blocking call at issue; weft_wait/weft_test otherwise)
 *                    the stream waits for `done`, takes the op's status as its
 *                    sticky error if it failed, [copies staging -> recvbuf],
 *                    then drops its reference.
 *   NCCL path        ncclAllReduce is enqueued on the CUDA stream at issue; the
 *                    engine only polls a flag recorded after it and
 *                    ncclCommGetAsyncError, and aborts the NCCL comm on error or
 *                    timeout. The stream is already ordered after the kernel.
 *
 * Ownership of the op: the caller's request owns it until weft_wait/weft_test
 * hands it to the stream side (or the blocking call does at issue); then the
 * engine frees it at completion. One atomic `owner` word settles the race
 * between a caller handing it over and the engine completing it.
 *
 * The weft__stream_op is reference counted: the op holds one reference, and
 * each batch of stream steps (copy-in and the start record at issue; the wait
 * for `done`, the copy-out and the `fin` record at the stream wait) holds one
 * until the stream has passed it: the batch ends with a flag record, and the
 * reference is dropped once that flag is seen set (retire list, below), since
 * device memory ops on a CUDA stream may still be pending when the op is
 * freed. Not by a host function on the stream: cudaLaunchHostFunc costs tens
 * of microseconds per call and stalls the stream meanwhile (doc/gpu.md).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "device.h"
#include "weft_internal.h"
#include "weft_stream.h"

/* Device buffers: NCCL from weft__cfg.nccl_min_bytes up (WEFT_NCCL_MIN_BYTES,
 * when NCCL is built and usable), host transfer below. */

typedef enum path { PATH_HOST = 0, PATH_STAGED, PATH_NCCL } path_t;

enum { OWNER_CALLER = 0, OWNER_STREAM = 1, OWNER_DONE = 2 };

typedef struct comm_stream {
    struct weft_stream *s;
    void *nccl;        /* NCCL backend state, NULL if none */
} comm_stream_t;

/* A batch of stream steps that holds a reference to its stream op until the
 * stream has passed `flag`, the batch's last step. */
typedef struct retire {
    struct retire *next;
    weft__flag_t *flag;
    struct weft__stream_op *so;
} retire_t;

typedef struct weft__stream_op {
    _Atomic int refs;
    _Atomic int owner;
    path_t path;
    struct weft_stream *s;    /* not touched by the engine after `done` is set */
    const weft__device_t *dev; /* static: outlives the stream */
    weft__flag_t *start;      /* recorded at issue (host and staged paths) */
    weft__flag_t *done;       /* set at completion (all paths) */
    weft__flag_t *kernel;     /* NCCL path: recorded after ncclAllReduce */
    weft__flag_t *fin;        /* recorded after the stream wait's steps (host, staged) */
    retire_t retire[2];       /* the issue steps', the stream wait's */
    weft_status_t status;     /* the op's result, written before `done` is set */
    void *staging;            /* staged path: pinned copy of the vector */
    void *user_recvbuf;
    const void *user_sendbuf;
    size_t in_off, in_bytes;  /* staged path: where the input goes in the staging, how much */
    size_t out_bytes;         /* staged path: the output, from the staging's start */
    int waited;               /* the stream-wait steps are enqueued (caller side) */
    int nccl_ok;              /* NCCL path: the kernel finished without error */
    void *nccl;               /* NCCL path: the comm's backend state */
} weft__stream_op_t;

/* ---- the stream op: references ----------------------------------------------- */
static void sop_unref(weft__stream_op_t *so)
{
    /* acq_rel: the last dropper sees every write made under the other refs. */
    if (atomic_fetch_sub_explicit(&so->refs, 1, memory_order_acq_rel) != 1) return;
    const weft__device_t *dev = so->dev; /* the stream may be gone already */
    if (so->start) dev->flag_free(so->start);
    if (so->done) dev->flag_free(so->done);
    if (so->kernel) dev->flag_free(so->kernel);
    if (so->fin) dev->flag_free(so->fin);
    if (so->staging) dev->host_free(so->staging);
    free(so);
}

/* ---- the retire list: stream steps whose last flag is not yet seen set ------------
 * Reaped by the caller threads of stream ops (prepare, synchronize, destroy,
 * comm detach): a flag test is an atomic load (a cudaEventQuery in the CUDA
 * event fallback). Process-wide, as flags and staging come from the
 * device's process-wide pools. */
static pthread_mutex_t retire_lock = PTHREAD_MUTEX_INITIALIZER;
static retire_t *retire_head; /* under retire_lock */

/* Caller thread: the batch `r` of so's steps is on the stream; it holds a
 * reference (taken before its first step) until `flag` is seen set. */
static void retire_add(weft__stream_op_t *so, retire_t *r, weft__flag_t *flag)
{
    r->flag = flag;
    r->so = so;
    pthread_mutex_lock(&retire_lock);
    r->next = retire_head;
    retire_head = r;
    pthread_mutex_unlock(&retire_lock);
}

/* Any thread except the engine's passes and CUDA host functions (a flag test
 * may be a CUDA call): drop the references of the batches the streams passed. */
static void retire_reap(void)
{
    retire_t *done = NULL;
    pthread_mutex_lock(&retire_lock);
    for (retire_t **pp = &retire_head; *pp != NULL;) {
        retire_t *r = *pp;
        /* < 0: the device failed (logged there); the steps may still be
         * pending, so the reference stays (the op is leaked, not reused). */
        if (r->so->dev->flag_test(r->flag) > 0) {
            *pp = r->next;
            r->next = done;
            done = r;
        } else {
            pp = &r->next;
        }
    }
    pthread_mutex_unlock(&retire_lock);
    while (done != NULL) { /* outside the lock: sop_unref takes the pools' lock */
        retire_t *r = done;
        done = r->next;
        sop_unref(r->so); /* may free r (it lives in the op) */
    }
}

static bool stream_on_finish(weft__task_t *t, weft_status_t status);

/* ---- the NCCL algorithm: polls the kernel, never moves data itself ----------- */
static weft_status_t nccl_start(weft__op_t *op)
{
    if (op->sop == NULL || op->sop->path != PATH_NCCL) {
        /* Selection never gives NCCL for host buffers and weft__stream_prepare
         * refuses it where it cannot run; reaching this means the op was not
         * prepared. */
        WEFT__ERROR("%s: NCCL serves device buffers on a communicator bound to a CUDA "
                    "stream only", weft__opkind_name(op->kind));
        return WEFT_ERR_ALGORITHM;
    }
    return WEFT_INPROGRESS;
}

static weft_status_t nccl_step(weft__op_t *op)
{
    weft__stream_op_t *so = op->sop;
    const weft__nccl_backend_t *nb = weft__nccl_backend();
    weft_status_t st = nb->async_error(so->nccl);
    if (st < 0) return st; /* logged by the backend */
    int f = so->s->dev->flag_test(so->kernel);
    if (f < 0) return (weft_status_t)f;
    if (f == 0) return WEFT_INPROGRESS;
    so->nccl_ok = 1;
    return WEFT_SUCCESS;
}

static void nccl_cleanup(weft__op_t *op)
{
    weft__stream_op_t *so = op->sop;
    if (so == NULL || so->path != PATH_NCCL || so->nccl_ok) return;
    /* Timed out or failed: a kernel may be stuck on the GPU; abort the NCCL
     * communicator so it returns (the comm's sticky error is set by the engine). */
    WEFT__ERROR("%s: NCCL operation on comm %d failed or timed out; aborting its NCCL "
                "communicator", weft__opkind_name(op->kind), op->comm->id);
    weft__nccl_backend()->abort(so->nccl);
}

/* Registered in lib/coll/algos.c: the override (weft_comm_set_algo,
 * WEFT_<COLL>_ALGO=nccl, tuning rules) names them like any other algorithm.
 * Never picked by the host cost model (no cost). */
#define NCCL_IMPL(coll_, KIND)                                                 \
    const weft__algo_impl_t weft__##coll_##_nccl_impl = {                      \
        .id = WEFT_ALGO_NCCL,                                                  \
        .kind = KIND,                                                          \
        .cost = NULL,                                                          \
        .supports = NULL,                                                      \
        .start = nccl_start,                                                   \
        .step = nccl_step,                                                     \
        .cleanup = nccl_cleanup,                                               \
    }
NCCL_IMPL(allreduce, WEFT__OP_ALLREDUCE);
NCCL_IMPL(reduce_scatter, WEFT__OP_REDUCE_SCATTER);
NCCL_IMPL(allgather, WEFT__OP_ALLGATHER);
NCCL_IMPL(bcast, WEFT__OP_BCAST);

/* ---- communicators ------------------------------------------------------------- */
static bool stream_ready(weft__op_t *op)
{
    int f = op->sop->s->dev->flag_test(op->sop->start);
    if (f < 0) {
        /* The device failed; start anyway (the other ranks need this rank) and
         * let the stream's sticky error report it. Logged by the device. */
        weft__stream_set_error(op->sop->s, (weft_status_t)f);
        return true;
    }
    return f != 0;
}

/* Caller thread, collective over comm (weft_comm_create). */
weft_status_t weft__stream_comm_attach(weft__comm_t *comm)
{
    if (comm->stream == NULL) return WEFT_SUCCESS;
    struct weft_stream *s = comm->stream;
    if (s->dev == NULL || s->impl == NULL) {
        WEFT__ERROR("weft_comm_create: the stream is not a valid Weft stream");
        return WEFT_ERR_INVALID_ARG;
    }
    comm_stream_t *cs = calloc(1, sizeof *cs);
    if (cs == NULL) return WEFT_ERR_NO_MEMORY;
    cs->s = s;

    /* NCCL for device buffers: only on CUDA streams, and only if every rank
     * has it, so that every rank takes the same path for the same call. */
    const weft__nccl_backend_t *nb = s->dev != weft__device_host() ? weft__nccl_backend() : NULL;
    int mine = (nb != NULL && s->dev == weft__device_cuda()) ? 1 : 0, all = 0;
    weft_status_t st = WEFT_SUCCESS;
    WEFT__CHECK_GOTO(weft__ctl_allreduce(comm->ctl, &mine, &all, 1, WEFT__CTL_INT, WEFT__CTL_MIN),
                     st, fail);
    if (all) {
        weft_status_t ost = nb->comm_open(comm, &cs->nccl);
        int ok = ost == WEFT_SUCCESS, allok = 0;
        WEFT__CHECK_GOTO(weft__ctl_allreduce(comm->ctl, &ok, &allok, 1, WEFT__CTL_INT,
                                             WEFT__CTL_MIN), st, fail);
        if (!allok) {
            if (cs->nccl) nb->comm_close(cs->nccl);
            cs->nccl = NULL;
            WEFT__WARN("comm %d: NCCL unavailable on some rank; device buffers use host transfer",
                       comm->id);
        }
    }
    comm->stream_state = cs;
    return WEFT_SUCCESS;

fail:
    if (cs->nccl) nb->comm_close(cs->nccl);
    free(cs);
    return st;
}

/* Caller thread (weft_comm_destroy, after the comm's ops completed). */
void weft__stream_comm_detach(weft__comm_t *comm)
{
    comm_stream_t *cs = comm->stream_state;
    if (cs == NULL) return;
    retire_reap();
    if (cs->nccl) weft__nccl_backend()->comm_close(cs->nccl);
    free(cs);
    comm->stream_state = NULL;
}

/* ---- ops ------------------------------------------------------------------------- */
/* Any thread. */
bool weft__stream_has_nccl(const weft__comm_t *c)
{
    const comm_stream_t *cs = c->stream_state;
    return cs != NULL && cs->nccl != NULL;
}

/* Any thread. */
weft__memkind_t weft__stream_default_memkind(const weft__comm_t *c)
{
    const comm_stream_t *cs = c->stream_state;
    return cs != NULL && cs->s->dev != weft__device_host() ? WEFT__MEM_DEVICE : WEFT__MEM_HOST;
}

/* Caller thread. Only a communicator bound to a device stream can have
 * device buffers: the pointers are asked only there. */
weft__memkind_t weft__stream_memkind(const weft__comm_t *c, const void *sendbuf,
                                     const void *recvbuf, size_t bytes)
{
    const comm_stream_t *cs = c->stream_state;
    if (WEFT__LIKELY(cs == NULL) || cs->s->dev == weft__device_host() || bytes == 0)
        return WEFT__MEM_HOST;
    return weft__device_ptr_kind(recvbuf) == WEFT__MEM_DEVICE ||
                   weft__device_ptr_kind(sendbuf) == WEFT__MEM_DEVICE
               ? WEFT__MEM_DEVICE
               : WEFT__MEM_HOST;
}

/* Device buffers through host transfer: one pinned staging region per op,
 * laid out so that the host algorithm sees the in-place form of the call
 * (lib/collectives.c's resolution): the input is copied to in_off, the
 * algorithm runs with sendbuf = staging + in_off and recvbuf = staging, and
 * out_bytes from the staging's start are copied back. */
typedef struct stage_geom {
    size_t bytes, in_off, in_bytes, out_bytes;
} stage_geom_t;

static bool stage_geometry(const weft__op_t *op, stage_geom_t *g)
{
    const size_t b = op->bytes, n = (size_t)op->comm->size;
    switch (op->kind) {
    case WEFT__OP_ALLREDUCE: /* the vector, reduced in place */
    case WEFT__OP_BCAST:     /* the root's vector, overwritten elsewhere */
        *g = (stage_geom_t){b, 0, b, b};
        return true;
    case WEFT__OP_ALLGATHER: /* this rank's block at its place in the whole */
        *g = (stage_geom_t){b * n, b * (size_t)op->comm->rank, b, b * n};
        return true;
    case WEFT__OP_REDUCE_SCATTER: /* every block in, this rank's result at the start */
        *g = (stage_geom_t){b * n, 0, b * n, b};
        return true;
    case WEFT__OP_ALLTOALL: /* every block in, every block out */
        *g = (stage_geom_t){b * n, 0, b * n, b * n};
        return true;
    default: /* rooted ops with buffers on one rank only, point to point, halo */
        return false;
    }
}

/* Caller thread, before weft__issue. The algorithm is chosen already
 * (weft__select, lib/select.c, with the buffers' memory kind): NCCL runs on
 * the stream, a host algorithm on device buffers runs on a pinned staging
 * copy, and on host buffers as is. */
weft_status_t weft__stream_prepare(weft__op_t *op)
{
    weft__comm_t *c = op->comm;
    comm_stream_t *cs = c->stream_state;
    if (cs == NULL) return WEFT_SUCCESS;
    struct weft_stream *s = cs->s;
    const weft__device_t *dev = s->dev;
    path_t path = PATH_HOST;
    stage_geom_t g = {0, 0, 0, 0};

    const bool device =
        weft__stream_memkind(c, op->sendbuf, op->recvbuf, op->bytes) == WEFT__MEM_DEVICE;
    if (!device && weft__cfg.stream_stage && op->bytes > 0 && stage_geometry(op, &g)) {
        path = PATH_STAGED; /* testing: host buffers take the device buffers' staging */
    } else if (device) {
        if (!stage_geometry(op, &g)) {
            WEFT__ERROR("%s: device buffers are supported for allreduce, bcast, allgather, "
                        "reduce_scatter and alltoall", weft__opkind_name(op->kind));
            return WEFT_ERR_UNSUPPORTED;
        }
        if (op->algo == WEFT_ALGO_NCCL) {
            /* Selection chooses NCCL only where it runs, or when it was forced
             * on the communicator: that cannot be served here. */
            if (cs->nccl == NULL || !weft__nccl_backend()->supports(op->dtype, op->rop)) {
                WEFT__ERROR("%s: NCCL forced on comm %d but not available",
                            weft__opkind_name(op->kind), c->id);
                return WEFT_ERR_UNSUPPORTED;
            }
            path = PATH_NCCL;
            op->finish = NULL; /* NCCL averages itself (ncclAvg) */
        } else {
            path = PATH_STAGED;
        }
    }

    retire_reap(); /* flags and staging of passed ops back to the pools first */
    weft_status_t st = WEFT_SUCCESS;
    weft__stream_op_t *so = calloc(1, sizeof *so);
    if (so == NULL) return WEFT_ERR_NO_MEMORY;
    atomic_init(&so->refs, 1); /* the op's */
    atomic_init(&so->owner, OWNER_CALLER);
    so->path = path;
    so->s = s;
    so->dev = dev;
    so->nccl = cs->nccl;
    WEFT__CHECK_GOTO(dev->flag_alloc(dev, &so->done), st, fail);
    if (path == PATH_NCCL) {
        WEFT__CHECK_GOTO(dev->flag_alloc(dev, &so->kernel), st, fail);
    } else {
        WEFT__CHECK_GOTO(dev->flag_alloc(dev, &so->start), st, fail);
        WEFT__CHECK_GOTO(dev->flag_alloc(dev, &so->fin), st, fail);
        op->ready = stream_ready;
    }
    if (path == PATH_STAGED) {
        WEFT__CHECK_GOTO(dev->host_alloc(&so->staging, g.bytes), st, fail);
        so->user_sendbuf = op->sendbuf;
        so->user_recvbuf = op->recvbuf;
        so->in_off = g.in_off;
        so->in_bytes = g.in_bytes;
        so->out_bytes = g.out_bytes;
        op->sendbuf = (char *)so->staging + g.in_off; /* the in-place form, on the staging */
        op->recvbuf = so->staging;
    }
    op->sop = so;
    op->task.on_finish = stream_on_finish;
    return WEFT_SUCCESS;

fail:
    op->ready = NULL;
    sop_unref(so);
    return st;
}

/* Caller thread: the steps that make the stream wait for the op. Once. */
static weft_status_t enqueue_stream_wait(weft__op_t *op)
{
    weft__stream_op_t *so = op->sop;
    if (so->waited) return WEFT_SUCCESS;
    so->waited = 1;
    if (so->path == PATH_NCCL) return WEFT_SUCCESS; /* the stream already follows the kernel */
    struct weft_stream *s = so->s;
    const weft__device_t *dev = s->dev;
    weft_status_t st;
    /* The wait steps' reference, taken first: it is dropped once the stream
     * passed `fin`, or leaked (never dropped) if a step cannot be enqueued,
     * since the steps already on the stream still use the flags and the
     * staging buffer. A failure of the op reaches the stream's sticky error
     * from the engine (stream_on_finish), before `done` is set. */
    atomic_fetch_add_explicit(&so->refs, 1, memory_order_relaxed);
    WEFT__CHECK_GOTO(dev->wait(s, so->done), st, fail);
    if (so->path == PATH_STAGED)
        WEFT__CHECK_GOTO(dev->copy(s, so->user_recvbuf, so->staging, so->out_bytes), st, fail);
    WEFT__CHECK_GOTO(dev->record(s, so->fin), st, fail);
    retire_add(so, &so->retire[1], so->fin);
    return WEFT_SUCCESS;

fail:
    WEFT__ERROR("stream: cannot make the stream wait for %s on comm %d: %s",
                weft__opkind_name(op->kind), op->comm->id, weft_strerror(st));
    weft__stream_set_error(s, st);
    return st;
}

/* Caller thread (weft__issue), after the comm check, before submission. */
weft_status_t weft__stream_issue(weft__op_t *op, int blocking)
{
    weft__stream_op_t *so = op->sop;
    struct weft_stream *s = so->s;
    const weft__device_t *dev = s->dev;

    /* The issue steps' reference: dropped once the stream passed their last
     * step (the start or kernel record). If a step cannot be enqueued, it is
     * leaked on purpose: the steps already on the stream may use the flags
     * and the staging buffer. */
    atomic_fetch_add_explicit(&so->refs, 1, memory_order_relaxed);
    weft__flag_t *last;
    if (so->path == PATH_NCCL) {
        WEFT__CHECK(weft__nccl_backend()->coll(so->nccl, (weft_coll_t)op->kind, op->sendbuf,
                                               op->recvbuf, op->count, op->dtype, op->rop,
                                               op->root, s));
        last = so->kernel;
    } else {
        if (so->path == PATH_STAGED)
            WEFT__CHECK(dev->copy(s, (char *)so->staging + so->in_off, so->user_sendbuf,
                                  so->in_bytes));
        last = so->start;
    }
    WEFT__CHECK(dev->record(s, last));
    retire_add(so, &so->retire[0], last);
    if (blocking) {
        WEFT__CHECK(enqueue_stream_wait(op));
        atomic_store_explicit(&so->owner, OWNER_STREAM, memory_order_relaxed);
    }
    return WEFT_SUCCESS;
}

/* Caller thread (weft_wait / weft_test). */
int weft__stream_op_wait(weft__op_t *op)
{
    weft__stream_op_t *so = op->sop;
    if (enqueue_stream_wait(op) != WEFT_SUCCESS) {
        /* Could not hand it to the stream: wait on the host (the error is on
         * the stream already). */
        weft__op_wait_done(op);
        return 0;
    }
    int expected = OWNER_CALLER;
    /* acq_rel: on success the engine (which frees the op) sees our writes; on
     * failure we see the engine's completion of the op. */
    if (atomic_compare_exchange_strong_explicit(&so->owner, &expected, OWNER_STREAM,
                                                memory_order_acq_rel, memory_order_acquire))
        return 1;
    /* Completed already: the engine is publishing `done`; wait for that so the
     * caller may free the op. */
    weft__op_wait_done(op);
    return 0;
}

/* The op's task on_finish hook (progress/progress.h): engine side, as the op
 * finishes. True when the stream side owned the op and freed it here. */
static bool stream_on_finish(weft__task_t *t, weft_status_t status)
{
    weft__op_t *op = weft__op_of(t);
    weft__stream_op_t *so = op->sop;
    so->status = status;
    /* The stream cannot pass wait(done) before the flag is set below, nor be
     * destroyed before this op's communicator (rule 8 of doc/streams.md). */
    if (status < 0) weft__stream_set_error(so->s, status);
    /* The flag's set is a release: status (and the result) are visible to the
     * stream once it sees the flag. From here on the stream may finish and be
     * destroyed: only so->dev (static) is used below. */
    so->dev->flag_set(so->done);
    int expected = OWNER_CALLER;
    /* acq_rel: pairs with the caller's CAS in weft__stream_op_wait. */
    if (atomic_compare_exchange_strong_explicit(&so->owner, &expected, OWNER_DONE,
                                                memory_order_acq_rel, memory_order_acquire))
        return false;
    /* The stream side owns it: nobody else will look at the op. */
    weft__op_free(op);
    return true;
}

/* Any thread (weft__op_free). */
void weft__stream_op_release(weft__op_t *op)
{
    weft__stream_op_t *so = op->sop;
    op->sop = NULL;
    sop_unref(so);
}

/* ---- public: streams --------------------------------------------------------------- */
weft_status_t weft_stream_create_host(weft_stream_t *stream)
{
    if (stream == NULL) return WEFT_ERR_INVALID_ARG;
    struct weft_stream *s = calloc(1, sizeof *s);
    if (s == NULL) return WEFT_ERR_NO_MEMORY;
    s->dev = weft__device_host();
    s->owned = 1;
    atomic_init(&s->error, 0);
    weft_status_t st = s->dev->stream_create(s);
    if (st != WEFT_SUCCESS) {
        free(s);
        return st;
    }
    *stream = s;
    return WEFT_SUCCESS;
}

static weft_status_t check_stream(weft_stream_t s)
{
    if (s == NULL || s->dev == NULL || s->impl == NULL) return WEFT_ERR_INVALID_ARG;
    return WEFT_SUCCESS;
}

weft_status_t weft_stream_enqueue(weft_stream_t stream, weft_stream_fn_t fn, void *arg)
{
    WEFT__CHECK(check_stream(stream));
    if (fn == NULL) return WEFT_ERR_INVALID_ARG;
    return stream->dev->launch_host(stream, fn, arg, 0);
}

weft_status_t weft_stream_synchronize(weft_stream_t stream)
{
    WEFT__CHECK(check_stream(stream));
    WEFT__CHECK(stream->dev->stream_synchronize(stream));
    retire_reap();
    return (weft_status_t)atomic_exchange_explicit(&stream->error, 0, memory_order_relaxed);
}

weft_status_t weft_stream_query(weft_stream_t stream)
{
    WEFT__CHECK(check_stream(stream));
    weft_status_t err = (weft_status_t)atomic_load_explicit(&stream->error, memory_order_relaxed);
    if (err < 0) return err;
    return stream->dev->stream_query(stream);
}

weft_status_t weft_stream_destroy(weft_stream_t stream)
{
    WEFT__CHECK(check_stream(stream));
    weft_status_t st = stream->dev->stream_synchronize(stream);
    stream->dev->stream_destroy(stream);
    retire_reap();
    weft_status_t err = (weft_status_t)atomic_load_explicit(&stream->error, memory_order_relaxed);
    free(stream);
    return st < 0 ? st : err;
}

/* ---- public: CUDA streams (weft_cuda.h; the type is forward-declared here so
 * lib/ needs no CUDA header: cudaStream_t is `struct CUstream_st *`) ----------- */
struct CUstream_st;

WEFT_EXPORT int weft_cuda_available(void);
int weft_cuda_available(void) { return weft__device_cuda() != NULL; }

WEFT_EXPORT weft_status_t weft_stream_wrap_cuda(struct CUstream_st *cuda_stream, weft_stream_t *stream);
weft_status_t weft_stream_wrap_cuda(struct CUstream_st *cuda_stream, weft_stream_t *stream)
{
    if (stream == NULL) return WEFT_ERR_INVALID_ARG;
    const weft__device_t *dev = weft__device_cuda();
    if (dev == NULL) {
        WEFT__ERROR("weft_stream_wrap_cuda: no usable CUDA device/driver, or built without CUDA");
        return WEFT_ERR_UNSUPPORTED;
    }
    struct weft_stream *s = calloc(1, sizeof *s);
    if (s == NULL) return WEFT_ERR_NO_MEMORY;
    s->dev = dev;
    atomic_init(&s->error, 0);
    weft_status_t st = dev->stream_wrap(s, (void *)cuda_stream);
    if (st != WEFT_SUCCESS) {
        free(s);
        return st;
    }
    *stream = s;
    return WEFT_SUCCESS;
}

WEFT_EXPORT weft_status_t weft_stream_create_cuda(weft_stream_t *stream);
weft_status_t weft_stream_create_cuda(weft_stream_t *stream)
{
    if (stream == NULL) return WEFT_ERR_INVALID_ARG;
    const weft__device_t *dev = weft__device_cuda();
    if (dev == NULL) {
        WEFT__ERROR("weft_stream_create_cuda: no usable CUDA device/driver, or built without CUDA");
        return WEFT_ERR_UNSUPPORTED;
    }
    struct weft_stream *s = calloc(1, sizeof *s);
    if (s == NULL) return WEFT_ERR_NO_MEMORY;
    s->dev = dev;
    s->owned = 1;
    atomic_init(&s->error, 0);
    weft_status_t st = dev->stream_create(s);
    if (st != WEFT_SUCCESS) {
        free(s);
        return st;
    }
    *stream = s;
    return WEFT_SUCCESS;
}

WEFT_EXPORT weft_status_t weft_stream_get_cuda(weft_stream_t stream, struct CUstream_st **cuda_stream);
weft_status_t weft_stream_get_cuda(weft_stream_t stream, struct CUstream_st **cuda_stream)
{
    WEFT__CHECK(check_stream(stream));
    if (cuda_stream == NULL || stream->dev == weft__device_host()) return WEFT_ERR_INVALID_ARG;
    *cuda_stream = (struct CUstream_st *)stream->handle;
    return WEFT_SUCCESS;
}
