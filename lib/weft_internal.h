/*
 * weft_internal.h - private types shared by lib/, lib/coll/, progress/ and
 * backends/. Never installed, never included by Loom or by users.
 *
 * Names: internal functions are weft__*, file-local ones are static.
 */
#ifndef WEFT_INTERNAL_H
#define WEFT_INTERNAL_H

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weft.h"
#include "weft_mpi.h"
#include "handle.h"
#include "log.h"

#define WEFT__UNUSED(x) ((void)(x))
#define WEFT__LIKELY(x) __builtin_expect(!!(x), 1)
#define WEFT__UNLIKELY(x) __builtin_expect(!!(x), 0)

/** One pause of a polling loop (x86 `pause`: frees the core's pipeline for a
 * sibling hyperthread and slows the loop's loads of a line another core
 * writes). Any thread. */
static inline void weft__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* ---- configuration (read once in weft_init; see lib/config.c) --------- */
typedef struct weft__config {
    weft_algo_t force_algo[WEFT_COLL_COUNT]; /* WEFT_<COLL>_ALGO, AUTO if unset */
    char tuning_file[1024];                  /* WEFT_TUNING_FILE */
    double timeout_s;                        /* WEFT_TIMEOUT, 0 = no watchdog */
    int log_level;                           /* WEFT_LOG_LEVEL */
    char profile_path[1024];                 /* WEFT_PROFILE */
    char trace_path[1024];                   /* WEFT_TRACE */
    weft_transport_t transport;              /* WEFT_TRANSPORT: auto (DEFAULT), mpi, ucx */
    size_t ring_chunk;                       /* WEFT_RING_CHUNK bytes */
    int spin;                                /* WEFT_SPIN: empty passes before yielding */
    int max_sleep_us;                        /* WEFT_MAX_SLEEP_US: oversubscribed backoff cap */
    int measure;                             /* WEFT_MEASURE: measure alpha/beta at comm create */
    size_t nccl_min_bytes;                   /* WEFT_NCCL_MIN_BYTES */
    int cuda_memops;                         /* WEFT_CUDA_MEMOPS */
    int wait_spin_us;                        /* WEFT_WAIT_SPIN_US */
    int linger_us;                           /* WEFT_LINGER_US */
    size_t fused_reduce_max;                 /* WEFT_FUSED_REDUCE_MAX bytes (0 = off) */
    int check_args;                          /* WEFT_CHECK_ARGS: collectives agree on arguments */
    size_t trace_events;                     /* WEFT_TRACE_EVENTS: trace buffer per rank */
    int trace_keep_last;                     /* WEFT_TRACE_KEEP: 0 first, 1 last (ring) */
    int trace_clock_measure;                 /* WEFT_TRACE_CLOCK: 0 node, 1 measure */
} weft__config_t;

extern weft__config_t weft__cfg;

/** Read the environment into weft__cfg. weft_init only. */
weft_status_t weft__config_load(void);

/* One row of the documented variable table (also printed by weft-info). */
typedef struct weft__config_var {
    const char *name;
    const char *default_value;
    const char *doc;
} weft__config_var_t;
/** The table of every WEFT_* variable; NULL-name terminated. Any thread. */
const weft__config_var_t *weft__config_vars(void);
/** The table's name closest to `name` (a typo's likely meaning), or NULL
 * when none is within a few edits. Any thread. */
const char *weft__config_closest(const char *name);

/* ---- datatypes and reductions (lib/datatype.c, lib/reduce.c) ----------- */
size_t weft__dtype_size(weft_datatype_t dtype);
/** WEFT_SUCCESS if op is defined on dtype (bitwise ops on integers only). */
weft_status_t weft__check_dtype_op(weft_datatype_t dtype, weft_op_t op);
/**
 * inout[i] = inout[i] OP in[i], i < count. AVG reduces as SUM (the caller
 * divides once at the end with weft__scale_avg). float16/bfloat16 reduce in
 * float32. Deterministic; symmetric in its two operands (a OP b == b OP a,
 * bit for bit), which keeps every rank's result identical. Any thread.
 */
void weft__reduce(void *inout, const void *in, size_t count, weft_datatype_t dtype, weft_op_t op);
/** MPI's datatype / op for ours; MPI_DATATYPE_NULL / MPI_OP_NULL where MPI has
 * none (float16, bfloat16). AVG maps to MPI_SUM. Any thread. */
MPI_Datatype weft__dtype_mpi(weft_datatype_t dtype);
MPI_Op weft__op_mpi(weft_op_t op);
/** out[i] = a[i] OP b[i] (out may alias a or b). */
void weft__reduce3(void *out, const void *a, const void *b, size_t count, weft_datatype_t dtype,
                   weft_op_t op);
