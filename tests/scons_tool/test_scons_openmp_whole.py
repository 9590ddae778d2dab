"""An OpenMP source compiled as one job (what the tool sends to sccache-dist: `FAT`), the parts
that need no cluster: how `OFFLOAD_HOSTFLAGS` and `OFFLOAD_DEVICEFLAGS` reach the two sides of one
driver job (each form the tool gives is one clang 19 takes; the ones it refuses keep the source
here), and the project's table of entry names (a name met twice is the other source's).
tests/servers/test_scons_openmp_sccache_dist.py builds through a real cluster."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import SCons.Environment

from conftest import need_tool
from scons_helpers import REPO

sys.path.insert(0, str(REPO / "site_scons" / "site_tools"))
from offload.dist import openmp_entries, openmp_wrappers  # noqa: E402
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
#include <stdio.h>
double f(double *x, int n) {
  double s = 0;
#pragma omp target teams distribute parallel for reduction(+:s) map(to: x[0:n]) map(tofrom: s)
  for (int k = 0; k < n; k++) s += sin(x[k]) + exp(x[k]) + powf((float)x[k], 2.0f);
  return s;
}
int main(void) { double x[4] = {0.5, 1, 2, 3}; printf("%.6f\\n", f(x, 4)); return 0; }
"""

MATH_KERNEL_CXX = """#include <cmath>
#include <cstdio>
template <class T> T g(const T *x, int n) {
  T s = 0;
#pragma omp target teams distribute parallel for reduction(+:s) map(to: x[0:n]) map(tofrom: s)
  for (int k = 0; k < n; k++) s += std::exp(x[k]) + std::sin(x[k]) + std::pow(x[k], T(2)) + acosh(x[k] + 1);
  return s;
}
int main() {
  double x[4] = {0.5, 1, 2, 3};
  float y[4] = {0.5f, 1, 2, 3};
  std::printf("%.6f %.4f\\n", g(x, 4), (double)g(y, 4));
}
"""

COMPLEX_KERNEL = """#include <complex.h>
#include <stdio.h>
int main(void) {
  double _Complex a = 1 + 2 * I, b = 3 + 4 * I, r = 0;
#pragma omp target map(tofrom: r)
  { r = a * b / (a + b); }
  printf("%f %f\\n", creal(r), cimag(r));
  return 0;
}
"""

ROCM_LIBS = "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"


class _OneJob:
    """clang 19's one driver job over `archs`, made here from the file or from its text with the
    includes inlined as sccache does it for a build server (`-frewrite-includes`), with the flags
    the tool gives (clang's OpenMP wrappers first; `extra`), linked and run (host fallback)."""

    def __init__(self, tmp_path, archs: str, extra=()):
        self.clang = need_tool("clang-19")
        if "gfx" in archs and not os.path.isdir(ROCM_LIBS):
            pytest.skip("no ROCm device libraries (install rocm-device-libs)")
        wrappers = subprocess.run([self.clang, "-print-file-name=include/openmp_wrappers"], capture_output=True,
                                  text=True, timeout=60).stdout.strip()
        self.tmp = tmp_path
        self.flags = ["-fopenmp", f"--offload-arch={archs}", "-O2", "-isystem", wrappers, *extra,
                      "--cuda-path=/usr/local/cuda", "--libomptarget-nvptx-bc-path=/usr/lib/llvm-19/lib",
                      f"--rocm-device-lib-path={ROCM_LIBS}", "-Wno-unused-command-line-argument"]

    def run(self, *args, flags=None):
        return subprocess.run([self.clang, *(self.flags if flags is None else flags), *map(str, args)],
                              capture_output=True, text=True, timeout=300)

    def build(self, src, inlined: bool, name: str):
        """(link result, program output or None)."""
        obj = self.tmp / f"{name}.o"
        if inlined:
            text = self.tmp / f"{name}.rw{src.suffix}"
            assert self.run("-E", "-frewrite-includes", src, "-o", text).returncode == 0
            src = text
        cp = self.run("-c", src, "-o", obj)
        assert cp.returncode == 0, cp.stderr
        linked = self.run(obj, "-o", self.tmp / name, "-lm", "-Wl,-rpath,/usr/lib/llvm-19/lib")
        if linked.returncode:
            return linked, None
        out = subprocess.run([str(self.tmp / name)], capture_output=True, text=True, timeout=120,
                             env=dict(os.environ, OMP_TARGET_OFFLOAD="DISABLED"))
        assert out.returncode == 0, out.stderr
        return linked, out.stdout


