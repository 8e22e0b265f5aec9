/*
 * test_fusion.c - the batch norm + ReLU and residual add + ReLU fusion of the
 * single-process executor (model.c, plan_fusion) gives the same bits as the
 * layers run one at a time: two ResNet-8 models (1x12x11 input, odd sizes,
 * 5 samples, 2 threads) with the same seed, one with the fusion switched
 * off, the same input and loss gradient; a training forward, a backward
 * (twice, so that gradients accumulate), an inference forward.  Outputs,
 * every parameter gradient and the batch-norm running statistics must match
 * exactly, and the plan must have folded the ReLUs of ResNet-8 (7: stem, 3
 * blocks x (after bn1, after the add)).
 */
#include "../src/internal.h"
#include "harness.h"

static int same(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, sizeof(float) * n) == 0;
}

int main(void)
{
    loom_set_threads(2);
    loom_shape_t in = {5, 1, 12, 11};
    loom_model_t *m[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++)
        if (loom_resnet_create(&m[k], "resnet8", in, 10, 42) < 0) {
            fprintf(stderr, "resnet8: %s\n", loom_last_error());
            return 1;
        }
    CHECK(loom__model_fused_count(m[0]) == 7, "fused ReLUs: %d, expected 7",
          loom__model_fused_count(m[0]));
    loom__model_unfuse(m[1]);
    CHECK(loom__model_fused_count(m[1]) == 0, "unfused model still fuses");
    uint64_t seed = 9;
    size_t nin = (size_t)in.n * in.c * in.h * in.w;
    loom_shape_t os = loom_model_output_shape(m[0]);
    size_t nout = (size_t)os.n * os.c * os.h * os.w;
    float *x = malloc(sizeof(float) * nin), *g = malloc(sizeof(float) * nout);
    for (size_t i = 0; i < nin; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((seed >> 40) & 0xffff) / 32768.0f - 1.0f;
    }
    for (size_t i = 0; i < nout; i++)
        g[i] = (float)((int)(i % 7) - 3) * 0.1f;
    for (int k = 0; k < 2; k++) {
        memcpy(loom_model_input(m[k]), x, sizeof(float) * nin);
        loom_model_zero_grad(m[k]);
        CHECK(loom_model_forward(m[k], in.n, 1) == 0, "forward %d", k);
        for (int rep = 0; rep < 2; rep++) {
            memcpy(loom_model_doutput(m[k]), g, sizeof(float) * nout);
            CHECK(loom_model_backward(m[k], in.n) == 0, "backward %d", k);
        }
    }
    CHECK(same(loom_model_output(m[0]), loom_model_output(m[1]), nout), "training outputs differ");
    size_t np = loom_model_param_count(m[0]);
    CHECK(same(loom_model_grads(m[0]), loom_model_grads(m[1]), np), "gradients differ");
    double gsum = 0.0;
    for (size_t i = 0; i < np; i++)
        gsum += fabs(loom_model_grads(m[0])[i]);
    CHECK(gsum > 0.0, "all gradients are zero: the test would prove nothing");
    CHECK(same(loom_model_buffers(m[0]), loom_model_buffers(m[1]), loom_model_buffer_count(m[0])),
          "batch-norm running statistics differ");
    for (int k = 0; k < 2; k++)
        CHECK(loom_model_forward(m[k], 3, 0) == 0, "inference forward %d", k);
    CHECK(same(loom_model_output(m[0]), loom_model_output(m[1]), (size_t)3 * os.c * os.h * os.w),
          "inference outputs differ");
    free(x), free(g);
    loom_model_destroy(m[0]), loom_model_destroy(m[1]);
    return t_done();
}
