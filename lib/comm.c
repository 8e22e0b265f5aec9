/* comm.c - communicators: creation over a control channel (the MPI
 * constructors are in lib/mpi_interop.c), split, queries, destruction. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "handle.h"
#include "node.h"
#include "topo.h"
#include "weft_internal.h"

/* Communicator handles: generation-checked (base/handle.h), so every entry
 * point refuses a destroyed communicator or one from before a weft_finalize
 * (WEFT_ERR_INVALID_COMM) instead of reading freed memory. */
weft__htab_t weft__comms = WEFT__HTAB_INITIALIZER;
static _Atomic int next_id;

/* Collective agreement: WEFT_SUCCESS only if every rank passes st == 0, so
 * that no rank goes on into a collective step another rank skipped. */
static weft_status_t agree(weft__comm_t *c, weft_status_t st)
{
    int ok = st == WEFT_SUCCESS, all = 0;
    WEFT__CHECK(weft__ctl_allreduce(c->ctl, &ok, &all, 1, WEFT__CTL_INT, WEFT__CTL_MIN));
    if (st != WEFT_SUCCESS) return st;
    return all ? WEFT_SUCCESS : WEFT_ERR_COMM_BROKEN;
}

/* Collective: agree (as above) on a rank's choice of transport, st being the
 * choice's status; a rank whose transport differs from another's gets
 * WEFT_ERR_INVALID_ARG, on every rank: the transports' comm_open steps are
 * different collectives and must not meet. */
static weft_status_t agree_transport(weft__comm_t *c, weft_status_t st)
{
    int id = st == WEFT_SUCCESS ? (int)weft__transport_id(c->tp) : 0;
    int v[3] = {st != WEFT_SUCCESS, id, -id}, all[3] = {0, 0, 0};
    WEFT__CHECK(weft__ctl_allreduce(c->ctl, v, all, 3, WEFT__CTL_INT, WEFT__CTL_MAX));
    if (all[0] != 0) return st != WEFT_SUCCESS ? st : WEFT_ERR_COMM_BROKEN;
    if (all[1] != -all[2]) {
        WEFT__ERROR("weft_comm_create_ex: ranks asked for different transports (this rank: %s)",
                    weft_transport_name((weft_transport_t)id));
        return WEFT_ERR_INVALID_ARG;
    }
    return WEFT_SUCCESS;
}

/* The node's shared-memory path (backends/shm) and its cost figures for the
 * selection: on a one-node comm among all its ranks (the shm algorithms);
 * on a comm that spans nodes of as many ranks each, two or more, among each
 * node's ranks (node_ctl), for the hierarchical allreduce's phases inside
 * the nodes. Every rank of the comm must then agree on whether the path is
 * there and on its figures (the selection is the same on every rank): the
 * nodes' opens are agreed over the whole comm, which has the path only if
 * every node opened it, with the slowest node's figures. Collective over
 * the comm (node_local, nodes_uniform and local_size are the same on every
 * rank). Caller thread of communicator creation. */
static weft_status_t open_node(weft__comm_t *c)
{
    const bool spans = !c->node_local;
    if (!weft__cfg.shm || (spans && !(c->nodes_uniform && c->local_size >= 2))) {
        c->cost.alpha_shm = c->cost.beta_shm = 0; /* no path (a tuning file's figures unused) */
        return WEFT_SUCCESS;
    }
    /* One rank: nothing to open. A tuning file's figures stay: the shm cost
     * is INFINITY for one rank anyway, and weft-info describes the node of
     * the file (a rule naming shm shows as the file's choice). */
    if (c->size < 2) return WEFT_SUCCESS;
    weft__node_t *n = NULL;
    /* The path's figures: a tuning file's (already in c->cost); with
     * WEFT_MEASURE=0 fixed ones, so that every run selects the same
     * algorithms (reproducible sums: a resumed training run must match the
     * uninterrupted one bit for bit); else measured as the path opens.
     * The fixed ones are this project's 2-core VM's, measured quietly. */
    weft__node_cost_t nc = {c->cost.alpha_shm, c->cost.beta_shm};
    if (nc.alpha <= 0 && !weft__cfg.measure) nc = (weft__node_cost_t){2e-7, 1.2e-10};
    weft_status_t st = weft__node_open(c->node_ctl, c->id, &n, &nc);
    if (spans) {
        /* over the whole comm: max of (failed, no path, alpha, beta) */
        double v[4] = {st != WEFT_SUCCESS, n == NULL, nc.alpha, nc.beta}, all[4] = {0, 0, 0, 0};
        weft_status_t ast = weft__ctl_allreduce(c->ctl, v, all, 4, WEFT__CTL_DOUBLE, WEFT__CTL_MAX);
        if (ast != WEFT_SUCCESS || all[0] != 0) {
            weft__node_close(&n);
            if (st != WEFT_SUCCESS) return st;
            return ast != WEFT_SUCCESS ? ast : WEFT_ERR_COMM_BROKEN;
        }
        if (all[1] != 0) { /* some node has no path: none has, for this comm */
            if (n != NULL)
                WEFT__DEBUG("comm %d: another node has no shared-memory path: not used", c->id);
            weft__node_close(&n);
        }
        nc.alpha = all[2];
        nc.beta = all[3];
    }
    WEFT__CHECK(st);
    c->node_state = n;
    if (n != NULL) {
        c->cost.alpha_shm = nc.alpha > 0 ? nc.alpha : 1e-9;
        c->cost.beta_shm = nc.beta;
    } else {
        c->cost.alpha_shm = c->cost.beta_shm = 0; /* no path: its algorithms cannot run */
    }
    return WEFT_SUCCESS;
}

