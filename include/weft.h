/*
 * weft.h - Weft's public C ABI: an asynchronous, stream-aware collective
 * communication library for deep-learning training on HPC clusters.
 *
 * The header compiles as C99 and C++. Everything Weft exports starts with
 * `weft_` / `WEFT_`. MPI interop (creating a communicator from an MPI_Comm)
 * lives in weft_mpi.h, CUDA interop in weft_cuda.h.
 *
 * Thread contract (unless a function says otherwise): every function may be
 * called from any thread after weft_init() and before weft_finalize(). Calls
 * that issue collectives on ONE communicator must be ordered by the caller
 * (as MPI requires): all ranks issue them in the same order.
 */
#ifndef WEFT_H
#define WEFT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define WEFT_EXPORT
#else
#define WEFT_EXPORT __attribute__((visibility("default")))
#endif

/* ---- version ---------------------------------------------------------- */
#define WEFT_VERSION_MAJOR 0
#define WEFT_VERSION_MINOR 1
#define WEFT_VERSION_PATCH 0
#define WEFT_VERSION_HEX \
    ((WEFT_VERSION_MAJOR << 16) | (WEFT_VERSION_MINOR << 8) | WEFT_VERSION_PATCH)

/** Version of the library actually loaded, as WEFT_VERSION_HEX. Any thread, any time. */
WEFT_EXPORT unsigned weft_version(void);
/** "major.minor.patch" of the loaded library. Any thread, any time. */
WEFT_EXPORT const char *weft_version_string(void);

/* ---- status ------------------------------------------------------------ */
/** 0 is success, positive means "in progress", negative values are errors. */
typedef enum weft_status {
    WEFT_SUCCESS = 0,
    WEFT_INPROGRESS = 1,
    WEFT_ERR_INVALID_ARG = -1,      /**< NULL buffer with count > 0, bad root, ... */
    WEFT_ERR_DATATYPE = -2,         /**< unknown datatype, or op not defined on it */
    WEFT_ERR_OP = -3,               /**< unknown reduction operation */
    WEFT_ERR_COUNT_OVERFLOW = -4,   /**< count * element size does not fit */
    WEFT_ERR_NOT_INITIALIZED = -5,  /**< called before weft_init or after weft_finalize */
    WEFT_ERR_INVALID_REQUEST = -6,  /**< unknown, completed or freed request handle */
    WEFT_ERR_INVALID_COMM = -7,     /**< NULL or destroyed communicator */
    WEFT_ERR_NO_MEMORY = -8,
    WEFT_ERR_THREAD_LEVEL = -9,     /**< MPI cannot give MPI_THREAD_MULTIPLE */
    WEFT_ERR_MPI = -10,             /**< an MPI call failed (logged with its message) */
    WEFT_ERR_TIMEOUT = -11,         /**< the hang watchdog (WEFT_TIMEOUT) fired */
    WEFT_ERR_COMM_BROKEN = -12,     /**< an earlier operation on the comm failed */
    WEFT_ERR_UNSUPPORTED = -13,     /**< not built in, or not available here */
    WEFT_ERR_ALGORITHM = -14,       /**< algorithm unknown or not valid for the call */
    WEFT_ERR_TUNING_FILE = -15,     /**< tuning file unreadable or malformed */
    WEFT_ERR_CUDA = -16,
    WEFT_ERR_NCCL = -17,
    WEFT_ERR_UCX = -18,
    WEFT_ERR_STREAM = -19,          /**< a task on a stream failed */
    WEFT_ERR_HALO_PLAN = -20,       /**< halo plan does not fit the grid or block */
    WEFT_ERR_FINALIZING = -21,      /**< op still in flight when weft_finalize ran */
    WEFT_ERR_INTERNAL = -99
} weft_status_t;

/** Constant, never-NULL description of a status. Any thread, any time. */
WEFT_EXPORT const char *weft_strerror(weft_status_t status);
/** The enumerator's name ("WEFT_ERR_TIMEOUT"). Any thread, any time. */
WEFT_EXPORT const char *weft_status_name(weft_status_t status);

