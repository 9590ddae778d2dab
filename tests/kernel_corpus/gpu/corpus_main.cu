#include <cstdio>

#include "corpus.h"
#include "gpu_api.h"
#include "header_kernel.cuh"

int check_header_kernel_in_main(void) {
  return run_header_fill<int>(3);
}

int main(void) {
  struct { const char *name; int (*check)(void); } checks[] = {
      {"static_shared", check_static_shared}, {"dynamic_shared", check_dynamic_shared},
      {"constant", check_constant},           {"globals", check_globals},
      {"templates", check_templates},         {"printf", check_printf},
      {"math", check_math},                   {"atomics", check_atomics},
      {"header_kernel_a", check_header_kernel_here},
      {"header_kernel_b", check_header_kernel_in_main},
  };
  int devices = gpu_devices();
  std::printf("devices: %d\n", devices);
  if (!devices) {
    std::printf("no %s device: kernels not run\nPASS\n", GPU_VENDOR);
    return 0;
  }
  int failed = 0;
  for (auto &c : checks) {
    int bad = c.check();
    std::printf("%s %s\n", c.name, bad ? "FAIL" : "ok");
    failed += bad;
  }
  std::printf("%s\n", failed ? "FAIL" : "PASS");
  return failed ? 1 : 0;
}
