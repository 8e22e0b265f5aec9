/*
 * halo_overlap.c - overlapping a halo exchange with computation.
 *
 * Each rank holds a C x H x W block of a 2-D field (split over a process
 * grid, periodic) and applies a 3x3 box filter a few times. A step:
 *
 *   1. weft_halo_start(plan, x)   the plan packs the faces, edges and
 *                                 corners and posts every message; returns
 *   2. filter the interior        cells at distance >= 1 from the border
 *                                 read no halo cell: they need no wait
 *   3. weft_halo_wait(plan)       the halo of x is now filled
 *   4. filter the border          the outermost ring of the interior
 *
 * The progress engine moves the messages during step 2. At the end the
 * program checks the result against a single-process filter of the whole
 * field gathered on rank 0 (exit 1 if they differ).
 *
 *   mpiexec -n 4 ./halo_overlap
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft.h"
#include "weft_halo.h"
#include "weft_mpi.h"

enum { C = 2, GH = 24, GW = 30, STEPS = 3 };

#define CHECK(call)                                                                          \
    do {                                                                                     \
        weft_status_t st_ = (call);                                                          \
        if (st_ != WEFT_SUCCESS) {                                                           \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, weft_strerror(st_)); \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                    \
        }                                                                                    \
    } while (0)

/* Buffer with a halo of 1: index of channel c, row i, column j (interior 1..h, 1..w). */
#define AT(buf, c, i, j) (buf)[((size_t)(c) * (h + 2) + (size_t)(i)) * (w + 2) + (size_t)(j)]

/* out = 3x3 mean of in, over rows [i0, i1) and columns [j0, j1) of the buffer. */
static void filter(const float *in, float *out, int h, int w, int i0, int i1, int j0, int j1)
{
    for (int c = 0; c < C; c++)
        for (int i = i0; i < i1; i++)
            for (int j = j0; j < j1; j++) {
                float s = 0;
                for (int di = -1; di <= 1; di++)
                    for (int dj = -1; dj <= 1; dj++) s += AT(in, c, i + di, j + dj);
                AT(out, c, i, j) = s / 9.0f;
            }
}

static float init_value(int c, int gi, int gj) { return (float)((c + 1) * (gi * 7 + gj * 3) % 11); }