/* ---- handles ------------------------------------------------------------ */
typedef struct weft_comm *weft_comm_t;     /**< communicator, bound to a stream */
typedef struct weft_stream *weft_stream_t; /**< host stream or wrapped device stream */
/**
 * Request handle. An opaque 64-bit value (slot and generation), so that a
 * completed or freed handle is detected (WEFT_ERR_INVALID_REQUEST) rather
 * than dereferenced. WEFT_REQUEST_NULL is never a live request.
 */
typedef uint64_t weft_request_t;
#define WEFT_REQUEST_NULL ((weft_request_t)0)

/** Pass as sendbuf for the in-place form (the input is read from recvbuf). */
#define WEFT_IN_PLACE ((const void *)(intptr_t)-1)

/* New types are appended: a value, once given, never changes (ABI). */
typedef enum weft_datatype {
    WEFT_INT8 = 0, WEFT_UINT8, WEFT_INT32, WEFT_UINT32, WEFT_INT64, WEFT_UINT64,
    WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FLOAT32, WEFT_FLOAT64,
    WEFT_INT16, WEFT_UINT16,
    WEFT_DATATYPE_COUNT
} weft_datatype_t;

typedef enum weft_op {
    WEFT_SUM = 0, WEFT_PROD, WEFT_MIN, WEFT_MAX, WEFT_AVG,
    WEFT_BAND, WEFT_BOR, WEFT_BXOR, /* integer types only */
    WEFT_OP_COUNT
} weft_op_t;

/** Size in bytes of one element, 0 for an unknown type. Any thread, any time. */
WEFT_EXPORT size_t weft_datatype_size(weft_datatype_t dtype);
WEFT_EXPORT const char *weft_datatype_name(weft_datatype_t dtype);
WEFT_EXPORT const char *weft_op_name(weft_op_t op);

/** Collective operations, as keys of the selection table. */
typedef enum weft_coll {
    WEFT_COLL_ALLREDUCE = 0, WEFT_COLL_REDUCE_SCATTER, WEFT_COLL_ALLGATHER,
    WEFT_COLL_BCAST, WEFT_COLL_REDUCE, WEFT_COLL_ALLTOALL, WEFT_COLL_GATHER,
    WEFT_COLL_SCATTER, WEFT_COLL_BARRIER, WEFT_COLL_ALLGATHERV, WEFT_COLL_ALLTOALLV,
    WEFT_COLL_GATHERV, WEFT_COLL_SCATTERV, WEFT_COLL_REDUCE_SCATTERV,
    WEFT_COLL_COUNT
} weft_coll_t;

/** Algorithms. Not every algorithm serves every collective. */
typedef enum weft_algo {
    WEFT_ALGO_AUTO = 0,            /**< let the selection table decide */
    WEFT_ALGO_RING,                /**< pipelined ring (bandwidth-optimal) */
    WEFT_ALGO_RECURSIVE_DOUBLING,  /**< lg p rounds, whole vector each round */
    WEFT_ALGO_RABENSEIFNER,        /**< recursive halving + doubling */
    WEFT_ALGO_TREE,                /**< binomial tree reduce + broadcast */
    WEFT_ALGO_MPI,                 /**< pass through to MPI's own collective */
    WEFT_ALGO_BINOMIAL,            /**< binomial tree (bcast, reduce) */
    WEFT_ALGO_SCATTER_ALLGATHER,   /**< bcast: scatter then ring allgather */
    WEFT_ALGO_RECURSIVE_HALVING,   /**< reduce_scatter by recursive halving */
    WEFT_ALGO_PAIRWISE,            /**< alltoall by pairwise exchange */
    WEFT_ALGO_BRUCK,               /**< reserved: no collective implements it yet (forcing it: WEFT_ERR_ALGORITHM) */
    WEFT_ALGO_DISSEMINATION,       /**< barrier */
    WEFT_ALGO_LINEAR,              /**< direct to/from the root (gather, scatter) */
    WEFT_ALGO_NCCL,                /**< NCCL on the communicator's CUDA stream */
    WEFT_ALGO_REDUCE_BCAST,        /**< allreduce: binomial reduce to rank 0, then binomial bcast */
    WEFT_ALGO_SHM,                 /**< ranks of one node read each other's buffers (single copy) */
    WEFT_ALGO_HIERARCHICAL,        /**< allreduce, bcast, barrier: node-local and cross-node phases (communicators spanning nodes) */
    WEFT_ALGO_COUNT
} weft_algo_t;

