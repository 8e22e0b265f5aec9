/*
 * halo.c - halo exchange plans (weft_halo_*): neighbours, regions and
 * staging buffers computed once; each exchange is one engine op
 * (WEFT__OP_HALO) that posts every neighbour's receive, packs and sends
 * every face (and edge and corner when asked) at once, and unpacks when all
 * arrived.
 *
 * Directions: every delta in {-1,0,1}^ndims except 0 (only those with one
 * non-zero component without corners), in a fixed order. For delta:
 *   inner(delta): the interior cells the neighbour at +delta keeps as halo
 *                 (width_lo layers on the +1 side, width_hi on the -1 side);
 *   halo(delta):  this rank's halo cells on side delta.
 * Forward: send inner(delta) to nbr(+delta), receive halo(-delta) from
 * nbr(-delta). Accumulate: send halo(delta) to nbr(+delta), receive from
 * nbr(-delta) and add into inner(-delta). Both sides walk the directions in
 * the same order, so the k-th message between two ranks (one tag per op)
 * always pairs the same regions, even when one neighbour sits on several
 * sides (periodic grids of 1 or 2).
 *
 * Cost per exchange (m = number of neighbour messages, s = bytes of halo):
 *   alpha + s.beta (all messages overlap) + 2.s.pack
 *
 * Thread contract: see weft_halo.h. halo_start/halo_step run engine side.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "halo.h"
#include "handle.h"

#define MAX_DIRS 26

typedef struct halo_dir {
    int to, from;                      /* neighbour ranks, -1 = none */
    weft__halo_region_t inner, halo;   /* inner(delta), halo(delta) */
    weft__halo_region_t inner_m, halo_m; /* inner(-delta), halo(-delta) */
    size_t soff, roff;                 /* staging offsets */
    /* regions that are one contiguous run of the buffer skip the staging:
     * their byte offsets in the buffer, or SIZE_MAX */
    size_t inner_at, halo_at, inner_m_at, halo_m_at;
    /* the exchange in flight: its strided messages, when the transport packs
     * them itself (isend_dt / irecv_dt) instead of the staging buffer */
    weft__xfer_dt_t sdt, rdt;
} halo_dir_t;

struct weft_halo_plan {
    weft_comm_t handle; /* its communicator, looked up at every exchange */
    int ndims;
    int grid[3], periodic[3], coords[3];
    int width_lo[3], width_hi[3];
    size_t local[3];
    weft__halo_layout_t layout;
    int ndir;
    halo_dir_t dir[MAX_DIRS];
    char *stage;
    size_t stage_bytes;
    weft_request_t req;
    _Atomic int busy;
};

enum { MODE_FILL = 0, MODE_ACCUMULATE = 1 };

/* ---- the op (engine side) -------------------------------------------------------- */
/* weft__xfer_dt_t callbacks: obj is the buffer, arg1 its layout, arg2 the region. */
static size_t dt_pack(const weft__xfer_dt_t *d, size_t offset, void *dst, size_t max)
{
    return weft__halo_pack_part(d->obj, d->arg1, d->arg2, offset, dst, max);
}

static void dt_unpack(const weft__xfer_dt_t *d, size_t offset, const void *src, size_t len)
{
    weft__halo_unpack_part(d->obj, d->arg1, d->arg2, offset, src, len);
}

static void dt_set(weft__xfer_dt_t *d, void *buf, const weft__halo_layout_t *l,
                   const weft__halo_region_t *r)
{
    d->bytes = r->bytes;
    d->pack = dt_pack;
    d->unpack = dt_unpack;
    d->obj = buf;
    d->arg1 = l;
    d->arg2 = r;
}

/* Where direction d's incoming data lands: in the tensor, unpacked by the
 * transport fragment by fragment (a strided halo when filling over a
 * transport with irecv_dt; not when accumulating: a fragment may end inside
 * an element); in the tensor directly (a contiguous halo when filling); or in
 * the staging buffer, unpacked by halo_step. Decided once for start and step. */
enum { LAND_TRANSPORT, LAND_DIRECT, LAND_STAGED };
static int landing(const halo_dir_t *d, int fill, const weft__transport_t *tp)
{
    if (!fill) return LAND_STAGED;
    if (d->halo_m_at != SIZE_MAX) return LAND_DIRECT;
    return tp->irecv_dt != NULL ? LAND_TRANSPORT : LAND_STAGED;
}

