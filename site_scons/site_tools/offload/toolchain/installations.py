"""The vendor installations a device compile is told about: one object per CUDA and per ROCm
installation, from which every flag that names their folders comes.

clang's driver keeps one detector per installation (`CudaInstallationDetector`,
`RocmInstallationDetector`) and takes every path flag of a job from it. The tool does the same,
so that a compile, a link, a clangd entry and a configuration check cannot disagree on which
CUDA or which device libraries they use, and the flag words (`--cuda-path=`, `--rocm-path=`,
`--rocm-device-lib-path=`, `--libomptarget-nvptx-bc-path=`) are written in this module only.

Where each folder comes from; none is guessed from where an executable lives (`nvcc` or `clang`
on PATH may be a wrapper script or a ccache symlink in a folder of its own):

- the CUDA a clang is told about: `OFFLOAD_CUDA_PATH` (the user's, or its default,
  `default_settings`); with none, clang searches its own defaults and no flag is passed;
- the CUDA an nvcc belongs to: asked of nvcc itself (`TOP=` in its `--dryrun` plan);
- the OpenMP NVIDIA device runtime's bitcode (clang 19 must be told its folder): asked of the
  clang in use with its other answers (`discovery.probe_compiler`);
- ROCm: `OFFLOAD_ROCM_PATH` and `OFFLOAD_ROCM_DEVICE_LIB_PATH` (the user's, or their defaults);
  with none, clang's own search.

A folder a setting names is written into commands as the construction variable
(`--cuda-path=$OFFLOAD_CUDA_PATH`): SCons substitutes it where the command is made, so the
command line shows the folder, its signature follows the setting, and a command-line string a
user reads is the one it always was. A folder a compiler named is written as the folder. The
objects are memoised per (compiler, settings): commands ask them once per node, so the answer
is a dictionary look-up."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import subprocess

from . import discovery as _toolchain


def _setting(env, var: str) -> tuple[bool, str]:
    """(whether the build sets `var` at all, its value as a key): the raw value where it holds
    nothing to substitute (no `subst` per node), else its substitution."""
    raw = env.get(var)
    if not raw:
        return False, ""
    return True, raw if isinstance(raw, str) and "$" not in raw else env.subst("$" + var)


@dataclasses.dataclass(frozen=True)
class CudaInstallation:
    """One CUDA installation as the build uses it (clang's `CudaInstallationDetector`)."""

    folder: str         # its top folder as the build's processes see it; '' when none is named
    word: str           # how command lines name it: `$OFFLOAD_CUDA_PATH`, or the folder nvcc named; '' none
    bitcode_dir: str = ""  # folder of the OpenMP NVIDIA device runtime bitcode of its clang; '' none

    @property
    def path_flag(self) -> str:
        """`--cuda-path=` as command lines take it, or '' (the compiler's own search)."""
        return f"--cuda-path={self.word}" if self.word else ""

    def path_argv(self) -> list[str]:
        """`--cuda-path=<folder>` as a word of an argv run here (configuration checks), or none."""
        return [f"--cuda-path={self.folder}"] if self.folder else []

    @property
    def lib_dir(self) -> str:
        """Where the installation keeps `libcudart.so`, as command lines name it (outside the
        default search path: a CUDA link passes it to `-L` and the rpath); '' when none."""
        return f"{self.word}/lib64" if self.word else ""

    def runtime_library(self) -> str | None:
        """The CUDA runtime `libcudart.so` of the installation, when it has one (a static
        library's ld script names the file)."""
        if not self.word:
            return None
        cudart = os.path.join(f"{self.folder}/lib64", "libcudart.so")
        return cudart if os.path.isfile(cudart) else None

    @property
    def bitcode_flag(self) -> str:
        """`--libomptarget-nvptx-bc-path=<folder>` of its clang's OpenMP device runtime (clang 19
        does not find its own), or ''."""
        return f"--libomptarget-nvptx-bc-path={self.bitcode_dir}" if self.bitcode_dir else ""


@dataclasses.dataclass(frozen=True)
class RocmInstallation:
    """One ROCm installation as the build uses it (clang's `RocmInstallationDetector`): its top
    folder (HIP headers and runtime) and the folder of its device libraries (`ocml.bc`, ...)."""

    folder: str             # `$OFFLOAD_ROCM_PATH` substituted; '' when none is named
    word: str               # `$OFFLOAD_ROCM_PATH`, or '' when the build sets none
    device_lib_folder: str  # `$OFFLOAD_ROCM_DEVICE_LIB_PATH` substituted; '' when none is named
    device_lib_word: str    # `$OFFLOAD_ROCM_DEVICE_LIB_PATH`, or '' when the build sets none

    @property
    def path_flag(self) -> str:
        """`--rocm-path=` as command lines take it (HIP compiles), or ''."""
        return f"--rocm-path={self.word}" if self.word else ""

    @property
    def device_lib_flag(self) -> str:
        """`--rocm-device-lib-path=` as command lines take it (AMD device compiles and links), or ''."""
        return f"--rocm-device-lib-path={self.device_lib_word}" if self.device_lib_word else ""

    def device_lib_argv(self) -> list[str]:
        """`--rocm-device-lib-path=<folder>` as a word of an argv run here, or none."""
        return [f"--rocm-device-lib-path={self.device_lib_folder}"] if self.device_lib_folder else []


def default_settings() -> dict[str, str]:
    """The folder settings' defaults: where NVIDIA's installer puts CUDA and Debian's packages the
    ROCm device libraries, when they are there; '' otherwise (no flag: the compiler's own search).
    A build's setting replaces them."""
    rocm_bitcode = "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"
    return {
        "OFFLOAD_CUDA_PATH": "/usr/local/cuda" if os.path.isdir("/usr/local/cuda") else "",
        "OFFLOAD_ROCM_PATH": "/usr" if os.path.isdir(os.path.dirname(rocm_bitcode)) else "",
        "OFFLOAD_ROCM_DEVICE_LIB_PATH": rocm_bitcode if os.path.isdir(rocm_bitcode) else "",
    }


_CUDA: dict[tuple, CudaInstallation] = {}
_ROCM: dict[tuple, RocmInstallation] = {}
_NVCC_CUDA: dict[tuple, CudaInstallation] = {}


def cuda(env) -> CudaInstallation:
    """The CUDA installation the clang in use is told about (`OFFLOAD_CUDA_PATH`), with that
    clang's OpenMP NVIDIA device bitcode folder (memoised per clang and setting)."""
    clang = _toolchain.clang_info(env)
    key = (clang, _setting(env, "OFFLOAD_CUDA_PATH"))
    found = _CUDA.get(key)
    if found is None:
        found = _CUDA[key] = CudaInstallation(
            folder=env.subst("$OFFLOAD_CUDA_PATH").strip(), word="$OFFLOAD_CUDA_PATH" if key[1][0] else "",
            bitcode_dir=(clang.nvptx_bitcode_dir or "") if clang else "")
    return found


def rocm(env) -> RocmInstallation:
    """The ROCm installation a clang HIP or AMD device compile is told about (memoised per
    setting; clang finds what the settings leave out itself)."""
    key = (_setting(env, "OFFLOAD_ROCM_PATH"), _setting(env, "OFFLOAD_ROCM_DEVICE_LIB_PATH"))
    found = _ROCM.get(key)
    if found is None:
        found = _ROCM[key] = RocmInstallation(
            folder=env.subst("$OFFLOAD_ROCM_PATH").strip(), word="$OFFLOAD_ROCM_PATH" if key[0][0] else "",
            device_lib_folder=env.subst("$OFFLOAD_ROCM_DEVICE_LIB_PATH").strip(),
            device_lib_word="$OFFLOAD_ROCM_DEVICE_LIB_PATH" if key[1][0] else "")
    return found


def nvcc_cuda(env) -> CudaInstallation:
    """The CUDA installation `$OFFLOAD_NVCC` belongs to, as nvcc itself names it (`TOP=` in its
    `--dryrun` plan; memoised per command and PATH); an empty one when it cannot say."""
    nvcc = env.subst("$OFFLOAD_NVCC")
    if not nvcc:
        return CudaInstallation("", "")
    key = (nvcc, str(env["ENV"].get("PATH", "")))
    if key not in _NVCC_CUDA:
        top = ""
        try:
            run = subprocess.run([*shlex.split(nvcc), "--dryrun", "-E", "-x", "cu", os.devnull], capture_output=True,
                                 text=True, timeout=60, env=dict(os.environ, **env["ENV"]))
            m = re.search(r"^#\$ TOP=(.*)$", run.stdout + run.stderr, re.M)
            top = os.path.normpath(m.group(1).strip()) if m else ""
        except (OSError, subprocess.SubprocessError, ValueError):
            pass
        _NVCC_CUDA[key] = CudaInstallation(top, top)
    return _NVCC_CUDA[key]


#: The installation whose device libraries a device compile or link for a vendor's arch is told
#: about, and the flag that names them, in the order links pass them.
_DEVICE_LIBRARIES = (("nvidia", lambda env: cuda(env).path_flag), ("amd", lambda env: rocm(env).device_lib_flag))


def device_flags(env, vendors) -> list[str]:
    """The installation flags a device compile (one vendor) or a link (the vendors of its archs)
    passes: the CUDA folder for NVIDIA, the ROCm device libraries for AMD; none where the build
    names no folder (the compiler's own search)."""
    return [f for vendor, flag in _DEVICE_LIBRARIES if vendor in vendors for f in [flag(env)] if f]


def nvptx_bc_flag(target, source, env, for_signature):
    """`$_OFFLOAD_NVPTX_BCFLAG`: the OpenMP NVIDIA device bitcode flag of the clang in use, or ''."""
    return cuda(env).bitcode_flag
