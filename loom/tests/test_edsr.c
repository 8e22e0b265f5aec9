/*
 * test_edsr.c - EDSR and its data path.
 *
 * 1. A tiny EDSR (2 blocks, 8 features, residual scaling 0.1; x2, x3 and x4
 *    upsamplers) against a direct reference written here from the paper's
 *    description (naive convolution loops in double, the pixel shuffle by
 *    its index formula): the head, every block's output, the global skip,
 *    every upsampling stage and the output, max relative error <= 1e-5.
 * 2. Backward against central differences of sum(output * g) in double
 *    precision of the reference (a sample of weights of every layer).
 * 3. A short Adam run on x2 patches of a real photograph lowers the L1 loss.
 * 4. Bicubic resizing: constants stay constant, a linear ramp is reproduced
 *    exactly away from the borders (cubic convolution reproduces linear
 *    functions), with and without antialiasing; PSNR of a known error.
 */
#include "harness.h"
#include "loom.h"

#include <string.h>

#define SKIMAGE "/usr/lib/python3/dist-packages/skimage/data"

typedef struct {
    int c, h, w;
    double *v; /* one sample */
} rt_t;

static rt_t rt_new(int c, int h, int w)
{
    rt_t t = {c, h, w, calloc((size_t)c * h * w, sizeof(double))};
    return t;
}

static const loom_param_t *param(loom_model_t *m, const char *name)
{
    for (int i = 0; i < loom_model_num_params(m); i++)
        if (!strcmp(loom_model_param(m, i)->name, name))
            return loom_model_param(m, i);
    return NULL;
}

/* 3x3 conv pad 1 with bias, parameters named pre.weight / pre.bias */
static rt_t rconv(loom_model_t *m, const char *pre, rt_t x, int cout)
{
    char nw[64], nb[64];
    snprintf(nw, sizeof nw, "%s.weight", pre);
    snprintf(nb, sizeof nb, "%s.bias", pre);
    const loom_param_t *W = param(m, nw), *B = param(m, nb);
    rt_t y = rt_new(cout, x.h, x.w);
    if (!W || !B)
        return y;
    for (int o = 0; o < cout; o++)
        for (int i = 0; i < x.h; i++)
            for (int j = 0; j < x.w; j++) {
                double s = B->data[o];
                for (int c = 0; c < x.c; c++)
                    for (int ki = 0; ki < 3; ki++)
                        for (int kj = 0; kj < 3; kj++) {
                            int yi = i + ki - 1, xj = j + kj - 1;
                            if (yi < 0 || yi >= x.h || xj < 0 || xj >= x.w)
                                continue;
                            s += (double)W->data[((o * x.c + c) * 3 + ki) * 3 + kj] *
                                 x.v[((size_t)c * x.h + yi) * x.w + xj];
                        }
                y.v[((size_t)o * y.h + i) * y.w + j] = s;
            }
    return y;
}

static rt_t rshuffle(rt_t x, int r)
{
    rt_t y = rt_new(x.c / (r * r), x.h * r, x.w * r);
    for (int c = 0; c < y.c; c++)
        for (int i = 0; i < y.h; i++)
            for (int j = 0; j < y.w; j++)
                y.v[((size_t)c * y.h + i) * y.w + j] =
                    x.v[((size_t)(c * r * r + (i % r) * r + j % r) * x.h + i / r) * x.w + j / r];
    return y;
}

static size_t rcount(rt_t t) { return (size_t)t.c * t.h * t.w; }

/* compare reference tensor with sample s of the model's activation of layer `name` */
static double rcmp(loom_model_t *m, const char *name, int s, rt_t r)
{
    for (int i = 0; i < loom_model_num_ops(m); i++) {
        loom_op_info_t in;
        loom_model_op_info(m, i, &in);
        if (strcmp(in.name, name))
            continue;
        const float *a = loom_model_act(m, in.out) + (size_t)s * rcount(r);
        double num = 0.0, den = 1e-30;
        for (size_t k = 0; k < rcount(r); k++) {
            num = fmax(num, fabs(a[k] - r.v[k]));
            den = fmax(den, fabs(r.v[k]));
        }
        return num / den;
    }
    return 1e30;
}