static weft_status_t halo_step(weft__op_t *op)
{
    struct weft_halo_plan *pl = op->arg;
    weft_status_t st = weft__coll_test(op);
    if (st != WEFT_SUCCESS) return st;
    const int fill = op->user_tag == MODE_FILL;
    for (int k = 0; k < pl->ndir; k++) {
        halo_dir_t *d = &pl->dir[k];
        if (d->from < 0 || landing(d, fill, op->comm->tp) != LAND_STAGED) continue;
        if (fill) weft__halo_unpack(op->recvbuf, &pl->layout, &d->halo_m, pl->stage + d->roff);
        else weft__halo_unpack_add(op->recvbuf, &pl->layout, &d->inner_m, pl->stage + d->roff);
    }
    return WEFT_SUCCESS;
}

static weft_status_t halo_start(weft__op_t *op)
{
    struct weft_halo_plan *pl = op->arg;
    const int fill = op->user_tag == MODE_FILL;
    for (int k = 0; k < pl->ndir; k++) {
        halo_dir_t *d = &pl->dir[k];
        const weft__halo_region_t *r = fill ? &d->halo_m : &d->inner_m;
        if (d->from < 0 || r->bytes == 0) continue;
        switch (landing(d, fill, op->comm->tp)) {
        case LAND_TRANSPORT:
            dt_set(&d->rdt, op->recvbuf, &pl->layout, r);
            WEFT__CHECK(weft__coll_irecv_dt(op, &d->rdt, d->from));
            break;
        case LAND_DIRECT:
            WEFT__CHECK(weft__coll_irecv(op, (char *)op->recvbuf + d->halo_m_at, r->bytes, d->from));
            break;
        default:
            WEFT__CHECK(weft__coll_irecv(op, pl->stage + d->roff, r->bytes, d->from));
        }
    }
    for (int k = 0; k < pl->ndir; k++) {
        halo_dir_t *d = &pl->dir[k];
        const weft__halo_region_t *r = fill ? &d->inner : &d->halo;
        if (d->to < 0 || r->bytes == 0) continue;
        size_t at = fill ? d->inner_at : d->halo_at;
        if (at == SIZE_MAX && op->comm->tp->isend_dt != NULL) { /* strided: packed by the transport */
            dt_set(&d->sdt, op->recvbuf, &pl->layout, r);
            WEFT__CHECK(weft__coll_isend_dt(op, &d->sdt, d->to));
            continue;
        }
        const char *src = pl->stage + d->soff;
        if (at != SIZE_MAX) src = (const char *)op->recvbuf + at; /* contiguous: no staging */
        else weft__halo_pack(op->recvbuf, &pl->layout, r, pl->stage + d->soff);
        /* eager: every rank sends and receives at once, so a rendezvous
         * handshake only adds a round trip (doc/benchmarks_halo.md) */
        WEFT__CHECK(weft__coll_isend_eager(op, src, r->bytes, d->to));
    }
    return halo_step(op);
}

static const weft__algo_impl_t halo_impl = {
    .id = WEFT_ALGO_LINEAR, .kind = WEFT__OP_HALO, .start = halo_start, .step = halo_step,
};

/* ---- plan creation ------------------------------------------------------------------ */
/* What every rank tells the others (compared on every rank alike). */
typedef struct halo_info {
    int32_t err;
    int32_t ndims, nlead, dtype, corners;
    int32_t grid[3], periodic[3], coords[3], wlo[3], whi[3];
    uint64_t lead[WEFT_HALO_MAX_LEAD];
    uint64_t local[3];
} halo_info_t;

static int grid_rank(const struct weft_halo_plan *pl, const int c[3])
{
    int r = 0;
    for (int d = 0; d < pl->ndims; d++) {
        int x = c[d];
        if (x < 0 || x >= pl->grid[d]) {
            if (!pl->periodic[d]) return -1;
            x = ((x % pl->grid[d]) + pl->grid[d]) % pl->grid[d];
        }
        r = r * pl->grid[d] + x;
    }
    return r;
}