weft_status_t weft__comm_params(const weft_comm_params_t *params, weft_transport_t *want)
{
    *want = WEFT_TRANSPORT_DEFAULT;
    if (params != NULL && params->size < sizeof(size_t)) return WEFT_ERR_INVALID_ARG;
    if (params != NULL &&
        params->size >= offsetof(weft_comm_params_t, transport) + sizeof(weft_transport_t))
        *want = params->transport;
    return WEFT_SUCCESS;
}

weft_status_t weft__comm_create(weft__ctl_t *ctl, weft_stream_t stream, weft_transport_t want,
                                weft_comm_t *out)
{
    weft_status_t st = WEFT_SUCCESS;
    weft__comm_t *c = NULL; /* cache-line aligned: see the layout of weft__comm_t */
    if (posix_memalign((void **)&c, 64, sizeof(struct weft_comm)) != 0) {
        st = WEFT_ERR_NO_MEMORY;
        goto fail_ctl;
    }
    memset(c, 0, sizeof(struct weft_comm));

    c->ctl = ctl;
    ctl = NULL;
    c->rank = weft__ctl_rank(c->ctl);
    c->size = weft__ctl_size(c->ctl);
    c->pof2 = 1;
    while (c->pof2 * 2 <= c->size) c->pof2 *= 2;
    c->stream = stream;
    c->oversubscribed = weft__g.oversubscribed;
    c->id = atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed);
    for (int i = 0; i < WEFT_COLL_COUNT; i++) atomic_init(&c->force_algo[i], WEFT_ALGO_AUTO);

    c->ctl_check = NULL;
    if (weft__cfg.check_args) WEFT__CHECK_GOTO(weft__ctl_dup(c->ctl, &c->ctl_check), st, fail_dup);

    c->tp = weft__transport_choose(want, weft__cfg.transport, &st);
    WEFT__CHECK_GOTO(agree_transport(c, st), st, fail_dup);
    st = c->tp->comm_open(c);
    if (st != WEFT_SUCCESS) {
        agree(c, st);
        goto fail_dup;
    }
    WEFT__CHECK_GOTO(agree(c, st), st, fail_open);
    WEFT__CHECK_GOTO(weft__topo_init(c), st, fail_open);
    WEFT__CHECK_GOTO(weft__select_init(c), st, fail_open);
    WEFT__CHECK_GOTO(open_node(c), st, fail_open);
    WEFT__CHECK_GOTO(weft__stream_comm_attach(c), st, fail_open);

    /* The selection's inputs are final (cost, node path, stream): from here
     * its choices may be kept (lib/select.c). Published with the handle. */
    c->sel_cache_on = 1;
    uint64_t h = 0;
    WEFT__CHECK_GOTO((weft_status_t)weft__htab_add(&weft__comms, c, &h), st, fail_attach);
    c->handle = h;
    WEFT__DEBUG("comm %d created: %d ranks, transport %s", c->id, c->size, c->tp->name);
    *out = (weft_comm_t)(uintptr_t)h;
    return WEFT_SUCCESS;

fail_attach:
    weft__stream_comm_detach(c);
fail_open:
    weft__node_close((weft__node_t **)&c->node_state);
    weft__topo_fini(c);
    c->tp->comm_close(c);
fail_dup:
    weft__ctl_free(&c->ctl_check);
    weft__ctl_free(&c->ctl);
    free(c);
