/* SAXPY in C with OpenMP offload; called from zaxpy.cpp to show C and C++ sources in one fat program. */
#include <stdlib.h>

static void saxpy(int n, float a, const float *x, float *y) {
#pragma omp target teams distribute parallel for map(to : x[0 : n]) map(tofrom : y[0 : n])
  for (int i = 0; i < n; ++i)
    y[i] = a * x[i] + y[i];
}

int saxpy_check(int n) {
  float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
  for (int i = 0; i < n; ++i) {
    x[i] = (float)i;
    y[i] = 1.0f;
  }
  saxpy(n, 3.0f, x, y);
  int bad = 0;
  for (int i = 0; i < n; ++i)
    if (y[i] != 3.0f * (float)i + 1.0f) ++bad;
  free(x);
  free(y);
  return bad;
}
