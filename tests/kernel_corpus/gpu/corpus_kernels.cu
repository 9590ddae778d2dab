/* The CUDA / HIP kernel corpus: what real kernels use, one check per feature. A check runs its
   kernels and compares with the host's own computation. */
#include <cmath>

#include "corpus.h"
#include "gpu_api.h"
#include "header_kernel.cuh"

#define R4(x) x, x, x, x
#define R4096(x) R4(R4(R4(R4(R4(R4(x))))))

__constant__ float coeffs[16];                 /* set with gpuMemcpyToSymbol */
__device__ float zeros[4096];                  /* 16 KiB, zero-initialised */
__device__ float init_table[4096] = {R4096(0.25f)};  /* 16 KiB, initialised */
__device__ int counter;

/* Static shared memory: a block reduction. */
__global__ void block_sum(const float *x, float *out, int n) {
  __shared__ float s[256];
  int i = threadIdx.x;
  s[i] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int stride = 128; stride > 0; stride >>= 1) {
    if (i < stride)
      s[i] += s[i + stride];
    __syncthreads();
  }
  if (i == 0)
    *out = s[0];
}

/* Dynamic shared memory: the block reverses its slice through it. */
__global__ void reverse(float *x, int n) {
  extern __shared__ float buf[];
  int i = threadIdx.x;
  if (i < n)
    buf[i] = x[i];
  __syncthreads();
  if (i < n)
    x[i] = buf[n - 1 - i];
}

__global__ void apply_coeffs(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    x[i] = coeffs[i % 16] * x[i];
}

__global__ void touch_globals(float *sums) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    float z = 0, t = 0;
    for (int i = 0; i < 4096; i++) {
      z += zeros[i];
      t += init_table[i];
    }
    sums[0] = z;
    sums[1] = t;
  }
  __syncthreads(); /* thread 0 reads every element above before any thread writes one */
  for (int i = threadIdx.x; i < 4096; i += blockDim.x)
    zeros[i] = (float)(i % 7);
}

template <typename T> __global__ void axpy(T a, const T *x, T *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = a * x[i] + y[i];
}

__global__ void say_hello(int v) {
  if (threadIdx.x == 0)
    printf("device printf: %d %s\n", v, "ok");
}

__global__ void math_kernel(double *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = expf(0.01f * i) + sqrt((double)i) + sin(0.1 * i);
}

__global__ void count_up(float *sum, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    atomicAdd(&counter, 1);
    atomicAdd(sum, 0.5f);
  }
}

int check_static_shared(void) {
  float h[256], *dx = nullptr, *dout = nullptr, got = -1, want = 0;
  for (int i = 0; i < 256; i++)
    want += h[i] = (float)(i % 10);
  int ok = GPU_OK(gpuMalloc((void **)&dx, sizeof h)) && GPU_OK(gpuMalloc((void **)&dout, sizeof(float))) &&
           GPU_OK(gpuMemcpy(dx, h, sizeof h, gpuMemcpyHostToDevice));
  if (ok) {
    block_sum<<<1, 256>>>(dx, dout, 256);
    ok = GPU_OK(gpuMemcpy(&got, dout, sizeof got, gpuMemcpyDeviceToHost));
  }
  (void)gpuFree(dx);
  (void)gpuFree(dout);
  return ok && got == want ? CHECK_OK : CHECK_FAILED;
}

int check_dynamic_shared(void) {
  const int n = 200;
  float h[200], *d = nullptr;
  for (int i = 0; i < n; i++)
    h[i] = (float)i;
  int ok = GPU_OK(gpuMalloc((void **)&d, sizeof h)) && GPU_OK(gpuMemcpy(d, h, sizeof h, gpuMemcpyHostToDevice));
  if (ok) {
    reverse<<<1, 256, n * sizeof(float)>>>(d, n);
    ok = GPU_OK(gpuMemcpy(h, d, sizeof h, gpuMemcpyDeviceToHost));
  }
  (void)gpuFree(d);
  for (int i = 0; ok && i < n; i++)
    ok = h[i] == (float)(n - 1 - i);
  return ok ? CHECK_OK : CHECK_FAILED;
}

