/*
 * fuzz_checkpoint.c - libFuzzer target for the checkpoint loader
 * (loom_ckpt.h): the input's first byte picks the parser, the rest is the
 * file: 'M' a MANIFEST (loom_ckpt_parse_manifest), anything else a rank
 * file (loom_ckpt_load_rank_buffer) for a tiny model with SGD momentum.  A
 * rank file that loads must have passed its checks: its CRC must match and
 * the model's state must then equal the file's data (checked here).
 *
 * Built only with clang and -fsanitize=fuzzer (loom/tests/meson.build):
 *   CC=clang meson setup build-fuzz && ninja -C build-fuzz loom/tests/loom_fuzz_checkpoint
 *   mkdir -p /tmp/corpus && build-fuzz/loom/tests/loom_fuzz_checkpoint -max_total_time=60 /tmp/corpus loom/tests/fuzz_corpus
 *   (new inputs go to the first directory, so the seeds in the tree stay as they are)
 * The seed corpus holds a valid manifest and a valid rank file of the tiny model.
 */
#include "loom_ckpt.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static loom_model_t *model;
static loom_optim_t *optim;

static void setup(void)
{
    int x;
    if (loom_model_create(&model, "fuzz", (loom_shape_t){1, 1, 4, 4}) < 0 ||
        (x = loom_add_conv(model, "conv", loom_input(model), 2, 3, 1, 1, 1, 1, 0)) < 0 ||
        (x = loom_add_bn(model, "bn", x)) < 0 || (x = loom_add_gap(model, "gap", x)) < 0 ||
        (x = loom_add_fc(model, "fc", x, 2)) < 0 || loom_model_finish(model, x, 1) < 0)
        abort();
    loom_optim_desc_t od = LOOM_OPTIM_DESC_INIT;
    if (loom_optim_create(&optim, &od, loom_model_param_count(model)) < 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!model)
        setup();
    if (size < 1)
        return 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    if (data[0] == 'M') {
        loom_ckpt_desc_t d = {.comm = NULL, .rank = 0, .size = 1, .model = "fuzz",
                              .config = "model=fuzz lr=0.1", .dp = 1, .sh = 1, .sw = 1};
        loom_ckpt_pos_t pos;
        char *text = malloc(n ? n : 1); /* exactly n bytes: reads past them are caught */
        if (!text)
            return 0;
        memcpy(text, p, n);
        loom_ckpt_parse_manifest(text, n, &d, 0, &pos);
        free(text);
        return 0;
    }
    unsigned char *buf = malloc(n ? n : 1);
    if (!buf)
        return 0;
    memcpy(buf, p, n);
    if (loom_ckpt_load_rank_buffer(buf, n, 0, 0, model, optim) == 0) {
        /* accepted: the CRC matched and the parameters are the file's */
        if (n < 60 || (uint32_t)crc32(0L, buf, (uInt)(n - 4)) !=
                          ((uint32_t)buf[n - 4] | (uint32_t)buf[n - 3] << 8 |
                           (uint32_t)buf[n - 2] << 16 | (uint32_t)buf[n - 1] << 24))
            abort();
        if (memcmp(loom_model_params(model), buf + 56, 4 * loom_model_param_count(model)) != 0)
            abort();
    }
    free(buf);
    return 0;
}
