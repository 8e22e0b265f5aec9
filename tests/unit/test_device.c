/*
 * test_device.c - Check suite for the host device layer (lib/device_host.c)
 * through the interface of backends/device.h: FIFO order, flags (record, wait,
 * test, set), copy / reduce / pack / unpack in stream order, the sticky error
 * and the skipping of user tasks, inline bookkeeping on an idle stream. No MPI.
 * References are plain loops written here.
 */
#include <check.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device.h"
#include "weft_internal.h"

static struct weft_stream *new_stream(void)
{
    struct weft_stream *s = calloc(1, sizeof *s);
    ck_assert_ptr_nonnull(s);
    s->dev = weft__device_host();
    ck_assert_int_eq(s->dev->stream_create(s), WEFT_SUCCESS);
    return s;
}

static void free_stream(struct weft_stream *s)
{
    s->dev->stream_destroy(s);
    free(s);
}

typedef struct seq {
    int log[64];
    atomic_int n;
} seq_t;
typedef struct step {
    seq_t *q;
    int id;
    int sleep_us;
} step_t;

static weft_status_t log_step(void *arg)
{
    step_t *st = arg;
    if (st->sleep_us) {
        struct timespec ts = {0, st->sleep_us * 1000L};
        nanosleep(&ts, NULL);
    }
    st->q->log[atomic_fetch_add(&st->q->n, 1)] = st->id;
    return WEFT_SUCCESS;
}

START_TEST(test_fifo_order)
{
    struct weft_stream *s = new_stream();
    seq_t q = {{0}, 0};
    step_t st[32];
    for (int i = 0; i < 32; i++) {
        st[i] = (step_t){&q, i, (i % 5 == 0) ? 200 : 0};
        ck_assert_int_eq(s->dev->launch_host(s, log_step, &st[i], 0), WEFT_SUCCESS);
    }
    ck_assert_int_eq(s->dev->stream_synchronize(s), WEFT_SUCCESS);
    ck_assert_int_eq(atomic_load(&q.n), 32);
    for (int i = 0; i < 32; i++) ck_assert_int_eq(q.log[i], i);
    ck_assert_int_eq(s->dev->stream_query(s), WEFT_SUCCESS);
    free_stream(s);
}
END_TEST

START_TEST(test_flags)
{
    const weft__device_t *d = weft__device_host();
    struct weft_stream *a = new_stream(), *b = new_stream();
    weft__flag_t *f, *g;
    ck_assert_int_eq(d->flag_alloc(d, &f), WEFT_SUCCESS);
    ck_assert_int_eq(d->flag_alloc(d, &g), WEFT_SUCCESS);
    ck_assert_int_eq(d->flag_test(f), 0);
    /* b waits for f (set from the host), then records g; a is independent */
    seq_t q = {{0}, 0};
    step_t s1 = {&q, 1, 0}, s2 = {&q, 2, 0};
    ck_assert_int_eq(d->wait(b, f), WEFT_SUCCESS);
    ck_assert_int_eq(d->launch_host(b, log_step, &s2, 0), WEFT_SUCCESS);
    ck_assert_int_eq(d->record(b, g), WEFT_SUCCESS);
    ck_assert_int_eq(d->launch_host(a, log_step, &s1, 0), WEFT_SUCCESS);
    ck_assert_int_eq(d->stream_synchronize(a), WEFT_SUCCESS);
    ck_assert_int_eq(atomic_load(&q.n), 1); /* b is still held by f */
    ck_assert_int_eq(d->stream_query(b), WEFT_INPROGRESS);
    ck_assert_int_eq(d->flag_test(g), 0);
    d->flag_set(f);
    ck_assert_int_eq(d->stream_synchronize(b), WEFT_SUCCESS);
    ck_assert_int_eq(atomic_load(&q.n), 2);
    ck_assert_int_eq(q.log[1], 2);
    ck_assert_int_eq(d->flag_test(g), 1);
    /* record on an idle stream: set at once */
    weft__flag_t *h;
    ck_assert_int_eq(d->flag_alloc(d, &h), WEFT_SUCCESS);
    ck_assert_int_eq(d->record(a, h), WEFT_SUCCESS);
    ck_assert_int_eq(d->flag_test(h), 1);
    d->flag_free(f);
    d->flag_free(g);
    d->flag_free(h);
    free_stream(a);
    free_stream(b);
}
END_TEST

