/*
 * test_ckpt_state.c - the whole-run checkpoint (loom_ckpt.h) on one rank:
 * a saved state round-trips bit for bit (parameters, batch-norm statistics,
 * Adam's two moments, step count, RNG, data position); truncations and
 * flipped bytes of a rank file (every length and byte of the header and the
 * last 8 bytes, about a hundred spread over the rest) are refused, and a refused load
 * leaves the model and optimiser unchanged; every truncation of the
 * manifest and a flipped byte in it are refused; another model, layout or
 * configuration is a mismatch naming what differs.
 */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"
#include "loom_ckpt.h"
#include "loom_par.h"

#include <stdint.h>
#include <string.h>
#include <unistd.h>

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)sz + 1);
    if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *n = (size_t)sz;
    return b;
}

/* A fingerprint of the whole state of m and o (bit patterns). */
static uint64_t state_hash(loom_model_t *m, loom_optim_t *o)
{
    uint64_t h = 1469598103934665603ull;
    const float *parts[4] = {loom_model_params(m), loom_model_buffers(m), loom_optim_moment(o, 0),
                             loom_optim_moment(o, 1)};
    size_t n[4] = {loom_model_param_count(m), loom_model_buffer_count(m), loom_optim_size(o),
                   loom_optim_size(o)};
    for (int k = 0; k < 4; k++) {
        for (size_t i = 0; parts[k] && i < n[k]; i++) {
            uint32_t u;
            memcpy(&u, parts[k] + i, 4);
            h = (h ^ u) * 1099511628211ull;
        }
    }
    return h ^ (uint64_t)loom_optim_steps(o);
}

