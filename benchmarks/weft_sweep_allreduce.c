/*
 * weft_sweep_allreduce - time every allreduce algorithm at every size and
 * compare the fastest with what Weft's selection (weft_query_algo, auto)
 * picks.
 *
 *   mpiexec -n 2 weft_sweep_allreduce [-m MIN:MAX] [-i ITERS] [-x WARMUP]
 *                                     [-T TYPE] [--csv FILE] [--tolerance PCT]
 *
 * Each algorithm runs on its own Weft communicator (a dup of MPI_COMM_WORLD
 * with weft_comm_set_algo forcing it); the algorithms are interleaved round by
 * round and the median per-iteration time (max over ranks) is reported. Per
 * size: each algorithm's time, the winner, the automatic choice and a flag
 * when the choice is not the winner (with how much slower it is); at the end,
 * the sizes where the winner changes (crossovers), measured and chosen.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

/* Candidates: every algorithm of the library's table that allreduce accepts
 * (weft_comm_set_algo) and that can run on this communicator (weft_query_algo
 * answers it: the shared-memory path needs one node, hierarchical several,
 * NCCL device buffers). */
#define N_CAND ((int)WEFT_ALGO_COUNT)
#define MAX_SIZES 64

typedef struct algo_run {
    bench_ctx_t *b;
    weft_comm_t comm;
    weft_algo_t algo;
    const void *send;
    void *recv;
    size_t count;
    weft_datatype_t dt;
} algo_run_t;

static int run_algo(void *ud, long iters, int round)
{
    algo_run_t *a = ud;
    (void)round;
    for (long i = 0; i < iters; i++) {
        weft_status_t st = weft_allreduce(a->send, a->recv, a->count, a->dt, WEFT_SUM, a->comm);
        if (st != WEFT_SUCCESS) {
            bench_error(a->b, "weft_allreduce(%s, count=%zu): %s (%s)", weft_algo_name(a->algo),
                        a->count, weft_status_name(st), weft_strerror(st));
            return 1;
        }
    }
    return 0;
}

typedef struct extra_opts {
    double tolerance_pct; /* a wrong choice within this of the winner is not flagged */
} extra_opts_t;

static int parse_extra(void *ud, const char *name, const char *value)
{
    extra_opts_t *e = ud;
    if (strcmp(name, "tolerance") != 0) return BENCH_OPT_UNKNOWN;
    if (!value) return BENCH_OPT_NEEDS_VALUE;
    char *end = NULL;
    double v = strtod(value, &end);
    if (end == value || *end != '\0' || !(v >= 0) || v > 1000) return BENCH_OPT_BAD_VALUE;
    e->tolerance_pct = v;
    return BENCH_OPT_OK;
}

