/*
 * weft_osu_halo - latency of a 2-D halo exchange of a [C][H][W] float32
 * block per rank: weft_halo_exchange against a hand-written MPI exchange
 * (MPI_Irecv/MPI_Isend of MPI_Type_create_subarray datatypes to every
 * neighbour, then MPI_Waitall) timed in the same run, interleaved.
 *
 *   mpiexec -n 4 weft_osu_halo [--block 64,128,...|HxW,...] [--channels C]
 *                              [--width 1,2,...] [--grid PxQ] [--periodic]
 *                              [--no-corners] [-i ITERS] [-r ROUNDS] [--csv FILE]
 *
 * --block lists local interior sizes (N means NxN). --grid defaults to
 * MPI_Dims_create's 2-D grid. Both exchanges fill the same halo: faces,
 * edges and corners (unless --no-corners), widths the same on all sides.
 * CSV columns: block,channels,width,grid,weft_us,mpi_us,ratio.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "weft_halo.h"

#define MAX_LIST 32

typedef struct hopts {
    int nblock, nwidth;
    long bh[MAX_LIST], bw[MAX_LIST], width[MAX_LIST];
    long channels;
    int grid[2], periodic, corners;
} hopts_t;

static int parse_list(const char *v, long *out, long *out2, int *n)
{
    char buf[512];
    if (strlen(v) >= sizeof buf) return -1;
    strcpy(buf, v);
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*n >= MAX_LIST) return -1;
        char *x = strchr(tok, 'x');
        if (x && !out2) return -1;
        if (x) *x = '\0';
        if (bench_parse_long(tok, 0, &out[*n]) != 0) return -1;
        if (out2) {
            if (x && bench_parse_long(x + 1, 1, &out2[*n]) != 0) return -1;
            if (!x) out2[*n] = out[*n];
            if (out[*n] < 1) return -1;
        }
        (*n)++;
    }
    return *n > 0 ? 0 : -1;
}

static int extra_opt(void *ud, const char *name, const char *value)
{
    hopts_t *h = ud;
    if (strcmp(name, "periodic") == 0) { h->periodic = 1; return BENCH_OPT_OK; }
    if (strcmp(name, "no-corners") == 0) { h->corners = 0; return BENCH_OPT_OK; }
    int known = !strcmp(name, "block") || !strcmp(name, "channels") || !strcmp(name, "width") ||
                !strcmp(name, "grid");
    if (!known) return BENCH_OPT_UNKNOWN;
    if (!value) return BENCH_OPT_NEEDS_VALUE;
    if (!strcmp(name, "block")) return parse_list(value, h->bh, h->bw, &h->nblock) ? BENCH_OPT_BAD_VALUE : BENCH_OPT_OK;
    if (!strcmp(name, "width")) return parse_list(value, h->width, NULL, &h->nwidth) ? BENCH_OPT_BAD_VALUE : BENCH_OPT_OK;
    if (!strcmp(name, "channels"))
        return bench_parse_long(value, 1, &h->channels) ? BENCH_OPT_BAD_VALUE : BENCH_OPT_OK;
    int p, q;
    char tail;
    if (sscanf(value, "%dx%d%c", &p, &q, &tail) != 2 || p < 1 || q < 1) return BENCH_OPT_BAD_VALUE;
    h->grid[0] = p, h->grid[1] = q;
    return BENCH_OPT_OK;
}

/* One configuration's state. */
typedef struct state {
    bench_ctx_t *b;
    weft_halo_plan_t plan;
    float *wbuf, *mbuf;
    int nmsg;
    int peer[8], stag[8], rtag[8], to[8];
    MPI_Datatype stype[8], rtype[8];
    MPI_Request req[16];
    MPI_Status stat[16];
} state_t;

static int run_weft(void *ud, long iters, int round)
{
    state_t *s = ud;
    (void)round;
    for (long i = 0; i < iters; i++) {
        weft_status_t st = weft_halo_exchange(s->plan, s->wbuf);
        if (st != WEFT_SUCCESS) {
            bench_error(s->b, "weft_halo_exchange: %s (%s)", weft_status_name(st), weft_strerror(st));
            return 1;
        }
    }
    return 0;
}

static int run_mpi(void *ud, long iters, int round)
{
    state_t *s = ud;
    (void)round;
    for (long i = 0; i < iters; i++) {
        int n = 0, rc = MPI_SUCCESS;
        for (int k = 0; k < s->nmsg && rc == MPI_SUCCESS; k++)
            if (s->peer[k] >= 0)
                rc = MPI_Irecv(s->mbuf, 1, s->rtype[k], s->peer[k], s->rtag[k], s->b->mpi_comm, &s->req[n++]);
        for (int k = 0; k < s->nmsg && rc == MPI_SUCCESS; k++)
            if (s->peer[k] >= 0)
                rc = MPI_Isend(s->mbuf, 1, s->stype[k], s->peer[k], s->stag[k], s->b->mpi_comm, &s->req[n++]);
        if (rc == MPI_SUCCESS) rc = MPI_Waitall(n, s->req, s->stat);
        if (rc != MPI_SUCCESS) {
            bench_error(s->b, "MPI halo exchange failed (code %d)", rc);
            return 1;
        }
    }
    return 0;
}