/* The reference EDSR on one sample; checks the named points; returns the output. */
static rt_t ref_edsr(loom_model_t *m, const loom_edsr_desc_t *d, int s, rt_t x, double *worst,
                     int check)
{
    char nm[64];
    int F = d->feats;
    rt_t h = rconv(m, "head", x, F), cur = rt_new(F, x.h, x.w);
    memcpy(cur.v, h.v, sizeof(double) * rcount(h));
    if (check)
        *worst = fmax(*worst, rcmp(m, "head", s, h));
    for (int b = 0; b < d->blocks; b++) {
        snprintf(nm, sizeof nm, "body.%d.conv1", b);
        rt_t y = rconv(m, nm, cur, F);
        for (size_t k = 0; k < rcount(y); k++)
            y.v[k] = y.v[k] > 0 ? y.v[k] : 0;
        snprintf(nm, sizeof nm, "body.%d.conv2", b);
        rt_t z = rconv(m, nm, y, F);
        for (size_t k = 0; k < rcount(z); k++)
            cur.v[k] += d->res_scale * z.v[k];
        snprintf(nm, sizeof nm, "body.%d.add", b);
        if (check)
            *worst = fmax(*worst, rcmp(m, nm, s, cur));
        free(y.v);
        free(z.v);
    }
    rt_t bc = rconv(m, "body.conv", cur, F);
    for (size_t k = 0; k < rcount(bc); k++)
        bc.v[k] += h.v[k];
    if (check)
        *worst = fmax(*worst, rcmp(m, "body.skip", s, bc));
    free(cur.v);
    free(h.v);
    cur = bc;
    int stages = d->scale == 4 ? 2 : 1, r = d->scale == 3 ? 3 : 2;
    for (int st = 0; st < stages; st++) {
        snprintf(nm, sizeof nm, "upsample.%d.conv", st);
        rt_t u = rconv(m, nm, cur, F * r * r);
        rt_t p = rshuffle(u, r);
        snprintf(nm, sizeof nm, "upsample.%d.shuffle", st);
        if (check)
            *worst = fmax(*worst, rcmp(m, nm, s, p));
        free(u.v);
        free(cur.v);
        cur = p;
    }
    rt_t out = rconv(m, "tail", cur, x.c);
    if (check)
        *worst = fmax(*worst, rcmp(m, "tail", s, out));
    free(cur.v);
    return out;
}

static void test_reference(int scale)
{
    loom_edsr_desc_t d = {2, 8, scale, 0.1f};
    loom_model_t *m = NULL;
    const int N = 2, C = 3, H = 6, W = 5;
    int st = loom_edsr_create(&m, "edsr-tiny", &d, (loom_shape_t){N, C, H, W}, 3);
    CHECK(st == 0, "edsr_create x%d: %s", scale, loom_last_error());
    if (st < 0)
        return;
    loom_shape_t os = loom_model_output_shape(m);
    CHECK(os.n == N && os.c == C && os.h == H * scale && os.w == W * scale,
          "x%d: output shape %dx%dx%dx%d", scale, os.n, os.c, os.h, os.w);
    /* biases are zero after init: give them values so they are tested */
    loom_rng_t g;
    loom_rng_seed(&g, 99);
    for (int i = 0; i < loom_model_num_params(m); i++) {
        loom_param_t *p = loom_model_param(m, i);
        if (strstr(p->name, ".bias"))
            for (size_t k = 0; k < p->count; k++)
                p->data[k] = 0.1f * loom_rng_normal(&g);
    }
    float *x = loom_model_input(m);
    for (int k = 0; k < N * C * H * W; k++)
        x[k] = loom_rng_uniform(&g) - 0.5f;
    st = loom_model_forward(m, N, 1);
    CHECK(st == 0, "forward: %s", loom_last_error());
    double worst = 0.0;
    for (int s = 0; s < N; s++) {
        rt_t in = rt_new(C, H, W);
        for (size_t k = 0; k < rcount(in); k++)
            in.v[k] = x[(size_t)s * rcount(in) + k];
        rt_t out = ref_edsr(m, &d, s, in, &worst, 1);
        free(out.v);
        free(in.v);
    }
    CHECK(worst <= 1e-5, "x%d: layers differ from the direct reference by %.3g", scale, worst);
    printf("edsr x%d (2 blocks, 8 features): forward vs direct reference, max rel err %.2g\n", scale,
           worst);

    /* backward: d/dw of L = sum(out * gout), against central differences of
     * the reference (double) for a few weights of every parameter tensor */
    float *gout = loom_model_doutput(m);
    size_t on = loom_shape_count(os);
    float *gkeep = malloc(sizeof(float) * on);
    for (size_t k = 0; k < on; k++)
        gkeep[k] = gout[k] = loom_rng_normal(&g);
    loom_model_zero_grad(m);
    st = loom_model_backward(m, N);
    CHECK(st == 0, "backward: %s", loom_last_error());
    double gworst = 0.0;
    for (int i = 0; i < loom_model_num_params(m); i++) {
        loom_param_t *p = loom_model_param(m, i);
        for (int t = 0; t < 2; t++) {
            size_t k = loom_rng_below(&g, (uint32_t)p->count);
            float keep = p->data[k];
            double L[2];
            for (int side = 0; side < 2; side++) {
                p->data[k] = keep + (side ? 1e-4f : -1e-4f);
                double dummy = 0.0, sum = 0.0;
                for (int s = 0; s < N; s++) {
                    rt_t in = rt_new(C, H, W);
                    for (size_t q = 0; q < rcount(in); q++)
                        in.v[q] = x[(size_t)s * rcount(in) + q];
                    rt_t out = ref_edsr(m, &d, s, in, &dummy, 0);
                    for (size_t q = 0; q < rcount(out); q++)
                        sum += out.v[q] * gkeep[(size_t)s * rcount(out) + q];
                    free(out.v);
                    free(in.v);
                }
                L[side] = sum;
            }
            double fd = (L[1] - L[0]) / ((double)(keep + 1e-4f) - (double)(keep - 1e-4f));
            p->data[k] = keep;
            double e = fabs(fd - p->grad[k]) / fmax(1.0, fabs(fd));
            gworst = fmax(gworst, e);
            CHECK(e <= 1e-3, "x%d: gradient of %s[%zu]: %g vs finite difference %g", scale, p->name,
                  k, p->grad[k], fd);
        }
    }
    printf("edsr x%d: backward vs central differences, max err %.2g\n", scale, gworst);
    free(gkeep);
    loom_model_destroy(m);
}

