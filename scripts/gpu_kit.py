#!/usr/bin/env python3
"""`make gpu-kit GPU=sm_90`: build the example project's and the kernel corpus's programs for one
GPU on a machine that has none, check them, and pack them with the offload runtime they load into
a folder and an archive that runs on a GPU node that has no compiler (docs/gpu-kit.md).

HPC sites build on login nodes (compilers, no GPU) and run on compute nodes (GPU, no compilers).
A program built here loads libraries that only the build machine has: LLVM's OpenMP offload
runtime (libomptarget, which loads libLLVM and its dependencies), libomp, the CUDA or HIP runtime.
So the kit carries every library its programs load except those a compute node has by
definition (SYSTEM_LIBRARIES: glibc, the GCC runtime, the GPU driver, on AMD nodes ROCm's
runtime), and says which it packed and why (MANIFEST.txt, manifest.json). Its run.sh needs only a
POSIX shell.

Steps, each stopping the kit with a one-line error when it fails:

1. build (SCons, under build/gpu-kit-<GPU>/, never in example_project/build): the example project
   copied there, and the corpus projects of the GPU's vendor (KIT_BUILDS); a program that cannot
   target the GPU (another vendor's language, a compiler that does not know the arch, a compiler
   that is not installed) is left out and listed with the reason;
2. `offload-tool verify --runs-on <GPU>` on every program;
3. pack dist/gpu-kit-<GPU>/ (bin/, lib/, run.sh, the manifests) and dist/gpu-kit-<GPU>.tar.xz,
   then check with ldd that everything in the kit resolves from the kit's lib/ or is a system
   library.

Usage: .venv/bin/python scripts/gpu_kit.py [--gpu sm_90] [--jobs 2] [--build-dir D] [--dist-dir D]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import hashlib
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from kernel_corpus import corpus  # noqa: E402  (the corpus's sources and its SConstruct)

#: The largest archive a kit may be: over it, the kit stops with an error.
MAX_ARCHIVE_BYTES = 64 * 1024 * 1024
CUDA_BIN = "/usr/local/cuda/bin"   # where nvcc is on these machines (as in run_example.py)


class KitError(Exception):
    """A reason the kit cannot be made, said in one line."""


# --------------------------------------------------------------------------------------------
# What a compute node has: not packed.

#: Libraries a compute node has by definition, by kind: (why it is not packed, names or prefixes
#: ending in '*'). Everything else a program loads is packed. glibc and the GCC runtime come
#: with every Linux system that runs C++ programs, and a copy of glibc from elsewhere would not
#: work with the node's own loader; the GPU driver's user-space libraries must match the node's
#: kernel driver, so they can only be the node's. What the kit needs of glibc and libstdc++
#: (their symbol versions) is written in the manifest.
SYSTEM_LIBRARIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "glibc": ("the C library: every Linux node has it, and only the node's works with its loader",
              ("linux-vdso.so.1", "ld-linux-x86-64.so.2", "libc.so.6", "libm.so.6", "libmvec.so.1",
               "libdl.so.2", "libpthread.so.0", "librt.so.1", "libresolv.so.2", "libutil.so.1",
               "libanl.so.1", "libBrokenLocale.so.1", "libnss_*")),
    "GCC runtime": ("the C++ runtime every Linux node has (the version the kit needs is in the manifest)",
                    ("libstdc++.so.6", "libgcc_s.so.1")),
    "NVIDIA driver": ("installed with the NVIDIA driver, and must be the one of the node's kernel module",
                      ("libcuda.so", "libcuda.so.1", "libnvidia-*", "libcudadebugger.so.1")),
    "AMD driver (ROCm runtime)": ("ROCm's user-mode driver, installed with the GPU driver, and must match "
                                  "the node's kernel driver",
                                  ("libhsa-runtime64.so", "libhsa-runtime64.so.1", "libhsakmt.so.1",
                                   "libdrm.so.2", "libdrm_amdgpu.so.1")),
    "ROCm code objects": ("ROCm's code object manager, which the HIP runtime loads to read kernels: every ROCm "
                          "installation has it, and with the LLVM it links (Debian's links libLLVM-15, 112 MiB) "
                          "it would take the kit over its 64 MiB",
                          ("libamd_comgr.so.2",)),
}

#: Library names found in a library's data (what it may dlopen at run time: `runtime_loads`), by
#: name: (pack or not, why). A name found that is not here stops the kit: whether it must travel
#: is decided here, once, not guessed. Names of SYSTEM_LIBRARIES need no entry.
RUNTIME_LOADS: dict[str, tuple[bool, str]] = {
    "libarcher.so": (False, "optional: libomp's data race checker, used only with ThreadSanitizer builds"),
    "libittnotify.so": (False, "optional: libomp's Intel VTune hooks, loaded only when VTune asks"),
    "libmemkind.so": (False, "optional: libomp's memkind allocators (omp_alloc on high-bandwidth memory)"),
    "libompd.so": (False, "optional: the OpenMP debugging interface, loaded by debuggers"),
    "libX11.so.6": (False, "optional: the HIP runtime's OpenGL interoperability, unused by these programs"),
}

#: Programs that stop without a GPU by design: run.sh reports them SKIP, not FAIL, where the node
#: has no GPU.
NEEDS_GPU = {
    "omp-usm": "LLVM 19's libomptarget stops a `requires unified_shared_memory` program when no GPU is present",
}


def system_kind(soname: str) -> str | None:
    """The SYSTEM_LIBRARIES kind of a library name, or None when the kit must carry it."""
    for kind, (_, names) in SYSTEM_LIBRARIES.items():
        for n in names:
            if soname == n or (n.endswith("*") and soname.startswith(n[:-1])):
                return kind
    return None


# --------------------------------------------------------------------------------------------
# What the kit builds

@dataclasses.dataclass(frozen=True)
class KitBuild:
    """One SCons project the kit builds: the example project (copied), or the corpus of one
    family in one toolchain mode. `programs`: kit name -> (target in the project, language)."""

    name: str                       # folder under the build folder
    vendor: str | None              # 'nvidia' / 'amd': the GPUs its languages target; None: both
    programs: dict[str, tuple[str, str]]
    compilers: tuple[str, ...]      # commands that must know the arch ('nvcc' asked as nvcc)
    family: str | None = None       # the corpus family; None: the example project
    settings: dict = dataclasses.field(default_factory=dict)
    rdc: bool = False
    needs: tuple[str, ...] = ()     # more than compilers: 'curand-headers'


def curand_include() -> str | None:
    """CUDA 13's cuRAND headers from PyPI's nvidia-curand (scripts/install-deps.sh installs it into
    .venv): clang 22's CUDA wrapper headers include `curand_mtgp32_kernel.h`, which the CUDA
    toolkit here does not ship."""
    d = Path(sysconfig.get_paths()["purelib"]) / "nvidia" / "cu13" / "include"
    return str(d) if (d / "curand_mtgp32_kernel.h").is_file() else None


ROCM_BITCODE = "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"   # Debian's rocm-device-libs

#: Every program of every kit; each GPU gets those of its vendor (the others are listed as left
#: out). The corpus modes are those of tests/scons_tool/test_scons_kernel_corpus.py that run a program the
#: other modes do not: OpenMP with clang 19; CUDA with nvcc (split into its steps) and with
#: clang 22; nvcc -rdc=true for the relocatable-device-code program; HIP with clang 19 (old
#: driver) and hipcc, and clang 19's new driver for HIP's relocatable-device-code program.
KIT_BUILDS: tuple[KitBuild, ...] = (
    KitBuild("example", None, {"zaxpy": ("build/bin/zaxpy", "openmp"), "app": ("build/bin/app", "openmp"),
                               "saxpy_cuda": ("build/bin/saxpy_cuda", "cuda"),
                               "vadd_hip": ("build/bin/vadd_hip", "hip")},
             ("clang-19", "nvcc")),
    KitBuild("corpus-openmp", None, {"omp-corpus": ("bin/corpus", "openmp"), "omp-usm": ("bin/usm", "openmp")},
             ("clang-19",), "openmp", {"OFFLOAD_CLANG": "clang-19"}),
    KitBuild("corpus-cuda-nvcc", "nvidia", {"cuda-nvcc-corpus": ("bin/corpus", "cuda")}, ("nvcc",), "cuda",
             {"OFFLOAD_CLANG": "clang-19", "OFFLOAD_CUDA_COMPILER": "nvcc"}),
    KitBuild("corpus-cuda-clang22", "nvidia", {"cuda-clang22-corpus": ("bin/corpus", "cuda")}, ("clang-22",),
             "cuda", {"OFFLOAD_CLANG": "clang-22"}, needs=("curand-headers",)),
    KitBuild("corpus-cuda-nvcc-rdc", "nvidia", {"cuda-nvcc-rdc": ("bin/rdc", "cuda")}, ("nvcc",), "cuda",
             {"OFFLOAD_CLANG": "clang-19", "OFFLOAD_CUDA_COMPILER": "nvcc", "OFFLOAD_NVCCFLAGS": ["-rdc=true"]},
             rdc=True),
    KitBuild("corpus-hip-clang19", "amd", {"hip-clang19-corpus": ("bin/corpus", "hip")}, ("clang-19",), "hip",
             {"OFFLOAD_CLANG": "clang-19", "OFFLOAD_HIP_DRIVER": "old"}),
    KitBuild("corpus-hip-hipcc", "amd", {"hip-hipcc-corpus": ("bin/corpus", "hip")}, ("clang-19", "hipcc"), "hip",
             {"OFFLOAD_CLANG": "clang-19", "OFFLOAD_HIP_COMPILER": "hipcc"}),
    KitBuild("corpus-hip-clang19-rdc", "amd", {"hip-clang19-rdc": ("bin/rdc", "hip")}, ("clang-19",), "hip",
             {"OFFLOAD_CLANG": "clang-19", "OFFLOAD_HIP_DRIVER": "new"}, rdc=True),
)

LANGUAGE_VENDOR = {"openmp": None, "cuda": "nvidia", "hip": "amd"}
VENDOR_WORDS = {"nvidia": "NVIDIA (sm_*)", "amd": "AMD (gfx*)"}
#: The files of example_project/ its build reads (its own build/ and run_example.py stay there).
EXAMPLE_FILES = ("SConstruct", "SConscript", "src", "lib", "app")


# --------------------------------------------------------------------------------------------
# Toolchains: found, and asked which archs they build

def tool_env() -> dict[str, str]:
    """The environment SCons and the compilers run with: nvcc's folder on PATH, this checkout's
    library importable (as tests/scons_helpers.scons_env)."""
    env = dict(os.environ)
    if os.path.isdir(CUDA_BIN) and CUDA_BIN not in env.get("PATH", "").split(os.pathsep):
        env["PATH"] = env.get("PATH", "") + os.pathsep + CUDA_BIN
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("OFFLOAD_VERBOSE", None)
    return env


def _run(cmd: list[str], env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, env=env, **kw)


_ARCHS: dict[str, set[str] | None] = {}


def known_archs(command: str, vendor: str, env: dict) -> set[str] | None:
    """The processors `command` builds for `vendor`, as the compiler says (None: not installed).
    clang: `--print-supported-cpus` for the vendor's device triple; nvcc: `--list-gpu-code`. The
    same questions the SCons tool asks (`toolchain.discovery.offload_archs`): which archs exist
    changes with the compiler (CUDA 13 dropped sm_70; clang 19 stops at sm_90)."""
    key = f"{command}/{vendor}"
    if key not in _ARCHS:
        path = shutil.which(command, path=env["PATH"])
        if path is None:
            _ARCHS[key] = None
        elif command == "nvcc":
            out = _run([path, "--list-gpu-code"], env).stdout
            _ARCHS[key] = set(out.split()) if vendor == "nvidia" else set()
        elif command == "hipcc":   # hipcc drives clang; its archs are asked of clang-19 (KitBuild.compilers)
            _ARCHS[key] = {"*"}
        else:
            triple = "nvptx64-nvidia-cuda" if vendor == "nvidia" else "amdgcn-amd-amdhsa"
            cp = _run([path, f"--target={triple}", "-nogpulib", "--print-supported-cpus"], env)
            text = cp.stdout + cp.stderr
            after = text.split("Available CPUs for this target:", 1)[-1]
            _ARCHS[key] = {w for w in after.split() if re.fullmatch(r"(sm_\d+[af]?|gfx[0-9a-f]+)", w)}
    return _ARCHS[key]


PACKAGES = {"clang-19": "clang-19", "clang-22": "clang-22", "hipcc": "hipcc", "nvcc": "the CUDA toolkit"}


def why_not_built(build: KitBuild, vendor: str, arch: str, env: dict) -> str | None:
    """Why `build` cannot make programs for the GPU, or None when it can."""
    if build.vendor and build.vendor != vendor:
        langs = sorted({lang for _, lang in build.programs.values()})
        return (f"{'/'.join(l.upper() for l in langs)} targets {VENDOR_WORDS[build.vendor]} GPUs; "
                f"{arch} is {VENDOR_WORDS[vendor]}")
    for command in build.compilers:
        if command == "nvcc" and vendor != "nvidia":
            continue
        archs = known_archs(command, vendor, env)
        if archs is None:
            return f"{command} not found (install {PACKAGES.get(command, command)}, or run scripts/install-deps.sh)"
        if "*" not in archs and arch not in archs:
            return f"{command} cannot build for {arch} (it knows {_span(archs)})"
    if "curand-headers" in build.needs and not curand_include():
        return "cuRAND headers not found (PyPI's nvidia-curand: scripts/install-deps.sh installs it)"
    if vendor == "amd" and not os.path.isdir(ROCM_BITCODE):   # every AMD device compile links them
        return f"ROCm device libraries not found in {ROCM_BITCODE} (install rocm-device-libs)"
    return None


def _span(archs: set[str]) -> str:
    def order(a: str):
        m = re.match(r"([a-z]+)_?(\d+)", a)
        return (m.group(1), int(m.group(2))) if m else (a, 0)
    listed = sorted(archs, key=order)
    return f"{listed[0]} to {listed[-1]}" if len(listed) > 2 else ", ".join(listed) or "none"


# --------------------------------------------------------------------------------------------
# The GPU

@dataclasses.dataclass(frozen=True)
class Target:
    gpu: str        # as given: sm_90, gfx90a, gfx90a:xnack+
    vendor: str     # nvidia / amd
    arch: str       # what the programs are built for: the GPU, AMD modes dropped (code for either mode)
    safe: str       # the GPU in file names (':' is the remote-host separator of tar)


def parse_target(text: str) -> Target:
    """The GPU named on the command line, checked as `offload-tool verify --runs-on` checks it."""
    from offload_tool.errors import OffloadError
    from offload_tool.ops.runs_on import parse_gpu
    try:
        gpu = parse_gpu(text)
    except OffloadError as exc:
        raise KitError(f"GPU={text}: {exc}") from None
    arch = text if gpu.vendor == "nvidia" else gpu.processor
    return Target(text, gpu.vendor, arch, text.replace(":", "_"))


# --------------------------------------------------------------------------------------------
# 1. Build

@dataclasses.dataclass
class Program:
    name: str               # in the kit's bin/
    build: str              # KitBuild.name
    target: str             # in that project
    language: str
    path: Path | None = None
    left_out: str | None = None
    # Why the GPU cannot run its device code although the program runs on the host (its OpenMP
    # runtime refuses its images: `verify --runs-on` says so); packed, and skipped on a GPU node.
    host_only: str | None = None
    runs_on: list[str] = dataclasses.field(default_factory=list)
    archs: list[str] = dataclasses.field(default_factory=list)


def _sync_tree(src: Path, dst: Path) -> None:
    """Copy `src` to `dst`, rewriting only files whose bytes differ (SCons then rebuilds nothing
    that did not change)."""
    if src.is_dir():
        for child in sorted(src.iterdir()):
            if child.name not in ("__pycache__", ".sconsign.dblite"):
                _sync_tree(child, dst / child.name)
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    data = src.read_bytes()
    if not dst.exists() or dst.read_bytes() != data:
        dst.write_bytes(data)


def lay_out(build: KitBuild, root: Path, arch: str) -> None:
    """Write the project of `build` at `root`: a copy of example_project/'s sources, or the
    corpus's project (its write_project)."""
    if build.family is None:
        for name in EXAMPLE_FILES:
            _sync_tree(REPO / "example_project" / name, root / name)
        return
    settings = dict(build.settings)
    if "curand-headers" in build.needs:
        settings["CPPPATH"] = [curand_include()]
    # write_project rewrites its files each time; compare first so that SCons sees no change.
    staging = root.with_name(root.name + ".new")
    shutil.rmtree(staging, ignore_errors=True)
    corpus.write_project(staging, build.family, settings, [arch], rdc=build.rdc)
    _sync_tree(staging, root)
    shutil.rmtree(staging)


