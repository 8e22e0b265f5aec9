/*
 * profile.c - the per-operation, per-message-size profiler.
 *
 * One cell per (operation kind, algorithm, size bucket). Buckets are powers of
 * two: bucket B holds the messages of B/2 < bytes <= B (bucket 0 holds empty
 * messages), so the OSU sizes 1, 2, 4, ... each fill their own bucket. A cell
 * counts calls, bytes, the time from issue to completion (total, min, max;
 * mean = total / calls) and the time callers spent blocked in weft_wait or in
 * a blocking call (wait).
 *
 * With WEFT_PROFILE=path, weft_finalize gathers every rank's cells on rank 0
 * of MPI_COMM_WORLD (collective: WEFT_PROFILE must be set on every rank, as
 * mpiexec does), which writes path (JSON) and the same rows as CSV beside it
 * (path with .json replaced by .csv, or path.csv), and prints a short summary
 * on stdout (lines starting with '#', which OSU-style parsers skip).
 * weft_profile_dump(path) writes this rank's cells alone, at once.
 *
 * Thread contract: cells are updated from the engine side (completion) and
 * from callers (wait time), and read by weft_profile_dump from any thread:
 * every access is under P.lock (uncontended in the common case: one update per
 * completed operation and one per wait).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "weft_internal.h"

#define NKIND WEFT__OP_KIND_COUNT
#define NALGO WEFT_ALGO_COUNT
#define NBUCKET 66 /* 0 bytes, then 2^0 .. 2^64 */
#define NFIELD 10  /* doubles per packed cell (see pack_cells) */

typedef struct cell {
    uint64_t calls, bytes, waits;
    double t_sum, t_min, t_max, w_sum;
} cell_t;

static struct {
    pthread_mutex_t lock;
    cell_t *cells; /* NKIND * NALGO * NBUCKET, NULL until enabled */
} P = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int bucket_of(size_t bytes)
{
    if (bytes == 0) return 0;
    if (bytes == 1) return 1;
    return 1 + (int)(sizeof(unsigned long long) * 8) - __builtin_clzll((unsigned long long)(bytes - 1));
}

/* Upper bound of a bucket in bytes (as a double: bucket 65 is 2^64). */
static double bucket_bytes(int b) { return b == 0 ? 0.0 : ldexp(1.0, b - 1); }

static cell_t *cell_at(cell_t *cells, int kind, int algo, int bucket)
{
    return &cells[((size_t)kind * NALGO + (size_t)algo) * NBUCKET + (size_t)bucket];
}

static cell_t *cell_of(const weft__op_t *op)
{
    int k = (unsigned)op->kind < NKIND ? (int)op->kind : 0;
    int a = (unsigned)op->algo < NALGO ? (int)op->algo : 0;
    return cell_at(P.cells, k, a, bucket_of(op->bytes));
}

weft_status_t weft__profile_init(void)
{
    weft_status_t st = WEFT_SUCCESS;
    pthread_mutex_lock(&P.lock);
    if (P.cells == NULL) {
        P.cells = calloc((size_t)NKIND * NALGO * NBUCKET, sizeof(cell_t));
        if (P.cells == NULL) {
            WEFT__ERROR("profiler: cannot allocate its table");
            st = WEFT_ERR_NO_MEMORY;
        }
    }
    pthread_mutex_unlock(&P.lock);
    return st;
}

void weft__profile_done(const weft__op_t *op, double t_end)
{
    double t = t_end - op->t_issue;
    if (t < 0) t = 0;
    pthread_mutex_lock(&P.lock);
    if (P.cells != NULL) {
        cell_t *c = cell_of(op);
        if (c->calls == 0 || t < c->t_min) c->t_min = t;
        if (t > c->t_max) c->t_max = t;
        c->calls++;
        c->bytes += op->bytes;
        c->t_sum += t;
    }
    pthread_mutex_unlock(&P.lock);
}

void weft__profile_wait(const weft__op_t *op, double waited)
{
    pthread_mutex_lock(&P.lock);
    if (P.cells != NULL) {
        cell_t *c = cell_of(op);
        c->waits++;
        c->w_sum += waited > 0 ? waited : 0;
    }
    pthread_mutex_unlock(&P.lock);
}

