/*
 * mesh_model.c - the fully convolutional mesh-tangling model and its loss.
 * See loom_mesh.h.  Built from Loom's ordinary layers, so the same model
 * runs single-process, data-parallel and (spatial.c) spatially split.
 */
#include "internal.h"
#include "loom_mesh.h"

#include <math.h>
#include <stdio.h>

static int width_of(int base, float width)
{
    int c = (int)lroundf((float)base * width);
    return c < 4 ? 4 : c;
}

/* conv 3x3 (stride s) + ReLU + batch norm */
static int block(loom_model_t *m, const char *name, int x, int cout, int stride)
{
    char nm[40];
    snprintf(nm, sizeof nm, "%s.conv", name);
    x = loom_add_conv(m, nm, x, cout, 3, stride, 1, 1, 1, 0);
    if (x < 0)
        return x;
    snprintf(nm, sizeof nm, "%s.relu", name);
    x = loom_add_relu(m, nm, x);
    if (x < 0)
        return x;
    snprintf(nm, sizeof nm, "%s.bn", name);
    return loom_add_bn(m, nm, x);
}

int loom_mesh_model_create(loom_model_t **out, loom_shape_t input, float width, uint64_t seed)
{
    static const int base[4] = {64, 128, 256, 256};
    if (!out)
        return loom_error(LOOM_ERR_INVALID, "mesh model: NULL output");
    if (input.c != LOOM_MESH_CHANNELS || input.h % 8 || input.w % 8 || !(width > 0.0f && width <= 8.0f))
        return loom_error(LOOM_ERR_INVALID,
                          "mesh model: input must be [n, %d, h, w] with h, w multiples of 8 and "
                          "width in (0, 8] (got %d channels, %dx%d, width %g)",
                          LOOM_MESH_CHANNELS, input.c, input.h, input.w, (double)width);
    loom_model_t *m = NULL;
    int st = loom_model_create(&m, "mesh", input), x = loom_input(m);
    if (st < 0)
        return st;
    int fine = -1;
    for (int s = 0; s < 4 && x >= 0; s++) {
        char nm[16];
        int c = width_of(base[s], width);
        snprintf(nm, sizeof nm, "s%d.a", s);
        x = block(m, nm, x, c, s == 0 ? 1 : 2);
        snprintf(nm, sizeof nm, "s%d.b", s);
        if (x >= 0)
            x = block(m, nm, x, c, 1);
        if (s == 0)
            fine = x;
    }
    if (x >= 0)
        x = loom_add_conv(m, "head", x, 64, 1, 1, 0, 1, 1, 1);
    if (x >= 0)
        x = loom_add_pixel_shuffle(m, "up", x, 8);
    /* a 1x1 head on the full-resolution features of stage 0, added to the
     * upsampled coarse logits: cell-level detail the coarse path cannot carry */
    int skip = x >= 0 ? loom_add_conv(m, "head_fine", fine, 1, 1, 1, 0, 1, 1, 0) : x;
    if (skip >= 0)
        x = loom_add_add(m, "logits", x, skip);
    else
        x = skip;
    if (x < 0 || (st = loom_model_finish(m, x, seed)) < 0) {
        st = x < 0 ? x : st;
        loom_model_destroy(m);
        return st;
    }
    *out = m;
    return LOOM_OK;
}

double loom_mesh_bce(size_t n, const float *x, const float *t, float pos_weight, double norm,
                     float *dx, long counts[3])
{
    double total = 0.0;
    for (size_t i = 0; i < n; i++) {
        double v = x[i], y = t[i];
        /* -(pw*y*log s + (1-y)*log(1-s)), s = sigmoid(v), stably:
         * log s = -softplus(-v), log(1-s) = -softplus(v) */
        double sp_pos = (v > 0 ? v : 0) + log1p(exp(-fabs(v))); /* softplus(v) */
        double sp_neg = sp_pos - v;                              /* softplus(-v) */
        total += pos_weight * y * sp_neg + (1.0 - y) * sp_pos;
        if (dx) {
            double s = v >= 0 ? 1.0 / (1.0 + exp(-v)) : exp(v) / (1.0 + exp(v));
            dx[i] = (float)((pos_weight * y * (s - 1.0) + (1.0 - y) * s) / norm);
        }
        if (counts) {
            int p = v > 0, g = y > 0.5;
            counts[0] += p && g;
            counts[1] += p && !g;
            counts[2] += !p && g;
        }
    }
    return total;
}
