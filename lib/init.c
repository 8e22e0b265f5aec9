/* init.c - weft_init / weft_finalize, global state (MPI's part: lib/mpi_interop.c). */
#include <linux/futex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "weft_internal.h"

weft__global_t weft__g;

int weft_initialized(void) { return weft__is_init() ? 1 : 0; }

/* A hash of this kernel's boot id (the same in every namespace of one
 * machine's kernel; 0 when it cannot be read). Caller thread of init. */
static uint64_t kernel_id(void)
{
    char buf[64] = {0};
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f == NULL) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    if (fclose(f) != 0 || n == 0) return 0;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)buf[i]) * 1099511628211ull;
    return h == 0 ? 1 : h;
}

/* Count the ranks that share this machine's cores and compare with the
 * cores we may use: the ranks of this node (MPI_COMM_TYPE_SHARED), or more
 * where ranks of several "nodes" run on one kernel (network namespaces made
 * into nodes, scripts/multinode.sh: 2 x 2 ranks on 2 cores, which each
 * node counted as 2 and let every waiter spin). Collective over the world. */
static weft_status_t detect_oversubscription(void)
{
    weft_status_t st = WEFT_SUCCESS;
    weft__ctl_t *node = NULL;
    WEFT__CHECK(weft__ctl_split_node(weft__ctl_world(), &node));
    int local = weft__ctl_size(node);
    weft__ctl_free(&node);
    const int p = weft__g.world_size;
    uint64_t mine = kernel_id(), *all = calloc((size_t)p, sizeof *all);
    if (all == NULL) return WEFT_ERR_NO_MEMORY;
    WEFT__CHECK_GOTO(weft__ctl_allgather(weft__ctl_world(), &mine, all, sizeof mine), st, out);
    int same = 0;
    for (int r = 0; r < p; r++) same += mine != 0 && all[r] == mine;
    if (same > local) {
        WEFT__DEBUG("%d ranks share this kernel, %d this node: counting %d", same, local, same);
        local = same;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    weft__g.ncores = cores > 0 ? (int)cores : 1;
    /* Each rank has a caller thread and an engine thread; the engine sleeps
     * when idle, so count one core per rank. */
    weft__g.oversubscribed = local > weft__g.ncores;
out:
    free(all);
    return st;
}

weft_status_t weft_init(const weft_init_params_t *params)
{
    if (weft__is_init()) return WEFT_SUCCESS;
    if (params != NULL && params->size < sizeof(size_t)) return WEFT_ERR_INVALID_ARG;
    weft_status_t st = WEFT_SUCCESS;

    memset(&weft__g, 0, sizeof weft__g);
    WEFT__CHECK(weft__mpi_init(params));
    WEFT__CHECK_GOTO(weft__config_load(), st, fail_mpi);
    WEFT__CHECK_GOTO(detect_oversubscription(), st, fail_mpi);
    WEFT__CHECK_GOTO(weft__select_load(), st, fail_mpi);
    const weft__progress_params_t pp = {
        .timeout_s = weft__cfg.timeout_s,
        .spin = weft__cfg.spin,
        .max_sleep_us = weft__cfg.max_sleep_us,
        .linger_us = weft__cfg.linger_us,
        .wait_spin_us = weft__cfg.wait_spin_us,
        .oversubscribed = weft__g.oversubscribed,
    };
    weft__progress_init(&weft__op_class, &pp);
    WEFT__CHECK_GOTO(weft__engine_start(), st, fail_mpi);
    WEFT__CHECK_GOTO(weft__obs_init(), st, fail_engine);
    /* release: everything above is visible to threads that see initialized. */
    atomic_store_explicit(&weft__g.initialized, 1, memory_order_release);
    return WEFT_SUCCESS;

fail_engine:
    weft__engine_stop(1.0);
fail_mpi:
    (void)weft__mpi_finalize();
    return st;
}

weft_status_t weft_finalize(void)
{
    if (!weft__is_init()) return WEFT_ERR_NOT_INITIALIZED;
    double bound = weft__cfg.timeout_s > 0 ? weft__cfg.timeout_s : 60.0;
    weft_status_t st = weft__engine_stop(bound);
    atomic_store_explicit(&weft__g.initialized, 0, memory_order_release);
    weft__obs_fini();
    weft__halo_fini();
    weft__comm_free_all();
    weft__request_fini();
    weft__scratch_trim();
    weft__op_cache_trim();
    weft__transport_shutdown_all();
    weft_status_t mst = weft__mpi_finalize();
    if (st == WEFT_SUCCESS) st = mst;
    return st;
}