/* ---- packing: the cells in use as rows of NFIELD doubles --------------------------- */
/* Row: kind, algo, bucket, calls, bytes, t_sum, t_min, t_max, w_sum, waits.
 * Counts stay exact as doubles up to 2^53. Caller holds P.lock. */
static weft_status_t pack_cells(double **rows, int *nrows)
{
    int n = 0;
    *rows = NULL;
    *nrows = 0;
    if (P.cells == NULL) return WEFT_SUCCESS;
    size_t total = (size_t)NKIND * NALGO * NBUCKET;
    for (size_t i = 0; i < total; i++)
        if (P.cells[i].calls || P.cells[i].waits) n++;
    if (n == 0) return WEFT_SUCCESS;
    double *r = malloc((size_t)n * NFIELD * sizeof(double));
    if (r == NULL) return WEFT_ERR_NO_MEMORY;
    int j = 0;
    for (int k = 0; k < NKIND; k++)
        for (int a = 0; a < NALGO; a++)
            for (int b = 0; b < NBUCKET; b++) {
                const cell_t *c = cell_at(P.cells, k, a, b);
                if (!c->calls && !c->waits) continue;
                double *x = &r[(size_t)j++ * NFIELD];
                x[0] = k; x[1] = a; x[2] = b;
                x[3] = (double)c->calls; x[4] = (double)c->bytes;
                x[5] = c->t_sum; x[6] = c->t_min; x[7] = c->t_max;
                x[8] = c->w_sum; x[9] = (double)c->waits;
            }
    *rows = r;
    *nrows = n;
    return WEFT_SUCCESS;
}

/* ---- writing ------------------------------------------------------------------------- */
static const char *algo_label(int a)
{
    const char *s = weft_algo_name((weft_algo_t)a);
    return s ? s : "unknown";
}

/* The CSV file beside a JSON path: x.json -> x.csv, otherwise x -> x.csv. */
static void csv_path_of(const char *path, char *out, size_t cap)
{
    size_t n = strlen(path);
    if (n > 5 && strcmp(path + n - 5, ".json") == 0)
        snprintf(out, cap, "%.*s.csv", (int)(n - 5), path);
    else
        snprintf(out, cap, "%s.csv", path);
}

static const char *const csv_header =
    "rank,op,algorithm,bucket_bytes,calls,bytes,total_us,mean_us,min_us,max_us,wait_us,waits";

/* rows: nrows rows of NFIELD doubles; rank_of[i] the rank of row i. */
static weft_status_t write_files(const char *path, const double *rows, const int *rank_of,
                                 int nrows, int nranks)
{
    char csvp[1100];
    csv_path_of(path, csvp, sizeof csvp);
    FILE *fj = fopen(path, "w");
    if (fj == NULL) {
        WEFT__ERROR("profile: cannot write %s: %s", path, strerror(errno));
        return WEFT_ERR_INVALID_ARG;
    }
    FILE *fc = fopen(csvp, "w");
    if (fc == NULL) {
        WEFT__ERROR("profile: cannot write %s: %s", csvp, strerror(errno));
        fclose(fj);
        return WEFT_ERR_INVALID_ARG;
    }
    /* Where and when (weft-plot's titles): host name (JSON-safe bytes only),
     * CPUs, UTC date. */
    char host[128] = "unknown", date[64] = "unknown";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    for (char *h = host; *h; h++)
        if (*h == '"' || *h == '\\' || (unsigned char)*h < 0x20) *h = '?';
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", &tm);
    fprintf(fj, "{\"weft_profile\": 1, \"version\": \"%s\", \"ranks\": %d, \"time_unit\": \"us\",\n"
                " \"machine\": \"%s, %ld CPUs\", \"date\": \"%s\",\n"
                " \"bucket\": \"bucket_bytes B holds messages of B/2 < bytes <= B; 0 holds empty ones\",\n"
                " \"entries\": [",
            weft_version_string(), nranks, host, sysconf(_SC_NPROCESSORS_ONLN), date);
    fprintf(fc, "%s\n", csv_header);
    for (int i = 0; i < nrows; i++) {
        const double *x = &rows[(size_t)i * NFIELD];
        const char *op = weft__opkind_name((weft__opkind_t)(int)x[0]);
        double calls = x[3];
        double mean = calls > 0 ? x[5] / calls : 0;
        fprintf(fj,
                "%s\n  {\"rank\": %d, \"op\": \"%s\", \"algorithm\": \"%s\", \"bucket_bytes\": %.0f, "
                "\"calls\": %.0f, \"bytes\": %.0f, \"total_us\": %.3f, \"mean_us\": %.3f, "
                "\"min_us\": %.3f, \"max_us\": %.3f, \"wait_us\": %.3f, \"waits\": %.0f}",
                i ? "," : "", rank_of[i], op ? op : "unknown", algo_label((int)x[1]),
                bucket_bytes((int)x[2]), calls, x[4], 1e6 * x[5], 1e6 * mean, 1e6 * x[6],
                1e6 * x[7], 1e6 * x[8], x[9]);
        fprintf(fc, "%d,%s,%s,%.0f,%.0f,%.0f,%.3f,%.3f,%.3f,%.3f,%.3f,%.0f\n", rank_of[i],
                op ? op : "unknown", algo_label((int)x[1]), bucket_bytes((int)x[2]), calls, x[4],
                1e6 * x[5], 1e6 * mean, 1e6 * x[6], 1e6 * x[7], 1e6 * x[8], x[9]);
    }
    fprintf(fj, "\n ]}\n");
    int bad = ferror(fj) | ferror(fc);
    bad |= fclose(fj) != 0;
    bad |= fclose(fc) != 0;
    if (bad) {
        WEFT__ERROR("profile: writing %s or %s failed", path, csvp);
        return WEFT_ERR_INVALID_ARG;
    }
    return WEFT_SUCCESS;
}

