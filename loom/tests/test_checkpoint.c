/*
 * test_checkpoint.c - weights round trip (parameters and batch-norm running
 * statistics, bit for bit) and refusal of corrupt or mismatched files:
 * flipped byte (checksum), truncated, bad magic, other version, other model,
 * other class count, missing file.  A refused load leaves the model as it was.
 */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"
#include "loom.h"

#include <string.h>
#include <unistd.h>

static char path[64], bad[80];

static long file_size(const char *p)
{
    FILE *f = fopen(p, "rb");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

static void copy_modified(long flip_at, long keep, const char *patch, long patch_at)
{
    FILE *f = fopen(path, "rb");
    long n = file_size(path);
    unsigned char *b = malloc((size_t)n);
    if (fread(b, 1, (size_t)n, f) != (size_t)n)
        abort();
    fclose(f);
    if (flip_at >= 0)
        b[flip_at] ^= 0x40;
    if (patch)
        memcpy(b + patch_at, patch, strlen(patch));
    f = fopen(bad, "wb");
    fwrite(b, 1, (size_t)(keep >= 0 ? keep : n), f);
    fclose(f);
    free(b);
}

static loom_model_t *make(const char *name, int classes, uint64_t seed)
{
    loom_model_t *m = NULL;
    if (loom_resnet_create(&m, name, (loom_shape_t){2, 1, 8, 8}, classes, seed) != 0) {
        fprintf(stderr, "build %s: %s\n", name, loom_last_error());
        exit(1);
    }
    return m;
}

int main(void)
{
    int fd;
    snprintf(path, sizeof path, "/tmp/loom_ckpt_XXXXXX");
    if ((fd = mkstemp(path)) < 0)
        return 1;
    close(fd);
    snprintf(bad, sizeof bad, "%s.bad", path);
    loom_set_threads(1);

    loom_model_t *a = make("resnet8", 10, 1), *b = make("resnet8", 10, 2);
    /* make the running statistics non-trivial */
    for (int i = 0; i < 2 * 64; i++)
        loom_model_input(a)[i] = (float)(i % 5);
    loom_model_forward(a, 2, 1);
    CHECK(loom_checkpoint_save(a, path) == 0, "save: %s", loom_last_error());
    CHECK(memcmp(loom_model_params(a), loom_model_params(b), 4 * loom_model_param_count(a)) != 0,
          "two seeds gave the same weights");
    CHECK(loom_checkpoint_load(b, path) == 0, "load: %s", loom_last_error());
    CHECK(memcmp(loom_model_params(a), loom_model_params(b), 4 * loom_model_param_count(a)) == 0,
          "parameters differ after round trip");
    CHECK(memcmp(loom_model_buffers(a), loom_model_buffers(b), 4 * loom_model_buffer_count(a)) == 0,
          "running statistics differ after round trip");

    loom_model_t *c = make("resnet8", 10, 3);
    float first = loom_model_params(c)[0];
    long n = file_size(path);
    struct {
        const char *what;
        long flip, keep;
        const char *patch;
        long at;
        int want;
        const char *needle;
    } cases[] = {
        {"flipped data byte", n - 100, -1, NULL, 0, LOOM_ERR_FORMAT, "checksum"},
        {"flipped header byte", 70, -1, NULL, 0, LOOM_ERR_FORMAT, "checksum"},
        {"truncated", -1, n - 9, NULL, 0, LOOM_ERR_FORMAT, "truncated"},
        {"header only", -1, 40, NULL, 0, LOOM_ERR_FORMAT, "truncated"},
        {"bad magic", -1, -1, "NOTLOOM!", 0, LOOM_ERR_FORMAT, "magic"},
        {"other version", -1, -1, "\x07", 8, LOOM_ERR_FORMAT, "version"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        copy_modified(cases[i].flip, cases[i].keep, cases[i].patch, cases[i].at);
        int st = loom_checkpoint_load(c, bad);
        CHECK(st == cases[i].want && strstr(loom_last_error(), cases[i].needle),
              "%s: status %d, message '%s'", cases[i].what, st, loom_last_error());
    }
    CHECK(loom_model_params(c)[0] == first, "a refused load changed the model");

    loom_model_t *d = make("resnet14", 10, 1), *e = make("resnet8", 7, 1);
    int st = loom_checkpoint_load(d, path);
    CHECK(st == LOOM_ERR_MISMATCH, "other model accepted: %d %s", st, loom_last_error());
    st = loom_checkpoint_load(e, path);
    CHECK(st == LOOM_ERR_MISMATCH && strstr(loom_last_error(), "fc."),
          "other class count: %d %s", st, loom_last_error());
    st = loom_checkpoint_load(e, "/nonexistent/loom.ckpt");
    CHECK(st == LOOM_ERR_IO, "missing file: %d %s", st, loom_last_error());

    loom_model_destroy(a);
    loom_model_destroy(b);
    loom_model_destroy(c);
    loom_model_destroy(d);
    loom_model_destroy(e);
    unlink(path);
    unlink(bad);
    return t_done();
}
