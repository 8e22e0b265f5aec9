/*
 * loader.c - batches for training and evaluation.
 *
 * One background thread prepares batch k+1 (gather, normalise, random crop
 * and flip) into one of two slots while batch k trains.  All randomness is
 * drawn from generators seeded by (seed, epoch, batch index), so the batches
 * are the same bits whatever the threads' timing.  Synthetic mode builds one
 * random batch at creation and hands it out again (no I/O, no thread).
 */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <pthread.h>

struct loom_loader {
    loom_loader_desc_t d;
    int n;           /* samples used */
    int nbatches;
    size_t sample;   /* floats per sample */
    int32_t *perm;
    float *x[2];
    int32_t *y[2];
    int count[2];
    long slot_batch[2];
    int ready[2];
    int produce, consume, epoch;
    int busy, quit, started;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static uint64_t mix(uint64_t a, uint64_t b, uint64_t c)
{
    return a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full ^
           (c + 1) * 0x165667B19E3779F9ull;
}

static void fill_batch(loom_loader_t *l, int b, float *x, int32_t *y, int *count)
{
    const loom_dataset_t *ds = l->d.ds;
    const int C = ds->channels, H = ds->rows, W = ds->cols, pad = l->d.pad;
    const float scale = 1.0f / (255.0f * l->d.std), shift = -l->d.mean / l->d.std;
    int start = b * l->d.batch, m = LOOM_MIN(l->d.batch, l->n - start);
    loom_rng_t r;
    loom_rng_seed(&r, mix(l->d.seed, (uint64_t)l->epoch, (uint64_t)b));
    for (int i = 0; i < m; i++) {
        int idx = l->perm[start + i];
        const uint8_t *src = ds->images + (size_t)idx * C * H * W;
        float *dst = x + (size_t)i * l->sample;
        y[i] = ds->labels[idx];
        int ox = 0, oy = 0, flip = 0;
        if (l->d.augment) {
            ox = pad > 0 ? (int)loom_rng_below(&r, 2 * pad + 1) - pad : 0;
            oy = pad > 0 ? (int)loom_rng_below(&r, 2 * pad + 1) - pad : 0;
            flip = (int)loom_rng_below(&r, 2);
        }
        for (int c = 0; c < C; c++)
            for (int h = 0; h < H; h++) {
                int sh = h + oy;
                float *row = dst + ((size_t)c * H + h) * W;
                if (sh < 0 || sh >= H) {
                    for (int w = 0; w < W; w++)
                        row[w] = shift;
                    continue;
                }
                const uint8_t *srow = src + ((size_t)c * H + sh) * W;
                for (int w = 0; w < W; w++) {
                    int sw = (flip ? W - 1 - w : w) + ox;
                    row[w] = (sw < 0 || sw >= W) ? shift : (float)srow[sw] * scale + shift;
                }
            }
    }
    *count = m;
}

static void *producer(void *arg)
{
    loom_loader_t *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->quit && (l->produce >= l->nbatches || l->produce - l->consume >= 2))
            pthread_cond_wait(&l->cv, &l->mu);
        if (l->quit)
            break;
        int b = l->produce++, s = b & 1;
        l->busy = 1;
        pthread_mutex_unlock(&l->mu);
        fill_batch(l, b, l->x[s], l->y[s], &l->count[s]);
        pthread_mutex_lock(&l->mu);
        l->busy = 0;
        l->slot_batch[s] = b;
        l->ready[s] = 1;
        pthread_cond_broadcast(&l->cv);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

int loom_loader_create(loom_loader_t **out, const loom_loader_desc_t *d)
{
    int st = LOOM_ERR_NOMEM;
    if (!out || !d || d->batch <= 0)
        return loom_error(LOOM_ERR_INVALID, "loader: batch size must be positive");
    loom_loader_t *l = calloc(1, sizeof *l);
    if (!l)
        return loom_error(LOOM_ERR_NOMEM, "loader: out of memory");
    l->d = *d;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    if (!d->ds) {
        loom_shape_t s = d->synth;
        if (s.c <= 0 || s.h <= 0 || s.w <= 0 || d->synth_classes <= 0) {
            st = loom_error(LOOM_ERR_INVALID, "loader: synthetic mode needs a shape and a class count");
            goto fail;
        }
        l->sample = (size_t)s.c * s.h * s.w;
        l->n = d->batch;
        l->nbatches = d->synth_batches > 0 ? d->synth_batches : 1;
        l->x[0] = loom__alloc(sizeof(float) * l->sample * d->batch);
        l->y[0] = loom__alloc(sizeof(int32_t) * d->batch);
        if (!l->x[0] || !l->y[0])
            goto fail_msg;
        loom_rng_t r;
        loom_rng_seed(&r, d->seed);
        for (size_t i = 0; i < l->sample * d->batch; i++)
            l->x[0][i] = loom_rng_normal(&r);
        for (int i = 0; i < d->batch; i++)
            l->y[0][i] = (int32_t)loom_rng_below(&r, (uint32_t)d->synth_classes);
        *out = l;
        return LOOM_OK;
    }
    if (!(d->std > 0.0f)) {
        st = loom_error(LOOM_ERR_INVALID, "loader: normalisation std must be positive");
        goto fail;
    }
    l->n = d->limit > 0 ? LOOM_MIN(d->limit, d->ds->count) : d->ds->count;
    l->nbatches = d->drop_last ? l->n / d->batch : (l->n + d->batch - 1) / d->batch;
    if (l->nbatches <= 0) {
        st = loom_error(LOOM_ERR_INVALID, "loader: %d samples make no full batch of %d", l->n, d->batch);
        goto fail;
    }
    l->sample = (size_t)d->ds->channels * d->ds->rows * d->ds->cols;
    l->perm = malloc(sizeof(int32_t) * (size_t)l->n);
    for (int s = 0; s < 2; s++) {
        l->x[s] = loom__alloc(sizeof(float) * l->sample * d->batch);
        l->y[s] = loom__alloc(sizeof(int32_t) * d->batch);
        if (!l->x[s] || !l->y[s])
            goto fail_msg;
    }
    if (!l->perm)
        goto fail_msg;
    l->produce = l->consume = l->nbatches; /* idle until an epoch starts */
    if (pthread_create(&l->thread, NULL, producer, l) != 0) {
        st = loom_error(LOOM_ERR_INTERNAL, "loader: cannot start the loader thread");
        goto fail;
    }
    l->started = 1;
    *out = l;
    return LOOM_OK;
fail_msg:
    st = loom_error(LOOM_ERR_NOMEM, "loader: out of memory");
fail:
    loom_loader_destroy(l);
    return st;
}

void loom_loader_destroy(loom_loader_t *l)
{
    if (!l)
        return;
    if (l->started) {
        pthread_mutex_lock(&l->mu);
        l->quit = 1;
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thread, NULL);
    }
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    for (int s = 0; s < 2; s++) {
        loom__free(l->x[s]);
        loom__free(l->y[s]);
    }
    free(l->perm);
    free(l);
}