/* Short Adam run on 16x16 HR patches (8x8 LR) of a photograph: L1 falls. */
static void test_training(void)
{
    loom_image_t img;
    int st = loom_png_load(&img, SKIMAGE "/astronaut.png");
    CHECK(st == 0, "png: %s (scripts/deps.sh installs python3-skimage)", loom_last_error());
    if (st < 0)
        return;
    CHECK(img.c == 3 && img.h == 512 && img.w == 512, "astronaut is %dx%dx%d", img.c, img.h, img.w);
    const int B = 4, P = 16, S = 2, p = P / S;
    loom_edsr_desc_t d = {2, 8, S, 0.1f};
    loom_model_t *m = NULL;
    loom_optim_t *o = NULL;
    float *hr = malloc(sizeof(float) * B * 3 * P * P), *lr = malloc(sizeof(float) * 3 * p * p);
    st = loom_edsr_create(&m, "edsr-tiny", &d, (loom_shape_t){B, 3, p, p}, 5);
    loom_optim_desc_t od = LOOM_OPTIM_DESC_INIT;
    od.kind = LOOM_ADAM;
    od.lr = 2e-3f;
    od.weight_decay = 0.0f;
    if (st == 0)
        st = loom_optim_create(&o, &od, loom_model_param_count(m));
    CHECK(st == 0 && hr && lr, "setup: %s", loom_last_error());
    if (st < 0 || !hr || !lr)
        goto out;
    /* a fixed batch of patches from the image's centre area */
    for (int b = 0; b < B; b++) {
        int y0 = 200 + 40 * b, x0 = 180 + 30 * b;
        for (int c = 0; c < 3; c++)
            for (int i = 0; i < P; i++)
                for (int j = 0; j < P; j++)
                    hr[((size_t)(b * 3 + c) * P + i) * P + j] =
                        img.data[((size_t)c * 512 + y0 + i) * 512 + x0 + j] - 0.5f;
        loom_resize_bicubic(3, P, P, hr + (size_t)b * 3 * P * P, p, p, lr, 1);
        memcpy(loom_model_input(m) + (size_t)b * 3 * p * p, lr, sizeof(float) * 3 * p * p);
    }
    float first = 0.0f, last = 0.0f;
    size_t n = (size_t)B * 3 * P * P;
    for (int step = 0; step < 60; step++) {
        st = loom_model_forward(m, B, 1);
        float l = loom_l1(n, loom_model_output(m), hr, loom_model_doutput(m));
        loom_model_zero_grad(m);
        st = st < 0 ? st : loom_model_backward(m, B);
        if (st < 0)
            break;
        loom_optim_step(o, loom_model_params(m), loom_model_grads(m), NULL);
        if (step == 0)
            first = l;
        last = l;
    }
    CHECK(st == 0, "training: %s", loom_last_error());
    CHECK(isfinite(last) && last < 0.5f * first, "L1 loss went from %.4f to %.4f in 60 steps", first,
          last);
    printf("edsr x2 (tiny), 60 Adam steps on 4 patches: L1 %.4f -> %.4f\n", first, last);
out:
    loom_optim_destroy(o);
    loom_model_destroy(m);
    free(hr);
    free(lr);
    loom_image_free(&img);
}