fail_ctl:
    weft__ctl_free(&ctl);
    return st;
}

/* Collective: waits for this comm's ops (helping progress), then frees. */
static void comm_free(weft__comm_t *c)
{
    weft__comm_cb_t *cb = atomic_load_explicit(&c->on_complete, memory_order_relaxed);
    if (cb != NULL) cb->next = c->cb_replaced;
    else cb = c->cb_replaced;
    while (cb != NULL) { /* no issue any more: nobody reads them */
        weft__comm_cb_t *n = cb->next;
        free(cb);
        cb = n;
    }
    weft__stream_comm_detach(c);
    weft__node_close((weft__node_t **)&c->node_state);
    weft__topo_fini(c);
    c->tp->comm_close(c);
    weft__ctl_free(&c->ctl);
    weft__ctl_free(&c->ctl_check);
    free(c);
}

/* Wait for c's operations in flight, helping progress. Caller thread. */
static void drain(weft__comm_t *c)
{
    unsigned idle = 0;
    while (atomic_load_explicit(&c->inflight, memory_order_acquire) > 0) {
        int w = weft__engine_try_progress();
        if (w > 0) idle = 0;
        else weft__engine_backoff(idle++);
    }
}

weft_status_t weft_comm_destroy(weft_comm_t comm)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    if (!weft__htab_retire(&weft__comms, c->handle)) return WEFT_ERR_INVALID_COMM; /* a racing destroy won */
    drain(c);
    comm_free(c);
    return WEFT_SUCCESS;
}

weft_status_t weft_comm_split(weft_comm_t comm, int color, int key, weft_stream_t stream,
                              weft_comm_t *newcomm)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    /* Agreed before anything else: a rank that refused alone would leave the
     * others in MPI_Comm_split. */
    int bad = newcomm == NULL || color < WEFT_UNDEFINED, any_bad = 0;
    /* The MPI calls below are collectives on c's MPI duplicate, which the
     * engine also issues MPI collectives on (the mpi algorithm): with
     * nothing of c in flight, every rank meets them in one order. */
    drain(c);
    weft_status_t st = WEFT_SUCCESS;
    WEFT__CHECK_GOTO(weft__ctl_allreduce(c->ctl, &bad, &any_bad, 1, WEFT__CTL_INT, WEFT__CTL_MAX),
                     st, out);
    if (any_bad) {
        if (bad) WEFT__ERROR("weft_comm_split: %s", newcomm == NULL ? "newcomm is NULL"
                                                                     : "color below WEFT_UNDEFINED");
        st = WEFT_ERR_INVALID_ARG;
        goto out;
    }
    weft__ctl_t *sub = NULL, *dup = NULL;
    WEFT__CHECK_GOTO(weft__ctl_split(c->ctl, color == WEFT_UNDEFINED ? -1 : color, key, &sub), st,
                     out);
    if (sub == NULL) {
        *newcomm = NULL;
        goto out;
    }
    /* The new communicator's own duplicate, as weft_comm_create makes of
     * the MPI communicator it is given. */
    st = weft__ctl_dup(sub, &dup);
    weft__ctl_free(&sub);
    if (st != WEFT_SUCCESS) goto out;
    weft_comm_t made = NULL;
    st = weft__comm_create(dup, stream, weft__transport_id(c->tp), &made);
    if (st == WEFT_SUCCESS) *newcomm = made;
out:
    return st;
}

/* WEFT_SUCCESS if `ranks` is n distinct ranks of c that include c's own;
 * else WEFT_ERR_INVALID_ARG (logged why), or WEFT_ERR_NO_MEMORY. */
static weft_status_t check_group_list(const weft__comm_t *c, const int *ranks, int n)
{
    if (ranks == NULL || n < 1 || n > c->size) {
        WEFT__ERROR("weft_comm_create_group: %d ranks listed (%s) of a communicator of %d", n,
                    ranks == NULL ? "ranks is NULL" : "must be 1 to the size", c->size);
        return WEFT_ERR_INVALID_ARG;
    }
    unsigned char *seen = calloc((size_t)c->size, 1);
    if (seen == NULL) return WEFT_ERR_NO_MEMORY;
    bool ok = true, mine = false;
    for (int i = 0; i < n && ok; i++) {
        const int q = ranks[i];
        if (q < 0 || q >= c->size || seen[q]) {
            WEFT__ERROR("weft_comm_create_group: ranks[%d] = %d is %s", i, q,
                        q < 0 || q >= c->size ? "not a rank of the communicator" : "listed twice");
            ok = false;
        } else {
            seen[q] = 1;
            mine |= q == c->rank;
        }
    }
    free(seen);
    if (ok && !mine)
        WEFT__ERROR("weft_comm_create_group: rank %d is not in the list (only the members call)",
                    c->rank);
    return ok && mine ? WEFT_SUCCESS : WEFT_ERR_INVALID_ARG;
}

