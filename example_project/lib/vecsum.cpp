// A library with device code, shipped as a static library made by a relocatable offload link:
// users link it with a plain `g++ app.cpp -L. -lvecsum`, no offload flags.
#include <cstddef>

extern "C" double vecsum(const double *x, std::size_t n) {
  double sum = 0.0;
#pragma omp target teams distribute parallel for reduction(+ : sum) map(to : x[0 : n])
  for (std::size_t i = 0; i < n; ++i)
    sum += x[i];
  return sum;
}
