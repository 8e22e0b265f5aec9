/*
 * measure.c - the cost model's alpha, beta, gamma for a new communicator:
 * rank 0's process-wide values (tuning file or an earlier measurement) if it
 * has them, else, with WEFT_MEASURE=1, measured here by a ping-pong between
 * ranks 0 and 1 over the control channel; agreed by every rank (rank 0's
 * view wins) so that every rank's selection sees the same inputs.
 *
 * Thread contract: the caller thread of weft_comm_create, collective over
 * the communicator (blocking; never on the engine side).
 */
#include <stdlib.h>

#include "measure.h"
#include "weft_internal.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Ping-pong between ranks 0 and 1 of c: fastest one-way time for `bytes`.
 * The minimum, not the median: on a loaded node the median measures the
 * load, while the minimum measures what the hardware does. */
static weft_status_t pingpong(weft__comm_t *c, void *buf, size_t bytes, int iters, double *one_way)
{
    double t[32];
    if (iters > 32) iters = 32;
    for (int i = 0; i < iters; i++) {
        double t0 = weft__now();
        if (c->rank == 0) {
            WEFT__CHECK(weft__ctl_send(c->ctl, buf, bytes, 1, 0));
            WEFT__CHECK(weft__ctl_recv(c->ctl, buf, bytes, 1, 0));
        } else if (c->rank == 1) {
            WEFT__CHECK(weft__ctl_recv(c->ctl, buf, bytes, 0, 0));
            WEFT__CHECK(weft__ctl_send(c->ctl, buf, bytes, 0, 0));
        }
        t[i] = (weft__now() - t0) / 2;
    }
    qsort(t, (size_t)iters, sizeof t[0], cmp_double);
    *one_way = t[0];
    return WEFT_SUCCESS;
}

/*
 * alpha, beta: ping-pongs of 8 B, 64 KiB and 1 MiB. Beta is the slope
 * between the two large sizes; alpha is that line's intercept (at least the
 * 8 B time). The intercept, not the 8 B latency: the algorithms' messages
 * that matter for a choice are large enough to use the transport's
 * rendezvous protocol, whose handshake costs several small-message
 * latencies. gamma: the float32 sum kernel on 256 Ki elements.
 */
static weft_status_t measure(weft__comm_t *c, weft__cost_t *out)
{
    enum { BIG = 1 << 20, MID = 64 << 10, SMALL = 8 };
    const weft__cost_t *def = weft__select_cost_default();
    weft_status_t st = WEFT_SUCCESS;
    char *buf = calloc(2, BIG);
    if (buf == NULL) return WEFT_ERR_NO_MEMORY;
    double t_small = 0, t_mid = 0, t_big = 0;
    if (c->rank <= 1) {
        WEFT__CHECK_GOTO(pingpong(c, buf, SMALL, 2, &t_small), st, out); /* warm up */
        WEFT__CHECK_GOTO(pingpong(c, buf, SMALL, 31, &t_small), st, out);
        WEFT__CHECK_GOTO(pingpong(c, buf, MID, 2, &t_mid), st, out);
        WEFT__CHECK_GOTO(pingpong(c, buf, MID, 15, &t_mid), st, out);
        WEFT__CHECK_GOTO(pingpong(c, buf, BIG, 1, &t_big), st, out);
        WEFT__CHECK_GOTO(pingpong(c, buf, BIG, 7, &t_big), st, out);
    }
    /* gamma: float32 sum of 256 Ki elements, fastest of 5 */
    double g[5];
    for (int i = 0; i < 5; i++) {
        double t0 = weft__now();
        weft__reduce(buf, buf + BIG, BIG / 4, WEFT_FLOAT32, WEFT_SUM);
        g[i] = (weft__now() - t0) / BIG;
    }
    qsort(g, 5, sizeof g[0], cmp_double);
    out->beta = t_big > t_mid ? (t_big - t_mid) / (BIG - MID) : def->beta;
    double intercept = t_mid - MID * out->beta;
    out->alpha = intercept > t_small ? intercept : t_small > 0 ? t_small : def->alpha;
    out->gamma = g[0] > 0 ? g[0] : def->gamma;
out:
    free(buf);
    return st;
}

/* Collective over c: agree on the cost parameters (rank 0's view wins). */
weft_status_t weft__select_init(weft__comm_t *c)
{
    weft__cost_t known = {.alpha = 0};
    bool have = weft__select_cost_known(&known);
    double v[4] = {have, known.alpha, known.beta, known.gamma};
    WEFT__CHECK(weft__ctl_bcast(c->ctl, v, sizeof v, 0));
    if (v[0] == 0 && weft__cfg.measure && c->size > 1) {
        weft__cost_t m = *weft__select_cost_default();
        weft_status_t st = measure(c, &m);
        int ok = st == WEFT_SUCCESS, all = 0;
        WEFT__CHECK(weft__ctl_allreduce(c->ctl, &ok, &all, 1, WEFT__CTL_INT, WEFT__CTL_MIN));
        if (!all) return st != WEFT_SUCCESS ? st : WEFT_ERR_COMM_BROKEN;
        v[0] = 1;
        v[1] = m.alpha;
        v[2] = m.beta;
        v[3] = m.gamma;
        WEFT__CHECK(weft__ctl_bcast(c->ctl, v, sizeof v, 0));
        WEFT__INFO("measured alpha %.3g s, beta %.3g s/B, gamma %.3g s/B", v[1], v[2], v[3]);
    }
    if (v[0] != 0) {
        c->cost = (weft__cost_t){.alpha = v[1], .beta = v[2], .gamma = v[3]};
        /* Remember process-wide (same machine): later comms reuse it. */
        weft__select_cost_remember(&c->cost);
    } else {
        c->cost = *weft__select_cost_default();
    }
    /* The topology (lib/topo.c, the same on every rank). */
    c->cost.nnodes = c->nnodes;
    c->cost.ppn = c->nodes_uniform ? c->local_size : 0;
    return WEFT_SUCCESS;
}
