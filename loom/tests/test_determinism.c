/*
 * test_determinism.c - two training runs with one seed give identical
 * weights, bit for bit (shuffling, crop/flip augmentation on the background
 * loader thread, SGD with Nesterov momentum, Loom's worker threads); a
 * different seed gives different weights.
 */
#include "harness.h"
#include "loom.h"

#include <string.h>

static loom_dataset_t ds;

static float *train(uint64_t seed, size_t *count)
{
    loom_model_t *m = NULL;
    loom_loader_t *l = NULL;
    loom_optim_t *o = NULL;
    int32_t labels[16];
    if (loom_resnet_create(&m, "resnet8", (loom_shape_t){16, 1, 12, 12}, 10, seed) != 0)
        return NULL;
    loom_loader_desc_t ld = {.ds = &ds, .batch = 16, .shuffle = 1, .augment = 1, .pad = 2,
                             .mean = 0.5f, .std = 0.25f, .seed = seed, .drop_last = 1};
    loom_optim_desc_t od = LOOM_OPTIM_DESC_INIT;
    od.lr = 0.05f;
    od.nesterov = 1;
    od.sched = LOOM_SCHED_COSINE;
    od.total_steps = 12;
    od.warmup_steps = 2;
    unsigned char *mask = loom_model_decay_mask(m);
    if (loom_loader_create(&l, &ld) != 0 ||
        loom_optim_create(&o, &od, loom_model_param_count(m)) != 0)
        return NULL;
    for (int ep = 0; ep < 3; ep++) {
        loom_loader_start_epoch(l, ep);
        int n;
        while ((n = loom_loader_next(l, loom_model_input(m), labels)) > 0) {
            loom_model_forward(m, n, 1);
            loom_softmax_xent(n, 10, loom_model_output(m), labels, loom_model_doutput(m), NULL);
            loom_model_zero_grad(m);
            loom_model_backward(m, n);
            loom_optim_step(o, loom_model_params(m), loom_model_grads(m), mask);
        }
    }
    *count = loom_model_param_count(m) + loom_model_buffer_count(m);
    float *out = malloc(sizeof(float) * *count);
    memcpy(out, loom_model_params(m), 4 * loom_model_param_count(m));
    memcpy(out + loom_model_param_count(m), loom_model_buffers(m), 4 * loom_model_buffer_count(m));
    free(mask);
    loom_optim_destroy(o);
    loom_loader_destroy(l);
    loom_model_destroy(m);
    return out;
}

int main(void)
{
    loom_set_threads(2);
    loom_rng_t r;
    loom_rng_seed(&r, 11);
    ds.count = 64, ds.channels = 1, ds.rows = 12, ds.cols = 12, ds.classes = 10;
    ds.images = malloc(64 * 144);
    ds.labels = malloc(64 * sizeof(int32_t));
    for (int i = 0; i < 64 * 144; i++)
        ds.images[i] = (uint8_t)loom_rng_below(&r, 256);
    for (int i = 0; i < 64; i++)
        ds.labels[i] = (int32_t)loom_rng_below(&r, 10);
    size_t n1 = 0, n2 = 0, n3 = 0;
    float *a = train(5, &n1), *b = train(5, &n2), *c = train(6, &n3);
    CHECK(a && b && c, "training failed: %s", loom_last_error());
    if (a && b && c) {
        CHECK(n1 == n2 && memcmp(a, b, 4 * n1) == 0, "same seed, different weights");
        CHECK(memcmp(a, c, 4 * n1) != 0, "different seeds, same weights");
        size_t moved = 0;
        loom_model_t *m0;
        loom_resnet_create(&m0, "resnet8", (loom_shape_t){16, 1, 12, 12}, 10, 5);
        for (size_t i = 0; i < loom_model_param_count(m0); i++)
            moved += a[i] != loom_model_params(m0)[i];
        CHECK(moved > loom_model_param_count(m0) / 2, "training changed only %zu weights", moved);
        loom_model_destroy(m0);
    }
    free(a), free(b), free(c);
    free(ds.images), free(ds.labels);
    return t_done();
}