/** "ring", "recursive_doubling", ...; NULL for an unknown value. Any thread. */
WEFT_EXPORT const char *weft_algo_name(weft_algo_t algo);
/** Parse a name as printed by weft_algo_name; WEFT_ERR_ALGORITHM if unknown. */
WEFT_EXPORT weft_status_t weft_algo_from_name(const char *name, weft_algo_t *algo);

/* ---- init / finalize ----------------------------------------------------- */
/**
 * The host point-to-point transport a communicator's algorithms move bytes
 * with (weft_comm_create_ex in weft_mpi.h; doc/ucx.md).
 */
typedef enum weft_transport {
    WEFT_TRANSPORT_DEFAULT = 0, /**< as WEFT_TRANSPORT says (auto: UCX when built in, else MPI) */
    WEFT_TRANSPORT_MPI,         /**< MPI point-to-point on the communicator's MPI duplicate */
    WEFT_TRANSPORT_UCX,         /**< UCP tag matching, driven by Weft's engine */
    WEFT_TRANSPORT_COUNT
} weft_transport_t;

/** "default", "mpi", "ucx"; NULL for an unknown value. Any thread. */
WEFT_EXPORT const char *weft_transport_name(weft_transport_t transport);

/**
 * Parameters for weft_init, extensible: set `size` to sizeof(weft_init_params_t)
 * (WEFT_INIT_PARAMS_INITIALIZER does). NULL means all defaults.
 */
typedef struct weft_init_params {
    size_t size;
    int *argc;      /**< passed to MPI_Init_thread if Weft initialises MPI */
    char ***argv;
} weft_init_params_t;
#define WEFT_INIT_PARAMS_INITIALIZER { sizeof(weft_init_params_t), NULL, NULL }

/**
 * Initialise Weft: reads the WEFT_* environment once, initialises MPI with
 * MPI_THREAD_MULTIPLE if nobody has (and then finalises it in weft_finalize),
 * or checks that the running MPI gives MPI_THREAD_MULTIPLE
 * (WEFT_ERR_THREAD_LEVEL otherwise). The progress engine starts on first use.
 * Calling it again while initialised is a no-op. Thread: one thread, once.
 */
WEFT_EXPORT weft_status_t weft_init(const weft_init_params_t *params);
/**
 * Finish every operation in flight (bounded by WEFT_TIMEOUT: what does not
 * finish is failed with WEFT_ERR_FINALIZING and reported), stop and join the
 * engine, free communicators still alive, shut the transports down.
 * Collective over MPI's world, as weft_init (and MPI_Finalize) are.
 * Afterwards every call returns WEFT_ERR_NOT_INITIALIZED. Thread: the thread
 * that called weft_init, with no other thread inside Weft.
 */
WEFT_EXPORT weft_status_t weft_finalize(void);
/** 1 between weft_init and weft_finalize. Any thread. */
WEFT_EXPORT int weft_initialized(void);

/* ---- communicators ------------------------------------------------------- */
/*
 * A weft_comm_t is an opaque handle, not a pointer to memory: a destroyed
 * communicator's handle, or one from before a weft_finalize, is recognised
 * (WEFT_ERR_INVALID_COMM) by every function that takes one.
 * Creation from an MPI_Comm: weft_comm_create in weft_mpi.h; without mpi.h:
 * weft_comm_world, weft_comm_create_f, weft_comm_split, weft_comm_create_group below.
 */
/**
 * Options of communicator creation, extensible: set `size` to
 * sizeof(weft_comm_params_t) (WEFT_COMM_PARAMS_INITIALIZER does).
 */
