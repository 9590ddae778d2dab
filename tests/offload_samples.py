"""Real inputs for the fatbin / inspect / verify / cli tests, built once per test session.

Every builder compiles with the real tools (nvcc 13 and fatbinary, clang 19 and 22, hipcc,
clang-offload-bundler-19, clang-offload-packager-19, llvm-ar-19) into one temporary directory
and caches its result for the rest of the session, so the test files share one set of compiles.
A builder whose tool is missing returns None for its outputs (tests then skip via `need`)."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from conftest import find_tool, run

NV_BC = "--libomptarget-nvptx-bc-path=/usr/lib/llvm-19/lib"
ROCM_BC = "--rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"
AMD_BC = "--libomptarget-amdgpu-bc-path=/usr/lib/llvm-19/lib"

CUDA_SRC = """\
__global__ void saxpy(int n, float a, const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
int main() { return 0; }
"""

OMP_SRC = """\
int main(void) {
  int x = 0;
#pragma omp target map(tofrom : x)
  x += 1;
#pragma omp target map(tofrom : x)
  x += 2;
  return x == 3 ? 0 : 1;
}
"""

#: clang's CUDA mode without CUDA 13's headers (which clang 19/22 cannot parse): just the
#: declarations clang needs to emit a kernel launch stub.
CLANG_CUDA_SRC = """\
struct dim3 { unsigned x, y, z; };
typedef struct CUstream_st *cudaStream_t;
extern "C" int cudaLaunchKernel(const void *, dim3, dim3, void **, unsigned long, cudaStream_t);
extern "C" int __cudaPushCallConfiguration(dim3, dim3, unsigned long = 0, void * = 0);
__attribute__((global)) void saxpy(int n, float a, const float *x, float *y) { if (n > 0) y[0] = a * x[0] + y[0]; }
"""

HIP_SRC = """\
#include <hip/hip_runtime.h>
__global__ void vadd(float *a, const float *b, int n) { int i = threadIdx.x; if (i < n) a[i] += b[i]; }
int main() { return 0; }
"""

HIP_DEVICE_SRC = "__attribute__((global)) void k(int *p) { *p = 1; }\n"

#: The gencodes of the nvcc samples, and the images they produce.
NVCC_GENCODES = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=[sm_90,compute_90]"]
NVCC_IMAGES = {("cubin", "sm_80"), ("cubin", "sm_90"), ("ptx", "sm_90")}


@functools.cache
def workdir() -> Path:
    d = Path(tempfile.mkdtemp(prefix="offload-samples-"))
    atexit.register(shutil.rmtree, d, True)
    return d


def _ok(res, out: Path) -> Path | None:
    return out if res.returncode == 0 and out.exists() else None


def _build(out: Path, *cmd, env=None) -> Path | None:
    e = None
    if env:
        e = dict(os.environ)
        e.update(env)
    return _ok(run([*cmd, "-o", out], env=e, cwd=workdir()), out)


def need(samples: dict, *names: str) -> list[Path] | Path:
    """The named samples, or skip the test saying which could not be built."""
    missing = [n for n in names if samples.get(n) is None]
    if missing:
        pytest.skip(f"samples not buildable here: {', '.join(missing)}")
    paths = [samples[n] for n in names]
    return paths[0] if len(paths) == 1 else paths


@functools.cache
def cuda() -> dict[str, Path | None]:
    """nvcc 13: a cubin, PTX, fat binaries in every compression mode, a fat object (`-c`, two
    gencodes with PTX), an `-rdc` object (`__nv_relfatbin`, sm_90a) and a linked program."""
    nvcc, fatbinary = find_tool("nvcc"), find_tool("fatbinary")
    if not nvcc or not fatbinary:
        return {}
    d = workdir()
    src = d / "saxpy.cu"
    src.write_text(CUDA_SRC)
    s: dict[str, Path | None] = {}
    s["sm80.cubin"] = _build(d / "sm80.cubin", nvcc, "-cubin", "-arch=sm_80", src)
    s["c90.ptx"] = _build(d / "c90.ptx", nvcc, "-ptx", "-arch=compute_90", src)
    if s["sm80.cubin"] and s["c90.ptx"]:
        for mode in ("default", "none", "speed"):
            out = d / f"{mode}.fatbin"
            res = run([fatbinary, f"--create={out}", "-64", f"--compress-mode={mode}", "--compress-all",
                       f"--image3=kind=elf,sm=80,file={s['sm80.cubin']}", f"--image3=kind=ptx,sm=90,file={s['c90.ptx']}"])
            s[f"{mode}.fatbin"] = _ok(res, out)
        out = d / "ident.fatbin"
        s["ident.fatbin"] = _ok(run([fatbinary, f"--create={out}", "-64", "--ident=saxpy.cu", "--cmdline=-O3 -lineinfo",
                                     f"--image3=kind=elf,sm=80,file={s['sm80.cubin']}",
                                     f"--image3=kind=ptx,sm=90,file={s['c90.ptx']}"]), out)
    s["nvcc.fatbin"] = _build(d / "nvcc.fatbin", nvcc, "-fatbin", *NVCC_GENCODES, src)
    s["nvcc.o"] = _build(d / "nvcc.o", nvcc, "-c", *NVCC_GENCODES, src)
    if s["nvcc.o"]:
        s["nvcc.exe"] = _build(d / "nvcc.exe", nvcc, *NVCC_GENCODES, s["nvcc.o"])
    s["rdc.o"] = _build(d / "rdc.o", nvcc, "-rdc=true", "-c", "-gencode", "arch=compute_80,code=sm_80",
                        "-gencode", "arch=compute_90a,code=[sm_90a,compute_90a]", src)
    # clang 22 CUDA: the old offload model runs CUDA's fatbinary (`.nv_fatbin`); -fgpu-rdc with the
    # new driver embeds an OffloadBinary instead.  (clang 19 cannot drive CUDA 13's fatbinary.)
    c22 = find_tool("clang-22")
    if c22:
        csrc = d / "clang_saxpy.cu"
        csrc.write_text(CLANG_CUDA_SRC)
        cflags = ["-x", "cuda", "--cuda-path=/usr/local/cuda", "-nocudainc", "-nocudalib", "-Wno-unknown-cuda-version"]
        s["clang22_cuda.o"] = _build(d / "clang22_cuda.o", c22, *cflags, "--cuda-gpu-arch=sm_80",
                                     "--cuda-gpu-arch=sm_90", "-c", csrc)
        s["clang22_rdc.o"] = _build(d / "clang22_rdc.o", c22, *cflags, "--offload-new-driver", "-fgpu-rdc",
                                    "--cuda-gpu-arch=sm_80", "-c", csrc)
    return s


@functools.cache
def openmp() -> dict[str, Path | None]:
    """clang 19 OpenMP offload objects, programs and a shared library (nvptx64 sm_80, amdgcn
    gfx90a), and clang 22 objects (no device runtime for 22 here, so `-nogpulib`, no link)."""
    d = workdir()
    src = d / "omp.c"
    src.write_text(OMP_SRC)
    s: dict[str, Path | None] = {}
    c19, c22 = find_tool("clang-19"), find_tool("clang-22")
    if c19:
        s["omp19_nv.o"] = _build(d / "omp19_nv.o", c19, "-fopenmp", "--offload-arch=sm_80", NV_BC, "-c", src)
        s["omp19_nv.bc"] = _build(d / "omp19_nv.bc", c19, "-fopenmp", "--offload-arch=sm_80", NV_BC, "-c", "-emit-llvm",
                                  src)
        s["omp19_amd.o"] = _build(d / "omp19_amd.o", c19, "-fopenmp", "--offload-arch=gfx90a", ROCM_BC, "-c", src)
        if s["omp19_nv.o"]:
            s["omp19_nv.exe"] = _build(d / "omp19_nv.exe", c19, "-fopenmp", "--offload-arch=sm_80", NV_BC, s["omp19_nv.o"])
        if s["omp19_amd.o"]:
            s["omp19_amd.exe"] = _build(d / "omp19_amd.exe", c19, "-fopenmp", "--offload-arch=gfx90a", ROCM_BC, AMD_BC,
                                        s["omp19_amd.o"])
        s["omp19_nv.so"] = _build(d / "omp19_nv.so", c19, "-fopenmp", "--offload-arch=sm_80", NV_BC, "-fPIC", "-shared",
                                  src)
    if c22:
        s["omp22.o"] = _build(d / "omp22.o", c22, "-fopenmp", "--offload-arch=sm_80,gfx90a", "-nogpulib", "-c", src)
        if s["omp22.o"]:
            # No LLVM 22 device runtime here, so no offload link: a plain host link of the clang 22
            # object still keeps its `llvm_offload_entries` section (names reached through
            # R_X86_64_RELATIVE relocations in a PIE, absolute pointers with -no-pie).
            host_libs = ["-L/usr/lib/llvm-19/lib", "-lomptarget", "-lomp"]
            s["omp22_host.exe"] = _build(d / "omp22_host.exe", c22, s["omp22.o"], *host_libs)
            s["omp22_host_nopie.exe"] = _build(d / "omp22_host_nopie.exe", c22, "-no-pie", s["omp22.o"], *host_libs)
    return s


@functools.cache
def hip() -> dict[str, Path | None]:
    """Debian hipcc (`.hip_fatbin`), raw AMDGPU code objects from clang 19, and bundles made from
    them by clang-offload-bundler-19: binary, compressed (CCOB), text, object; plus a package
    holding a HIP image (producer value 3) and an archive of a few of these."""
    d = workdir()
    s: dict[str, Path | None] = {}
    hipcc = find_tool("hipcc")
    if hipcc:
        src = d / "vadd.hip"
        src.write_text(HIP_SRC)
        s["hipcc.o"] = _build(d / "hipcc.o", hipcc, "--offload-arch=gfx90a,gfx906", "-c", src,
                              env={"HIP_PLATFORM": "amd"})
        src2 = d / "vsub.hip"
        src2.write_text(HIP_SRC.replace("vadd", "vsub").replace("int main() { return 0; }", ""))
        s["hipcc2.o"] = _build(d / "hipcc2.o", hipcc, "--offload-arch=gfx90a,gfx906", "-c", src2,
                               env={"HIP_PLATFORM": "amd"})
        if s["hipcc.o"] and s["hipcc2.o"]:
            s["hipcc.exe"] = _build(d / "hipcc.exe", hipcc, "--offload-arch=gfx90a,gfx906", s["hipcc.o"], s["hipcc2.o"],
                                    env={"HIP_PLATFORM": "amd"})
    c19, bundler = find_tool("clang-19"), find_tool("clang-offload-bundler-19")
    if not c19:
        return s
    dsrc = d / "k.hip"
    dsrc.write_text(HIP_DEVICE_SRC)
    for arch in ("gfx90a", "gfx906:xnack+"):
        key = f"{arch.replace(':', '_')}.co"
        s[key] = _build(d / key, c19, "-x", "hip", f"--offload-arch={arch}", "-nogpulib", "-nogpuinc",
                        "--cuda-device-only", "--no-gpu-bundle-output", "-c", dsrc)
    host = d / "host.o"
    (d / "host.c").write_text("int host_fn(void) { return 7; }\n")
    s["host.o"] = _build(host, c19, "-c", d / "host.c")
    if bundler and s["gfx90a.co"] and s["gfx906_xnack+.co"] and s["host.o"]:
        targets = "-targets=host-x86_64-unknown-linux-gnu,hipv4-amdgcn-amd-amdhsa--gfx90a," \
                  "hipv4-amdgcn-amd-amdhsa--gfx906:xnack+"
        inputs = [f"-input={s['host.o']}", f"-input={s['gfx90a.co']}", f"-input={s['gfx906_xnack+.co']}"]
        for key, extra in (("bundle.bc", ["-type=bc"]), ("bundle_ccob.bc", ["-type=bc", "-compress"]),
                           ("bundle_obj.o", ["-type=o"])):
            out = d / key
            s[key] = _ok(run([bundler, *extra, targets, *inputs, f"-output={out}"]), out)
        # Text bundles carry text: bundle two small "device" .ll files.
        for arch in ("gfx90a", "gfx906"):
            (d / f"dev_{arch}.ll").write_text(f"; device code for {arch}\n")
        (d / "host.ll").write_text("; host code\n")
        out = d / "bundle_text.ll"
        s["bundle_text.ll"] = _ok(run([bundler, "-type=ll",
                                       "-targets=host-x86_64-unknown-linux-gnu,openmp-amdgcn-amd-amdhsa--gfx90a,"
                                       "openmp-amdgcn-amd-amdhsa--gfx906",
                                       f"-input={d / 'host.ll'}", f"-input={d / 'dev_gfx90a.ll'}",
                                       f"-input={d / 'dev_gfx906.ll'}", f"-output={out}"]), out)
    packager = find_tool("clang-offload-packager-19")
    if packager and s.get("gfx90a.co"):
        out = d / "hip.pkg"
        images = [f"--image=file={s['gfx90a.co']},triple=amdgcn-amd-amdhsa,arch=gfx90a,kind=hip"]
        fat = cuda().get("nvcc.fatbin")
        if fat:
            images.append(f"--image=file={fat},triple=nvptx64-nvidia-cuda,arch=sm_80,kind=cuda")
        s["hip.pkg"] = _ok(run([packager, "-o", out, *images]), out)
    ar = find_tool("llvm-ar-19")
    members = [p for p in (s.get("bundle_obj.o"), s.get("hipcc.o"), cuda().get("nvcc.o"), s.get("bundle_ccob.bc"))
               if p is not None]
    if ar and members:
        out = d / "mixed.a"
        s["mixed.a"] = _ok(run([ar, "rcs", out, *members]), out)
    return s
