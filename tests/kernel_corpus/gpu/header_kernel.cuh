/* A kernel template in a header, included by two sources; each instantiates it. */
#pragma once
#include "gpu_api.h"

template <typename T> __global__ void header_fill(T *x, T v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    x[i] = v * (T)i;
}

template <typename T> static int run_header_fill(T v) {
  const int n = 300;
  T *d = nullptr, h[300];
  if (!GPU_OK(gpuMalloc((void **)&d, n * sizeof(T))))
    return CHECK_FAILED;
  header_fill<T><<<(n + 127) / 128, 128>>>(d, v, n);
  int ok = GPU_OK(gpuMemcpy(h, d, n * sizeof(T), gpuMemcpyDeviceToHost));
  (void)gpuFree(d);
  for (int i = 0; ok && i < n; i++)
    ok = h[i] == v * (T)i;
  return ok ? CHECK_OK : CHECK_FAILED;
}