typedef struct weft_comm_params {
    size_t size;
    /** WEFT_TRANSPORT_DEFAULT follows WEFT_TRANSPORT. Every rank must ask for
     * the same transport (checked: WEFT_ERR_INVALID_ARG on every rank). */
    weft_transport_t transport;
} weft_comm_params_t;
#define WEFT_COMM_PARAMS_INITIALIZER { sizeof(weft_comm_params_t), WEFT_TRANSPORT_DEFAULT }

/**
 * A communicator over every process of the job (MPI_COMM_WORLD under MPI),
 * bound to `stream` (NULL: none); params NULL: defaults. Collective over every
 * process. Thread: any, after weft_init.
 */
WEFT_EXPORT weft_status_t weft_comm_world(weft_stream_t stream, const weft_comm_params_t *params,
                                          weft_comm_t *comm);
/**
 * A communicator from MPI's Fortran handle of a communicator (MPI_Comm_c2f;
 * mpi4py's comm.py2f()), as weft_comm_create_ex: lets an embedder hand over an
 * MPI communicator without including mpi.h. Collective over that communicator.
 * Thread: any, after weft_init.
 */
WEFT_EXPORT weft_status_t weft_comm_create_f(int fortran_comm, weft_stream_t stream,
                                             const weft_comm_params_t *params, weft_comm_t *comm);
/** Color of a rank that joins no communicator in weft_comm_split. */
#define WEFT_UNDEFINED (-1)
/**
 * Split comm as MPI_Comm_split does: the ranks that pass one color >= 0 form
 * a new communicator, ordered by key (ties by rank in comm), over comm's
 * transport, bound to `stream`. A rank passing WEFT_UNDEFINED joins none and
 * gets *newcomm = NULL. Waits for the operations in flight on comm first.
 * A color below -1 on any rank is refused on every rank
 * (WEFT_ERR_INVALID_ARG). Collective over comm, ordered with its other
 * collectives. Thread: any, not concurrently with other calls on comm.
 */
WEFT_EXPORT weft_status_t weft_comm_split(weft_comm_t comm, int color, int key,
                                          weft_stream_t stream, weft_comm_t *newcomm);
/**
 * A communicator of the n ranks of comm listed in `ranks` (ranks in comm,
 * distinct), numbered in the list's order, over comm's transport, bound to
 * `stream`: MPI_Comm_create_group. Collective over the listed ranks only,
 * which must all pass the same list: the other ranks of comm take no part
 * and may go on using comm meanwhile (what a framework needs when only a
 * group's members create it, as torch.distributed does). Waits for this
 * rank's operations in flight on comm first. A list with a rank out of
 * range or twice, or without the calling rank, is refused on the calling
 * rank (WEFT_ERR_INVALID_ARG; every member sees the same list, so every
 * member refuses it). Members that pass different lists are in error, as in
 * MPI (the call may hang).
 * Thread: any, not concurrently with other calls on comm from this rank.
 */
WEFT_EXPORT weft_status_t weft_comm_create_group(weft_comm_t comm, const int *ranks, int n,
                                                 weft_stream_t stream, weft_comm_t *newcomm);
/**
 * Destroy a communicator: waits for the operations issued on it, then frees
 * it. Collective over the communicator. Thread: any, not concurrently with
 * other calls on the same communicator.
 */
WEFT_EXPORT weft_status_t weft_comm_destroy(weft_comm_t comm);
/** The transport comm was created with (never WEFT_TRANSPORT_DEFAULT). Any thread. */
WEFT_EXPORT weft_status_t weft_comm_get_transport(weft_comm_t comm, weft_transport_t *transport);
WEFT_EXPORT weft_status_t weft_comm_rank(weft_comm_t comm, int *rank);
WEFT_EXPORT weft_status_t weft_comm_size(weft_comm_t comm, int *size);
/** The stream the communicator is bound to (NULL if none). */
WEFT_EXPORT weft_status_t weft_comm_stream(weft_comm_t comm, weft_stream_t *stream);
/** Sticky asynchronous error of the communicator (WEFT_SUCCESS if none). */
WEFT_EXPORT weft_status_t weft_comm_get_error(weft_comm_t comm);