/** buf[i] /= n for AVG (integers: truncating division). */
void weft__scale_avg(void *buf, size_t count, weft_datatype_t dtype, int n);
/**
 * AVG without overflow: int8/int32 are summed in int64, uint8/uint32 in
 * uint64, float16 in float32 (weft__avg_wide; other types are their own).
 * weft__avg_widen converts an input to the wide type; weft__avg_narrow
 * divides the wide sum by n and converts back (integers: C's truncating
 * division, whose result always fits). Any thread.
 */
weft_datatype_t weft__avg_wide(weft_datatype_t dtype);
void weft__avg_widen(void *dst, const void *src, size_t count, weft_datatype_t dtype);
void weft__avg_narrow(void *dst, const void *src, size_t count, weft_datatype_t dtype, int n);

/* ---- transport (backends/mpi, backends/ucx) ---------------------------- */
struct weft__comm;

/** One point-to-point transfer in flight. Zero-initialised = inactive. */
typedef struct weft__xfer {
    union {
        MPI_Request mpi;
        void *ptr;
    } h;
    int active; /* posted and not yet seen complete */
    /** Set by the poster before isend: prefer a buffered (eager) protocol to
     * a rendezvous, for messages whose sender and receiver post at the same
     * time (halo faces): no handshake round trip. A hint; MPI ignores it. */
    int eager;
} weft__xfer_t;

/**
 * A message that is not one contiguous run of memory (a halo face): the
 * transport asks for its bytes piece by piece (pack), or hands them over
 * (unpack), at byte offsets that need not fall on elements, so it can pack
 * straight into its own buffers instead of the caller staging a copy. Must
 * stay valid and unchanged until the transfer completes.
 */
typedef struct weft__xfer_dt {
    size_t bytes;
    size_t (*pack)(const struct weft__xfer_dt *d, size_t offset, void *dst, size_t max);
    void (*unpack)(const struct weft__xfer_dt *d, size_t offset, const void *src, size_t len);
    void *obj;                /* for the callbacks: the buffer */
    const void *arg1, *arg2;  /* for the callbacks: its layout and region */
} weft__xfer_dt_t;

/**
 * A receive that reduces as the message arrives (lib/recv_reduce.c): posted
 * with the transport's irecv_dt on rr->d, it computes out = a OP message
 * (count elements of dtype) straight from the transport's buffers. out may be
 * a; neither may be read by a transfer still in flight. Engine side.
 */
#define WEFT__RR_EDGES 8
typedef struct weft__rr {
    weft__xfer_dt_t d;        /* d.obj = this */
    void *out;
    const void *a;
    size_t esz;
    weft_datatype_t dtype;
    weft_op_t op;
    int nedge, overflow;
    struct {
        size_t elem;          /* element index */
        unsigned got;         /* bytes of it received */
        _Alignas(8) unsigned char v[8];
    } edge[WEFT__RR_EDGES];   /* elements cut between pieces, not yet complete */
} weft__rr_t;
void weft__rr_init(weft__rr_t *rr, void *out, const void *a, size_t count, weft_datatype_t dtype,
                   weft_op_t op);
/** The unpack callback (d->obj is the weft__rr_t). */
void weft__rr_unpack(const weft__xfer_dt_t *d, size_t offset, const void *src, size_t len);
/** After the transfer completed: true (logged) if the result must not be used. */
bool weft__rr_failed(const weft__rr_t *rr);

/**
 * A transport moves bytes between ranks of a communicator with tagged,
 * nonblocking send/recv. Tags are 32-bit; messages with the same (peer, tag)
 * match in posting order. Thread: engine side only (the engine thread, or a
 * caller that holds the progress lock), except comm_open/comm_close which run
 * in weft_comm_create/destroy on the caller (collective over the comm).
 */
typedef struct weft__transport {
    const char *name;
    weft_status_t (*comm_open)(struct weft__comm *comm);
    void (*comm_close)(struct weft__comm *comm);
    weft_status_t (*isend)(struct weft__comm *comm, const void *buf, size_t bytes, int peer,
                           uint32_t tag, weft__xfer_t *x);
    weft_status_t (*irecv)(struct weft__comm *comm, void *buf, size_t bytes, int peer,
                           uint32_t tag, weft__xfer_t *x);
    /** Optional (NULL: the caller stages the message in a contiguous buffer):
     * send or receive a weft__xfer_dt_t message; the receive's bytes must
     * equal the send's. */
    weft_status_t (*isend_dt)(struct weft__comm *comm, const weft__xfer_dt_t *d, int peer,
                              uint32_t tag, weft__xfer_t *x);
    weft_status_t (*irecv_dt)(struct weft__comm *comm, const weft__xfer_dt_t *d, int peer,
                              uint32_t tag, weft__xfer_t *x);
    /** Test n transfers; sets *done = 1 when every active one completed
     * (completed ones get active = 0). Returns an error if one failed. */
    weft_status_t (*testall)(struct weft__comm *comm, weft__xfer_t *x, int n, int *done);
    /** Abandon an active transfer (timeout / error path). */
    void (*cancel)(struct weft__comm *comm, weft__xfer_t *x);
    /** Drive the transport once (NULL if it progresses inside testall). */
    int (*progress)(void);
    /** Pause instructions between two idle polls of a caller waiting on one
     * of its ops (0 counts as 1). A poll that takes no lock and reads only
     * the transport's shared-memory queue, repeated back to back, keeps the
     * queue's cache line from the peer that writes into it: UCX 2 (8-byte
     * ping-pong 0.416 -> 0.364 us), MPI 1 (MPI_Test's lock is the pause). */
    int poll_pause;
} weft__transport_t;