def scons(root: Path, arch: str, targets: list[str], jobs: int, env: dict) -> tuple[bool, str, float]:
    """Run SCons on one project; (ok, its log file, seconds)."""
    cmd = [sys.executable, "-m", "SCons", "-Q", f"--site-dir={REPO / 'site_scons'}", f"-j{jobs}",
           f"archs={arch}", *targets]
    log = root / "gpu-kit-build.log"
    started = time.monotonic()
    with open(log, "w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        rc = subprocess.run(cmd, cwd=root, stdout=f, stderr=subprocess.STDOUT, env=env).returncode
    return rc == 0, str(log), time.monotonic() - started


def build_all(target: Target, build_dir: Path, jobs: int, env: dict) -> list[Program]:
    """Build every program the GPU can run; the others come back with `left_out` set."""
    programs: list[Program] = []
    todo: list[tuple[KitBuild, list[Program]]] = []
    for build in KIT_BUILDS:
        why = why_not_built(build, target.vendor, target.arch, env)
        progs = []
        for name, (rel, lang) in build.programs.items():
            p = Program(name, build.name, rel, lang)
            lang_vendor = LANGUAGE_VENDOR[lang]
            if lang_vendor and lang_vendor != target.vendor:
                p.left_out = (f"{lang.upper()} targets {VENDOR_WORDS[lang_vendor]} GPUs; "
                              f"{target.gpu} is {VENDOR_WORDS[target.vendor]}")
            elif why:
                p.left_out = why
            else:
                progs.append(p)
            programs.append(p)
        if progs:
            todo.append((build, progs))
    for p in programs:
        if p.left_out:
            print(f"gpu-kit: left out {p.name} ({p.build}): {p.left_out}", flush=True)
    if not todo:
        raise KitError(f"no program can be built for {target.gpu}")

    def one(item):
        build, progs = item
        root = build_dir / build.name
        root.mkdir(parents=True, exist_ok=True)
        lay_out(build, root, target.arch)
        ok, log, secs = scons(root, target.arch, [p.target for p in progs], jobs, env)
        return build, progs, root, ok, log, secs

    # Each project is small (a few sources, short chains of steps): `jobs` projects at a time
    # keep the cores busy where one project alone would leave them waiting on its link.
    failed = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for build, progs, root, ok, log, secs in pool.map(one, todo):
            print(f"gpu-kit: built {build.name} for {target.arch}: {'ok' if ok else 'FAILED'} "
                  f"({secs:.1f} s; log {log})", flush=True)
            if not ok:
                failed.append((build.name, log))
            for p in progs:
                p.path = root / p.target
    if failed:
        name, log = failed[0]
        with open(log) as f:
            tail = f.read()[-4000:]
        sys.stderr.write(tail + "\n")
        raise KitError(f"the build of {name} failed (its log above: {log})")
    return programs


# --------------------------------------------------------------------------------------------
# 2. Verify

def verify(target: Target, programs: list[Program], env: dict) -> None:
    """`offload-tool verify --runs-on <GPU>` on every program: each must hold code the GPU runs,
    except where the OpenMP runtime the program loads refuses its images (clang 19's runtime and
    CUDA 13's cubins): such a program still runs on the host, so it is packed, said to be
    host-only in the manifest and skipped by run.sh on a GPU node."""
    from offload_tool.ops.inspector import inspect_file
    from offload_tool.rules.openmp_runtime import REFUSES
    built = [p for p in programs if not p.left_out]
    cmd = [sys.executable, "-m", "offload_tool.cli.tool", "verify", f"--runs-on={target.gpu}",
           *[str(p.path) for p in built]]
    cp = _run(cmd, env)
    by_path = {str(p.path): p for p in built}
    for line in cp.stdout.splitlines():
        path, sep, rest = line.partition(": ")
        if sep and path in by_path:
            by_path[path].runs_on.append(rest)
    no = f"{target.gpu}: no: "
    failing = []
    for p in built:
        problems = [ln for ln in p.runs_on if not ln.startswith(("ok:", f"{target.gpu}: yes"))]
        if problems and all(ln.startswith(no) and REFUSES in ln for ln in problems):
            p.host_only = problems[0][len(no):]
            print(f"gpu-kit: {p.name} runs on the host only: {p.host_only}", flush=True)
        elif problems:
            failing.append(p)
    if cp.returncode and (failing or not any(p.host_only for p in built)):
        sys.stderr.write(cp.stdout + cp.stderr)
        raise KitError(f"offload-tool verify --runs-on={target.gpu} failed (above): nothing packed")
    for p in built:
        p.archs = sorted({img.arch for img in inspect_file(str(p.path), hashes=False) if img.arch})
    host_only = sum(1 for p in built if p.host_only)
    print(f"gpu-kit: offload-tool verify --runs-on={target.gpu}: {len(built) - host_only} programs ok"
          + (f", {host_only} for the host only" if host_only else ""), flush=True)


# --------------------------------------------------------------------------------------------
# 3. What the programs load

def elf_info(path: Path) -> dict:
    """A dynamic ELF file's soname, NEEDED names, RPATH/RUNPATH and the versions it needs of each
    library (`.gnu.version_r`)."""
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerNeedSection
    info = {"soname": None, "needed": [], "paths": [], "versions": {}}
    with open(path, "rb") as f:
        elf = ELFFile(f)
        for sec in elf.iter_sections():
            if isinstance(sec, DynamicSection):
                for tag in sec.iter_tags():
                    if tag.entry.d_tag == "DT_NEEDED":
                        info["needed"].append(tag.needed)
                    elif tag.entry.d_tag == "DT_SONAME":
                        info["soname"] = tag.soname
                    elif tag.entry.d_tag in ("DT_RPATH", "DT_RUNPATH"):
                        info["paths"].append((tag.entry.d_tag, getattr(tag, "runpath", None) or tag.rpath))
            elif isinstance(sec, GNUVerNeedSection):
                for verneed, auxs in sec.iter_versions():
                    info["versions"].setdefault(verneed.name, set()).update(a.name for a in auxs)
    return info


_NAME_IN_DATA = re.compile(rb"(?<![A-Za-z0-9_.+-])(lib[A-Za-z0-9_+-]+(?:\.[A-Za-z0-9_+-]+)*?\.so(?:\.[0-9]+)*)(?=\x00)")


def _stem(name: str) -> str:
    return re.sub(r"\.so(\.\d+)*$", "", name)


def runtime_loads(path: Path, info: dict) -> list[str]:
    """Library names in the read-only data of `path` that it does not link: what it may dlopen
    (LLVM 19's libomptarget loads `libcuda.so` and `libhsa-runtime64.so` so; its CUDA, AMDGPU and
    host plugins are inside it). Its own name and those it links are not counted."""
    from elftools.elf.elffile import ELFFile
    names: set[str] = set()
    with open(path, "rb") as f:
        elf = ELFFile(f)
        for sec in elf.iter_sections():
            if sec.name.startswith(".rodata") or sec.name == ".data.rel.ro":
                names.update(m.group(1).decode() for m in _NAME_IN_DATA.finditer(sec.data()))
    linked = {_stem(n) for n in info["needed"]} | {_stem(info["soname"] or path.name)}
    return sorted(n for n in names if _stem(n) not in linked)


def ldd(path: Path, library_path: list[str]) -> dict[str, str | None]:
    """What the loader resolves for `path` and everything it links, as ldd says: name -> file, or
    None ('not found'). Run with a bare environment and `library_path` as LD_LIBRARY_PATH."""
    env = {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": os.pathsep.join(library_path)}
    cp = _run(["ldd", str(path)], env)
    if cp.returncode and "not a dynamic executable" not in cp.stdout + cp.stderr:
        raise KitError(f"ldd {path} failed: {(cp.stderr or cp.stdout).strip().splitlines()[-1:]}")
    out: dict[str, str | None] = {}
    for line in cp.stdout.splitlines():
        m = re.match(r"\s*(\S+) => (.*?)(?: \(0x[0-9a-f]+\))?$", line)
        if m:
            out[m.group(1)] = None if m.group(2) == "not found" else m.group(2)
    return out


def runtime_dirs(env: dict, vendor: str) -> list[str]:
    """The folders of the offload runtimes the programs link, asked of their compilers: clang 19's
    `-print-file-name=libomptarget.so` (LLVM's OpenMP offload runtime and libomp beside it), and
    the runtime folder nvcc links from (its --dryrun's LIBRARIES, the stubs folder set aside: its
    libcuda.so is a stand-in for the driver's)."""
    dirs = []
    clang = shutil.which("clang-19", path=env["PATH"])
    if clang:
        found = _run([clang, "-print-file-name=libomptarget.so"], env).stdout.strip()
        if os.path.isabs(found) and os.path.exists(found):
            dirs.append(os.path.dirname(os.path.realpath(found)))
    nvcc = shutil.which("nvcc", path=env["PATH"])
    if nvcc and vendor == "nvidia":
        out = _run([nvcc, "--dryrun", "-x", "cu", os.devnull, "-o", os.devnull], env)
        for line in (out.stdout + out.stderr).splitlines():
            if "LIBRARIES=" in line:
                dirs += [os.path.realpath(d) for d in re.findall(r'-L"?([^"\s]+)', line) if "stubs" not in d]
    return list(dict.fromkeys(dirs))


#: What the runtime libraries the programs link are, by name without version (the manifest's "why").
ROLES = {
    "libomptarget": "LLVM's OpenMP offload runtime",
    "libomp": "LLVM's OpenMP runtime",
    "libLLVM": "LLVM, which libomptarget links (it reads device images with it and JIT-compiles LLVM IR ones)",
    "libcudart": "the CUDA runtime, of the CUDA the programs were built with",
    "libamdhip64": "the HIP runtime, of the HIP the programs were built with",
}


@dataclasses.dataclass
class Packed:
    soname: str
    source: str
    needed_by: list[str] = dataclasses.field(default_factory=list)
    loaded_by: list[str] = dataclasses.field(default_factory=list)   # "X: why"

    @property
    def why(self) -> list[str]:
        out = [ROLES[_stem(self.soname)]] if _stem(self.soname) in ROLES else []
        if self.needed_by:
            out.append("needed by " + ", ".join(self.needed_by))
        out += ["loaded at run time by " + w for w in self.loaded_by]
        return out


def _system_search(name: str) -> str | None:
    """Where the loader's cache (`ldconfig -p`) has `name`, for a name found in data."""
    for ldconfig in ("ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"):
        exe = shutil.which(ldconfig)
        if exe:
            for line in _run([exe, "-p"]).stdout.splitlines():
                parts = line.strip().split(" => ")
                if len(parts) == 2 and parts[0].split()[0] == name and "x86-64" in parts[0]:
                    return parts[1]
            return None
    return None


def closure(programs: list[Program], lib_dirs: list[str]) -> tuple[dict[str, Packed], dict[str, dict]]:
    """The libraries to pack (soname -> Packed) and those left to the node (name -> kind, why,
    users), from the programs' NEEDED entries and the names their libraries may load."""
    packed: dict[str, Packed] = {}
    left: dict[str, dict] = {}
    resolved: dict[str, str] = {}
    queue: list[tuple[str, Path]] = [(p.name, p.path) for p in programs if not p.left_out]
    seen: set[str] = set()

    def leave(name: str, kind: str, why: str, user: str) -> None:
        left.setdefault(name, {"kind": kind, "why": why, "used_by": []})["used_by"].append(user)

    def add(name: str, path: str, needed_by: str = "", loaded_by: str = "") -> None:
        real = os.path.realpath(path)
        if name in packed and packed[name].source != real:
            raise KitError(f"{name}: two files would travel under one name: {packed[name].source} and {real}")
        if name not in packed:
            packed[name] = Packed(name, real)
            queue.append((name, Path(real)))
        if needed_by:
            packed[name].needed_by.append(needed_by)
        if loaded_by:
            packed[name].loaded_by.append(loaded_by)

    while queue:
        label, path = queue.pop(0)
        if str(path) in seen:
            continue
        seen.add(str(path))
        info = elf_info(path)
        for name, file in ldd(path, lib_dirs).items():
            if file:
                if name in resolved and os.path.realpath(resolved[name]) != os.path.realpath(file):
                    raise KitError(f"{name} resolves to {resolved[name]} for one file and {file} for {label}")
                resolved.setdefault(name, file)
        for name in info["needed"]:
            kind = system_kind(name)
            if kind:
                leave(name, kind, SYSTEM_LIBRARIES[kind][0], label)
                continue
            file = resolved.get(name)
            if not file:
                raise KitError(f"{label} needs {name}, which is not found on this machine (ldd {path})")
            add(name, file, needed_by=label)
        for name in runtime_loads(path, info):
            kind = system_kind(name)
            if kind:
                leave(name, kind, SYSTEM_LIBRARIES[kind][0] + f"; {label} loads it at run time", label)
                continue
            if name not in RUNTIME_LOADS:
                raise KitError(f"{label} names {name} in its data (it may load it at run time) and "
                               "gpu_kit.RUNTIME_LOADS does not say whether it must travel: add it there")
            pack, why = RUNTIME_LOADS[name]
            if not pack:
                leave(name, "not needed", why, label)
                continue
            # dlopen searches the loading library's RUNPATH first: its own folder here.
            beside = path.parent / name
            file = str(beside) if beside.exists() else (resolved.get(name) or _system_search(name))
            if not file:
                raise KitError(f"{label} loads {name} at run time, which is not found on this machine")
            add(name, file, loaded_by=f"{label}: {why}")
    return packed, left


def node_needs(files: list[Path]) -> dict[str, dict]:
    """The newest glibc and libstdc++ symbol versions any file of the kit needs, and a file that
    needs it: what the node's system must have (a kit built on Debian 12 needs a glibc and a
    libstdc++ at least as new; an older node's loader refuses the files)."""
    newest: dict[str, dict] = {}
    for path in files:
        for versions in elf_info(path)["versions"].values():
            for v in versions:
                m = re.fullmatch(r"(GLIBC|GLIBCXX|CXXABI)_([\d.]+)", v)
                if m:
                    num = tuple(int(x) for x in m.group(2).split("."))
                    if num > tuple(int(x) for x in newest.get(m.group(1), {"version": "0"})["version"].split(".")):
                        newest[m.group(1)] = {"version": m.group(2), "file": f"{path.parent.name}/{path.name}"}
    return dict(sorted(newest.items()))


# --------------------------------------------------------------------------------------------
# 4. The kit

RUN_SH = r"""#!/bin/sh
# GPU kit for @GPU@ (@VENDOR@): runs every program of this kit on this node and says which device
# ran it. Needs a POSIX shell, the GPU driver and glibc @GLIBC@ or newer; no compiler.
#
#   sh run.sh          (from any folder)
#
# One line per program, `PASS|FAIL|SKIP <program> (<device>)`, then a summary; exit status 1 when
# a program failed. Each program's output: logs/<program>.log. What the kit holds and why:
# MANIFEST.txt.
KIT=$(cd "$(dirname "$0")" && pwd -P) || exit 2
GPU='@GPU@'
VENDOR='@VENDOR@'
GLIBC_NEEDED='@GLIBC@'
CUDA_RUNTIME='@CUDA@'
LD_LIBRARY_PATH="$KIT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH

say() { printf '%s\n' "$*"; }

# Where the loader finds library $1: LD_LIBRARY_PATH, its cache (ldconfig -p), its default folders.
loader_has() {
    lh_ifs=$IFS; IFS=:
    for lh_d in $LD_LIBRARY_PATH; do
        if [ -n "$lh_d" ] && [ -e "$lh_d/$1" ]; then IFS=$lh_ifs; say "$lh_d/$1"; return 0; fi
    done
    IFS=$lh_ifs
    for lh_l in ldconfig /sbin/ldconfig /usr/sbin/ldconfig; do
        if command -v "$lh_l" >/dev/null 2>&1; then
            lh_p=$("$lh_l" -p 2>/dev/null | awk -v n="$1" '$1 == n && /x86-64/ { print $NF; exit }')
            if [ -n "$lh_p" ]; then say "$lh_p"; return 0; fi
            break
        fi
    done
    for lh_d in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /lib64 /usr/lib64; do
        if [ -e "$lh_d/$1" ]; then say "$lh_d/$1"; return 0; fi
    done
    return 1
}

# The GPU driver, as the kit's libraries load it. LLVM 19's libomptarget opens the driver by its
# development name (libcuda.so, libhsa-runtime64.so), which a node with only the driver may lack:
# a link to the node's libcuda.so.1 / libhsa-runtime64.so.1 is made then (the node's own driver,
# never a copy). ROCm's folder is added where the loader does not search it.
notes=
links=
# node_lib NAME FOLDERS: $found := where the loader finds NAME; when it does not, the first of
# FOLDERS that has it is added to LD_LIBRARY_PATH.
node_lib() {
    found=$(loader_has "$1") && return 0
    for nl_d in $2; do
        if [ -e "$nl_d/$1" ]; then
            found="$nl_d/$1"
            case ":$LD_LIBRARY_PATH:" in
                *":$nl_d:"*) ;;
                *) LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nl_d"; notes="$notes; $nl_d added to LD_LIBRARY_PATH" ;;
            esac
            return 0
        fi
    done
    found=
    notes="$notes; $1 not found"
    return 1
}
# link_as NAME FILE: make FILE loadable as NAME (a link in driver-links/) unless NAME is already.
link_as() {
    loader_has "$1" >/dev/null && return 0
    if [ -z "$links" ]; then
        links="$KIT/driver-links"
        if ! { mkdir -p "$links" 2>/dev/null && [ -w "$links" ]; }; then
            links="${TMPDIR:-/tmp}/gpu-kit-driver-links.$$"
            mkdir -p "$links" || return 0
            trap 'rm -rf "$links"' EXIT
        fi
        LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$links"
    fi
    ln -sf "$2" "$links/$1" && notes="$notes; $1 -> $2"
}
ROCM_DIRS="${ROCM_PATH:+$ROCM_PATH/lib }/opt/rocm/lib /opt/rocm/lib64"

# The node's GPUs, as the vendor's tool lists them.
gpu_count=0
gpu_name=
if [ "$VENDOR" = nvidia ]; then
    node_lib libcuda.so.1 "" && link_as libcuda.so "$found"
    if command -v nvidia-smi >/dev/null 2>&1; then
        smi=$(nvidia-smi -L 2>/dev/null)
        gpu_count=$(say "$smi" | grep -c '^GPU [0-9]')
        gpu_name=$(say "$smi" | sed -n '1s/ (UUID:.*//p')
        driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | sed -n 1p)
        gpus="nvidia-smi: $gpu_count GPU(s)${driver:+, driver $driver}"
    else
        gpus="nvidia-smi not found: no NVIDIA driver"
    fi
else
    node_lib libhsa-runtime64.so.1 "$ROCM_DIRS" && link_as libhsa-runtime64.so "$found"
    node_lib libamd_comgr.so.2 "$ROCM_DIRS"
    rocminfo=$(command -v rocminfo 2>/dev/null || { [ -x /opt/rocm/bin/rocminfo ] && say /opt/rocm/bin/rocminfo; })
    if [ -n "$rocminfo" ]; then
        agents=$("$rocminfo" 2>/dev/null | awk '
            /^ *Name: *gfx/ { g = $2; want = 1; next }
            want && /^ *Marketing Name:/ { sub(/^ *Marketing Name: */, ""); print $0 " (" g ")"; want = 0 }')
        gpu_count=$(say "$agents" | grep -c .)
        [ "$gpu_count" -gt 0 ] && gpu_name="GPU 0: $(say "$agents" | sed -n 1p)"
        gpus="rocminfo: $gpu_count GPU(s)"
    else
        gpus="rocminfo not found: no ROCm"
    fi
fi

libc=$(getconf GNU_LIBC_VERSION 2>/dev/null | sed 's/^glibc //')
say "gpu-kit $GPU on $(uname -n): $gpus; glibc ${libc:-unknown} (the kit needs $GLIBC_NEEDED)${notes}"
if [ -n "$libc" ] && ! say "$libc $GLIBC_NEEDED" | awk '{ split($1, a, "."); split($2, b, ".");
        exit !(a[1] > b[1] || (a[1] == b[1] && a[2] >= b[2])) }'; then
    say "gpu-kit: warning: this node's glibc $libc is older than the $GLIBC_NEEDED the kit was built against: programs will not load"
fi

logs="$KIT/logs"
mkdir -p "$logs" 2>/dev/null && [ -w "$logs" ] || { logs="${TMPDIR:-/tmp}/gpu-kit-logs.$$"; mkdir -p "$logs"; }
limit=
command -v timeout >/dev/null 2>&1 && limit="timeout 600"
pass=0 fail=0 skip=0

report() {   # verdict program text
    say "$1 $2 ($3)"
    case $1 in PASS) pass=$((pass + 1)) ;; FAIL) fail=$((fail + 1)) ;; SKIP) skip=$((skip + 1)) ;; esac
}

run_one() {  # program language needs-GPU-reason
    log="$logs/$1.log"
    # A shell of its own runs the program, so that its "Segmentation fault" goes to the log too.
    offload=
    # A GPU is here: an OpenMP target region that falls back to the host is a failure.
    [ "$2" = openmp ] && [ "$gpu_count" -gt 0 ] && offload=MANDATORY
    OMP_TARGET_OFFLOAD=${offload:-${OMP_TARGET_OFFLOAD:-DEFAULT}} \
        sh -c 'cd "$1" || exit 2; shift; "$@"; exit $?' run-one "$KIT" $limit "$KIT/bin/$1" </dev/null >"$log" 2>&1
    rc=$?
    status="exit status $rc"
    [ "$rc" -gt 128 ] && status="killed by signal $((rc - 128))"
    [ "$rc" -eq 124 ] && [ -n "$limit" ] && status="still running after 600 s, stopped"
    last=$(sed -n '$p' "$log")
    devices=$(sed -n 's/^devices: *\([0-9][0-9]*\) *$/\1/p; s/.*devices available: *\([0-9][0-9]*\).*/\1/p' "$log" | sed -n 1p)
    if [ -z "$devices" ]; then
        if grep -q ' on the GPU' "$log"; then devices=gpu
        elif grep -q -e 'no CUDA device' -e 'no HIP device' "$log"; then devices=0
        fi
    fi
    case $2 in
        openmp) none="no OpenMP offload device" ;;
        cuda) none="no CUDA device, kernels not run" ;;
        *) none="no HIP device, kernels not run" ;;
    esac
    if [ "$rc" -ne 0 ] || [ "$last" != PASS ]; then
        if [ -n "$3" ] && [ "$gpu_count" -eq 0 ]; then
            report SKIP "$1" "no GPU on this node: $3"
        else
            why=$(grep -i 'fatal' "$log" | sed -n 1p)
            [ -n "$why" ] || why=$(grep -i -e error -e fault -e abort "$log" |
                grep -v -e 'Consult https' -e 'Source location information' | sed -n 1p)
            [ -n "$why" ] || why=$(grep -v -e '^ *$' -e '^PASS$' -e '^FAIL$' "$log" | sed -n '$p')
            why=$(say "$why" | cut -c1-160)
            report FAIL "$1" "${gpu_name:-no GPU}: $status${why:+: $why}; log $log"
        fi
    elif [ "$devices" = 0 ]; then
        if [ "$gpu_count" -gt 0 ]; then
            case $2 in
                cuda) hint="the CUDA $CUDA_RUNTIME runtime needs a driver whose nvidia-smi 'CUDA Version' is $CUDA_RUNTIME or newer" ;;
                hip) hint="AMD_LOG_LEVEL=3 shows what the HIP runtime found" ;;
                *) hint="LIBOMPTARGET_INFO=-1 shows what the offload runtime found" ;;
            esac
            report FAIL "$1" "$gpu_name on this node, but the program found no device: $hint"
        else
            report PASS "$1" "host fallback: $none"
        fi
    elif [ "$devices" = gpu ]; then
        report PASS "$1" "${gpu_name:-$VENDOR GPU}"
    elif [ -n "$devices" ]; then
        report PASS "$1" "${gpu_name:-$VENDOR GPU}; the program saw $devices device(s)"
    elif [ "$gpu_count" -gt 0 ] && [ "$2" = openmp ]; then
        report PASS "$1" "$gpu_name; OMP_TARGET_OFFLOAD=MANDATORY"
    elif [ "$gpu_count" -gt 0 ]; then
        report PASS "$1" "$gpu_name"
    else
        report PASS "$1" "host fallback: no GPU on this node"
    fi
}

while IFS='|' read -r prog lang gpu_only host_only; do
    if [ -n "$prog" ] && [ -n "$host_only" ] && [ "$gpu_count" -gt 0 ]; then
        report SKIP "$prog" "$gpu_name cannot run its device code: $host_only"
    elif [ -n "$prog" ]; then
        run_one "$prog" "$lang" "$gpu_only"
    fi
done <<'PROGRAMS'
@PROGRAMS@
PROGRAMS

say "gpu-kit $GPU: $((pass + fail + skip)) programs: $pass PASS, $fail FAIL, $skip SKIP (outputs in $logs)"
[ "$fail" -eq 0 ]
"""


def write_run_sh(kit: Path, target: Target, programs: list[Program], needs: dict[str, dict], cuda: str) -> None:
    table = "\n".join(f"{p.name}|{p.language}|{NEEDS_GPU.get(p.name, '')}|{(p.host_only or '').replace('|', '/')}"
                      for p in programs if not p.left_out)
    text = (RUN_SH.replace("@GPU@", target.gpu).replace("@VENDOR@", target.vendor)
            .replace("@GLIBC@", needs.get("GLIBC", {}).get("version", "?"))
            .replace("@CUDA@", cuda).replace("@PROGRAMS@", table))
    (kit / "run.sh").write_text(text)
    os.chmod(kit / "run.sh", 0o755)


def cuda_version(env: dict) -> str:
    nvcc = shutil.which("nvcc", path=env["PATH"])
    if not nvcc:
        return ""
    m = re.search(r"release (\d+\.\d+)", _run([nvcc, "--version"], env).stdout)
    return m.group(1) if m else ""


def manifest_text(m: dict) -> str:
    """MANIFEST.txt: manifest.json for people."""
    out = [f"GPU kit for {m['gpu']} ({m['vendor']}), built from {m['built_from']} on {m['built_on']}",
           f"Run it on the GPU node: sh run.sh (docs/gpu-kit.md of offload-tool). The node needs: "
           f"{m['node_needs_text']}.", "", "Programs (bin/):"]
    for p in m["programs"]:
        out.append(f"  {p['name']:<22} {p['language']:<7} from {p['from']}; device code {', '.join(p['archs'])}")
        for line in p["runs_on"]:
            out.append(f"  {'':<22} verify: {line}")
        if p.get("needs_gpu"):
            out.append(f"  {'':<22} needs a GPU to pass: {p['needs_gpu']}")
        if p.get("host_only"):
            out.append(f"  {'':<22} runs on the host only (run.sh skips it on a GPU node): {p['host_only']}")
    out += ["", "Left out (cannot run on this GPU or cannot be built here):"]
    out += [f"  {p['name']:<22} {p['why']}" for p in m["left_out"]] or ["  (none)"]
    out += ["", "Packed (lib/), and why:"]
    for lib in m["packed"]:
        out.append(f"  {lib['file']:<28} {lib['bytes'] / 1048576:7.1f} MiB  from {lib['from']}")
        for why in lib["why"]:
            out.append(f"  {'':<28} {why}")
    out += ["", "Not packed: the node has them, or they are not needed:"]
    for lib in m["not_packed"]:
        out.append(f"  {lib['library']:<28} {lib['kind']}: {lib['why']} (used by {', '.join(lib['used_by'])})")
    out += ["", "Notes:"] + [f"  - {n}" for n in m["notes"]]
    return "\n".join(out) + "\n"


def pack(target: Target, programs: list[Program], dist_dir: Path, build_dir: Path, env: dict) -> tuple[Path, Path]:
    """Write dist/gpu-kit-<GPU>/ and its archive; (folder, archive)."""
    built = [p for p in programs if not p.left_out]
    lib_dirs = runtime_dirs(env, target.vendor)
    packed, left = closure(built, lib_dirs)

    kit = dist_dir / f"gpu-kit-{target.safe}"
    shutil.rmtree(kit, ignore_errors=True)
    (kit / "bin").mkdir(parents=True)
    (kit / "lib").mkdir()
    for p in built:
        shutil.copy2(p.path, kit / "bin" / p.name)
    for lib in packed.values():
        shutil.copyfile(lib.source, kit / "lib" / lib.soname)
        os.chmod(kit / "lib" / lib.soname, 0o755)

    files = [kit / "bin" / p.name for p in built] + [kit / "lib" / s for s in packed]
    needs = node_needs(files)
    cuda = cuda_version(env) if any(p.language == "cuda" for p in built) else ""
    needs_text = ", ".join(filter(None, [
        f"glibc {needs['GLIBC']['version']} or newer ({needs['GLIBC']['file']})" if "GLIBC" in needs else "",
        f"a libstdc++ with GLIBCXX_{needs['GLIBCXX']['version']} ({needs['GLIBCXX']['file']})"
        if "GLIBCXX" in needs else "",
        _driver_text(target.vendor, cuda),
    ]))
    omp = [p for p in built if p.language == "openmp"]
    notes = [f"Built for {target.arch}; checked with offload-tool verify --runs-on={target.gpu}."]
    if omp and lib_dirs:
        notes.append(f"OpenMP offload runtime: clang-19 -print-file-name=libomptarget.so -> {lib_dirs[0]}. LLVM 19's "
                     "libomptarget has its CUDA, AMDGPU and host plugins built in (no libomptarget.rtl.*.so) and loads "
                     "the driver by name at run time (libcuda.so, libhsa-runtime64.so: the node's; run.sh links "
                     "the versioned name where only that exists); it links libLLVM (JIT of LLVM IR images), "
                     "which travels with its dependencies.")
        notes.append("OpenMP device runtime: linked into each program's device image by clang-19 "
                     "(libomptarget.devicertl.a at link time); nothing of it is loaded at run time.")
    if cuda:
        notes.append(f"CUDA runtime: libcudart of CUDA {cuda} (nvcc links it as a shared library).")
    notes.append("On a node with a GPU, run.sh runs OpenMP programs with OMP_TARGET_OFFLOAD=MANDATORY: a target "
                 "region that would fall back to the host fails instead.")

    manifest = {
        "gpu": target.gpu, "vendor": target.vendor, "arch": target.arch,
        "built_from": _source_id(), "built_on": _os_name(),
        "node_needs": needs, "node_needs_text": needs_text,
        "programs": [{"name": p.name, "language": p.language, "from": _origin(p), "archs": p.archs,
                      "runs_on": p.runs_on, **({"needs_gpu": NEEDS_GPU[p.name]} if p.name in NEEDS_GPU else {}),
                      **({"host_only": p.host_only} if p.host_only else {})}
                     for p in built],
        "left_out": [{"name": p.name, "from": _origin(p), "why": p.left_out} for p in programs if p.left_out],
        "packed": [{"file": f"lib/{lib.soname}", "from": lib.source, "bytes": os.path.getsize(lib.source),
                    "why": lib.why} for lib in sorted(packed.values(), key=lambda l: l.soname)],
        "not_packed": [{"library": name, **info, "used_by": sorted(set(info["used_by"]))}
                       for name, info in sorted(left.items())],
        "notes": notes,
    }
    (kit / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    (kit / "MANIFEST.txt").write_text(manifest_text(manifest))
    write_run_sh(kit, target, programs, needs, cuda)
    check_kit(kit)
    return kit, archive(kit, build_dir)


def _driver_text(vendor: str, cuda: str) -> str:
    if vendor == "amd":
        return "the AMD GPU driver and ROCm (libhsa-runtime64.so.1, libamd_comgr.so.2)"
    return f"the NVIDIA driver, one for CUDA {cuda} or newer (nvidia-smi's 'CUDA Version')" if cuda else "the NVIDIA driver"


def _origin(p: Program) -> str:
    if p.build == "example":
        return f"example_project ({p.target.removeprefix('build/')})"
    return f"tests/kernel_corpus, {p.build.removeprefix('corpus-')} ({p.target})"


def _source_id() -> str:
    """This checkout's commit, not the time: a kit rebuilt from the same sources and toolchain is
    the same bytes, and its archive is not compressed again (`archive`)."""
    cp = _run(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"]) if shutil.which("git") else None
    return f"offload-tool {cp.stdout.strip()}" if cp and cp.returncode == 0 else "offload-tool"


def _os_name() -> str:
    try:
        with open("/etc/os-release") as f:
            pretty = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line).get("PRETTY_NAME", "")
        return f"{pretty.strip(chr(34)) or 'Linux'} ({platform.machine()})"
    except OSError:
        return platform.platform()


def check_kit(kit: Path) -> None:
    """What run.sh will see on the node (ldd with only the kit's lib/ on LD_LIBRARY_PATH): every
    library resolves, and each one a file of the kit links is in the kit's lib/ or a system
    library. (What a system library links in turn, such as ROCm's libhsa-runtime64's libelf, is
    the node's.)"""
    lib = str(kit / "lib")
    for path in sorted((kit / "bin").iterdir()) + sorted((kit / "lib").iterdir()):
        found = ldd(path, [lib])
        for name, file in found.items():
            if file is None:
                raise KitError(f"{path.relative_to(kit)}: {name} not found (ldd with the kit's lib/)")
        for name in elf_info(path)["needed"]:
            if system_kind(name) is None and os.path.dirname(found.get(name) or "") != lib:
                raise KitError(f"{path.relative_to(kit)}: {name} resolves outside the kit, to {found.get(name)} (ldd)")


def _tar_bytes(kit: Path) -> bytes:
    """The kit as a tar, the same bytes for the same files (sorted, owner root, time 0): an
    unchanged kit is not compressed again."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in [kit] + sorted(kit.rglob("*")):
            info = tar.gettarinfo(str(path), arcname=str(path.relative_to(kit.parent)))
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = 0
            if info.isfile():
                with open(path, "rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    return buf.getvalue()


def archive(kit: Path, build_dir: Path) -> Path:
    """dist/gpu-kit-<GPU>.tar.xz: xz, which every Linux system unpacks (`tar -xJf`; zstd is not
    everywhere). Level 3 on all cores: the sm_90 kit's 185 MiB (libLLVM's 123 MiB the most) make
    46 MiB in about a quarter of level 6's time, which makes 41 MiB. An archive of the same tar
    bytes as the last one is kept."""
    data = _tar_bytes(kit)
    digest = hashlib.sha256(data).hexdigest()
    out = kit.with_name(kit.name + ".tar.xz")
    stamp = build_dir / "archive.sha256"
    if not (out.exists() and stamp.exists() and stamp.read_text().strip() == f"{digest} {out.stat().st_size}"):
        tmp = out.with_name(out.name + ".tmp")
        xz = shutil.which("xz")
        if xz:   # both cores, where Python's lzma uses one
            with open(tmp, "wb") as f:
                subprocess.run([xz, "-3", "-T0", "-c"], input=data, stdout=f, check=True)
        else:
            import lzma
            tmp.write_bytes(lzma.compress(data, preset=3))
        os.replace(tmp, out)
        stamp.write_text(f"{digest} {out.stat().st_size}\n")
    size = out.stat().st_size
    if size >= MAX_ARCHIVE_BYTES:
        raise KitError(f"{out}: {size / 1048576:.1f} MiB, over the kit's limit of {MAX_ARCHIVE_BYTES // 1048576} MiB")
    return out


# --------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0].strip("`: "))
    parser.add_argument("--gpu", default="sm_90",
                        help="the GPU the kit is for: sm_NN or an AMD gfx processor (default sm_90)")
    parser.add_argument("--jobs", "-j", type=int, default=2)
    parser.add_argument("--build-dir", help="where to build (default build/gpu-kit-<GPU>)")
    parser.add_argument("--dist-dir", default=str(REPO / "dist"), help="where the kit goes (default dist/)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        target = parse_target(args.gpu)
        build_dir = Path(args.build_dir or REPO / "build" / f"gpu-kit-{target.safe}").resolve()
        dist_dir = Path(args.dist_dir).resolve()
        example = (REPO / "example_project").resolve()
        if build_dir == example or example in build_dir.parents:
            raise KitError(f"--build-dir {build_dir} is inside example_project/: its own build must stay as it is")
        if shutil.which("ldd") is None:
            raise KitError("ldd not found (Debian package libc-bin): the kit's libraries are found with it")
        env = tool_env()
        programs = build_all(target, build_dir, args.jobs, env)
        verify(target, programs, env)
        kit, tarball = pack(target, programs, dist_dir, build_dir, env)
    except KitError as exc:
        print(f"gpu-kit: error: {exc}", file=sys.stderr)
        return 1
    m = json.loads((kit / "manifest.json").read_text())
    unpacked = sum(f.stat().st_size for f in kit.rglob("*") if f.is_file())
    libraries = "library" if len(m["packed"]) == 1 else "libraries"
    print(f"gpu-kit: {len(m['programs'])} program(s), {len(m['packed'])} {libraries} packed "
          f"({', '.join(Path(l['file']).name for l in m['packed'])})")
    print(f"gpu-kit: {kit} ({unpacked / 1048576:.0f} MiB), {tarball} ({tarball.stat().st_size / 1048576:.1f} MiB) "
          f"in {time.monotonic() - started:.0f} s")
    print(f"gpu-kit: on the GPU node: tar -xJf {tarball.name} && sh {kit.name}/run.sh  "
          f"(what it holds: {kit.name}/MANIFEST.txt)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
