/*
 * weft_cuda.h - CUDA interop: use a cudaStream_t as a Weft stream, so that a
 * communicator bound to it orders its collectives with the kernels on that
 * stream (device buffers go through NCCL or through pinned host memory, see
 * doc/streams.md). weft.h does not need cuda_runtime.h; this header does.
 */
#ifndef WEFT_CUDA_H
#define WEFT_CUDA_H

#include <cuda_runtime_api.h>

#include "weft.h"
#include "weft_stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * 1 if this libweft was built with CUDA and a GPU and driver are usable here,
 * 0 otherwise. Thread: any.
 */
WEFT_EXPORT int weft_cuda_available(void);
/**
 * Wrap the caller's cudaStream_t (it stays the caller's: weft_stream_destroy
 * frees only the wrapper). WEFT_ERR_UNSUPPORTED without CUDA. Thread: any.
 */
WEFT_EXPORT weft_status_t weft_stream_wrap_cuda(cudaStream_t cuda_stream, weft_stream_t *stream);
/** Create a new non-blocking CUDA stream owned by Weft. Thread: any. */
WEFT_EXPORT weft_status_t weft_stream_create_cuda(weft_stream_t *stream);
/** The cudaStream_t behind a CUDA stream (WEFT_ERR_INVALID_ARG for a host stream). */
WEFT_EXPORT weft_status_t weft_stream_get_cuda(weft_stream_t stream, cudaStream_t *cuda_stream);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_CUDA_H */
