/* init.c - weft_init / weft_finalize, global state (MPI's part: lib/mpi_interop.c). */
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "weft_internal.h"

weft__global_t weft__g;

int weft_initialized(void) { return weft__is_init() ? 1 : 0; }

/* Count the ranks on this node and compare with the cores we may use. */
static weft_status_t detect_oversubscription(void)
{
    weft__ctl_t *node = NULL;
    WEFT__CHECK(weft__ctl_split_node(weft__ctl_world(), &node));
    int local = weft__ctl_size(node);
    weft__ctl_free(&node);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    weft__g.ncores = cores > 0 ? (int)cores : 1;
    /* Each rank has a caller thread and an engine thread; the engine sleeps
     * when idle, so count one core per rank. */
    weft__g.oversubscribed = local > weft__g.ncores;
    return WEFT_SUCCESS;
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
