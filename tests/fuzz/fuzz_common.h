/*
 * fuzz_common.h - helpers shared by the fuzz harnesses (tests/fuzz/).
 *
 * Each harness defines LLVMFuzzerTestOneInput (and, if it needs one-time
 * set-up, LLVMFuzzerInitialize). Built with clang's -fsanitize=fuzzer it is a
 * libFuzzer target (scripts/fuzz.sh); linked with replay_main.c it replays
 * files and directories given on the command line (the corpora in
 * tests/fuzz/corpus/, run by `meson test --suite fuzz-replay`).
 * A harness reports a wrong result with FUZZ_ASSERT, which aborts: libFuzzer
 * and the replayer both treat that as a crash.
 */
#ifndef WEFT_FUZZ_COMMON_H
#define WEFT_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_ASSERT(cond, ...)                                                       \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(fuzz_report, "%s:%d: FUZZ_ASSERT(%s) failed: ", __FILE__,      \
                    __LINE__, #cond);                                              \
            fprintf(fuzz_report, __VA_ARGS__);                                     \
            fputc('\n', fuzz_report);                                              \
            abort();                                                               \
        }                                                                          \
    } while (0)

/* Where FUZZ_ASSERT writes: the real stderr, kept by fuzz_quiet_stderr. */
static FILE *fuzz_report __attribute__((unused));

/*
 * The parsers log every refusal to stderr: thousands of lines a second while
 * fuzzing. Point the stdio stream stderr at /dev/null (the messages are still
 * formatted, so their code is exercised); libFuzzer and the sanitizers write
 * to file descriptor 2 themselves and are not affected. Call once.
 */
static inline void fuzz_quiet_stderr(void)
{
    fuzz_report = stderr;
    if (getenv("FUZZ_VERBOSE") != NULL) return;
    FILE *null = fopen("/dev/null", "w");
    if (null == NULL) {
        perror("fuzz: /dev/null");
        exit(1);
    }
    stderr = null;
}

/*
 * An anonymous in-memory file holding data; *path receives a name that
 * fopen/gzopen accept (/proc/self/fd/N). The same file is reused: call with
 * *fd = -1 the first time. Exits on a system-call failure (not the input's).
 */
static inline void fuzz_memfile(int *fd, const uint8_t *data, size_t size, char path[64])
{
    if (*fd < 0) {
        *fd = memfd_create("weft-fuzz", 0);
        if (*fd < 0) {
            perror("fuzz: memfd_create");
            exit(1);
        }
    }
    if (ftruncate(*fd, 0) != 0) {
        perror("fuzz: ftruncate");
        exit(1);
    }
    size_t done = 0;
    while (done < size) {
        ssize_t n = pwrite(*fd, data + done, size - done, (off_t)done);
        if (n <= 0) {
            perror("fuzz: pwrite");
            exit(1);
        }
        done += (size_t)n;
    }
    snprintf(path, 64, "/proc/self/fd/%d", *fd);
}

#endif /* WEFT_FUZZ_COMMON_H */
