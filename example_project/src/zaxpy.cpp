// ZAXPY from LLVM's OffloadingDesign.rst, extended to check its result.
// OpenMP offload C++: runs on the GPU when one is present, else on the host (libomptarget falls back).
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <omp.h>

using complex = std::complex<double>;

extern "C" int saxpy_check(int n);  // src/saxpy.c

void zaxpy(complex *X, complex *Y, complex D, std::size_t N) {
#pragma omp target teams distribute parallel for
  for (std::size_t i = 0; i < N; ++i)
    Y[i] = D * X[i] + Y[i];
}

int main() {
  const std::size_t N = 1024;
  static complex X[N], Y[N];
  const complex D(2.0, 1.0);
  for (std::size_t i = 0; i < N; ++i) {
    X[i] = complex(double(i), 1.0);
    Y[i] = complex(1.0, double(i));
  }
#pragma omp target data map(to : X[0 : N]) map(tofrom : Y[0 : N])
  zaxpy(X, Y, D, N);

  std::size_t bad = 0;
  for (std::size_t i = 0; i < N; ++i) {
    const complex want = D * complex(double(i), 1.0) + complex(1.0, double(i));
    if (std::abs(Y[i] - want) > 1e-12) ++bad;
  }
  std::printf("zaxpy: %zu elements, %zu wrong, devices available: %d\n", N, bad, omp_get_num_devices());
  const int saxpy_bad = saxpy_check(4096);
  std::printf("saxpy: 4096 elements, %d wrong\n", saxpy_bad);
  const bool ok = bad == 0 && saxpy_bad == 0;
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
