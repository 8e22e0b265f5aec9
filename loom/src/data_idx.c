/*
 * data_idx.c - the IDX format (LeCun's MNIST files): a big-endian header
 * (magic 0x0000 | type 0x08 (unsigned byte) | number of dimensions, then one
 * u32 per dimension) followed by the data.  Files may be gzip-compressed
 * (zlib reads both).  Anything unexpected is refused with a message naming
 * the file: missing, wrong magic, truncated, image/label counts that differ,
 * a label out of range.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <zlib.h>

#define IDX_MAX_BYTES ((size_t)1 << 31)

static int read_exact(gzFile f, void *buf, size_t n, const char *path, const char *what)
{
    unsigned char *p = buf;
    while (n > 0) {
        unsigned chunk = n > (1u << 30) ? (1u << 30) : (unsigned)n;
        int got = gzread(f, p, chunk);
        if (got < 0) {
            int zerr;
            const char *msg = gzerror(f, &zerr);
            return loom_error(LOOM_ERR_FORMAT, "%s: corrupt gzip stream while reading %s (%s)", path,
                              what, msg ? msg : "unknown");
        }
        if (got == 0)
            return loom_error(LOOM_ERR_FORMAT, "%s: truncated file (ended while reading %s)", path, what);
        p += got;
        n -= (size_t)got;
    }
    return LOOM_OK;
}

static uint32_t be32(const unsigned char *b)
{
    return ((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) | b[3];
}

/* The data part: total bytes, read into a buffer that grows with what the
 * file really holds (doubling from 1 MiB), so that a short file whose header
 * claims up to IDX_MAX_BYTES is refused as truncated without allocating
 * them first. */
static int read_data(gzFile f, size_t total, const char *path, uint8_t **data)
{
    size_t cap = total < ((size_t)1 << 20) ? total : ((size_t)1 << 20), have = 0;
    uint8_t *buf = malloc(cap);
    if (!buf)
        return loom_error(LOOM_ERR_NOMEM, "%s: out of memory for %zu bytes", path, cap);
    for (;;) {
        int st = read_exact(f, buf + have, cap - have, path, "the data");
        if (st != LOOM_OK) {
            free(buf);
            return st;
        }
        have = cap;
        if (have == total)
            break;
        cap = total - cap < cap ? total : 2 * cap;
        uint8_t *grown = realloc(buf, cap);
        if (!grown) {
            free(buf);
            return loom_error(LOOM_ERR_NOMEM, "%s: out of memory for %zu bytes", path, cap);
        }
        buf = grown;
    }
    *data = buf;
    return LOOM_OK;
}

/* Reads an IDX file of unsigned bytes with ndim dimensions. */
static int idx_read(const char *path, int ndim, uint32_t *dims, uint8_t **data)
{
    int st = LOOM_OK;
    unsigned char hdr[4 + 4 * 4];
    size_t total = 1;
    gzFile f = gzopen(path, "rb");
    if (!f)
        return loom_error(LOOM_ERR_IO, "%s: cannot open (%s)", path, errno ? strerror(errno) : "gzopen failed");
    LOOM_CHECK_GOTO(read_exact(f, hdr, 4, path, "the magic number"), st, out_close);
    if (hdr[0] != 0 || hdr[1] != 0 || hdr[2] != 0x08 || hdr[3] != (unsigned char)ndim) {
        st = loom_error(LOOM_ERR_FORMAT,
                        "%s: wrong magic number 0x%02x%02x%02x%02x (expected 0x000008%02x: unsigned "
                        "bytes, %d dimensions)", path, hdr[0], hdr[1], hdr[2], hdr[3], ndim, ndim);
        goto out_close;
    }
    LOOM_CHECK_GOTO(read_exact(f, hdr + 4, 4 * (size_t)ndim, path, "the dimensions"), st, out_close);
    for (int i = 0; i < ndim; i++) {
        dims[i] = be32(hdr + 4 + 4 * i);
        if (dims[i] == 0 || dims[i] > (1u << 24)) {
            st = loom_error(LOOM_ERR_FORMAT, "%s: implausible dimension %d = %u", path, i, dims[i]);
            goto out_close;
        }
        total *= dims[i];
        if (total > IDX_MAX_BYTES) {
            st = loom_error(LOOM_ERR_FORMAT, "%s: data larger than %zu bytes", path, IDX_MAX_BYTES);
            goto out_close;
        }
    }
    LOOM_CHECK_GOTO(read_data(f, total, path, data), st, out_close);
out_close:
    gzclose(f);
    return st;
}

int loom_idx_load(loom_dataset_t *ds, const char *images_path, const char *labels_path, int classes)
{
    int st;
    uint32_t idims[3] = {0}, ldims[1] = {0};
    uint8_t *img = NULL, *lab = NULL;
    int32_t *labels = NULL;
    if (!ds || !images_path || !labels_path || classes < 1 || classes > 256)
        return loom_error(LOOM_ERR_INVALID, "idx: bad arguments");
    memset(ds, 0, sizeof *ds);
    LOOM_CHECK_GOTO(idx_read(images_path, 3, idims, &img), st, fail);
    LOOM_CHECK_GOTO(idx_read(labels_path, 1, ldims, &lab), st, fail);
    if (idims[0] != ldims[0]) {
        st = loom_error(LOOM_ERR_FORMAT, "%s has %u images but %s has %u labels", images_path,
                        idims[0], labels_path, ldims[0]);
        goto fail;
    }
    if (!(labels = malloc(sizeof(int32_t) * ldims[0]))) {
        st = loom_error(LOOM_ERR_NOMEM, "idx: out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i < ldims[0]; i++) {
        if (lab[i] >= classes) {
            st = loom_error(LOOM_ERR_FORMAT, "%s: label %u of sample %u out of range 0..%d",
                            labels_path, lab[i], i, classes - 1);
            goto fail;
        }
        labels[i] = lab[i];
    }
    free(lab);
    ds->count = (int)idims[0];
    ds->channels = 1;
    ds->rows = (int)idims[1];
    ds->cols = (int)idims[2];
    ds->images = img;
    ds->labels = labels;
    ds->classes = classes;
    return LOOM_OK;
fail:
    free(img);
    free(lab);
    free(labels);
    return st;
}

int loom_fashion_mnist_load(loom_dataset_t *ds, const char *dir, int train)
{
    char ip[1024], lp[1024];
    const char *pre = train ? "train" : "t10k";
    if (!dir)
        dir = LOOM_FASHION_MNIST_DIR;
    snprintf(ip, sizeof ip, "%s/%s-images-idx3-ubyte.gz", dir, pre);
    snprintf(lp, sizeof lp, "%s/%s-labels-idx1-ubyte.gz", dir, pre);
    FILE *f = fopen(ip, "rb");
    if (!f)
        return loom_error(LOOM_ERR_IO,
                          "Fashion-MNIST not found: cannot open %s (%s); install Debian's "
                          "dataset-fashion-mnist package or pass --data-dir", ip, strerror(errno));
    fclose(f);
    int st = loom_idx_load(ds, ip, lp, 10);
    if (st == LOOM_OK && (ds->rows != 28 || ds->cols != 28)) {
        int r = ds->rows, c = ds->cols;
        loom_dataset_free(ds);
        return loom_error(LOOM_ERR_FORMAT, "%s: images are %dx%d, Fashion-MNIST's are 28x28", ip, r, c);
    }
    return st;
}

void loom_dataset_free(loom_dataset_t *ds)
{
    if (!ds)
        return;
    free(ds->images);
    free(ds->labels);
    memset(ds, 0, sizeof *ds);
}
