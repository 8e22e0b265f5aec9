/*
 * Unit tests for the configuration table (lib/config.h, lib/config.c): walks
 * every row and checks it against its own parser: a doc text, a default the
 * parser accepts, the ends of its range accepted and one step past them
 * refused (the field untouched, the message naming the variable, the value
 * and what is valid), and weft__config_load built from the rows.
 */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "weft_internal.h"

/* The messages of the parser, captured from stderr (fd 2). */
static char captured[8192];
static int saved_fd = -1;
static FILE *capture_file;

static void capture_begin(void)
{
    fflush(stderr);
    capture_file = tmpfile();
    ck_assert_ptr_nonnull(capture_file);
    saved_fd = dup(2);
    ck_assert_int_ge(saved_fd, 0);
    ck_assert_int_ge(dup2(fileno(capture_file), 2), 0);
}

static const char *capture_end(void)
{
    fflush(stderr);
    ck_assert_int_ge(dup2(saved_fd, 2), 0);
    close(saved_fd);
    rewind(capture_file);
    size_t n = fread(captured, 1, sizeof captured - 1, capture_file);
    captured[n] = '\0';
    fclose(capture_file);
    return captured;
}

/* Errors are logged at level 1 (error); the tests run at that level. */
static void log_errors(void) { atomic_store(&weft__log_level, WEFT__LOG_ERROR); }

/* parse(value) must fail with `want`, leave the scratch configuration as it
 * was, and say which variable, which value and what is valid. */
static void expect_refused(const weft__config_var_t *v, const char *value, weft_status_t want,
                           const char *valid_part)
{
    weft__config_t c, before;
    memset(&c, 0xa5, sizeof c);
    before = c;
    capture_begin();
    weft_status_t st = weft__config_parse(v, value, &c);
    const char *msg = capture_end();
    ck_assert_msg(st == want, "%s=\"%s\": status %d, expected %d", v->name, value, (int)st,
                  (int)want);
    ck_assert_msg(memcmp(&c, &before, sizeof c) == 0, "%s=\"%s\" refused but wrote the field",
                  v->name, value);
    ck_assert_msg(strstr(msg, v->name) != NULL, "message without the name: %s", msg);
    if (strlen(value) < 40)
        ck_assert_msg(strstr(msg, value) != NULL, "message without the value: %s", msg);
    if (valid_part != NULL)
        ck_assert_msg(strstr(msg, valid_part) != NULL, "message without '%s': %s", valid_part,
                      msg);
}

static void expect_accepted(const weft__config_var_t *v, const char *value)
{
    weft__config_t c;
    memset(&c, 0, sizeof c);
    ck_assert_msg(weft__config_parse(v, value, &c) == WEFT_SUCCESS, "%s=\"%s\" refused", v->name,
                  value);
}

static size_t field_size_of(weft__config_kind_t k)
{
    switch (k) {
    case WEFT__CFG_INT:
    case WEFT__CFG_BOOL:
    case WEFT__CFG_NAME: return sizeof(int);
    case WEFT__CFG_SIZE: return sizeof(size_t);
    case WEFT__CFG_DOUBLE: return sizeof(double);
    case WEFT__CFG_ALGO: return sizeof(weft_algo_t);
    default: return 0; /* TEXT: the array's own size */
    }
}

