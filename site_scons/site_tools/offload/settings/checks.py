"""Settings that would reach the wrong command, or none, or cannot build: said when the SConscript
is read, naming the setting and the fix, at the SConstruct/SConscript line that asked
(`user_frames`).

The flag variables each feed one kind of step: `OFFLOAD_HOSTFLAGS` every host compile (clang's,
the environment's own for plain host sources, nvcc's host compiler through `-Xcompiler=`),
`OFFLOAD_DEVICEFLAGS` clang's device compiles, `OFFLOAD_NVCCFLAGS` nvcc itself. Two mistakes are
common and silent otherwise:

- nvcc's own options in `OFFLOAD_HOSTFLAGS` or `OFFLOAD_DEVICEFLAGS` (where they went before
  `OFFLOAD_NVCCFLAGS` existed): a `UserError` naming `OFFLOAD_NVCCFLAGS`, since no host compiler
  and no clang device compile takes them;
- a flag variable that no step of a program or library uses (`OFFLOAD_DEVICEFLAGS` in a program
  whose device code nvcc compiles, `OFFLOAD_NVCCFLAGS` where clang compiles the `.cu` sources):
  a note once per variable and link, naming where the flags belong."""

from __future__ import annotations

import functools
import os
import re
import sys
import types

import SCons.Errors
import SCons.Util

from offload_tool.rules import openmp_runtime as _openmp_runtime

from ..scons import actions as _actions
from ..scons import nodes as _nodes
from . import archs as _archs
from ..scons import signatures as _signatures
from ..toolchain import discovery as _toolchain
from ..toolchain import installations as _installations
from ..toolchain import jobs as _jobs

# Options only nvcc takes (long and short spellings; `=value` forms are matched by the name).
_NVCC_ONLY = {
    "-Xcompiler", "--compiler-options", "-Xptxas", "--ptxas-options", "-Xnvlink", "--nvlink-options",
    "-Xcudafe", "-Xfatbinary", "--fatbin-options", "--extended-lambda", "--expt-extended-lambda",
    "-expt-extended-lambda", "--expt-relaxed-constexpr", "-expt-relaxed-constexpr", "-rdc",
    "--relocatable-device-code", "-dc", "--device-c", "-dlink", "--device-link", "-lineinfo",
    "--generate-line-info", "-use_fast_math", "--use_fast_math", "-gencode", "--generate-code", "-ccbin",
    "--compiler-bindir", "--default-stream", "-default-stream", "-maxrregcount", "--maxrregcount",
    "--diag-suppress", "-diag-suppress", "--keep", "-keep", "--resource-usage", "-res-usage",
    "--gpu-architecture", "--gpu-code", "-Wno-deprecated-gpu-targets", "--threads", "--ftz", "-ftz",
    "--prec-div", "-prec-div", "--prec-sqrt", "-prec-sqrt", "--fmad", "-fmad",
}

_WHERE = {
    "OFFLOAD_HOSTFLAGS": "host compile flags reach the host compiler as they are (nvcc's host compiler gets "
                         "each through -Xcompiler)",
    "OFFLOAD_DEVICEFLAGS": "it holds clang's device-compile flags",
}


def _flags(senv, var: str) -> list[str]:
    return [str(f) for f in SCons.Util.flatten([senv.get(var) or []])]


def _nvcc_option(flag: str) -> str | None:
    name = flag.split("=", 1)[0]
    return name if name in _NVCC_ONLY else None


_checked: dict[tuple, object] = {}


def check(env, kw: dict, senv) -> None:
    """Refuse nvcc's options in the host and device flag variables of `senv` (`env` with the
    caller's overrides `kw`), once per (environment, overrides)."""
    try:
        key = (id(env), _signatures.frozen(dict(kw)))
    except TypeError:
        key = None
    if key is not None and key in _checked:
        return
    renamed(env, senv)
    for var, why in _WHERE.items():
        for flag in _flags(senv, var):
            name = _nvcc_option(flag)
            if name:
                raise SCons.Errors.UserError(
                    f"offload: {var} holds nvcc's option '{flag}', which no step given {var} takes ({why}): "
                    f"put nvcc's options in OFFLOAD_NVCCFLAGS")
    if key is not None:
        _checked[key] = env   # (holds `env`: its id stays its own)