int check_constant(void) {
  float c[16], h[64], *d = nullptr;
  for (int i = 0; i < 16; i++)
    c[i] = 0.5f * (float)i;
  for (int i = 0; i < 64; i++)
    h[i] = 2.0f;
  int ok = GPU_OK(gpuMemcpyToSymbol(coeffs, c, sizeof c)) && GPU_OK(gpuMalloc((void **)&d, sizeof h)) &&
           GPU_OK(gpuMemcpy(d, h, sizeof h, gpuMemcpyHostToDevice));
  if (ok) {
    apply_coeffs<<<1, 64>>>(d, 64);
    ok = GPU_OK(gpuMemcpy(h, d, sizeof h, gpuMemcpyDeviceToHost));
  }
  (void)gpuFree(d);
  for (int i = 0; ok && i < 64; i++)
    ok = h[i] == 2.0f * c[i % 16];
  return ok ? CHECK_OK : CHECK_FAILED;
}

int check_globals(void) {
  float sums[2] = {-1, -1}, *d = nullptr, back[4096];
  int ok = GPU_OK(gpuMalloc((void **)&d, sizeof sums));
  if (ok) {
    touch_globals<<<1, 128>>>(d);
    ok = GPU_OK(gpuMemcpy(sums, d, sizeof sums, gpuMemcpyDeviceToHost)) &&
         GPU_OK(gpuMemcpyFromSymbol(back, zeros, sizeof back));
  }
  (void)gpuFree(d);
  for (int i = 0; ok && i < 4096; i++)
    ok = back[i] == (float)(i % 7);
  return ok && sums[0] == 0.0f && sums[1] == 1024.0f ? CHECK_OK : CHECK_FAILED;
}

template <typename T> static int run_axpy(T a) {
  const int n = 500;
  T x[500], y[500], *dx = nullptr, *dy = nullptr;
  for (int i = 0; i < n; i++) {
    x[i] = (T)i;
    y[i] = (T)1;
  }
  int ok = GPU_OK(gpuMalloc((void **)&dx, sizeof x)) && GPU_OK(gpuMalloc((void **)&dy, sizeof y)) &&
           GPU_OK(gpuMemcpy(dx, x, sizeof x, gpuMemcpyHostToDevice)) &&
           GPU_OK(gpuMemcpy(dy, y, sizeof y, gpuMemcpyHostToDevice));
  if (ok) {
    axpy<T><<<(n + 127) / 128, 128>>>(a, dx, dy, n);
    ok = GPU_OK(gpuMemcpy(y, dy, sizeof y, gpuMemcpyDeviceToHost));
  }
  (void)gpuFree(dx);
  (void)gpuFree(dy);
  for (int i = 0; ok && i < n; i++)
    ok = y[i] == a * (T)i + (T)1;
  return ok ? CHECK_OK : CHECK_FAILED;
}

int check_templates(void) {
  return run_axpy<float>(2.0f) == CHECK_OK && run_axpy<double>(0.5) == CHECK_OK ? CHECK_OK : CHECK_FAILED;
}

int check_printf(void) {
  say_hello<<<1, 32>>>(42);
  return GPU_OK(gpuDeviceSynchronize()) && GPU_OK(gpuGetLastError()) ? CHECK_OK : CHECK_FAILED;
}

int check_math(void) {
  const int n = 64;
  double h[64], *d = nullptr;
  int ok = GPU_OK(gpuMalloc((void **)&d, sizeof h));
  if (ok) {
    math_kernel<<<1, 64>>>(d, n);
    ok = GPU_OK(gpuMemcpy(h, d, sizeof h, gpuMemcpyDeviceToHost));
  }
  (void)gpuFree(d);
  for (int i = 0; ok && i < n; i++)
    ok = std::fabs(h[i] - (expf(0.01f * i) + sqrt((double)i) + sin(0.1 * i))) < 1e-5;
  return ok ? CHECK_OK : CHECK_FAILED;
}

int check_atomics(void) {
  int zero = 0, count = -1;
  float *d = nullptr, sum = -1;
  int ok = GPU_OK(gpuMemcpyToSymbol(counter, &zero, sizeof zero)) && GPU_OK(gpuMalloc((void **)&d, sizeof(float))) &&
           GPU_OK(gpuMemcpy(d, &zero, sizeof(float), gpuMemcpyHostToDevice));
  if (ok) {
    count_up<<<8, 125>>>(d, 1000);
    ok = GPU_OK(gpuMemcpy(&sum, d, sizeof sum, gpuMemcpyDeviceToHost)) &&
         GPU_OK(gpuMemcpyFromSymbol(&count, counter, sizeof count));
  }
  (void)gpuFree(d);
  return ok && count == 1000 && sum == 500.0f ? CHECK_OK : CHECK_FAILED;
}

int check_header_kernel_here(void) {
  return run_header_fill<float>(1.5f);
}