/* Transport tags: collectives use the low WEFT__COLL_TAG_BITS of their issue
 * sequence number; point-to-point maps the user's tag above that range. */
#define WEFT__COLL_TAG_BITS 27
#define WEFT__COLL_TAG_MASK ((1u << WEFT__COLL_TAG_BITS) - 1u)

extern const weft__transport_t weft__transport_mpi;
/** NULL when the UCX backend is not built. */
const weft__transport_t *weft__transport_ucx(void);
/**
 * The transport for a new communicator: `want`, or for WEFT_TRANSPORT_DEFAULT
 * the one WEFT_TRANSPORT names (weft__cfg.transport, parsed by weft_init;
 * backends/transport_select.c). NULL with *st set (and logged) when the
 * asked-for transport is not built or the value is unknown. Any thread.
 */
const weft__transport_t *weft__transport_choose(weft_transport_t want, weft_status_t *st);
/** WEFT_TRANSPORT_MPI or WEFT_TRANSPORT_UCX for a transport object. Any thread. */
weft_transport_t weft__transport_id(const weft__transport_t *tp);
/** Destroy the UCX worker and context (no-op without UCX or if never started).
 * weft_finalize only, after every communicator was closed and the engine stopped. */
void weft__transport_ucx_shutdown(void);

/** Cost-model parameters: seconds per message, per byte moved, per byte reduced. */
typedef struct weft__cost {
    double alpha, beta, gamma;
} weft__cost_t;

/* ---- communicators ------------------------------------------------------ */
typedef struct weft__comm {
    MPI_Comm mpi;             /* duplicate, MPI_ERRORS_RETURN */
    MPI_Comm mpi_check;       /* WEFT_CHECK_ARGS: a second duplicate for argument agreement */
    int rank, size;
    int pof2;                 /* largest power of two <= size */
    weft_stream_t stream;
    const weft__transport_t *tp;
    void *tp_state;           /* owned by the transport */
    _Atomic int force_algo[WEFT_COLL_COUNT];
    int oversubscribed;       /* more ranks on this node than cores */
    int node_local;           /* all ranks share one node */
    int id;                   /* small id for logs and traces */
    weft__cost_t cost;        /* alpha/beta/gamma agreed by all ranks */
    void *stream_state;       /* lib/stream.c: per-comm stream state (NULL: no stream) */
    uint64_t handle;          /* the public handle (lib/comm.c, lib/handle.h) */
    /* Written on every issue (caller) and completion (engine): a line of
     * their own, so that the read-mostly fields above stay shared in both
     * threads' caches. */
    _Alignas(64) _Atomic uint32_t seq; /* next operation tag (issue order) */
    _Atomic int inflight;     /* issued, not yet completed */
    _Atomic int error;        /* sticky weft_status_t, 0 if none */
    _Alignas(64) int engine_blocked; /* engine-private: an earlier op on it waits to start */
} weft__comm_t;

struct weft_comm { weft__comm_t c; };

/* weft__comm_get: the communicator behind a public handle (below, after weft__is_init). */
/** Free the halo plans still alive (lib/halo.c). weft_finalize, engine stopped. */
void weft__halo_fini(void);

/* ---- operations ----------------------------------------------------------- */
/* What kind of operation (for profiles, traces, logs). */
typedef enum weft__opkind {
    WEFT__OP_ALLREDUCE = WEFT_COLL_ALLREDUCE,
    WEFT__OP_REDUCE_SCATTER = WEFT_COLL_REDUCE_SCATTER,
    WEFT__OP_ALLGATHER = WEFT_COLL_ALLGATHER,
    WEFT__OP_BCAST = WEFT_COLL_BCAST,
    WEFT__OP_REDUCE = WEFT_COLL_REDUCE,
    WEFT__OP_ALLTOALL = WEFT_COLL_ALLTOALL,
    WEFT__OP_GATHER = WEFT_COLL_GATHER,
    WEFT__OP_SCATTER = WEFT_COLL_SCATTER,
    WEFT__OP_BARRIER = WEFT_COLL_BARRIER,
    WEFT__OP_SEND = WEFT_COLL_COUNT,
    WEFT__OP_RECV,
    WEFT__OP_HALO,
    WEFT__OP_STREAM, /* a stream-side step (copy, flag) run by the engine */
    WEFT__OP_KIND_COUNT
} weft__opkind_t;

