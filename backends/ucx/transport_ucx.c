/*
 * transport_ucx.c - Weft's point-to-point transport over UCP tag matching.
 *
 * The host algorithms of lib/coll/ move bytes through a weft__transport_t.
 * This one drives the network through UCX directly: one UCP context and one
 * worker per process (created lazily by the first comm_open), one endpoint
 * per peer process shared by the communicators (ucx_peer_t), and
 * ucp_tag_send_nbx / ucp_tag_recv_nbx with a 64-bit tag that names the
 * communicator, the source rank and the 32-bit Weft tag. Design notes: doc/ucx.md.
 *
 * Tag layout (most significant bit first):
 *
 *     63           52 51                 32 31                          0
 *     +--------------+---------------------+-----------------------------+
 *     | comm id (12) | source rank (20)    | Weft tag (32)               |
 *     +--------------+---------------------+-----------------------------+
 *
 * Receives match the full 64 bits (no wildcards). UCP matches on the
 * receiving worker only, so the comm id must be unique among the live
 * communicators of each process; comm_open agrees on an id that is free on
 * every member and not reused sooner than necessary (see ucx_comm_open).
 *
 * Threading. The worker is created with UCS_THREAD_MODE_SERIALIZED and every
 * use of it is serialised by the engine's progress lock: the data path
 * (isend, irecv, testall, cancel, progress) is engine side and runs under it
 * already, and the user-thread paths that touch the worker (endpoint creation
 * and close, progress while a communicator closes) take it with
 * weft__engine_lock. The data path thus takes no lock of its own (it took a
 * mutex per call before: lock and unlock were 19% of a rank's time in an
 * 8-byte ping-pong). g_lock only serialises creating and destroying the
 * context and worker. Control-channel (MPI) calls are never made while either
 * lock is held.
 *
 * Includes: transport.h (the interface), lib/ctl.h (the control channel for
 * comm_open/close's collectives), progress/progress.h (the progress lock and
 * hook), base/ headers.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ucp/api/ucp.h>

#include "ctl.h"
#include "log.h"
#include "progress.h"
#include "transport.h"

#define UCX_ID_BITS 12
#define UCX_RANK_BITS 20
#define UCX_MAX_IDS (1u << UCX_ID_BITS)        /* live communicators per process */
#define UCX_MAX_RANKS (1u << UCX_RANK_BITS)    /* ranks per communicator */
#define UCX_TAG_MASK_FULL UINT64_MAX

/* A close not finished in this many seconds is left to UCX (peer gone). */
#define UCX_CLOSE_TIMEOUT_S 10.0
/* A cancelled transfer not released in this many seconds is abandoned to UCX. */
#define UCX_CANCEL_TIMEOUT_S 2.0

/* Per-communicator state (weft__tp_comm(comm)->state). */
typedef struct ucx_comm {
    uint32_t id;     /* agreed comm id, < UCX_MAX_IDS */
    int size;
    ucp_ep_h eps[];  /* one per rank (our own rank included: loopback); shared */
} ucx_comm_t;

/*
 * Endpoints: one per peer worker, shared by every communicator that includes
 * that peer. UCX pairs the two sides' endpoints of a pair of workers in
 * creation order; with an endpoint per communicator, two
 * communicators created concurrently by different threads could pair
 * crosswise (this side's endpoint of X with the peer's endpoint of Y), and
 * closing X's endpoints then cancelled Y's requests ("Request canceled").
 * An endpoint stays open, even with no communicator using it, until the
 * worker is shut down (weft_finalize): closing it when the last communicator
 * goes would race with another thread creating a communicator that needs it
 * again, in an order that may differ between the two processes. There is
 * at most one per peer process, so they do not accumulate. Guarded by the
 * progress lock (weft__engine_lock), like every use of the worker; linear
 * search, run at communicator creation only (p ranks x the peers known: the
 * engine waits for the lock meanwhile).
 */
typedef struct ucx_peer {
    unsigned char *addr; /* the peer worker's address (the key) */
    size_t len;
    ucp_ep_h ep;
} ucx_peer_t;

/* ---- process-wide state -------------------------------------------------- */
/* g_lock serialises creating and destroying g_context/g_worker/g_addr. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static ucp_context_h g_context;
static ucp_worker_h g_worker;
static ucp_address_t *g_addr;
static size_t g_addr_len;
static int g_init_failed;        /* 1 after a failed init: do not retry every comm */
static ucp_datatype_t g_dt;      /* generic datatype over weft__xfer_dt_t (isend_dt) */
static int g_dt_ok;              /* g_dt exists (with g_worker) */
/* Events processed by the worker progress of testall calls since the last
 * ucx_progress, -1 if none progressed it (engine side, under the progress
 * lock like every use of the worker). */
