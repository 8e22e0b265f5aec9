/*
 * weft_cli.h - the command-line conventions every Weft program shares
 * (doc/observability.md, "Command lines"): getopt_long parsing, -h/--help and
 * -V/--version, one size syntax, one error style, exit status 2 for usage
 * errors.
 *
 *   sizes       4096, 64K, 16M, 1G (also KiB, MiB, GiB; powers of two)
 *   ranges      MIN:MAX or MAX (MIN then stays the program's default)
 *   errors      "PROG: error: MESSAGE" then "Try 'PROG --help'." on stderr, exit 2
 *   --version   "PROG (Weft) VERSION", the library loaded, the build options
 *
 * Not thread-safe (getopt's globals): main thread, before other threads.
 */
#ifndef WEFT_CLI_H
#define WEFT_CLI_H

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>

/** Exit status of a usage error. */
#define WEFT_CLI_USAGE 2

/** Print the version block: program, Weft library loaded (weft_version_string)
 * and the header it was built against, build type, compiler, backends. */
void weft_cli_version(FILE *f, const char *prog);

/** "PROG: error: ..." and "Try 'PROG --help'." on stderr; returns WEFT_CLI_USAGE. */
int weft_cli_usage_error(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/**
 * The usage error for getopt_long's '?' or ':' return (call with opterr = 0
 * and an optstring that starts with ':'): names the option as written.
 * Returns WEFT_CLI_USAGE.
 */
int weft_cli_getopt_error(const char *prog, int c, char *const argv[],
                          const struct option *longopts);

/** A byte size (see above). 0, or -1 if malformed or too large for size_t. */
int weft_cli_parse_size(const char *s, size_t *out);
/** MIN:MAX or MAX into *lo, *hi (*lo unchanged for MAX alone); 0 or -1.
 * Checks MIN <= MAX, not the program's own limits. */
int weft_cli_parse_range(const char *s, size_t *lo, size_t *hi);
/** An integer in [lo, hi]; 0 or -1. */
int weft_cli_parse_long(const char *s, long lo, long hi, long *out);
/** A finite number in [lo, hi]; 0 or -1. */
int weft_cli_parse_double(const char *s, double lo, double hi, double *out);

/** The kernel's transparent-huge-page mode: the bracketed word of
 * /sys/kernel/mm/transparent_hugepage/enabled ("always", "madvise",
 * "never") copied into buf, or the constant "unknown" where it cannot be
 * read (no THP in the kernel, another OS). Any thread. */
const char *weft_cli_thp_mode(char *buf, size_t len);

#endif