const char *weft__opkind_name(weft__opkind_t k);

typedef struct weft__op weft__op_t;

/**
 * An algorithm: a nonblocking state machine. start() is called once, step()
 * until it returns something other than WEFT_INPROGRESS; both run on the
 * engine side (engine thread or a caller holding the progress lock), never
 * block, and may return WEFT_SUCCESS at once. cleanup() frees what start()
 * allocated; it runs exactly once after the op finished, failed or timed out
 * (after the engine cancelled its active transfers).
 */
typedef struct weft__algo_impl {
    weft_algo_t id;
    weft__opkind_t kind;
    /** Predicted seconds for p ranks and n bytes (per-rank vector as the
     * user passes it). NULL: never chosen by the model (explicit only). */
    double (*cost)(int p, size_t n, const weft__cost_t *c);
    /** May this algorithm serve (dtype, op)? NULL: every valid pair. */
    bool (*supports)(weft_datatype_t dtype, weft_op_t op);
    weft_status_t (*start)(weft__op_t *op);
    weft_status_t (*step)(weft__op_t *op);
    void (*cleanup)(weft__op_t *op);
} weft__algo_impl_t;

#define WEFT__MAX_XFER 64
#define WEFT__PRIV_BYTES 512

struct weft__op {
    /* -- set when issued (caller thread), read-only afterwards -- */
    weft__opkind_t kind;
    weft__comm_t *comm;
    const weft__algo_impl_t *impl;
    weft_algo_t algo;
    const void *sendbuf;     /* already resolved: == recvbuf for in place */
    void *recvbuf;
    size_t count;            /* elements (per-rank block for gather-like ops) */
    size_t bytes;            /* count * element size */
    weft_datatype_t dtype;
    weft_op_t rop;           /* the user's op (algorithms reduce AVG as SUM) */
    int root;                /* root or peer rank */
    int user_tag;            /* point-to-point tag */
    uint32_t tag;            /* transport tag, unique per op on its comm */
    void *arg;               /* op-specific extra arguments (halo plan, ...) */
    /** Optional: may the op start? (stream ordering). NULL = yes. */
    bool (*ready)(weft__op_t *op);
    /** Optional: runs once on the engine side after success, before completion. */
    weft_status_t (*finish)(weft__op_t *op);
    /** Weft's own step on a user's communicator (an agreement): never bound
     * to the communicator's stream, ordered with its collectives. */
    int unbound;
    /** Memory the op owns, freed with it (the widened AVG's buffers). */
    void *owned;
    void *user_recvbuf;      /* widened AVG: the caller's output buffer */
    size_t user_count;       /* widened AVG: elements of this rank's output */
    weft_datatype_t user_dtype; /* widened AVG: the caller's datatype */
    /** lib/stream.c: stream-side state of an op on a stream-bound comm (NULL otherwise). */
    struct weft__stream_op *sop;

    /* -- engine side state -- */
    int started;
    int phase, stepno;       /* free for the algorithm */
    weft__xfer_t xfer[WEFT__MAX_XFER];
    int nxfer;               /* transfers posted in the current step */
    void *tmp;               /* scratch owned by the algorithm (freed in cleanup) */
    size_t tmp_bytes;
    /* weft__now() when the op was issued with observability on (timed = 1:
     * the profiler and the trace see only such ops), else the coarse clock,
     * which is all the watchdog needs and costs less than the precise one */
    double t_issue, t_start;
    int timed;
    weft__op_t *next;        /* engine lists / submission queue */
    _Alignas(16) unsigned char priv[WEFT__PRIV_BYTES]; /* algorithm-private state */

    /* -- completion (see lib/request.c) -- */
    _Atomic uint32_t done;   /* futex word: 0 running, then complete (lib/request.c) */
    weft_status_t status;    /* written before done = 1 (release) */
    int detached;            /* no request handle: freed by the engine */
    /* completion callback (weft_request_on_complete, lib/request.c): fn and
     * arg written under the request lock before OP_CB is set in `done` */
    weft_request_callback_t cb_fn;
    void *cb_arg;
};

/**
 * Engine side, as the op finishes (progress lock held): store the status and
 * publish the op, as weft__op_complete, unless a completion callback is
 * registered: then return true and leave it unpublished, to be published by
 * weft__op_complete_callback once the progress lock is released, so that the
 * user's callback never runs under it.
 */
