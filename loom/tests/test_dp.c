/*
 * test_dp.c (run under mpiexec -n N) - data parallelism against the
 * single-process reference.
 *
 * The rule tested: N data-parallel ranks with batch B each, after K SGD
 * steps (momentum, weight decay), hold the parameters that one process
 * computes with batch N*B (the mean loss over N*B samples is the average of
 * the ranks' mean losses).  This holds for models without batch norm: Loom's
 * batch-norm statistics are per rank, so a model with batch norm matches
 * only approximately.  The model here is conv/relu/strided conv/gap/fc.
 * Tolerance: max |p_dp - p_ref| <= 2e-5 * max |p_ref| (float sums in
 * another order).  Also checked: every bucket layout and mode (overlap with
 * tiny buckets, one 25 MiB bucket, blocking, SUM then scale) agrees, the
 * buckets really start during backward, the parameters stay identical on all
 * ranks, and a second run from the same seed is bitwise identical.
 *
 * loom_dp_set_mode on one object: overlap, then blocking, then overlap again
 * on the same gradients give the all-reduced average of the ranks' local
 * gradients (tolerance 1e-6 * max|g|: the buckets and the single all-reduce
 * may use different algorithms, so float sums in another order), blocking
 * starts no bucket during backward and overlap starts them all, and a switch
 * between loom_dp_begin and loom_dp_finish (buckets in flight or not) or to
 * an unknown mode is refused with LOOM_ERR_INVALID and changes nothing.
 */
#include "harness_mpi.h"
#include "loom.h"
#include "loom_par.h"

#include <string.h>

#define LOOM_CHECK_GOTO_T(expr)  \
    do {                          \
        if ((st = (expr)) < 0)    \
            goto out;             \
    } while (0)

enum { B = 4, C = 3, HW = 8, CLASSES = 5, STEPS = 4 };

static int build(loom_model_t **m, int batch)
{
    int st, x;
    if ((st = loom_model_create(m, "dpnet", (loom_shape_t){batch, C, HW, HW})) < 0)
        return st;
    x = loom_add_conv(*m, "c1", loom_input(*m), 8, 3, 1, 1, 1, 1, 1);
    x = loom_add_relu(*m, "r1", x);
    x = loom_add_conv(*m, "c2", x, 16, 3, 2, 1, 1, 1, 0);
    x = loom_add_relu(*m, "r2", x);
    x = loom_add_conv(*m, "c3", x, 16, 3, 1, 1, 1, 1, 1);
    x = loom_add_relu(*m, "r3", x);
    x = loom_add_gap(*m, "gap", x);
    x = loom_add_fc(*m, "fc", x, CLASSES);
    if (x < 0)
        return x;
    return loom_model_finish(*m, x, 42);
}

/* The global batch of step s: samples 0..total-1, same on every rank. */
static void make_batch(int s, int total, float *x, int32_t *y)
{
    loom_rng_t r;
    loom_rng_seed(&r, 1000 + (uint64_t)s);
    for (int i = 0; i < total * C * HW * HW; i++)
        x[i] = loom_rng_normal(&r);
    for (int i = 0; i < total; i++)
        y[i] = (int32_t)loom_rng_below(&r, CLASSES);
}

static loom_optim_desc_t optim(void)
{
    loom_optim_desc_t od = LOOM_OPTIM_DESC_INIT;
    od.lr = 0.05f;
    od.momentum = 0.9f;
    od.weight_decay = 1e-3f;
    return od;
}

/* Trains STEPS steps on `n` samples starting at sample `first` of each
 * global batch of `total`; dp NULL: single process.  Leaves params in out. */
