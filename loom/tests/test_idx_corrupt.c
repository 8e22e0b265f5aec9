/*
 * test_idx_corrupt.c - IDX files made here: valid ones load (plain and
 * gzip); wrong magic, truncated data, truncated gzip stream, label out of
 * range, image/label count mismatch and a missing file are refused with an
 * error status and a message naming the problem.
 */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"
#include "loom.h"

#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static char dir[] = "/tmp/loom_idx_XXXXXX";

static void be32(unsigned char *p, uint32_t v)
{
    p[0] = v >> 24, p[1] = v >> 16, p[2] = v >> 8, p[3] = v;
}

/* Writes an IDX file; gz selects gzip; cut drops that many trailing bytes. */
static void write_idx(const char *name, int ndim, const uint32_t *dims, uint32_t magic_override,
                      const unsigned char *data, size_t n, int gz, size_t cut, char *out)
{
    unsigned char hdr[16];
    be32(hdr, magic_override ? magic_override : (0x0800u | (uint32_t)ndim));
    for (int i = 0; i < ndim; i++)
        be32(hdr + 4 + 4 * i, dims[i]);
    size_t hl = 4 + 4 * (size_t)ndim, total = hl + n - cut;
    unsigned char *buf = malloc(hl + n);
    memcpy(buf, hdr, hl);
    memcpy(buf + hl, data, n);
    snprintf(out, 512, "%s/%s", dir, name);
    if (gz) {
        gzFile f = gzopen(out, "wb");
        gzwrite(f, buf, (unsigned)total);
        gzclose(f);
    } else {
        FILE *f = fopen(out, "wb");
        fwrite(buf, 1, total, f);
        fclose(f);
    }
    free(buf);
}

static void expect_fail(const char *what, const char *img, const char *lab, int want,
                        const char *needle)
{
    loom_dataset_t ds;
    int st = loom_idx_load(&ds, img, lab, 10);
    CHECK(st == want, "%s: status %d (%s), expected %d", what, st, loom_last_error(), want);
    CHECK(strstr(loom_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'", what,
          loom_last_error(), needle);
    if (st == 0)
        loom_dataset_free(&ds);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    unsigned char pix[5 * 4 * 3], lab[5] = {0, 3, 9, 1, 2}, badlab[5] = {0, 3, 10, 1, 2};
    for (size_t i = 0; i < sizeof pix; i++)
        pix[i] = (unsigned char)(i * 13);
    uint32_t idims[3] = {5, 4, 3}, ldims[1] = {5}, ldims4[1] = {4};
    char img[512], imgz[512], labp[512], labz[512], p1[512], p2[512];
    write_idx("img", 3, idims, 0, pix, sizeof pix, 0, 0, img);
    write_idx("img.gz", 3, idims, 0, pix, sizeof pix, 1, 0, imgz);
    write_idx("lab", 1, ldims, 0, lab, 5, 0, 0, labp);
    write_idx("lab.gz", 1, ldims, 0, lab, 5, 1, 0, labz);

    loom_dataset_t ds;
    int st = loom_idx_load(&ds, img, labp, 10);
    CHECK(st == 0 && ds.count == 5 && ds.rows == 4 && ds.cols == 3 && ds.labels[2] == 9 &&
          ds.images[7] == (unsigned char)(7 * 13), "plain IDX load: %s", loom_last_error());
    if (st == 0)
        loom_dataset_free(&ds);
    st = loom_idx_load(&ds, imgz, labz, 10);
    CHECK(st == 0 && ds.count == 5, "gzip IDX load: %s", loom_last_error());
    if (st == 0)
        loom_dataset_free(&ds);

    write_idx("magic", 3, idims, 0x00000804u, pix, sizeof pix, 1, 0, p1);
    expect_fail("wrong magic", p1, labz, LOOM_ERR_FORMAT, "magic");
    write_idx("labmagic", 1, ldims, 0x00000803u, lab, 5, 0, 0, p2);
    expect_fail("labels with image magic", imgz, p2, LOOM_ERR_FORMAT, "magic");
    write_idx("trunc", 3, idims, 0, pix, sizeof pix, 1, 7, p1);
    expect_fail("truncated images", p1, labz, LOOM_ERR_FORMAT, "truncated");
    write_idx("trunc_plain", 3, idims, 0, pix, sizeof pix, 0, 20, p1);
    expect_fail("truncated plain images", p1, labz, LOOM_ERR_FORMAT, "truncated");
    write_idx("badlab", 1, ldims, 0, badlab, 5, 1, 0, p2);
    expect_fail("label out of range", imgz, p2, LOOM_ERR_FORMAT, "out of range");
    write_idx("lab4", 1, ldims4, 0, lab, 4, 1, 0, p2);
    expect_fail("count mismatch", imgz, p2, LOOM_ERR_FORMAT, "labels");
    snprintf(p1, sizeof p1, "%s/missing.gz", dir);
    expect_fail("missing file", p1, labz, LOOM_ERR_IO, "cannot open");

    /* a gzip stream cut in half */
    {
        FILE *f = fopen(imgz, "rb");
        unsigned char buf[4096];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        snprintf(p1, sizeof p1, "%s/cut.gz", dir);
        f = fopen(p1, "wb");
        fwrite(buf, 1, n / 2, f);
        fclose(f);
        loom_dataset_t d2;
        int s2 = loom_idx_load(&d2, p1, labz, 10);
        CHECK(s2 == LOOM_ERR_FORMAT, "cut gzip stream: status %d (%s)", s2, loom_last_error());
    }
    /* a directory without Fashion-MNIST gives the install hint */
    st = loom_fashion_mnist_load(&ds, dir, 1);
    CHECK(st == LOOM_ERR_IO && strstr(loom_last_error(), "dataset-fashion-mnist"),
          "missing data set message: %s", loom_last_error());

    const char *names[] = {"img", "img.gz", "lab", "lab.gz", "magic", "labmagic", "trunc",
                           "trunc_plain", "badlab", "lab4", "cut.gz"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(p1, sizeof p1, "%s/%s", dir, names[i]);
        unlink(p1);
    }
    rmdir(dir);
    return t_done();
}
