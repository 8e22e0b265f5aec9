/*
 * test_halo.c - halo exchange (mpiexec -n 1..4).
 *
 * Every interior cell holds a value that encodes its leading index and its
 * GLOBAL coordinates; halo cells start as a sentinel. After an exchange every
 * halo cell must hold exactly the value of the cell it mirrors (wrapped on
 * periodic boundaries), cells with no owner (non-periodic boundary, or edges
 * and corners when they were not asked for) must still hold the sentinel,
 * and the interior must be untouched. The accumulating exchange is checked
 * against a reference that adds, for every rank's every halo cell, that
 * rank's marker into the owner's cell. Grids: 1-D with p ranks, 2-D 1xp,
 * px1, 2x2, 3-D 1x1xp and 1x2x2 (as the rank count allows), widths 0..3 per
 * side, uneven partitions (local sizes differing by one), periodic and not,
 * with and without corners, float64/float32/int32, a plan from an MPI_Cart
 * communicator, the overlap pattern (start, compute, test, wait), and bad
 * plans refused with WEFT_ERR_HALO_PLAN.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"
#include "weft_halo.h"

typedef struct cfg {
    int nd, grid[3], periodic[3], wlo[3], whi[3], corners, nlead;
    size_t lead[2], G[3]; /* global interior extents */
    weft_datatype_t dt;
} cfg_t;

static size_t part_len(size_t G, int P, int c) { return G / P + ((size_t)c < G % P); }
static size_t part_off(size_t G, int P, int c)
{
    size_t b = G / P, e = G % P;
    return (size_t)c * b + ((size_t)c < e ? (size_t)c : e);
}
static void coords_of(const cfg_t *c, int rank, int co[3])
{
    co[0] = co[1] = co[2] = 0;
    for (int d = c->nd - 1; d >= 0; d--) {
        co[d] = rank % c->grid[d];
        rank /= c->grid[d];
    }
}
static size_t outer_of(const cfg_t *c)
{
    size_t o = 1;
    for (int i = 0; i < c->nlead; i++) o *= c->lead[i];
    return o;
}
/* The value of global cell g (interior anywhere) with leading index o. */
static double code(const cfg_t *c, size_t o, const long g[3])
{
    double v = (double)o;
    for (int d = 0; d < c->nd; d++) v = v * (double)c->G[d] + (double)g[d];
    return v + 1.0;
}

/* Local geometry of a rank. */
typedef struct geo {
    int co[3];
    size_t n[3], off[3], ext[3], total;
} geo_t;
static void geo_of(const cfg_t *c, int rank, geo_t *g)
{
    coords_of(c, rank, g->co);
    g->total = outer_of(c);
    for (int d = 0; d < 3; d++) {
        if (d < c->nd) {
            g->n[d] = part_len(c->G[d], c->grid[d], g->co[d]);
            g->off[d] = part_off(c->G[d], c->grid[d], g->co[d]);
            g->ext[d] = g->n[d] + (size_t)c->wlo[d] + (size_t)c->whi[d];
        } else {
            g->n[d] = 1, g->off[d] = 0, g->ext[d] = 1;
        }
        g->total *= g->ext[d];
    }
}
static size_t idx(const geo_t *g, size_t o, const size_t i[3])
{
    return ((o * g->ext[0] + i[0]) * g->ext[1] + i[1]) * g->ext[2] + i[2];
}

/* For the buffer cell i of rank geometry g: where is it globally, and is it
 * a halo cell with an owner? Returns 0 interior, 1 halo with owner (gw =
 * wrapped global coords), 2 halo with no owner. */
static int classify(const cfg_t *c, const geo_t *g, const size_t i[3], long gw[3])
{
    int out = 0, nowner = 0;
    for (int d = 0; d < 3; d++) {
        gw[d] = 0;
        if (d >= c->nd) continue;
        long x = (long)g->off[d] + (long)i[d] - c->wlo[d];
        long li = (long)i[d] - c->wlo[d];
        if (li < 0 || li >= (long)g->n[d]) out++;
        if (x < 0 || x >= (long)c->G[d]) {
            if (c->periodic[d]) x = (x % (long)c->G[d] + (long)c->G[d]) % (long)c->G[d];
            else nowner = 1;
        }
        gw[d] = x;
    }
    if (out == 0) return 0;
    if (nowner || (!c->corners && out > 1)) return 2;
    return 1;
}

static const double SENTINEL = -7.0;

