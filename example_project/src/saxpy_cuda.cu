// CUDA SAXPY: runs the kernel when a GPU is present, otherwise computes on the host and says so.
#include <cstdio>
#include <vector>

__global__ void saxpy(int n, float a, const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

int main() {
  const int n = 1 << 16;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) { x[i] = float(i % 1000); y[i] = 2.0f; }
  int devices = 0;
  bool on_gpu = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  if (on_gpu) {
    float *dx, *dy;
    cudaMalloc(&dx, n * sizeof(float));
    cudaMalloc(&dy, n * sizeof(float));
    cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    saxpy<<<(n + 255) / 256, 256>>>(n, 0.5f, dx, dy);
    on_gpu = cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess;
    cudaFree(dx);
    cudaFree(dy);
  }
  if (!on_gpu)
    for (int i = 0; i < n; ++i) y[i] = 0.5f * x[i] + y[i];
  int bad = 0;
  for (int i = 0; i < n; ++i)
    if (y[i] != 0.5f * float(i % 1000) + 2.0f) ++bad;
  std::printf("saxpy_cuda: %d elements on the %s, %d wrong\n%s\n", n, on_gpu ? "GPU" : "host (no CUDA device)", bad,
              bad ? "FAIL" : "PASS");
  return bad ? 1 : 0;
}