static int g_tested_events = -1;
/* Set (release) once g_worker is usable, cleared before it is destroyed: the
 * progress hook reads g_worker only after seeing it (acquire). */
static _Atomic int g_ready;

static int ucx_progress(void *unused);

/* The shared endpoints (see ucx_peer_t), under the progress lock. */
static ucx_peer_t *g_peers;
static size_t g_npeers, g_cap_peers;
static void close_endpoints(void);
static void progress_worker(void *unused);

/* g_id_lock guards the table of comm ids in use in this process. */
static pthread_mutex_t g_id_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char g_id_used[UCX_MAX_IDS];
static uint64_t g_id_next; /* next virtual comm id (see ucx_comm_open) */

/* A byte to point at for zero-length messages with a NULL buffer. */
static unsigned char g_zero_byte;

static inline uint64_t ucx_tag(uint32_t id, int src, uint32_t tag)
{
    return ((uint64_t)id << (64 - UCX_ID_BITS)) | ((uint64_t)(uint32_t)src << 32) |
           (uint64_t)tag;
}

/* Log a failed UCX call once, where it is found. Any thread. */
static weft_status_t ucx_error(ucs_status_t s, const char *what)
{
    WEFT__ERROR("UCX transport: %s failed: %s", what, ucs_status_string(s));
    return WEFT_ERR_UCX;
}

/* ---- the generic datatype: UCX packs a weft__xfer_dt_t itself ------------- */
/* The "buffer" UCX is given is the descriptor; count is 1. UCX calls these
 * from inside ucp_tag_send_nbx / ucp_worker_progress, engine side. */
static void *dt_start_pack(void *context, const void *buffer, size_t count)
{
    WEFT__UNUSED(context);
    WEFT__UNUSED(count);
    return (void *)buffer;
}

static void *dt_start_unpack(void *context, void *buffer, size_t count)
{
    WEFT__UNUSED(context);
    WEFT__UNUSED(count);
    return buffer;
}

static size_t dt_packed_size(void *state) { return ((const weft__xfer_dt_t *)state)->bytes; }

static size_t dt_pack(void *state, size_t offset, void *dest, size_t max_length)
{
    const weft__xfer_dt_t *d = state;
    return d->pack(d, offset, dest, max_length);
}

static ucs_status_t dt_unpack(void *state, size_t offset, const void *src, size_t length)
{
    const weft__xfer_dt_t *d = state;
    if (offset > d->bytes || length > d->bytes - offset) return UCS_ERR_MESSAGE_TRUNCATED;
    d->unpack(d, offset, src, length);
    return UCS_OK;
}

static void dt_finish(void *state) { WEFT__UNUSED(state); }

static const ucp_generic_dt_ops_t g_dt_ops = {
    .start_pack = dt_start_pack,
    .start_unpack = dt_start_unpack,
    .packed_size = dt_packed_size,
    .pack = dt_pack,
    .unpack = dt_unpack,
    .finish = dt_finish,
};

/* ---- context and worker -------------------------------------------------- */
/**
 * Create the UCP context and worker unless they exist. Any thread (takes
 * g_lock). Returns WEFT_ERR_UCX, logged, if UCX cannot start here.
 */
static weft_status_t ucx_global_init(void)
{
    weft_status_t st = WEFT_SUCCESS;
    ucs_status_t s;
    ucp_config_t *config = NULL;
    ucp_context_h context = NULL;
    ucp_worker_h worker = NULL;
    ucp_address_t *addr = NULL;
    size_t addr_len = 0;

    pthread_mutex_lock(&g_lock);
    if (g_worker != NULL) goto out_unlock;
    if (g_init_failed) {
        st = WEFT_ERR_UCX; /* logged by the first attempt */
        goto out_unlock;
    }
    /* The engine drives the worker through this hook from now on (it does
     * nothing until g_ready is set below). */
    st = weft__progress_hook_add(ucx_progress, NULL);
    if (st != WEFT_SUCCESS) {
        WEFT__ERROR("UCX transport: cannot register its progress hook");
        goto out_failed;
    }

    /* Prefix WEFT: WEFT_UCX_<NAME> tunes this context only and wins over
     * UCX_<NAME>, which MPICH's context (over UCX here) reads as well. */
    s = ucp_config_read("WEFT", NULL, &config);
    if (s != UCS_OK) {
        st = ucx_error(s, "ucp_config_read");
        goto out_failed;
    }
    ucp_params_t params;
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                        UCP_PARAM_FIELD_NAME;
    params.features = UCP_FEATURE_TAG;
    params.mt_workers_shared = 0;
    params.name = "weft";
    s = ucp_init(&params, config, &context);
    ucp_config_release(config);
    if (s != UCS_OK) {
        st = ucx_error(s, "ucp_init");
        goto out_failed;
    }

    ucp_worker_params_t wparams;
    memset(&wparams, 0, sizeof(wparams));
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    s = ucp_worker_create(context, &wparams, &worker);
    if (s != UCS_OK) {
        st = ucx_error(s, "ucp_worker_create");
        goto out_cleanup_context;
    }
    s = ucp_worker_get_address(worker, &addr, &addr_len);
    if (s != UCS_OK) {
        st = ucx_error(s, "ucp_worker_get_address");
        goto out_cleanup_worker;
    }

    s = ucp_dt_create_generic(&g_dt_ops, NULL, &g_dt);
    if (s != UCS_OK) {
        st = ucx_error(s, "ucp_dt_create_generic");
        ucp_worker_release_address(worker, addr);
        goto out_cleanup_worker;
    }
    g_dt_ok = 1;

    g_context = context;
    g_worker = worker;
    g_addr = addr;
    g_addr_len = addr_len;
    atomic_store_explicit(&g_ready, 1, memory_order_release);
    WEFT__DEBUG("UCX transport: worker ready (%zu-byte address)", addr_len);
    goto out_unlock;

out_cleanup_worker:
    ucp_worker_destroy(worker);
out_cleanup_context:
    ucp_cleanup(context);
out_failed:
    g_init_failed = 1;
out_unlock:
    pthread_mutex_unlock(&g_lock);
    return st;
}