/* Run one configuration: fill exchange (mode 0) or accumulate (mode 1). */
static void run_cfg(mt_ctx_t *t, const cfg_t *c, int mode, int use_cart)
{
    char what[256];
    snprintf(what, sizeof what,
             "%s nd=%d grid=%dx%dx%d per=%d%d%d w=(%d,%d)(%d,%d)(%d,%d) G=%zux%zux%zu corners=%d %s%s",
             mode ? "accumulate" : "exchange", c->nd, c->grid[0], c->nd > 1 ? c->grid[1] : 1,
             c->nd > 2 ? c->grid[2] : 1, c->periodic[0], c->periodic[1], c->periodic[2], c->wlo[0],
             c->whi[0], c->wlo[1], c->whi[1], c->wlo[2], c->whi[2], c->G[0], c->G[1], c->G[2],
             c->corners, weft_datatype_name(c->dt), use_cart ? " cart" : "");
    geo_t g;
    geo_of(c, t->rank, &g);
    weft_comm_t comm = t->comm;
    MPI_Comm cart = MPI_COMM_NULL;
    weft_halo_params_t hp = WEFT_HALO_PARAMS_INITIALIZER;
    hp.ndims = c->nd;
    hp.nlead = c->nlead;
    hp.dtype = c->dt;
    hp.corners = c->corners;
    for (int i = 0; i < c->nlead; i++) hp.lead[i] = c->lead[i];
    for (int d = 0; d < c->nd; d++) {
        hp.grid[d] = use_cart ? 0 : c->grid[d];
        hp.periodic[d] = c->periodic[d];
        hp.local[d] = g.n[d];
        hp.width_lo[d] = c->wlo[d];
        hp.width_hi[d] = c->whi[d];
    }
    if (use_cart) {
        int per[3] = {c->periodic[0], c->periodic[1], c->periodic[2]};
        MPI_Cart_create(MPI_COMM_WORLD, c->nd, (int *)c->grid, per, 0, &cart);
        if (!MT_STATUS(t, weft_comm_create(cart, NULL, &comm), WEFT_SUCCESS, "comm_create cart")) {
            MPI_Comm_free(&cart);
            return;
        }
    }
    weft_halo_plan_t plan = NULL;
    if (!MT_STATUS(t, weft_halo_plan_create(comm, &hp, &plan), WEFT_SUCCESS, what)) goto out;
    size_t count = 0;
    weft_halo_buffer_count(plan, &count);
    MT_CHECK(t, count == g.total, "%s: buffer count %zu, expected %zu", what, count, g.total);
    int pco[3];
    weft_halo_coords(plan, pco);
    for (int d = 0; d < c->nd; d++)
        MT_CHECK(t, pco[d] == g.co[d], "%s: plan coords[%d] = %d, expected %d", what, d, pco[d], g.co[d]);

    double *buf = malloc(g.total * sizeof(double)), *exp = malloc(g.total * sizeof(double));
    void *data = malloc(g.total * mt_dtype_size(c->dt));
    if (!buf || !exp || !data) {
        mt_error(t, "out of memory");
        goto free_out;
    }
    size_t outer = outer_of(c), i[3];
    long gw[3];
    /* initial values and expectations */
    for (size_t o = 0; o < outer; o++)
        for (i[0] = 0; i[0] < g.ext[0]; i[0]++)
            for (i[1] = 0; i[1] < g.ext[1]; i[1]++)
                for (i[2] = 0; i[2] < g.ext[2]; i[2]++) {
                    size_t k = idx(&g, o, i);
                    long gl[3];
                    int cl = classify(c, &g, i, gw);
                    for (int d = 0; d < 3; d++) gl[d] = gw[d];
                    if (mode == 0) {
                        buf[k] = cl == 0 ? code(c, o, gl) : SENTINEL;
                        exp[k] = cl == 2 ? SENTINEL : code(c, o, gl);
                    } else {
                        /* interior: small code; halo: this rank's marker */
                        buf[k] = cl == 0 ? (double)((k % 7) * 64) : (double)(t->rank + 1);
                        exp[k] = buf[k];
                    }
                }
    if (mode == 1) {
        /* Every rank q's halo cells with an owner add (q+1) into the owner's cell
         * if that owner is this rank. */
        for (int q = 0; q < t->size; q++) {
            geo_t h;
            geo_of(c, q, &h);
            for (size_t o = 0; o < outer; o++)
                for (i[0] = 0; i[0] < h.ext[0]; i[0]++)
                    for (i[1] = 0; i[1] < h.ext[1]; i[1]++)
                        for (i[2] = 0; i[2] < h.ext[2]; i[2]++) {
                            if (classify(c, &h, i, gw) != 1) continue;
                            size_t li[3];
                            int mine = 1;
                            for (int d = 0; d < 3; d++) {
                                if (d >= c->nd) { li[d] = 0; continue; }
                                long l = gw[d] - (long)g.off[d];
                                if (l < 0 || l >= (long)g.n[d]) mine = 0;
                                li[d] = (size_t)(l + c->wlo[d]);
                            }
                            if (mine) exp[idx(&g, o, li)] += q + 1;
                        }
        }
    }
    for (size_t k = 0; k < g.total; k++) mt_set(data, k, c->dt, buf[k]);

    weft_status_t st;
    if (mode == 0 && c->corners) {
        /* the overlap pattern: start, "compute", test, wait */
        st = weft_halo_start(plan, data);
        if (MT_STATUS(t, st, WEFT_SUCCESS, what)) {
            MT_STATUS(t, weft_halo_start(plan, data), WEFT_ERR_INVALID_ARG, "second start in flight");
            volatile double s = 0;
            for (int k = 0; k < 10000; k++) s += k;
            int dn = 0;
            MT_STATUS(t, weft_halo_test(plan, &dn), WEFT_SUCCESS, "halo_test");
            st = weft_halo_wait(plan);
        }
    } else {
        st = mode ? weft_halo_accumulate(plan, data) : weft_halo_exchange(plan, data);
    }
    if (MT_STATUS(t, st, WEFT_SUCCESS, what)) {
        size_t bad = 0;
        for (size_t k = 0; k < g.total; k++) {
            double v = mt_get(data, k, c->dt);
            if (v != exp[k]) {
                if (bad < 5)
                    mt_error(t, "%s: element %zu is %g, expected %g", what, k, v, exp[k]);
                bad++;
            }
        }
        if (bad > 5) mt_error(t, "%s: %zu wrong elements in all", what, bad);
    }
free_out:
    free(buf), free(exp), free(data);
    MT_STATUS(t, weft_halo_plan_destroy(plan), WEFT_SUCCESS, "plan_destroy");
out:
    if (use_cart) {
        weft_comm_destroy(comm);
        MPI_Comm_free(&cart);
    }
}