/* Region of delta: halo cells (halo = 1) or the interior cells sent that way. */
static weft__halo_region_t region(const struct weft_halo_plan *pl, const int delta[3], int halo)
{
    weft__halo_region_t r;
    size_t bytes = pl->layout.outer * pl->layout.esize;
    for (int d = 0; d < 3; d++) {
        if (d >= pl->ndims) {
            r.start[d] = 0;
            r.len[d] = 1;
            continue;
        }
        size_t lo = (size_t)pl->width_lo[d], n = pl->local[d], whi = (size_t)pl->width_hi[d];
        if (delta[d] == 0) { r.start[d] = lo; r.len[d] = n; }
        else if (delta[d] > 0) {
            if (halo) { r.start[d] = lo + n; r.len[d] = whi; }
            else { r.start[d] = lo + n - lo; r.len[d] = lo; }
        } else {
            if (halo) { r.start[d] = 0; r.len[d] = lo; }
            else { r.start[d] = lo; r.len[d] = whi; }
        }
        bytes *= r.len[d];
    }
    r.bytes = bytes;
    return r;
}

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

/* Caller thread: directions, neighbours, regions, staging. */
static weft_status_t build_dirs(struct weft_halo_plan *pl, int corners)
{
    int nd = pl->ndims, delta[3] = {0, 0, 0}, total = 1;
    size_t off = 0;
    for (int d = 0; d < nd; d++) total *= 3;
    pl->ndir = 0;
    for (int code = 0; code < total; code++) {
        int c = code, nz = 0;
        for (int d = nd - 1; d >= 0; d--) {
            delta[d] = c % 3 - 1;
            c /= 3;
            nz += delta[d] != 0;
        }
        if (nz == 0 || (!corners && nz > 1)) continue;
        halo_dir_t *h = &pl->dir[pl->ndir++];
        int to[3] = {0, 0, 0}, from[3] = {0, 0, 0}, mdelta[3] = {0, 0, 0};
        for (int d = 0; d < nd; d++) {
            to[d] = pl->coords[d] + delta[d];
            from[d] = pl->coords[d] - delta[d];
            mdelta[d] = -delta[d];
        }
        h->to = grid_rank(pl, to);
        h->from = grid_rank(pl, from);
        h->inner = region(pl, delta, 0);
        h->halo = region(pl, delta, 1);
        h->inner_m = region(pl, mdelta, 0);
        h->halo_m = region(pl, mdelta, 1);
        size_t *at[4] = {&h->inner_at, &h->halo_at, &h->inner_m_at, &h->halo_m_at};
        const weft__halo_region_t *rg[4] = {&h->inner, &h->halo, &h->inner_m, &h->halo_m};
        for (int i = 0; i < 4; i++)
            if (!weft__halo_contiguous(&pl->layout, rg[i], at[i])) *at[i] = SIZE_MAX;
        h->soff = off;
        off += max_sz(h->inner.bytes, h->halo.bytes);
        h->roff = off;
        off += max_sz(h->inner_m.bytes, h->halo_m.bytes);
    }
    pl->stage_bytes = off;
    pl->stage = malloc(off ? off : 1);
    if (!pl->stage) {
        WEFT__ERROR("halo plan: cannot allocate %zu bytes of staging", off);
        return WEFT_ERR_NO_MEMORY;
    }
    return WEFT_SUCCESS;
}

/* Caller thread: this rank's own view; returns a HALO_PLAN error (logged) if
 * something is wrong locally. */