int main(int argc, char **argv)
{
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE) {
        MPI_Finalize();
        return 77; /* cannot run here */
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(weft_init(NULL));

    /* A periodic Cartesian communicator: the plan takes the grid from it. */
    int dims[2] = {0, 0}, periods[2] = {1, 1}, coords[2];
    MPI_Dims_create(size, 2, dims);
    MPI_Comm cart;
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
    MPI_Cart_coords(cart, rank, 2, coords);
    weft_comm_t comm;
    CHECK(weft_comm_create(cart, NULL, &comm));

    /* Uneven split: the first GH % dims[0] rows of ranks get one row more. */
    int h = GH / dims[0] + (coords[0] < GH % dims[0]);
    int w = GW / dims[1] + (coords[1] < GW % dims[1]);
    int i_off = coords[0] * (GH / dims[0]) + (coords[0] < GH % dims[0] ? coords[0] : GH % dims[0]);
    int j_off = coords[1] * (GW / dims[1]) + (coords[1] < GW % dims[1] ? coords[1] : GW % dims[1]);

    weft_halo_params_t p = WEFT_HALO_PARAMS_INITIALIZER;
    p.ndims = 2;                /* grid[] left 0: from the Cart communicator */
    p.nlead = 1;
    p.lead[0] = C;
    p.local[0] = (size_t)h;
    p.local[1] = (size_t)w;
    p.width_lo[0] = p.width_hi[0] = p.width_lo[1] = p.width_hi[1] = 1;
    p.dtype = WEFT_FLOAT32;
    p.corners = 1;              /* a 3x3 stencil reads the diagonal neighbours */
    weft_halo_plan_t plan;
    CHECK(weft_halo_plan_create(comm, &p, &plan));

    size_t n;
    CHECK(weft_halo_buffer_count(plan, &n));
    float *x = calloc(n, sizeof *x), *y = calloc(n, sizeof *y);
    for (int c = 0; c < C; c++)
        for (int i = 1; i <= h; i++)
            for (int j = 1; j <= w; j++) AT(x, c, i, j) = init_value(c, i_off + i - 1, j_off + j - 1);

    for (int step = 0; step < STEPS; step++) {
        CHECK(weft_halo_start(plan, x));             /* 1. exchange in the background */
        filter(x, y, h, w, 2, h, 2, w);              /* 2. interior: no halo needed */
        CHECK(weft_halo_wait(plan));                 /* 3. halo of x ready */
        filter(x, y, h, w, 1, 2, 1, w + 1);          /* 4. border: top row, */
        if (h > 1) filter(x, y, h, w, h, h + 1, 1, w + 1); /*  bottom row, */
        filter(x, y, h, w, 2, h, 1, 2);              /*    left and right columns */
        if (w > 1) filter(x, y, h, w, 2, h, w, w + 1);
        float *t = x;
        x = y;
        y = t;
    }

    /* Check: gather the interiors on rank 0 and compare with a serial run. */
    int bad = 0;
    float *mine = malloc((size_t)C * h * w * sizeof *mine);
    for (int c = 0; c < C; c++)
        for (int i = 0; i < h; i++)
            for (int j = 0; j < w; j++) mine[((size_t)c * h + i) * w + j] = AT(x, c, i + 1, j + 1);
    int meta[4] = {i_off, j_off, h, w}, *metas = NULL;
    float *all = NULL;
    if (rank == 0) {
        metas = malloc(4 * sizeof(int) * (size_t)size);
        all = malloc((size_t)C * GH * GW * sizeof *all); /* the interiors tile the field */
    }
    MPI_Gather(meta, 4, MPI_INT, metas, 4, MPI_INT, 0, MPI_COMM_WORLD);
    int cnt = C * h * w, *cnts = rank == 0 ? malloc(sizeof(int) * (size_t)size) : NULL,
        *displs = rank == 0 ? malloc(sizeof(int) * (size_t)size) : NULL;
    MPI_Gather(&cnt, 1, MPI_INT, cnts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0)
        for (int q = 0, d = 0; q < size; d += cnts[q], q++) displs[q] = d;
    MPI_Gatherv(mine, cnt, MPI_FLOAT, all, cnts, displs, MPI_FLOAT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        /* serial reference with periodic wrap */
        float *a = malloc(sizeof(float) * C * GH * GW), *b = malloc(sizeof(float) * C * GH * GW);
        for (int c = 0; c < C; c++)
            for (int i = 0; i < GH; i++)
                for (int j = 0; j < GW; j++) a[(c * GH + i) * GW + j] = init_value(c, i, j);
        for (int step = 0; step < STEPS; step++) {
            for (int c = 0; c < C; c++)
                for (int i = 0; i < GH; i++)
                    for (int j = 0; j < GW; j++) {
                        float s = 0;
                        for (int di = -1; di <= 1; di++)
                            for (int dj = -1; dj <= 1; dj++)
                                s += a[(c * GH + (i + di + GH) % GH) * GW + (j + dj + GW) % GW];
                        b[(c * GH + i) * GW + j] = s / 9.0f;
                    }
            float *t = a;
            a = b;
            b = t;
        }
        for (int q = 0; q < size; q++) {
            int qi = metas[4 * q], qj = metas[4 * q + 1], qh = metas[4 * q + 2], qw = metas[4 * q + 3];
            for (int c = 0; c < C; c++)
                for (int i = 0; i < qh; i++)
                    for (int j = 0; j < qw; j++) {
                        float got = all[displs[q] + (c * qh + i) * qw + j];
                        float ref = a[(c * GH + qi + i) * GW + qj + j];
                        if (fabsf(got - ref) > 1e-4f * (1 + fabsf(ref))) bad++;
                    }
        }
        printf("halo_overlap: %d ranks, grid %dx%d, %d steps: %s\n", size, dims[0], dims[1], STEPS,
               bad ? "MISMATCH" : "matches the serial filter");
        free(a), free(b), free(all), free(metas), free(cnts), free(displs);
    }
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(mine), free(x), free(y);
    CHECK(weft_halo_plan_destroy(plan));
    CHECK(weft_comm_destroy(comm));
    MPI_Comm_free(&cart);
    CHECK(weft_finalize());
    MPI_Finalize();
    return bad ? 1 : 0;
}
