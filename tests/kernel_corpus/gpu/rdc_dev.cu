/* A device function and a device global defined in one file, used by a kernel in another:
   relocatable device code (nvcc -rdc=true, clang -fgpu-rdc). */
#include "gpu_api.h"

__device__ float rdc_bias = 1.0f;

__device__ float rdc_scale(float x) { return 2.0f * x + rdc_bias; }
