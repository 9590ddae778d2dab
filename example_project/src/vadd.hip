// HIP vector add: runs the kernel when an AMD GPU is present, otherwise on the host and says so.
#include <hip/hip_runtime.h>
#include <cstdio>
#include <vector>

__global__ void vadd(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

int main() {
  const int n = 1 << 14;
  std::vector<float> a(n), b(n), c(n);
  for (int i = 0; i < n; ++i) { a[i] = float(i); b[i] = float(2 * i); }
  int devices = 0;
  bool on_gpu = hipGetDeviceCount(&devices) == hipSuccess && devices > 0;
  if (on_gpu) {
    float *da = nullptr, *db = nullptr, *dc = nullptr;
    on_gpu = hipMalloc(&da, n * sizeof(float)) == hipSuccess && hipMalloc(&db, n * sizeof(float)) == hipSuccess &&
             hipMalloc(&dc, n * sizeof(float)) == hipSuccess &&
             hipMemcpy(da, a.data(), n * sizeof(float), hipMemcpyHostToDevice) == hipSuccess &&
             hipMemcpy(db, b.data(), n * sizeof(float), hipMemcpyHostToDevice) == hipSuccess;
    if (on_gpu) {
      hipLaunchKernelGGL(vadd, dim3((n + 255) / 256), dim3(256), 0, 0, da, db, dc, n);
      on_gpu = hipMemcpy(c.data(), dc, n * sizeof(float), hipMemcpyDeviceToHost) == hipSuccess;
    }
    (void)hipFree(da);
    (void)hipFree(db);
    (void)hipFree(dc);
  }
  if (!on_gpu)
    for (int i = 0; i < n; ++i) c[i] = a[i] + b[i];
  int bad = 0;
  for (int i = 0; i < n; ++i)
    if (c[i] != float(3 * i)) ++bad;
  std::printf("vadd_hip: %d elements on the %s, %d wrong\n%s\n", n, on_gpu ? "GPU" : "host (no HIP device)", bad,
              bad ? "FAIL" : "PASS");
  return bad ? 1 : 0;
}
