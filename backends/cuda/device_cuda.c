/*
 * device_cuda.c - the CUDA device layer (backends/device.h) over cudaStream_t.
 *
 * Flags live in pinned, host-mapped memory. With stream memory operations
 * the GPU sets a flag with cuStreamWriteValue32 and waits for one with
 * cuStreamWaitValue32 (the host reads/writes the same word). Without them
 * (driver too old, or WEFT_CUDA_MEMOPS=0) the event fallback is used: record
 * = cudaEventRecord (tested with cudaEventQuery), wait = a one-thread kernel
 * polling the mapped word. The two driver entry points come from
 * dlopen("libcuda.so.1") at run time, so libweft loads on machines without
 * a GPU driver (and then reports no CUDA device).
 *
 * Flags and pinned staging buffers come from pools that are only grown: their
 * free operations make no CUDA call, because they run inside host functions
 * enqueued on streams (cudaLaunchHostFunc), where CUDA calls are forbidden.
 * The pools are released at process exit.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_kernels.h"
#include "config.h"
#include "device.h"
#include "log.h"
#include "reduce.h"
#include "sys.h"

/* ---- check-and-propagate (log once, where found) ------------------------------ */
static weft_status_t cuda_error(cudaError_t e, const char *call, const char *file, int line)
{
    weft__log_write(WEFT__LOG_ERROR, file, line, "%s failed: %s (%s)", call,
                    cudaGetErrorString(e), cudaGetErrorName(e));
    return WEFT_ERR_CUDA;
}