weft_status_t weft_comm_create_group(weft_comm_t comm, const int *ranks, int n,
                                     weft_stream_t stream, weft_comm_t *newcomm)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    /* Refused here alone: the other members see the same list and refuse
     * it too, and the ranks outside the list never wait for this one. */
    if (newcomm == NULL) {
        WEFT__ERROR("weft_comm_create_group: newcomm is NULL");
        return WEFT_ERR_INVALID_ARG;
    }
    WEFT__CHECK(check_group_list(c, ranks, n));
    /* The MPI call below is on c's MPI duplicate, which the engine also
     * issues MPI collectives on (the mpi algorithm): none of this rank's
     * may be in flight beside it. */
    drain(c);
    weft__ctl_t *sub = NULL;
    WEFT__CHECK(weft__ctl_create_group(c->ctl, ranks, n, &sub));
    weft_comm_t made = NULL;
    weft_status_t st = weft__comm_create(sub, stream, weft__transport_id(c->tp), &made);
    if (st == WEFT_SUCCESS) *newcomm = made;
    return st;
}

static void free_one(void *c, void *unused)
{
    WEFT__UNUSED(unused);
    comm_free(c);
}

void weft__comm_free_all(void) { weft__htab_retire_all(&weft__comms, free_one, NULL); }

weft_status_t weft_comm_rank(weft_comm_t comm, int *rank)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    if (rank == NULL) return WEFT_ERR_INVALID_ARG;
    *rank = c->rank;
    return WEFT_SUCCESS;
}

weft_status_t weft_comm_size(weft_comm_t comm, int *size)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    if (size == NULL) return WEFT_ERR_INVALID_ARG;
    *size = c->size;
    return WEFT_SUCCESS;
}

weft_status_t weft_comm_stream(weft_comm_t comm, weft_stream_t *stream)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    if (stream == NULL) return WEFT_ERR_INVALID_ARG;
    *stream = c->stream;
    return WEFT_SUCCESS;
}

weft_status_t weft_comm_get_error(weft_comm_t comm)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    return (weft_status_t)atomic_load_explicit(&c->error, memory_order_relaxed);
}

weft_status_t weft_comm_get_transport(weft_comm_t comm, weft_transport_t *transport)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    if (transport == NULL) return WEFT_ERR_INVALID_ARG;
    *transport = weft__transport_id(c->tp);
    return WEFT_SUCCESS;
}

weft_status_t weft_comm_set_algo(weft_comm_t comm, weft_coll_t coll, weft_algo_t algo)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    if ((unsigned)coll >= WEFT_COLL_COUNT) return WEFT_ERR_INVALID_ARG;
    if ((unsigned)algo >= WEFT_ALGO_COUNT) return WEFT_ERR_ALGORITHM;
    if (algo != WEFT_ALGO_AUTO && weft__algo_impl(coll, algo) == NULL) return WEFT_ERR_ALGORITHM;
    atomic_store_explicit(&c->force_algo[coll], (int)algo, memory_order_relaxed);
    return WEFT_SUCCESS;
}

/* Setting a communicator's callback is rare: one lock for all of them keeps
 * the replaced settings' list. */
static pthread_mutex_t cb_lock = PTHREAD_MUTEX_INITIALIZER;

weft_status_t weft_comm_set_on_complete(weft_comm_t comm, weft_comm_callback_t fn, void *arg)
{
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    if (c->stream_state != NULL) return WEFT_ERR_UNSUPPORTED; /* completion belongs to the stream */
    weft__comm_cb_t *n = NULL;
    if (fn != NULL) {
        n = malloc(sizeof *n);
        if (n == NULL) return WEFT_ERR_NO_MEMORY;
        *n = (weft__comm_cb_t){fn, arg, NULL};
    }
    pthread_mutex_lock(&cb_lock);
    /* release: n's fields to the issuing threads (acquire in weft__issue) */
    weft__comm_cb_t *old = atomic_exchange_explicit(&c->on_complete, n, memory_order_acq_rel);
    if (old != NULL) {
        old->next = c->cb_replaced;
        c->cb_replaced = old;
    }
    pthread_mutex_unlock(&cb_lock);
    return WEFT_SUCCESS;
}