START_TEST(test_data_ops)
{
    struct weft_stream *s = new_stream();
    const weft__device_t *d = s->dev;
    enum { N = 1000 };
    int32_t *x = NULL, *y = NULL, *z = NULL;
    ck_assert_int_eq(d->host_alloc((void **)&x, N * sizeof *x), WEFT_SUCCESS);
    ck_assert_int_eq(d->host_alloc((void **)&y, N * sizeof *y), WEFT_SUCCESS);
    ck_assert_int_eq(d->host_alloc((void **)&z, N * sizeof *z), WEFT_SUCCESS);
    for (int i = 0; i < N; i++) {
        x[i] = i;
        y[i] = 3 * i - 7;
        z[i] = -1;
    }
    /* z = x; z += y; (in stream order) */
    ck_assert_int_eq(d->copy(s, z, x, N * sizeof *x), WEFT_SUCCESS);
    ck_assert_int_eq(d->reduce(s, z, y, N, WEFT_INT32, WEFT_SUM), WEFT_SUCCESS);
    ck_assert_int_eq(d->reduce(s, z, y, N, WEFT_INT32, WEFT_MAX), WEFT_SUCCESS);
    ck_assert_int_eq(d->stream_synchronize(s), WEFT_SUCCESS);
    for (int i = 0; i < N; i++) {
        int32_t sum = i + (3 * i - 7), mx = sum > 3 * i - 7 ? sum : 3 * i - 7;
        ck_assert_int_eq(z[i], mx);
    }
    ck_assert_int_eq(d->reduce(s, z, y, N, WEFT_FLOAT32, WEFT_BAND), WEFT_ERR_DATATYPE);
    /* pack the first pair of every 6 int32 (blocks of 8 bytes, stride 24), unpack back */
    weft__strided_t r = {N / 6, 2 * sizeof(int32_t), 6 * sizeof(int32_t)};
    int32_t packed[2 * (N / 3)];
    ck_assert_int_eq(d->pack(s, packed, x, &r), WEFT_SUCCESS);
    ck_assert_int_eq(d->stream_synchronize(s), WEFT_SUCCESS);
    for (int k = 0; k < N / 6; k++) {
        ck_assert_int_eq(packed[2 * k], x[6 * k]);
        ck_assert_int_eq(packed[2 * k + 1], x[6 * k + 1]);
    }
    memset(z, 0, N * sizeof *z);
    ck_assert_int_eq(d->unpack(s, z, packed, &r), WEFT_SUCCESS);
    ck_assert_int_eq(d->stream_synchronize(s), WEFT_SUCCESS);
    for (int i = 0; i < 6 * (N / 6); i++) ck_assert_int_eq(z[i], (i % 6) < 2 ? x[i] : 0);
    weft__strided_t bad = {2, 8, 4};
    ck_assert_int_eq(d->pack(s, packed, x, &bad), WEFT_ERR_INVALID_ARG);
    d->host_free(x);
    d->host_free(y);
    d->host_free(z);
    free_stream(s);
}
END_TEST

static weft_status_t fail_fn(void *arg)
{
    (void)arg;
    return WEFT_ERR_OP;
}

START_TEST(test_sticky_error)
{
    struct weft_stream *s = new_stream();
    const weft__device_t *d = s->dev;
    seq_t q = {{0}, 0};
    step_t user = {&q, 7, 0}, internal = {&q, 8, 0};
    ck_assert_int_eq(d->launch_host(s, fail_fn, NULL, 0), WEFT_SUCCESS);
    ck_assert_int_eq(d->launch_host(s, log_step, &user, 0), WEFT_SUCCESS);     /* skipped */
    ck_assert_int_eq(d->launch_host(s, log_step, &internal, 1), WEFT_SUCCESS); /* always */
    ck_assert_int_eq(d->stream_synchronize(s), WEFT_SUCCESS);
    ck_assert_int_eq(atomic_load(&s->error), WEFT_ERR_OP);
    ck_assert_int_eq(atomic_load(&q.n), 1);
    ck_assert_int_eq(q.log[0], 8);
    free_stream(s);
}
END_TEST

static Suite *device_suite(void)
{
    Suite *su = suite_create("device_host");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_fifo_order);
    tcase_add_test(tc, test_flags);
    tcase_add_test(tc, test_data_ops);
    tcase_add_test(tc, test_sticky_error);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    SRunner *sr = srunner_create(device_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
