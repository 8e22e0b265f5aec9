/*
 * test_grad.c - every layer's and loss's backward against central finite
 * differences.  The scalar checked is L = sum(r * layer(x)) with a fixed
 * random r, accumulated in double; inputs are kept away from the kinks of
 * ReLU, max pooling and L1.  Also checks the accumulate mode of backward and
 * whole-model parameter gradients of a small ResNet (residual fan-out).
 */
#include "harness.h"
#include "loom.h"

#include <float.h>
#include <string.h>

static loom_rng_t rng;

/* calloc that ends the test on failure (a test must not write through NULL). */
static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (p == NULL) {
        fprintf(stderr, "test_grad: out of memory\n");
        exit(1);
    }
    return p;
}

static float *randv(size_t n, float scale)
{
    float *p = xcalloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = scale * loom_rng_normal(&rng);
    return p;
}

static float *zeros(size_t n) { return xcalloc(n, sizeof(float)); }

static double dot(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

typedef double (*lossfn_t)(void);

/* Numeric gradient of f with respect to p[0..n) (at most maxn probes,
 * evenly spread) compared with g; returns the relative error. */
static double gradcheck(lossfn_t f, float *p, const float *g, size_t n, float eps)
{
    size_t maxn = 64, step = n > maxn ? n / maxn : 1, k = 0;
    double *num = malloc(sizeof(double) * (n / step + 1)), *ana = malloc(sizeof(double) * (n / step + 1));
    for (size_t i = 0; i < n; i += step, k++) {
        float old = p[i];
        p[i] = old + eps;
        double lp = f();
        p[i] = old - eps;
        double lm = f();
        p[i] = old;
        num[k] = (lp - lm) / (2.0 * eps);
        ana[k] = g[i];
    }
    double e = t_relerr(ana, num, k);
    free(num);
    free(ana);
    return e;
}

#define TOL 2e-2

/* ------------------------------------------------------------- conv */
static loom_conv_desc_t cd;
static int cn, ch, cw;
static float *cx, *cwt, *cb, *cy, *cr, *cws;
static double conv_loss(void)
{
    loom_conv_forward(&cd, cn, ch, cw, cx, cwt, cb, cy, cws);
    int ho = loom_conv_out_size(ch, cd.kh, cd.stride_h, cd.pad_h, cd.dil_h);
    int wo = loom_conv_out_size(cw, cd.kw, cd.stride_w, cd.pad_w, cd.dil_w);
    return dot(cy, cr, (size_t)cn * cd.cout * ho * wo);
}

static void test_conv(int cin, int cout, int k, int s, int p, int d, int g, int h, int w, int n)
{
    cd = (loom_conv_desc_t){cin, cout, k, k, s, s, p, p, d, d, g, 1};
    cn = n, ch = h, cw = w;
    int ho = loom_conv_out_size(h, k, s, p, d), wo = loom_conv_out_size(w, k, s, p, d);
    size_t nx = (size_t)n * cin * h * w, nw = (size_t)cout * (cin / g) * k * k, ny = (size_t)n * cout * ho * wo;
    cx = randv(nx, 1), cwt = randv(nw, 0.3f), cb = randv(cout, 0.1f), cy = zeros(ny), cr = randv(ny, 1);
    cws = zeros(loom_conv_workspace(&cd, n, h, w));
    float *dx = zeros(nx), *dw = zeros(nw), *db = zeros(cout);
    conv_loss();
    loom_conv_backward(&cd, n, h, w, cx, cwt, cr, dx, 0, dw, db, cws);
    double ex = gradcheck(conv_loss, cx, dx, nx, 1e-2f);
    double ew = gradcheck(conv_loss, cwt, dw, nw, 1e-2f);
    double eb = gradcheck(conv_loss, cb, db, cout, 1e-2f);
    CHECK(ex < TOL && ew < TOL && eb < TOL,
          "conv cin=%d cout=%d k=%d s=%d p=%d d=%d g=%d %dx%d: dx %.2e dw %.2e db %.2e", cin, cout,
          k, s, p, d, g, h, w, ex, ew, eb);
    /* accumulate mode adds to dx */
    float *dx2 = zeros(nx);
    for (size_t i = 0; i < nx; i++)
        dx2[i] = 1.0f;
    loom_conv_backward(&cd, n, h, w, cx, cwt, cr, dx2, 1, NULL, NULL, cws);
    double md = 0.0;
    for (size_t i = 0; i < nx; i++)
        md = fmax(md, fabs(dx2[i] - 1.0f - dx[i]));
    CHECK(md < 1e-4, "conv accumulate mode differs by %g", md);
    free(cx), free(cwt), free(cb), free(cy), free(cr), free(cws), free(dx), free(dw), free(db), free(dx2);
}

/* ------------------------------------------------------------- bn */
static loom_shape_t bs;
static float *bx, *bg, *bb, *by, *br, *brm, *brv, *bsm, *bsi;
static int btrain;
static double bn_loss(void)
{
    loom_bn_desc_t d = {1e-5f, 0.1f};
    loom_bn_forward(&d, btrain, bs, bx, bg, bb, brm, brv, bsm, bsi, by);
    return dot(by, br, loom_shape_count(bs));
}

static void test_bn(void)
{
    bs = (loom_shape_t){3, 4, 5, 3};
    size_t n = loom_shape_count(bs);
    bx = randv(n, 2), bg = randv(4, 1), bb = randv(4, 1), by = zeros(n), br = randv(n, 1);
    brm = zeros(4), brv = zeros(4), bsm = zeros(4), bsi = zeros(4);
    for (int i = 0; i < 4; i++)
        brv[i] = 1.0f;
    btrain = 1;
    float *dx = zeros(n), *dg = zeros(4), *db = zeros(4);
    bn_loss();
    loom_bn_backward(bs, bx, bg, bsm, bsi, br, dx, 0, dg, db);
    double ex = gradcheck(bn_loss, bx, dx, n, 1e-2f);
    double eg = gradcheck(bn_loss, bg, dg, 4, 1e-2f);
    double eb = gradcheck(bn_loss, bb, db, 4, 1e-2f);
    CHECK(ex < TOL && eg < TOL && eb < TOL, "batchnorm: dx %.2e dgamma %.2e dbeta %.2e", ex, eg, eb);
    /* inference uses running statistics: y = (x - rm)/sqrt(rv+eps)*g + b */
    btrain = 0;
    brm[0] = 0.5f, brv[0] = 4.0f;
    bn_loss();
    float want = (bx[0] - 0.5f) / sqrtf(4.0f + 1e-5f) * bg[0] + bb[0];
    CHECK(fabsf(by[0] - want) < 1e-5f, "batchnorm inference %f vs %f", by[0], want);
    /* running stats move toward the batch statistics */
    brm[1] = 0.0f;
    float rm0 = brm[1];
    btrain = 1;
    bn_loss();
    CHECK(brm[1] != rm0, "batchnorm running mean not updated");
    free(bx), free(bg), free(bb), free(by), free(br), free(brm), free(brv), free(bsm), free(bsi);
    free(dx), free(dg), free(db);
}

/* ------------------------------------------------- element-wise and pool */
static int which;
static loom_shape_t es;
static loom_pool_desc_t pd;
static float *ex_, *ey, *er, *emask;
static int32_t *eargmax;
static size_t eny;
static int er_r;
static loom_rng_t drop_rng;

static double elt_loss(void)
{
    size_t n = loom_shape_count(es);
    switch (which) {
    case 0: loom_relu_forward(n, ex_, ey); break;
    case 1: loom_sigmoid_forward(n, ex_, ey); break;
    case 2: loom_maxpool_forward(&pd, es, ex_, ey, eargmax); break;
    case 3: loom_avgpool_forward(&pd, es, ex_, ey); break;
    case 4: loom_gap_forward(es, ex_, ey); break;
    case 5: {
        loom_rng_t r = drop_rng;
        loom_dropout_forward(n, 0.3f, &r, ex_, ey, emask);
        break;
    }
    case 6: loom_pixel_shuffle_forward(es, er_r, ex_, ey); break;
    }
    return dot(ey, er, eny);
}

static void elt_backward(float *dx, int acc)
{
    size_t n = loom_shape_count(es);
    switch (which) {
    case 0: loom_relu_backward(n, ey, er, dx, acc); break;
    case 1: loom_sigmoid_backward(n, ey, er, dx, acc); break;
    case 2: loom_maxpool_backward(&pd, es, er, eargmax, dx, acc); break;
    case 3: loom_avgpool_backward(&pd, es, er, dx, acc); break;
    case 4: loom_gap_backward(es, er, dx, acc); break;
    case 5: loom_dropout_backward(n, emask, er, dx, acc); break;
    case 6: loom_pixel_shuffle_backward(es, er_r, er, dx, acc); break;
    }
}

static void test_elt(int w, const char *name, loom_shape_t s, size_t ny)
{
    which = w;
    es = s;
    eny = ny;
    size_t n = loom_shape_count(s);
    ex_ = zeros(n), ey = zeros(ny > n ? ny : n), er = randv(ny, 1), emask = zeros(n);
    eargmax = calloc(ny, sizeof(int32_t));
    /* distinct values spaced 0.05 apart, away from 0 (kinks) */
    for (size_t i = 0; i < n; i++) {
        float v = 0.05f * (float)((i * 7919) % (n * 2 + 1)) - 0.05f * (float)n;
        ex_[i] = v + (v >= 0 ? 0.025f : -0.025f);
    }
    float *dx = zeros(n), *dx2 = zeros(n);
    elt_loss();
    elt_backward(dx, 0);
    double e = gradcheck(elt_loss, ex_, dx, n, 5e-3f);
    CHECK(e < TOL, "%s backward: relative error %.2e", name, e);
    for (size_t i = 0; i < n; i++)
        dx2[i] = 2.0f;
    elt_loss();
    elt_backward(dx2, 1);
    double md = 0.0;
    for (size_t i = 0; i < n; i++)
        md = fmax(md, fabs(dx2[i] - 2.0f - dx[i]));
    CHECK(md < 1e-5, "%s accumulate mode differs by %g", name, md);
    free(ex_), free(ey), free(er), free(emask), free(eargmax), free(dx), free(dx2);
}

/* ------------------------------------------------------------------ fc */
static float *fx, *fw, *fb, *fy, *fr;
static int fn_ = 5, fin = 7, fout = 4;
static double fc_loss(void)
{
    loom_fc_forward(fn_, fin, fout, fx, fw, fb, fy);
    return dot(fy, fr, (size_t)fn_ * fout);
}

static void test_fc(void)
{
    fx = randv((size_t)fn_ * fin, 1), fw = randv((size_t)fin * fout, 1), fb = randv(fout, 1);
    fy = zeros((size_t)fn_ * fout), fr = randv((size_t)fn_ * fout, 1);
    float *dx = zeros((size_t)fn_ * fin), *dw = zeros((size_t)fin * fout), *db = zeros(fout);
    fc_loss();
    loom_fc_backward(fn_, fin, fout, fx, fw, fr, dx, 0, dw, db);
    double ex = gradcheck(fc_loss, fx, dx, (size_t)fn_ * fin, 1e-2f);
    double ew = gradcheck(fc_loss, fw, dw, (size_t)fin * fout, 1e-2f);
    double eb = gradcheck(fc_loss, fb, db, fout, 1e-2f);
    CHECK(ex < TOL && ew < TOL && eb < TOL, "fc: dx %.2e dw %.2e db %.2e", ex, ew, eb);
    free(fx), free(fw), free(fb), free(fy), free(fr), free(dx), free(dw), free(db);
}

/* -------------------------------------------------------------- losses */
static int lk;
static float *lx, *lt;
static int32_t llab[6];
static size_t ln = 24;
static double loss_only(void)
{
    switch (lk) {
    case 0: return loom_softmax_xent(6, 4, lx, llab, NULL, NULL);
    case 1: return loom_bce_logits(ln, lx, lt, NULL);
    case 2: return loom_mse(ln, lx, lt, NULL);
    default: return loom_l1(ln, lx, lt, NULL);
    }
}

static void test_losses(void)
{
    const char *names[4] = {"softmax cross-entropy", "bce with logits", "mse", "l1"};
    for (lk = 0; lk < 4; lk++) {
        lx = randv(ln, 2), lt = zeros(ln);
        for (size_t i = 0; i < ln; i++)
            lt[i] = lk == 1 ? loom_rng_uniform(&rng) : lx[i] + (i % 2 ? 0.5f : -0.5f) + 0.3f * loom_rng_normal(&rng) * 0.1f;
        for (int i = 0; i < 6; i++)
            llab[i] = (int32_t)loom_rng_below(&rng, 4);
        float *g = zeros(ln);
        switch (lk) {
        case 0: loom_softmax_xent(6, 4, lx, llab, g, NULL); break;
        case 1: loom_bce_logits(ln, lx, lt, g); break;
        case 2: loom_mse(ln, lx, lt, g); break;
        default: loom_l1(ln, lx, lt, g); break;
        }
        double e = gradcheck(loss_only, lx, g, ln, 1e-3f);
        CHECK(e < TOL, "%s gradient: relative error %.2e", names[lk], e);
        free(lx), free(lt), free(g);
    }
    /* softmax cross-entropy of uniform logits is log(k) */
    float z[8] = {0};
    int32_t y[2] = {1, 3};
    float l = loom_softmax_xent(2, 4, z, y, NULL, NULL);
    CHECK(fabsf(l - logf(4.0f)) < 1e-6f, "xent of uniform logits %f", l);
}

/* ------------------------------------------------- whole model (graph) */
static loom_model_t *gm;
static int32_t glab[4] = {0, 1, 2, 1};
static double model_loss(void)
{
    loom_model_forward(gm, 4, 1);
    return loom_softmax_xent(4, 3, loom_model_output(gm), glab, NULL, NULL);
}

static void test_model(void)
{
    /* The graph of a residual network (fan-out to three readers, projection
     * shortcut, residual adds, strided conv, pooling, fc) with sigmoid in
     * place of ReLU so that finite differences see a smooth function. */
    int st, x, s1, b1, b2, a, y;
    st = loom_model_create(&gm, "graph", (loom_shape_t){4, 2, 8, 8});
    CHECK(st == 0, "model create: %s", loom_last_error());
    if (st)
        return;
    x = loom_input(gm);
    s1 = loom_add_sigmoid(gm, "s1", loom_add_bn(gm, "bn0", loom_add_conv(gm, "c0", x, 4, 3, 1, 1, 1, 1, 0)));
    b1 = loom_add_bn(gm, "bn1", loom_add_conv(gm, "c1", s1, 4, 3, 1, 1, 1, 1, 0));
    b2 = loom_add_bn(gm, "bn2", loom_add_conv(gm, "c2", s1, 4, 1, 1, 0, 1, 1, 1));
    a = loom_add_sigmoid(gm, "s2", loom_add_add(gm, "add1", b1, b2));
    a = loom_add_add(gm, "add2", a, s1);
    y = loom_add_conv(gm, "c3", a, 6, 3, 2, 1, 1, 2, 1);
    y = loom_add_sigmoid(gm, "s3", loom_add_bn(gm, "bn3", y));
    y = loom_add_avgpool(gm, "pool", y, 2, 2, 0);
    y = loom_add_fc(gm, "fc", loom_add_gap(gm, "gap", y), 3);
    st = loom_model_finish(gm, y, 9);
    CHECK(st == 0, "graph model: %s", loom_last_error());
    if (st)
        return;
    float *in = loom_model_input(gm);
    for (int i = 0; i < 4 * 2 * 64; i++)
        in[i] = loom_rng_normal(&rng);
    model_loss();
    loom_softmax_xent(4, 3, loom_model_output(gm), glab, loom_model_doutput(gm), NULL);
    loom_model_zero_grad(gm);
    loom_model_backward(gm, 4);
    int np = loom_model_num_params(gm), bad = 0;
    for (int i = 0; i < np; i++) {
        loom_param_t *p = loom_model_param(gm, i);
        double e = gradcheck(model_loss, p->data, p->grad, p->count, 1e-2f);
        if (e > TOL) {
            bad++;
            fprintf(stderr, "  param %s: relative error %.2e\n", p->name, e);
        }
    }
    CHECK(bad == 0, "model parameter gradients: %d of %d tensors off", bad, np);
    loom_model_destroy(gm);
}

/* Pooling forward against a direct reference: every kernel offset of every
 * window, out-of-range taps skipped by explicit bounds checks (the gradient
 * checks above compare backward with the forward, so a window clipped wrong
 * in both would pass them).  Max and average, strides 1-3, padding 0-2,
 * windows reaching past the input on every side; bitwise equal (the same
 * taps in the same order). */
static void test_pool_forward_ref(void)
{
    static const int cfg[][4] = {{3, 2, 1, 7}, {2, 2, 0, 6}, {3, 1, 1, 5}, {5, 3, 2, 9}, {1, 1, 0, 4},
                                 {4, 2, 2, 5}, {3, 3, 0, 8}};
    for (size_t t = 0; t < sizeof cfg / sizeof cfg[0]; t++) {
        int k = cfg[t][0], st = cfg[t][1], pad = cfg[t][2], h = cfg[t][3], w = h + 1;
        loom_pool_desc_t d = {k, k, st, st, pad, pad};
        loom_shape_t sh = {2, 3, h, w};
        int ho = (h + 2 * pad - k) / st + 1, wo = (w + 2 * pad - k) / st + 1;
        size_t nin = loom_shape_count(sh), nout = (size_t)2 * 3 * ho * wo;
        float *x = randv(nin, 1.0f), *ymax = zeros(nout), *yavg = zeros(nout);
        int32_t *am = xcalloc(nout, sizeof(int32_t));
        loom_maxpool_forward(&d, sh, x, ymax, am);
        loom_avgpool_forward(&d, sh, x, yavg);
        int bad_max = 0, bad_avg = 0;
        for (int nc = 0; nc < 6; nc++)
            for (int oh = 0; oh < ho; oh++)
                for (int ow = 0; ow < wo; ow++) {
                    float best = -FLT_MAX, acc = 0.0f;
                    int any = 0, best_at = -1; /* best's index in the channel's plane */
                    for (int ki = 0; ki < k; ki++)
                        for (int kj = 0; kj < k; kj++) {
                            int ih = oh * st - pad + ki, iw = ow * st - pad + kj;
                            if (ih < 0 || ih >= h || iw < 0 || iw >= w)
                                continue;
                            float v = x[(size_t)nc * h * w + (size_t)ih * w + iw];
                            if (!any || v > best) {
                                best = v;
                                best_at = ih * w + iw;
                            }
                            any = 1;
                            acc += v;
                        }
                    size_t o = (size_t)nc * ho * wo + (size_t)oh * wo + ow;
                    bad_max += ymax[o] != (any ? best : 0.0f) || am[o] != best_at;
                    bad_avg += yavg[o] != acc * (1.0f / (float)(k * k));
                }
        CHECK(!bad_max && !bad_avg, "pooling forward k%d s%d p%d %dx%d: %d max (value or argmax) and %d avg "
              "outputs differ from the reference", k, st, pad, h, w, bad_max, bad_avg);
        free(x);
        free(ymax);
        free(yavg);
        free(am);
    }
}

int main(void)
{
    loom_set_threads(1);
    loom_rng_seed(&rng, 42);
    loom_rng_seed(&drop_rng, 5);
    /* cin, cout, k, stride, pad, dil, groups, h, w, n */
    test_conv(3, 4, 3, 1, 1, 1, 1, 5, 6, 2);
    test_conv(4, 6, 3, 2, 1, 1, 2, 7, 5, 2);
    test_conv(2, 3, 3, 1, 2, 2, 1, 6, 6, 3);
    test_conv(4, 4, 1, 1, 0, 1, 1, 4, 3, 2);  /* pointwise fast path */
    test_conv(4, 4, 3, 1, 1, 1, 4, 5, 5, 2);  /* depthwise */
    test_conv(3, 2, 1, 2, 0, 1, 1, 5, 5, 2);  /* strided 1x1 shortcut */
    test_bn();
    test_elt(0, "relu", (loom_shape_t){2, 3, 4, 4}, 96);
    test_elt(1, "sigmoid", (loom_shape_t){2, 3, 4, 4}, 96);
    pd = (loom_pool_desc_t){3, 3, 2, 2, 1, 1};
    test_elt(2, "maxpool", (loom_shape_t){2, 2, 5, 6}, 2 * 2 * 3 * 3);
    test_elt(3, "avgpool", (loom_shape_t){2, 2, 5, 6}, 2 * 2 * 3 * 3);
    test_pool_forward_ref();
    test_elt(4, "global avgpool", (loom_shape_t){2, 3, 4, 5}, 6);
    test_elt(5, "dropout", (loom_shape_t){2, 3, 4, 4}, 96);
    er_r = 2;
    test_elt(6, "pixel shuffle", (loom_shape_t){2, 8, 3, 2}, 96);
    test_fc();
    test_losses();
    test_model();
    return t_done();
}