/**
 * Close the endpoints, wait for every rank to have closed its own, then
 * destroy the worker and the context (weft_finalize, after every
 * communicator was closed and the engine stopped). Collective over the
 * world: every rank calls it, whether it used UCX or not
 * (weft__transport_shutdown_all). Thread: the finalising thread, nothing
 * else inside Weft. Safe to call when never initialised; a later weft_init
 * may open UCX again.
 */
void weft__transport_ucx_shutdown(void)
{
    pthread_mutex_lock(&g_lock);
    atomic_store_explicit(&g_ready, 0, memory_order_relaxed);
    weft__progress_hook_remove(ucx_progress, NULL);
    if (g_worker != NULL) close_endpoints();
    /* No worker goes before every rank's closes ended: over TCP a close
     * flushes the endpoint to its peer, and fails ("Endpoint timeout", logged
     * by UCX and here) when the peer's worker, and its sockets, are gone.
     * The barrier progresses our worker meanwhile, for the peers' flushes. */
    weft__ctl_t *world = weft__ctl_world();
    if (world != NULL && weft__ctl_barrier(world, progress_worker, NULL) != WEFT_SUCCESS)
        WEFT__ERROR("UCX transport: the closing barrier of the world failed");
    if (g_dt_ok) ucp_dt_destroy(g_dt);
    g_dt_ok = 0;
    if (g_addr != NULL) ucp_worker_release_address(g_worker, g_addr);
    if (g_worker != NULL) ucp_worker_destroy(g_worker);
    if (g_context != NULL) ucp_cleanup(g_context);
    g_addr = NULL;
    g_addr_len = 0;
    g_worker = NULL;
    g_context = NULL;
    g_init_failed = 0;
    pthread_mutex_unlock(&g_lock);

    pthread_mutex_lock(&g_id_lock);
    memset(g_id_used, 0, sizeof(g_id_used));
    g_id_next = 0;
    pthread_mutex_unlock(&g_id_lock);
}

/* ---- helpers for comm_open / comm_close (caller thread, collective) ---- */
/**
 * Every rank's `local` status in, the first failure of any rank out (the same
 * on every rank), so that a failure on one rank fails the collective call
 * everywhere instead of leaving the others waiting.
 */
static weft_status_t agree_status(weft__ctl_t *ctl, weft_status_t local, const char *what)
{
    int mine = (int)local, all = 0;
    WEFT__CHECK(weft__ctl_allreduce(ctl, &mine, &all, 1, WEFT__CTL_INT, WEFT__CTL_MIN));
    if (all < 0 && mine >= 0) {
        WEFT__ERROR("UCX transport: %s failed on another rank (%s)", what,
                    weft_status_name((weft_status_t)all));
    }
    return all < 0 ? (weft_status_t)all : WEFT_SUCCESS;
}

/*
 * Comm ids are drawn from a per-process counter that only grows ("virtual
 * ids"); the tag carries the virtual id modulo UCX_MAX_IDS. An id is thus
 * reused only after UCX_MAX_IDS further communicators, which keeps a message
 * left behind by a failed operation on a destroyed communicator from
 * matching a receive of a newer one for as long as possible.
 */
#define UCX_NO_ID UINT64_MAX

/* Smallest virtual id >= max(from, counter) whose slot is free here,
 * UCX_NO_ID if every slot is taken. */
