/*
 * fuzz_config.c - the WEFT_* environment reader (lib/config.c
 * weft__config_load) on arbitrary values. Line i of the input (split at
 * '\n') is the value of the i-th variable of the documented table
 * (weft__config_vars: WEFT_ALLREDUCE_ALGO, ..., doc/config.md); a variable
 * with no line is unset. Bytes after a NUL in a line are cut, as the
 * environment would.
 *
 * Checked beside the sanitizers: a refused environment leaves the previous
 * configuration untouched (outputs written only on success); an accepted
 * one holds values inside each variable's documented range.
 */
#include <string.h>

#include "fuzz_common.h"
#include "weft_internal.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_quiet_stderr();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const weft__config_var_t *vars = weft__config_vars();
    size_t at = 0;
    for (int i = 0; vars[i].name != NULL; i++) {
        if (at >= size) {
            unsetenv(vars[i].name);
            continue;
        }
        const uint8_t *nl = memchr(data + at, '\n', size - at);
        size_t len = nl ? (size_t)(nl - (data + at)) : size - at;
        char *v = malloc(len + 1);
        if (v == NULL) abort();
        memcpy(v, data + at, len);
        v[len] = '\0';
        if (setenv(vars[i].name, v, 1) != 0) abort();
        free(v);
        at += len + 1;
    }

    static weft__config_t before;
    memset(&before, 0x5a, sizeof before);
    weft__cfg = before;
    weft_status_t st = weft__config_load();
    if (st != WEFT_SUCCESS) {
        FUZZ_ASSERT(st == WEFT_ERR_INVALID_ARG || st == WEFT_ERR_ALGORITHM, "status %d", (int)st);
        FUZZ_ASSERT(memcmp(&weft__cfg, &before, sizeof before) == 0,
                    "a refused environment changed the configuration");
        return 0;
    }
    const weft__config_t *c = &weft__cfg;
    for (int i = 0; i < WEFT_COLL_COUNT; i++)
        FUZZ_ASSERT(c->force_algo[i] == WEFT_ALGO_AUTO ||
                        weft__algo_impl((weft_coll_t)i, c->force_algo[i]) != NULL,
                    "collective %d forced to algorithm %d", i, (int)c->force_algo[i]);
    FUZZ_ASSERT(memchr(c->tuning_file, '\0', sizeof c->tuning_file) != NULL, "tuning file");
    FUZZ_ASSERT(memchr(c->profile_path, '\0', sizeof c->profile_path) != NULL, "profile path");
    FUZZ_ASSERT(memchr(c->trace_path, '\0', sizeof c->trace_path) != NULL, "trace path");
    FUZZ_ASSERT(c->timeout_s >= 0 && c->timeout_s <= 1e9, "timeout %g", c->timeout_s);
    FUZZ_ASSERT(c->log_level >= 0 && c->log_level <= 4, "log level %d", c->log_level);
    FUZZ_ASSERT((unsigned)c->transport < WEFT_TRANSPORT_COUNT, "transport %d", (int)c->transport);
    FUZZ_ASSERT(c->ring_chunk <= ((size_t)1 << 40), "ring chunk %zu", c->ring_chunk);
    FUZZ_ASSERT(c->spin >= 0 && c->max_sleep_us >= 0 && c->linger_us >= 0 && c->wait_spin_us >= 0,
                "negative backoff setting");
    FUZZ_ASSERT(c->measure == 0 || c->measure == 1, "measure %d", c->measure);
    FUZZ_ASSERT(c->cuda_memops == 0 || c->cuda_memops == 1, "cuda memops %d", c->cuda_memops);
    return 0;
}