/* Rank 0: the summary over all ranks, one line per (op, algorithm, bucket). */
static void print_summary(const double *rows, int nrows, int nranks, const char *path)
{
    /* Merge rows with the same key: rows arrive grouped by rank, each rank's
     * rows sorted by key; a small O(n^2) pass is fine for a summary. */
    int *merged = calloc((size_t)(nrows > 0 ? nrows : 1), sizeof(int));
    if (merged == NULL) return;
    printf("# weft-profile: %d rank(s); files %s (+ .csv)\n", nranks, path);
    printf("# weft-profile: %-15s %-19s %10s %9s %11s %11s %11s %6s\n", "op", "algorithm",
           "size<=B", "calls_all", "mean_us", "max_us", "total_ms", "wait%");
    for (int i = 0; i < nrows; i++) {
        if (merged[i]) continue;
        const double *x = &rows[(size_t)i * NFIELD];
        double calls = 0, tsum = 0, tmax = 0, wsum = 0;
        for (int j = i; j < nrows; j++) {
            const double *y = &rows[(size_t)j * NFIELD];
            if (merged[j] || y[0] != x[0] || y[1] != x[1] || y[2] != x[2]) continue;
            merged[j] = 1;
            calls += y[3];
            tsum += y[5];
            if (y[7] > tmax) tmax = y[7];
            wsum += y[8];
        }
        if (calls == 0) continue;
        const char *op = weft__opkind_name((weft__opkind_t)(int)x[0]);
        printf("# weft-profile: %-15s %-19s %10.0f %9.0f %11.2f %11.2f %11.3f %6.1f\n",
               op ? op : "unknown", algo_label((int)x[1]), bucket_bytes((int)x[2]), calls,
               1e6 * tsum / calls, 1e6 * tmax, 1e3 * tsum, tsum > 0 ? 100.0 * wsum / tsum : 0.0);
    }
    fflush(stdout);
    free(merged);
}