static weft_status_t local_info(const weft__comm_t *c, const weft_halo_params_t *p, halo_info_t *in)
{
    memset(in, 0, sizeof *in);
    in->ndims = p->ndims;
    in->nlead = p->nlead;
    in->dtype = (int32_t)p->dtype;
    in->corners = p->corners != 0;
    if (c->stream != NULL) {
        WEFT__ERROR("halo plan: communicators bound to a stream are not supported yet");
        return WEFT_ERR_UNSUPPORTED;
    }
    if (p->ndims < 1 || p->ndims > WEFT_HALO_MAX_DIMS) {
        WEFT__ERROR("halo plan: ndims = %d, must be 1..%d", p->ndims, WEFT_HALO_MAX_DIMS);
        return WEFT_ERR_HALO_PLAN;
    }
    if (p->nlead < 0 || p->nlead > WEFT_HALO_MAX_LEAD) {
        WEFT__ERROR("halo plan: nlead = %d, must be 0..%d", p->nlead, WEFT_HALO_MAX_LEAD);
        return WEFT_ERR_HALO_PLAN;
    }
    if (weft__dtype_size(p->dtype) == 0) {
        WEFT__ERROR("halo plan: unknown datatype %d", (int)p->dtype);
        return WEFT_ERR_HALO_PLAN;
    }
    for (int i = 0; i < p->nlead; i++) in->lead[i] = p->lead[i];
    /* The whole buffer's size must fit: found here, before the agreement,
     * so that the ranks refuse together. */
    size_t total = weft__dtype_size(p->dtype);
    for (int i = 0; i < p->nlead; i++) {
        if (p->lead[i] != 0 && total > SIZE_MAX / p->lead[i]) goto overflow;
        total *= p->lead[i];
    }
    for (int d = 0; d < p->ndims; d++) {
        const uint64_t ext = (uint64_t)p->local[d] + (uint64_t)(p->width_lo[d] > 0 ? p->width_lo[d] : 0) +
                             (uint64_t)(p->width_hi[d] > 0 ? p->width_hi[d] : 0);
        if (ext < p->local[d] || ext > SIZE_MAX || (ext != 0 && total > SIZE_MAX / ext)) goto overflow;
        total *= (size_t)ext;
    }
    int cart = 1, prod = 1, too_many = 0;
    for (int d = 0; d < p->ndims; d++) {
        cart &= p->grid[d] == 0;
        in->local[d] = p->local[d];
        in->wlo[d] = p->width_lo[d];
        in->whi[d] = p->width_hi[d];
        if (p->width_lo[d] < 0 || p->width_hi[d] < 0) {
            WEFT__ERROR("halo plan: negative halo width in dimension %d", d);
            return WEFT_ERR_HALO_PLAN;
        }
        if (p->local[d] == 0) {
            WEFT__ERROR("halo plan: empty local block in dimension %d", d);
            return WEFT_ERR_HALO_PLAN;
        }
    }
    if (cart) {
        int nd = 0, dims[3], per[3], co[3];
        WEFT__CHECK(weft__ctl_cart(c->ctl, 3, &nd, dims, per, co));
        if (nd == 0) {
            WEFT__ERROR("halo plan: no grid given and the communicator has no Cartesian topology");
            return WEFT_ERR_HALO_PLAN;
        }
        if (nd != p->ndims) {
            WEFT__ERROR("halo plan: the Cartesian communicator has %d dimensions, the plan %d", nd,
                        p->ndims);
            return WEFT_ERR_HALO_PLAN;
        }
        for (int d = 0; d < nd; d++) {
            in->grid[d] = dims[d];
            in->periodic[d] = per[d] != 0;
            in->coords[d] = co[d];
        }
        return WEFT_SUCCESS;
    }
    for (int d = 0; d < p->ndims; d++) {
        if (p->grid[d] <= 0) {
            WEFT__ERROR("halo plan: grid[%d] = %d (give every dimension, or none for a Cart comm)",
                        d, p->grid[d]);
            return WEFT_ERR_HALO_PLAN;
        }
        in->grid[d] = p->grid[d];
        in->periodic[d] = p->periodic[d] != 0;
        /* prod stays at most c->size: a product past INT_MAX would wrap
         * (3 x 3 x 954437177 wraps to 1) and pass the check below */
        if (p->grid[d] > c->size / prod) too_many = 1;
        else prod *= p->grid[d];
    }
    if (too_many || prod != c->size) {
        WEFT__ERROR("halo plan: the grid %dx%dx%d has %s%d processes, the communicator %d",
                    in->grid[0], p->ndims > 1 ? in->grid[1] : 1, p->ndims > 2 ? in->grid[2] : 1,
                    too_many ? "more than " : "", too_many ? c->size : prod, c->size);
        return WEFT_ERR_HALO_PLAN;
    }
    for (int d = p->ndims - 1, r = c->rank; d >= 0; d--) {
        in->coords[d] = r % in->grid[d];
        r /= in->grid[d];
    }
    return WEFT_SUCCESS;
overflow:
    WEFT__ERROR("halo plan: the buffer size overflows");
    return WEFT_ERR_COUNT_OVERFLOW;
}