/* Grids for this many ranks: {nd, g0, g1, g2}. */
static int grids_for(int p, int out[][4])
{
    int n = 0;
#define G(a, b, c, d) (out[n][0] = a, out[n][1] = b, out[n][2] = c, out[n][3] = d, n++)
    G(1, p, 1, 1);
    G(2, 1, p, 1);
    G(2, p, 1, 1);
    G(3, 1, 1, p);
    if (p == 4) { G(2, 2, 2, 1); G(3, 1, 2, 2); }
#undef G
    return n;
}

static void sweep(mt_ctx_t *t)
{
    static const int widths[][2] = {{1, 1}, {0, 2}, {2, 1}, {3, 3}, {0, 0}};
    int grids[8][4], ng = grids_for(t->size, grids);
    int cases = 0;
    for (int gi = 0; gi < ng; gi++)
        for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
            for (int per = 0; per < 2; per++)
                for (int corners = 0; corners < 2; corners++)
                    for (int mode = 0; mode < 2; mode++) {
                        cfg_t c;
                        memset(&c, 0, sizeof c);
                        c.nd = grids[gi][0];
                        for (int d = 0; d < c.nd; d++) {
                            c.grid[d] = grids[gi][1 + d];
                            c.periodic[d] = per ? 1 : (d == 0 && corners); /* mixed too */
                            /* second-dimension widths differ from the first */
                            c.wlo[d] = widths[(wi + (size_t)d) % 5][0];
                            c.whi[d] = widths[(wi + (size_t)d) % 5][1];
                            /* uneven: at least 3 cells each, sizes differ by one */
                            c.G[d] = (size_t)c.grid[d] * (3 + (size_t)d) + (c.grid[d] > 1 ? 1 : 0);
                        }
                        for (int d = c.nd; d < 3; d++) c.G[d] = 1;
                        c.corners = corners;
                        c.nlead = (gi + (int)wi) % 3;
                        c.lead[0] = 2, c.lead[1] = 3;
                        c.dt = wi == 1 ? WEFT_FLOAT32 : wi == 2 ? WEFT_INT32 : WEFT_FLOAT64;
                        run_cfg(t, &c, mode, 0);
                        cases++;
                    }
    /* a plan from an MPI_Cart communicator */
    for (int per = 0; per < 2; per++) {
        cfg_t c;
        memset(&c, 0, sizeof c);
        c.nd = 2;
        c.grid[0] = t->size == 4 ? 2 : 1;
        c.grid[1] = t->size == 4 ? 2 : t->size;
        c.periodic[0] = per, c.periodic[1] = per;
        c.wlo[0] = c.whi[0] = c.wlo[1] = c.whi[1] = 1;
        c.G[0] = 7, c.G[1] = 9, c.G[2] = 1;
        c.corners = 1;
        c.dt = WEFT_FLOAT64;
        run_cfg(t, &c, 0, 1);
        cases++;
    }
    /* Faces of tens of KiB in both dimensions (periodic: every rank exchanges
     * both, on any grid), strided in the fastest one, so that a transport that
     * packs its own fragments (UCX) may cut them inside rows and elements
     * (tests/unit/test_halo_pack.c cuts them every way). 16 channels, widths 2
     * and 1, both modes. */
    for (int mode = 0; mode < 2; mode++) {
        cfg_t c;
        memset(&c, 0, sizeof c);
        c.nd = 2;
        c.grid[0] = t->size == 4 ? 2 : 1;
        c.grid[1] = t->size == 4 ? 2 : t->size;
        c.periodic[0] = c.periodic[1] = 1;
        c.wlo[0] = c.whi[0] = 1;
        c.wlo[1] = c.whi[1] = 2;
        c.G[0] = 301 * (size_t)c.grid[0];
        c.G[1] = 257 * (size_t)c.grid[1] + 1;
        c.G[2] = 1;
        c.corners = 1;
        c.nlead = 1;
        c.lead[0] = 16;
        c.dt = WEFT_FLOAT32;
        run_cfg(t, &c, mode, 0);
        cases++;
    }
    mt_info(t, "halo: %d configurations", cases);
}

