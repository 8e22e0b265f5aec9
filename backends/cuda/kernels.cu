/*
 * kernels.cu - Weft's CUDA kernels: element-wise reduction of two buffers for
 * every (datatype, operation) pair, pack/unpack of strided regions, and the
 * flag-wait kernel of the event fallback (used when stream memory operations
 * are unavailable). Launched through the extern "C" functions of
 * cuda_kernels.h, each returning the launch's cudaError_t; never synchronous.
 *
 * Reductions follow lib/reduce.c: AVG reduces as SUM; float16 and bfloat16
 * reduce in float32 and round once; integer SUM/PROD wrap (two's complement).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda_kernels.h"

namespace {

/* Weft's operation codes (weft_op_t), repeated so that this file needs no C header. */
enum { OP_SUM = 0, OP_PROD, OP_MIN, OP_MAX, OP_AVG, OP_BAND, OP_BOR, OP_BXOR };
/* weft_datatype_t */
enum { DT_INT8 = 0, DT_UINT8, DT_INT32, DT_UINT32, DT_INT64, DT_UINT64, DT_FLOAT16, DT_BFLOAT16,
       DT_FLOAT32, DT_FLOAT64, DT_INT16, DT_UINT16 };

template <int OP, typename T> struct Op;
template <typename T> struct Op<OP_SUM, T> { __device__ static T f(T a, T b) { return a + b; } };
template <typename T> struct Op<OP_AVG, T> { __device__ static T f(T a, T b) { return a + b; } };
template <typename T> struct Op<OP_PROD, T> { __device__ static T f(T a, T b) { return a * b; } };
template <typename T> struct Op<OP_MIN, T> { __device__ static T f(T a, T b) { return b < a ? b : a; } };
template <typename T> struct Op<OP_MAX, T> { __device__ static T f(T a, T b) { return b > a ? b : a; } };
template <typename T> struct Op<OP_BAND, T> { __device__ static T f(T a, T b) { return a & b; } };
template <typename T> struct Op<OP_BOR, T> { __device__ static T f(T a, T b) { return a | b; } };
template <typename T> struct Op<OP_BXOR, T> { __device__ static T f(T a, T b) { return a ^ b; } };

/* Integer SUM/PROD in the unsigned type: wraps without undefined behaviour. */
template <typename T> struct Wide { typedef T U; };
template <> struct Wide<int8_t> { typedef uint8_t U; };
template <> struct Wide<int16_t> { typedef uint32_t U; }; /* 16-bit products overflow int */
template <> struct Wide<uint16_t> { typedef uint32_t U; };
template <> struct Wide<int32_t> { typedef uint32_t U; };
template <> struct Wide<int64_t> { typedef uint64_t U; };

template <int OP, typename T>
__global__ void reduce_int(T *inout, const T *in, size_t n)
{
    typedef typename Wide<T>::U U;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        if (OP == OP_SUM || OP == OP_AVG || OP == OP_PROD)
            inout[i] = (T)Op<OP, U>::f((U)inout[i], (U)in[i]);
        else
            inout[i] = Op<OP, T>::f(inout[i], in[i]);
    }
}

template <int OP, typename T>
__global__ void reduce_float(T *inout, const T *in, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        inout[i] = Op<OP, T>::f(inout[i], in[i]);
}

template <int OP>
__global__ void reduce_half(__half *inout, const __half *in, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        inout[i] = __float2half_rn(Op<OP, float>::f(__half2float(inout[i]), __half2float(in[i])));
}

template <int OP>
__global__ void reduce_bf16(__nv_bfloat16 *inout, const __nv_bfloat16 *in, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        inout[i] = __float2bfloat16_rn(
            Op<OP, float>::f(__bfloat162float(inout[i]), __bfloat162float(in[i])));
}

const int THREADS = 256;

unsigned blocks_for(size_t n)
{
    size_t b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b > 4096 ? 4096 : (b == 0 ? 1 : b));
}

