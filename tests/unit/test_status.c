/* Unit tests for status strings, names, datatype tables and the config table. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tuning.h"
#include "weft_internal.h"

START_TEST(strerror_never_null)
{
    for (int s = -300; s <= 300; s++) {
        ck_assert_ptr_nonnull(weft_strerror((weft_status_t)s));
        ck_assert_ptr_nonnull(weft_status_name((weft_status_t)s));
    }
    ck_assert_str_eq(weft_status_name(WEFT_ERR_TIMEOUT), "WEFT_ERR_TIMEOUT");
    ck_assert_str_eq(weft_strerror(WEFT_SUCCESS), "success");
    ck_assert_str_eq(weft_strerror((weft_status_t)-12345), "unknown status");
}
END_TEST

START_TEST(version_matches_header)
{
    ck_assert_uint_eq(weft_version(), WEFT_VERSION_HEX);
    char buf[32];
    snprintf(buf, sizeof buf, "%d.%d.%d", WEFT_VERSION_MAJOR, WEFT_VERSION_MINOR, WEFT_VERSION_PATCH);
    ck_assert_str_eq(weft_version_string(), buf);
}
END_TEST

START_TEST(datatypes_and_ops)
{
    static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 2, 2};
    ck_assert_uint_eq(sizeof sizes / sizeof sizes[0], WEFT_DATATYPE_COUNT);
    for (int d = 0; d < WEFT_DATATYPE_COUNT; d++) {
        ck_assert_uint_eq(weft_datatype_size((weft_datatype_t)d), sizes[d]);
        ck_assert_ptr_nonnull(weft_datatype_name((weft_datatype_t)d));
    }
    ck_assert_uint_eq(weft_datatype_size(WEFT_DATATYPE_COUNT), 0);
    ck_assert_ptr_null(weft_datatype_name((weft_datatype_t)-1));
    ck_assert_int_eq(weft__check_dtype_op(WEFT_FLOAT32, WEFT_BXOR), WEFT_ERR_DATATYPE);
    ck_assert_int_eq(weft__check_dtype_op(WEFT_INT32, WEFT_BXOR), WEFT_SUCCESS);
    ck_assert_int_eq(weft__check_dtype_op(WEFT_UINT16, WEFT_BAND), WEFT_SUCCESS);
    ck_assert_str_eq(weft_datatype_name(WEFT_INT16), "int16");
    ck_assert(weft__dtype_is_int(WEFT_INT16) && !weft__dtype_is_int(WEFT_FLOAT16));
    ck_assert(!weft__dtype_is_int(WEFT_DATATYPE_COUNT));
    ck_assert_int_eq(weft__check_dtype_op(WEFT_INT32, WEFT_OP_COUNT), WEFT_ERR_OP);
    ck_assert_int_eq(weft__check_dtype_op((weft_datatype_t)99, WEFT_SUM), WEFT_ERR_DATATYPE);
}
END_TEST

START_TEST(algo_names_round_trip)
{
    for (int a = 0; a < WEFT_ALGO_COUNT; a++) {
        const char *n = weft_algo_name((weft_algo_t)a);
        ck_assert_ptr_nonnull(n);
        weft_algo_t back;
        ck_assert_int_eq(weft_algo_from_name(n, &back), WEFT_SUCCESS);
        ck_assert_int_eq(back, a);
    }
    weft_algo_t x;
    ck_assert_int_eq(weft_algo_from_name("no_such_algo", &x), WEFT_ERR_ALGORITHM);
    ck_assert_ptr_null(weft_algo_name(WEFT_ALGO_COUNT));
}
END_TEST

START_TEST(config_defaults_and_errors)
{
    unsetenv("WEFT_TIMEOUT");
    unsetenv("WEFT_ALLREDUCE_ALGO");
    ck_assert_int_eq(weft__config_load(), WEFT_SUCCESS);
    ck_assert(weft__cfg.timeout_s == 600.0);
    ck_assert_int_eq(weft__cfg.force_algo[WEFT_COLL_ALLREDUCE], WEFT_ALGO_AUTO);
    setenv("WEFT_ALLREDUCE_ALGO", "ring", 1);
    ck_assert_int_eq(weft__config_load(), WEFT_SUCCESS);
    ck_assert_int_eq(weft__cfg.force_algo[WEFT_COLL_ALLREDUCE], WEFT_ALGO_RING);
    setenv("WEFT_ALLREDUCE_ALGO", "pairwise", 1); /* does not serve allreduce */
    ck_assert_int_eq(weft__config_load(), WEFT_ERR_ALGORITHM);
    unsetenv("WEFT_ALLREDUCE_ALGO");
    setenv("WEFT_TIMEOUT", "soon", 1);
    ck_assert_int_eq(weft__config_load(), WEFT_ERR_INVALID_ARG);
    unsetenv("WEFT_TIMEOUT");
    setenv("WEFT_TRANSPORT", "carrier-pigeon", 1);
    ck_assert_int_eq(weft__config_load(), WEFT_ERR_INVALID_ARG);
    unsetenv("WEFT_TRANSPORT");
    /* every documented variable has a default and a doc string */
    int n = 0;
    for (const weft__config_var_t *v = weft__config_vars(); v->name; v++, n++) {
        ck_assert(strncmp(v->name, "WEFT_", 5) == 0);
        ck_assert_ptr_nonnull(v->default_value);
        ck_assert(strlen(v->doc) > 0);
    }
    ck_assert_int_ge(n, 10);
}
END_TEST

