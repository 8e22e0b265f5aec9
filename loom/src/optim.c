/*
 * optim.c - SGD (momentum, weight decay, Nesterov; PyTorch's update rule) and
 * Adam (L2 weight decay), with constant, step or cosine learning-rate
 * schedules and an optional linear warm-up.  One update walks the flat
 * parameter array once.
 */
#include "internal.h"

#include <math.h>

struct loom_optim {
    loom_optim_desc_t d;
    size_t n;
    float *m1, *m2;
    long t;
};

int loom_optim_create(loom_optim_t **out, const loom_optim_desc_t *d, size_t nparams)
{
    if (!out || !d)
        return loom_error(LOOM_ERR_INVALID, "optim: NULL argument");
    if (!(d->lr >= 0.0f) || !(d->momentum >= 0.0f && d->momentum < 1.0f) || !(d->weight_decay >= 0.0f))
        return loom_error(LOOM_ERR_INVALID, "optim: lr and weight decay must be >= 0, momentum in [0, 1)");
    if (d->kind == LOOM_ADAM && !(d->beta1 >= 0.0f && d->beta1 < 1.0f && d->beta2 >= 0.0f &&
                                  d->beta2 < 1.0f && d->eps > 0.0f))
        return loom_error(LOOM_ERR_INVALID, "optim: Adam betas must be in [0, 1) and eps > 0");
    if (d->sched == LOOM_SCHED_STEP && d->step_size <= 0)
        return loom_error(LOOM_ERR_INVALID, "optim: step schedule needs a positive step size");
    loom_optim_t *o = calloc(1, sizeof *o);
    if (!o)
        return loom_error(LOOM_ERR_NOMEM, "optim: out of memory");
    o->d = *d;
    o->n = nparams;
    o->m1 = loom__alloc(sizeof(float) * nparams);
    if (d->kind == LOOM_ADAM)
        o->m2 = loom__alloc(sizeof(float) * nparams);
    if (!o->m1 || (d->kind == LOOM_ADAM && !o->m2)) {
        loom_optim_destroy(o);
        return loom_error(LOOM_ERR_NOMEM, "optim: out of memory for %zu parameters", nparams);
    }
    *out = o;
    return LOOM_OK;
}

void loom_optim_destroy(loom_optim_t *o)
{
    if (!o)
        return;
    loom__free(o->m1);
    loom__free(o->m2);
    free(o);
}

long loom_optim_steps(const loom_optim_t *o) { return o->t; }

void loom_optim_set_steps(loom_optim_t *o, long t) { o->t = t < 0 ? 0 : t; }

size_t loom_optim_size(const loom_optim_t *o) { return o->n; }

float *loom_optim_moment(loom_optim_t *o, int k)
{
    if (k == 0 && o->d.momentum != 0.0f)
        return o->m1;
    if (k == 0 && o->d.kind == LOOM_ADAM)
        return o->m1;
    if (k == 1 && o->d.kind == LOOM_ADAM)
        return o->m2;
    return NULL;
}

float loom_optim_lr(const loom_optim_t *o)
{
    const loom_optim_desc_t *d = &o->d;
    long t = o->t;
    if (d->warmup_steps > 0 && t < d->warmup_steps)
        return d->lr * (float)(t + 1) / (float)d->warmup_steps;
    switch (d->sched) {
    case LOOM_SCHED_STEP:
        return d->lr * powf(d->gamma, (float)(t / d->step_size));
    case LOOM_SCHED_COSINE: {
        long span = d->total_steps - d->warmup_steps;
        double p = span > 0 ? (double)(t - d->warmup_steps) / (double)span : 1.0;
        if (p > 1.0)
            p = 1.0;
        return d->min_lr + (d->lr - d->min_lr) * (float)(0.5 * (1.0 + cos(3.141592653589793 * p)));
    }
    default:
        return d->lr;
    }
}

void loom_optim_step(loom_optim_t *o, float *w, const float *g, const unsigned char *decay)
{
    const loom_optim_desc_t *d = &o->d;
    const float lr = loom_optim_lr(o), wd = d->weight_decay;
    if (d->kind == LOOM_SGD) {
        const float mu = d->momentum;
        float *buf = o->m1;
        for (size_t i = 0; i < o->n; i++) {
            float gi = g[i];
            if (wd != 0.0f && (!decay || decay[i]))
                gi += wd * w[i];
            if (mu != 0.0f) {
                float b = o->t == 0 ? gi : mu * buf[i] + gi;
                buf[i] = b;
                gi = d->nesterov ? gi + mu * b : b;
            }
            w[i] -= lr * gi;
        }
    } else {
        const float b1 = d->beta1, b2 = d->beta2, eps = d->eps;
        const float c1 = 1.0f - powf(b1, (float)(o->t + 1)), c2 = 1.0f - powf(b2, (float)(o->t + 1));
        const float step = lr / c1, rc2 = 1.0f / sqrtf(c2);
        for (size_t i = 0; i < o->n; i++) {
            float gi = g[i];
            if (wd != 0.0f && (!decay || decay[i]))
                gi += wd * w[i];
            float m = o->m1[i] = b1 * o->m1[i] + (1.0f - b1) * gi;
            float v = o->m2[i] = b2 * o->m2[i] + (1.0f - b2) * gi * gi;
            w[i] -= step * m / (sqrtf(v) * rc2 + eps);
        }
    }
    o->t++;
}
