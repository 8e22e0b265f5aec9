/*
 * bench_common.h - shared pieces of Weft's OSU-style benchmarks.
 *
 * Every benchmark program (weft_osu_<collective>, weft_osu_halo,
 * weft_osu_p2p, the allreduce sweep) looks like this:
 *
 *     int main(int argc, char **argv) {
 *         bench_ctx_t b;
 *         bench_opts_t o;
 *         int rc = bench_init(&b, &argc, &argv);      // MPI + Weft + comms
 *         if (rc != 0) return rc;
 *         bench_spec_t spec = { "weft_osu_x", "what it measures", NULL, NULL, NULL };
 *         rc = bench_parse(&b, argc, argv, &spec, &o); // shared options
 *         if (rc != BENCH_PARSE_OK) return bench_finalize(&b, rc);
 *         bench_print_header(&b, &o, "Weft X latency test");
 *         for (size_t bytes = o.min_bytes; bytes && bytes <= o.max_bytes; bytes *= 2) {
 *             bench_variant_t v[2] = {{"weft", run_weft, &st}, {"mpi", run_mpi, &st}};
 *             bench_result_t r[2];
 *             bench_timing_t tm = bench_timing_for(&o, bytes);
 *             if (bench_run_interleaved(&b, &tm, v, 2, r) != 0) ... ;
 *             ... print r[0].median_us, r[1].median_us ...
 *         }
 *         return bench_finalize(&b, 0);
 *     }
 *
 * Measurement method (the same for every program, see doc/benchmarks.md):
 * the variants being compared run in the same process, INTERLEAVED: each of
 * R rounds runs a block of k iterations of every variant in turn (the order
 * rotates from round to round), each block preceded by one untimed iteration
 * of that variant (a skip, as in OSU) and a barrier, and timed on
 * every rank; the per-iteration average of a block is maximised over ranks,
 * and the figure reported is the MEDIAN over rounds. Warm-up iterations of
 * every variant run first and also give the time estimate used to scale the
 * iteration count down for large messages.
 *
 * Everything here is for the program's main thread, and every function that
 * says "collective" must be called by every rank of MPI_COMM_WORLD.
 */
#ifndef WEFT_BENCH_COMMON_H
#define WEFT_BENCH_COMMON_H

#include <mpi.h>
#include <stddef.h>
#include <stdio.h>

#include "weft.h"
#include "weft_mpi.h"

/* ---- process context ------------------------------------------------------ */
typedef struct bench_ctx {
    int rank, size;      /* in MPI_COMM_WORLD */
    weft_comm_t comm;    /* Weft communicator over MPI_COMM_WORLD (no stream) */
    MPI_Comm mpi_comm;   /* a dup of MPI_COMM_WORLD for the MPI baseline only */
    MPI_Comm ctl;        /* a dup for the benchmark's own barriers and reductions */
    double t_start;      /* MPI_Wtime() at bench_init */
    double last_progress;/* when the last progress line was printed */
    int quiet;           /* no progress lines (--quiet) */
    int own_comms;       /* the program times communicators of its own, not `comm`: the
                          * header's transport line says so instead of naming comm's */
    const char *prog;    /* the program's name (bench_parse sets it), for the CSV */
} bench_ctx_t;

/**
 * MPI_Init_thread(MPI_THREAD_MULTIPLE), weft_init, weft_comm_create over
 * MPI_COMM_WORLD, and two dups of MPI_COMM_WORLD (baseline, control).
 * Returns 0, or an exit code for main (1) after printing why and cleaning up.
 * Collective.
 */
int bench_init(bench_ctx_t *b, int *argc, char ***argv);

/**
 * Destroy what bench_init created, weft_finalize, MPI_Finalize. Returns the
 * exit code main should return: `code`, mapped as follows for the values
 * bench_parse returns: BENCH_PARSE_HELP -> 0, BENCH_PARSE_USAGE -> 2.
 * Collective.
 */
int bench_finalize(bench_ctx_t *b, int code);

