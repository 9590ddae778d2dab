/* The kernel corpus's CUDA and HIP programs are one text: this header maps the few runtime
   calls they make to CUDA's or HIP's, as portable HPC codes do. Built as `.cu` it is CUDA, the
   same text as `.hip` is HIP. */
#pragma once
#include <cstdio>

#if defined(__HIP__) || defined(__HIPCC__)
#include <hip/hip_runtime.h>
#define gpuError_t hipError_t
#define gpuSuccess hipSuccess
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMemcpy hipMemcpy
#define gpuMemcpyHostToDevice hipMemcpyHostToDevice
#define gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpuMemcpyToSymbol hipMemcpyToSymbol
#define gpuMemcpyFromSymbol hipMemcpyFromSymbol
#define gpuDeviceSynchronize hipDeviceSynchronize
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuGetLastError hipGetLastError
#define GPU_VENDOR "HIP"
#else
#include <cuda_runtime.h>
#define gpuError_t cudaError_t
#define gpuSuccess cudaSuccess
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMemcpy cudaMemcpy
#define gpuMemcpyHostToDevice cudaMemcpyHostToDevice
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuMemcpyToSymbol cudaMemcpyToSymbol
#define gpuMemcpyFromSymbol cudaMemcpyFromSymbol
#define gpuDeviceSynchronize cudaDeviceSynchronize
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuGetLastError cudaGetLastError
#define GPU_VENDOR "CUDA"
#endif

/* What a check returns. */
enum { CHECK_OK = 0, CHECK_FAILED = 1 };

/* 0 when the runtime finds no GPU (the program then says so and runs no kernel). */
static inline int gpu_devices(void) {
  int n = 0;
  if (gpuGetDeviceCount(&n) != gpuSuccess)
    n = 0;
  (void)gpuGetLastError();
  return n;
}

/* A kernel launch's error, or a failed copy, fails the check. */
#define GPU_OK(call) ((call) == gpuSuccess)