static uint64_t id_lowest_free(uint64_t from)
{
    uint64_t v, found = UCX_NO_ID;
    pthread_mutex_lock(&g_id_lock);
    if (from < g_id_next) from = g_id_next;
    for (v = from; v < from + UCX_MAX_IDS; v++) {
        if (!g_id_used[v % UCX_MAX_IDS]) {
            found = v;
            break;
        }
    }
    pthread_mutex_unlock(&g_id_lock);
    return found;
}

/* Mark the slot of virtual id v used if it is free; 1 on success. */
static int id_try_claim(uint64_t v)
{
    int ok = 0;
    if (v == UCX_NO_ID) return 0;
    pthread_mutex_lock(&g_id_lock);
    if (!g_id_used[v % UCX_MAX_IDS]) {
        g_id_used[v % UCX_MAX_IDS] = 1;
        if (g_id_next <= v) g_id_next = v + 1;
        ok = 1;
    }
    pthread_mutex_unlock(&g_id_lock);
    return ok;
}

static void id_release(uint32_t id)
{
    if (id >= UCX_MAX_IDS) return;
    pthread_mutex_lock(&g_id_lock);
    g_id_used[id] = 0;
    pthread_mutex_unlock(&g_id_lock);
}

/**
 * Close every shared endpoint and empty the table (weft_finalize, before the
 * worker is destroyed). Every communicator is closed, so nothing is in
 * flight; the flush still talks to the peer over TCP, so the peers keep
 * their workers until every rank's closes ended (the world barrier in
 * weft__transport_ucx_shutdown). Force mode would need
 * UCP_ERR_HANDLING_MODE_PEER endpoints: UCX answers it with "Invalid
 * parameter" here. Progresses the worker until the
 * closes completed; one still pending after UCX_CLOSE_TIMEOUT_S is left to the worker's
 * destruction and reported. Thread: the finalising thread (takes the
 * progress lock per pass, like every use of the worker). Errors are logged.
 */
static void close_endpoints(void)
{
    ucp_request_param_t prm;
    memset(&prm, 0, sizeof(prm)); /* flush mode */
    /* Without room to watch the closes, UCX releases them when they end. */
    void **reqs = calloc(g_npeers ? g_npeers : 1, sizeof(*reqs));
    size_t pending = 0;
    weft__engine_lock();
    for (size_t i = 0; i < g_npeers; i++) {
        ucs_status_ptr_t r = ucp_ep_close_nbx(g_peers[i].ep, &prm);
        free(g_peers[i].addr);
        if (UCS_PTR_IS_ERR(r)) (void)ucx_error(UCS_PTR_STATUS(r), "ucp_ep_close_nbx");
        else if (r != NULL && reqs == NULL) ucp_request_free(r);
        else if (r != NULL) reqs[pending++] = r;
    }
    weft__engine_unlock();

    const double t0 = weft__now();
    while (pending > 0) {
        weft__engine_lock();
        ucp_worker_progress(g_worker);
        for (size_t i = 0; i < pending;) {
            ucs_status_t s = ucp_request_check_status(reqs[i]);
            if (s == UCS_INPROGRESS) {
                i++;
                continue;
            }
            if (s != UCS_OK) (void)ucx_error(s, "endpoint close");
            ucp_request_free(reqs[i]);
            reqs[i] = reqs[--pending];
        }
        if (pending > 0 && weft__now() - t0 > UCX_CLOSE_TIMEOUT_S) {
            WEFT__ERROR("UCX transport: %zu endpoint close(s) did not finish in %.0f s; left "
                        "to the worker's destruction", pending, UCX_CLOSE_TIMEOUT_S);
            for (size_t i = 0; i < pending; i++) ucp_request_free(reqs[i]);
            pending = 0;
        }
        weft__engine_unlock();
        if (pending > 0) sched_yield();
    }
    free(reqs);
    free(g_peers);
    g_peers = NULL;
    g_npeers = g_cap_peers = 0;
}

/**
 * The shared endpoint to the worker at addr[0..len): the existing one, or a
 * new one added to the table. Progress lock held.
 */