int loom_loader_batches(const loom_loader_t *l) { return l->nbatches; }

int loom_loader_start_epoch(loom_loader_t *l, int epoch)
{
    return loom_loader_start_epoch_at(l, epoch, 0);
}

int loom_loader_start_epoch_at(loom_loader_t *l, int epoch, int first)
{
    if (first < 0 || first > l->nbatches)
        return loom_error(LOOM_ERR_INVALID, "loader: batch %d of an epoch of %d batches", first,
                          l->nbatches);
    if (!l->d.ds) {
        l->consume = first;
        return LOOM_OK;
    }
    pthread_mutex_lock(&l->mu);
    while (l->busy)
        pthread_cond_wait(&l->cv, &l->mu);
    l->epoch = epoch;
    for (int i = 0; i < l->n; i++)
        l->perm[i] = i;
    if (l->d.shuffle) {
        loom_rng_t r;
        loom_rng_seed(&r, mix(l->d.seed, (uint64_t)epoch, 0xFFFFFFFFull));
        for (int i = l->n - 1; i > 0; i--) {
            int j = (int)loom_rng_below(&r, (uint32_t)i + 1);
            int32_t t = l->perm[i];
            l->perm[i] = l->perm[j];
            l->perm[j] = t;
        }
    }
    l->ready[0] = l->ready[1] = 0;
    l->produce = l->consume = first;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    return LOOM_OK;
}

int loom_loader_next(loom_loader_t *l, float *x, int32_t *y)
{
    if (!l->d.ds) {
        if (l->consume >= l->nbatches)
            return 0;
        l->consume++;
        memcpy(x, l->x[0], sizeof(float) * l->sample * l->d.batch);
        memcpy(y, l->y[0], sizeof(int32_t) * l->d.batch);
        return l->d.batch;
    }
    pthread_mutex_lock(&l->mu);
    if (l->consume >= l->nbatches) {
        pthread_mutex_unlock(&l->mu);
        return 0;
    }
    int s = l->consume & 1;
    while (!(l->ready[s] && l->slot_batch[s] == l->consume))
        pthread_cond_wait(&l->cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
    int m = l->count[s];
    memcpy(x, l->x[s], sizeof(float) * l->sample * (size_t)m);
    memcpy(y, l->y[s], sizeof(int32_t) * (size_t)m);
    pthread_mutex_lock(&l->mu);
    l->ready[s] = 0;
    l->consume++;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    return m;
}