/** printf on rank 0 only (stdout), flushed. */
void bench_printf(const bench_ctx_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** A progress line on rank 0's stderr, at most every 2 s and only once the
 * run has taken more than 2 s (short runs stay quiet); never with --quiet. */
void bench_progress(bench_ctx_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** An error message on stderr with the rank (any rank). */
/** The tag of the benchmarks' plain-MPI messages on bench_ctx_t.mpi_comm. */
#define BENCH_MPI_TAG 3

void bench_error(const bench_ctx_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- options ------------------------------------------------------------------ */
typedef struct bench_opts {
    size_t min_bytes, max_bytes; /* -m MIN:MAX (default: the program's bench_spec_t) */
    long iters;                  /* -i: timed iterations per variant per size; 0 = scaled */
    long warmup;                 /* -x: warm-up iterations per variant; -1 = scaled */
    int rounds;                  /* -r / --rounds: interleaved rounds (default 5) */
    double budget_s;             /* --budget S: cap on timed seconds per variant per size
                                  * when -i is not given (default 0.4) */
    weft_datatype_t dtype;       /* -T (default float32) */
    weft_algo_t algo;            /* -a (default auto) */
    int algo_given;              /* -a was on the command line */
    const char *csv_path;        /* --csv FILE, NULL if none */
    int quiet;                   /* --quiet: no progress lines on stderr */
    int osu;                     /* --osu[=weft|mpi]: BENCH_OSU_OFF, _WEFT or _MPI */
    int full;                    /* -f, --full: OSU's min/max/iterations columns (--osu) */
    int validate;                /* -c, --validation: check every result (--osu) */
    int floor;                   /* --floor: also time the memory floor (programs whose
                                  * bench_spec_t.floor is set; not with --osu) */
} bench_opts_t;

/* bench_opts_t.osu: which library --osu times in OSU OMB 7's layout. */
enum { BENCH_OSU_OFF = 0, BENCH_OSU_WEFT = 1, BENCH_OSU_MPI = 2 };

/**
 * A long option the shared parser does not know is offered to the caller:
 * `name` without the leading "--" (e.g. "compute"), `value` the text after
 * '=' or NULL if there was none. When the option needs a value and `value` is
 * NULL, return BENCH_OPT_NEEDS_VALUE and the parser passes the next argument
 * in a second call. Return BENCH_OPT_OK when taken, BENCH_OPT_UNKNOWN when
 * not an option of this program, BENCH_OPT_BAD_VALUE for a bad value (the
 * parser prints the usage error).
 */
enum {
    BENCH_OPT_OK = 0,
    BENCH_OPT_UNKNOWN = 1,
    BENCH_OPT_BAD_VALUE = 2,
    BENCH_OPT_NEEDS_VALUE = 3
};
typedef int (*bench_extra_fn)(void *ud, const char *name, const char *value);

#define BENCH_DEFAULT_MIN 4
#define BENCH_DEFAULT_MAX 16777216

/* A one-letter spelling of one of the program's own long options that takes
 * a value (OSU's -W for --window-size, -k for --root-rank): the parser hands
 * "-W 8" to the program's callback as ("window-size", "8"). */
typedef struct bench_short {
    char opt;                 /* 0 ends the list */
    const char *name;         /* the long option's name, without "--" */
} bench_short_t;

typedef struct bench_spec {
    const char *prog;         /* program name for messages */
    const char *what;         /* one line saying what it measures */
    const char *extra_usage;  /* lines describing the program's own options, or NULL */
    bench_extra_fn extra;     /* the program's own long options, or NULL */
    void *extra_ud;
    size_t min_bytes, max_bytes; /* the program's default -m (0: BENCH_DEFAULT_MIN/MAX) */
    int bytes_only;              /* messages of bytes whatever -T says: sizes are not
                                  * rounded up to whole elements */
    int osu;                     /* the program has an --osu mode (with -f and -c);
                                  * elsewhere those options are usage errors */
    const bench_short_t *shorts; /* one-letter spellings of its own options, or NULL */
    const char *floor;           /* the program has --floor: the usage lines saying what
                                  * its floor times (printed under --floor); NULL: the
                                  * option is a usage error */
} bench_spec_t;

/* bench_parse results. */
enum {
    BENCH_PARSE_OK = 0,
    BENCH_PARSE_HELP = 1000,  /* --help printed: exit 0 */
    BENCH_PARSE_USAGE = 1001  /* a usage error printed: exit 2 */
};

/**
 * Parse the shared options into *o (defaults first):
 *   -m MIN:MAX | -m MAX   message sizes in bytes (K/M/G suffixes allowed)
 *   -i ITERS   -x WARMUP   -r ROUNDS   --budget SECONDS
 *   -T TYPE    (float, double, int, int8, uint8, int32, uint32, int64,
 *               uint64, float16/half, bfloat16/bf16, float32, float64)
 *   -a ALGO    (a name of weft_algo_name, or "auto")
 *   --csv FILE   --quiet   -h | --help   -V | -v | --version
 *   --osu[=weft|mpi]  -f | --full  -c | --validation   (programs with spec->osu)
 *   --floor                                           (programs with spec->floor)
 *   --thp      (every buffer bench_alloc makes afterwards: transparent huge pages)
 * OSU OMB 7's spellings are taken too: --message-size, --iterations,
 * --warmup, --type (also mpi_char, mpi_int, mpi_float), -m MIN: and -m :MAX.
 * Long options may be written --opt=VALUE or --opt VALUE. Every rank parses
 * the same argv, so every rank returns the same result; messages are printed
 * by rank 0. Not collective (no communication).
 */
int bench_parse(bench_ctx_t *b, int argc, char **argv, const bench_spec_t *spec, bench_opts_t *o);

/** Print the usage text (rank 0). */
void bench_usage(const bench_ctx_t *b, const bench_spec_t *spec, FILE *f);

/** Parse "float", "double", "int", ... (see bench_parse). 0 on success, -1 if unknown. */
int bench_parse_dtype(const char *name, weft_datatype_t *dt);
/** MPI's datatype for ours; MPI_DATATYPE_NULL for float16/bfloat16 (no MPI baseline). */
MPI_Datatype bench_mpi_dtype(weft_datatype_t dt);
/** MPI's op for ours (AVG -> MPI_SUM); MPI_OP_NULL if none. */
MPI_Op bench_mpi_op(weft_op_t op);
/** Parse a byte size "4096", "64K", "16M", "1G". 0 on success, -1 if malformed. */
int bench_parse_size(const char *s, size_t *out);
/** Parse a positive/non-negative long; 0 on success, -1 if malformed or < min. */
int bench_parse_long(const char *s, long min, long *out);

/**
 * Print the '#' header lines: title, Weft version, number of ranks, datatype,
 * which algorithm forcing is in effect (-a, or WEFT_<COLL>_ALGO from the
 * environment named by env_algo_var, may be NULL), the transport `comm` runs
 * over and WEFT_TRANSPORT's value (or, with own_comms, that the program's own
 * communicators are timed), the binding, and the timing method. Rank 0.
 */
void bench_print_header(const bench_ctx_t *b, const bench_opts_t *o, const char *title,
                        const char *env_algo_var);

/**
 * Apply -a to coll on comm (weft_comm_set_algo) when given. Returns 0, or
 * BENCH_PARSE_USAGE (pass it to bench_finalize: exit 2) after printing why
 * when Weft refuses that algorithm for coll (same result on every rank).
 */
int bench_apply_algo_to(const bench_ctx_t *b, const bench_opts_t *o, weft_comm_t comm,
                        weft_coll_t coll);
/** bench_apply_algo_to on b->comm. */
int bench_apply_algo(const bench_ctx_t *b, const bench_opts_t *o, weft_coll_t coll);

/**
 * Fill `count` elements of dt with small values that depend on rank and index
 * (exact in every type; sums over many ranks do not overflow). Benchmarks do
 * not check results, they only need realistic, finite data. Any thread.
 */
void bench_fill(void *buf, size_t count, weft_datatype_t dt, int rank);

/** Allocate `bytes` (at least 1) aligned to 64 bytes, zeroed; NULL on failure.
 * After bench_parse saw --thp: aligned to 2 MiB, the size rounded up to
 * 2 MiB, advised MADV_HUGEPAGE before it is zeroed, so that the kernel backs it
 * with transparent huge pages where it can (doc/benchmarks.md, "Huge pages").
 * Free with free(). Main thread. */
void *bench_alloc(size_t bytes);
/** 1 when ok is nonzero on every rank, else 0 on every rank (an MPI failure
 * reported). Collective over b->ctl. */
int bench_all_ok(const bench_ctx_t *b, int ok);
/**
 * n send and n receive buffers of `bytes` each (bench_alloc). Returns 0 when
 * every rank got all of them, else 1 on every rank (reported by the ranks
 * that failed; the buffers that were allocated are left for the caller to
 * free, NULL the others). Collective over b->ctl.
 */
int bench_alloc_pairs(const bench_ctx_t *b, char **sbuf, char **rbuf, int n, size_t bytes);

/**
 * Loop over the sizes of -m: MIN, 2*MIN, 4*MIN, ... up to MAX, without
 * overflowing. Usage: BENCH_FOR_SIZES(&o, bytes) { ... use bytes ... }
 */
#define BENCH_FOR_SIZES(o, bytes)                                              \
    for (size_t bytes = (o)->min_bytes; bytes != 0 && bytes <= (o)->max_bytes; \
         bytes = bytes > (o)->max_bytes / 2 ? 0 : bytes * 2)

/* ---- timing ------------------------------------------------------------------------ */
/** How one size is timed. */
typedef struct bench_timing {
    long warmup;     /* iterations per variant before the rounds (also the pilot) */
    long iters;      /* timed iterations per variant, split over the rounds */
    int rounds;      /* interleaved rounds */
    double budget_s; /* > 0: iters is reduced so one variant's timed iterations take
                      * about budget_s (estimated from the warm-up); 0: iters as given */
} bench_timing_t;

/**
 * The timing for a message of `bytes`: -i/-x when given, otherwise OSU's
 * counts (1000 iterations and 100 warm-up up to 8 KiB, 100 and 10 above, at
 * least 2 per round) capped by the time budget.
 */
bench_timing_t bench_timing_for(const bench_opts_t *o, size_t bytes);

/**
 * One thing to time: run(ud, iters, round) runs `iters` iterations and returns
 * 0, or a nonzero error (a weft_status_t or an MPI code; it should print the
 * cause). `round` is the round index (-1 during warm-up and for the untimed
 * iteration before each block) so that a variant
 * can keep per-round figures of its own (e.g. compute time inside the loop).
 */
typedef struct bench_variant {
    const char *name;
    int (*run)(void *ud, long iters, int round);
    void *ud;
    /* NULL: the harness times the whole call. Otherwise the variant times
     * itself (e.g. each iteration, with a barrier between iterations outside
     * the timed part, as OSU's nonblocking benchmarks do): run() stores the
     * seconds its timed parts took here, and the harness uses that. */
    double *timed_s;
} bench_variant_t;

#define BENCH_MAX_ROUNDS 64
#define BENCH_MAX_VARIANTS 16

typedef struct bench_result {
    double median_us;  /* median over rounds of the per-iteration average (max over ranks) */
    double min_us, max_us;
    double round_us[BENCH_MAX_ROUNDS]; /* per round, max over ranks */
    long iters_per_round;
    int rounds;
} bench_result_t;

/**
 * Time nv variants interleaved (see the file comment). res[i] for v[i]. On
 * return every rank holds the same results. Returns 0, or nonzero if any
 * rank's variant failed (the same on every rank). Collective.
 */
int bench_run_interleaved(bench_ctx_t *b, const bench_timing_t *tm, const bench_variant_t *v,
                          int nv, bench_result_t *res);

/** One side of a ping-pong message: send to (send = 1) or receive from
 * `peer`; 0 on success, nonzero (reported by the step) to stop. */
typedef int (*bench_pp_step_fn)(void *ud, int send, int peer);
/**
 * iters round trips between ranks 0 and 1, rank 0 sending first (osu_latency's
 * pattern); ranks above 1 return 0 at once. Returns the first nonzero step.
 */
int bench_pingpong(const bench_ctx_t *b, long iters, bench_pp_step_fn step, void *ud);
/** The same step through Weft: weft_send of sbuf or weft_recv into rbuf,
 * bytes bytes (WEFT_UINT8, tag BENCH_WEFT_TAG) on comm; 0, or 1 with the
 * failure and the communicator's transport reported. */
#define BENCH_WEFT_TAG 1
int bench_weft_step(const bench_ctx_t *b, weft_comm_t comm, const void *sbuf, void *rbuf,
                    size_t bytes, int send, int peer);
/** A plain-MPI ping-pong step: MPI_Send of sbuf or MPI_Recv into rbuf, bytes
 * bytes, on b->mpi_comm; 0, or 1 with the failure reported. */
int bench_mpi_step(const bench_ctx_t *b, const void *sbuf, void *rbuf, size_t bytes, int send,
                   int peer);

/** Median of n values (does not modify v); NaN for n == 0. */
double bench_median(const double *v, int n);
/** Maximum over ranks of n doubles, in place, on every rank (collective). */
int bench_max_over_ranks(const bench_ctx_t *b, double *v, int n);

/** Sleep for `seconds` with clock_nanosleep (absolute deadline, monotonic). */
void bench_sleep(double seconds);
/** Spin on the CPU for about `seconds` without calling MPI or Weft; returns a value
 * the caller should keep so the loop is not optimised away. */
double bench_busy(double seconds);
/** Monotonic seconds (clock_gettime). */
double bench_now(void);

/* ---- data with known values (validation, -c) --------------------------------------- */
/** The value bench_fill_seed puts at index i for `seed` in type dt, as a
 * double (exact: small multiples of 1/4 or small integers). Any thread. */
double bench_value(size_t i, unsigned seed, weft_datatype_t dt);
/** Fill count elements with bench_value(i, seed, dt). bench_fill(.., rank)
 * is bench_fill_seed(.., rank). Any thread. */
void bench_fill_seed(void *buf, size_t count, weft_datatype_t dt, unsigned seed);
/** Element i of buf (type dt) as a double (float16/bfloat16 converted). */
double bench_get(const void *buf, size_t i, weft_datatype_t dt);
/** The seed of `rank`'s data in iteration `iter` of a validated run: every
 * iteration sends other values, so that a result left over from the one
 * before cannot pass. */
unsigned bench_seed(int rank, long iter);

/* ---- OSU OMB 7 mode (--osu) ---------------------------------------------------------- */
/*
 * --osu prints what OSU's own benchmark prints, in its layout, so that a
 * parser written for OMB 7 reads it unchanged (doc/benchmarks.md, "OSU
 * mode"): a blank line, "# OSU MPI <Name> Latency Test v7.4", then
 * "# Datatype: MPI_FLOAT." and the column line "# Size  Avg Latency(us)"
 * (+ "Min Latency(us) Max Latency(us) Iterations" with -f, + "Validation"
 * with -c), then one row per size: size left-aligned in 10 columns, each
 * figure right-aligned in 20 with 2 decimals, iterations in 12, Pass/Fail
 * in 20. It times one library (Weft, or MPI with --osu=mpi) OSU's way:
 * each iteration timed alone between barriers, each rank's mean over the
 * iterations, then the average over ranks (sum / ranks) and the minimum and
 * maximum over ranks.
 */
#define BENCH_OSU_VERSION "7.4"

/** What OSU prints for one size. */
typedef struct bench_osu_result {
    double avg_us;   /* mean over ranks of each rank's mean per iteration */
    double min_us, max_us; /* minimum, maximum over ranks of the same */
    double rank0_us; /* rank 0's own mean (what OSU's point-to-point tests print) */
    long iters;      /* timed iterations */
    long errors;     /* -c: wrong elements over all ranks and iterations */
} bench_osu_result_t;

/**
 * -c: before each iteration (untimed) prepare(ud, iter) writes the inputs of
 * iteration `iter` (bench_seed) and clears the outputs; after it, check(ud,
 * iter) returns the number of wrong elements on this rank. Either may be
 * NULL; both return negative on a failure of their own (reported).
 */
typedef struct bench_osu_check {
    int (*prepare)(void *ud, long iter);
    long (*check)(void *ud, long iter);
    void *ud;
} bench_osu_check_t;

/**
 * Time v OSU's way for a message of `bytes` (the iteration counts of
 * bench_timing_for: -i/-x, or OSU's counts capped by --budget): the warm-up,
 * then each iteration run alone (v->run(ud, 1, 0)) and timed on every rank
 * between barriers on b->ctl; with o->validate, chk's prepare and check
 * around each one. block != 0 times the iterations as one block instead
 * (OSU's point-to-point tests, whose iteration is a round trip or a window)
 * unless o->validate asks for a check after each. Every rank returns the
 * same *res. Returns 0, or 1 on every rank when a run or check failed on one.
 * Collective.
 */
int bench_run_osu(bench_ctx_t *b, const bench_opts_t *o, size_t bytes, const bench_variant_t *v,
                  const bench_osu_check_t *chk, int block, bench_osu_result_t *res);

/** The blank line and title line OSU prints first (rank 0): title is OSU's
 * name without "# " and the version ("OSU MPI Allreduce Latency Test");
 * then a '#' line saying that Weft (or MPI, --osu=mpi) was measured, by
 * which program. */
void bench_osu_preamble(const bench_ctx_t *b, const bench_opts_t *o, const char *title);
/** "# Datatype: <name>." (rank 0): MPI's name of mdt (MPI_Type_get_name),
 * or Weft's name of dt when mdt is MPI_DATATYPE_NULL. */
void bench_osu_datatype(const bench_ctx_t *b, MPI_Datatype mdt, weft_datatype_t dt);
/** The column line of OSU's collective latency tests (rank 0); show_size 0
 * for the barrier, whose rows have no size (OSU's osu_barrier). */
void bench_osu_lat_header(const bench_ctx_t *b, const bench_opts_t *o, int show_size);
/** One row of OSU's collective latency tests (rank 0). */
void bench_osu_lat_row(const bench_ctx_t *b, const bench_opts_t *o, int show_size, size_t bytes,
                       const bench_osu_result_t *r);
/** Point to point: the column line "# Size" + `metric` ("Latency (us)",
 * "Bandwidth (MB/s)") [+ "Validation"], and a row (rank 0). */
void bench_osu_p2p_header(const bench_ctx_t *b, const bench_opts_t *o, const char *metric);
void bench_osu_p2p_row(const bench_ctx_t *b, const bench_opts_t *o, size_t bytes, double value,
                       long errors);
/** OSU's non-blocking collective tests (osu_iallreduce, ...): after the
 * preamble, the line "# Overall = Coll. Init + Compute + MPI_Test + MPI_Wait"
 * and a blank line (rank 0). */
void bench_osu_nbc_preamble(const bench_ctx_t *b);
/** Their column line: "# Size  Overall(us) Compute(us) Pure Comm.(us)
 * Overlap(%)"; with -f "Compute(us) Coll. Init(us) MPI_Test(us) MPI_Wait(us)
 * Pure Comm.(us) Min Comm.(us) Max Comm.(us) Overlap(%)"; + "Validation"
 * with -c (rank 0). */
void bench_osu_nbc_header(const bench_ctx_t *b, const bench_opts_t *o);
/** One row of them (rank 0): us[] = overall, compute, init, test, wait,
 * pure, pure's min and max over ranks, overlap (%). */
void bench_osu_nbc_row(const bench_ctx_t *b, const bench_opts_t *o, size_t bytes,
                       const double us[9], long errors);
/** OSU's ending of a failed validation: a line on stdout (rank 0). */
void bench_osu_validation_failed(const bench_ctx_t *b, size_t bytes);

/* ---- bus bandwidth (nccl-tests) ----------------------------------------------------------- */
/**
 * nccl-tests' bandwidths of a collective moving `total_bytes` (the whole
 * vector of allreduce, bcast and reduce; all the ranks' blocks of
 * reduce_scatter, allgather, alltoall, gather and scatter) in `us`
 * microseconds on `ranks` ranks: algbw = total_bytes / time (GB/s, 10^9),
 * busbw = algbw * factor (allreduce 2(n-1)/n; reduce_scatter, allgather,
 * alltoall, gather, scatter (n-1)/n; bcast, reduce 1). NaN for the barrier
 * or a time that is not positive.
 */
void bench_busbw(weft_coll_t coll, size_t total_bytes, int ranks, double us, double *algbw,
                 double *busbw);

/* ---- the memory floor (--floor) --------------------------------------------------------- */
/*
 * The least memory traffic of a collective's local work on one rank, timed as
 * one more variant of bench_run_interleaved beside Weft and MPI (so in the same
 * rounds, between the same barriers, every rank at once, with the same warm-up,
 * iterations and median; doc/benchmarks.md, "Memory floor"). Each rank works on
 * buffers of its own, distinct, allocated and written (touched) beforehand:
 *
 *   BENCH_FLOOR_ADD   c[i] = a[i] + b[i] in the call's datatype over the call's
 *                     input bytes (read two operands, write one result: what a
 *                     reduction of that input must move at least), a plain loop
 *                     the compiler vectorises. Datatypes with no plain C addition
 *                     (float16, bfloat16) time BENCH_FLOOR_COPY of the same bytes
 *                     instead, and the header line says so;
 *   BENCH_FLOOR_COPY  memcpy(c, a, bytes) of the call's output bytes.
 */
typedef enum bench_floor_kind {
    BENCH_FLOOR_NONE = 0, /* the collective has no floor defined (--floor refused) */
    BENCH_FLOOR_ADD,
    BENCH_FLOOR_COPY
} bench_floor_kind_t;

typedef struct bench_floor {
    bench_floor_kind_t kind;  /* what is timed (ADD, or COPY for an ADD without a kernel) */
    bench_floor_kind_t asked; /* what the program asked for */
    weft_datatype_t dt;
    size_t cap;               /* bytes each buffer holds (the largest size) */
    size_t bytes;             /* bytes of the size being timed (<= cap); the program sets
                               * it before each bench_run_interleaved */
    void *a, *b, *c;          /* inputs a, b (b: ADD only), output c */
} bench_floor_t;

/**
 * Allocate and fill the floor's buffers for sizes up to max_bytes (the call's
 * input bytes for ADD, its output bytes for COPY), then run the kernel once
 * over all of them and check its result (c == a + b element by element, or
 * c == a), so that the header's description is what runs. Returns 0, or 1 on
 * every rank after a rank failed (reported). Collective over b->ctl.
 */
int bench_floor_init(const bench_ctx_t *b, bench_floor_t *f, bench_floor_kind_t kind,
                     weft_datatype_t dt, size_t max_bytes);
/** Free the buffers (a zeroed or failed bench_floor_t is fine). Main thread. */
void bench_floor_free(bench_floor_t *f);
/** The floor as a bench_variant_t run function: ud is a bench_floor_t;
 * `iters` passes of the kernel over f->bytes. Returns 0. Main thread. */
int bench_floor_run(void *ud, long iters, int round);
/**
 * The header lines saying what the floor times (rank 0): "# Floor: every rank
 * at once computes c[i] = a[i] + b[i] (float32) over <over>, ..." and, when a
 * datatype fell back to a copy, a note saying so. `over` names the bytes
 * ("the call's input, the n-byte vector").
 */
void bench_floor_header(const bench_ctx_t *b, const bench_floor_t *f, const char *over);

/* ---- CSV ------------------------------------------------------------------------ */
typedef struct bench_csv {
    FILE *f; /* rank 0 only; NULL elsewhere or when no --csv */
} bench_csv_t;

/**
 * Open path (when non-NULL) on rank 0 and write what was measured where, as
 * '#' comment lines ("# program: ...", "# weft:", "# ranks:", "# machine:",
 * "# date:"; readers skip lines that start with '#', weft-plot puts them in
 * its titles), then the header row (comma-separated column names). Returns
 * 0, or nonzero on every rank if rank 0 could not open or write it
 * (printed). Collective.
 */
int bench_csv_open(const bench_ctx_t *b, bench_csv_t *csv, const char *path, const char *header);
/** Append one row (printf format, no newline needed). Rank 0; no-op elsewhere. */
void bench_csv_row(bench_csv_t *csv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** Close; returns nonzero if writing failed (rank 0). */
int bench_csv_close(bench_csv_t *csv);

#endif /* WEFT_BENCH_COMMON_H */