static weft_status_t peer_acquire(const unsigned char *addr, size_t len, int rank, ucp_ep_h *ep)
{
    for (size_t i = 0; i < g_npeers; i++) {
        if (g_peers[i].len == len && memcmp(g_peers[i].addr, addr, len) == 0) {
            *ep = g_peers[i].ep;
            return WEFT_SUCCESS;
        }
    }
    if (g_npeers == g_cap_peers) {
        size_t cap = g_cap_peers ? 2 * g_cap_peers : 16;
        ucx_peer_t *t = realloc(g_peers, cap * sizeof(*t));
        if (t == NULL) return WEFT_ERR_NO_MEMORY;
        g_peers = t;
        g_cap_peers = cap;
    }
    unsigned char *key = malloc(len ? len : 1);
    if (key == NULL) return WEFT_ERR_NO_MEMORY;
    memcpy(key, addr, len);
    ucp_ep_params_t eprm;
    memset(&eprm, 0, sizeof(eprm));
    eprm.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    eprm.address = (const ucp_address_t *)addr;
    eprm.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    ucs_status_t s = ucp_ep_create(g_worker, &eprm, ep);
    if (s != UCS_OK) {
        free(key);
        *ep = NULL;
        WEFT__ERROR("UCX transport: ucp_ep_create to rank %d failed: %s", rank,
                    ucs_status_string(s));
        return WEFT_ERR_UCX;
    }
    g_peers[g_npeers++] = (ucx_peer_t){.addr = key, .len = len, .ep = *ep};
    return WEFT_SUCCESS;
}

/**
 * Progress our worker (weft__ctl_barrier's poll while a communicator
 * closes), so that a peer that needs a protocol answer of ours (a rendezvous
 * acknowledgement) gets it while we wait. Caller thread.
 */
static void progress_worker(void *unused)
{
    WEFT__UNUSED(unused);
    weft__engine_lock();
    if (g_worker != NULL) ucp_worker_progress(g_worker);
    weft__engine_unlock();
}

/* ---- communicator open / close ------------------------------------------- */
/**
 * Open the UCX side of a communicator: start UCX if needed, agree on a comm
 * id, exchange worker addresses over the comm's control channel (lib/ctl.h)
 * and create an endpoint to every rank. Four collectives on it (MPI
 * collectives, which the channel runs, are slow on an
 * oversubscribed node, so they are merged):
 *   1. allreduce MAX of (worst start-up status, comm id proposal, longest
 *      worker address): each member proposes its lowest free virtual id;
 *   2. allreduce MIN of (claimed the agreed id, allocated the address
 *      table): if a member could not claim the id (another thread of that
 *      process took it meanwhile), all release it and repeat 1-2 above it,
 *      so communicators created concurrently never share an id;
 *   3. allgather of fixed-size records (length + address);
 *   4. allreduce of the endpoint-creation status.
 * Every rank returns the same status; on failure nothing is left open.
 * Collective over the comm. Thread: the thread in weft_comm_create (any user
 * thread); may run while the engine progresses other communicators
 * (serialised by the progress lock).
 */
