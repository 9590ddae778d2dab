#include <cstdio>

#include "gpu_api.h"

extern __device__ float rdc_bias;
extern __device__ float rdc_scale(float x);

__global__ void scale_all(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    x[i] = rdc_scale(x[i]) + rdc_bias;
}

int main(void) {
  int devices = gpu_devices();
  std::printf("devices: %d\n", devices);
  if (!devices) {
    std::printf("no %s device: kernels not run\nPASS\n", GPU_VENDOR);
    return 0;
  }
  const int n = 100;
  float h[100], *d = nullptr;
  for (int i = 0; i < n; i++)
    h[i] = (float)i;
  int ok = GPU_OK(gpuMalloc((void **)&d, sizeof h)) && GPU_OK(gpuMemcpy(d, h, sizeof h, gpuMemcpyHostToDevice));
  if (ok) {
    scale_all<<<1, 128>>>(d, n);
    ok = GPU_OK(gpuMemcpy(h, d, sizeof h, gpuMemcpyDeviceToHost));
  }
  (void)gpuFree(d);
  for (int i = 0; ok && i < n; i++)
    ok = h[i] == 2.0f * i + 2.0f;
  std::printf("cross_file %s\n%s\n", ok ? "ok" : "FAIL", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