bool weft__op_finish(weft__op_t *op, weft_status_t status);
/** Publish op (as weft__op_complete) and run its callback. Progress lock not held. */
void weft__op_complete_callback(weft__op_t *op);

/**
 * The arguments of a collective call as every rank must pass them alike;
 * -1 where a field does not apply.
 */
typedef struct weft__coll_args {
    weft_coll_t coll;
    long long count;
    int dtype, op, root;
} weft__coll_args_t;
/**
 * Every collective entry point calls this once, after it found its
 * communicator, with st its own checks' verdict (WEFT_SUCCESS: about to
 * issue). A refused call still takes its place in c's collective order, so
 * that a later collective never matches the messages of one that other ranks
 * issued and this rank refused. Under WEFT_CHECK_ARGS=1 the ranks first
 * agree: a refusal or an argument that differs on any rank fails the call on
 * every rank (WEFT_ERR_INVALID_ARG where this rank's own checks passed).
 * Returns the call's status. Caller thread.
 */
weft_status_t weft__coll_agree(weft__comm_t *c, weft_status_t st, const weft__coll_args_t *a);

/**
 * A blocking allgather of `bytes` per rank that Weft itself runs on a user's
 * communicator (an agreement step): it takes its place in c's collective
 * order like any collective but is never bound to c's stream, so it has
 * finished when this returns, also on a stream-bound communicator. Caller
 * thread, as a collective on c.
 */
weft_status_t weft__allgather_internal(weft__comm_t *c, const void *mine, void *all, size_t bytes);

/**
 * Make op (an AVG allreduce, reduce_scatter or reduce, caller thread, before
 * weft__issue) sum in the wide type: its input is widened into memory the op
 * owns, the algorithm runs on the wide type, and a finish step divides and
 * narrows into the caller's buffer. in_count / out_count: elements of the
 * input and of this rank's output (0: none). Not for stream-bound ops.
 */
weft_status_t weft__avg_prepare(weft__op_t *op, size_t in_count, size_t out_count);

/** op->finish for AVG: the algorithm reduced as SUM; divide recvbuf once. Engine side. */
weft_status_t weft__finish_avg(weft__op_t *op);

/** Allocate and fill the common fields of an op (caller thread). */
weft_status_t weft__op_new(weft__comm_t *comm, weft__opkind_t kind, weft__op_t **out);
void weft__op_free(weft__op_t *op);

/**
 * Issue an op: assigns its tag (issue order), queues it to the engine. With
 * req != NULL returns at once with a request handle; with req == NULL waits
 * for it (the caller helps progress) and returns its status. The op is owned
 * by Weft from here on, also on error. Any thread.
 */
weft_status_t weft__issue(weft__op_t *op, weft_request_t *req);

/**
 * Scratch memory for algorithms, engine side (under the progress lock). A few
 * freed buffers are kept for reuse: a fresh multi-megabyte malloc per op is
 * mmap'ed, faulted in page by page and unmapped again on free, which cost
 * more than the transfer at 8 MiB. weft__scratch_trim frees the cache
 * (weft_finalize).
 */
void *weft__scratch_alloc(size_t bytes);
void weft__scratch_free(void *p);
void weft__scratch_trim(void);
/** Free the calling thread's cache of ops (weft_finalize; other threads' caches
 * are freed when they exit). */
void weft__op_cache_trim(void);

/* Algorithm helpers for lib/coll (engine side). Each posts into op->xfer[op->nxfer++]. */
weft_status_t weft__coll_isend(weft__op_t *op, const void *buf, size_t bytes, int peer);
/** weft__coll_isend with the transfer's eager hint set (see weft__xfer_t). */
weft_status_t weft__coll_isend_eager(weft__op_t *op, const void *buf, size_t bytes, int peer);
/** Send / receive a weft__xfer_dt_t message (only when the comm's transport has
 * isend_dt / irecv_dt); the send with the eager hint set. */
weft_status_t weft__coll_isend_dt(weft__op_t *op, const weft__xfer_dt_t *d, int peer);
weft_status_t weft__coll_irecv_dt(weft__op_t *op, const weft__xfer_dt_t *d, int peer);
weft_status_t weft__coll_irecv(weft__op_t *op, void *buf, size_t bytes, int peer);
/** May a message of `bytes` be received with weft__coll_irecv_reduce (the
 * transport unpacks piecewise, and 2 KiB <= bytes <= WEFT_FUSED_REDUCE_MAX)? */
bool weft__coll_can_recv_reduce(const weft__op_t *op, size_t bytes);
/** Receive count elements of op's dtype from peer as out = a OP message
 * (op->rop), reduced on arrival (weft__rr_t, which must live until the step's
 * transfers completed; check weft__rr_failed then). */
