/*
 * resnet.c - ResNet builders.
 *
 * ImageNet shape (He et al. 2015; torchvision layout, stride in the 3x3 conv
 * of the bottleneck): resnet18/34 (basic blocks), resnet50 (bottlenecks).
 * Small ResNets for 28x28 / 32x32 inputs: resnet(6k+2) with three stages of
 * k basic blocks and 16/32/64 channels; downsampling shortcuts are a 1x1
 * convolution with batch norm (option B).
 */
#include "internal.h"

#include <stdio.h>

#define TRY(expr)          \
    do {                   \
        if ((st = (expr)) < 0) \
            goto fail;     \
    } while (0)

static int conv_bn(loom_model_t *m, const char *pre, const char *cname, const char *bname, int x,
                   int cout, int k, int stride, int pad, int relu)
{
    char n1[48], n2[48], n3[48];
    snprintf(n1, sizeof n1, "%s%s", pre, cname);
    snprintf(n2, sizeof n2, "%s%s", pre, bname);
    int y = loom_add_conv(m, n1, x, cout, k, stride, pad, 1, 1, 0);
    if (y < 0)
        return y;
    y = loom_add_bn(m, n2, y);
    if (y < 0 || !relu)
        return y;
    snprintf(n3, sizeof n3, "%srelu_%s", pre, bname);
    return loom_add_relu(m, n3, y);
}

/* The end of a residual block: y + shortcut(x) (a 1x1 conv + bn when the
 * shape changes), then relu. */
static int residual_out(loom_model_t *m, const char *pre, int x, int y, int cin, int cout,
                        int stride)
{
    int st, sc = x;
    char nm[48];
    if (stride != 1 || cin != cout)
        TRY(sc = conv_bn(m, pre, "downsample.0", "downsample.1", x, cout, 1, stride, 0, 0));
    snprintf(nm, sizeof nm, "%.40sadd", pre);
    TRY(y = loom_add_add(m, nm, y, sc));
    snprintf(nm, sizeof nm, "%.40srelu", pre);
    TRY(y = loom_add_relu(m, nm, y));
    return y;
fail:
    return st;
}

static int basic_block(loom_model_t *m, const char *pre, int x, int cin, int cout, int stride)
{
    int st, y;
    TRY(y = conv_bn(m, pre, "conv1", "bn1", x, cout, 3, stride, 1, 1));
    TRY(y = conv_bn(m, pre, "conv2", "bn2", y, cout, 3, 1, 1, 0));
    return residual_out(m, pre, x, y, cin, cout, stride);
fail:
    return st;
}

static int bottleneck(loom_model_t *m, const char *pre, int x, int cin, int width, int stride)
{
    int st, y, cout = width * 4;
    TRY(y = conv_bn(m, pre, "conv1", "bn1", x, width, 1, 1, 0, 1));
    TRY(y = conv_bn(m, pre, "conv2", "bn2", y, width, 3, stride, 1, 1));
    TRY(y = conv_bn(m, pre, "conv3", "bn3", y, cout, 1, 1, 0, 0));
    return residual_out(m, pre, x, y, cin, cout, stride);
fail:
    return st;
}

int loom_resnet_create(loom_model_t **out, const char *name, loom_shape_t input, int classes,
                       uint64_t seed)
{
    loom_model_t *m = NULL;
    int st, x, depth = 0;
    char pre[48];
    if (!out || !name)
        return loom_error(LOOM_ERR_INVALID, "resnet: NULL argument");
    if (classes < 1)
        return loom_error(LOOM_ERR_INVALID, "resnet: class count must be positive (got %d)", classes);
    if (sscanf(name, "resnet%d", &depth) != 1 || depth <= 0)
        return loom_error(LOOM_ERR_INVALID,
                          "unknown model '%s' (resnet18, resnet34, resnet50, or resnet6k+2 "
                          "such as resnet8, resnet20, resnet32)", name);
    char tail[32];
    snprintf(tail, sizeof tail, "resnet%d", depth);
    if (strcmp(tail, name) != 0)
        return loom_error(LOOM_ERR_INVALID, "unknown model '%s'", name);

    TRY(loom_model_create(&m, name, input));
    x = loom_input(m);
    if (depth == 18 || depth == 34 || depth == 50) {
        static const int blocks18[4] = {2, 2, 2, 2}, blocks34[4] = {3, 4, 6, 3};
        const int *blocks = depth == 18 ? blocks18 : blocks34;
        int cin = 64;
        TRY(x = conv_bn(m, "", "conv1", "bn1", x, 64, 7, 2, 3, 1));
        TRY(x = loom_add_maxpool(m, "maxpool", x, 3, 2, 1));
        for (int s = 0; s < 4; s++) {
            int width = 64 << s;
            for (int b = 0; b < blocks[s]; b++) {
                int stride = (b == 0 && s > 0) ? 2 : 1;
                snprintf(pre, sizeof pre, "layer%d.%d.", s + 1, b);
                if (depth == 50) {
                    TRY(x = bottleneck(m, pre, x, cin, width, stride));
                    cin = width * 4;
                } else {
                    TRY(x = basic_block(m, pre, x, cin, width, stride));
                    cin = width;
                }
            }
        }
    } else if (depth >= 8 && (depth - 2) % 6 == 0) {
        int k = (depth - 2) / 6, cin = 16;
        TRY(x = conv_bn(m, "", "conv1", "bn1", x, 16, 3, 1, 1, 1));
        for (int s = 0; s < 3; s++) {
            int width = 16 << s;
            for (int b = 0; b < k; b++) {
                int stride = (b == 0 && s > 0) ? 2 : 1;
                snprintf(pre, sizeof pre, "layer%d.%d.", s + 1, b);
                TRY(x = basic_block(m, pre, x, cin, width, stride));
                cin = width;
            }
        }
    } else {
        st = loom_error(LOOM_ERR_INVALID,
                        "unknown model '%s' (resnet18, resnet34, resnet50, or resnet6k+2 such as "
                        "resnet8, resnet20, resnet32)", name);
        goto fail;
    }
    TRY(x = loom_add_gap(m, "avgpool", x));
    TRY(x = loom_add_fc(m, "fc", x, classes));
    TRY(loom_model_finish(m, x, seed));
    *out = m;
    return LOOM_OK;
fail:
    if (st != LOOM_ERR_NOMEM && strncmp(loom_last_error(), "resnet", 6) != 0 && m) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", loom_last_error());
        loom_error(st, "%s (input %dx%dx%d): %s", name, input.c, input.h, input.w, msg);
    }
    loom_model_destroy(m);
    return st;
}