/* Every rank, same data: consistent across ranks? (logged by rank 0) */
static weft_status_t check_all(const halo_info_t *all, int p, int me)
{
    const halo_info_t *a = &all[0];
    for (int q = 0; q < p; q++)
        if (all[q].err) return WEFT_ERR_HALO_PLAN; /* logged where it was found */
    for (int q = 1; q < p; q++) {
        const halo_info_t *b = &all[q];
        const char *what = NULL;
        if (b->ndims != a->ndims) what = "ndims";
        else if (b->nlead != a->nlead || memcmp(b->lead, a->lead, sizeof a->lead)) what = "leading dimensions";
        else if (b->dtype != a->dtype) what = "datatype";
        else if (b->corners != a->corners) what = "corners";
        else if (memcmp(b->grid, a->grid, sizeof a->grid) || memcmp(b->periodic, a->periodic, sizeof a->periodic)) what = "grid";
        else if (memcmp(b->wlo, a->wlo, sizeof a->wlo) || memcmp(b->whi, a->whi, sizeof a->whi)) what = "halo widths";
        if (what) {
            if (me == 0) WEFT__ERROR("halo plan: ranks 0 and %d disagree on the %s", q, what);
            return WEFT_ERR_HALO_PLAN;
        }
    }
    for (int q = 0; q < p; q++) {
        const halo_info_t *b = &all[q];
        for (int d = 0; d < b->ndims; d++) {
            int exchanged = b->grid[d] > 1 || b->periodic[d];
            uint64_t need = (uint64_t)(b->wlo[d] > b->whi[d] ? b->wlo[d] : b->whi[d]);
            if (exchanged && b->local[d] < need) {
                if (me == 0)
                    WEFT__ERROR("halo plan: rank %d's block has %llu cells in dimension %d, "
                                "fewer than the halo width %llu it must fill its neighbours' halos from",
                                q, (unsigned long long)b->local[d], d, (unsigned long long)need);
                return WEFT_ERR_HALO_PLAN;
            }
            for (int s = 0; s < p; s++)
                if (all[s].coords[d] == b->coords[d] && all[s].local[d] != b->local[d]) {
                    if (me == 0)
                        WEFT__ERROR("halo plan: ranks %d and %d share grid coordinate %d in "
                                    "dimension %d but their blocks are %llu and %llu cells wide",
                                    q, s, b->coords[d], d, (unsigned long long)b->local[d],
                                    (unsigned long long)all[s].local[d]);
                    return WEFT_ERR_HALO_PLAN;
                }
        }
    }
    return WEFT_SUCCESS;
}

/* Plan handles: generation-checked (base/handle.h), as communicators': a
 * destroyed plan, or one from before a weft_finalize, is refused
 * (WEFT_ERR_INVALID_ARG). weft_finalize frees the plans still alive. */
static weft__htab_t plans = WEFT__HTAB_INITIALIZER;

static weft_status_t plan_get(weft_halo_plan_t h, struct weft_halo_plan **out)
{
    if (!weft__is_init()) return WEFT_ERR_NOT_INITIALIZED;
    struct weft_halo_plan *pl = weft__htab_get(&plans, (uint64_t)(uintptr_t)h);
    if (pl == NULL) {
        WEFT__ERROR("halo: %s plan handle", h == NULL ? "NULL" : "destroyed or unknown");
        return WEFT_ERR_INVALID_ARG;
    }
    *out = pl;
    return WEFT_SUCCESS;
}

static void plan_free(void *p, void *unused)
{
    WEFT__UNUSED(unused);
    struct weft_halo_plan *pl = p;
    free(pl->stage);
    free(pl);
}

/* weft_finalize, engine stopped: the plans' requests go with the others. */
void weft__halo_fini(void) { weft__htab_retire_all(&plans, plan_free, NULL); }

