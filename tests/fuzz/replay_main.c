/*
 * replay_main.c - runs a fuzz harness over saved inputs without libFuzzer
 * (any compiler): every regular file named on the command line, or found
 * directly inside a directory named there, is passed to
 * LLVMFuzzerTestOneInput once. This is how the normal suite replays the
 * corpora in tests/fuzz/corpus/ (seeds and the inputs of bugs found).
 *
 * Usage: fuzz_replay_NAME PATH...    exit 0: all inputs ran; 1: an input
 * could not be read; a harness failure aborts (a crash, as under libFuzzer).
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int replay_file(const char *path, long *count)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return 1;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (len == cap) {
            size_t ncap = cap ? 2 * cap : 4096;
            uint8_t *nb = realloc(buf, ncap);
            if (nb == NULL) {
                fprintf(stderr, "replay: %s: out of memory\n", path);
                rc = 1;
                goto out;
            }
            buf = nb;
            cap = ncap;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) break;
    }
    if (ferror(f)) {
        fprintf(stderr, "replay: %s: read error\n", path);
        rc = 1;
        goto out;
    }
    /* an exact-size copy, so that ASan sees a read past the input's end */
    uint8_t *exact = malloc(len ? len : 1);
    if (exact == NULL) {
        fprintf(stderr, "replay: %s: out of memory\n", path);
        rc = 1;
        goto out;
    }
    if (len) memcpy(exact, buf, len);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    (*count)++;
out:
    free(buf);
    fclose(f);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_dir(const char *dir, long *count)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            size_t ncap = cap ? 2 * cap : 64;
            char **nn = realloc(names, ncap * sizeof *names);
            if (nn == NULL) goto oom;
            names = nn;
            cap = ncap;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        if ((names[n] = malloc(len)) == NULL) goto oom;
        snprintf(names[n++], len, "%s/%s", dir, e->d_name);
    }
    qsort(names, n, sizeof *names, cmp_str); /* the same order every run */
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) rc |= replay_file(names[i], count);
    }
    goto out;
oom:
    fprintf(stderr, "replay: %s: out of memory\n", dir);
    rc = 1;
out:
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    closedir(d);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: %s PATH...\nRuns the fuzz harness once on each file (directories: each "
               "file inside).\n", argv[0]);
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "--version")) {
        printf("%s (Weft fuzz replay) 1\n", argv[0]);
        return 0;
    }
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "%s: %s\nusage: %s PATH...\n", argv[0],
                argc < 2 ? "no input given" : "unknown option", argv[0]);
        if (argc >= 2) fprintf(stderr, "bad option: %s\n", argv[1]);
        return 2;
    }
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    long count = 0;
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            rc = 1;
        } else if (S_ISDIR(st.st_mode)) {
            rc |= replay_dir(argv[i], &count);
        } else {
            rc |= replay_file(argv[i], &count);
        }
    }
    printf("replay: %ld inputs, %s\n", count, rc ? "some could not be read" : "all ran");
    return rc;
}