START_TEST(tuning_file_parse)
{
    char path[] = "/tmp/weft_tuning_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "weft-tuning 1\n# comment\nalpha 1e-6\nbeta 1e-10\ngamma 2e-10\n"
               "rule allreduce 2 0 1024 tree\nrule allreduce * 1025 inf ring\n");
    fclose(f);
    ck_assert_int_eq(weft__tuning_parse(path), WEFT_SUCCESS);
    f = fopen(path, "w");
    fprintf(f, "weft-tuning 1\nrule allreduce 2 0 1024 pairwise\n");
    fclose(f);
    ck_assert_int_eq(weft__tuning_parse(path), WEFT_ERR_TUNING_FILE);
    f = fopen(path, "w");
    fprintf(f, "rule allreduce 2 0 1024 ring\n"); /* no header */
    fclose(f);
    ck_assert_int_eq(weft__tuning_parse(path), WEFT_ERR_TUNING_FILE);
    f = fopen(path, "w");
    fprintf(f, "weft-tuning 1\nrule allreduce 2 100 10 ring\n"); /* empty range */
    fclose(f);
    ck_assert_int_eq(weft__tuning_parse(path), WEFT_ERR_TUNING_FILE);
    /* A line at the 511-character limit is read whole. */
    f = fopen(path, "w");
    fprintf(f, "weft-tuning 1\nrule allreduce * 0 inf ring #%*s\n", 511 - 29, "");
    fclose(f);
    ck_assert_int_eq(weft__tuning_parse(path), WEFT_SUCCESS);
    /* A longer line rejects the file: read in 511-character pieces, the rest
     * of this comment would otherwise be taken for a rule. */
    f = fopen(path, "w");
    fprintf(f, "weft-tuning 1\n#%*srule allreduce * 0 inf mpi\n", 510, "");
    fclose(f);
    ck_assert_int_eq(weft__tuning_parse(path), WEFT_ERR_TUNING_FILE);
    ck_assert_int_eq(weft__tuning_nrules(), 0);
    /* So does a word longer than 127 characters (it was cut in two words). */
    f = fopen(path, "w");
    fprintf(f, "weft-tuning 1\nrule allreduce * 0 %0127d1 ring\n", 0);
    fclose(f);
    ck_assert_int_eq(weft__tuning_parse(path), WEFT_ERR_TUNING_FILE);
    unlink(path);
    ck_assert_int_eq(weft__tuning_parse("/nonexistent/weft.tuning"), WEFT_ERR_TUNING_FILE);
}
END_TEST

START_TEST(cost_model_prefers_latency_then_bandwidth)
{
    weft__cost_t c = {.alpha = 2e-6, .beta = 2e-10, .gamma = 2.5e-10};
    weft_algo_t small = weft__select_model(WEFT_COLL_ALLREDUCE, 8, 8, WEFT_FLOAT32, &c, NULL);
    weft_algo_t large = weft__select_model(WEFT_COLL_ALLREDUCE, 8, 64 << 20, WEFT_FLOAT32, &c, NULL);
    ck_assert_int_eq(small, WEFT_ALGO_RECURSIVE_DOUBLING);
    ck_assert(large == WEFT_ALGO_RING || large == WEFT_ALGO_RABENSEIFNER);
    /* the model never picks the MPI passthrough (no cost function) */
    for (size_t n = 4; n <= (256u << 20); n *= 4)
        ck_assert_int_ne(weft__select_model(WEFT_COLL_ALLREDUCE, 4, n, WEFT_FLOAT32, &c, NULL),
                         WEFT_ALGO_MPI);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("status");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, strerror_never_null);
    tcase_add_test(tc, version_matches_header);
    tcase_add_test(tc, datatypes_and_ops);
    tcase_add_test(tc, algo_names_round_trip);
    tcase_add_test(tc, config_defaults_and_errors);
    tcase_add_test(tc, tuning_file_parse);
    tcase_add_test(tc, cost_model_prefers_latency_then_bandwidth);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