static void test_resize_psnr(void)
{
    const int h = 24, w = 30;
    float *x = malloc(sizeof(float) * 2 * h * w), *y = malloc(sizeof(float) * 2 * 4 * h * w);
    for (int i = 0; i < h; i++)
        for (int j = 0; j < w; j++) {
            x[i * w + j] = 0.37f;
            x[h * w + i * w + j] = 0.01f * i + 0.02f * j; /* linear ramp */
        }
    for (int aa = 0; aa < 2; aa++) {
        /* up x2 and down /2, /3 */
        int sizes[3][2] = {{2 * h, 2 * w}, {h / 2, w / 2}, {h / 3, w / 3}};
        for (int t = 0; t < 3; t++) {
            int ho = sizes[t][0], wo = sizes[t][1];
            double sc = (double)ho / h;
            loom_resize_bicubic(2, h, w, x, ho, wo, y, aa);
            double ec = 0.0, er = 0.0;
            for (int i = 0; i < ho; i++)
                for (int j = 0; j < wo; j++) {
                    ec = fmax(ec, fabs(y[i * wo + j] - 0.37));
                    /* source coordinate of output (i, j), 0-based */
                    double u = (i + 0.5) / sc - 0.5, v = (j + 0.5) / sc - 0.5;
                    double reach = (sc < 1.0 && aa ? 2.0 / sc : 2.0) + 1.0;
                    if (u - reach < 0 || u + reach > h - 1 || v - reach < 0 || v + reach > w - 1)
                        continue;
                    er = fmax(er, fabs(y[ho * wo + i * wo + j] - (0.01 * u + 0.02 * v)));
                }
            CHECK(ec < 1e-6, "resize %dx%d -> %dx%d (antialias %d): constant off by %g", h, w, ho,
                  wo, aa, ec);
            CHECK(er < 1e-5, "resize %dx%d -> %dx%d (antialias %d): ramp off by %g", h, w, ho, wo,
                  aa, er);
        }
    }
    /* PSNR: images differing by one 8-bit level of green everywhere: Y
     * differs by 128.553/255, PSNR = 20 log10(255 / that) */
    float *a = calloc(3 * 16 * 16, sizeof(float)), *b = calloc(3 * 16 * 16, sizeof(float));
    for (int k = 0; k < 3 * 256; k++)
        a[k] = b[k] = 100.0f / 255.0f;
    for (int k = 256; k < 512; k++)
        b[k] = 101.0f / 255.0f;
    double mse, ps = loom_psnr_y(16, 16, a, b, 2, &mse);
    double want = 20.0 * log10(255.0 / (128.553 / 255.0));
    CHECK(fabs(ps - want) < 1e-9, "psnr %.12g, expected %.12g", ps, want);
    CHECK(isinf(loom_psnr_y(16, 16, a, a, 2, NULL)), "psnr of identical images not infinite");
    free(a);
    free(b);
    free(x);
    free(y);
}

int main(void)
{
    loom_set_threads(2);
    loom_edsr_desc_t d;
    CHECK(loom_edsr_config("edsr", &d) == 0 && d.blocks == 16 && d.feats == 64 && d.res_scale == 1.0f,
          "baseline configuration");
    CHECK(loom_edsr_config("edsr-paper", &d) == 0 && d.blocks == 32 && d.feats == 256 &&
              d.res_scale == 0.1f, "paper configuration");
    CHECK(loom_edsr_config("edsr7", &d) == LOOM_ERR_INVALID, "unknown name accepted");
    test_reference(2);
    test_reference(3);
    test_reference(4);
    test_resize_psnr();
    test_training();
    return t_done();
}
