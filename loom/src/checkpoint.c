/*
 * checkpoint.c - weights save/load.
 *
 * Format (little-endian, version 1):
 *   offset 0   char[8]  magic "LOOMCKPT"
 *          8   u32      version (1)
 *         12   u32      header_bytes (= 64 + 56 * ntensors)
 *         16   char[32] model name (NUL padded)
 *         48   u32      ntensors (parameters, then buffers)
 *         52   u32      reserved (0)
 *         56   u64      total_floats
 *         64   ntensors x { char name[48]; u64 count; }
 *   header_bytes        float32 data[total_floats], tensors in table order
 *   end - 4    u32      CRC-32 (zlib) of every byte before it
 *
 * Loading checks, in order: size, magic, version, checksum, then that the
 * model name, tensor names and counts match the model being loaded into.
 * The model is changed only when everything matched.
 */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <zlib.h>

#define MAGIC "LOOMCKPT"
#define FIXED 64
#define ENTRY 56

int loom__model_buffer_info(const loom_model_t *m, int i, const char **name, size_t *offset,
                            size_t *count);
int loom__model_num_buffers(const loom_model_t *m);


/* Tensor i of the model: name, pointer, count. */
static int tensor_at(loom_model_t *m, int i, const char **name, float **data, size_t *count)
{
    int np = loom_model_num_params(m);
    if (i < np) {
        loom_param_t *p = loom_model_param(m, i);
        *name = p->name;
        *data = p->data;
        *count = p->count;
        return 0;
    }
    size_t off;
    if (loom__model_buffer_info(m, i - np, name, &off, count) < 0)
        return -1;
    *data = loom_model_buffers(m) + off;
    return 0;
}

static size_t header_size(int nt) { return FIXED + (size_t)ENTRY * nt; }

int loom_checkpoint_save(loom_model_t *m, const char *path)
{
    int st = LOOM_OK;
    int nt = loom_model_num_params(m) + loom__model_num_buffers(m);
    size_t total = loom_model_param_count(m) + loom_model_buffer_count(m);
    size_t hb = header_size(nt);
    size_t bytes = hb + 4 * total + 4;
    unsigned char *buf = calloc(1, bytes);
    FILE *f = NULL;
    if (!buf)
        return loom_error(LOOM_ERR_NOMEM, "checkpoint: out of memory");
    memcpy(buf, MAGIC, 8);
    loom__put32(buf + 8, LOOM_CKPT_VERSION);
    loom__put32(buf + 12, (uint32_t)hb);
    memcpy(buf + 16, loom_model_name(m), strnlen(loom_model_name(m), 31));
    loom__put32(buf + 48, (uint32_t)nt);
    loom__put64(buf + 56, total);
    unsigned char *dp = buf + hb;
    for (int i = 0; i < nt; i++) {
        const char *name = "";
        float *data = NULL;
        size_t count = 0;
        tensor_at(m, i, &name, &data, &count);
        memcpy(buf + FIXED + (size_t)ENTRY * i, name, strnlen(name, 47));
        loom__put64(buf + FIXED + (size_t)ENTRY * i + 48, count);
        memcpy(dp, data, 4 * count); /* little-endian host assumed (x86-64, aarch64) */
        dp += 4 * count;
    }
    loom__put32(dp, (uint32_t)crc32(0L, buf, (uInt)(bytes - 4)));
    if (!(f = fopen(path, "wb"))) {
        st = loom_error(LOOM_ERR_IO, "checkpoint: cannot create %s (%s)", path, strerror(errno));
        goto out;
    }
    if (fwrite(buf, 1, bytes, f) != bytes) {
        st = loom_error(LOOM_ERR_IO, "checkpoint: short write to %s", path);
        goto out;
    }
out:
    if (f && fclose(f) != 0 && st == LOOM_OK)
        st = loom_error(LOOM_ERR_IO, "checkpoint: cannot close %s (%s)", path, strerror(errno));
    free(buf);
    return st;
}