#define WEFT__CUDA_CHECK(call)                                                   \
    do {                                                                        \
        cudaError_t weft__e = (call);                                           \
        if (WEFT__UNLIKELY(weft__e != cudaSuccess))                             \
            return cuda_error(weft__e, #call, __FILE__, __LINE__);              \
    } while (0)

#define WEFT__CUDA_CHECK_GOTO(call, st, label)                                   \
    do {                                                                        \
        cudaError_t weft__e = (call);                                           \
        if (WEFT__UNLIKELY(weft__e != cudaSuccess)) {                           \
            (st) = cuda_error(weft__e, #call, __FILE__, __LINE__);              \
            goto label;                                                         \
        }                                                                       \
    } while (0)

/* ---- driver entry points (dlopen) ------------------------------------------------ */
typedef CUresult (*pfn_value32_t)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
typedef CUresult (*pfn_errstr_t)(CUresult, const char **);

static struct {
    void *lib;
    pfn_value32_t write32, wait32;
    pfn_errstr_t errstr;
    int memops; /* use stream memory operations (else the event fallback) */
} D;

#define WEFT__CU_CHECK(call)                                                     \
    do {                                                                        \
        CUresult weft__r = (call);                                              \
        if (WEFT__UNLIKELY(weft__r != CUDA_SUCCESS)) {                          \
            const char *weft__m = "unknown";                                    \
            if (D.errstr) D.errstr(weft__r, &weft__m);                          \
            WEFT__ERROR("%s failed: %s (%d)", #call, weft__m, (int)weft__r);    \
            return WEFT_ERR_CUDA;                                               \
        }                                                                       \
    } while (0)

/* ---- flags: a pool of host-mapped words, each with an event ----------------------- */
typedef struct cuda_flag {
    weft__flag_t f;
    CUdeviceptr dptr;           /* device address of the word */
    cudaEvent_t ev;             /* event fallback */
    struct cuda_flag *next_free;
} cuda_flag_t;

#define FLAG_STRIDE 64 /* one cache line per word */
#define FLAGS_PER_SLAB 256

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static cuda_flag_t *flag_free_list; /* under pool_lock */

static const weft__device_t cuda_device;

/* Caller thread: grow the flag pool by one slab. pool_lock held. */
static weft_status_t flag_slab(void)
{
    weft_status_t st = WEFT_SUCCESS;
    char *host = NULL;
    void *dev = NULL;
    cuda_flag_t *fl = calloc(FLAGS_PER_SLAB, sizeof *fl);
    if (fl == NULL) return WEFT_ERR_NO_MEMORY;
    WEFT__CUDA_CHECK_GOTO(cudaHostAlloc((void **)&host, FLAGS_PER_SLAB * FLAG_STRIDE,
                                        cudaHostAllocMapped | cudaHostAllocPortable),
                          st, fail_free);
    memset(host, 0, FLAGS_PER_SLAB * FLAG_STRIDE);
    WEFT__CUDA_CHECK_GOTO(cudaHostGetDevicePointer(&dev, host, 0), st, fail_host);
    for (int i = 0; i < FLAGS_PER_SLAB; i++) {
        fl[i].f.word = (_Atomic uint32_t *)(host + (size_t)i * FLAG_STRIDE);
        fl[i].f.impl = &fl[i];
        fl[i].f.dev = &cuda_device;
        fl[i].dptr = (CUdeviceptr)((char *)dev + (size_t)i * FLAG_STRIDE);
        WEFT__CUDA_CHECK_GOTO(cudaEventCreateWithFlags(&fl[i].ev, cudaEventDisableTiming), st,
                              fail_events);
        fl[i].next_free = flag_free_list;
        flag_free_list = &fl[i];
    }
    return WEFT_SUCCESS; /* slabs live until exit */

fail_events:
    /* Events made so far stay in the free list, which still owns them. */
    return st;
fail_host:
    cudaFreeHost(host);
fail_free:
    free(fl);
    return st;
}

static weft_status_t c_flag_alloc(const weft__device_t *dev, weft__flag_t **out)
{
    WEFT__UNUSED(dev);
    weft_status_t st = WEFT_SUCCESS;
    pthread_mutex_lock(&pool_lock);
    if (flag_free_list == NULL) st = flag_slab();
    cuda_flag_t *f = flag_free_list;
    if (st == WEFT_SUCCESS && f == NULL) st = WEFT_ERR_NO_MEMORY;
    if (st == WEFT_SUCCESS) flag_free_list = f->next_free;
    pthread_mutex_unlock(&pool_lock);
    if (st != WEFT_SUCCESS) return st;
    atomic_store_explicit(f->f.word, 0, memory_order_relaxed);
    *out = &f->f;
    return WEFT_SUCCESS;
}

/* No CUDA call: may run in a stream host function. */
static void c_flag_free(weft__flag_t *flag)
{
    cuda_flag_t *f = flag->impl;
    pthread_mutex_lock(&pool_lock);
    f->next_free = flag_free_list;
    flag_free_list = f;
    pthread_mutex_unlock(&pool_lock);
}

static weft_status_t c_record(struct weft_stream *s, weft__flag_t *flag)
{
    cuda_flag_t *f = flag->impl;
    if (D.memops) {
        WEFT__CU_CHECK(D.write32((CUstream)s->handle, f->dptr, 1, CU_STREAM_WRITE_VALUE_DEFAULT));
    } else {
        WEFT__CUDA_CHECK(cudaEventRecord(f->ev, (cudaStream_t)s->handle));
    }
    return WEFT_SUCCESS;
}

static weft_status_t c_wait(struct weft_stream *s, weft__flag_t *flag)
{
    cuda_flag_t *f = flag->impl;
    /* acquire: set by the host (flag_set) before; nothing to wait for. */
    if (atomic_load_explicit(flag->word, memory_order_acquire) != 0) return WEFT_SUCCESS;
    if (D.memops) {
        WEFT__CU_CHECK(D.wait32((CUstream)s->handle, f->dptr, 1, CU_STREAM_WAIT_VALUE_GEQ));
    } else {
        WEFT__CUDA_CHECK((cudaError_t)weft__cuda_wait_flag_launch((void *)(uintptr_t)f->dptr,
                                                                 (cudaStream_t)s->handle));
    }
    return WEFT_SUCCESS;
}

/* Engine thread: never blocks. */
static int c_flag_test(weft__flag_t *flag)
{
    cuda_flag_t *f = flag->impl;
    /* acquire: the word is written by the GPU (memops) or by the host. */
    if (atomic_load_explicit(flag->word, memory_order_acquire) != 0) return 1;
    if (D.memops) return 0;
    cudaError_t e = cudaEventQuery(f->ev);
    if (e == cudaSuccess) return 1;
    if (e == cudaErrorNotReady) return 0;
    return (int)cuda_error(e, "cudaEventQuery", __FILE__, __LINE__);
}

static void c_flag_set(weft__flag_t *flag)
{
    /* release: the op's status and result are written before. */
    atomic_store_explicit(flag->word, 1, memory_order_release);
}

/* ---- streams ------------------------------------------------------------------------- */
static weft_status_t c_stream_create(struct weft_stream *s)
{
    cudaStream_t cs;
    WEFT__CUDA_CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    s->handle = cs;
    s->impl = s; /* no extra state */
    s->owned = 1;
    return WEFT_SUCCESS;
}

static void c_stream_destroy(struct weft_stream *s)
{
    if (s->owned && s->handle) {
        cudaError_t e = cudaStreamDestroy((cudaStream_t)s->handle);
        if (e != cudaSuccess) cuda_error(e, "cudaStreamDestroy", __FILE__, __LINE__);
    }
    s->handle = NULL;
    s->impl = NULL;
}

static weft_status_t c_stream_synchronize(struct weft_stream *s)
{
    WEFT__CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)s->handle));
    return WEFT_SUCCESS;
}