#: Variables whose name changed: the old name, the new one and why. A SConstruct that sets an old
#: name is told the new one (`renamed`) and its value is used.
RENAMED = {
    "OFFLOAD_LDSCRIPTCOMSTR": ("OFFLOAD_LDSCRIPTSTR", "the ld script is written by the tool, not by a command, "
                               "and SCons names such a step's message *STR, as INSTALLSTR"),
    "OFFLOAD_DISTSERVERCOMSTR": ("OFFLOAD_DISTSERVERSTR", "the sccache-dist configuration is written by the tool, "
                                 "not by a command, and SCons names such a step's message *STR, as INSTALLSTR"),
}


def renamed(env, senv) -> None:
    """A variable set under its old name (`RENAMED`): said once, with the new name, and
    its value used under the new one (in `env`, unless the new name is set there too)."""
    for old, (new, why) in RENAMED.items():
        if old in senv:
            _warn(("renamed", old), f"{old} is now {new} ({why}): its value is used; rename it")
            if env.get(new) == _actions.DEFAULTS.get(new):
                env[new] = senv[old]


_noted: set[tuple[str, str]] = set()


def unused_in_link(senv, target, flavours, elsewhere) -> None:
    """Note the flag variables set for a link's objects that none of their steps used: a variable
    one of the objects' `flavours` says where it belongs (`Flavour.misplaced_flags`) and none of
    them reads (`Flavour.flag_vars`), unless the environment uses it for what it has declared
    before (`elsewhere(var)`: an OpenMP program beside a CUDA one shares OFFLOAD_DEVICEFLAGS).
    Declared after the link, such a use is not seen."""
    unused = []
    for var in sorted({v for f in flavours for v in f.misplaced_flags}):
        if _flags(senv, var) and not any(var in f.flag_vars for f in flavours) and not elsewhere(var):
            unused.append((var, next(f.misplaced_flags[var] for f in flavours if var in f.misplaced_flags)))
    for var, why in unused:
        if (var, str(target)) not in _noted:
            _noted.add((var, str(target)))
            sys.stderr.write(f"offload: note: {var} reaches no step of '{target}': {why}\n")


# --------------------------------------------------------------------------------------------
# Archs, compilers and runtimes

_VENDOR_WORDS = {"nvidia": "NVIDIA (sm_*)", "amd": "AMD (gfx*)"}