weft_status_t weft__coll_irecv_reduce(weft__op_t *op, weft__rr_t *rr, void *out, const void *a,
                                      size_t count, int peer);
/**
 * WEFT_SUCCESS when every transfer of the current step completed (nxfer is
 * then reset to 0), WEFT_INPROGRESS if some are still running, or an error.
 */
weft_status_t weft__coll_test(weft__op_t *op);

/* ---- engine (progress/) ----------------------------------------------------- */
/** Start the engine thread if not running. Any thread. */
weft_status_t weft__engine_start(void);
/** Stop and join it after the in-flight ops finish (bounded). weft_finalize only. */
weft_status_t weft__engine_stop(double timeout_s);
/** Queue an op (lock-free, any thread) and wake the engine unless nowake. */
void weft__engine_submit(weft__op_t *op, bool nowake);
/**
 * A blocking call's op when nothing else is in flight in the process: start
 * it on the caller thread under the progress lock, without the submission
 * stack and the pass that would drain it. Returns true if the op was taken
 * (finished, or started and on the active list for the caller's wait to
 * drive); false if it must be submitted as usual (other ops in flight, or
 * the lock held elsewhere). Any thread; op not stream-bound (no op->ready).
 */
bool weft__engine_start_inline(weft__op_t *op);
/**
 * Try to run one progress pass on the caller thread (try-lock): returns the
 * amount of work done, or -1 if another thread is progressing. Any thread.
 */
int weft__engine_try_progress(void);
/**
 * Hold the progress lock outside a progress pass, so that no pass runs
 * meanwhile (a transport's user-thread paths that touch state the engine side
 * uses without a lock of its own, e.g. UCX endpoint creation). Spins with
 * sched_yield until it gets the lock. Any thread that does not hold it already;
 * never from inside a pass (not reentrant). Keep the section short.
 */
void weft__engine_lock(void);
void weft__engine_unlock(void);
/** Back off after `idle` consecutive empty polls: spin (WEFT_SPIN), then
 * yield; on an oversubscribed node sleep instead of yielding (growing, capped
 * by WEFT_MAX_SLEEP_US). Any thread. */
void weft__engine_backoff(unsigned idle);
/** A caller starts (+1) / stops (-1) polling in a wait; the engine naps
 * meanwhile. Any thread. */
void weft__engine_waiter(int delta);
/** Count of step transfers completed (engine side, under the progress lock):
 * weft__coll_test bumps it so that progress passes see the work. */
extern unsigned weft__engine_events;
/** Make sure the engine thread is awake (before a caller sleeps). Any thread. */
void weft__engine_wake(void);
/** Number of ops issued and not yet completed, process-wide. */
int weft__engine_inflight(void);

/* ---- requests (lib/request.c) ---------------------------------------------- */
weft_status_t weft__request_new(weft__op_t *op, weft_request_t *req);
/** Drop every request slot (weft_finalize, engine stopped). */
void weft__request_fini(void);
/** Mark op complete with status (engine side): release store + futex wake. */
void weft__op_complete(weft__op_t *op, weft_status_t status);
/** Wait until op->done, helping progress with backoff. Any thread. */
void weft__op_wait_done(weft__op_t *op);

/* ---- selection (lib/select.c) ----------------------------------------------- */
/** Pick the algorithm for a call (forced > environment > tuning table > cost model). */
weft_algo_t weft__select(weft__comm_t *comm, weft_coll_t coll, size_t bytes, weft_datatype_t dtype);
/** Implementation of (coll, algo) or NULL if that algorithm does not serve coll
 * (lib/coll/algos.c holds the registry). Any thread. */
const weft__algo_impl_t *weft__algo_impl(weft_coll_t coll, weft_algo_t algo);
/** The algorithms that serve coll, in registry order; *n gets their number
 * (NULL-terminated array; NULL and *n = 0 for an unknown coll). Any thread. */
const weft__algo_impl_t *const *weft__algo_list(weft_coll_t coll, int *n);
/** The cost model's choice for (coll, p, bytes); *best_cost its predicted time. */
weft_algo_t weft__select_model(weft_coll_t coll, int p, size_t bytes, weft_datatype_t dtype,
                               const weft__cost_t *cost, double *best_cost);
/** Parse a tuning file into the process-wide rules (format: doc/tuning.md). */
weft_status_t weft__tuning_parse(const char *path);
/** "allreduce", ... */
const char *weft__coll_name(weft_coll_t coll);
/** Load the tuning file if WEFT_TUNING_FILE is set (weft_init). */
weft_status_t weft__select_load(void);
/** Measure/agree on alpha, beta, gamma for this comm's selection (collective). */
weft_status_t weft__select_init(weft__comm_t *comm);