static int train(int total, int first, int n, const loom_dp_desc_t *dd, float *out, size_t *np,
                 int *early, int *nbuckets)
{
    loom_model_t *m = NULL;
    loom_optim_t *o = NULL;
    loom_dp_t *dp = NULL;
    unsigned char *mask = NULL;
    float *gx = malloc(sizeof(float) * (size_t)total * C * HW * HW);
    int32_t *gy = malloc(sizeof(int32_t) * (size_t)total);
    int st = LOOM_ERR_NOMEM;
    loom_optim_desc_t od = optim();
    if (!gx || !gy)
        goto out;
    LOOM_CHECK_GOTO_T(build(&m, n));
    LOOM_CHECK_GOTO_T(loom_optim_create(&o, &od, loom_model_param_count(m)));
    if (!(mask = loom_model_decay_mask(m)))
        goto out;
    if (dd) {
        LOOM_CHECK_GOTO_T(loom_dp_create(&dp, m, dd));
        /* Start from different weights on non-root ranks: the broadcast must fix it. */
        int rank = 0;
        weft_comm_rank(dd->comm, &rank);
        if (rank != 0)
            for (size_t i = 0; i < loom_model_param_count(m); i++)
                loom_model_params(m)[i] += 0.5f;
        LOOM_CHECK_GOTO_T(loom_dp_broadcast(dp, 0));
    }
    size_t per = (size_t)C * HW * HW;
    for (int s = 0; s < STEPS; s++) {
        make_batch(s, total, gx, gy);
        memcpy(loom_model_input(m), gx + (size_t)first * per, sizeof(float) * per * (size_t)n);
        LOOM_CHECK_GOTO_T(loom_model_forward(m, n, 1));
        loom_softmax_xent(n, CLASSES, loom_model_output(m), gy + first, loom_model_doutput(m), NULL);
        loom_model_zero_grad(m);
        if (dp)
            LOOM_CHECK_GOTO_T(loom_dp_begin(dp));
        LOOM_CHECK_GOTO_T(loom_model_backward(m, n));
        if (dp) {
            LOOM_CHECK_GOTO_T(loom_dp_finish(dp));
            if (early)
                *early = loom_dp_early_buckets(dp);
            if (nbuckets)
                *nbuckets = loom_dp_num_buckets(dp);
        }
        loom_optim_step(o, loom_model_params(m), loom_model_grads(m), mask);
    }
    *np = loom_model_param_count(m);
    memcpy(out, loom_model_params(m), sizeof(float) * *np);
    st = LOOM_OK;
out:
    if (st < 0)
        fprintf(stderr, "train: %s\n", loom_last_error());
    loom_dp_destroy(dp);
    free(mask);
    loom_optim_destroy(o);
    loom_model_destroy(m);
    free(gx);
    free(gy);
    return st;
}

static double maxrel(const float *a, const float *b, size_t n)
{
    double num = 0.0, den = 1e-12;
    for (size_t i = 0; i < n; i++) {
        num = fmax(num, fabs((double)a[i] - b[i]));
        den = fmax(den, fabs((double)b[i]));
    }
    return num / den;
}

/* One forward and backward of m on its input (labels y) with dp (NULL:
 * local) into g; *early its early buckets.  The forward is redone each time:
 * backward reuses the loss gradient's memory for other layers' gradients. */
static int grad_step(loom_model_t *m, const int32_t *y, loom_dp_t *dp, float *g, int *early)
{
    int st;
    if ((st = loom_model_forward(m, B, 1)) < 0)
        return st;
    loom_softmax_xent(B, CLASSES, loom_model_output(m), y, loom_model_doutput(m), NULL);
    loom_model_zero_grad(m);
    if (dp && (st = loom_dp_begin(dp)) < 0)
        return st;
    if ((st = loom_model_backward(m, B)) < 0)
        return st;
    if (dp && (st = loom_dp_finish(dp)) < 0)
        return st;
    memcpy(g, loom_model_grads(m), sizeof(float) * loom_model_param_count(m));
    if (early)
        *early = dp ? loom_dp_early_buckets(dp) : 0;
    return LOOM_OK;
}