def archs_of_source(senv, s, lang, archs: list[str], hip_code: str | None = None) -> None:
    """A source of an offload language for which `OFFLOAD_ARCHS` names no arch its language is
    built for: without this error the link fails later with `--wrapper-jobs` or
    `__tgt_target_kernel` (OpenMP), `__hip_gpubin_handle_` (HIP), or nvcc builds sm_75 nobody
    asked for (CUDA). `hip_code`: the file that includes `hip/hip_runtime.h` when the source is
    HIP code its suffix made CUDA (`.cu`, hipified code): the fix is its language, not an NVIDIA
    arch (which would compile HIP's headers as CUDA and fail there)."""
    if archs:
        return
    kinds = " or ".join(_VENDOR_WORDS.get(v, v) for v in lang.vendors)
    listed = _archs.raw_archs(senv)
    if hip_code:
        via = "" if hip_code in (_nodes.abspath(s), _nodes.abspath(s.srcnode())) else \
            f" (through '{os.path.relpath(hip_code, _nodes.abspath(s.srcnode().dir))}')"
        have = f"OFFLOAD_ARCHS ({', '.join(listed)}) has none" if listed else "OFFLOAD_ARCHS is empty"
        why = "" if senv.get("OFFLOAD_LANG") else ", from its suffix"
        raise SCons.Errors.UserError(
            f"offload: '{s}' ({lang.name}{why}) includes hip/hip_runtime.h{via}: it is HIP code; "
            f"set OFFLOAD_LANG='hip' for it (env.OffloadObject('{s}', OFFLOAD_LANG='hip'), or OFFLOAD_LANG='hip' "
            f"on the environment or the builder call for all its sources) to build it for AMD (gfx*) archs. "
            f"As {lang.name} it is built for {kinds} archs, and {have}")
    if not listed:
        raise SCons.Errors.UserError(
            f"offload: OFFLOAD_ARCHS is empty: '{s}' ({lang.name}) needs the offload archs to build for, e.g. "
            f"OFFLOAD_ARCHS=['sm_80'] or ['gfx90a'] ({kinds}); OFFLOAD_LANG='host' compiles a source for the host "
            "only")
    raise SCons.Errors.UserError(
        f"offload: '{s}' ({lang.name}) is built for {kinds} archs, and OFFLOAD_ARCHS ({', '.join(listed)}) has "
        f"none: add one, or build it in an environment (or call) whose OFFLOAD_ARCHS has one")


_clang_checked: dict[str, str] = {}


def clang_is_clang(senv) -> None:
    """`OFFLOAD_CLANG` must be a clang (or a wrapper that runs one): its `--version` says so."""
    command = senv.subst("$OFFLOAD_CLANG").strip()
    if command in _clang_checked:
        return
    info = _toolchain.probe_compiler(senv, command)
    _clang_checked[command] = info.identity
    if info.path and "clang version" not in info.identity:
        first = info.identity.strip().split(" | ")[0].splitlines()[0] if info.identity.strip() else "nothing"
        raise SCons.Errors.UserError(
            f"offload: OFFLOAD_CLANG='{command}' is not clang (its --version says '{first}'): the offload "
            "builders drive clang 19 or later (e.g. OFFLOAD_CLANG='clang-19'); a plain host compiler belongs "
            "in CC/CXX")


_warned: set[tuple] = set()


