/*
 * test_spatial.c (run under mpiexec -n 2 or 4) - a spatially split forward
 * and backward equals the single-process run, layer by layer.
 *
 * Every rank builds the unsplit model and runs it alone (the reference),
 * then builds the same model for its tile, copies the reference weights,
 * and runs it through the spatial executor over the grid.  Compared, each
 * with max|a - b| <= 1e-5 * max|b| over the tensor: every layer's output
 * tile, every layer's input-gradient tile (captured by the backward hook
 * right after the layer ran), and the weight gradients summed over the
 * grid.  Grids: 1x2 and 2x1 on 2 ranks, 2x2 on 4; uneven tile heights and
 * widths; kernels 1, 3, 5, 7 with strides 1 and 2; batch norm (statistics
 * over the group) with a residual add and a pixel shuffle; a tiny EDSR (x2
 * and x4: residual scaling, pixel shuffles, uneven tiles); the mesh model.
 * The mesh model is 26 layers deep with 8 batch norms whose last ones see
 * only 30 values per channel, so float rounding compounds along the chain:
 * its end-to-end tolerance is 5e-5 (measured: up to about 2e-5), the single
 * layers' and the short chain's is 1e-5.
 */
#include "../src/internal.h" /* loom__model_unfuse */
#include "harness_mpi.h"
#include "loom.h"
#include "loom_mesh.h"
#include "loom_par.h"

#include <string.h>

enum { MAXOPS = 64 };

typedef struct {
    loom_model_t *m;
    float *snap[MAXOPS];   /* input gradient of op i after its backward */
    loom_shape_t shape[MAXOPS];
} cap_t;

static int capture(void *arg, int op, size_t ready)
{
    cap_t *c = arg;
    (void)ready;
    loom_op_info_t in;
    loom_model_op_info(c->m, op, &in);
    int a = in.inplace ? in.out : in.in[0];
    float *g = a == 0 ? NULL : loom_model_act_grad(c->m, a);
    if (!g || op >= MAXOPS)
        return 0;
    size_t n = loom_shape_count(in.in_shape);
    free(c->snap[op]);
    c->snap[op] = malloc(sizeof(float) * n);
    if (!c->snap[op])
        return LOOM_ERR_NOMEM;
    memcpy(c->snap[op], g, sizeof(float) * n);
    c->shape[op] = in.in_shape;
    return 0;
}

static void cap_free(cap_t *c)
{
    for (int i = 0; i < MAXOPS; i++)
        free(c->snap[i]);
}

/* max |tile - ref[region]| / max |ref[region]| ; ref is [n,c,H,W], tile [n,c,h,w] at (oy,ox) */
static double tile_err(const float *tile, loom_shape_t ts, const float *ref, loom_shape_t rs, int oy,
                       int ox)
{
    double num = 0.0, den = 1e-30;
    for (int q = 0; q < ts.n * ts.c; q++)
        for (int y = 0; y < ts.h; y++)
            for (int x = 0; x < ts.w; x++) {
                double a = tile[((size_t)q * ts.h + y) * ts.w + x];
                double b = ref[((size_t)q * rs.h + y + oy) * rs.w + x + ox];
                num = fmax(num, fabs(a - b));
                den = fmax(den, fabs(b));
            }
    return num / den;
}

typedef int (*build_fn)(loom_model_t **m, loom_shape_t in, int arg);

static int build_conv(loom_model_t **m, loom_shape_t in, int ks)
{
    int k = ks / 10, s = ks % 10, st, x;
    if ((st = loom_model_create(m, "conv", in)) < 0)
        return st;
    x = loom_add_conv(*m, "pre", loom_input(*m), 4, 1, 1, 0, 1, 1, 1);
    x = loom_add_conv(*m, "conv", x, 5, k, s, (k - 1) / 2, 1, 1, 1);
    return x < 0 ? x : loom_model_finish(*m, x, 7);
}

