/*
 * transport.h - the transport interface: what a host transport (backends/mpi,
 * backends/ucx) implements and what the core calls. Algorithms never call a
 * transport directly (lib/coll/algo.h's transfer helpers do).
 */
#ifndef WEFT_TRANSPORT_H
#define WEFT_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sys.h"

/* ---- transport (backends/mpi, backends/ucx) ---------------------------- */
struct weft__comm;
struct weft__ctl;

/**
 * What a transport sees of a communicator: lib/comm.h's weft__comm_t begins
 * with these fields (one storage, also named there), so a transport reads
 * them without the core's header. weft__tp_comm(comm) gives the view.
 */
typedef struct weft__tp_comm {
    void *state;            /* the transport's own, set by comm_open, cleared by comm_close */
    struct weft__ctl *ctl;  /* the comm's control channel (lib/ctl.h): comm_open/close's
                               collectives */
    int rank, size;
    int id;                 /* small id for logs */
} weft__tp_comm_t;

static inline weft__tp_comm_t *weft__tp_comm(struct weft__comm *comm)
{
    return (weft__tp_comm_t *)(void *)comm; /* its first member (lib/comm.h asserts it) */
}

/** Bytes of a transfer's handle: each transport keeps its request there
 * (the MPI transport asserts that an MPI_Request fits). */
#define WEFT__XFER_HANDLE_BYTES 8

/** One point-to-point transfer in flight. Zero-initialised = inactive. */
typedef struct weft__xfer {
    union {
        void *ptr;
        uint64_t u64;
        unsigned char bytes[WEFT__XFER_HANDLE_BYTES];
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

/* ---- the transport table (backends/transport.c) ------------------------- */
/**
 * One row per transport Weft knows, built in or not, in "auto"'s order of
 * preference. Adding a transport: its backend folder (a weft__transport_t and
 * the row's functions, with a stub when it is optional), one row here, and its
 * value in weft.h's weft_transport_t (public ABI).
 */
typedef struct weft__transport_row {
    weft_transport_t id;
    const char *name;                          /* WEFT_TRANSPORT's value, weft_transport_name */
    const char *label;                         /* for messages: "UCX", as in WEFT_TRANSPORT_UCX */
    const weft__transport_t *(*get)(void);     /* NULL result: not built in */
    /** Release process-wide state (weft_finalize, after every communicator
     * closed and the engine stopped); NULL: nothing to release. */
    void (*shutdown)(void);
    const char *missing;                       /* how to get it when not built in */
} weft__transport_row_t;

/** The rows; *n gets their number. Any thread. */
const weft__transport_row_t *weft__transport_table(int *n);
/**
 * The transport for a new communicator: `want`, or for WEFT_TRANSPORT_DEFAULT
 * `configured` (WEFT_TRANSPORT, parsed by weft_init), whose DEFAULT ("auto")
 * is the first row built in. NULL with *st set (and logged) when the
 * asked-for transport is not built or the value is unknown. Any thread.
 */
const weft__transport_t *weft__transport_choose(weft_transport_t want, weft_transport_t configured,
                                                weft_status_t *st);
/** The public value for a transport object. Any thread. */
weft_transport_t weft__transport_id(const weft__transport_t *tp);
/** A WEFT_TRANSPORT value: "auto" (and "") is WEFT_TRANSPORT_DEFAULT, the
 * others a row's name; WEFT_ERR_INVALID_ARG (not logged) for anything else. */
weft_status_t weft__transport_from_name(const char *name, weft_transport_t *out);
/** Shut down every transport built in (the rows' shutdown, on every rank,
 * used here or not: a shutdown may be collective over the world).
 * weft_finalize only, after every communicator closed and the engine
 * stopped; collective over the world. */
void weft__transport_shutdown_all(void);

/* The rows' functions (backends/mpi, backends/ucx). */
const weft__transport_t *weft__transport_mpi(void);
/** NULL when the UCX backend is not built. */
const weft__transport_t *weft__transport_ucx(void);
void weft__transport_ucx_shutdown(void);


#endif /* WEFT_TRANSPORT_H */
