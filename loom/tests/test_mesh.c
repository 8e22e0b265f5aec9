/*
 * test_mesh.c - the mesh-tangling data and model: the generator is
 * deterministic per (seed, index) and differs between indices; features are
 * finite and bounded; the tangled class is present but a minority; every
 * cell already tangled at t (feature 7, its smallest corner Jacobian over
 * the reference area, <= tau) is a target; file
 * round trip and corruption detection; the loss gradient matches finite
 * differences; the model maps [n,18,h,w] to [n,1,h,w].
 */
#include "harness.h"
#include "loom.h"
#include "loom_mesh.h"

#include <string.h>

int main(void)
{
    loom_set_threads(1);
    loom_mesh_desc_t d = LOOM_MESH_DESC_INIT;
    d.h = 48;
    d.w = 40;
    d.seed = 9;
    size_t nx = (size_t)LOOM_MESH_CHANNELS * d.h * d.w, ny = (size_t)d.h * d.w;
    float *x1 = malloc(sizeof(float) * nx), *x2 = malloc(sizeof(float) * nx);
    float *y1 = malloc(sizeof(float) * ny), *y2 = malloc(sizeof(float) * ny);
    if (!x1 || !x2 || !y1 || !y2)
        return 1;
    CHECK(loom_mesh_sample(&d, 3, x1, y1) == 0, "sample: %s", loom_last_error());
    CHECK(loom_mesh_sample(&d, 3, x2, y2) == 0, "sample again");
    CHECK(memcmp(x1, x2, sizeof(float) * nx) == 0 && memcmp(y1, y2, sizeof(float) * ny) == 0,
          "same (seed, index) gives different samples");
    CHECK(loom_mesh_sample(&d, 4, x2, y2) == 0, "sample 4");
    CHECK(memcmp(x1, x2, sizeof(float) * nx) != 0, "indices 3 and 4 give the same sample");

    double pos = 0.0, cells = 0.0;
    int finite = 1, tangled_now_ok = 1;
    for (int i = 0; i < 12; i++) {
        loom_mesh_sample(&d, (uint64_t)i, x1, y1);
        for (size_t k = 0; k < nx; k++)
            finite &= isfinite(x1[k]) && fabsf(x1[k]) <= 10.0f;
        for (size_t c = 0; c < ny; c++) {
            pos += y1[c];
            /* a cell whose smallest corner Jacobian is already <= tau at t is a target */
            if (x1[7 * ny + c] <= d.tau && y1[c] != 1.0f)
                tangled_now_ok = 0;
            if (y1[c] != 0.0f && y1[c] != 1.0f)
                tangled_now_ok = 0;
        }
        cells += (double)ny;
    }
    CHECK(finite, "features not finite or outside [-10, 10]");
    CHECK(tangled_now_ok, "target misses cells already tangled (or is not 0/1)");
    CHECK(pos / cells > 0.005 && pos / cells < 0.5, "tangled fraction %.4f out of (0.005, 0.5)",
          pos / cells);
    printf("tangled fraction over 12 samples of %dx%d: %.4f\n", d.h, d.w, pos / cells);

    /* file round trip */
    const char *path = "loom_test_mesh.bin";
    CHECK(loom_mesh_write(&d, 5, 2, path) == 0, "write: %s", loom_last_error());
    loom_mesh_set_t set;
    CHECK(loom_mesh_read(&set, path) == 0, "read: %s", loom_last_error());
    if (set.x) {
        loom_mesh_sample(&d, 6, x1, y1);
        CHECK(set.count == 2 && set.h == d.h && set.w == d.w && memcmp(set.x + nx, x1, sizeof(float) * nx) == 0 &&
                  memcmp(set.y + ny, y1, sizeof(float) * ny) == 0,
              "file does not hold samples 5, 6");
        loom_mesh_set_free(&set);
    }
    FILE *f = fopen(path, "r+b");
    if (f) {
        fseek(f, 100, SEEK_SET);
        fputc(0x5a, f);
        fclose(f);
    }
    CHECK(loom_mesh_read(&set, path) == LOOM_ERR_FORMAT && strstr(loom_last_error(), "checksum"),
          "corruption not detected (%s)", loom_last_error());
    remove(path);
    CHECK(loom_mesh_read(&set, "no/such/file") == LOOM_ERR_IO, "missing file");

    /* loss gradient against finite differences (double-checked in double) */
    float lg[6] = {-3.0f, -0.4f, 0.0f, 0.3f, 2.0f, 5.0f}, tg[6] = {0, 1, 1, 0, 1, 0}, dx[6];
    long cnt[3] = {0, 0, 0};
    loom_mesh_bce(6, lg, tg, 3.0f, 6.0, dx, cnt);
    double worst = 0.0;
    for (int i = 0; i < 6; i++) {
        float p[6], m[6];
        memcpy(p, lg, sizeof p);
        memcpy(m, lg, sizeof m);
        p[i] += 1e-3f;
        m[i] -= 1e-3f;
        double num = (loom_mesh_bce(6, p, tg, 3.0f, 6.0, NULL, NULL) -
                      loom_mesh_bce(6, m, tg, 3.0f, 6.0, NULL, NULL)) / 6.0 / 2e-3;
        worst = fmax(worst, fabs(num - dx[i]));
    }
    CHECK(worst < 1e-3, "BCE gradient off by %.3g", worst);
    CHECK(cnt[0] == 1 && cnt[1] == 2 && cnt[2] == 2, "tp/fp/fn %ld/%ld/%ld, expected 1/2/2", cnt[0],
          cnt[1], cnt[2]);

    loom_model_t *m = NULL;
    CHECK(loom_mesh_model_create(&m, (loom_shape_t){2, 18, 32, 24}, 0.125f, 1) == 0, "model: %s",
          loom_last_error());
    if (m) {
        loom_shape_t o = loom_model_output_shape(m);
        CHECK(o.n == 2 && o.c == 1 && o.h == 32 && o.w == 24, "output %dx%dx%dx%d", o.n, o.c, o.h, o.w);
        CHECK(loom_model_forward(m, 2, 1) == 0, "forward");
        loom_model_destroy(m);
    }
    CHECK(loom_mesh_model_create(&m, (loom_shape_t){2, 18, 30, 24}, 0.125f, 1) == LOOM_ERR_INVALID,
          "height 30 (not a multiple of 8) accepted");
    free(x1);
    free(x2);
    free(y1);
    free(y2);
    return t_done();
}
