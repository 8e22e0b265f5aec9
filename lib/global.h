/*
 * global.h - process-wide state set by weft_init (lib/init.c).
 */
#ifndef WEFT_GLOBAL_H
#define WEFT_GLOBAL_H

#include <stdatomic.h>
#include <stdbool.h>

/* ---- global state (lib/init.c) --------------------------------------------- */
typedef struct weft__global {
    _Atomic int initialized;
    /* lib/obs.c's switch (a WEFT__OBS_* bit set), beside `initialized`: both
     * are read by every call, so they share its cache line */
    _Atomic int obs_on;
    int we_init_mpi;
    int world_rank, world_size;
    int ncores;
    int tag_ub;
    int oversubscribed;  /* more ranks on this node than cores */
} weft__global_t;
extern weft__global_t weft__g;

static inline bool weft__is_init(void)
{
    return atomic_load_explicit(&weft__g.initialized, memory_order_acquire) != 0;
}

#endif /* WEFT_GLOBAL_H */