int main(int argc, char **argv)
{
    bench_ctx_t b;
    bench_opts_t o;
    int rc = bench_init(&b, &argc, &argv);
    if (rc != 0) return rc;
    extra_opts_t ex = {5.0};
    bench_spec_t spec = {.prog = "weft_sweep_allreduce",
                         .what = "Time every allreduce algorithm at every size; compare the winner with Weft's choice.",
                         .extra_usage = "  --tolerance PCT      flag the automatic choice only when it is more than PCT%\n"
                                        "                       slower than the winner (default 5)\n"
                                        "  (-a is not accepted: the sweep times every algorithm)\n",
                         .extra = parse_extra,
                         .extra_ud = &ex};
    rc = bench_parse(&b, argc, argv, &spec, &o);
    if (rc != BENCH_PARSE_OK) return bench_finalize(&b, rc);
    if (o.algo_given) {
        if (b.rank == 0)
            fprintf(stderr,
                    "weft_sweep_allreduce: error: -a is not accepted (the sweep times every "
                    "algorithm)\nTry 'weft_sweep_allreduce --help'.\n");
        return bench_finalize(&b, 2);
    }

    const size_t esz = weft_datatype_size(o.dtype);
    const size_t maxcount = o.max_bytes / esz;
    algo_run_t runs[N_CAND];
    int nalgo = 0;
    void *send = bench_alloc(maxcount * esz), *recv = bench_alloc(maxcount * esz);
    int ok = send && recv, all_ok = 0;
    if (MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, b.ctl) != MPI_SUCCESS || !all_ok) {
        bench_error(&b, "cannot allocate buffers of %zu bytes", maxcount * esz);
        rc = 1;
        goto out;
    }
    bench_fill(send, maxcount, o.dtype, b.rank);

    /* One communicator per algorithm Weft accepts for allreduce. */
    for (int i = WEFT_ALGO_AUTO + 1; i < N_CAND; i++) {
        const weft_algo_t cand = (weft_algo_t)i;
        weft_comm_t c = NULL;
        weft_status_t st = weft_comm_create(MPI_COMM_WORLD, NULL, &c);
        if (st != WEFT_SUCCESS) {
            bench_error(&b, "weft_comm_create: %s", weft_status_name(st));
            rc = 1;
            goto out;
        }
        st = weft_comm_set_algo(c, WEFT_COLL_ALLREDUCE, cand);
        if (st == WEFT_ERR_ALGORITHM) { /* serves other collectives only */
            weft_comm_destroy(c);
            continue;
        }
        weft_algo_t runs_as = WEFT_ALGO_AUTO;
        if (st == WEFT_SUCCESS)
            st = weft_query_algo(c, WEFT_COLL_ALLREDUCE, maxcount, o.dtype, &runs_as);
        int accepted = st == WEFT_SUCCESS && runs_as == cand, all = 0;
        if (MPI_Allreduce(&accepted, &all, 1, MPI_INT, MPI_MIN, b.ctl) != MPI_SUCCESS) all = 0;
        if (!all) {
            bench_printf(&b, "# %s: %s, skipped\n", weft_algo_name(cand),
                         st != WEFT_SUCCESS ? weft_status_name(st)
                                            : "cannot run on this communicator");
            weft_comm_destroy(c);
            continue;
        }
        runs[nalgo++] = (algo_run_t){&b, c, cand, send, recv, 0, o.dtype};
    }
    if (nalgo == 0) {
        bench_error(&b, "no allreduce algorithm available");
        rc = 1;
        goto out;
    }

    bench_csv_t csv = {NULL};
    {
        char header[512];
        int n = snprintf(header, sizeof header, "size_bytes");
        for (int i = 0; i < nalgo; i++)
            n += snprintf(header + n, sizeof header - (size_t)n, ",%s_us",
                          weft_algo_name(runs[i].algo));
        snprintf(header + n, sizeof header - (size_t)n,
                 ",winner,auto_choice,auto_agrees,auto_slowdown_pct");
        if (bench_csv_open(&b, &csv, o.csv_path, header) != 0) {
            rc = 1;
            goto out;
        }
    }
    bench_print_header(&b, &o, "Weft allreduce algorithm sweep (weft_sweep_allreduce)", NULL);
    bench_printf(&b, "# Each column: median latency (us) of that algorithm, forced with "
                     "weft_comm_set_algo; Auto: weft_query_algo on an unforced communicator\n");
    bench_printf(&b, "# Flag '!': the automatic choice is more than %.1f%% slower than the winner; "
                     "'~': a different choice within that tolerance\n",
                 ex.tolerance_pct);
    if (b.rank == 0) {
        printf("%-10s", "# Size");
        for (int i = 0; i < nalgo; i++) printf("%20s", weft_algo_name(runs[i].algo));
        printf("  %-20s%-20s%s\n", "Winner", "Auto", "Flag");
        fflush(stdout);
    }

    size_t sizes[MAX_SIZES];
    int winner_of[MAX_SIZES];
    weft_algo_t auto_of[MAX_SIZES];
    int nsizes = 0, nflag = 0;
    rc = 0;
    BENCH_FOR_SIZES(&o, bytes) {
        if (bytes >= esz) {
            size_t count = bytes / esz;
            weft_algo_t choice = WEFT_ALGO_AUTO;
            weft_status_t st =
                weft_query_algo(b.comm, WEFT_COLL_ALLREDUCE, count, o.dtype, &choice);
            if (st != WEFT_SUCCESS) choice = WEFT_ALGO_AUTO;

            /* Probe: an algorithm that refuses this size on any rank is left out. */
            bench_variant_t v[N_CAND];
            int map[N_CAND], nv = 0;
            int okv[N_CAND];
            for (int i = 0; i < nalgo; i++) {
                runs[i].count = count;
                weft_status_t pst =
                    weft_allreduce(send, recv, count, o.dtype, WEFT_SUM, runs[i].comm);
                okv[i] = pst == WEFT_SUCCESS;
                if (!okv[i] && b.rank == 0)
                    printf("# %zu bytes: %s refused: %s\n", bytes, weft_algo_name(runs[i].algo),
                           weft_status_name(pst));
            }
            if (MPI_Allreduce(MPI_IN_PLACE, okv, nalgo, MPI_INT, MPI_MIN, b.ctl) != MPI_SUCCESS) {
                bench_error(&b, "MPI_Allreduce failed");
                rc = 1;
                break;
            }
            for (int i = 0; i < nalgo; i++)
                if (okv[i]) {
                    map[nv] = i;
                    v[nv++] = (bench_variant_t){weft_algo_name(runs[i].algo), run_algo, &runs[i], NULL};
                }
            double us[N_CAND];
            for (int i = 0; i < N_CAND; i++) us[i] = NAN;
            if (nv > 0) {
                bench_result_t r[N_CAND];
                bench_timing_t tm = bench_timing_for(&o, bytes);
                if (bench_run_interleaved(&b, &tm, v, nv, r) != 0) {
                    bench_error(&b, "size %zu failed", bytes);
                    rc = 1;
                    break;
                }
                for (int k = 0; k < nv; k++) us[map[k]] = r[k].median_us;
            }
            int win = -1;
            for (int i = 0; i < nalgo; i++)
                if (!isnan(us[i]) && (win < 0 || us[i] < us[win])) win = i;
            int chosen = -1;
            for (int i = 0; i < nalgo; i++)
                if (runs[i].algo == choice) chosen = i;
            double slow = (win >= 0 && chosen >= 0 && !isnan(us[chosen]))
                              ? 100.0 * (us[chosen] / us[win] - 1.0)
                              : NAN;
            const char *flag = "";
            char flagbuf[48];
            if (win >= 0 && chosen != win) {
                if (isnan(slow) || slow > ex.tolerance_pct) {
                    if (isnan(slow)) snprintf(flagbuf, sizeof flagbuf, "! (choice not timed)");
                    else snprintf(flagbuf, sizeof flagbuf, "! auto %.0f%% slower", slow);
                    nflag++;
                } else {
                    snprintf(flagbuf, sizeof flagbuf, "~ auto %.1f%% slower", slow);
                }
                flag = flagbuf;
            }
            const char *wname = win >= 0 ? weft_algo_name(runs[win].algo) : "none";
            const char *cname = weft_algo_name(choice) ? weft_algo_name(choice) : "?";
            if (b.rank == 0) {
                printf("%-10zu", bytes);
                for (int i = 0; i < nalgo; i++) {
                    if (isnan(us[i])) printf("%20s", "n/a");
                    else printf("%20.2f", us[i]);
                }
                printf("  %-20s%-20s%s\n", wname, cname, flag);
                fflush(stdout);
                if (csv.f) {
                    fprintf(csv.f, "%zu", bytes);
                    for (int i = 0; i < nalgo; i++) {
                        if (isnan(us[i])) fprintf(csv.f, ",");
                        else fprintf(csv.f, ",%.3f", us[i]);
                    }
                    char slowbuf[32] = "";
                    if (!isnan(slow)) snprintf(slowbuf, sizeof slowbuf, "%.2f", slow);
                    bench_csv_row(&csv, ",%s,%s,%d,%s", wname, cname, chosen == win ? 1 : 0,
                                  slowbuf);
                }
            }
            if (nsizes < MAX_SIZES) { /* at most 31 doublings up to 1 GiB */
                sizes[nsizes] = bytes;
                winner_of[nsizes] = win;
                auto_of[nsizes] = choice;
                nsizes++;
            }
            bench_progress(&b, "weft_sweep_allreduce: %zu bytes done", bytes);
        }
    }
    if (bench_csv_close(&csv) != 0) rc = 1;

    if (rc == 0 && b.rank == 0) {
        printf("# Crossovers (measured winner):\n");
        int any = 0;
        for (int i = 1; i < nsizes; i++)
            if (winner_of[i] != winner_of[i - 1] && winner_of[i] >= 0 && winner_of[i - 1] >= 0) {
                printf("#   %s -> %s between %zu and %zu bytes\n",
                       weft_algo_name(runs[winner_of[i - 1]].algo),
                       weft_algo_name(runs[winner_of[i]].algo), sizes[i - 1], sizes[i]);
                any = 1;
            }
        if (!any) printf("#   none in this range\n");
        printf("# Crossovers (Weft's automatic choice):\n");
        any = 0;
        for (int i = 1; i < nsizes; i++)
            if (auto_of[i] != auto_of[i - 1]) {
                printf("#   %s -> %s between %zu and %zu bytes\n",
                       weft_algo_name(auto_of[i - 1]) ? weft_algo_name(auto_of[i - 1]) : "?",
                       weft_algo_name(auto_of[i]) ? weft_algo_name(auto_of[i]) : "?",
                       sizes[i - 1], sizes[i]);
                any = 1;
            }
        if (!any) printf("#   none in this range\n");
        printf("# Sizes where the automatic choice is more than %.1f%% slower than the winner: %d "
               "of %d\n",
               ex.tolerance_pct, nflag, nsizes);
        fflush(stdout);
    }

out:
    for (int i = 0; i < nalgo; i++) {
        weft_status_t st = weft_comm_destroy(runs[i].comm);
        if (st != WEFT_SUCCESS && rc == 0) {
            bench_error(&b, "weft_comm_destroy: %s", weft_status_name(st));
            rc = 1;
        }
    }
    free(send);
    free(recv);
    return bench_finalize(&b, rc);
}