static void bad_plans(mt_ctx_t *t)
{
    weft_halo_plan_t plan = NULL;
    weft_halo_params_t hp = WEFT_HALO_PARAMS_INITIALIZER;
    hp.ndims = 1;
    hp.grid[0] = t->size + 1; /* does not match the communicator */
    hp.local[0] = 10;
    hp.width_lo[0] = hp.width_hi[0] = 1;
    hp.dtype = WEFT_FLOAT32;
    MT_STATUS(t, weft_halo_plan_create(t->comm, &hp, &plan), WEFT_ERR_HALO_PLAN, "grid != size");
    MT_CHECK(t, plan == NULL, "plan set on failure");

    hp.grid[0] = t->size;
    hp.periodic[0] = 1;
    hp.local[0] = 2;
    hp.width_hi[0] = 3; /* wider than the block */
    MT_STATUS(t, weft_halo_plan_create(t->comm, &hp, &plan), WEFT_ERR_HALO_PLAN, "width > block");

    /* only the last rank's block is too narrow: everyone must refuse */
    hp.local[0] = t->rank == t->size - 1 ? 1 : 5;
    hp.width_hi[0] = 2;
    MT_STATUS(t, weft_halo_plan_create(t->comm, &hp, &plan), WEFT_ERR_HALO_PLAN, "one narrow block");

    /* ranks disagree on the width */
    hp.local[0] = 5;
    hp.width_lo[0] = t->rank == 0 ? 2 : 1;
    if (t->size > 1)
        MT_STATUS(t, weft_halo_plan_create(t->comm, &hp, &plan), WEFT_ERR_HALO_PLAN, "width mismatch");

    /* no grid and no Cartesian topology */
    hp.width_lo[0] = 1;
    hp.grid[0] = 0;
    MT_STATUS(t, weft_halo_plan_create(t->comm, &hp, &plan), WEFT_ERR_HALO_PLAN, "no grid, no cart");

    hp.grid[0] = t->size;
    hp.ndims = 4;
    MT_STATUS(t, weft_halo_plan_create(t->comm, &hp, &plan), WEFT_ERR_HALO_PLAN, "ndims = 4");
    hp.ndims = 1;
    hp.size = 3;
    MT_STATUS(t, weft_halo_plan_create(t->comm, &hp, &plan), WEFT_ERR_INVALID_ARG, "size not set");
    hp.size = sizeof hp;
    MT_STATUS(t, weft_halo_plan_create(NULL, &hp, &plan), WEFT_ERR_INVALID_COMM, "NULL comm");
    MT_STATUS(t, weft_halo_start(NULL, &hp), WEFT_ERR_INVALID_ARG, "start NULL plan");
    /* the communicator still works: a good plan after the bad ones */
    MT_STATUS(t, weft_halo_plan_create(t->comm, &hp, &plan), WEFT_SUCCESS, "good plan after bad");
    MT_STATUS(t, weft_halo_start(plan, NULL), WEFT_ERR_INVALID_ARG, "start NULL buffer");
    weft_halo_plan_destroy(plan);
}

int main(int argc, char **argv)
{
    mt_ctx_t t;
    int rc = mt_init(&t, &argc, &argv);
    if (rc != 0) return rc;
    bad_plans(&t);
    sweep(&t);
    mt_info(&t, "test_halo: %.2f s", mt_elapsed(&t));
    return mt_finish(&t);
}
