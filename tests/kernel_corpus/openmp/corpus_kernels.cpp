#include <cmath>
#include <cstdio>
#include <omp.h>

#include "corpus.h"
#include "header_kernel.h"

/* Every element initialised: clang 19 and 22 refuse a declare-target array whose initialiser
   leaves trailing elements zero ("offloading entry for declare target variable ... is
   incorrect: the address is invalid"), so tables are written out whole, as generated tables are. */
#define R4(x) x, x, x, x
#define R4096(x) R4(R4(R4(R4(R4(R4(x))))))

#pragma omp declare target
float zeros[4096];
float init_table[4096] = {R4096(0.25f)};
const float weights[4] = {0.5f, 1.5f, 2.5f, 3.5f};
#pragma omp end declare target

/* A team-local array: the device compiler places it in the team's shared memory, as its
   threads all use it. */
int check_team_shared(void) {
  int out = -1;
#pragma omp target teams num_teams(1) map(tofrom: out)
  {
    int buf[256];
#pragma omp parallel for
    for (int i = 0; i < 256; i++)
      buf[i] = i;
    int s = 0;
    for (int i = 0; i < 256; i++)
      s += buf[255 - i] * (i % 2 ? 1 : 2);
    out = s;
  }
  int want = 0;
  for (int i = 0; i < 256; i++)
    want += (255 - i) * (i % 2 ? 1 : 2);
  return out == want ? 0 : 1;
}

/* Dynamic shared memory, as LLVM's OpenMP extension gives it (ompx_dyn_cgroup_mem); on the
   host there is none and the region uses an array of its own. */
int check_dynamic_shared(void) {
  int out = -1;
#pragma omp target map(tofrom: out) ompx_dyn_cgroup_mem(256 * sizeof(int))
  {
    int local[256];
    int *p = (int *)llvm_omp_target_dynamic_shared_alloc();
    if (!p)
      p = local;
    for (int i = 0; i < 256; i++)
      p[i] = 3 * i;
    int s = 0;
    for (int i = 0; i < 256; i++)
      s += p[i];
    out = s;
  }
  return out == 3 * 255 * 256 / 2 ? 0 : 1;
}

int check_globals(void) {
  float zsum = -1, tsum = -1;
#pragma omp target map(from: zsum, tsum)
  {
    zsum = 0;
    tsum = 0;
    for (int i = 0; i < 4096; i++) {
      zsum += zeros[i];
      tsum += init_table[i];
    }
    for (int i = 0; i < 4096; i++)
      zeros[i] = (float)(i % 7) * weights[i % 4];
  }
#pragma omp target update from(zeros)
  float want = 0;
  for (int i = 0; i < 4096; i++)
    want += (float)(i % 7) * weights[i % 4];
  float got = 0;
  for (int i = 0; i < 4096; i++)
    got += zeros[i];
  return zsum == 0.0f && tsum == 1024.0f && got == want ? 0 : 1;
}

template <typename T> T sum_scaled(int n, T scale) {
  T s = 0;
#pragma omp target teams distribute parallel for reduction(+: s) map(tofrom: s)
  for (int i = 0; i < n; i++)
    s += (T)i * scale;
  return s;
}

int check_templates(void) {
  float f = sum_scaled<float>(100, 0.5f);
  double d = sum_scaled<double>(100, 0.25);
  return f == 2475.0f && d == 1237.5 ? 0 : 1;
}

/* printf in a target region. On AMD GPUs LLVM's OpenMP printf goes through the GPU C library
   (libcgpu-amdgpu.a), which the LLVM packages here lack: the AMD device code skips the call
   unless CORPUS_GPU_LIBC says the library is linked. */
int check_printf(void) {
  int ran = 0;
#pragma omp target map(tofrom: ran)
  {
#if !defined(__AMDGCN__) || defined(CORPUS_GPU_LIBC)
    printf("device printf: %d %s\n", 42, "ok");
#endif
    ran = 1;
  }
  return ran ? 0 : 1;
}

int check_math(void) {
  double s = 0;
#pragma omp target teams distribute parallel for reduction(+: s) map(tofrom: s)
  for (int i = 0; i < 64; i++)
    s += expf(0.01f * i) + sqrt((double)i) + sin(0.1 * i);
  double want = 0;
  for (int i = 0; i < 64; i++)
    want += expf(0.01f * i) + sqrt((double)i) + sin(0.1 * i);
  return std::fabs(s - want) < 1e-3 ? 0 : 1;
}

int check_atomics(void) {
  int count = 0;
  float sum = 0;
#pragma omp target teams distribute parallel for map(tofrom: count, sum)
  for (int i = 0; i < 1000; i++) {
#pragma omp atomic update
    count += 1;
#pragma omp atomic update
    sum += 0.5f;
  }
  return count == 1000 && sum == 500.0f ? 0 : 1;
}

int check_cross_file(void) {
  float s = 0;
#pragma omp target teams distribute parallel for reduction(+: s) map(tofrom: s)
  for (int i = 0; i < 10; i++)
    s += cross_scale((float)i);
  return s == 2.0f * 45 + 10 ? 0 : 1;
}

int check_header_kernel_here(void) {
  return header_kernel(10, 3) == 135 ? 0 : 1;
}
