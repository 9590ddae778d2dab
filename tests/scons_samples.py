"""Sample sources shared by the SCons tool tests: a two-file OpenMP offload program and the
declarations a header-less CUDA source needs (clang cannot use CUDA 13's headers here)."""

MAIN_C = """
#include <stdio.h>
double kern(int n);
int main(void) {
  double s = 0;
#pragma omp target map(tofrom: s)
  s = 1.5;
  printf("main %g kern %g\\n", s, kern(100));
  return 0;
}
"""

KERN_CPP = """
extern "C" double kern(int n) {
  double s = 0;
#pragma omp target teams distribute parallel for reduction(+:s) map(tofrom:s)
  for (int i = 0; i < n; i++) s += i;
  return s;
}
"""

CUDA_DECLS = """
struct dim3 { unsigned x, y, z; };
typedef struct CUstream_st *cudaStream_t;
extern "C" int cudaLaunchKernel(const void *, dim3, dim3, void **, unsigned long, cudaStream_t);
"""

# A CUDA program that says where it ran (the host here: no GPU), for the launcher tests.
SAXPY_CU = """
#include <cstdio>
__global__ void saxpy(float a, float *x) { x[threadIdx.x] *= a; }
int main() {
  float *d;
  if (cudaMalloc(&d, 64) != cudaSuccess) { std::printf("saxpy host\\n"); return 0; }
  saxpy<<<1, 16>>>(2.0f, d);
  std::printf("saxpy gpu\\n");
  return 0;
}
"""


def cuda_scale_main(twice: str) -> str:
    """A CUDA program (nvcc, real headers) whose kernel doubles four floats through a device
    function `twice`, declared or defined by the text `twice`; on the host when there is no GPU.
    Prints `gpu PASS` or `host PASS`."""
    return "\n#include <cstdio>\n" + twice + """
__global__ void scale(float *x) { x[threadIdx.x] = twice(x[threadIdx.x]); }
int main() {
  float h[4] = {1, 2, 3, 4};
  float *d;
  bool gpu = cudaMalloc(&d, sizeof h) == cudaSuccess;
  if (gpu) {
    cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
    scale<<<1, 4>>>(d);
    gpu = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess;
  }
  if (!gpu)
    for (float &v : h) v *= 2;
  std::printf("%s %s\\n", gpu ? "gpu" : "host", h[3] == 8 ? "PASS" : "FAIL");
  return h[3] == 8 ? 0 : 1;
}
"""
