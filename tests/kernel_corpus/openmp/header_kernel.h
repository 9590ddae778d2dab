/* A target region in an inline function of a header, included by two sources: each source's
   device image carries it, and the program must agree with both. */
#pragma once

static inline int header_kernel(int n, int scale) {
  int s = 0;
#pragma omp target teams distribute parallel for reduction(+: s) map(tofrom: s)
  for (int i = 0; i < n; i++)
    s += i * scale;
  return s;
}