/* ---- observability (lib/profile.c, lib/trace.c) ----------------------------- */
/** Open the profile/trace sinks asked for (weft_init) and write them (weft_finalize). */
weft_status_t weft__obs_init(void);
void weft__obs_fini(void);

/*
 * Observability hooks. weft__obs_on is a bit set (WEFT__OBS_PROFILE,
 * WEFT__OBS_TRACE), 0 when both are off; every hook site is guarded by one
 * predictable branch, WEFT__OBS_ON(), so the cost when off is one relaxed load
 * and a not-taken branch. Building with -DWEFT_OBS_DISABLE compiles the hook
 * sites out (used to measure that cost; doc/observability.md).
 */
#define WEFT__OBS_PROFILE 1
#define WEFT__OBS_TRACE 2
extern _Atomic int weft__obs_on;
#ifdef WEFT_OBS_DISABLE
#define WEFT__OBS_ON() 0
#else
#define WEFT__OBS_ON() \
    WEFT__UNLIKELY(atomic_load_explicit(&weft__obs_on, memory_order_relaxed) != 0)
#endif
/** The guard of every per-op hook after the issue: op was issued while
 * observability was on (op->timed) and it still is. An op issued while it
 * was off records nothing later: half an op would skew the profile. */
#define WEFT__OP_OBSERVED(op) ((op)->timed && WEFT__OBS_ON())
/** Op issued (op->t_issue set, before submission). Caller thread. */
void weft__obs_issue(weft__op_t *op);
/** Op started (after impl->start returned st). Engine side (progress lock held). */
void weft__obs_start(weft__op_t *op, weft_status_t st);
/** Run impl->step(op) and record a step event when it advanced. Engine side. */
weft_status_t weft__obs_step(weft__op_t *op);
/** Op finished with st (before weft__op_complete). Engine side. */
void weft__obs_done(weft__op_t *op, weft_status_t st);
/** weft__op_wait_done(op), timing how long the caller was blocked. Any thread. */
void weft__obs_wait_done(weft__op_t *op);
/** A stream-side wait on comm c from t0 to t1 (weft__now() seconds); `what`
 * is a constant string. For lib/stream.c and the device layer. Any thread. */
void weft__obs_stream_wait(const weft__comm_t *c, const char *what, double t0, double t1);
/* Internal split of lib/obs.c: profile (lib/profile.c) and trace (lib/trace.c). */
weft_status_t weft__profile_init(void);
void weft__profile_fini(void);
void weft__profile_done(const weft__op_t *op, double t_end);
void weft__profile_wait(const weft__op_t *op, double waited);
weft_status_t weft__trace_init(void); /* collective over MPI_COMM_WORLD (clock sync) */
void weft__trace_fini(void);
/** The file rank `rank` writes for WEFT_TRACE (PATH.RANK.json). */
void weft__trace_file(char *out, size_t cap, int rank);
void weft__trace_issue(const weft__op_t *op);
void weft__trace_start(const weft__op_t *op, weft_status_t st);
void weft__trace_step(const weft__op_t *op, int phase, int stepno, double t_end);
void weft__trace_done(const weft__op_t *op, weft_status_t st, double t_end);
void weft__trace_span(const weft__comm_t *c, const char *cat, const char *what, double t0,
                      double t1);

/* ---- streams (lib/stream.c): bind a comm to its stream at creation ------- */
weft_status_t weft__stream_comm_attach(weft__comm_t *comm);
void weft__stream_comm_detach(weft__comm_t *comm);

/** Set op->ready / stream hooks for an op on a stream-bound comm (no-op otherwise).
 * Called by weft__issue for every op. On error the op is untouched (the caller
 * frees it). Caller thread. */
weft_status_t weft__stream_prepare(weft__op_t *op);
/** weft__issue, for an op with op->sop, after its tag is assigned and before it
 * is submitted: records the start flag on the stream (or launches the device
 * collective); blocking = 1 also makes the stream wait for the op and hands the
 * op to the stream side (freed when it completes). Caller thread. */
weft_status_t weft__stream_issue(weft__op_t *op, int blocking);
/** weft_wait/weft_test on an op with op->sop: make the stream wait for it.
 * Returns 1 if the op now belongs to the stream side (the caller must not free
 * it), 0 if it already completed (the caller frees it as usual). Caller thread. */
int weft__stream_op_wait(weft__op_t *op);
/** weft__op_complete, before publishing: set the op's completion flag. Returns 1
 * if the op belongs to the stream side and was freed here. Engine side. */
int weft__stream_op_complete(weft__op_t *op, weft_status_t status);
/** weft_query_algo: the algorithm for a stream-bound comm (NCCL for device
 * buffers on a CUDA stream; NCCL on host buffers mapped to a host algorithm),
 * given the host selection host_choice. Any thread. */
