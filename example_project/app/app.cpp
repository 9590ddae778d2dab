// A plain C++ program linking the offload static library built by the example (see SConstruct).
#include <cstdio>
#include <vector>

extern "C" double vecsum(const double *x, std::size_t n);

int main() {
  std::vector<double> x(10000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = double(i);
  const double got = vecsum(x.data(), x.size()), want = 9999.0 * 10000.0 / 2.0;
  std::printf("vecsum: %.1f (expected %.1f)\n%s\n", got, want, got == want ? "PASS" : "FAIL");
  return got == want ? 0 : 1;
}
