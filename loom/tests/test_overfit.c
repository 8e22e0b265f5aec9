/*
 * test_overfit.c - a small ResNet fits one batch of 32 random samples with
 * random labels to near-zero loss: the forward, backward and optimiser work
 * together (SGD with momentum, then Adam).
 */
#include "harness.h"
#include "loom.h"

static float fit(loom_optim_kind_t kind, float lr, int steps, float *acc)
{
    loom_model_t *m = NULL;
    loom_optim_t *o = NULL;
    int32_t labels[32];
    loom_rng_t r;
    loom_rng_seed(&r, 99);
    if (loom_resnet_create(&m, "resnet8", (loom_shape_t){32, 1, 16, 16}, 10, 3) != 0)
        return 1e9f;
    for (int i = 0; i < 32 * 256; i++)
        loom_model_input(m)[i] = loom_rng_normal(&r);
    for (int i = 0; i < 32; i++)
        labels[i] = (int32_t)loom_rng_below(&r, 10);
    loom_optim_desc_t od = LOOM_OPTIM_DESC_INIT;
    od.kind = kind;
    od.lr = lr;
    od.weight_decay = 0.0f;
    loom_optim_create(&o, &od, loom_model_param_count(m));
    float loss = 0.0f;
    int correct = 0;
    for (int s = 0; s < steps; s++) {
        loom_model_forward(m, 32, 1);
        loss = loom_softmax_xent(32, 10, loom_model_output(m), labels, loom_model_doutput(m), &correct);
        loom_model_zero_grad(m);
        loom_model_backward(m, 32);
        loom_optim_step(o, loom_model_params(m), loom_model_grads(m), NULL);
    }
    *acc = correct / 32.0f;
    loom_optim_destroy(o);
    loom_model_destroy(m);
    return loss;
}

int main(void)
{
    loom_set_threads(2);
    float acc, l1 = fit(LOOM_SGD, 0.05f, 120, &acc);
    printf("sgd: loss %.5f accuracy %.3f\n", l1, acc);
    CHECK(l1 < 0.02f && acc == 1.0f, "SGD did not overfit: loss %g accuracy %g", l1, acc);
    float l2 = fit(LOOM_ADAM, 0.003f, 120, &acc);
    printf("adam: loss %.5f accuracy %.3f\n", l2, acc);
    CHECK(l2 < 0.02f && acc == 1.0f, "Adam did not overfit: loss %g accuracy %g", l2, acc);
    return t_done();
}