/* ---- requests ------------------------------------------------------------- */
/**
 * Wait for a request to complete and release it; *req becomes
 * WEFT_REQUEST_NULL. Waiting on WEFT_REQUEST_NULL returns WEFT_SUCCESS.
 * Returns the operation's own status. On a stream-bound communicator it also
 * makes the stream wait for the operation (see weft_stream_* below). Thread:
 * any, but one waiter per request (the handle is released on entry: a second,
 * concurrent weft_wait or weft_test on it returns WEFT_ERR_INVALID_REQUEST).
 */
WEFT_EXPORT weft_status_t weft_wait(weft_request_t *req);
/**
 * Test a request: *done = 1 and the request released (as by weft_wait) when
 * it completed, *done = 0 otherwise. Never blocks.
 */
WEFT_EXPORT weft_status_t weft_test(weft_request_t *req, int *done);
/** Wait for all; returns the first error met (all requests are released). */
WEFT_EXPORT weft_status_t weft_waitall(size_t n, weft_request_t *reqs);

/** A completion callback: arg as registered, status the operation's own. */
typedef void (*weft_request_callback_t)(void *arg, weft_status_t status);
/**
 * Have fn(arg, status) called once when the operation of `req` completes, so
 * that a framework's future or event is completed by Weft rather than by a
 * thread blocked in weft_wait. fn runs exactly once: on the thread that
 * completes the operation (the engine thread, or a thread driving progress
 * inside weft_wait, weft_test or a blocking call), outside Weft's progress
 * lock, after the output is in place and weft_test would report the request
 * done; or at once on the calling thread if the operation has already
 * completed. The request must still be released with weft_wait or weft_test
 * (they return at once then; weft_wait may return before fn has run, fn runs
 * anyway). fn must be short and must not block: it may call weft_test,
 * weft_wait on its own request, and nonblocking Weft calls, never a blocking
 * call or a wait on a request that has not completed.
 * Errors: WEFT_ERR_INVALID_REQUEST (stale, null or released handle),
 * WEFT_ERR_INVALID_ARG (fn NULL, or a callback already registered),
 * WEFT_ERR_UNSUPPORTED (a request of a stream-bound communicator: order later
 * work on the stream instead). Thread: any.
 */
WEFT_EXPORT weft_status_t weft_request_on_complete(weft_request_t req, weft_request_callback_t fn,
                                                   void *arg);

/** What weft_request_notify_fd writes: the caller's token and the operation's status. */
typedef struct weft_completion_record {
    uint64_t token;
    int32_t status;    /* a weft_status_t */
    uint32_t reserved; /* 0 */
} weft_completion_record_t;
/**
 * Have Weft write one weft_completion_record_t {token, status} (16 bytes, one
 * write(2)) to file descriptor fd when the operation of `req` completes: a
 * completion notice for runtimes whose callbacks must first take a lock of
 * their own (Python's GIL, an event loop's), so that the completing thread -
 * often Weft's engine - never waits on that lock and never enters the
 * runtime. fd is a pipe or socket that the runtime reads; records from
 * several threads never interleave (a pipe's writes of up to PIPE_BUF bytes
 * are atomic). Keep it drained: a full pipe blocks the completing thread (for
 * an O_NONBLOCK fd the record is dropped and the loss logged). Otherwise as
 * weft_request_on_complete: one notice or callback per request, written at
 * once if the operation has completed already, and the request must still be
 * released with weft_wait or weft_test. Errors: as weft_request_on_complete,
 * and WEFT_ERR_INVALID_ARG for fd < 0, WEFT_ERR_NO_MEMORY. Thread: any.
 */
WEFT_EXPORT weft_status_t weft_request_notify_fd(weft_request_t req, int fd, uint64_t token);

/**
 * A communicator's completion callback: arg as set, req the address at which
 * the nonblocking call stored the operation's request (the caller's
 * weft_request_t variable: the operation is known by it, for instance as a
 * member of the object that tracks it), status the operation's own.
 */