static weft_status_t ucx_comm_open(struct weft__comm *comm)
{
    weft_status_t st = WEFT_SUCCESS, lst;
    ucx_comm_t *uc = NULL;
    unsigned char *recs = NULL;
    uint32_t id = UCX_MAX_IDS;
    size_t rec = 0;
    weft__tp_comm_t *t = weft__tp_comm(comm);
    const int p = t->size;

    if ((unsigned)p > UCX_MAX_RANKS) {
        /* The same on every rank: no need to agree. */
        WEFT__ERROR("UCX transport: communicator of %d ranks exceeds the %u ranks its tags "
                    "can name (use WEFT_TRANSPORT=mpi)", p, UCX_MAX_RANKS);
        return WEFT_ERR_UNSUPPORTED;
    }
    lst = ucx_global_init();
    if (lst == WEFT_SUCCESS) {
        uc = calloc(1, sizeof(*uc) + (size_t)p * sizeof(ucp_ep_h));
        if (uc == NULL) lst = WEFT_ERR_NO_MEMORY;
    }
    /* g_addr is immutable while communicators are open (read after init). */
    const uint64_t mylen = lst == WEFT_SUCCESS ? (uint64_t)g_addr_len : 0;

    uint64_t from = 0;
    for (;;) {
        /* 1: status, id proposal, longest address */
        uint64_t in1[3] = {(uint64_t)(-(int64_t)lst),
                           lst == WEFT_SUCCESS ? id_lowest_free(from) : 0, mylen};
        uint64_t out1[3] = {0, 0, 0};
        WEFT__CHECK_GOTO(weft__ctl_allreduce(t->ctl, in1, out1, 3, WEFT__CTL_U64, WEFT__CTL_MAX),
                         st, out);
        if (out1[0] != 0) {
            st = (weft_status_t)(-(int64_t)out1[0]);
            if (lst == WEFT_SUCCESS)
                WEFT__ERROR("UCX transport: start-up failed on another rank (%s)",
                            weft_status_name(st));
            goto out;
        }
        if (out1[1] == UCX_NO_ID) {
            WEFT__ERROR("UCX transport: no free communicator id (at most %u live UCX "
                        "communicators per process)", UCX_MAX_IDS);
            st = WEFT_ERR_UNSUPPORTED;
            goto out;
        }
        if (out1[2] > (uint64_t)(INT32_MAX / 2) / (uint64_t)p) {
            WEFT__ERROR("UCX transport: worker addresses too large to exchange (%llu bytes)",
                        (unsigned long long)out1[2]);
            st = WEFT_ERR_UNSUPPORTED;
            goto out;
        }
        /* 2: claimed and allocated everywhere? */
        if (recs == NULL) {
            rec = sizeof(uint64_t) + (((size_t)out1[2] + 7) & ~(size_t)7);
            recs = malloc((size_t)p * rec);
        }
        int claimed = id_try_claim(out1[1]);
        int in2[2] = {claimed, recs != NULL}, out2[2] = {0, 0};
        weft_status_t ast = weft__ctl_allreduce(t->ctl, in2, out2, 2, WEFT__CTL_INT, WEFT__CTL_MIN);
        if (ast != WEFT_SUCCESS) {
            if (claimed) id_release((uint32_t)(out1[1] % UCX_MAX_IDS));
            WEFT__ERROR("UCX transport: the agreement on a comm id failed");
            st = ast;
            goto out;
        }
        if (out2[0] && out2[1]) {
            id = (uint32_t)(out1[1] % UCX_MAX_IDS);
            break;
        }
        if (claimed) id_release((uint32_t)(out1[1] % UCX_MAX_IDS));
        if (!out2[1]) {
            WEFT__ERROR("UCX transport: cannot allocate the address table (%zu bytes) on %s",
                        (size_t)p * rec, recs == NULL ? "this rank" : "another rank");
            st = WEFT_ERR_NO_MEMORY;
            goto out;
        }
        from = out1[1] + 1;
    }

    /* 3: every rank's worker address, one fixed-size record each */
    unsigned char *mine = recs + (size_t)weft__tp_comm(comm)->rank * rec;
    memcpy(mine, &mylen, sizeof(mylen));
    memcpy(mine + sizeof(uint64_t), g_addr, (size_t)mylen);
    WEFT__CHECK_GOTO(weft__ctl_allgather(t->ctl, NULL, recs, rec), st, out);

    /* 4: endpoints, under the progress lock (the engine may be progressing
     * the worker) */
    uc->id = id;
    uc->size = p;
    lst = WEFT_SUCCESS;
    weft__engine_lock();
    for (int i = 0; i < p && lst == WEFT_SUCCESS; i++) {
        const unsigned char *r = recs + (size_t)i * rec;
        uint64_t len;
        memcpy(&len, r, sizeof(len));
        lst = peer_acquire(r + sizeof(uint64_t), (size_t)len, i, &uc->eps[i]);
    }
    weft__engine_unlock();
    /* On failure the endpoints made stay in the table for a later attempt. */
    st = agree_status(t->ctl, lst, "endpoint creation");
    if (st < 0) goto out;

    weft__tp_comm(comm)->state = uc;
    uc = NULL;
    WEFT__DEBUG("UCX transport: comm %d open as UCX comm id %u (%d ranks)", weft__tp_comm(comm)->id,
                (unsigned)id, p);
out:
    if (st < 0 && id < UCX_MAX_IDS) id_release(id);
    free(uc);
    free(recs);
    return st;
}

/**
 * Close the UCX side: every rank waits, progressing the worker (a peer may
 * still need a protocol answer of ours to finish its last transfer), until
 * all ranks stopped using the communicator, then frees the id and the state
 * (the shared endpoints stay open: see ucx_peer_t).
 * Collective over the comm. Thread: the thread in weft_comm_destroy or
 * weft_finalize, after every op on comm completed. Errors are logged.
 */
static void ucx_comm_close(struct weft__comm *comm)
{
    ucx_comm_t *uc = weft__tp_comm(comm)->state;
    if (uc == NULL) return;
    if (weft__ctl_barrier(weft__tp_comm(comm)->ctl, progress_worker, NULL) != WEFT_SUCCESS)
        WEFT__ERROR("UCX transport: the closing barrier of comm %d failed",
                    weft__tp_comm(comm)->id);
    id_release(uc->id);
    free(uc);
    weft__tp_comm(comm)->state = NULL;
}

/* ---- data path (engine side) ----------------------------------------------- */
/* The comm's UCX state if peer is one of its ranks; NULL (logged) otherwise. */
static ucx_comm_t *peer_comm(struct weft__comm *comm, int peer, const char *what)
{
    ucx_comm_t *uc = weft__tp_comm(comm)->state;
    if (WEFT__LIKELY(uc != NULL && peer >= 0 && peer < uc->size)) return uc;
    WEFT__ERROR("UCX transport: %s invalid rank %d on comm %d", what, peer, weft__tp_comm(comm)->id);
    return NULL;
}