START_TEST(every_row_is_complete)
{
    const weft__config_var_t *vars = weft__config_vars();
    unsigned char written[sizeof(weft__config_t)];
    memset(written, 0, sizeof written);
    int n = 0;
    for (const weft__config_var_t *v = vars; v->name; v++, n++) {
        ck_assert_msg(strncmp(v->name, "WEFT_", 5) == 0, "%s", v->name);
        ck_assert_msg(v->doc != NULL && strlen(v->doc) > 10, "%s: no doc text", v->name);
        ck_assert_msg(v->default_value != NULL, "%s: no default", v->name);
        ck_assert_msg((unsigned)v->kind < WEFT__CFG_KIND_COUNT, "%s: kind", v->name);
        ck_assert_ptr_eq(weft__config_find(v->name), v);
        for (const weft__config_var_t *w = vars; w != v; w++)
            ck_assert_msg(strcmp(w->name, v->name) != 0, "%s twice", v->name);
        char range[512];
        weft__config_range(v, range, sizeof range);
        ck_assert_msg(range[0] != '\0' && range[0] != '?', "%s: no range text", v->name);
        if (v->kind == WEFT__CFG_NAME) ck_assert_ptr_nonnull(v->value_name);
        if (v->kind == WEFT__CFG_INT || v->kind == WEFT__CFG_SIZE || v->kind == WEFT__CFG_DOUBLE)
            ck_assert_msg(v->lo <= v->hi, "%s: empty range", v->name);
        if (v->kind == WEFT__CFG_SIZE) ck_assert_msg(v->lo >= 0, "%s: negative size", v->name);
        /* weft_init's rows write a field of the right type, each its own;
         * a row read elsewhere writes none. */
        if (v->read_by != NULL) {
            ck_assert_msg(v->size == 0, "%s is read by %s but writes a field", v->name,
                          v->read_by);
            continue;
        }
        ck_assert_msg(v->size > 0, "%s writes no field", v->name);
        ck_assert_msg(v->offset + v->size <= sizeof(weft__config_t), "%s: field", v->name);
        if (v->kind != WEFT__CFG_TEXT)
            ck_assert_msg(v->size == field_size_of(v->kind), "%s: field of %zu bytes", v->name,
                          v->size);
        for (size_t b = v->offset; b < v->offset + v->size; b++) {
            ck_assert_msg(!written[b], "%s writes a byte another row writes", v->name);
            written[b] = 1;
        }
    }
    ck_assert_int_ge(n, 30);
    ck_assert_ptr_null(weft__config_find("WEFT_NO_SUCH_THING"));
    ck_assert_str_eq(weft__config_closest("WEFT_ALLREDUCE_ALOG"), "WEFT_ALLREDUCE_ALGO");
    ck_assert_ptr_null(weft__config_closest("WEFT_NOTHING_LIKE_IT"));
}
END_TEST

START_TEST(defaults_accepted_and_round_trip)
{
    log_errors();
    for (const weft__config_var_t *v = weft__config_vars(); v->name; v++) {
        weft__config_t a, b;
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        ck_assert_msg(weft__config_parse(v, v->default_value, &a) == WEFT_SUCCESS,
                      "%s: default \"%s\" refused by its own parser", v->name, v->default_value);
        /* What weft-info prints as the value is read back as the same value. */
        char text[1100];
        unsetenv(v->name);
        weft__config_format(v, &a, text, sizeof text);
        if (v->size == 0) {
            ck_assert_str_eq(text, v->default_value);
            continue;
        }
        ck_assert_msg(weft__config_parse(v, text, &b) == WEFT_SUCCESS, "%s: \"%s\" refused",
                      v->name, text);
        ck_assert_msg(memcmp((char *)&a + v->offset, (char *)&b + v->offset, v->size) == 0,
                      "%s: \"%s\" does not read back as its default", v->name, text);
    }
}
END_TEST