typedef void (*weft_comm_callback_t)(void *arg, weft_request_t *req, weft_status_t status);
/**
 * Have fn(arg, req, status) called once for every nonblocking collective and
 * point-to-point operation (the weft_i* calls) issued on comm from now on,
 * when it completes: what weft_request_on_complete registered right after
 * each call gives, but in place from the issue, with no call and no look-up
 * of the request per operation. fn may run before the nonblocking call
 * returns (on another thread; *req is set by then), so *req must stay where
 * it is until fn has run; fn may release the request itself with
 * weft_wait(req), else it is released as usual. Where fn runs and what it may
 * do: as weft_request_on_complete. Such a request takes no second callback
 * (weft_request_on_complete: WEFT_ERR_INVALID_ARG). fn == NULL removes the
 * setting; operations issued before a change keep what they had. Halo
 * exchanges are not included. Errors: WEFT_ERR_INVALID_COMM,
 * WEFT_ERR_UNSUPPORTED (a stream-bound communicator: order work on the
 * stream), WEFT_ERR_NO_MEMORY. Thread: any; a call issued concurrently
 * on another thread has the old setting or the new one.
 */
WEFT_EXPORT weft_status_t weft_comm_set_on_complete(weft_comm_t comm, weft_comm_callback_t fn,
                                                    void *arg);

/* ---- allreduce -------------------------------------------------------------- */
/**
 * Allreduce `count` elements. sendbuf may be WEFT_IN_PLACE. On a communicator
 * with a stream, buffers may be device or host memory (see weft_cuda.h);
 * otherwise host memory.
 */
WEFT_EXPORT weft_status_t weft_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                                         weft_datatype_t dtype, weft_op_t op, weft_comm_t comm);
WEFT_EXPORT weft_status_t weft_iallreduce(const void *sendbuf, void *recvbuf, size_t count,
                                          weft_datatype_t dtype, weft_op_t op, weft_comm_t comm,
                                          weft_request_t *req);
/** Force the algorithm of subsequent calls on comm (WEFT_ALGO_AUTO to restore). */
WEFT_EXPORT weft_status_t weft_comm_set_algo(weft_comm_t comm, weft_coll_t coll, weft_algo_t algo);
/**
 * Which algorithm a call with these arguments would use on comm right now
 * (after forcing, environment and tuning table). Any thread.
 */
WEFT_EXPORT weft_status_t weft_query_algo(weft_comm_t comm, weft_coll_t coll, size_t count,
                                          weft_datatype_t dtype, weft_algo_t *algo);

/* ---- the other collectives --------------------------------------------------
 * Host buffers; on a communicator bound to a CUDA stream, device buffers too
 * for reduce_scatter, allgather, bcast (NCCL or host transfer, as allreduce)
 * and alltoall (host transfer), in stream order: doc/streams.md. */
/** Each rank gets block `rank` (recvcount elements) of the reduced vector of size*recvcount. */
WEFT_EXPORT weft_status_t weft_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                              weft_datatype_t dtype, weft_op_t op, weft_comm_t comm);
WEFT_EXPORT weft_status_t weft_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                               weft_datatype_t dtype, weft_op_t op, weft_comm_t comm,
                                               weft_request_t *req);
/** recvbuf holds size*count elements; in place: sendbuf = WEFT_IN_PLACE, own block already in place. */
WEFT_EXPORT weft_status_t weft_allgather(const void *sendbuf, void *recvbuf, size_t count,
                                         weft_datatype_t dtype, weft_comm_t comm);
WEFT_EXPORT weft_status_t weft_iallgather(const void *sendbuf, void *recvbuf, size_t count,
                                          weft_datatype_t dtype, weft_comm_t comm, weft_request_t *req);
WEFT_EXPORT weft_status_t weft_bcast(void *buf, size_t count, weft_datatype_t dtype, int root,
                                     weft_comm_t comm);
WEFT_EXPORT weft_status_t weft_ibcast(void *buf, size_t count, weft_datatype_t dtype, int root,
                                      weft_comm_t comm, weft_request_t *req);
/** recvbuf significant at root only; in place at root: sendbuf = WEFT_IN_PLACE. */
WEFT_EXPORT weft_status_t weft_reduce(const void *sendbuf, void *recvbuf, size_t count,
                                      weft_datatype_t dtype, weft_op_t op, int root, weft_comm_t comm);