static void check_set_mode(weft_comm_t comm, int rank, int size)
{
    enum { MAXP = 20000 };
    static float ref[MAXP], over[MAXP], block[MAXP], again[MAXP];
    loom_model_t *m = NULL;
    loom_dp_t *dp = NULL;
    float *gx = malloc(sizeof(float) * (size_t)B * size * C * HW * HW);
    int32_t *gy = malloc(sizeof(int32_t) * (size_t)B * size);
    int st = LOOM_ERR_NOMEM, e_over = -1, e_block = -1, e_again = -1;
    if (!gx || !gy)
        goto out;
    LOOM_CHECK_GOTO_T(build(&m, B));
    size_t n = loom_model_param_count(m), per = (size_t)C * HW * HW;
    CHECK(n <= MAXP, "set_mode: model too large for the test (%zu)", n);
    if (n > MAXP)
        goto out;
    make_batch(0, B * size, gx, gy);
    memcpy(loom_model_input(m), gx + (size_t)rank * B * per, sizeof(float) * per * B);
    const int32_t *y = gy + rank * B;
    /* reference: the local gradients, averaged by hand */
    LOOM_CHECK_GOTO_T(grad_step(m, y, NULL, ref, NULL));
    int ws = weft_allreduce(WEFT_IN_PLACE, ref, n, WEFT_FLOAT32, WEFT_AVG, comm);
    CHECK(ws == WEFT_SUCCESS, "set_mode: reference weft_allreduce: %s", weft_strerror(ws));
    loom_dp_desc_t dd = LOOM_DP_DESC_INIT;
    dd.comm = comm;
    dd.bucket_bytes = 256;
    LOOM_CHECK_GOTO_T(loom_dp_create(&dp, m, &dd));
    int nb = loom_dp_num_buckets(dp);
    LOOM_CHECK_GOTO_T(grad_step(m, y, dp, over, &e_over));
    st = loom_dp_set_mode(dp, LOOM_DP_BLOCKING);
    CHECK(st == LOOM_OK, "set_mode(BLOCKING) between steps: %d (%s)", st, loom_last_error());
    LOOM_CHECK_GOTO_T(grad_step(m, y, dp, block, &e_block));
    st = loom_dp_set_mode(dp, LOOM_DP_OVERLAP);
    CHECK(st == LOOM_OK, "set_mode(OVERLAP) between steps: %d (%s)", st, loom_last_error());
    LOOM_CHECK_GOTO_T(grad_step(m, y, dp, again, &e_again));
    double eo = maxrel(over, ref, n), eb = maxrel(block, ref, n);
    CHECK(eo <= 1e-6, "set_mode: overlap gradients differ from the average by %.3g", eo);
    CHECK(eb <= 1e-6, "set_mode: blocking gradients differ from the average by %.3g", eb);
    CHECK(memcmp(again, over, sizeof(float) * n) == 0, "set_mode: overlap again is not bitwise the same");
    CHECK(nb > 3 && e_over == nb && e_again == nb && e_block == 0,
          "set_mode: buckets started during backward: overlap %d, blocking %d, overlap again %d "
          "(of %d; want all, 0, all)", e_over, e_block, e_again, nb);
    if (rank == 0)
        printf("set_mode: overlap/blocking/overlap on one object: %d/%d/%d of %d buckets during "
               "backward, max rel err %.3g/%.3g vs the averaged local gradients\n",
               e_over, e_block, e_again, nb, eo, eb);
    /* refused while a step is in progress, before and after buckets start */
    LOOM_CHECK_GOTO_T(loom_dp_begin(dp));
    st = loom_dp_set_mode(dp, LOOM_DP_BLOCKING);
    CHECK(st == LOOM_ERR_INVALID, "set_mode after begin: %d, want LOOM_ERR_INVALID", st);
    LOOM_CHECK_GOTO_T(loom_dp_notify(dp, 0)); /* every bucket is complete: all start */
    CHECK(loom_dp_early_buckets(dp) == nb, "notify(0) started %d of %d buckets",
          loom_dp_early_buckets(dp), nb);
    st = loom_dp_set_mode(dp, LOOM_DP_BLOCKING);
    CHECK(st == LOOM_ERR_INVALID && strstr(loom_last_error(), "set_mode"),
          "set_mode with buckets in flight: %d (%s), want LOOM_ERR_INVALID", st, loom_last_error());
    LOOM_CHECK_GOTO_T(loom_dp_finish(dp));
    st = loom_dp_set_mode(dp, (loom_dp_mode_t)7);
    CHECK(st == LOOM_ERR_INVALID, "set_mode(7): %d, want LOOM_ERR_INVALID", st);
    /* the refused switches left overlap in place */
    LOOM_CHECK_GOTO_T(grad_step(m, y, dp, again, &e_again));
    CHECK(e_again == nb && memcmp(again, over, sizeof(float) * n) == 0,
          "after refused set_mode: %d of %d buckets during backward, gradients %s", e_again, nb,
          memcmp(again, over, sizeof(float) * n) ? "differ" : "same");
    st = LOOM_OK;
out:
    CHECK(st == LOOM_OK, "set_mode test: %s", loom_last_error());
    loom_dp_destroy(dp);
    loom_model_destroy(m);
    free(gx);
    free(gy);
}