/* Gather every rank's rows on rank 0 of MPI_COMM_WORLD (collective). */
static weft_status_t gather_and_write(const char *path, double *mine, int nmine)
{
    weft_status_t st = WEFT_SUCCESS;
    int rank = weft__g.world_rank, size = weft__g.world_size;
    int *counts = NULL, *displs = NULL, *rank_of = NULL;
    double *all = NULL;
    int ndoubles = nmine * NFIELD, total = 0;
    if (rank == 0) {
        counts = calloc((size_t)size, sizeof(int));
        displs = calloc((size_t)size, sizeof(int));
        if (counts == NULL || displs == NULL) st = WEFT_ERR_NO_MEMORY;
    }
    /* Every rank learns whether rank 0 can receive, so nobody is left in a
     * collective alone. */
    weft__ctl_t *world = weft__ctl_world();
    int ok = st == WEFT_SUCCESS;
    WEFT__CHECK_GOTO(weft__ctl_bcast(world, &ok, sizeof ok, 0), st, out);
    if (!ok) goto out;
    WEFT__CHECK_GOTO(weft__ctl_gather(world, &ndoubles, sizeof ndoubles, counts, 0), st, out);
    if (rank == 0) {
        for (int r = 0; r < size; r++) {
            displs[r] = total;
            if (counts[r] > INT32_MAX - total) { ok = 0; break; }
            total += counts[r];
        }
        if (ok) {
            all = malloc((size_t)(total > 0 ? total : 1) * sizeof(double));
            rank_of = malloc((size_t)(total / NFIELD + 1) * sizeof(int));
            if (all == NULL || rank_of == NULL) ok = 0;
        }
    }
    WEFT__CHECK_GOTO(weft__ctl_bcast(world, &ok, sizeof ok, 0), st, out);
    if (!ok) {
        st = WEFT_ERR_NO_MEMORY;
        goto out;
    }
    WEFT__CHECK_GOTO(weft__ctl_gatherv(world, mine, ndoubles, all, counts, displs,
                                       WEFT__CTL_DOUBLE, 0), st, out);
    if (rank == 0) {
        for (int r = 0; r < size; r++)
            for (int i = displs[r] / NFIELD; i < (displs[r] + counts[r]) / NFIELD; i++) rank_of[i] = r;
        st = write_files(path, all, rank_of, total / NFIELD, size);
        if (st == WEFT_SUCCESS) print_summary(all, total / NFIELD, size, path);
    }
out:
    free(counts);
    free(displs);
    free(rank_of);
    free(all);
    return st;
}

/* weft_finalize: engine stopped (no more updates), MPI usable. */
void weft__profile_fini(void)
{
    pthread_mutex_lock(&P.lock);
    double *rows = NULL;
    int nrows = 0;
    weft_status_t st = P.cells ? pack_cells(&rows, &nrows) : WEFT_SUCCESS;
    int had = P.cells != NULL;
    free(P.cells);
    P.cells = NULL;
    pthread_mutex_unlock(&P.lock);
    if (weft__cfg.profile_path[0] == '\0') goto out; /* enabled at run time only: see dump */
    if (st != WEFT_SUCCESS) nrows = 0;               /* logged; this rank contributes nothing */
    if (!weft__mpi_usable()) {
        WEFT__ERROR("profile: MPI is not usable at weft_finalize; %s not written",
                    weft__cfg.profile_path);
        goto out;
    }
    if (!had) nrows = 0; /* still take part in the gather */
    st = gather_and_write(weft__cfg.profile_path, rows, nrows);
    if (st != WEFT_SUCCESS)
        WEFT__ERROR("profile: %s not written (%s)", weft__cfg.profile_path, weft_strerror(st));
out:
    free(rows);
}

/* ---- public ---------------------------------------------------------------------------- */
/* Any thread between weft_init and weft_finalize. Not collective. */
weft_status_t weft_profile_dump(const char *path)
{
    if (!weft__is_init()) return WEFT_ERR_NOT_INITIALIZED;
    if (path == NULL || path[0] == '\0' || strlen(path) > 1000) return WEFT_ERR_INVALID_ARG;
    double *rows = NULL;
    int nrows = 0;
    pthread_mutex_lock(&P.lock);
    weft_status_t st = pack_cells(&rows, &nrows);
    pthread_mutex_unlock(&P.lock);
    if (st != WEFT_SUCCESS) return st;
    int *rank_of = malloc((size_t)(nrows + 1) * sizeof(int));
    if (rank_of == NULL) {
        free(rows);
        return WEFT_ERR_NO_MEMORY;
    }
    for (int i = 0; i < nrows; i++) rank_of[i] = weft__g.world_rank;
    st = write_files(path, rows, rank_of, nrows, 1);
    free(rank_of);
    free(rows);
    return st;
}
