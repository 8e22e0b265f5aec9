/*
 * device.h - the device layer: what Weft needs from a stream and its memory,
 * as a table of function pointers with two implementations:
 *
 *   host  (lib/device_host.c)  a host stream is an ordered executor: one
 *                              thread running a FIFO of tasks;
 *   cuda  (backends/cuda/)     a cudaStream_t; flags in host-mapped memory
 *                              written/waited by the GPU (cuStreamWriteValue32 /
 *                              cuStreamWaitValue32), or an event fallback.
 *
 * lib/ never includes cuda.h: everything device-specific stays behind this
 * table, so a build without CUDA is the same code minus one table.
 *
 * The protocol lib/stream.c builds on (the same on every device):
 *   - a *flag* is a 32-bit word in host memory, 0 until set;
 *   - record(s, f): f becomes set when the stream reaches this point;
 *   - wait(s, f):   work enqueued on s afterwards runs only once f is set
 *                   (set by the host with flag_set, or by another stream);
 *   - flag_test(f): has f been set? (polled by the progress engine).
 */
#ifndef WEFT_DEVICE_H
#define WEFT_DEVICE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weft.h"

/** Where a buffer lives. */
typedef enum weft__memkind {
    WEFT__MEM_HOST = 0,  /* ordinary (pageable) host memory */
    WEFT__MEM_PINNED,    /* page-locked host memory, device-accessible */
    WEFT__MEM_DEVICE,    /* device memory: host code must not touch it */
    WEFT__MEM_MANAGED,   /* unified memory */
} weft__memkind_t;

struct weft__device;

/** A flag: a host-visible word plus whatever the device needs to set or
 * wait on it. Allocated by the device it belongs to. */
typedef struct weft__flag {
    _Atomic uint32_t *word;             /* host view: 0 pending, non-zero set */
    void *impl;                         /* device-private (device address, event) */
    const struct weft__device *dev;
} weft__flag_t;

/** A strided region: count blocks of blocklen bytes, the first at offset 0,
 * each `stride` bytes after the previous one. Packing gathers the blocks into
 * count * blocklen contiguous bytes; unpacking scatters them back. */
typedef struct weft__strided {
    size_t count;
    size_t blocklen;
    size_t stride;
} weft__strided_t;

/** A host function run in stream order. Its status, if negative, becomes the
 * stream's sticky error (see struct weft_stream). */
typedef weft_status_t (*weft__host_fn_t)(void *arg);

/**
 * The device interface. Thread contract: every entry may be called from any
 * thread, concurrently, unless it says otherwise; calls that enqueue on ONE
 * stream from several threads are ordered by whoever calls first.
 */
typedef struct weft__device {
    const char *name; /* "host", "cuda" */

    /* -- streams -- */
    /** Create a stream owned by Weft; fills s->impl. */
    weft_status_t (*stream_create)(struct weft_stream *s);
    /** Wrap the device's own stream handle (not owned); NULL on host. */
    weft_status_t (*stream_wrap)(struct weft_stream *s, void *handle);
    /** Finish the stream's work, then free s->impl (not s). */
    void (*stream_destroy)(struct weft_stream *s);
    /** Block the calling host thread until every task enqueued so far ran. */
    weft_status_t (*stream_synchronize)(struct weft_stream *s);
    /** WEFT_SUCCESS if the stream is idle, WEFT_INPROGRESS if not, or an error. */
    weft_status_t (*stream_query)(struct weft_stream *s);
    /** Run fn(arg) on the host in stream order. always = 0: skipped (not run)
     * while the stream has a sticky error; always = 1: run regardless (for
     * Weft's own bookkeeping, which must never be skipped). */
    weft_status_t (*launch_host)(struct weft_stream *s, weft__host_fn_t fn, void *arg, int always);

    /* -- flags -- */
    weft_status_t (*flag_alloc)(const struct weft__device *dev, weft__flag_t **f);
    /** Free a flag nobody will record, wait on or test any more. */
    void (*flag_free)(weft__flag_t *f);
    /** f becomes set when the stream reaches this point. */
    weft_status_t (*record)(struct weft_stream *s, weft__flag_t *f);
    /** Work enqueued on s after this waits until f is set. */
    weft_status_t (*wait)(struct weft_stream *s, weft__flag_t *f);
    /** 1 if f is set, 0 if not yet, or a negative error. Never blocks. */
    int (*flag_test)(weft__flag_t *f);
    /** Set f from the host (wakes streams waiting for it). */
    void (*flag_set)(weft__flag_t *f);

    /* -- data, asynchronous in stream order -- */
    /** Runs even when the stream has a sticky error (Weft's staging copies). */
    weft_status_t (*copy)(struct weft_stream *s, void *dst, const void *src, size_t bytes);
    /** inout[i] = inout[i] OP in[i] (AVG reduces as SUM), i < count. */
    weft_status_t (*reduce)(struct weft_stream *s, void *inout, const void *in, size_t count,
                            weft_datatype_t dtype, weft_op_t op);
    /** Gather region r of src into contiguous dst. */
    weft_status_t (*pack)(struct weft_stream *s, void *dst, const void *src,
                          const weft__strided_t *r);
    /** Scatter contiguous src into region r of dst. */
    weft_status_t (*unpack)(struct weft_stream *s, void *dst, const void *src,
                            const weft__strided_t *r);

    /* -- memory -- */
    /** Page-locked host memory the device can reach (plain memory on host). */
    weft_status_t (*host_alloc)(void **p, size_t bytes);
    void (*host_free)(void *p);
    /** Where does p live? */
    weft__memkind_t (*ptr_kind)(const void *p);
} weft__device_t;