WEFT_EXPORT weft_status_t weft_ireduce(const void *sendbuf, void *recvbuf, size_t count,
                                       weft_datatype_t dtype, weft_op_t op, int root, weft_comm_t comm,
                                       weft_request_t *req);
/** count elements to and from every rank (buffers of size*count). */
WEFT_EXPORT weft_status_t weft_alltoall(const void *sendbuf, void *recvbuf, size_t count,
                                        weft_datatype_t dtype, weft_comm_t comm);
WEFT_EXPORT weft_status_t weft_ialltoall(const void *sendbuf, void *recvbuf, size_t count,
                                         weft_datatype_t dtype, weft_comm_t comm, weft_request_t *req);
WEFT_EXPORT weft_status_t weft_gather(const void *sendbuf, void *recvbuf, size_t count,
                                      weft_datatype_t dtype, int root, weft_comm_t comm);
WEFT_EXPORT weft_status_t weft_igather(const void *sendbuf, void *recvbuf, size_t count,
                                       weft_datatype_t dtype, int root, weft_comm_t comm,
                                       weft_request_t *req);
WEFT_EXPORT weft_status_t weft_scatter(const void *sendbuf, void *recvbuf, size_t count,
                                       weft_datatype_t dtype, int root, weft_comm_t comm);
WEFT_EXPORT weft_status_t weft_iscatter(const void *sendbuf, void *recvbuf, size_t count,
                                        weft_datatype_t dtype, int root, weft_comm_t comm,
                                        weft_request_t *req);
/*
 * Vector forms: every rank's block has its own length. Counts and
 * displacements are in elements of dtype (displacements from the start of
 * the buffer); they are read during the call only, so the caller may reuse
 * the arrays as soon as the call returns, also for the nonblocking forms.
 * Blocks of one buffer must not overlap. Host buffers only (a device
 * buffer on a stream-bound communicator: WEFT_ERR_UNSUPPORTED). Every rank
 * must pass counts that match its peers' (what rank a sends to b is what b
 * expects from a); WEFT_CHECK_ARGS=1 checks the totals.
 */
/** allgatherv: recvbuf gets rank r's sendcount elements at displs[r]
 * (recvcounts[r] == that rank's sendcount, the same arrays on every rank).
 * In place: sendbuf = WEFT_IN_PLACE, own block already at displs[rank]. */
WEFT_EXPORT weft_status_t weft_allgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                                          const size_t *recvcounts, const size_t *displs,
                                          weft_datatype_t dtype, weft_comm_t comm);
WEFT_EXPORT weft_status_t weft_iallgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                                           const size_t *recvcounts, const size_t *displs,
                                           weft_datatype_t dtype, weft_comm_t comm,
                                           weft_request_t *req);
/** alltoallv: sendcounts[r] elements at sdispls[r] of sendbuf go to rank r;
 * recvcounts[r] elements from rank r land at rdispls[r] of recvbuf. In place:
 * sendbuf = WEFT_IN_PLACE, sendcounts and sdispls ignored (may be NULL): the
 * blocks sent are recvbuf's, by recvcounts and rdispls, as MPI does. */
WEFT_EXPORT weft_status_t weft_alltoallv(const void *sendbuf, const size_t *sendcounts,
                                         const size_t *sdispls, void *recvbuf,
                                         const size_t *recvcounts, const size_t *rdispls,
                                         weft_datatype_t dtype, weft_comm_t comm);
WEFT_EXPORT weft_status_t weft_ialltoallv(const void *sendbuf, const size_t *sendcounts,
                                          const size_t *sdispls, void *recvbuf,
                                          const size_t *recvcounts, const size_t *rdispls,
                                          weft_datatype_t dtype, weft_comm_t comm,
                                          weft_request_t *req);
/** gatherv: the root gets rank r's sendcount elements at displs[r] of
 * recvbuf (recvcounts[r] == that rank's sendcount); recvbuf, recvcounts and
 * displs are read at the root only (may be NULL elsewhere). In place at the
 * root: sendbuf = WEFT_IN_PLACE, its block already at displs[root]. */