static weft_status_t c_stream_query(struct weft_stream *s)
{
    cudaError_t e = cudaStreamQuery((cudaStream_t)s->handle);
    if (e == cudaSuccess) return WEFT_SUCCESS;
    if (e == cudaErrorNotReady) return WEFT_INPROGRESS;
    return cuda_error(e, "cudaStreamQuery", __FILE__, __LINE__);
}

typedef struct host_call {
    weft__host_fn_t fn;
    void *arg;
    struct weft_stream *s;
    int always;
} host_call_t;

/* Runs on CUDA's callback thread: no CUDA calls allowed here. */
static void CUDART_CB host_trampoline(void *p)
{
    host_call_t *hc = p;
    if (hc->always || atomic_load_explicit(&hc->s->error, memory_order_relaxed) == 0) {
        weft_status_t st = hc->fn(hc->arg);
        weft__stream_set_error(hc->s, st);
    }
    free(hc);
}

static weft_status_t c_launch_host(struct weft_stream *s, weft__host_fn_t fn, void *arg, int always)
{
    weft_status_t st = WEFT_SUCCESS;
    host_call_t *hc = malloc(sizeof *hc);
    if (hc == NULL) return WEFT_ERR_NO_MEMORY;
    *hc = (host_call_t){fn, arg, s, always};
    WEFT__CUDA_CHECK_GOTO(cudaLaunchHostFunc((cudaStream_t)s->handle, host_trampoline, hc), st,
                          fail);
    return WEFT_SUCCESS;
fail:
    free(hc);
    return st;
}

/* ---- data ------------------------------------------------------------------------------ */
static weft_status_t c_copy(struct weft_stream *s, void *dst, const void *src, size_t bytes)
{
    if (bytes == 0) return WEFT_SUCCESS;
    WEFT__CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)s->handle));
    return WEFT_SUCCESS;
}

static weft_status_t c_reduce(struct weft_stream *s, void *inout, const void *in, size_t count,
                              weft_datatype_t dtype, weft_op_t op)
{
    WEFT__CHECK(weft__check_dtype_op(dtype, op));
    WEFT__CUDA_CHECK((cudaError_t)weft__cuda_reduce_launch(inout, in, count, (int)dtype, (int)op,
                                                          (cudaStream_t)s->handle));
    return WEFT_SUCCESS;
}

static weft_status_t c_pack(struct weft_stream *s, void *dst, const void *src,
                            const weft__strided_t *r)
{
    if (r == NULL || (r->count > 1 && r->stride < r->blocklen)) return WEFT_ERR_INVALID_ARG;
    WEFT__CUDA_CHECK((cudaError_t)weft__cuda_pack_launch(dst, src, r->count, r->blocklen, r->stride,
                                                        0, (cudaStream_t)s->handle));
    return WEFT_SUCCESS;
}

static weft_status_t c_unpack(struct weft_stream *s, void *dst, const void *src,
                              const weft__strided_t *r)
{
    if (r == NULL || (r->count > 1 && r->stride < r->blocklen)) return WEFT_ERR_INVALID_ARG;
    WEFT__CUDA_CHECK((cudaError_t)weft__cuda_pack_launch(dst, src, r->count, r->blocklen, r->stride,
                                                        1, (cudaStream_t)s->handle));
    return WEFT_SUCCESS;
}

/* ---- pinned staging pool: power-of-two classes from 4 KiB ------------------------------ */
#define STAGE_MIN_SHIFT 12
#define STAGE_CLASSES 40
#define STAGE_HDR 64

typedef struct stage_hdr {
    struct stage_hdr *next_free;
    int cls;
} stage_hdr_t;