/**
 * A stream: a device and its handle. `error` is sticky: the first negative
 * status of a task (a host function, a failed collective the stream waited
 * for); weft_stream_synchronize returns it and clears it.
 */
struct weft_stream {
    const weft__device_t *dev;
    void *impl;              /* device-private stream state */
    void *handle;            /* the device's own handle (cudaStream_t), NULL on host */
    int owned;               /* created by Weft (weft_stream_destroy frees the handle) */
    _Atomic int error;       /* sticky first error, 0 if none */
};

/** Record a task's status as the stream's sticky error (first one wins).
 * Any thread. */
static inline void weft__stream_set_error(struct weft_stream *s, weft_status_t st)
{
    int zero = 0;
    if (st < 0)
        atomic_compare_exchange_strong_explicit(&s->error, &zero, (int)st, memory_order_relaxed,
                                                memory_order_relaxed);
}

/* ---- registry (lib/device.c) ---------------------------------------------- */
/** The host device (always present). Any thread. */
const weft__device_t *weft__device_host(void);
/** The CUDA device layer, or NULL when not built or no usable GPU/driver.
 * Loads the driver on first call (thread-safe, once). Any thread. */
const weft__device_t *weft__device_cuda(void);
/** Where p lives, asking every device built in (host memory if none knows it). */
weft__memkind_t weft__device_ptr_kind(const void *p);

/* Provided by backends/cuda when built (lib/device.c calls it once). */
const weft__device_t *weft__cuda_device_load(void);

/* ---- device collectives (backends/nccl) ----------------------------------- */
struct weft__comm;
/** NCCL for device buffers on CUDA streams; NULL entries / table when not built. */
typedef struct weft__nccl_backend {
    /** Create the NCCL communicator for comm (collective over comm->mpi;
     * unique id broadcast over MPI). *state is owned by the backend. */
    weft_status_t (*comm_open)(struct weft__comm *comm, void **state);
    /** Destroy it (ncclCommDestroy, or ncclCommAbort after an error). */
    void (*comm_close)(void *state);
    /** Can NCCL reduce dtype with op? (no bitwise ops) */
    bool (*supports)(weft_datatype_t dtype, weft_op_t op);
    /** Enqueue the NCCL collective on the CUDA stream s: WEFT_COLL_ALLREDUCE,
     * BCAST (root), ALLGATHER or REDUCE_SCATTER, with Weft's arguments (count:
     * the vector, or the per-rank block; in place as Weft resolves it,
     * lib/collectives.c). */
    weft_status_t (*coll)(void *state, weft_coll_t coll, const void *sendbuf, void *recvbuf,
                          size_t count, weft_datatype_t dtype, weft_op_t op, int root,
                          struct weft_stream *s);
    /** ncclCommGetAsyncError: WEFT_SUCCESS, WEFT_INPROGRESS or WEFT_ERR_NCCL. */
    weft_status_t (*async_error)(void *state);
    /** ncclCommAbort (on a timeout or an error); the comm is unusable afterwards. */
    void (*abort)(void *state);
} weft__nccl_backend_t;

/** NULL when NCCL is not built in. Any thread. */
const weft__nccl_backend_t *weft__nccl_backend(void);

#endif /* WEFT_DEVICE_H */
