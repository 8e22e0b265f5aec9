/*
 * measure.c - the cost model's alpha, beta, gamma (and, on a communicator
 * that spans nodes, alpha_node, beta_node) for a new communicator: rank 0's
 * process-wide values for its kind of comm (one node or several: lib/select.c
 * keeps them apart; tuning file or an earlier measurement) if it has them,
 * else, with WEFT_MEASURE=1, measured here by ping-pongs over the control
 * channel: between ranks 0 and 1 on one node; on several, between the first
 * ranks of nodes 0 and 1 (alpha, beta: across nodes) and between the first
 * two ranks of the first node that has two (alpha_node, beta_node). Agreed by
 * every rank (each figure is the measuring rank's) so that every rank's
 * selection sees the same inputs.
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

/* Ping-pong between ranks a and b of c (the others return at once): fastest
 * one-way time for `bytes`, valid on a and b. The minimum, not the median: on
 * a loaded node the median measures the load, while the minimum measures
 * what the hardware does. */
static weft_status_t pingpong(weft__comm_t *c, int a, int b, void *buf, size_t bytes, int iters,
                              double *one_way)
{
    double t[32];
    if (c->rank != a && c->rank != b) return WEFT_SUCCESS;
    if (iters > 32) iters = 32;
    for (int i = 0; i < iters; i++) {
        double t0 = weft__now();
        if (c->rank == a) {
            WEFT__CHECK(weft__ctl_send(c->ctl, buf, bytes, b, 0));
            WEFT__CHECK(weft__ctl_recv(c->ctl, buf, bytes, b, 0));
        } else {
            WEFT__CHECK(weft__ctl_recv(c->ctl, buf, bytes, a, 0));
            WEFT__CHECK(weft__ctl_send(c->ctl, buf, bytes, a, 0));
        }
        t[i] = (weft__now() - t0) / 2;
    }
    qsort(t, (size_t)iters, sizeof t[0], cmp_double);
    *one_way = t[0];
    return WEFT_SUCCESS;
}

/*
 * alpha, beta of the link between ranks a and b (set on those two, left
 * alone elsewhere): ping-pongs of 8 B, 64 KiB and 1 MiB. Beta is the slope
 * between the two large sizes; alpha is that line's intercept (at least the
 * 8 B time). The intercept, not the 8 B latency: the algorithms' messages
 * that matter for a choice are large enough to use the transport's
 * rendezvous protocol, whose handshake costs several small-message
 * latencies.
 */
static weft_status_t measure_link(weft__comm_t *c, int a, int b, char *buf, double *alpha,
                                  double *beta)
{
    enum { BIG = 1 << 20, MID = 64 << 10, SMALL = 8 };
    const weft__cost_t *def = weft__select_cost_default();
    double t_small = 0, t_mid = 0, t_big = 0;
    if (c->rank != a && c->rank != b) return WEFT_SUCCESS;
    WEFT__CHECK(pingpong(c, a, b, buf, SMALL, 2, &t_small)); /* warm up */
    WEFT__CHECK(pingpong(c, a, b, buf, SMALL, 31, &t_small));
    WEFT__CHECK(pingpong(c, a, b, buf, MID, 2, &t_mid));
    WEFT__CHECK(pingpong(c, a, b, buf, MID, 15, &t_mid));
    WEFT__CHECK(pingpong(c, a, b, buf, BIG, 1, &t_big));
    WEFT__CHECK(pingpong(c, a, b, buf, BIG, 7, &t_big));
    *beta = t_big > t_mid ? (t_big - t_mid) / (BIG - MID) : def->beta;
    double intercept = t_mid - MID * *beta;
    *alpha = intercept > t_small ? intercept : t_small > 0 ? t_small : def->alpha;
    return WEFT_SUCCESS;
}

/* The figures this rank measured, 0 for the others (every figure is measured
 * by one rank: the agreement takes the maximum): out[0..4] = alpha, beta,
 * gamma, alpha_node, beta_node. gamma (rank 0): the float32 sum kernel on
 * 256 Ki elements, fastest of 5. */
