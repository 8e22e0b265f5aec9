/*
 * dp.c - data parallelism: gradient buckets all-reduced during backward.
 *
 * Parameters lie in the flat array in layer order and backward runs the
 * layers in reverse, so the gradients become final from the end of the
 * array towards its start.  Buckets are therefore contiguous slices
 * [lo, hi) of the flat gradient array, planned from the end: whole tensors
 * are added until a bucket holds bucket_bytes.  The model's backward hook
 * reports after each layer which suffix of the array is final; every bucket
 * lying wholly inside it has its weft_iallreduce (in place) started at once,
 * so the reduction of the last layers' gradients runs on Weft's progress
 * engine while the earlier layers still compute.  loom_dp_finish launches
 * what is left (a layer without parameters at the front), waits for all
 * buckets, and scales.
 *
 * Every rank plans the same buckets from the same model and launches them in
 * the same order, as Weft requires of collectives on one communicator.
 */
#include "internal.h"
#include "loom_par.h"

typedef struct {
    size_t lo, hi;   /* float range in the flat gradients */
    weft_request_t req;
    int launched;
} bucket_t;

struct loom_dp {
    loom_model_t *m;
    loom_dp_desc_t d;
    bucket_t *b;     /* b[0] covers the end of the array (last layers) */
    int nb;
    int next;        /* first bucket not launched yet */
    int armed;
    int error;       /* first launch failure of this step (Loom status) */
    int early;       /* buckets of this step launched during backward */
    double wait_s;
};

int loom_weft_error(int ws, const char *what)
{
    return loom_error(LOOM_ERR_INTERNAL, "%s: %s (%s)", what, weft_strerror((weft_status_t)ws),
                      weft_status_name((weft_status_t)ws));
}

static int launch(loom_dp_t *dp, int k)
{
    bucket_t *b = &dp->b[k];
    float *g = loom_model_grads(dp->m);
    int ws = weft_iallreduce(WEFT_IN_PLACE, g + b->lo, b->hi - b->lo, WEFT_FLOAT32, dp->d.op,
                             dp->d.comm, &b->req);
    if (ws != WEFT_SUCCESS)
        return loom_weft_error(ws, "data parallel: weft_iallreduce of a gradient bucket");
    b->launched = 1;
    return LOOM_OK;
}

static int on_backward(void *arg, int op, size_t ready_from)
{
    loom_dp_t *dp = arg;
    (void)op;
    if (!dp->armed || dp->d.mode != LOOM_DP_OVERLAP)
        return LOOM_OK;
    while (dp->next < dp->nb && dp->b[dp->next].lo >= ready_from) {
        int st = launch(dp, dp->next);
        if (st < 0) {
            dp->error = st;
            return st;
        }
        dp->next++;
        dp->early++;
    }
    return LOOM_OK;
}

int loom_dp_create(loom_dp_t **out, loom_model_t *m, const loom_dp_desc_t *d)
{
    if (!out || !m || !d || !d->comm)
        return loom_error(LOOM_ERR_INVALID, "data parallel: NULL model, descriptor or communicator");
    if (d->op != WEFT_AVG && d->op != WEFT_SUM)
        return loom_error(LOOM_ERR_INVALID, "data parallel: the reduction must be WEFT_AVG or WEFT_SUM");
    loom_dp_t *dp = calloc(1, sizeof *dp);
    int np = loom_model_num_params(m);
    if (!dp || !(dp->b = calloc((size_t)(np > 0 ? np : 1), sizeof *dp->b))) {
        free(dp);
        return loom_error(LOOM_ERR_NOMEM, "data parallel: out of memory");
    }
    dp->m = m;
    dp->d = *d;
    if (!dp->d.bucket_bytes)
        dp->d.bucket_bytes = LOOM_DP_DEFAULT_BUCKET_BYTES;
    /* Plan from the last tensor backwards. */
    size_t hi = loom_model_param_count(m);
    for (int i = np - 1; i >= 0; i--) {
        loom_param_t *p = loom_model_param(m, i);
        size_t lo = p->offset;
        if ((hi - lo) * sizeof(float) >= dp->d.bucket_bytes || i == 0) {
            dp->b[dp->nb++] = (bucket_t){.lo = lo, .hi = hi};
            hi = lo;
        }
    }
    loom_model_set_backward_hook(m, on_backward, dp);
    *out = dp;
    return LOOM_OK;
}

void loom_dp_destroy(loom_dp_t *dp)
{
    if (!dp)
        return;
    for (int k = 0; k < dp->nb; k++)
        if (dp->b[k].launched)
            weft_wait(&dp->b[k].req); /* error already reported, or nobody waits any more */
    loom_model_set_backward_hook(dp->m, NULL, NULL);
    free(dp->b);
    free(dp);
}