static int build_bn(loom_model_t **m, loom_shape_t in, int unused)
{
    int st, x;
    (void)unused;
    if ((st = loom_model_create(m, "bnchain", in)) < 0)
        return st;
    x = loom_add_conv(*m, "c1", loom_input(*m), 6, 3, 1, 1, 1, 1, 0);
    x = loom_add_bn(*m, "bn1", x);
    x = loom_add_relu(*m, "r1", x);
    int skip = x;
    x = loom_add_conv(*m, "c2", x, 6, 3, 1, 1, 1, 1, 0);
    x = loom_add_bn(*m, "bn2", x);
    x = loom_add_add(*m, "res", x, skip);
    x = loom_add_conv(*m, "c3", x, 8, 5, 2, 2, 1, 1, 1);
    x = loom_add_relu(*m, "r3", x);
    x = loom_add_bn(*m, "bn3", x);
    x = loom_add_conv(*m, "c4", x, 4, 1, 1, 0, 1, 1, 1);
    x = loom_add_pixel_shuffle(*m, "up", x, 2);
    x = loom_add_sigmoid(*m, "sig", x);
    return x < 0 ? x : loom_model_finish(*m, x, 9);
}

static int build_mesh(loom_model_t **m, loom_shape_t in, int unused)
{
    (void)unused;
    return loom_mesh_model_create(m, in, 0.125f, 5);
}

/* A tiny EDSR (2 blocks, 8 features, residual scaling 0.1, x2 or x4
 * upsampler): every convolution 3x3 stride 1, halo 1. */
static int build_edsr(loom_model_t **m, loom_shape_t in, int scale)
{
    loom_edsr_desc_t d = {2, 8, scale, 0.1f};
    return loom_edsr_create(m, "edsr-tiny", &d, in, 13);
}

static void fill(float *p, size_t n, uint64_t seed)
{
    loom_rng_t r;
    loom_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        p[i] = loom_rng_normal(&r);
}

