/*
 * config.h - Weft's configuration: every WEFT_* environment variable, read
 * once by weft_init into weft__cfg. Private (never installed); no mpi.h.
 *
 * One row per variable (lib/config.c, vars[]): its name, default, kind (the
 * parser), valid range, the field of weft__config_t it writes, and its doc
 * text. weft__config_load parses every row with its kind's parser; weft-info
 * prints the rows (--config) and doc/config.md's reference
 * (--config-markdown); weft(7) is built from that reference. Adding a
 * variable = one row (and, if weft_init stores it, its field below).
 */
#ifndef WEFT_CONFIG_H
#define WEFT_CONFIG_H

#include <stddef.h>

#include "weft.h"

/** The configuration in effect. Written by weft_init only (before the engine
 * starts); read-only afterwards, from any thread. */
#define WEFT__SHM_COPY_AUTO 2

typedef struct weft__config {
    weft_algo_t force_algo[WEFT_COLL_COUNT]; /* WEFT_<COLL>_ALGO, AUTO if unset */
    char tuning_file[1024];                  /* WEFT_TUNING_FILE */
    double timeout_s;                        /* WEFT_TIMEOUT, 0 = no watchdog */
    int log_level;                           /* WEFT_LOG_LEVEL */
    char profile_path[1024];                 /* WEFT_PROFILE */
    char trace_path[1024];                   /* WEFT_TRACE */
    weft_transport_t transport;              /* WEFT_TRANSPORT: auto (DEFAULT), mpi, ucx */
    size_t ring_chunk;                       /* WEFT_RING_CHUNK bytes */
    size_t hier_segment;                     /* WEFT_HIER_SEGMENT bytes */
    int node_ranks;                          /* WEFT_NODE_RANKS: test nodes of k ranks (0: real) */
    int shm;                                 /* WEFT_SHM: the node's shared-memory path */
    size_t shm_chunk;                        /* WEFT_SHM_CHUNK bytes */
    int shm_copy;                            /* WEFT_SHM_COPY: 0, 1 (staged allreduce),
                                              * WEFT__SHM_COPY_AUTO */
    int spin;                                /* WEFT_SPIN: empty passes before yielding */
    int max_sleep_us;                        /* WEFT_MAX_SLEEP_US: oversubscribed backoff cap */
    int measure;                             /* WEFT_MEASURE: measure alpha/beta at comm create */
    size_t nccl_min_bytes;                   /* WEFT_NCCL_MIN_BYTES */
    int cuda_memops;                         /* WEFT_CUDA_MEMOPS */
    int stream_stage;                        /* WEFT_STREAM_STAGE */
    int wait_spin_us;                        /* WEFT_WAIT_SPIN_US */
    int linger_us;                           /* WEFT_LINGER_US */
    size_t fused_reduce_max;                 /* WEFT_FUSED_REDUCE_MAX bytes (0 = off) */
    int check_args;                          /* WEFT_CHECK_ARGS: collectives agree on arguments */
    size_t trace_events;                     /* WEFT_TRACE_EVENTS: trace buffer per rank */
    int trace_keep_last;                     /* WEFT_TRACE_KEEP: 0 first, 1 last (ring) */
    int trace_clock_measure;                 /* WEFT_TRACE_CLOCK: 0 node, 1 measure */
} weft__config_t;

extern weft__config_t weft__cfg;

/** How a row's text is parsed, and the field type it writes. */
typedef enum weft__config_kind {
    WEFT__CFG_INT,    /**< decimal integer in [lo, hi] -> int */
    WEFT__CFG_BOOL,   /**< 0 or 1 -> int */
    WEFT__CFG_SIZE,   /**< decimal count or byte size in [lo, hi] -> size_t */
    WEFT__CFG_DOUBLE, /**< number in [lo, hi] -> double */
    WEFT__CFG_NAME,   /**< one of value_name(0), value_name(1), ... -> its index, as an int */
    WEFT__CFG_ALGO,   /**< auto or an algorithm that serves `coll` -> weft_algo_t */
    WEFT__CFG_TEXT,   /**< text (a path), shorter than the field -> char[] */
    WEFT__CFG_KIND_COUNT
} weft__config_kind_t;

/** One WEFT_* variable. */
typedef struct weft__config_var {
    const char *name;          /**< WEFT_... */
    const char *default_value; /**< text, parsed as a value from the environment is ("" = empty) */
    weft__config_kind_t kind;
    long lo, hi;               /**< INT, SIZE, DOUBLE: the valid range, both ends included */
    /** NAME: the name of value i, NULL past the last one. */
    const char *(*value_name)(int value);
    weft_coll_t coll;          /**< ALGO: the collective it forces */
    size_t offset, size;       /**< the field of weft__config_t it writes; size 0: none */
    /** NULL: weft_init reads it. Else who reads it instead ("libweft-mpi.so, at
     * MPI_Init"): weft_init neither parses nor stores it; documented here. */
    const char *read_by;
    const char *doc;           /**< what it does, one sentence or two; no valid-range text */
} weft__config_var_t;

/** Read the environment into weft__cfg: every row that weft_init reads, the
 * value from the environment (unset or empty: the default) through the row's
 * parser. On an error weft__cfg is left as it was and the message names the
 * variable, the value and what is valid. weft_init only. */
weft_status_t weft__config_load(void);

/** The table of every WEFT_* variable; NULL-name terminated. Any thread. */
const weft__config_var_t *weft__config_vars(void);

/** The row named `name`, or NULL. Any thread. */
const weft__config_var_t *weft__config_find(const char *name);

/** The table's name closest to `name` (a typo's likely meaning), or NULL
 * when none is within a few edits. Any thread. */
const char *weft__config_closest(const char *name);

/**
 * Parse `value` as `var`'s kind. On success, and if the row has a field,
 * write the field of *into (into may be NULL: check only); on an error log
 * it (variable, value, what is valid) and leave *into untouched:
 * WEFT_ERR_ALGORITHM for an ALGO row, WEFT_ERR_INVALID_ARG otherwise. Any
 * thread (into is the caller's).
 */
weft_status_t weft__config_parse(const weft__config_var_t *var, const char *value,
                                 weft__config_t *into);

/** What `var` accepts, in words ("0 .. 4", "first, last", "auto, ring, ..."),
 * into buf (truncated to cap, always terminated). The same text in every
 * build: an algorithm that only an optional backend runs is followed by
 * "(builds with NCCL)". Any thread. */
void weft__config_range(const weft__config_var_t *var, char *buf, size_t cap);

/** `var`'s value in *c as text, as the parser reads it back; a row without a
 * field gives the environment's value, else its default. Any thread. */
void weft__config_format(const weft__config_var_t *var, const weft__config_t *c, char *buf,
                         size_t cap);

#endif /* WEFT_CONFIG_H */
