/*
 * edsr.c - EDSR super-resolution (Lim et al. 2017, "Enhanced Deep Residual
 * Networks for Single Image Super-Resolution"), built from Loom's layers.
 *
 * head conv -> blocks x [conv, relu, conv, (scale), add input] -> body conv
 * -> add head output -> upsampler (conv + pixel shuffle, per factor 2 or 3)
 * -> tail conv.  No batch norm; every convolution is 3x3 stride 1 pad 1 with
 * a bias, so the spatial executor splits it with a halo of 1.  The paper's
 * mean shift (subtract the data set's RGB mean, add it back) is left to the
 * data path (loom train feeds x - 0.5 and targets y - 0.5).  Weights and
 * biases start uniform in +-1/sqrt(fan_in), as in the reference code.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>

int loom_edsr_config(const char *name, loom_edsr_desc_t *d)
{
    if (!name || !d)
        return loom_error(LOOM_ERR_INVALID, "edsr: NULL argument");
    if (!strcmp(name, "edsr")) {
        *d = (loom_edsr_desc_t){16, 64, 2, 1.0f};
        return LOOM_OK;
    }
    if (!strcmp(name, "edsr-paper")) {
        *d = (loom_edsr_desc_t){32, 256, 2, 0.1f};
        return LOOM_OK;
    }
    return loom_error(LOOM_ERR_INVALID, "edsr: unknown model '%s' (edsr, edsr-paper)", name);
}

#define TRY(expr)              \
    do {                       \
        if ((st = (expr)) < 0) \
            goto fail;         \
    } while (0)

static int conv3(loom_model_t *m, const char *name, int x, int cout)
{
    return loom_add_conv(m, name, x, cout, 3, 1, 1, 1, 1, 1);
}

int loom_edsr_create(loom_model_t **out, const char *name, const loom_edsr_desc_t *d,
                     loom_shape_t input, uint64_t seed)
{
    if (!out || !d)
        return loom_error(LOOM_ERR_INVALID, "edsr: NULL argument");
    if (d->blocks < 0 || d->feats <= 0 || !(d->scale == 2 || d->scale == 3 || d->scale == 4) ||
        !(d->res_scale > 0.0f))
        return loom_error(LOOM_ERR_INVALID,
                          "edsr: need blocks >= 0, features > 0, scale 2, 3 or 4, res_scale > 0 "
                          "(got %d, %d, %d, %g)", d->blocks, d->feats, d->scale, d->res_scale);
    loom_model_t *m = NULL;
    int st = loom_model_create(&m, name ? name : "edsr", input);
    if (st < 0)
        return st;
    int x, h, F = d->feats;
    char nm[48];
    TRY(h = conv3(m, "head", loom_input(m), F));
    x = h;
    for (int b = 0; b < d->blocks; b++) {
        int y;
        snprintf(nm, sizeof nm, "body.%d.conv1", b);
        TRY(y = conv3(m, nm, x, F));
        snprintf(nm, sizeof nm, "body.%d.relu", b);
        TRY(y = loom_add_relu(m, nm, y));
        snprintf(nm, sizeof nm, "body.%d.conv2", b);
        TRY(y = conv3(m, nm, y, F));
        if (d->res_scale != 1.0f) {
            snprintf(nm, sizeof nm, "body.%d.scale", b);
            TRY(y = loom_add_scale(m, nm, y, d->res_scale));
        }
        snprintf(nm, sizeof nm, "body.%d.add", b);
        TRY(x = loom_add_add(m, nm, y, x));
    }
    TRY(x = conv3(m, "body.conv", x, F));
    TRY(x = loom_add_add(m, "body.skip", x, h));
    int stages = d->scale == 4 ? 2 : 1, r = d->scale == 3 ? 3 : 2;
    for (int s = 0; s < stages; s++) {
        snprintf(nm, sizeof nm, "upsample.%d.conv", s);
        TRY(x = conv3(m, nm, x, F * r * r));
        snprintf(nm, sizeof nm, "upsample.%d.shuffle", s);
        TRY(x = loom_add_pixel_shuffle(m, nm, x, r));
    }
    TRY(x = conv3(m, "tail", x, input.c));
    TRY(loom_model_finish(m, x, seed));
    /* The reference implementation's initialisation (PyTorch's default for
     * convolutions): weights and biases uniform in +-1/sqrt(fan_in).  He
     * initialisation (Loom's default) makes the un-normalised residual sum
     * grow with depth and starts far from the identity-like mapping that
     * super-resolution learns. */
    loom_rng_t g;
    loom_rng_seed(&g, seed ^ 0xED5Bull);
    for (int i = 0; i < loom_model_num_ops(m); i++) {
        loom_op_info_t in;
        loom_model_op_info(m, i, &in);
        if (in.type != LOOM_OP_CONV)
            continue;
        float bound = 1.0f / sqrtf((float)(in.conv.cin * in.conv.kh * in.conv.kw));
        loom_param_t *ps[2] = {in.weight, in.bias};
        for (int j = 0; j < 2; j++)
            for (size_t k = 0; ps[j] && k < ps[j]->count; k++)
                ps[j]->data[k] = bound * (2.0f * loom_rng_uniform(&g) - 1.0f);
    }
    *out = m;
    return LOOM_OK;
fail:
    loom_model_destroy(m);
    return st;
}