static void run_case(const char *name, build_fn b, int arg, loom_shape_t g, int align, int sh,
                     int sw, weft_comm_t comm, int rank, double tol)
{
    loom_model_t *ref = NULL, *loc = NULL;
    loom_spatial_t *sp = NULL;
    cap_t cr = {0}, cl = {0};
    float *rgrad = NULL, *dout = NULL;
    int oy, ox, th, tw, st;
    loom_spatial_split(g.h, sh, align, rank / sw, &oy, &th);
    loom_spatial_split(g.w, sw, align, rank % sw, &ox, &tw);
    st = b(&ref, g, arg);
    CHECK(st == 0, "%s: reference model: %s", name, loom_last_error());
    st = st < 0 ? st : b(&loc, (loom_shape_t){g.n, g.c, th, tw}, arg);
    CHECK(st == 0, "%s: tile model: %s", name, loom_last_error());
    if (st < 0)
        goto out;
    memcpy(loom_model_params(loc), loom_model_params(ref), sizeof(float) * loom_model_param_count(ref));
    st = loom_spatial_create(&sp, loc, comm, sh, sw, oy, ox, g.h, g.w);
    CHECK(st == 0, "%s: spatial executor: %s", name, loom_last_error());
    if (st < 0)
        goto out;
    /* reference, single process, one layer at a time: the hook below reads
     * every layer's input gradient, which a ReLU fused into its producer
     * leaves to the producer's backward */
    loom__model_unfuse(ref);
    fill(loom_model_input(ref), loom_shape_count(g), 11);
    cr.m = ref;
    loom_model_set_backward_hook(ref, capture, &cr);
    loom_model_zero_grad(ref);
    loom_shape_t os = loom_model_output_shape(ref);
    st = loom_model_forward(ref, g.n, 1);
    fill(loom_model_doutput(ref), loom_shape_count(os), 12);
    /* kept aside: the gradient buffers are reused during backward */
    dout = malloc(sizeof(float) * loom_shape_count(os));
    if (!dout)
        goto out;
    memcpy(dout, loom_model_doutput(ref), sizeof(float) * loom_shape_count(os));
    st = st < 0 ? st : loom_model_backward(ref, g.n);
    CHECK(st == 0, "%s: reference run: %s", name, loom_last_error());
    /* split */
    loom_shape_t ls = loom_model_input_shape(loc), lo = loom_model_output_shape(loc);
    for (int q = 0; q < g.n * g.c; q++)
        for (int y = 0; y < th; y++)
            memcpy(loom_model_input(loc) + ((size_t)q * th + y) * tw,
                   loom_model_input(ref) + ((size_t)q * g.h + y + oy) * g.w + ox, sizeof(float) * (size_t)tw);
    cl.m = loc;
    loom_spatial_set_backward_hook(sp, capture, &cl);
    loom_model_zero_grad(loc);
    st = loom_spatial_forward(sp, g.n, 1);
    CHECK(st == 0, "%s: spatial forward: %s", name, loom_last_error());
    /* the output-gradient tile of the reference's */
    for (int q = 0; q < lo.n * lo.c; q++)
        for (int y = 0; y < lo.h; y++)
            memcpy(loom_model_doutput(loc) + ((size_t)q * lo.h + y) * lo.w,
                   dout + ((size_t)q * os.h + y + oy * os.h / g.h) * os.w +
                       ox * os.w / g.w, sizeof(float) * (size_t)lo.w);
    st = st < 0 ? st : loom_spatial_backward(sp, g.n);
    CHECK(st == 0, "%s: spatial backward: %s", name, loom_last_error());
    if (st < 0)
        goto out;
    (void)ls;
    double worst_f = 0.0, worst_b = 0.0;
    int nops = loom_model_num_ops(loc);
    for (int i = 0; i < nops; i++) {
        loom_op_info_t ri, li;
        loom_model_op_info(ref, i, &ri);
        loom_model_op_info(loc, i, &li);
        loom_shape_t rs = ri.out_shape, ts = li.out_shape;
        int ay = oy * rs.h / g.h, ax = ox * rs.w / g.w;
        double e = tile_err(loom_model_act(loc, li.out), ts, loom_model_act(ref, ri.out), rs, ay, ax);
        worst_f = fmax(worst_f, e);
        CHECK(e <= tol, "%s: grid %dx%d rank %d: forward of layer %s differs by %.3g", name, sh, sw,
              rank, li.name, e);
        if (cr.snap[i] && cl.snap[i]) {
            loom_shape_t gr = cr.shape[i], gl = cl.shape[i];
            e = tile_err(cl.snap[i], gl, cr.snap[i], gr, oy * gr.h / g.h, ox * gr.w / g.w);
            worst_b = fmax(worst_b, e);
            CHECK(e <= tol, "%s: grid %dx%d rank %d: input gradient of layer %s differs by %.3g", name,
                  sh, sw, rank, li.name, e);
        } else {
            CHECK(!cr.snap[i] == !cl.snap[i], "%s: layer %s: gradient captured on one side only", name,
                  li.name);
        }
    }
    /* weight gradients: the sum over the grid is the unsplit gradient */
    size_t np = loom_model_param_count(loc);
    rgrad = malloc(sizeof(float) * np);
    if (rgrad) {
        memcpy(rgrad, loom_model_grads(loc), sizeof(float) * np);
        int ws = weft_allreduce(WEFT_IN_PLACE, rgrad, np, WEFT_FLOAT32, WEFT_SUM, comm);
        CHECK(ws == WEFT_SUCCESS, "weft_allreduce: %s", weft_strerror(ws));
        double worst_w = 0.0;
        for (int p = 0; p < loom_model_num_params(loc); p++) {
            loom_param_t *pp = loom_model_param(ref, p);
            loom_shape_t s1 = {1, 1, 1, (int)pp->count};
            double e = tile_err(rgrad + pp->offset, s1, pp->grad, s1, 0, 0);
            worst_w = fmax(worst_w, e);
            CHECK(e <= tol, "%s: grid %dx%d: weight gradient %s differs by %.3g", name, sh, sw,
                  pp->name, e);
        }
        /* batch-norm running statistics match too */
        double e = tile_err(loom_model_buffers(loc), (loom_shape_t){1, 1, 1, (int)loom_model_buffer_count(loc)},
                            loom_model_buffers(ref), (loom_shape_t){1, 1, 1, (int)loom_model_buffer_count(ref)}, 0, 0);
        CHECK(loom_model_buffer_count(loc) == 0 || e <= tol, "%s: running statistics differ by %.3g",
              name, e);
        if (rank == 0)
            printf("%-22s grid %dx%d input %dx%d (tile %dx%d at rank 0): max rel err forward %.2g, "
                   "input grads %.2g, weight grads %.2g\n",
                   name, sh, sw, g.h, g.w, th, tw, worst_f, worst_b, worst_w);
    }
out:
    free(dout);
    free(rgrad);
    cap_free(&cr);
    cap_free(&cl);
    loom_spatial_destroy(sp);
    loom_model_destroy(loc);
    loom_model_destroy(ref);
}

