"""An OpenMP source compiled as one job (what the tool sends to sccache-dist: `FAT`), the parts
that need no cluster: how `OFFLOAD_HOSTFLAGS` and `OFFLOAD_DEVICEFLAGS` reach the two sides of one
driver job (each form the tool gives is one clang 19 takes; the ones it refuses keep the source
here), and the project's table of entry names (a name met twice is the other source's).
tests/servers/test_scons_openmp_sccache_dist.py builds through a real cluster."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import SCons.Environment

from conftest import need_tool
from scons_helpers import REPO

sys.path.insert(0, str(REPO / "site_scons" / "site_tools"))
from offload.dist import openmp_entries  # noqa: E402
from offload.graph import compile as _compile  # noqa: E402

CASES = [
    # (OFFLOAD_HOSTFLAGS, OFFLOAD_DEVICEFLAGS, the words of the one job, or None: kept here)
    (["-O2"], ["-O2"], ["-O2"]),
    (["-O3", "-DX=1"], ["-O3", "-DX=1"], ["-O3", "-DX=1"]),
    (["-O2"], ["-O3"], ["-O2", "-Xarch_device", "-O3"]),
    (["-O2"], [], ["-O2", "-Xarch_device", "-O0"]),
    (["-O2", "-march=native"], ["-O2"], ["-O2", "-Xarch_host", "-march=native"]),
    (["-O2"], ["-O2", "-ffast-math"], ["-O2", "-Xarch_device", "-ffast-math"]),
    (["-O3"], ["-O2"], None),              # clang's -Xarch_device refuses -O2
    (["-O2"], ["-O2", "-mllvm", "-x"], None),   # a value in the next word
]


@pytest.mark.parametrize("host,device,words", CASES)
def test_host_and_device_flags_reach_their_side_of_one_job(host, device, words):
    env = SCons.Environment.Environment(tools=[], OFFLOAD_HOSTFLAGS=host, OFFLOAD_DEVICEFLAGS=device)
    assert _compile.fat_xarch_words(env) == words


@pytest.mark.parametrize("host,device,words", [c for c in CASES if c[2] is not None])
def test_clang_takes_every_form_the_tool_gives(host, device, words, tmp_path):
    clang = need_tool("clang-19")
    src = tmp_path / "k.c"
    src.write_text("int f(void) { return 1; }\n")
    cp = subprocess.run([clang, "-fopenmp", "--offload-arch=sm_80", "--cuda-path=/usr/local/cuda",
                         "--libomptarget-nvptx-bc-path=/usr/lib/llvm-19/lib", *words, "-c", str(src), "-o",
                         str(tmp_path / "k.o"), "-###"], capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0 and "invalid Xarch argument" not in cp.stderr, cp.stderr


def test_a_region_name_met_twice_is_the_other_sources(tmp_path):
    table = str(tmp_path / ".offload-dist" / openmp_entries.TABLE)
    a, b = "/p/a.c", "/p/b.c"
    n1, n2 = "__omp_offloading_27_1_scale_l7", "__omp_offloading_27_2_scale_l7"
    assert openmp_entries._record(table, a, {n1}) is None
    assert openmp_entries._record(table, b, {n1}) == a          # met: b is compiled here
    assert openmp_entries._record(table, b, {n2}) is None       # b's names from here
    assert openmp_entries._record(table, a, {n1}) is None       # a again: its own name
    assert openmp_entries._record(table, a, {n2}) == b
    assert openmp_entries._record(table, a, set()) is None      # a's names replaced: n1 free
    assert openmp_entries._record(table, b, {n1, n2}) is None


MATH_KERNEL = """#include <math.h>
double f(double *x, int n) {
  double s = 0;
#pragma omp target teams distribute parallel for reduction(+:s) map(to: x[0:n]) map(tofrom: s)
  for (int k = 0; k < n; k++) s += sin(x[k]);
  return s;
}
int main(void) { double x[4] = {0}; return (int)f(x, 4); }
"""


@pytest.mark.parametrize("arch,links", [("sm_80", True), ("gfx90a", False)])
def test_a_source_preprocessed_as_the_host_reads_it_links_for_nvidia_only(arch, links, tmp_path):
    """Why OpenMP with an AMD arch stays here under sccache-dist: a build server gets the source
    with its includes inlined as the host side reads them (sccache's `-frewrite-includes`, done
    here as sccache does it), and compiles that. With clang's OpenMP wrappers first (as the tool
    gives them) an NVIDIA image still maps `sin` to libdevice and links; an AMD one calls `sin`
    itself, which the device link does not have. The same source compiled from the file links
    for both."""
    clang = need_tool("clang-19")
    libs = "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"
    if arch.startswith("gfx") and not os.path.isdir(libs):
        pytest.skip("no ROCm device libraries (install rocm-device-libs)")
    wrappers = subprocess.run([clang, "-print-file-name=include/openmp_wrappers"], capture_output=True,
                              text=True, timeout=60).stdout.strip()
    flags = ["-fopenmp", f"--offload-arch={arch}", "-O2", "-isystem", wrappers, "--cuda-path=/usr/local/cuda",
             "--libomptarget-nvptx-bc-path=/usr/lib/llvm-19/lib", f"--rocm-device-lib-path={libs}"]
    src = tmp_path / "m.c"
    src.write_text(MATH_KERNEL)

    def run(*args):
        return subprocess.run([clang, *flags, *map(str, args)], capture_output=True, text=True, timeout=300)

    assert run("-E", "-frewrite-includes", src, "-o", tmp_path / "m.rw.c").returncode == 0
    assert run("-c", tmp_path / "m.rw.c", "-o", tmp_path / "rw.o").returncode == 0
    linked = run(tmp_path / "rw.o", "-o", tmp_path / "app_rw", "-lm")
    assert (linked.returncode == 0) == links, linked.stderr
    if not links:
        assert "undefined symbol: sin" in linked.stderr, linked.stderr
    assert run("-c", src, "-o", tmp_path / "here.o").returncode == 0
    here = run(tmp_path / "here.o", "-o", tmp_path / "app_here", "-lm")
    assert here.returncode == 0, here.stderr