int loom_checkpoint_load(loom_model_t *m, const char *path)
{
    int st = LOOM_OK;
    unsigned char *buf = NULL;
    long size;
    FILE *f = fopen(path, "rb");
    if (!f)
        return loom_error(LOOM_ERR_IO, "checkpoint: cannot open %s (%s)", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        st = loom_error(LOOM_ERR_IO, "checkpoint: cannot size %s", path);
        goto out;
    }
    if (size < FIXED + 4) {
        st = loom_error(LOOM_ERR_FORMAT, "checkpoint %s: truncated (%ld bytes)", path, size);
        goto out;
    }
    if (!(buf = malloc((size_t)size))) {
        st = loom_error(LOOM_ERR_NOMEM, "checkpoint: out of memory");
        goto out;
    }
    if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
        st = loom_error(LOOM_ERR_IO, "checkpoint: cannot read %s", path);
        goto out;
    }
    if (memcmp(buf, MAGIC, 8) != 0) {
        st = loom_error(LOOM_ERR_FORMAT, "checkpoint %s: not a Loom checkpoint (bad magic)", path);
        goto out;
    }
    uint32_t ver = loom__get32(buf + 8);
    if (ver != LOOM_CKPT_VERSION) {
        st = loom_error(LOOM_ERR_FORMAT, "checkpoint %s: version %u, this Loom reads version %d",
                        path, ver, LOOM_CKPT_VERSION);
        goto out;
    }
    uint32_t nt = loom__get32(buf + 48);
    uint64_t total = loom__get64(buf + 56);
    size_t hb = loom__get32(buf + 12);
    if (nt > (1u << 20) || hb != header_size((int)nt) || total > ((uint64_t)1 << 34) ||
        (uint64_t)size != hb + 4 * total + 4) {
        st = loom_error(LOOM_ERR_FORMAT, "checkpoint %s: truncated or inconsistent sizes "
                        "(%ld bytes for %u tensors of %llu floats)", path, size, nt,
                        (unsigned long long)total);
        goto out;
    }
    uint32_t want = loom__get32(buf + size - 4), got = (uint32_t)crc32(0L, buf, (uInt)(size - 4));
    if (want != got) {
        st = loom_error(LOOM_ERR_FORMAT, "checkpoint %s: checksum mismatch (stored %08x, computed "
                        "%08x): the file is corrupt", path, want, got);
        goto out;
    }
    char name[33] = {0};
    memcpy(name, buf + 16, 32);
    if (strcmp(name, loom_model_name(m)) != 0) {
        st = loom_error(LOOM_ERR_MISMATCH, "checkpoint %s holds model '%s', not '%s'", path, name,
                        loom_model_name(m));
        goto out;
    }
    int mnt = loom_model_num_params(m) + loom__model_num_buffers(m);
    if ((int)nt != mnt) {
        st = loom_error(LOOM_ERR_MISMATCH, "checkpoint %s has %u tensors, model %s has %d", path, nt,
                        name, mnt);
        goto out;
    }
    for (int i = 0; i < mnt; i++) {
        const char *tn = "";
        float *data = NULL;
        size_t count = 0;
        char fname[49] = {0};
        tensor_at(m, i, &tn, &data, &count);
        memcpy(fname, buf + FIXED + (size_t)ENTRY * i, 48);
        uint64_t fc = loom__get64(buf + FIXED + (size_t)ENTRY * i + 48);
        if (strcmp(fname, tn) != 0 || fc != count) {
            st = loom_error(LOOM_ERR_MISMATCH, "checkpoint %s: tensor %d is %s[%llu], model expects "
                            "%s[%zu] (different input channels or class count?)", path, i, fname,
                            (unsigned long long)fc, tn, count);
            goto out;
        }
    }
    const unsigned char *dp = buf + hb;
    for (int i = 0; i < mnt; i++) {
        const char *tn = "";
        float *data = NULL;
        size_t count = 0;
        tensor_at(m, i, &tn, &data, &count);
        memcpy(data, dp, 4 * count);
        dp += 4 * count;
    }
out:
    free(buf);
    fclose(f);
    return st;
}