/* Collective over comm. Caller thread. */
weft_status_t weft_halo_plan_create(weft_comm_t comm, const weft_halo_params_t *params,
                                    weft_halo_plan_t *plan)
{
    weft_status_t st = WEFT_SUCCESS;
    halo_info_t mine, *all = NULL;
    struct weft_halo_plan *pl = NULL;

    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(comm, &c));
    if (params == NULL || plan == NULL || params->size < sizeof(weft_halo_params_t)) {
        WEFT__ERROR("halo plan: NULL params/plan or params->size not set (use "
                    "WEFT_HALO_PARAMS_INITIALIZER)");
        return WEFT_ERR_INVALID_ARG;
    }
    mine.err = 0;
    weft_status_t local_st = local_info(c, params, &mine);
    mine.err = local_st != WEFT_SUCCESS; /* still take part in the agreement below */

    all = malloc((size_t)c->size * sizeof *all);
    if (!all) return WEFT_ERR_NO_MEMORY; /* collective step not reached: caller's problem */
    /* Weft's own agreement: on a stream-bound communicator a user-level
     * allgather would only be queued behind the stream's work, and this
     * function would return (and free `all`) before it ran. */
    WEFT__CHECK_GOTO(weft__allgather_internal(c, &mine, all, sizeof mine), st, out);
    if (local_st != WEFT_SUCCESS && local_st != WEFT_ERR_HALO_PLAN) {
        st = local_st; /* an MPI failure, logged where found */
        goto out;
    }
    WEFT__CHECK_GOTO(check_all(all, c->size, c->rank), st, out);

    pl = calloc(1, sizeof *pl);
    if (!pl) {
        st = WEFT_ERR_NO_MEMORY;
        goto out;
    }
    pl->handle = comm;
    pl->ndims = params->ndims;
    pl->layout.outer = 1;
    pl->layout.esize = weft__dtype_size(params->dtype);
    pl->layout.dtype = params->dtype;
    size_t total = pl->layout.esize;
    for (int i = 0; i < params->nlead; i++) {
        pl->layout.outer *= params->lead[i];
        if (params->lead[i] && total > SIZE_MAX / params->lead[i]) goto overflow;
        total *= params->lead[i];
    }
    for (int d = 0; d < 3; d++) {
        pl->grid[d] = d < pl->ndims ? mine.grid[d] : 1;
        pl->periodic[d] = d < pl->ndims ? mine.periodic[d] : 0;
        pl->coords[d] = d < pl->ndims ? mine.coords[d] : 0;
        pl->width_lo[d] = d < pl->ndims ? params->width_lo[d] : 0;
        pl->width_hi[d] = d < pl->ndims ? params->width_hi[d] : 0;
        pl->local[d] = d < pl->ndims ? params->local[d] : 1;
        /* widths are at most INT_MAX each: the sum cannot wrap (a wrapped
         * extent of 0 divided below) */
        size_t widths = (size_t)pl->width_lo[d] + (size_t)pl->width_hi[d];
        if (pl->local[d] > SIZE_MAX - widths) goto overflow;
        pl->layout.ext[d] = pl->local[d] + widths;
        if (total > SIZE_MAX / pl->layout.ext[d]) goto overflow;
        total *= pl->layout.ext[d];
    }
    atomic_init(&pl->busy, 0);
    pl->req = WEFT_REQUEST_NULL;
    WEFT__CHECK_GOTO(build_dirs(pl, params->corners != 0), st, out);
    uint64_t h = 0;
    WEFT__CHECK_GOTO((weft_status_t)weft__htab_add(&plans, pl, &h), st, out);
    *plan = (weft_halo_plan_t)(uintptr_t)h;
    pl = NULL;
    goto out;
overflow:
    WEFT__ERROR("halo plan: the buffer size overflows");
    st = WEFT_ERR_COUNT_OVERFLOW;
out:
    if (pl) {
        free(pl->stage);
        free(pl);
    }
    free(all);
    return st;
}

static weft_status_t wait_plan(struct weft_halo_plan *pl);

weft_status_t weft_halo_plan_destroy(weft_halo_plan_t plan)
{
    if (plan == NULL) return WEFT_SUCCESS;
    struct weft_halo_plan *pl = NULL;
    WEFT__CHECK(plan_get(plan, &pl));
    weft_status_t st = wait_plan(pl);
    if (!weft__htab_retire(&plans, (uint64_t)(uintptr_t)plan)) return WEFT_ERR_INVALID_ARG;
    plan_free(pl, NULL);
    return st;
}

weft_status_t weft_halo_buffer_count(weft_halo_plan_t plan, size_t *count)
{
    struct weft_halo_plan *pl = NULL;
    WEFT__CHECK(plan_get(plan, &pl));
    if (count == NULL) return WEFT_ERR_INVALID_ARG;
    *count = pl->layout.outer * pl->layout.ext[0] * pl->layout.ext[1] * pl->layout.ext[2];
    return WEFT_SUCCESS;
}