@pytest.mark.parametrize("arch,links", [("sm_80", True), ("gfx90a", False)])
def test_a_source_preprocessed_as_the_host_reads_it_loses_the_amd_math_wrappers(arch, links, tmp_path):
    """Why an AMD arch needs the tool's header under sccache-dist: a build server gets the source
    with its includes inlined as the host side reads them, and compiles that. With clang's OpenMP
    wrappers first (as the tool gives them) an NVIDIA image still maps `sin` to libdevice and
    links; an AMD one calls `sin` itself, which the device link does not have."""
    job = _OneJob(tmp_path, arch)
    src = tmp_path / "m.c"
    src.write_text(MATH_KERNEL)
    linked, _ = job.build(src, inlined=True, name="app_rw")
    assert (linked.returncode == 0) == links, linked.stderr
    if not links:
        assert "undefined symbol: sin" in linked.stderr, linked.stderr
    here, _ = job.build(src, inlined=False, name="app_here")
    assert here.returncode == 0, here.stderr


@pytest.mark.parametrize("suffix,kernel", [(".c", MATH_KERNEL), (".cpp", MATH_KERNEL_CXX)])
def test_the_amd_math_header_gives_the_inlined_text_what_the_wrappers_leave_out(suffix, kernel, tmp_path):
    """With `openmp_amd_math.h` (what the tool gives one-job compiles for an AMD arch), the text a
    build server gets links for sm_80 + gfx90a, C and C++ (their math functions, and the C++
    overloads clang's <cmath> wrapper defines from them), and so does the same compile made from
    the files (sccache's fallback when a server fails); both programs print what a compile without
    the header prints."""
    assert openmp_wrappers.AMD_MATH_HEADER.endswith("openmp_amd_math.h")
    job = _OneJob(tmp_path, "sm_80,gfx90a", ["-include", openmp_wrappers.AMD_MATH_HEADER])
    src = tmp_path / f"m{suffix}"
    src.write_text(kernel)
    plain = [f for f in job.flags if f not in ("-include", openmp_wrappers.AMD_MATH_HEADER)]
    cp = job.run("-c", src, "-o", tmp_path / "plain.o", flags=plain)
    assert cp.returncode == 0, cp.stderr
    linked = job.run(tmp_path / "plain.o", "-o", tmp_path / "plain", "-lm", "-Wl,-rpath,/usr/lib/llvm-19/lib",
                     flags=plain)
    assert linked.returncode == 0, linked.stderr
    expected = subprocess.run([str(tmp_path / "plain")], capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, OMP_TARGET_OFFLOAD="DISABLED")).stdout
    assert expected.strip()
    for inlined in (True, False):
        linked, out = job.build(src, inlined=inlined, name=f"app_{inlined}")
        assert linked.returncode == 0, linked.stderr
        assert out == expected


@pytest.mark.parametrize("clang", ["clang-19", "clang-22"])
def test_the_amd_math_header_is_given_only_for_wrappers_it_knows(clang, tmp_path):
    """The header stands in for what clang's <math.h> and <cmath> wrappers include for AMD; a
    clang whose wrappers include other headers there (a copy of the installed ones, changed) keeps
    its AMD OpenMP compiles here."""
    path = need_tool(clang)
    wrappers = subprocess.run([path, "-print-file-name=include/openmp_wrappers"], capture_output=True,
                              text=True, timeout=60).stdout.strip()
    include = os.path.dirname(wrappers)
    assert openmp_wrappers._fits(wrappers, include)
    changed = tmp_path / "openmp_wrappers"
    changed.mkdir()
    for name in openmp_wrappers.AMD_MATH_WRAPPERS:
        text = (Path(wrappers) / name).read_text()
        (changed / name).write_text(text)
    assert openmp_wrappers._fits(str(changed), include)
    text = (changed / "math.h").read_text().replace("#include <__clang_hip_math.h>",
                                                    "#include <__clang_hip_math.h>\n#include <__clang_hip_new.h>")
    (changed / "math.h").write_text(text)
    assert not openmp_wrappers._fits(str(changed), include)


