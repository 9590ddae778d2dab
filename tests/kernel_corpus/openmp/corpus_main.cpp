#include <cstdio>
#include <omp.h>

#include "corpus.h"
#include "header_kernel.h"

int check_header_kernel_in_main(void) {
  return header_kernel(10, 5) == 225 ? 0 : 1;
}

int main(void) {
  struct { const char *name; int (*check)(void); } checks[] = {
      {"team_shared", check_team_shared}, {"dynamic_shared", check_dynamic_shared},
      {"globals", check_globals},         {"templates", check_templates},
      {"printf", check_printf},           {"math", check_math},
      {"atomics", check_atomics},         {"cross_file", check_cross_file},
      {"header_kernel_a", check_header_kernel_here},
      {"header_kernel_b", check_header_kernel_in_main},
  };
  int failed = 0;
  for (auto &c : checks) {
    int bad = c.check();
    std::printf("%s %s\n", c.name, bad ? "FAIL" : "ok");
    failed += bad;
  }
  std::printf("devices: %d\n", omp_get_num_devices());
  std::printf("%s\n", failed ? "FAIL" : "PASS");
  return failed ? 1 : 0;
}
