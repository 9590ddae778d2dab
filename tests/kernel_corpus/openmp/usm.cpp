/* A unit that requires unified shared memory: host allocations used in target regions without
   map clauses. A program of its own, as the requirement binds every unit of a program. */
#include <cstdio>
#include <cstdlib>
#include <omp.h>

#pragma omp requires unified_shared_memory

int main(void) {
  const int n = 1000;
  int *a = (int *)std::malloc(n * sizeof(int));
  for (int i = 0; i < n; i++)
    a[i] = i;
#pragma omp target teams distribute parallel for
  for (int i = 0; i < n; i++)
    a[i] *= 2;
  long s = 0;
  for (int i = 0; i < n; i++)
    s += a[i];
  std::free(a);
  int ok = s == (long)n * (n - 1);
  std::printf("usm %s\ndevices: %d\n%s\n", ok ? "ok" : "FAIL", omp_get_num_devices(), ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