/* Shared tail of the four posting calls: record UCX's answer in x. */
static weft_status_t posted(ucs_status_ptr_t r, weft__xfer_t *x, const char *what, size_t bytes,
                            int peer, uint32_t tag)
{
    if (r == NULL) { /* completed at once */
        x->h.ptr = NULL;
        x->active = 0;
        return WEFT_SUCCESS;
    }
    if (UCS_PTR_IS_ERR(r)) {
        WEFT__ERROR("UCX transport: %s(%zu bytes, rank %d, tag %u) failed: %s", what, bytes, peer,
                    (unsigned)tag, ucs_status_string(UCS_PTR_STATUS(r)));
        return WEFT_ERR_UCX;
    }
    x->h.ptr = r;
    x->active = 1;
    return WEFT_SUCCESS;
}

/**
 * Post a tagged send of `bytes` bytes to `peer`. Immediate completion leaves
 * x inactive. Engine side only.
 */
static weft_status_t ucx_isend(struct weft__comm *comm, const void *buf, size_t bytes, int peer,
                               uint32_t tag, weft__xfer_t *x)
{
    ucx_comm_t *uc = peer_comm(comm, peer, "send to");
    if (WEFT__UNLIKELY(uc == NULL)) return WEFT_ERR_INVALID_ARG;
    ucp_request_param_t prm;
    /* FAST_CMPL: UCX then keeps a buffered eager protocol up to its local
     * rendezvous threshold (UCX_RNDV_SEND_NBR_THRESH) instead of switching
     * to a rendezvous above UCX_RNDV_THRESH. */
    prm.op_attr_mask = x->eager ? UCP_OP_ATTR_FLAG_FAST_CMPL : 0;
    if (buf == NULL) buf = &g_zero_byte;

    ucs_status_ptr_t r = ucp_tag_send_nbx(uc->eps[peer], buf, bytes,
                                          ucx_tag(uc->id, weft__tp_comm(comm)->rank, tag), &prm);
    return posted(r, x, "ucp_tag_send_nbx", bytes, peer, tag);
}

/**
 * Post a tagged receive of at most `bytes` bytes from `peer` (full tag mask).
 * Engine side only.
 */
static weft_status_t ucx_irecv(struct weft__comm *comm, void *buf, size_t bytes, int peer,
                               uint32_t tag, weft__xfer_t *x)
{
    ucx_comm_t *uc = peer_comm(comm, peer, "receive from");
    if (WEFT__UNLIKELY(uc == NULL)) return WEFT_ERR_INVALID_ARG;
    ucp_request_param_t prm;
    ucp_tag_recv_info_t info;
    /* With somewhere to put the receive's info, UCX may complete a receive
     * whose message already arrived at once (NULL, no request to free). */
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_RECV_INFO;
    prm.recv_info.tag_info = &info;
    if (buf == NULL) buf = &g_zero_byte;

    ucs_status_ptr_t r = ucp_tag_recv_nbx(g_worker, buf, bytes, ucx_tag(uc->id, peer, tag),
                                          UCX_TAG_MASK_FULL, &prm);
    return posted(r, x, "ucp_tag_recv_nbx", bytes, peer, tag);
}

/** Send a weft__xfer_dt_t message: UCX packs it into its own fragments through
 * g_dt (eager hint as in ucx_isend). Engine side only. */
static weft_status_t ucx_isend_dt(struct weft__comm *comm, const weft__xfer_dt_t *d, int peer,
                                  uint32_t tag, weft__xfer_t *x)
{
    ucx_comm_t *uc = peer_comm(comm, peer, "send to");
    if (WEFT__UNLIKELY(uc == NULL)) return WEFT_ERR_INVALID_ARG;
    ucp_request_param_t prm;
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | (x->eager ? UCP_OP_ATTR_FLAG_FAST_CMPL : 0);
    prm.datatype = g_dt;
    ucs_status_ptr_t r = ucp_tag_send_nbx(uc->eps[peer], d, 1, ucx_tag(uc->id, weft__tp_comm(comm)->rank, tag),
                                          &prm);
    return posted(r, x, "ucp_tag_send_nbx (packed)", d->bytes, peer, tag);
}

/** Receive a weft__xfer_dt_t message: UCX unpacks each fragment in place.
 * Engine side only. */
static weft_status_t ucx_irecv_dt(struct weft__comm *comm, const weft__xfer_dt_t *d, int peer,
                                  uint32_t tag, weft__xfer_t *x)
{
    ucx_comm_t *uc = peer_comm(comm, peer, "receive from");
    if (WEFT__UNLIKELY(uc == NULL)) return WEFT_ERR_INVALID_ARG;
    ucp_request_param_t prm;
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
    prm.datatype = g_dt;
    ucs_status_ptr_t r = ucp_tag_recv_nbx(g_worker, (void *)d, 1, ucx_tag(uc->id, peer, tag),
                                          UCX_TAG_MASK_FULL, &prm);
    return posted(r, x, "ucp_tag_recv_nbx (packed)", d->bytes, peer, tag);
}

