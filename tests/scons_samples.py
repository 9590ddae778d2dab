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