/* The hand-written MPI exchange: one subarray type per direction and side. */
static int mpi_setup(state_t *s, const hopts_t *h, long H, long W, long C, int w, const int co[2])
{
    int sizes[3] = {(int)C, (int)(H + 2 * w), (int)(W + 2 * w)};
    s->nmsg = 0;
    for (int d0 = -1; d0 <= 1; d0++)
        for (int d1 = -1; d1 <= 1; d1++) {
            if ((d0 == 0 && d1 == 0) || (!h->corners && d0 && d1)) continue;
            int k = s->nmsg++, dl[2] = {d0, d1}, nb[2], ok = 1;
            for (int d = 0; d < 2; d++) {
                nb[d] = co[d] + dl[d];
                if (nb[d] < 0 || nb[d] >= h->grid[d]) {
                    if (!h->periodic) ok = 0;
                    nb[d] = (nb[d] + h->grid[d]) % h->grid[d];
                }
            }
            s->peer[k] = ok && w > 0 ? nb[0] * h->grid[1] + nb[1] : -1;
            /* tags: a message sent toward delta carries the index of delta;
             * the one received from delta was sent toward -delta */
            s->stag[k] = (d0 + 1) * 3 + (d1 + 1);
            s->rtag[k] = (-d0 + 1) * 3 + (-d1 + 1);
            int ss[3] = {0, 0, 0}, sub[3] = {(int)C, 0, 0}, rs[3] = {0, 0, 0};
            long n[2] = {H, W};
            for (int d = 0; d < 2; d++) {
                if (dl[d] == 0) { sub[1 + d] = (int)n[d]; ss[1 + d] = w; rs[1 + d] = w; }
                else if (dl[d] > 0) { sub[1 + d] = w; ss[1 + d] = (int)n[d]; rs[1 + d] = (int)n[d] + w; }
                else { sub[1 + d] = w; ss[1 + d] = w; rs[1 + d] = 0; }
            }
            s->stype[k] = s->rtype[k] = MPI_DATATYPE_NULL;
            if (s->peer[k] < 0) continue;
            if (MPI_Type_create_subarray(3, sizes, sub, ss, MPI_ORDER_C, MPI_FLOAT, &s->stype[k]) ||
                MPI_Type_commit(&s->stype[k]) ||
                MPI_Type_create_subarray(3, sizes, sub, rs, MPI_ORDER_C, MPI_FLOAT, &s->rtype[k]) ||
                MPI_Type_commit(&s->rtype[k]))
                return 1;
        }
    return 0;
}

static void mpi_teardown(state_t *s)
{
    for (int k = 0; k < s->nmsg; k++) {
        if (s->stype[k] != MPI_DATATYPE_NULL) MPI_Type_free(&s->stype[k]);
        if (s->rtype[k] != MPI_DATATYPE_NULL) MPI_Type_free(&s->rtype[k]);
    }
}