/* Check active transfers; returns how many are still running. Engine side. */
static int check_xfers(struct weft__comm *comm, weft__xfer_t *x, int n, weft_status_t *st)
{
    int running = 0;
    for (int i = 0; i < n; i++) {
        if (!x[i].active) continue;
        ucs_status_t s = ucp_request_check_status(x[i].h.ptr);
        if (s == UCS_INPROGRESS) {
            running++;
            continue;
        }
        ucp_request_free(x[i].h.ptr);
        x[i].h.ptr = NULL;
        x[i].active = 0;
        if (s != UCS_OK && *st == WEFT_SUCCESS) {
            WEFT__ERROR("UCX transport: transfer on comm %d failed: %s%s", weft__tp_comm(comm)->id,
                        ucs_status_string(s),
                        s == UCS_ERR_MESSAGE_TRUNCATED ? " (message larger than the receive "
                                                         "buffer)" : "");
            *st = WEFT_ERR_UCX;
        }
    }
    return running;
}

/**
 * Test n transfers: frees the UCP requests of completed ones (active = 0),
 * progresses the worker once if some are still running, *done = 1 when none
 * is. Returns WEFT_ERR_UCX if one failed (the others are still checked).
 * Engine side only.
 */
static weft_status_t ucx_testall(struct weft__comm *comm, weft__xfer_t *x, int n, int *done)
{
    weft_status_t st = WEFT_SUCCESS;
    int running = check_xfers(comm, x, n, &st);
    if (running > 0) {
        const int ev = (int)ucp_worker_progress(g_worker);
        g_tested_events = (g_tested_events > 0 ? g_tested_events : 0) + ev;
        if (ev > 0) running = check_xfers(comm, x, n, &st);
    }
    *done = running == 0;
    return st;
}

/**
 * Abandon an active transfer: ucp_request_cancel, then progress until UCX
 * released it (bounded: a rendezvous already under way with a dead peer may
 * never finish; the request is then left to UCX). Engine side only.
 */
static void ucx_cancel(struct weft__comm *comm, weft__xfer_t *x)
{
    if (!x->active || x->h.ptr == NULL) {
        x->active = 0;
        return;
    }
    void *r = x->h.ptr;
    double t0 = 0;
    ucp_request_cancel(g_worker, r);
    for (;;) {
        if (ucp_request_check_status(r) != UCS_INPROGRESS) break;
        ucp_worker_progress(g_worker);
        if (ucp_request_check_status(r) != UCS_INPROGRESS) break;
        if (t0 == 0) {
            t0 = weft__now();
        } else if (weft__now() - t0 > UCX_CANCEL_TIMEOUT_S) {
            WEFT__WARN("UCX transport: a cancelled transfer on comm %d was not released in "
                       "%.0f s; left to UCX", weft__tp_comm(comm)->id, UCX_CANCEL_TIMEOUT_S);
            break;
        }
    }
    ucp_request_free(r);
    x->h.ptr = NULL;
    x->active = 0;
}

/**
 * Progress hook: one ucp_worker_progress pass. Returns the number of events
 * processed (0 before the first UCX communicator). Engine side only.
 */
static int ucx_progress(void *unused)
{
    WEFT__UNUSED(unused);
    /* acquire: pairs with the release store in ucx_global_init. */
    if (!atomic_load_explicit(&g_ready, memory_order_acquire)) return 0;
    /* The engine calls this once per pass, after the ops' steps: a pass in
     * which some testall already progressed the worker needs no second
     * call (half the polling cost per pass while transfers are pending);
     * the events those calls processed count as the pass's work, so that a
     * pass that moved a transfer along is not taken for an idle one (the
     * waiter's hand-off budget and the engine's backoff count idle passes). */
    if (g_tested_events >= 0) {
        const int ev = g_tested_events;
        g_tested_events = -1;
        return ev;
    }
    return (int)ucp_worker_progress(g_worker);
}

static const weft__transport_t transport_ucx = {
    .name = "ucx",
    .comm_open = ucx_comm_open,
    .comm_close = ucx_comm_close,
    .isend = ucx_isend,
    .irecv = ucx_irecv,
    .isend_dt = ucx_isend_dt,
    .irecv_dt = ucx_irecv_dt,
    .testall = ucx_testall,
    .cancel = ucx_cancel,
    .poll_pause = 2,
};

/** The UCX transport (never NULL in a build with UCX). Any thread. */
const weft__transport_t *weft__transport_ucx(void) { return &transport_ucx; }