START_TEST(out_of_range_refused)
{
    log_errors();
    char lo[64], hi[64], below[64], above[64], bracket[128], range[512];
    for (const weft__config_var_t *v = weft__config_vars(); v->name; v++) {
        switch (v->kind) {
        case WEFT__CFG_INT:
        case WEFT__CFG_BOOL:
        case WEFT__CFG_SIZE:
        case WEFT__CFG_DOUBLE: {
            snprintf(lo, sizeof lo, "%ld", v->lo);
            snprintf(hi, sizeof hi, "%ld", v->hi);
            expect_accepted(v, lo);
            expect_accepted(v, hi);
            if (v->kind == WEFT__CFG_DOUBLE)
                snprintf(bracket, sizeof bracket, "[%g, %g]", (double)v->lo, (double)v->hi);
            else
                snprintf(bracket, sizeof bracket, "[%ld, %ld]", v->lo, v->hi);
            weft_status_t bad = WEFT_ERR_INVALID_ARG;
            if (v->lo > LONG_MIN) {
                snprintf(below, sizeof below, "%ld", v->lo - 1);
                expect_refused(v, below, bad, bracket);
            }
            /* One past the top; LONG_MAX + 1 as text overflows the parser. */
            if (v->hi < LONG_MAX) snprintf(above, sizeof above, "%ld", v->hi + 1);
            else snprintf(above, sizeof above, "%lu", (unsigned long)LONG_MAX + 1);
            expect_refused(v, above, bad, bracket);
            expect_refused(v, "banana", bad, bracket);
            expect_refused(v, "1x", bad, bracket);
            expect_refused(v, "", bad, bracket);
            if (v->kind == WEFT__CFG_DOUBLE) {
                expect_refused(v, "nan", bad, bracket);
                snprintf(above, sizeof above, "%ld.5", v->hi);
                expect_refused(v, above, bad, bracket);
                expect_accepted(v, "0.25");
            } else {
                expect_refused(v, "0.5", bad, bracket);
            }
            break;
        }
        case WEFT__CFG_NAME: {
            weft__config_range(v, range, sizeof range);
            int i = 0;
            for (; v->value_name(i) != NULL; i++) {
                weft__config_t c;
                memset(&c, 0xff, sizeof c);
                ck_assert_int_eq(weft__config_parse(v, v->value_name(i), &c), WEFT_SUCCESS);
                int got;
                memcpy(&got, (char *)&c + v->offset, sizeof got);
                ck_assert_int_eq(got, i);
                ck_assert_msg(strstr(range, v->value_name(i)) != NULL, "%s: %s not in '%s'",
                              v->name, v->value_name(i), range);
            }
            ck_assert_int_ge(i, 2);
            /* The message lists the valid names: the last one, after "or". */
            char last[64];
            snprintf(last, sizeof last, "or %s", v->value_name(i - 1));
            expect_refused(v, "banana", WEFT_ERR_INVALID_ARG, last);
            expect_refused(v, "", WEFT_ERR_INVALID_ARG, v->value_name(0));
            /* Names are case-sensitive: the first name with a letter, in
             * capitals (names may be digits, as WEFT_SHM_COPY's 0 and 1). */
            for (int k = 0; k < i; k++) {
                char upper[64];
                int letters = 0;
                snprintf(upper, sizeof upper, "%s", v->value_name(k));
                for (char *p = upper; *p; p++)
                    if (*p >= 'a' && *p <= 'z') {
                        *p = (char)(*p - 32);
                        letters = 1;
                    }
                if (!letters) continue;
                expect_refused(v, upper, WEFT_ERR_INVALID_ARG, last);
                break;
            }
            break;
        }
        case WEFT__CFG_ALGO: {
            weft__config_range(v, range, sizeof range);
            int served = 0;
            for (int a = WEFT_ALGO_AUTO; a < WEFT_ALGO_COUNT; a++) {
                const char *name = weft_algo_name((weft_algo_t)a);
                ck_assert_ptr_nonnull(name);
                if (a == WEFT_ALGO_AUTO || weft__algo_impl(v->coll, (weft_algo_t)a) != NULL) {
                    weft__config_t c;
                    memset(&c, 0, sizeof c);
                    capture_begin();
                    weft_status_t st = weft__config_parse(v, name, &c);
                    const char *msg = capture_end();
                    if (st != WEFT_SUCCESS) {
                        /* Only an algorithm of a backend not built in is refused, and
                         * the reference says which backend it needs. */
                        char needs[128], listed[128];
                        snprintf(needs, sizeof needs, "%s (builds with ", name);
                        snprintf(listed, sizeof listed, ", %s", name);
                        ck_assert_int_eq(st, WEFT_ERR_ALGORITHM);
                        ck_assert_msg(strstr(range, needs) != NULL, "%s=%s refused: %s", v->name,
                                      name, msg);
                        ck_assert_msg(strstr(msg, "in this build; valid: auto") != NULL &&
                                          strstr(msg, listed) == NULL,
                                      "%s", msg);
                        continue;
                    }
                    weft_algo_t got;
                    memcpy(&got, (char *)&c + v->offset, sizeof got);
                    ck_assert_int_eq(got, a);
                    ck_assert_msg(strstr(range, name) != NULL, "%s: %s not in '%s'", v->name,
                                  name, range);
                    served++;
                } else {
                    /* An algorithm that does not serve this collective. */
                    expect_refused(v, name, WEFT_ERR_ALGORITHM, "valid: auto");
                }
            }
            ck_assert_int_ge(served, 2);
            expect_refused(v, "banana", WEFT_ERR_ALGORITHM, "in this build; valid: auto, ");
            break;
        }
        case WEFT__CFG_TEXT: {
            if (v->size == 0) {
                expect_accepted(v, "anything at all");
                break;
            }
            char *s = malloc(v->size + 1);
            ck_assert_ptr_nonnull(s);
            memset(s, 'x', v->size - 1);
            s[v->size - 1] = '\0';
            expect_accepted(v, s);
            s[v->size - 1] = 'x';
            s[v->size] = '\0';
            snprintf(bracket, sizeof bracket, "longer than %zu characters", v->size - 1);
            expect_refused(v, s, WEFT_ERR_INVALID_ARG, bracket);
            free(s);
            break;
        }
        default: ck_abort_msg("%s: kind %d", v->name, (int)v->kind);
        }
    }
}
END_TEST

