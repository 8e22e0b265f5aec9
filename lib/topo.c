/* topo.c - node topology of a communicator (lib/topo.h). */
#include <stdlib.h>
#include <string.h>

#include "topo.h"
#include "weft_internal.h"

weft_status_t weft__topo_init(weft__comm_t *c)
{
    weft_status_t st = WEFT_SUCCESS;
    const int p = c->size;
    int *all = NULL;
    c->node_of = calloc((size_t)p, sizeof(int));
    c->local_of = calloc((size_t)p, sizeof(int));
    all = malloc((size_t)p * sizeof(int));
    if (c->node_of == NULL || c->local_of == NULL || all == NULL) {
        st = WEFT_ERR_NO_MEMORY;
        goto out;
    }
    /* The node's ranks: a real node, or a test's groups of k ranks. */
    const int k = (int)weft__cfg.node_ranks;
    if (k > 0) WEFT__CHECK_GOTO(weft__ctl_split(c->ctl, c->rank / k, c->rank, &c->node_ctl), st, out);
    else WEFT__CHECK_GOTO(weft__ctl_split_node(c->ctl, &c->node_ctl), st, out);
    c->local_rank = weft__ctl_rank(c->node_ctl);
    c->local_size = weft__ctl_size(c->node_ctl);
    /* Each rank learns its node's lowest rank (the node's name), then every
     * rank's: nodes are numbered in the order of their lowest rank. */
    int leader = c->rank, lowest = 0;
    WEFT__CHECK_GOTO(weft__ctl_allreduce(c->node_ctl, &leader, &lowest, 1, WEFT__CTL_INT,
                                         WEFT__CTL_MIN), st, out);
    WEFT__CHECK_GOTO(weft__ctl_allgather(c->ctl, &lowest, all, sizeof(int)), st, out);
    int nnodes = 0;
    for (int r = 0; r < p; r++) {
        if (all[r] == r) { /* r leads a node: the next number */
            c->node_of[r] = nnodes++;
        } else {
            c->node_of[r] = c->node_of[all[r]]; /* all[r] < r: numbered already */
        }
    }
    c->node_first = calloc((size_t)nnodes + 1, sizeof(int));
    c->by_node = malloc((size_t)p * sizeof(int));
    if (c->node_first == NULL || c->by_node == NULL) {
        st = WEFT_ERR_NO_MEMORY;
        goto out;
    }
    for (int r = 0; r < p; r++) c->local_of[r] = c->node_first[c->node_of[r] + 1]++;
    int same = 1;
    for (int n = 0; n < nnodes; n++) {
        same &= c->node_first[n + 1] == c->node_first[1];
        c->node_first[n + 1] += c->node_first[n];
    }
    for (int r = 0; r < p; r++) c->by_node[c->node_first[c->node_of[r]] + c->local_of[r]] = r;
    c->nnodes = nnodes;
    c->node = c->node_of[c->rank];
    c->node_local = nnodes == 1;
    c->nodes_uniform = same;
    if (c->local_of[c->rank] != c->local_rank) { /* both order by comm rank */
        WEFT__ERROR("comm %d: node ranks disagree (local %d, expected %d)", c->id, c->local_rank,
                    c->local_of[c->rank]);
        st = WEFT_ERR_INTERNAL;
    }
out:
    free(all);
    if (st != WEFT_SUCCESS) weft__topo_fini(c);
    return st;
}

void weft__topo_fini(weft__comm_t *c)
{
    free(c->node_of);
    free(c->local_of);
    free(c->by_node);
    free(c->node_first);
    c->node_of = c->local_of = c->by_node = c->node_first = NULL;
    weft__ctl_free(&c->node_ctl);
}