static stage_hdr_t *stage_free[STAGE_CLASSES]; /* under pool_lock */

static weft_status_t c_host_alloc(void **p, size_t bytes)
{
    int cls = 0;
    while (cls < STAGE_CLASSES - 1 && ((size_t)1 << (cls + STAGE_MIN_SHIFT)) < bytes) cls++;
    size_t cap = (size_t)1 << (cls + STAGE_MIN_SHIFT);
    if (cap < bytes) return WEFT_ERR_COUNT_OVERFLOW;
    pthread_mutex_lock(&pool_lock);
    stage_hdr_t *h = stage_free[cls];
    if (h) stage_free[cls] = h->next_free;
    pthread_mutex_unlock(&pool_lock);
    if (h == NULL) {
        void *mem = NULL;
        WEFT__CUDA_CHECK(cudaHostAlloc(&mem, cap + STAGE_HDR, cudaHostAllocPortable));
        h = mem;
        h->cls = cls;
    }
    *p = (char *)h + STAGE_HDR;
    return WEFT_SUCCESS;
}

/* No CUDA call: may run in a stream host function. */
static void c_host_free(void *p)
{
    if (p == NULL) return;
    stage_hdr_t *h = (stage_hdr_t *)((char *)p - STAGE_HDR);
    pthread_mutex_lock(&pool_lock);
    h->next_free = stage_free[h->cls];
    stage_free[h->cls] = h;
    pthread_mutex_unlock(&pool_lock);
}

static weft__memkind_t c_ptr_kind(const void *p)
{
    struct cudaPointerAttributes a;
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* not CUDA memory: clear the error */
        return WEFT__MEM_HOST;
    }
    switch (a.type) {
    case cudaMemoryTypeDevice: return WEFT__MEM_DEVICE;
    case cudaMemoryTypeManaged: return WEFT__MEM_MANAGED;
    case cudaMemoryTypeHost: return WEFT__MEM_PINNED;
    default: return WEFT__MEM_HOST;
    }
}

static weft_status_t c_stream_wrap(struct weft_stream *s, void *cuda_stream);

static const weft__device_t cuda_device = {
    .name = "cuda",
    .stream_create = c_stream_create,
    .stream_wrap = c_stream_wrap,
    .stream_destroy = c_stream_destroy,
    .stream_synchronize = c_stream_synchronize,
    .stream_query = c_stream_query,
    .launch_host = c_launch_host,
    .flag_alloc = c_flag_alloc,
    .flag_free = c_flag_free,
    .record = c_record,
    .wait = c_wait,
    .flag_test = c_flag_test,
    .flag_set = c_flag_set,
    .copy = c_copy,
    .reduce = c_reduce,
    .pack = c_pack,
    .unpack = c_unpack,
    .host_alloc = c_host_alloc,
    .host_free = c_host_free,
    .ptr_kind = c_ptr_kind,
};

/* ---- loading (once, from lib/device.c under pthread_once) ------------------------------- */
const weft__device_t *weft__cuda_device_load(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        (void)cudaGetLastError();
        WEFT__INFO("CUDA: no usable device (%s); device streams unavailable",
                   e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return NULL;
    }
    D.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (D.lib != NULL) {
        D.write32 = (pfn_value32_t)dlsym(D.lib, "cuStreamWriteValue32_v2");
        if (D.write32 == NULL) D.write32 = (pfn_value32_t)dlsym(D.lib, "cuStreamWriteValue32");
        D.wait32 = (pfn_value32_t)dlsym(D.lib, "cuStreamWaitValue32_v2");
        if (D.wait32 == NULL) D.wait32 = (pfn_value32_t)dlsym(D.lib, "cuStreamWaitValue32");
        D.errstr = (pfn_errstr_t)dlsym(D.lib, "cuGetErrorString");
    }
    D.memops = weft__cfg.cuda_memops && D.write32 != NULL && D.wait32 != NULL;
    WEFT__INFO("CUDA: %d device(s); stream flags via %s", n,
               D.memops ? "cuStreamWriteValue32/cuStreamWaitValue32" : "events (fallback)");
    return &cuda_device;
}

/* Any thread: wrap a caller's cudaStream_t (not owned). */
static weft_status_t c_stream_wrap(struct weft_stream *s, void *cuda_stream)
{
    s->handle = cuda_stream;
    s->impl = s;
    s->owned = 0;
    return WEFT_SUCCESS;
}
