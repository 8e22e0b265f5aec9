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
    loom_layout_destroy(&lay);
done:;
    return t_mpi_done(rank, size);
}