int loom_dp_broadcast(loom_dp_t *dp, int root)
{
    int ws = weft_bcast(loom_model_params(dp->m), loom_model_param_count(dp->m), WEFT_FLOAT32, root,
                        dp->d.comm);
    if (ws != WEFT_SUCCESS)
        return loom_weft_error(ws, "data parallel: weft_bcast of the parameters");
    size_t nbuf = loom_model_buffer_count(dp->m);
    if (nbuf) {
        ws = weft_bcast(loom_model_buffers(dp->m), nbuf, WEFT_FLOAT32, root, dp->d.comm);
        if (ws != WEFT_SUCCESS)
            return loom_weft_error(ws, "data parallel: weft_bcast of the batch-norm buffers");
    }
    return LOOM_OK;
}

int loom_dp_begin(loom_dp_t *dp)
{
    for (int k = 0; k < dp->nb; k++)
        if (dp->b[k].launched)
            return loom_error(LOOM_ERR_INVALID, "data parallel: begin while bucket %d is in flight", k);
    dp->next = 0;
    dp->early = 0;
    dp->error = LOOM_OK;
    dp->armed = 1;
    return LOOM_OK;
}

int loom_dp_finish(loom_dp_t *dp)
{
    int st = dp->error;
    float *g = loom_model_grads(dp->m);
    size_t n = loom_model_param_count(dp->m);
    double t0 = loom_now();
    dp->armed = 0;
    if (dp->d.mode == LOOM_DP_BLOCKING) {
        int ws = weft_allreduce(WEFT_IN_PLACE, g, n, WEFT_FLOAT32, dp->d.op, dp->d.comm);
        if (ws != WEFT_SUCCESS && st == LOOM_OK)
            st = loom_weft_error(ws, "data parallel: weft_allreduce of the gradients");
    } else {
        while (st == LOOM_OK && dp->next < dp->nb) {
            st = launch(dp, dp->next);
            dp->next++;
        }
        for (int k = 0; k < dp->nb; k++) {
            if (!dp->b[k].launched)
                continue;
            int ws = weft_wait(&dp->b[k].req);
            dp->b[k].launched = 0;
            if (ws != WEFT_SUCCESS && st == LOOM_OK)
                st = loom_weft_error(ws, "data parallel: waiting for a gradient bucket");
        }
    }
    dp->wait_s += loom_now() - t0;
    if (st < 0)
        return st;
    if (dp->d.scale != 1.0f)
        for (size_t i = 0; i < n; i++)
            g[i] *= dp->d.scale;
    return LOOM_OK;
}

int loom_dp_set_mode(loom_dp_t *dp, loom_dp_mode_t mode)
{
    if (!dp)
        return loom_error(LOOM_ERR_INVALID, "data parallel: set_mode on a NULL object");
    if (mode != LOOM_DP_OVERLAP && mode != LOOM_DP_BLOCKING)
        return loom_error(LOOM_ERR_INVALID, "data parallel: unknown mode %d", (int)mode);
    /* A step mixing both modes would reduce some gradients twice or not at all. */
    if (dp->armed)
        return loom_error(LOOM_ERR_INVALID,
                          "data parallel: set_mode between loom_dp_begin and loom_dp_finish");
    /* (A bucket is in flight only between loom_dp_begin and the end of
     * loom_dp_finish, so the check above covers it.) */
    dp->d.mode = mode;
    return LOOM_OK;
}

int loom_dp_notify(loom_dp_t *dp, size_t ready_from) { return on_backward(dp, -1, ready_from); }
int loom_dp_num_buckets(const loom_dp_t *dp) { return dp->nb; }
int loom_dp_early_buckets(const loom_dp_t *dp) { return dp->early; }
double loom_dp_wait_seconds(const loom_dp_t *dp) { return dp->wait_s; }
void loom_dp_reset_timers(loom_dp_t *dp) { dp->wait_s = 0.0; }

void loom_dp_print_algos(const loom_dp_t *dp, FILE *f)
{
    int size = 0;
    weft_comm_size(dp->d.comm, &size);
    if (dp->d.mode == LOOM_DP_BLOCKING) {
        size_t n = loom_model_param_count(dp->m);
        weft_algo_t a = WEFT_ALGO_AUTO;
        int ws = weft_query_algo(dp->d.comm, WEFT_COLL_ALLREDUCE, n, WEFT_FLOAT32, &a);
        fprintf(f, "# allreduce (blocking, %d ranks): 1 call of %zu bytes -> %s\n", size,
                n * sizeof(float), ws == WEFT_SUCCESS ? weft_algo_name(a) : weft_strerror(ws));
        return;
    }
    fprintf(f, "# allreduce buckets (overlap, %d ranks, limit %zu bytes): %d buckets\n", size,
            dp->d.bucket_bytes, dp->nb);
    for (int k = 0; k < dp->nb; k++) {
        size_t cnt = dp->b[k].hi - dp->b[k].lo;
        weft_algo_t a = WEFT_ALGO_AUTO;
        int ws = weft_query_algo(dp->d.comm, WEFT_COLL_ALLREDUCE, cnt, WEFT_FLOAT32, &a);
        fprintf(f, "#   bucket %d: floats [%zu, %zu), %zu bytes -> %s\n", k, dp->b[k].lo, dp->b[k].hi,
                cnt * sizeof(float), ws == WEFT_SUCCESS ? weft_algo_name(a) : weft_strerror(ws));
    }
}
