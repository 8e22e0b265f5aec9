/*
 * fuzz_tuning.c - the tuning-file parser (lib/tuning.c weft__tuning_parse,
 * format in doc/tuning.md) on arbitrary bytes. The input is written to an
 * in-memory file whose /proc/self/fd path is parsed, as WEFT_TUNING_FILE
 * would name it.
 *
 * Checked beside the sanitizers: a refused file leaves no rule loaded; after
 * an accepted one, the selection (weft__select_explain, which reads the
 * rules) picks an algorithm that exists for the collective, for communicator
 * and message sizes taken from the input, and a rule it names exists.
 */
#include <string.h>

#include "fuzz_common.h"
#include "tuning.h"
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
    static int fd = -1;
    char path[64];
    fuzz_memfile(&fd, data, size, path);

    weft_status_t st = weft__tuning_parse(path);
    int nrules = weft__tuning_nrules();
    FUZZ_ASSERT(st == WEFT_SUCCESS || st == WEFT_ERR_TUNING_FILE, "status %d", (int)st);
    FUZZ_ASSERT(nrules >= 0 && nrules <= 1024, "%d rules", nrules);
    if (st != WEFT_SUCCESS) {
        FUZZ_ASSERT(nrules == 0, "a refused file left %d rules", nrules);
        return 0;
    }

    /* A communicator as the selection sees it (no MPI behind it). */
    weft__select_comm_t c = {.cost = {1.5e-6, 2.0e-10, 2.5e-10}, .forced = WEFT_ALGO_AUTO};
    uint64_t h = 1469598103934665603ull; /* FNV-1a of the input: sizes to try */
    for (size_t i = 0; i < size; i++) h = (h ^ data[i]) * 1099511628211ull;
    for (int k = 0; k < 8; k++) {
        int p = 1 + (int)(h % 64);
        size_t bytes = k < 4 ? (size_t)(h >> 8) % 100000 : (size_t)(h >> (k * 4));
        c.size = p;
        for (int coll = 0; coll < WEFT_COLL_COUNT; coll++) {
            weft__select_explain_t ex;
            weft_algo_t a = weft__select_explain(&c, (weft_coll_t)coll, bytes, WEFT_FLOAT32,
                                                 WEFT_SUM, WEFT__MEM_HOST, &ex);
            FUZZ_ASSERT(weft__algo_impl((weft_coll_t)coll, a) != NULL && a == ex.algo,
                        "%s on %d ranks, %zu bytes: algorithm %d has no implementation",
                        weft__coll_name((weft_coll_t)coll), p, bytes, (int)a);
            FUZZ_ASSERT(ex.source != WEFT__SELECT_RULE ||
                            (ex.rule >= 0 && ex.rule < nrules && ex.rule_line > 0),
                        "%s: rule %d of %d (line %d)", weft__coll_name((weft_coll_t)coll),
                        ex.rule, nrules, ex.rule_line);
        }
        h = h * 6364136223846793005ull + 1442695040888963407ull;
    }
    return 0;
}