int main(int argc, char **argv)
{
    bench_ctx_t b;
    bench_opts_t o;
    hopts_t h = {.nblock = 5, .nwidth = 2, .bh = {64, 128, 256, 512, 1024},
                 .bw = {64, 128, 256, 512, 1024}, .width = {1, 2}, .channels = 16,
                 .grid = {0, 0}, .periodic = 0, .corners = 1};
    int rc = bench_init(&b, &argc, &argv);
    if (rc != 0) return rc;
    bench_spec_t spec = {.prog = "weft_osu_halo",
                         .what = "Latency of weft_halo_exchange and of a hand-written MPI halo exchange "
                                 "(subarray datatypes) in the same run (interleaved, median over rounds).",
                         .extra_usage = "  --block LIST  local interior sizes, N or HxW, comma-separated\n"
                                        "                (default 64,128,256,512,1024)\n"
                                        "  --channels C  leading channels (default 16)\n"
                                        "  --width LIST  halo widths (default 1,2)\n"
                                        "  --grid PxQ    process grid (default MPI_Dims_create)\n"
                                        "  --periodic    periodic boundaries   --no-corners  faces only\n",
                         .extra = extra_opt,
                         .extra_ud = &h};
    rc = bench_parse(&b, argc, argv, &spec, &o);
    if (rc != BENCH_PARSE_OK) return bench_finalize(&b, rc);
    if (h.grid[0] == 0) {
        int dims[2] = {0, 0};
        MPI_Dims_create(b.size, 2, dims);
        h.grid[0] = dims[0], h.grid[1] = dims[1];
    }
    if (h.grid[0] * h.grid[1] != b.size) {
        if (b.rank == 0) fprintf(stderr, "error: --grid %dx%d does not match %d ranks\n", h.grid[0], h.grid[1], b.size);
        return bench_finalize(&b, BENCH_PARSE_USAGE);
    }
    int co[2] = {b.rank / h.grid[1], b.rank % h.grid[1]};
    bench_csv_t csv;
    if (bench_csv_open(&b, &csv, o.csv_path, "block,channels,width,grid,weft_us,mpi_us,ratio") != 0)
        return bench_finalize(&b, 1);
    bench_print_header(&b, &o, "Weft halo exchange latency test (weft_osu_halo)", NULL);
    bench_printf(&b, "# grid %dx%d, %ld channels, float32, %s, %s\n", h.grid[0], h.grid[1], h.channels,
                 h.periodic ? "periodic" : "non-periodic", h.corners ? "faces+edges+corners" : "faces");
    bench_printf(&b, "# medians over rounds (CSV), then the fastest round of each (a noise-free bound)\n");
    bench_printf(&b, "%-12s%8s%14s%14s%10s%14s%14s%10s\n", "# Block", "Width", "Weft(us)", "MPI(us)",
                 "Weft/MPI", "Weft min", "MPI min", "min ratio");

    rc = 0;
    for (int bi = 0; bi < h.nblock && rc == 0; bi++)
        for (int wi = 0; wi < h.nwidth && rc == 0; wi++) {
            long H = h.bh[bi], W = h.bw[bi], C = h.channels;
            int w = (int)h.width[wi];
            state_t s;
            memset(&s, 0, sizeof s);
            s.b = &b;
            weft_halo_params_t hp = WEFT_HALO_PARAMS_INITIALIZER;
            hp.ndims = 2;
            hp.grid[0] = h.grid[0], hp.grid[1] = h.grid[1];
            hp.periodic[0] = hp.periodic[1] = h.periodic;
            hp.nlead = 1;
            hp.lead[0] = (size_t)C;
            hp.local[0] = (size_t)H, hp.local[1] = (size_t)W;
            hp.width_lo[0] = hp.width_hi[0] = hp.width_lo[1] = hp.width_hi[1] = w;
            hp.dtype = WEFT_FLOAT32;
            hp.corners = h.corners;
            weft_status_t st = weft_halo_plan_create(b.comm, &hp, &s.plan);
            if (st != WEFT_SUCCESS) {
                bench_error(&b, "weft_halo_plan_create: %s", weft_status_name(st));
                rc = 1;
                break;
            }
            size_t count = 0;
            weft_halo_buffer_count(s.plan, &count);
            s.wbuf = bench_alloc(count * sizeof(float));
            s.mbuf = bench_alloc(count * sizeof(float));
            int ok = s.wbuf && s.mbuf && mpi_setup(&s, &h, H, W, C, w, co) == 0, all_ok = 0;
            MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, b.ctl);
            if (!all_ok) {
                bench_error(&b, "setup failed (memory or MPI datatypes)");
                rc = 1;
            } else {
                bench_fill(s.wbuf, count, WEFT_FLOAT32, b.rank);
                bench_fill(s.mbuf, count, WEFT_FLOAT32, b.rank);
                size_t halo_bytes = (size_t)C * (size_t)(2 * w * (H + W) + 4 * w * w) * sizeof(float);
                bench_variant_t v[2] = {{"weft", run_weft, &s, NULL}, {"mpi", run_mpi, &s, NULL}};
                bench_result_t r[2];
                bench_timing_t tm = bench_timing_for(&o, halo_bytes);
                if (bench_run_interleaved(&b, &tm, v, 2, r) != 0) {
                    rc = 1;
                } else {
                    double ratio = r[1].median_us > 0 ? r[0].median_us / r[1].median_us : NAN;
                    char blk[64], grid[32];
                    snprintf(blk, sizeof blk, "%ldx%ld", H, W);
                    snprintf(grid, sizeof grid, "%dx%d", h.grid[0], h.grid[1]);
                    bench_printf(&b, "%-12s%8d%14.2f%14.2f%10.3f%14.2f%14.2f%10.3f\n", blk, w,
                                 r[0].median_us, r[1].median_us, ratio, r[0].min_us, r[1].min_us,
                                 r[1].min_us > 0 ? r[0].min_us / r[1].min_us : NAN);
                    bench_csv_row(&csv, "%s,%ld,%d,%s,%.3f,%.3f,%.4f", blk, C, w, grid, r[0].median_us,
                                  r[1].median_us, ratio);
                    bench_progress(&b, "weft_osu_halo: %s width %d done", blk, w);
                }
            }
            mpi_teardown(&s);
            weft_halo_plan_destroy(s.plan);
            free(s.wbuf);
            free(s.mbuf);
        }
    if (bench_csv_close(&csv) != 0) rc = 1;
    return bench_finalize(&b, rc);
}
