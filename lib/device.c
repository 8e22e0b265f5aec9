/*
 * device.c - the registry of device layers: the host one (always), the CUDA
 * one (when built with backends/cuda and a driver is found at run time), and
 * the NCCL collectives (when built with backends/nccl).
 */
#include <pthread.h>

#include "device.h"
#include "weft_internal.h"

static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static const weft__device_t *cuda_dev;

static void cuda_load(void)
{
#ifdef WEFT_HAVE_CUDA
    cuda_dev = weft__cuda_device_load();
#else
    cuda_dev = NULL;
#endif
}

/* Any thread: the driver is probed once (pthread_once). */
const weft__device_t *weft__device_cuda(void)
{
    pthread_once(&cuda_once, cuda_load);
    return cuda_dev;
}

/* Any thread. */
weft__memkind_t weft__device_ptr_kind(const void *p)
{
    const weft__device_t *cuda = weft__device_cuda();
    if (cuda != NULL && p != NULL) return cuda->ptr_kind(p);
    return WEFT__MEM_HOST;
}

#ifdef WEFT_HAVE_NCCL
extern const weft__nccl_backend_t weft__nccl_backend_impl;
#endif

/* Any thread. */
const weft__nccl_backend_t *weft__nccl_backend(void)
{
#ifdef WEFT_HAVE_NCCL
    return weft__device_cuda() != NULL ? &weft__nccl_backend_impl : NULL;
#else
    return NULL;
#endif
}
