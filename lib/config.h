/*
 * config.h - every WEFT_* environment variable, read once by weft_init
 * (lib/config.c).
 */
#ifndef WEFT_CONFIG_H
#define WEFT_CONFIG_H

#include <stddef.h>

#include "weft.h"

/* ---- configuration (read once in weft_init; see lib/config.c) --------- */
typedef struct weft__config {
    weft_algo_t force_algo[WEFT_COLL_COUNT]; /* WEFT_<COLL>_ALGO, AUTO if unset */
    char tuning_file[1024];                  /* WEFT_TUNING_FILE */
    double timeout_s;                        /* WEFT_TIMEOUT, 0 = no watchdog */
    int log_level;                           /* WEFT_LOG_LEVEL */
    char profile_path[1024];                 /* WEFT_PROFILE */
    char trace_path[1024];                   /* WEFT_TRACE */
    weft_transport_t transport;              /* WEFT_TRANSPORT: auto (DEFAULT), mpi, ucx */
    size_t ring_chunk;                       /* WEFT_RING_CHUNK bytes */
    int spin;                                /* WEFT_SPIN: empty passes before yielding */
    int max_sleep_us;                        /* WEFT_MAX_SLEEP_US: oversubscribed backoff cap */
    int measure;                             /* WEFT_MEASURE: measure alpha/beta at comm create */
    size_t nccl_min_bytes;                   /* WEFT_NCCL_MIN_BYTES */
    int cuda_memops;                         /* WEFT_CUDA_MEMOPS */
    int wait_spin_us;                        /* WEFT_WAIT_SPIN_US */
    int linger_us;                           /* WEFT_LINGER_US */
    size_t fused_reduce_max;                 /* WEFT_FUSED_REDUCE_MAX bytes (0 = off) */
    int check_args;                          /* WEFT_CHECK_ARGS: collectives agree on arguments */
    size_t trace_events;                     /* WEFT_TRACE_EVENTS: trace buffer per rank */
    int trace_keep_last;                     /* WEFT_TRACE_KEEP: 0 first, 1 last (ring) */
    int trace_clock_measure;                 /* WEFT_TRACE_CLOCK: 0 node, 1 measure */
} weft__config_t;

extern weft__config_t weft__cfg;

/** Read the environment into weft__cfg. weft_init only. */
weft_status_t weft__config_load(void);

/* One row of the documented variable table (also printed by weft-info). */
typedef struct weft__config_var {
    const char *name;
    const char *default_value;
    const char *doc;
} weft__config_var_t;
/** The table of every WEFT_* variable; NULL-name terminated. Any thread. */
const weft__config_var_t *weft__config_vars(void);
/** The table's name closest to `name` (a typo's likely meaning), or NULL
 * when none is within a few edits. Any thread. */
const char *weft__config_closest(const char *name);

#endif /* WEFT_CONFIG_H */