int main(int argc, char **argv)
{
    weft_init_params_t ip = WEFT_INIT_PARAMS_INITIALIZER;
    ip.argc = &argc;
    ip.argv = &argv;
    if (weft_init(&ip) != WEFT_SUCCESS) {
        fprintf(stderr, "weft_init failed\n");
        return 1;
    }
    weft_comm_t comm = NULL;
    if (weft_comm_create(MPI_COMM_WORLD, NULL, &comm) != WEFT_SUCCESS) {
        fprintf(stderr, "weft_comm_create failed\n");
        return 1;
    }
    char dir[] = "/tmp/loom_ckpt_state.XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "mkdtemp failed\n");
        return 1;
    }
    loom_model_t *m = NULL, *m2 = NULL;
    loom_optim_t *o = NULL, *o2 = NULL;
    loom_optim_desc_t od = LOOM_OPTIM_DESC_INIT;
    od.kind = LOOM_ADAM;
    int st = loom_resnet_create(&m, "resnet8", (loom_shape_t){4, 1, 12, 12}, 10, 3);
    st |= loom_resnet_create(&m2, "resnet8", (loom_shape_t){4, 1, 12, 12}, 10, 4);
    st |= loom_optim_create(&o, &od, loom_model_param_count(m));
    st |= loom_optim_create(&o2, &od, loom_model_param_count(m));
    CHECK(st == 0, "setup: %s", loom_last_error());
    if (st != 0)
        return t_done();
    /* a state worth saving: a few Adam steps with gradients, BN statistics moved */
    for (int s = 0; s < 3; s++) {
        float *g = loom_model_grads(m), *b = loom_model_buffers(m);
        for (size_t i = 0; i < loom_model_param_count(m); i++)
            g[i] = (float)((i * 7 + (size_t)s) % 13) * 0.01f - 0.06f;
        for (size_t i = 0; i < loom_model_buffer_count(m); i++)
            b[i] += 0.5f + (float)i * 1e-3f;
        loom_optim_step(o, loom_model_params(m), g, NULL);
    }
    loom_rng_t rng;
    loom_rng_seed(&rng, 99);
    const char *cfg = "model=resnet8 lr=0.1 batch=4";
    loom_ckpt_desc_t d = {.dir = dir, .keep = 2, .async = 1, .comm = comm, .rank = 0, .size = 1,
                          .model = "resnet8", .config = cfg, .dp = 1, .sh = 1, .sw = 1};
    loom_ckpt_t *ck = NULL;
    CHECK(loom_ckpt_create(&ck, &d) == 0, "create: %s", loom_last_error());
    loom_ckpt_pos_t pos = {.step = 3, .epoch = 1, .batch = 2, .rng = rng};
    CHECK(loom_ckpt_save(ck, m, o, &pos) == 0, "save: %s", loom_last_error());
    CHECK(loom_ckpt_wait(ck) == 0, "wait: %s", loom_last_error());
    loom_ckpt_destroy(ck);
    uint64_t saved = state_hash(m, o);

    /* round trip into a different model and optimiser */
    loom_ckpt_pos_t got = {0};
    CHECK(state_hash(m2, o2) != saved, "the second model starts different");
    CHECK(loom_ckpt_resume(dir, &d, m2, o2, &got, stderr) == 0, "resume: %s", loom_last_error());
    CHECK(state_hash(m2, o2) == saved, "resumed state differs from the saved one");
    CHECK(got.step == 3 && got.epoch == 1 && got.batch == 2 && got.optim_steps == 3 &&
              got.rng.s[0] == rng.s[0] && got.rng.s[1] == rng.s[1],
          "position: step %ld epoch %d batch %d", got.step, got.epoch, got.batch);

    char path[256];
    snprintf(path, sizeof path, "%s/step-0000000003/rank-00000.bin", dir);
    size_t n = 0, mn = 0;
    unsigned char *buf = slurp(path, &n);
    snprintf(path, sizeof path, "%s/step-0000000003/MANIFEST", dir);
    char *man = (char *)slurp(path, &mn);
    CHECK(buf && man && n > 1000 && mn > 100, "files read back");
    if (!buf || !man)
        return t_done();
    /* scramble m2 so that an accepted load would show */
    float *p2 = loom_model_params(m2);
    for (size_t i = 0; i < loom_model_param_count(m2); i++)
        p2[i] = 0.25f;
    uint64_t before = state_hash(m2, o2);
    int accepted = 0, changed = 0;
    for (size_t len = 0; len < n; len += (len < 96 || len + 8 >= n ? 1 : n / 97)) {
        accepted += loom_ckpt_load_rank_buffer(buf, len, 3, 0, m2, o2) == 0;
        changed += state_hash(m2, o2) != before;
    }
    CHECK(accepted == 0 && changed == 0, "truncated rank files: %d accepted, %d changed the model",
          accepted, changed);
    accepted = changed = 0;
    for (size_t i = 0; i < n; i += (i < 96 || i + 8 >= n ? 1 : n / 97)) {
        buf[i] ^= 0x10;
        accepted += loom_ckpt_load_rank_buffer(buf, n, 3, 0, m2, o2) == 0;
        changed += state_hash(m2, o2) != before;
        buf[i] ^= 0x10;
    }
    CHECK(accepted == 0 && changed == 0, "flipped bytes: %d accepted, %d changed the model",
          accepted, changed);
    CHECK(loom_ckpt_load_rank_buffer(buf, n, 4, 0, m2, o2) < 0, "another step refused");
    CHECK(loom_ckpt_load_rank_buffer(buf, n, 3, 1, m2, o2) < 0, "another rank refused");
    CHECK(state_hash(m2, o2) == before, "refusals left the model alone");
    CHECK(loom_ckpt_load_rank_buffer(buf, n, 3, 0, m2, o2) == 0 && state_hash(m2, o2) == saved,
          "the intact buffer loads");

    /* the manifest */
    loom_ckpt_pos_t pp;
    CHECK(loom_ckpt_parse_manifest(man, mn, &d, 0, &pp) == 0, "manifest parses: %s",
          loom_last_error());
    accepted = 0;
    for (size_t len = 0; len < mn; len++)
        accepted += loom_ckpt_parse_manifest(man, len, &d, 0, &pp) == 0;
    CHECK(accepted == 0, "truncated manifests: %d accepted", accepted);
    accepted = 0;
    for (size_t i = 0; i < mn; i++) {
        char c = man[i];
        man[i] = (char)(c == '1' ? '2' : '1');
        accepted += loom_ckpt_parse_manifest(man, mn, &d, 0, &pp) == 0;
        man[i] = c;
    }
    CHECK(accepted == 0, "edited manifests: %d accepted", accepted);
    loom_ckpt_desc_t other = d;
    other.model = "resnet14";
    CHECK(loom_ckpt_parse_manifest(man, mn, &other, 0, &pp) == LOOM_ERR_MISMATCH &&
              strstr(loom_last_error(), "resnet14"), "other model: %s", loom_last_error());
    other = d;
    other.dp = 2;
    other.size = 2;
    CHECK(loom_ckpt_parse_manifest(man, mn, &other, 0, &pp) == LOOM_ERR_MISMATCH &&
              strstr(loom_last_error(), "written by 1 ranks"), "other layout: %s", loom_last_error());
    other = d;
    other.config = "model=resnet8 lr=0.2 batch=4";
    CHECK(loom_ckpt_parse_manifest(man, mn, &other, 0, &pp) == LOOM_ERR_MISMATCH &&
              strstr(loom_last_error(), "lr=0.1, this run lr=0.2"), "other config: %s",
          loom_last_error());
    CHECK(loom_ckpt_parse_manifest(man, mn, &d, 1, &pp) < 0, "no line for rank 1");

    free(buf);
    free(man);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "note: could not remove %s\n", dir);
    loom_optim_destroy(o);
    loom_optim_destroy(o2);
    loom_model_destroy(m);
    loom_model_destroy(m2);
    weft_comm_destroy(comm);
    weft_finalize();
    return t_done();
}