/* weft__config_load reads every weft_init row, through the environment. */
START_TEST(load_reads_every_row)
{
    const weft__config_var_t *vars = weft__config_vars();
    for (const weft__config_var_t *v = vars; v->name; v++) unsetenv(v->name);
    ck_assert_int_eq(weft__config_load(), WEFT_SUCCESS);
    weft__config_t defaults = weft__cfg;
    for (const weft__config_var_t *v = vars; v->name; v++) {
        if (v->read_by != NULL) {
            /* Not weft_init's: any text is left to its reader. */
            setenv(v->name, "banana", 1);
            ck_assert_int_eq(weft__config_load(), WEFT_SUCCESS);
            unsetenv(v->name);
            continue;
        }
        weft__config_t want;
        memset(&want, 0, sizeof want);
        ck_assert_int_eq(weft__config_parse(v, v->default_value, &want), WEFT_SUCCESS);
        ck_assert_msg(memcmp((char *)&defaults + v->offset, (char *)&want + v->offset, v->size) == 0,
                      "%s: loaded value is not its default", v->name);
        /* A value that is not the default reaches the field. */
        char other[64] = "";
        if (v->kind == WEFT__CFG_NAME) snprintf(other, sizeof other, "%s", v->value_name(1));
        else if (v->kind == WEFT__CFG_TEXT) snprintf(other, sizeof other, "/tmp/weft-test-x");
        else if (v->kind == WEFT__CFG_ALGO) {
            int n = 0;
            const weft__algo_impl_t *const *list = weft__algo_list(v->coll, &n);
            ck_assert_int_gt(n, 0);
            snprintf(other, sizeof other, "%s", weft_algo_name(list[0]->id));
        } else snprintf(other, sizeof other, "%ld", v->hi);
        memset(&want, 0, sizeof want);
        ck_assert_int_eq(weft__config_parse(v, other, &want), WEFT_SUCCESS);
        setenv(v->name, other, 1);
        capture_begin(); /* notices (forced nccl, debug output) */
        weft_status_t st = weft__config_load();
        capture_end();
        ck_assert_msg(st == WEFT_SUCCESS, "%s=%s refused", v->name, other);
        ck_assert_msg(memcmp((char *)&weft__cfg + v->offset, (char *)&want + v->offset, v->size) == 0,
                      "%s=%s did not reach its field", v->name, other);
        /* A malformed value fails the load and leaves weft__cfg as it was. */
        weft__config_t before = weft__cfg;
        setenv(v->name, v->kind == WEFT__CFG_TEXT ? "" : "banana", 1);
        if (v->kind != WEFT__CFG_TEXT) {
            capture_begin();
            st = weft__config_load();
            const char *msg = capture_end();
            ck_assert_msg(st != WEFT_SUCCESS, "%s=banana accepted", v->name);
            ck_assert_msg(memcmp(&weft__cfg, &before, sizeof before) == 0,
                          "%s=banana refused but weft__cfg changed", v->name);
            ck_assert_msg(strstr(msg, v->name) && strstr(msg, "banana"), "message: %s", msg);
        }
        unsetenv(v->name);
    }
    ck_assert_int_eq(weft__config_load(), WEFT_SUCCESS);
    ck_assert(memcmp(&weft__cfg, &defaults, sizeof defaults) == 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, every_row_is_complete);
    tcase_add_test(tc, defaults_accepted_and_round_trip);
    tcase_add_test(tc, out_of_range_refused);
    tcase_add_test(tc, load_reads_every_row);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