def test_complex_arithmetic_in_the_inlined_text_needs_the_files(tmp_path):
    """Complex multiplication and division in a target region: clang's wrappers define their
    runtime functions for device code only `#ifdef __NVPTX__` (or `__AMDGCN__`), so the text a
    build server gets does not link even for NVIDIA; the fat object's host code calls the same
    functions, which is how the tool knows to compile it here (`needs_files`), where it links and
    runs. A source without complex arithmetic is not kept here."""
    job = _OneJob(tmp_path, "sm_80")
    src = tmp_path / "c.c"
    src.write_text(COMPLEX_KERNEL)
    linked, _ = job.build(src, inlined=True, name="app_rw")
    assert linked.returncode != 0 and "__muldc3" in linked.stderr, linked.stderr
    assert openmp_wrappers.needs_files(str(tmp_path / "app_rw.o")) == {"__muldc3", "__divdc3"}
    here, out = job.build(src, inlined=False, name="app_here")
    assert here.returncode == 0, here.stderr
    assert out.split() == ["0.769231", "1.346154"]
    other = tmp_path / "m.c"
    other.write_text(MATH_KERNEL)
    assert job.run("-c", other, "-o", tmp_path / "m.o").returncode == 0
    assert openmp_wrappers.needs_files(str(tmp_path / "m.o")) == set()


def test_the_inlined_text_decides_every_if_for_the_host(tmp_path):
    """Why a source whose `#if` tests a device's macro is compiled here: `-frewrite-includes`
    evaluates every `#if` and `#elif` where it runs (the host side) and keeps only `#ifdef`, so
    the AMD device code made from the inlined text takes the host's branch."""
    clang = need_tool("clang-19")
    src = tmp_path / "t.c"
    src.write_text("#if defined(__AMDGCN__)\nint by_if = 1;\n#else\nint by_if = 0;\n#endif\n"
                   "#ifdef __AMDGCN__\nint by_ifdef = 1;\n#else\nint by_ifdef = 0;\n#endif\n")
    flags = [clang, "-fopenmp", "--offload-arch=gfx90a", "-nogpulib"]
    rw = tmp_path / "t.rw.c"
    assert subprocess.run([*flags, "-E", "-frewrite-includes", str(src), "-o", str(rw)], timeout=120).returncode == 0

    def device_text(path):
        cp = subprocess.run([*flags, "--offload-device-only", "-E", str(path)], capture_output=True, text=True,
                            timeout=120)
        assert cp.returncode == 0, cp.stderr
        return cp.stdout

    assert "int by_if = 1;" in device_text(src) and "int by_ifdef = 1;" in device_text(src)
    assert "int by_if = 0;" in device_text(rw) and "int by_ifdef = 1;" in device_text(rw)


def test_a_device_if_in_the_source_or_its_headers_is_found(tmp_path):
    """`openmp_sources.device_conditional`: an `#if` / `#elif` naming a device's macro in the
    source or a header it includes (its folder, `CPPPATH`), with its line; `#ifdef` is not one."""
    from offload.graph import openmp_sources

    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "dev.h").write_text("#pragma once\n\n#if 0\n#elif defined(__NVPTX__) && X\n#endif\n")
    (tmp_path / "plain.h").write_text("#ifdef __AMDGCN__\nint a;\n#endif\n#if __STDC_VERSION__ > 1\n#endif\n")
    (tmp_path / "a.c").write_text('#include "plain.h"\nint f(void);\n')
    (tmp_path / "b.c").write_text('#include "plain.h"\n#include <dev.h>\n')
    (tmp_path / "c.c").write_text("#if __has_builtin(__builtin_amdgcn_workitem_id_x)\n#endif\n")
    env = SCons.Environment.Environment(tools=[], CPPPATH=[str(tmp_path / "inc")])
    assert openmp_sources.device_conditional(env, env.File(str(tmp_path / "a.c"))) is None
    assert openmp_sources.device_conditional(env, env.File(str(tmp_path / "b.c"))) == (
        str(tmp_path / "inc" / "dev.h"), 4, "__NVPTX__")
    assert openmp_sources.device_conditional(env, env.File(str(tmp_path / "c.c")))[1:] == (1, "__has_builtin")