def _warn(key, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        sys.stderr.write(f"offload: warning: {message}\n")


def openmp_runtime(senv) -> None:
    """A clang without LLVM's OpenMP offload runtime (host `libomptarget.so` and the device
    runtime archive) compiles OpenMP offload sources but cannot link them: said once, before
    the build, with what provides it."""
    info = _toolchain.probe_compiler(senv, senv.subst("$OFFLOAD_CLANG").strip())
    if info.path is None or info.has_openmp_offload:
        return
    missing = [n for n, found in (("libomptarget.so", info.openmp_lib_dir),
                                  ("the OpenMP device runtime (libompdevice.a / libomptarget.devicertl.a)",
                                   info.device_runtime)) if not found]
    major = info.major or "N"
    _warn(("openmp", info.command), f"{info.command} has no OpenMP offload runtime ({' and '.join(missing)} not "
          f"found by -print-file-name=): OpenMP offload programs will not link; install LLVM {major}'s OpenMP "
          f"offload runtime (Debian: libomp-{major}-dev and liboffload-{major}-dev where they hold it), or use "
          "a clang that has it (OFFLOAD_CLANG='clang-19', Debian: libomp-19-dev)")


def _clang_says(senv, topic: str, setting: str, args: list[str]) -> tuple[str, str] | None:
    """(the `$OFFLOAD_CLANG` command, what it prints for `args` followed by the input `/dev/null`),
    the first time `topic` is asked for this command and `setting` (the folder asked about); None
    after, or when the command is not found (its own error says so). The answer is kept in the
    probe cache while the compiler and the folder are unchanged."""
    command = senv.subst("$OFFLOAD_CLANG").strip()
    key = (topic, command, setting)
    if key in _warned:
        return None
    _warned.add(key)
    path = _toolchain.resolve(senv, command)
    if not path:
        return None
    return command, _toolchain.run_quietly_kept(senv, command, path, [*args, "-o", os.devnull, os.devnull],
                                                setting or None) or ""


def cuda_for_clang(senv) -> None:
    """clang against a CUDA newer than it supports (clang 19 and CUDA 13: its headers fail to
    compile) is said once, before the build, with the ways out."""
    installation = _installations.cuda(senv)
    cuda = installation.folder
    said = _clang_says(senv, "cuda", cuda, ["-x", "cuda", "--offload-arch=sm_80"]
                       + installation.path_argv() + ["-nocudalib", "-E"])
    if said and "CUDA version is newer than the latest" in said[1]:
        version = said[1].split("latest", 1)[1].split("[")[0].strip(" .")
        sys.stderr.write(f"offload: warning: {said[0]} knows CUDA up to the {version}; the CUDA at "
                         f"'{cuda or 'its default path'}' is newer and its headers may not compile with it: "
                         "OFFLOAD_CUDA_COMPILER='nvcc' builds .cu sources with nvcc, or use a newer clang "
                         "(OFFLOAD_CLANG) or an older CUDA (OFFLOAD_CUDA_PATH)\n")


@functools.lru_cache(maxsize=None)
def _runtime_in(lib_dir: str) -> _openmp_runtime.Runtime | None:
    """The OpenMP offload runtime `libomptarget.so` of `lib_dir` is (its soname, the file the
    development link names), asked once per folder: the check runs for each pseudo-builder call."""
    return _openmp_runtime.runtime_of([os.path.basename(os.path.realpath(os.path.join(lib_dir, "libomptarget.so")))])


def openmp_nvidia_cubins(senv) -> None:
    """OpenMP programs for NVIDIA GPUs whose cubins the clang's own OpenMP runtime will refuse
    (LLVM 20 and older against CUDA 13 or newer: `offload_tool.rules.openmp_runtime` says why) are
    said once, before the build: they build, verify says which GPU would not load them, and they
    run on the host instead of the GPU. The runtime's version comes from the `libomptarget.so` the
    clang links (found by -print-file-name=), the CUDA's from the ptxas the clang runs (its -###
    names it; its --version says the release)."""
    nvidia = [a for a in _archs.canonical_archs(senv, _archs.NEWEST_LLVM) if _archs.vendor(a) == "nvidia"]
    info = _toolchain.probe_compiler(senv, senv.subst("$OFFLOAD_CLANG").strip())
    if not nvidia or info.path is None or not info.openmp_lib_dir:
        return
    runtime = _runtime_in(info.openmp_lib_dir)
    if runtime is None or runtime.major >= _openmp_runtime.FIRST_MAJOR_READING_ABI_V2:
        return
    installation = _installations.cuda(senv)
    said = _clang_says(senv, "openmp-cubins", installation.folder,
                       ["-fopenmp", f"--offload-arch={nvidia[0]}", *installation.path_argv(), "-###", "-c", "-x", "c"])
    ptxas = next((job[0] for job in _jobs.parse_jobs(said[1] if said else "")
                  if os.path.basename(job[0]) == "ptxas"), None)
    if not ptxas:
        return
    version = _toolchain.run_tool_kept(senv, said[0], ptxas, ["--version"]) or ""
    found = re.search(r"release (\d+)\.(\d+)", version)
    if not found or int(found.group(1)) < 13:
        return
    release = f"{found.group(1)}.{found.group(2)}"
    _warn(("openmp-cubins", said[0], ptxas),
          f"OpenMP offload programs built for {', '.join(nvidia)} will not run on those GPUs: {said[0]}'s OpenMP "
          f"runtime ({runtime.soname}) refuses the cubins of CUDA {release}'s ptxas and nvlink ({ptxas}), written "
          f"in NVIDIA's new ELF ABI, which LLVM's runtime reads from LLVM "
          f"{_openmp_runtime.FIRST_MAJOR_READING_ABI_V2} on ('No images found compatible with the installed "
          "hardware'; they run on the host instead). For the GPU, set OFFLOAD_CUDA_PATH to a CUDA 12 or older "
          f"toolkit, or use clang {_openmp_runtime.FIRST_MAJOR_READING_ABI_V2} or later (OFFLOAD_CLANG); "
          "offload-tool verify --runs-on says the same of each program")


def amd_device_libs(senv) -> None:
    """A clang that cannot find the ROCm device libraries its AMD device code needs (clang 22 wants
    ROCm 6.3's; Debian 12 ships older ones) is said once, before the build, in clang's words and
    with the settings that fix it. (The archs are read as the newest LLVM knows them: whether the
    clang in use knows them is checked where its sources are made, `Flavour.check_archs`.)"""
    amd = [a for a in _archs.canonical_archs(senv, _archs.NEWEST_LLVM) if _archs.vendor(a) == "amd"]
    if not amd:
        return
    installation = _installations.rocm(senv)
    # The code-object version the device compiles ask for decides which libraries clang wants
    # (`-mcode-object-version=5` takes ROCm 5's with clang 22).
    abi = [str(w) for line in _actions.command_lines(senv, "$OFFLOAD_DEVICEFLAGS") for w in line
           if str(w).startswith("-mcode-object-version=")][-1:]
    # Asked once per build for each version asked for (an environment of its own may ask another).
    said = _clang_says(senv, " ".join(["rocm", *abi]), installation.device_lib_folder,
                       ["-x", "hip", f"--offload-arch={amd[0]}"] + installation.device_lib_argv() + abi
                       + ["-nogpuinc", "-###", "-c"])
    line = next((ln for ln in said[1].splitlines() if "cannot find ROCm device library" in ln), None) if said else None
    if line:
        sys.stderr.write(f"offload: warning: {said[0]} cannot build AMD device code here: "
                         f"{line.split('error: ', 1)[-1].split(';')[0]}: set OFFLOAD_ROCM_DEVICE_LIB_PATH (or "
                         "OFFLOAD_ROCM_PATH) to those libraries, ask for the code-object version of the ones "
                         "installed (OFFLOAD_DEVICEFLAGS and OFFLOAD_LINKFLAGS: -mcode-object-version=5), or use a "
                         "clang that matches them (OFFLOAD_CLANG='clang-19' with Debian's rocm-device-libs)\n")


# --------------------------------------------------------------------------------------------
# Errors at the line that asked

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the tool's top folder


def _requesting_frame():
    """The innermost frame of the SConstruct/SConscript (or other user code) that called the
    tool: neither this tool's nor SCons's own."""
    frame = sys._getframe(2)
    while frame is not None:
        name = os.path.abspath(frame.f_code.co_filename)
        if not name.startswith(_HERE + os.sep) and os.sep + "SCons" + os.sep not in name:
            return frame
        frame = frame.f_back
    return None


#: Which call of a pseudo-builder the build is in (`user_frames` counts them): what holds for
#: one source's settings within one call (one link's sources) holds for the next source with the
#: same settings, and no SConscript line runs in between to change the environment.
CALL = [0]


def user_frames(fn):
    """`fn` (a pseudo-builder or method) whose `UserError`s point at the line of the SConstruct or
    SConscript that called it (SCons names the deepest frame outside SCons itself, which was a
    line of this tool)."""
    @functools.wraps(fn)
    def wrapper(*args, **kw):
        CALL[0] += 1
        try:
            return fn(*args, **kw)
        except SCons.Errors.UserError as exc:
            frame = _requesting_frame()
            if frame is None:
                raise
            raise exc.with_traceback(types.TracebackType(None, frame, frame.f_lasti, frame.f_lineno)) from None
    return wrapper