WEFT_EXPORT weft_status_t weft_gatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                                       const size_t *recvcounts, const size_t *displs,
                                       weft_datatype_t dtype, int root, weft_comm_t comm);
WEFT_EXPORT weft_status_t weft_igatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                                        const size_t *recvcounts, const size_t *displs,
                                        weft_datatype_t dtype, int root, weft_comm_t comm,
                                        weft_request_t *req);
/** scatterv: rank r gets sendcounts[r] elements from displs[r] of the root's
 * sendbuf into recvbuf (recvcount == sendcounts[r]); sendbuf, sendcounts and
 * displs are read at the root only. In place at the root: recvbuf =
 * WEFT_IN_PLACE, its block stays in sendbuf. */
WEFT_EXPORT weft_status_t weft_scatterv(const void *sendbuf, const size_t *sendcounts,
                                        const size_t *displs, void *recvbuf, size_t recvcount,
                                        weft_datatype_t dtype, int root, weft_comm_t comm);
WEFT_EXPORT weft_status_t weft_iscatterv(const void *sendbuf, const size_t *sendcounts,
                                         const size_t *displs, void *recvbuf, size_t recvcount,
                                         weft_datatype_t dtype, int root, weft_comm_t comm,
                                         weft_request_t *req);
/** reduce_scatterv (MPI_Reduce_scatter): the element-wise reduction of every
 * rank's sendbuf (sum of recvcounts elements, the same recvcounts on every
 * rank), cut in consecutive blocks: rank r gets block r, recvcounts[r]
 * elements, in recvbuf. In place: sendbuf = WEFT_IN_PLACE, the input is
 * recvbuf (the whole vector) and the result lands at its start. Every
 * operation but WEFT_AVG (WEFT_ERR_UNSUPPORTED: sum, then divide). */
WEFT_EXPORT weft_status_t weft_reduce_scatterv(const void *sendbuf, void *recvbuf,
                                               const size_t *recvcounts, weft_datatype_t dtype,
                                               weft_op_t op, weft_comm_t comm);
WEFT_EXPORT weft_status_t weft_ireduce_scatterv(const void *sendbuf, void *recvbuf,
                                                const size_t *recvcounts, weft_datatype_t dtype,
                                                weft_op_t op, weft_comm_t comm,
                                                weft_request_t *req);
WEFT_EXPORT weft_status_t weft_barrier(weft_comm_t comm);
WEFT_EXPORT weft_status_t weft_ibarrier(weft_comm_t comm, weft_request_t *req);

/* ---- point to point (through the engine, ordered with collectives) ------- */
WEFT_EXPORT weft_status_t weft_send(const void *buf, size_t count, weft_datatype_t dtype, int dest,
                                    int tag, weft_comm_t comm);
WEFT_EXPORT weft_status_t weft_isend(const void *buf, size_t count, weft_datatype_t dtype, int dest,
                                     int tag, weft_comm_t comm, weft_request_t *req);
WEFT_EXPORT weft_status_t weft_recv(void *buf, size_t count, weft_datatype_t dtype, int src, int tag,
                                    weft_comm_t comm);
WEFT_EXPORT weft_status_t weft_irecv(void *buf, size_t count, weft_datatype_t dtype, int src, int tag,
                                     weft_comm_t comm, weft_request_t *req);
WEFT_EXPORT weft_status_t weft_sendrecv(const void *sendbuf, size_t sendcount, int dest, int sendtag,
                                        void *recvbuf, size_t recvcount, int src, int recvtag,
                                        weft_datatype_t dtype, weft_comm_t comm);

/* ---- profiler ------------------------------------------------------------- */
/** Start/stop per-size profiling at run time (WEFT_PROFILE=path does it at init).
 * Operations issued while it is off are not counted, even if they complete after. */
WEFT_EXPORT weft_status_t weft_profile_enable(int on);
/** Write this process's profile (JSON) to path now. */
WEFT_EXPORT weft_status_t weft_profile_dump(const char *path);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_H */
