/*
 * comm.h - a communicator as the core sees it (lib/comm.c) and the lookup of
 * its public handle.
 */
#ifndef WEFT_COMM_H
#define WEFT_COMM_H

#include <stdatomic.h>
#include <stddef.h>

#include "weft.h"
#include "global.h"
#include "handle.h"
#include "ctl.h"
#include "progress.h"
#include "transport.h"

/**
 * What the cost model knows of the machine a communicator runs on, identical
 * on every rank (agreed at creation). An algorithm's cost function returns
 * INFINITY when it cannot run on such a communicator (the hierarchical
 * algorithms on one node, the shared-memory path across nodes): the model
 * never picks it, and a forced choice of it gives way to the model's.
 */
typedef struct weft__cost {
    double alpha, beta, gamma;    /* transport: seconds per message, per byte; reduction s/B */
    /* the transport between two ranks of one node, when the comm spans
     * several nodes (0: alpha and beta describe every pair) */
    double alpha_node, beta_node;
    /* the node's shared-memory path (backends/shm): seconds per
     * synchronisation, per byte read from a peer (0: no path) */
    double alpha_shm, beta_shm;
    int nnodes;                   /* nodes the comm spans (0 or 1: one) */
    int ppn;                      /* ranks per node when every node has as many, else 0 */
} weft__cost_t;

/** A communicator's completion callback (weft_comm_set_on_complete):
 * immutable once published; replaced ones are kept until the comm is freed
 * (an issuing thread may still be reading one). */
typedef struct weft__comm_cb {
    weft_comm_callback_t fn;
    void *arg;
    struct weft__comm_cb *next; /* replaced ones */
} weft__comm_cb_t;

/* ---- communicators ------------------------------------------------------ */
typedef struct weft__comm {
    /* The transport's view (backends/transport.h) and the same fields by
     * name for the core: one storage, two spellings. */
    union {
        weft__tp_comm_t tpc;
        struct {
            void *tp_state;   /* owned by the transport */
            weft__ctl_t *ctl; /* control channel over a private MPI duplicate (lib/ctl.h) */
            int rank, size;
            int id;           /* small id for logs and traces */
        };
    };
    weft__ctl_t *ctl_check;   /* WEFT_CHECK_ARGS: a second duplicate for argument agreement */
    int pof2;                 /* largest power of two <= size */
    weft_stream_t stream;
    const weft__transport_t *tp;
    /* What every issue reads, after the line above: kept together so that
     * an issue after a device-style compute (caches cold) pulls few lines. */
    void *stream_state;       /* lib/stream.c: per-comm stream state (NULL: no stream) */
    _Atomic(weft__comm_cb_t *) on_complete; /* NULL: none (read at every nonblocking issue) */
    int sel_cache_on;
    _Atomic int force_algo[WEFT_COLL_COUNT];
    /* The last selection per collective (lib/select.c: the call's inputs and
     * the algorithm in one word, 0: none), kept once sel_cache_on is set at
     * the end of creation, when the inputs it stands for stop changing. */
    _Atomic uint64_t sel_last[WEFT_COLL_COUNT];
    int oversubscribed;       /* more ranks on this node than cores */
    /* Node topology (lib/topo.c), agreed at creation, read-only afterwards. */
    int node_local;           /* all ranks share one node (nnodes == 1) */
    int nnodes;               /* nodes the ranks span, numbered by their lowest rank */
    int node;                 /* this rank's node */
    int local_rank, local_size; /* on this rank's node */
    int nodes_uniform;        /* every node has local_size ranks */
    int *node_of;             /* rank -> its node */
    int *local_of;            /* rank -> its local rank on its node */
    int *by_node;             /* ranks ordered by (node, local rank) */
    int *node_first;          /* node -> index of its first rank in by_node (nnodes + 1) */
    weft__ctl_t *node_ctl;    /* the ranks of this rank's node */
    void *node_state;         /* backends/shm: the node's shared segment (NULL: none) */
    weft__cost_t cost;        /* alpha/beta/gamma agreed by all ranks */
    uint64_t handle;          /* the public handle (lib/comm.c, base/handle.h) */
    weft__comm_cb_t *cb_replaced;          /* under lib/comm.c's cb_lock */
    /* Written on every issue (caller) and completion (engine): a line of
     * their own, so that the read-mostly fields above stay shared in both
     * threads' caches. */
    _Alignas(64) _Atomic uint32_t seq; /* next operation tag (issue order) */
    _Atomic int inflight;     /* issued, not yet completed */
    _Atomic int error;        /* sticky weft_status_t, 0 if none */
    _Alignas(64) weft__task_queue_t queue; /* engine-private: its ops start in issue order */
} weft__comm_t;

struct weft_comm { weft__comm_t c; };

_Static_assert(offsetof(weft__comm_t, tpc) == 0, "weft__tp_comm() needs the view first");
_Static_assert(offsetof(weft__comm_t, tp_state) == offsetof(weft__comm_t, tpc.state) &&
               offsetof(weft__comm_t, ctl) == offsetof(weft__comm_t, tpc.ctl) &&
               offsetof(weft__comm_t, rank) == offsetof(weft__comm_t, tpc.rank) &&
               offsetof(weft__comm_t, size) == offsetof(weft__comm_t, tpc.size) &&
               offsetof(weft__comm_t, id) == offsetof(weft__comm_t, tpc.id),
               "weft__comm_t's named fields and weft__tp_comm_t disagree");

/**
 * Read the transport weft_comm_create_ex's params ask for (*want; DEFAULT
 * without params): WEFT_ERR_INVALID_ARG for a params struct too small to be
 * one. Any thread.
 */
weft_status_t weft__comm_params(const weft_comm_params_t *params, weft_transport_t *want);
/**
 * Create a communicator over ctl, a private duplicate that it owns from here
 * on (freed on failure), on the transport `want` (DEFAULT: WEFT_TRANSPORT's
 * choice). Collective over ctl. Caller thread, after weft_init.
 */
weft_status_t weft__comm_create(weft__ctl_t *ctl, weft_stream_t stream, weft_transport_t want,
                                weft_comm_t *out);

/* weft__comm_get: the communicator behind a public handle (below, after weft__is_init). */
/** Free the halo plans still alive (lib/halo.c). weft_finalize, engine stopped. */
void weft__halo_fini(void);

/** Free communicators the user did not destroy (weft_finalize). */
void weft__comm_free_all(void);

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


#endif /* WEFT_COMM_H */