int main(int argc, char **argv)
{
    int rank, size;
    if (t_mpi_init(&argc, &argv, &rank, &size) != 0)
        return 1;
    int grids[3][2], ng = 0;
    if (size == 2) {
        grids[ng][0] = 1, grids[ng][1] = 2, ng++;
        grids[ng][0] = 2, grids[ng][1] = 1, ng++;
    } else if (size == 4) {
        grids[ng][0] = 2, grids[ng][1] = 2, ng++;
    } else {
        grids[ng][0] = size, grids[ng][1] = 1, ng++;
    }
    loom_layout_t lay;
    int st = loom_layout_create(&lay, MPI_COMM_WORLD, 1, size, 1);
    CHECK(st == 0, "layout: %s", loom_last_error());
    for (int gi = 0; st == 0 && gi < ng; gi++) {
        int sh = grids[gi][0], sw = grids[gi][1];
        char nm[40];
        for (int k = 1; k <= 7; k += 2) {
            snprintf(nm, sizeof nm, "conv k%d s1", k);
            run_case(nm, build_conv, k * 10 + 1, (loom_shape_t){2, 3, 13, 11}, 1, sh, sw, lay.spatial, rank, 1e-5);
            snprintf(nm, sizeof nm, "conv k%d s2", k);
            run_case(nm, build_conv, k * 10 + 2, (loom_shape_t){2, 3, 14, 10}, 2, sh, sw, lay.spatial, rank, 1e-5);
        }
        run_case("conv+bn+add+shuffle", build_bn, 0, (loom_shape_t){2, 3, 18, 14}, 2, sh, sw, lay.spatial, rank, 1e-5);
        run_case("edsr x2 (tiny)", build_edsr, 2, (loom_shape_t){2, 3, 12, 10}, 1, sh, sw, lay.spatial, rank, 1e-5);
        run_case("edsr x4 (tiny)", build_edsr, 4, (loom_shape_t){1, 3, 9, 8}, 1, sh, sw, lay.spatial, rank, 1e-5);
        run_case("mesh model", build_mesh, 0, (loom_shape_t){2, 18, 40, 24}, 8, sh, sw, lay.spatial, rank, 5e-5);
    }
    {
        /* A grid that does not match the group is refused with a message. */
        loom_model_t *m = NULL;
        loom_spatial_t *sp = NULL;
        if (build_conv(&m, (loom_shape_t){1, 3, 8, 8}, 31) == 0) {
            int bs = loom_spatial_create(&sp, m, lay.spatial, size + 1, 1, 0, 0, 8, 8);
            CHECK(bs == LOOM_ERR_INVALID && strstr(loom_last_error(), "grid"), "bad grid accepted");
            loom_spatial_destroy(sp);
        }
        loom_model_destroy(m);
    }
    loom_layout_destroy(&lay);
    return t_mpi_done(rank, size);
}
