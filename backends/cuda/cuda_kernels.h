/*
 * cuda_kernels.h - launchers of backends/cuda/kernels.cu, callable from C.
 * Each enqueues one kernel on `stream` and returns the launch's cudaError_t
 * (as int); nothing here synchronises. Thread: any.
 */
#ifndef WEFT_CUDA_KERNELS_H
#define WEFT_CUDA_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** inout[i] = inout[i] OP in[i]; dtype/op are weft_datatype_t/weft_op_t values. */
int weft__cuda_reduce_launch(void *inout, const void *in, size_t count, int dtype, int op,
                             cudaStream_t stream);
/** Pack (unpack = 0) or unpack (1) count blocks of blocklen bytes, stride apart. */
int weft__cuda_pack_launch(void *dst, const void *src, size_t count, size_t blocklen,
                           size_t stride, int unpack, cudaStream_t stream);
/** Event fallback of "stream waits for flag": a one-thread kernel polling the
 * host-mapped word at flag_dev until it is non-zero. */
int weft__cuda_wait_flag_launch(void *flag_dev, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_CUDA_KERNELS_H */