weft_algo_t weft__stream_query_algo(weft__comm_t *c, weft_coll_t coll, size_t bytes,
                                    weft_datatype_t dtype, weft_algo_t host_choice);
/** weft__op_free: drop the op's reference to its stream state. Any thread. */
void weft__stream_op_release(weft__op_t *op);

/** Validate buffers and size: WEFT_ERR_DATATYPE, _COUNT_OVERFLOW, _INVALID_ARG
 * (NULL buffer with count > 0); *bytes = count * element size. Any thread. */
weft_status_t weft__check_buffers(const void *sendbuf, const void *recvbuf, size_t count,
                                  weft_datatype_t dtype, size_t *bytes);

/** Free communicators the user did not destroy (weft_finalize). */
void weft__comm_free_all(void);

/* ---- global state (lib/init.c) --------------------------------------------- */
typedef struct weft__global {
    _Atomic int initialized;
    int we_init_mpi;
    int world_rank, world_size;
    int ncores;
    int tag_ub;
    int oversubscribed;  /* more ranks on this node than cores */
} weft__global_t;
extern weft__global_t weft__g;

static inline bool weft__is_init(void)
{
    return atomic_load_explicit(&weft__g.initialized, memory_order_acquire) != 0;
}

/** Monotonic seconds. Any thread. */
double weft__now(void);
/** The same clock at the kernel tick's resolution (a few ms), several times
 * cheaper to read: for the watchdog, which every progress pass checks. */
double weft__now_coarse(void);
/** Sleep while *word == expected, at most timeout_ns (0: no limit), or until
 * woken; returns early on a signal too, so callers re-check. Any thread. */
void weft__futex_wait(_Atomic uint32_t *word, uint32_t expected, long timeout_ns);
/** Wake every thread sleeping on word. Any thread. */
void weft__futex_wake(_Atomic uint32_t *word);

/* ---- check macros (log once where found, then propagate) ------------------ */
/* Weft's own MPI traffic calls the PMPI_ entry of every function that
 * libweft-mpi.so (interpose/) defines: MPI_Init_thread, MPI_Query_thread, MPI_Finalize and the
 * collectives (MPI_Allreduce, MPI_Bcast, MPI_Gather, MPI_Allgather,
 * MPI_Iallreduce, MPI_Ibarrier, ...). With the interposer preloaded, the
 * MPI_ name would resolve to it and re-enter Weft (an agreement allreduce
 * inside weft_comm_create would create a Weft communicator for Weft's own
 * duplicate). The test interpose-symbols checks libweft.so for such
 * references. Point-to-point, communicator and query calls stay MPI_. */
weft_status_t weft__mpi_error(int rc, const char *call, const char *file, int line);

#define WEFT__MPI_CHECK(call)                                                   \
    do {                                                                       \
        int weft__rc = (call);                                                 \
        if (WEFT__UNLIKELY(weft__rc != MPI_SUCCESS))                           \
            return weft__mpi_error(weft__rc, #call, __FILE__, __LINE__);       \
    } while (0)

#define WEFT__MPI_CHECK_GOTO(call, st, label)                                   \
    do {                                                                       \
        int weft__rc = (call);                                                 \
        if (WEFT__UNLIKELY(weft__rc != MPI_SUCCESS)) {                         \
            (st) = weft__mpi_error(weft__rc, #call, __FILE__, __LINE__);       \
            goto label;                                                        \
        }                                                                      \
    } while (0)

#define WEFT__CHECK(expr)                                                       \
    do {                                                                       \
        weft_status_t weft__st = (expr);                                       \
        if (WEFT__UNLIKELY(weft__st < 0)) return weft__st;                     \
    } while (0)

#define WEFT__CHECK_GOTO(expr, st, label)                                       \
    do {                                                                       \
        (st) = (expr);                                                         \
        if (WEFT__UNLIKELY((st) < 0)) goto label;                              \
    } while (0)

/** The communicators' handle table (lib/comm.c). */
extern weft__htab_t weft__comms;
/**
 * The communicator behind a public handle: WEFT_ERR_NOT_INITIALIZED, or
 * WEFT_ERR_INVALID_COMM for NULL, destroyed, made-up or earlier-init handles.
 * Any thread; not concurrently with weft_comm_destroy of the same handle.
 */
static inline weft_status_t weft__comm_get(weft_comm_t comm, weft__comm_t **out)
{
    if (!weft__is_init()) return WEFT_ERR_NOT_INITIALIZED;
    weft__comm_t *c = weft__htab_get(&weft__comms, (uint64_t)(uintptr_t)comm);
    if (c == NULL) return WEFT_ERR_INVALID_COMM;
    *out = c;
    return WEFT_SUCCESS;
}

#endif /* WEFT_INTERNAL_H */