weft_status_t weft_halo_coords(weft_halo_plan_t plan, int coords[WEFT_HALO_MAX_DIMS])
{
    struct weft_halo_plan *pl = NULL;
    WEFT__CHECK(plan_get(plan, &pl));
    if (coords == NULL) return WEFT_ERR_INVALID_ARG;
    for (int d = 0; d < WEFT_HALO_MAX_DIMS; d++) coords[d] = pl->coords[d];
    return WEFT_SUCCESS;
}

/* ---- exchanges (any thread, one in flight per plan) ------------------------------- */
/* blocking: issue without a request; the caller drives the op itself. */
static weft_status_t start(weft_halo_plan_t plan, void *buffer, int mode, int blocking)
{
    weft_status_t st;
    weft__op_t *op;
    struct weft_halo_plan *pl = NULL;
    WEFT__CHECK(plan_get(plan, &pl));
    weft__comm_t *c = NULL;
    WEFT__CHECK(weft__comm_get(pl->handle, &c)); /* its communicator destroyed first */
    if (buffer == NULL) return WEFT_ERR_INVALID_ARG;
    if (atomic_exchange_explicit(&pl->busy, 1, memory_order_acquire)) {
        WEFT__ERROR("halo: an exchange is already in flight on this plan");
        return WEFT_ERR_INVALID_ARG;
    }
    WEFT__CHECK_GOTO(weft__op_new(c, WEFT__OP_HALO, &op), st, release);
    op->impl = &halo_impl;
    op->algo = halo_impl.id;
    op->sendbuf = buffer;
    op->recvbuf = buffer;
    op->count = 0;
    op->bytes = pl->stage_bytes / 2;
    op->dtype = pl->layout.dtype;
    op->rop = WEFT_SUM;
    op->arg = pl;
    op->user_tag = mode;
    if (blocking) {
        st = weft__issue(op, NULL);
        goto release; /* done either way: the plan is free again */
    }
    WEFT__CHECK_GOTO(weft__issue(op, &pl->req), st, release);
    return WEFT_SUCCESS;
release:
    /* release: no exchange in flight any more */
    atomic_store_explicit(&pl->busy, 0, memory_order_release);
    return st;
}

weft_status_t weft_halo_start(weft_halo_plan_t plan, void *buffer)
{
    return start(plan, buffer, MODE_FILL, 0);
}

weft_status_t weft_halo_start_accumulate(weft_halo_plan_t plan, void *buffer)
{
    return start(plan, buffer, MODE_ACCUMULATE, 0);
}

static weft_status_t wait_plan(struct weft_halo_plan *pl)
{
    if (pl->req == WEFT_REQUEST_NULL) return WEFT_SUCCESS;
    weft_status_t st = weft_wait(&pl->req);
    pl->req = WEFT_REQUEST_NULL;
    /* release: the buffer and staging are the caller's again */
    atomic_store_explicit(&pl->busy, 0, memory_order_release);
    return st;
}

weft_status_t weft_halo_wait(weft_halo_plan_t plan)
{
    struct weft_halo_plan *pl = NULL;
    WEFT__CHECK(plan_get(plan, &pl));
    return wait_plan(pl);
}

weft_status_t weft_halo_test(weft_halo_plan_t plan, int *done)
{
    struct weft_halo_plan *pl = NULL;
    WEFT__CHECK(plan_get(plan, &pl));
    if (done == NULL) return WEFT_ERR_INVALID_ARG;
    if (pl->req == WEFT_REQUEST_NULL) {
        *done = 1;
        return WEFT_SUCCESS;
    }
    weft_status_t st = weft_test(&pl->req, done);
    if (*done || st < 0) {
        pl->req = WEFT_REQUEST_NULL;
        atomic_store_explicit(&pl->busy, 0, memory_order_release);
    }
    return st;
}

weft_status_t weft_halo_exchange(weft_halo_plan_t plan, void *buffer)
{
    return start(plan, buffer, MODE_FILL, 1);
}

weft_status_t weft_halo_accumulate(weft_halo_plan_t plan, void *buffer)
{
    return start(plan, buffer, MODE_ACCUMULATE, 1);
}