int main(int argc, char **argv)
{
    int rank, size;
    if (t_mpi_init(&argc, &argv, &rank, &size) != 0)
        return 1;
    loom_layout_t lay;
    int st = loom_layout_create(&lay, MPI_COMM_WORLD, size, 1, 1);
    CHECK(st == 0, "layout: %s", loom_last_error());
    if (st < 0)
        goto done;
    {
        /* A mismatched layout is refused with a message. */
        loom_layout_t bad;
        int bs = loom_layout_create(&bad, MPI_COMM_WORLD, size + 1, 1, 1);
        CHECK(bs == LOOM_ERR_INVALID && strstr(loom_last_error(), "D*H*W"),
              "layout mismatch not refused (%d: %s)", bs, loom_last_error());
    }
    enum { MAXP = 20000 };
    static float ref[MAXP], got[MAXP], again[MAXP];
    size_t nref = 0, n = 0;
    int total = B * size;
    st = train(total, 0, total, NULL, ref, &nref, NULL, NULL);
    CHECK(st == 0 && nref <= MAXP, "reference run");

    struct {
        const char *name;
        loom_dp_desc_t d;
    } cases[4] = {
        {"overlap, 256-byte buckets", LOOM_DP_DESC_INIT},
        {"overlap, default buckets", LOOM_DP_DESC_INIT},
        {"blocking", LOOM_DP_DESC_INIT},
        {"overlap, SUM then scale", LOOM_DP_DESC_INIT},
    };
    cases[0].d.bucket_bytes = 256;
    cases[2].d.mode = LOOM_DP_BLOCKING;
    cases[3].d.op = WEFT_SUM;
    cases[3].d.scale = 1.0f / (float)size;
    cases[3].d.bucket_bytes = 4096;
    for (int c = 0; c < 4; c++) {
        int early = -1, nb = -1;
        cases[c].d.comm = lay.world;
        st = train(total, rank * B, B, &cases[c].d, got, &n, &early, &nb);
        CHECK(st == 0 && n == nref, "%s: run failed", cases[c].name);
        if (st < 0)
            continue;
        double e = maxrel(got, ref, n);
        CHECK(e <= 2e-5, "%s: rank %d differs from the single-process batch %d by %.3g", cases[c].name,
              rank, total, e);
        if (rank == 0)
            printf("%s: %d buckets (%d started during backward), max rel err %.3g vs 1 rank x batch %d\n",
                   cases[c].name, nb, early, e, total);
        if (c == 0)
            CHECK(nb > 3 && early >= nb - 1, "%s: %d buckets, only %d started during backward",
                  cases[c].name, nb, early);
        if (c == 1)
            CHECK(nb == 1, "default 25 MiB bucket should hold this small model (%d buckets)", nb);
        /* Same parameters on every rank (bitwise). */
        float *r0 = malloc(sizeof(float) * n);
        if (r0) {
            memcpy(r0, got, sizeof(float) * n);
            int ws = weft_bcast(r0, n, WEFT_FLOAT32, 0, lay.world);
            CHECK(ws == WEFT_SUCCESS && memcmp(r0, got, sizeof(float) * n) == 0,
                  "%s: ranks hold different parameters", cases[c].name);
            free(r0);
        }
        if (c == 0) {
            st = train(total, rank * B, B, &cases[c].d, again, &n, NULL, NULL);
            CHECK(st == 0 && memcmp(again, got, sizeof(float) * n) == 0,
                  "same seed, same layout: not bitwise identical");
        }
    }
    check_set_mode(lay.world, rank, size);
    loom_layout_destroy(&lay);
done:;
    return t_mpi_done(rank, size);
}