static weft_status_t measure(weft__comm_t *c, double out[5])
{
    enum { BIG = 1 << 20 };
    const weft__cost_t *def = weft__select_cost_default();
    weft_status_t st = WEFT_SUCCESS;
    for (int i = 0; i < 5; i++) out[i] = 0;
    char *buf = calloc(2, BIG);
    if (buf == NULL) return WEFT_ERR_NO_MEMORY;
    double al = 0, be = 0;
    /* across nodes (or the only node): the first ranks of nodes 0 and 1 */
    int a = 0, b = 1;
    if (c->nnodes >= 2) {
        a = c->by_node[c->node_first[0]];
        b = c->by_node[c->node_first[1]];
    }
    WEFT__CHECK_GOTO(measure_link(c, a, b, buf, &al, &be), st, out);
    if (c->rank == a) out[0] = al, out[1] = be;
    /* inside a node, when the comm spans several: the first node with two ranks */
    for (int n = 0; c->nnodes >= 2 && n < c->nnodes; n++) {
        if (c->node_first[n + 1] - c->node_first[n] < 2) continue;
        a = c->by_node[c->node_first[n]];
        b = c->by_node[c->node_first[n] + 1];
        WEFT__CHECK_GOTO(measure_link(c, a, b, buf, &al, &be), st, out);
        if (c->rank == a) out[3] = al, out[4] = be;
        break;
    }
    if (c->rank == 0) {
        double g[5];
        for (int i = 0; i < 5; i++) {
            double t0 = weft__now();
            weft__reduce(buf, buf + BIG, BIG / 4, WEFT_FLOAT32, WEFT_SUM);
            g[i] = (weft__now() - t0) / BIG;
        }
        qsort(g, 5, sizeof g[0], cmp_double);
        out[2] = g[0] > 0 ? g[0] : def->gamma;
    }
out:
    free(buf);
    return st;
}

/* Collective over c: agree on the cost parameters (rank 0's view wins). */
weft_status_t weft__select_init(weft__comm_t *c)
{
    const bool multinode = c->nnodes >= 2;
    weft__cost_t known = {.alpha = 0};
    bool have = weft__select_cost_known(multinode, &known);
    /* have, alpha, beta, gamma, alpha_node, beta_node, alpha_shm, beta_shm (the last two
     * only from a tuning file: the shared-memory path measures its own when it opens) */
    double v[8] = {have, known.alpha, known.beta, known.gamma, known.alpha_node, known.beta_node,
                   known.alpha_shm, known.beta_shm};
    WEFT__CHECK(weft__ctl_bcast(c->ctl, v, sizeof v, 0));
    if (v[0] == 0 && weft__cfg.measure && c->size > 1) {
        double m[5], all[5];
        weft_status_t st = measure(c, m);
        int ok = st == WEFT_SUCCESS, allok = 0;
        WEFT__CHECK(weft__ctl_allreduce(c->ctl, &ok, &allok, 1, WEFT__CTL_INT, WEFT__CTL_MIN));
        if (!allok) return st != WEFT_SUCCESS ? st : WEFT_ERR_COMM_BROKEN;
        WEFT__CHECK(weft__ctl_allreduce(c->ctl, m, all, 5, WEFT__CTL_DOUBLE, WEFT__CTL_MAX));
        v[0] = 1;
        v[1] = all[0];
        v[2] = all[1];
        v[3] = all[2];
        v[4] = all[3];
        v[5] = all[4];
        if (multinode)
            WEFT__INFO("measured across nodes alpha %.3g s, beta %.3g s/B; inside a node alpha "
                       "%.3g s, beta %.3g s/B; gamma %.3g s/B", v[1], v[2], v[4], v[5], v[3]);
        else
            WEFT__INFO("measured alpha %.3g s, beta %.3g s/B, gamma %.3g s/B", v[1], v[2], v[3]);
    }
    if (v[0] != 0) {
        c->cost = (weft__cost_t){.alpha = v[1], .beta = v[2], .gamma = v[3]};
        if (multinode) { /* a one-node comm has no cross-node links: one pair of figures */
            c->cost.alpha_node = v[4];
            c->cost.beta_node = v[5];
        }
        /* the tuning file's shared-memory figures, if it had them (the path
         * serves one-node comms and, inside each node, comms across nodes) */
        c->cost.alpha_shm = v[6];
        c->cost.beta_shm = v[7];
    } else {
        c->cost = *weft__select_cost_default();
    }
    /* The topology (lib/topo.c, the same on every rank). */
    c->cost.nnodes = c->nnodes;
    c->cost.ppn = c->nodes_uniform ? c->local_size : 0;
    /* Remember process-wide (same machine) for this kind of comm: later
     * comms of the kind reuse it. */
    if (v[0] != 0) weft__select_cost_remember(&c->cost);
    return WEFT_SUCCESS;
}