template <int OP>
cudaError_t launch_arith(void *io, const void *in, size_t n, int dt, cudaStream_t s)
{
    unsigned b = blocks_for(n);
    switch (dt) {
    case DT_INT8: reduce_int<OP, int8_t><<<b, THREADS, 0, s>>>((int8_t *)io, (const int8_t *)in, n); break;
    case DT_UINT8: reduce_int<OP, uint8_t><<<b, THREADS, 0, s>>>((uint8_t *)io, (const uint8_t *)in, n); break;
    case DT_INT16: reduce_int<OP, int16_t><<<b, THREADS, 0, s>>>((int16_t *)io, (const int16_t *)in, n); break;
    case DT_UINT16: reduce_int<OP, uint16_t><<<b, THREADS, 0, s>>>((uint16_t *)io, (const uint16_t *)in, n); break;
    case DT_INT32: reduce_int<OP, int32_t><<<b, THREADS, 0, s>>>((int32_t *)io, (const int32_t *)in, n); break;
    case DT_UINT32: reduce_int<OP, uint32_t><<<b, THREADS, 0, s>>>((uint32_t *)io, (const uint32_t *)in, n); break;
    case DT_INT64: reduce_int<OP, int64_t><<<b, THREADS, 0, s>>>((int64_t *)io, (const int64_t *)in, n); break;
    case DT_UINT64: reduce_int<OP, uint64_t><<<b, THREADS, 0, s>>>((uint64_t *)io, (const uint64_t *)in, n); break;
    case DT_FLOAT16: reduce_half<OP><<<b, THREADS, 0, s>>>((__half *)io, (const __half *)in, n); break;
    case DT_BFLOAT16: reduce_bf16<OP><<<b, THREADS, 0, s>>>((__nv_bfloat16 *)io, (const __nv_bfloat16 *)in, n); break;
    case DT_FLOAT32: reduce_float<OP, float><<<b, THREADS, 0, s>>>((float *)io, (const float *)in, n); break;
    case DT_FLOAT64: reduce_float<OP, double><<<b, THREADS, 0, s>>>((double *)io, (const double *)in, n); break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

template <int OP>
cudaError_t launch_bits(void *io, const void *in, size_t n, int dt, cudaStream_t s)
{
    unsigned b = blocks_for(n);
    switch (dt) {
    case DT_INT8: reduce_int<OP, int8_t><<<b, THREADS, 0, s>>>((int8_t *)io, (const int8_t *)in, n); break;
    case DT_UINT8: reduce_int<OP, uint8_t><<<b, THREADS, 0, s>>>((uint8_t *)io, (const uint8_t *)in, n); break;
    case DT_INT32: reduce_int<OP, int32_t><<<b, THREADS, 0, s>>>((int32_t *)io, (const int32_t *)in, n); break;
    case DT_UINT32: reduce_int<OP, uint32_t><<<b, THREADS, 0, s>>>((uint32_t *)io, (const uint32_t *)in, n); break;
    case DT_INT64: reduce_int<OP, int64_t><<<b, THREADS, 0, s>>>((int64_t *)io, (const int64_t *)in, n); break;
    case DT_UINT64: reduce_int<OP, uint64_t><<<b, THREADS, 0, s>>>((uint64_t *)io, (const uint64_t *)in, n); break;
    case DT_INT16: reduce_int<OP, int16_t><<<b, THREADS, 0, s>>>((int16_t *)io, (const int16_t *)in, n); break;
    case DT_UINT16: reduce_int<OP, uint16_t><<<b, THREADS, 0, s>>>((uint16_t *)io, (const uint16_t *)in, n); break;
    default: return cudaErrorInvalidValue; /* bitwise ops on floats */
    }
    return cudaGetLastError();
}

/* One block per group of rows; threads stride over a block's bytes. */
__global__ void pack_kernel(char *dst, const char *src, size_t count, size_t blocklen, size_t stride,
                            int unpack)
{
    for (size_t blk = blockIdx.x; blk < count; blk += gridDim.x) {
        const char *s = unpack ? src + blk * blocklen : src + blk * stride;
        char *d = unpack ? dst + blk * stride : dst + blk * blocklen;
        for (size_t j = threadIdx.x; j < blocklen; j += blockDim.x) d[j] = s[j];
    }
}

__global__ void wait_flag_kernel(volatile uint32_t *flag)
{
    while (*flag == 0) {
#if __CUDA_ARCH__ >= 700
        __nanosleep(1000);
#endif
    }
    __threadfence_system();
}

} // namespace

extern "C" int weft__cuda_reduce_launch(void *inout, const void *in, size_t count, int dtype, int op,
                                        cudaStream_t stream)
{
    if (count == 0) return cudaSuccess;
    switch (op) {
    case OP_SUM: return launch_arith<OP_SUM>(inout, in, count, dtype, stream);
    case OP_AVG: return launch_arith<OP_AVG>(inout, in, count, dtype, stream);
    case OP_PROD: return launch_arith<OP_PROD>(inout, in, count, dtype, stream);
    case OP_MIN: return launch_arith<OP_MIN>(inout, in, count, dtype, stream);
    case OP_MAX: return launch_arith<OP_MAX>(inout, in, count, dtype, stream);
    case OP_BAND: return launch_bits<OP_BAND>(inout, in, count, dtype, stream);
    case OP_BOR: return launch_bits<OP_BOR>(inout, in, count, dtype, stream);
    case OP_BXOR: return launch_bits<OP_BXOR>(inout, in, count, dtype, stream);
    default: return cudaErrorInvalidValue;
    }
}

extern "C" int weft__cuda_pack_launch(void *dst, const void *src, size_t count, size_t blocklen,
                                      size_t stride, int unpack, cudaStream_t stream)
{
    if (count == 0 || blocklen == 0) return cudaSuccess;
    unsigned b = (unsigned)(count > 65535 ? 65535 : count);
    unsigned t = blocklen >= 256 ? 256 : (blocklen >= 32 ? 32 * (unsigned)(blocklen / 32) : 32);
    pack_kernel<<<b, t, 0, stream>>>((char *)dst, (const char *)src, count, blocklen, stride, unpack);
    return cudaGetLastError();
}

extern "C" int weft__cuda_wait_flag_launch(void *flag_dev, cudaStream_t stream)
{
    wait_flag_kernel<<<1, 1, 0, stream>>>((volatile uint32_t *)flag_dev);
    return cudaGetLastError();
}
