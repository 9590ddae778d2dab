"""Construction variables: the user-facing defaults, and the callable `_OFFLOAD_*` variables that
commands substitute (flags that depend on the compiler in use, the node's arch or language).

Each callable answers from memoised probes (`_toolchain.probe_compiler`), so substituting a
command per node costs a dictionary look-up, not a process."""

from __future__ import annotations

import os
import sys

import SCons.Subst
import SCons.Util

from . import _archs, _dist, _languages, _toolchain

# Bump when the meaning of the tool's own actions changes (part of every library-backed signature).
TOOL_SCHEMA = "offload-scons/2"


# --------------------------------------------------------------------------------------------
# The compiler in use

def clang_info(env) -> _toolchain.Compiler | None:
    """What the clang in use (`$OFFLOAD_CLANG`, maybe a wrapper or ccache) says about itself."""
    clang = env.subst("$OFFLOAD_CLANG") if env.get("OFFLOAD_CLANG") else ""
    return _toolchain.probe_compiler(env, clang) if clang else None


def clang_major(env) -> int:
    """Major version of the clang in use: from its name (`clang-22`) when it says, else asked."""
    import re
    clang = env.subst("$OFFLOAD_CLANG") if env.get("OFFLOAD_CLANG") else ""
    m = re.search(r"clang(?:\+\+)?-(\d+)$", os.path.basename(clang))
    if m:
        return int(m.group(1))
    info = clang_info(env)
    return (info.major if info else None) or 19


def library_llvm_version(env) -> int:
    """The `--llvm-version` the library CLIs take for the clang in use: how its OffloadBinary
    kinds are encoded. The library knows two encodings: LLVM 19's, and the one from 20 on."""
    return 19 if clang_major(env) < 20 else 22


#: Where a CUDA install keeps `libcudart.so` (outside the default search path).
CUDA_LIBDIR = "$OFFLOAD_CUDA_PATH/lib64"


def llvm_libdir(env) -> str:
    """Where the clang in use has LLVM's OpenMP offload runtime (libomptarget.so), as it says."""
    info = clang_info(env)
    return (info.openmp_lib_dir or "") if info else ""


def _clang_id(target, source, env, for_signature):
    """Identity of the clang in use (`--version`), for the varlist of actions it drives."""
    info = clang_info(env)
    return info.identity if info else "none"


def _nvcc_id(target, source, env, for_signature):
    nvcc = env.subst("$OFFLOAD_NVCC") if env.get("OFFLOAD_NVCC") else ""
    return _toolchain.probe_compiler(env, nvcc, clang=False).identity if nvcc else "none"


def _library_id(target, source, env, for_signature):
    import offload_tool
    return f"offload_tool {offload_tool.__version__} {TOOL_SCHEMA}"


def _clangxx(target, source, env, for_signature):
    """The C++ driver of the clang in use: its `clang++` companion when the build finds one, else
    the same command in g++ mode (a wrapper script has no companion)."""
    clang = env.subst("$OFFLOAD_CLANG")
    if not clang:
        return "clang++"
    return _toolchain.clang_companion(env, clang, "clang++") or f"{clang} --driver-mode=g++"


def _device_runtime_flags(target, source, env, for_signature):
    """`-L<dir> -l<name>` of the OpenMP device runtime of the clang in use (relocatable and split
    device links add it themselves; a final link gets it from the driver)."""
    info = clang_info(env)
    rt = info.device_runtime if info else None
    if not rt:
        return ""
    return f"-L{os.path.dirname(rt)} -l{os.path.basename(rt)[3:-2]}"


def _nvptx_bc_path(env) -> str:
    """Folder of libomptarget-nvptx-*.bc of the clang in use (clang 19 needs it named)."""
    info = clang_info(env)
    return (info.nvptx_bitcode_dir or "") if info else ""


def _scons_jobs():
    """`scons -jN`'s N: how many device links clang-linker-wrapper may run at once."""
    import SCons.Script
    try:
        return int(SCons.Script.GetOption("num_jobs") or 1)
    except (AttributeError, TypeError, ValueError):
        return 1


# --------------------------------------------------------------------------------------------
# Compile flags

_DISTRIBUTING_LAUNCHERS = {"distcc", "pump", "distcc-pump", "icecc", "icerun"}


def _local_launcher(target, source, env, for_signature):
    """Default of `OFFLOAD_LOCAL_LAUNCHER`: `$OFFLOAD_LAUNCHER`, unless that launcher sends
    compiles to other machines (distcc, icecream), which a compile that must stay here cannot use."""
    launcher = env.subst("$OFFLOAD_LAUNCHER").split()
    if launcher and os.path.basename(launcher[0]) in _DISTRIBUTING_LAUNCHERS:
        return ""
    if launcher and _dist.client(env) is not None:  # sccache-dist
        return ""
    return "$OFFLOAD_LAUNCHER"


def _launch(target, source, env, for_signature):
    """The launcher of a compile: sources whose offload entry names come from the file identity
    (OpenMP) take `$OFFLOAD_LOCAL_LAUNCHER`, the others `$OFFLOAD_LAUNCHER`."""
    lang = _languages.LANGUAGES.get(env.get("_OFFLOAD_LANG", "openmp"))
    return "$OFFLOAD_LOCAL_LAUNCHER" if lang is None or lang.file_identity else _dist.launcher(env)


def _vendor_flags(target, source, env, for_signature):
    """Flags a device compile needs for its vendor: its language's (`Language.vendor_flags`: the
    OpenMP NVIDIA device bitcode, HIP's ROCm path), then the CUDA install or the ROCm device
    libraries."""
    arch = env.get("OFFLOAD_ARCH", "")
    lang = _languages.LANGUAGES.get(env.get("_OFFLOAD_LANG", "openmp"))
    v = _archs.vendor(arch) if arch else None
    flags = [f for vendor, f in (lang.vendor_flags if lang else ()) if vendor == v]
    if v == "nvidia" and env.get("OFFLOAD_CUDA_PATH"):
        flags.append("--cuda-path=$OFFLOAD_CUDA_PATH")
    elif v == "amd" and env.get("OFFLOAD_ROCM_DEVICE_LIB_PATH"):
        flags.append("--rocm-device-lib-path=$OFFLOAD_ROCM_DEVICE_LIB_PATH")
    return " ".join(flags)


def _nvptx_bc_flag(target, source, env, for_signature):
    """`--libomptarget-nvptx-bc-path=<dir>` of the clang in use (clang 19 must be told), or ''."""
    bc = _nvptx_bc_path(env)
    return "--libomptarget-nvptx-bc-path=" + bc if bc else ""


def _fatbin_id(target, source, env, for_signature):
    """A hash of the HIP fat binary a host compile embeds (its second source), read when the
    command runs; `0` before the file exists, and for a signature (the value is outside them)."""
    import hashlib
    if for_signature or len(source) < 2:
        return "0"
    try:
        with open(source[1].get_abspath(), "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()[:24]
    except OSError:
        return "0"


# --------------------------------------------------------------------------------------------
# Library steps

def _packager_flags(target, source, env, for_signature):
    return "--llvm-version=22" if library_llvm_version(env) == 22 else ""


def _llvm_version_flag(target, source, env, for_signature):
    """`--llvm-version=N` for the library CLIs: how the clang in use encodes OffloadBinary kinds."""
    return f"--llvm-version={library_llvm_version(env)}"


def path_word(text: str):
    """One word of a command line that holds a file name: quoted for the shell as SCons quotes a
    node (`$SOURCE`), so blanks, quotes and `$` in a name reach the program as they are."""
    return SCons.Subst.CmdStringHolder(text, True)


def images(source) -> list[str]:
    """One `--image=file=...,triple=...,arch=...,kind=...` per device object, each one word of the
    command line whatever its file name holds (`path_word`)."""
    import SCons.Errors
    out = []
    for s in source:
        info = getattr(s.attributes, "offload_image", None)
        if info is None:
            raise SCons.Errors.UserError(f"offload: '{s}' is not an OffloadDeviceObject (no arch/kind known)")
        out.append(path_word(f"--image=file={s.get_path()},triple={info['triple']},arch={info['arch']},"
                             f"kind={info['kind']}"))
    return out


def _images(target, source, env, for_signature):
    return images(source)


def _embed_images(target, source, env, for_signature):
    """Images of a package+embed action: every source after the host object."""
    return images(source[1:])


def _hipfb_targets(target, source, env, for_signature):
    return ",".join(["host-x86_64-unknown-linux"] +
                    [f"hipv4-amdgcn-amd-amdhsa--{s.attributes.offload_image['arch']}" for s in source])


def _input_flags(target, source, env, for_signature):
    return [path_word("-input=" + s.get_path()) for s in source]


def _output_flags(target, source, env, for_signature):
    return [path_word("-output=" + t.get_path()) for t in target]


def _input_flag(target, source, env, for_signature):
    """`-input=$SOURCE` as one word whatever the file's name (`path_word`)."""
    return path_word("-input=" + source[0].get_path())


def _output_flag(target, source, env, for_signature):
    """`-output=$TARGET` as one word whatever the file's name (`path_word`)."""
    return path_word("-output=" + target[0].get_path())


def _target_tmp(target, source, env, for_signature):
    """`${TARGET}.tmp` as one word whatever the file's name (`path_word`)."""
    return path_word(target[0].get_path() + ".tmp")


def _compress_flag(target, source, env, for_signature):
    return "-compress" if env.get("OFFLOAD_COMPRESS") else ""


def _bundle_targets(target, source, env, for_signature):
    return ",".join(str(t) for t in SCons.Util.flatten(env.get("OFFLOAD_TARGETS") or []))


def _bundle_type(target, source, env, for_signature):
    t = env.get("OFFLOAD_BUNDLE_TYPE")
    if t:
        return str(t)
    ext = os.path.splitext(str(env.get("_OFFLOAD_BUNDLE_FILE", "x.o")))[1].lstrip(".")
    return {"hipfb": "o", "": "o", "cubin": "o", "co": "o"}.get(ext, ext)


def _verify_cmds(target, source, env, for_signature):
    """`offload-tool verify` of the inputs (host/device entry consistency; plus the required
    archs), run before the manifest is written so a failing check leaves no manifest."""
    require = env.get("OFFLOAD_REQUIRE")
    if require is True:
        require = env.get("_OFFLOAD_CANONICAL_ARCHS") or []
    req = ",".join(SCons.Util.flatten(require)) if require else ""
    budgets = max_bytes(env)
    gpus = runs_on(env)
    if not env.get("OFFLOAD_VERIFY", True) and not req and not budgets and not gpus:
        return ""
    c = "$( $OFFLOAD_PYTHON $) -m offload_tool.cli.tool verify -q $SOURCES"
    if req:
        c += " --require=" + req
    if gpus:
        c += " --runs-on=" + gpus
    if budgets:
        c += " --max-bytes=" + budgets
    return c + " &&"


def runs_on(env) -> str:
    """OFFLOAD_RUNS_ON as `verify --runs-on` takes it: 'sm_86,gfx90a:xnack-' or a list of GPUs;
    checked here so a typo fails when the SConscript is read."""
    value = env.get("OFFLOAD_RUNS_ON")
    if not value:
        return ""
    gpus = [g.strip() for g in (value.split(",") if isinstance(value, str) else SCons.Util.flatten(value))]
    from offload_tool.errors import UsageError
    from offload_tool.ops.runs_on import parse_gpu
    try:
        for g in gpus:
            parse_gpu(str(g))
    except UsageError as exc:
        raise SCons.Errors.UserError(f"offload: OFFLOAD_RUNS_ON: {exc}") from None
    return ",".join(str(g) for g in gpus)


def max_bytes(env) -> str:
    """OFFLOAD_MAX_BYTES as `verify --max-bytes` takes it: 'gfx90a:1M,total:10M', or a dict
    {'gfx90a': 1 << 20, 'total': '10M'}; checked here so a typo fails when the SConscript is read."""
    value = env.get("OFFLOAD_MAX_BYTES")
    if not value:
        return ""
    if isinstance(value, dict):
        value = ",".join(f"{k}:{v}" for k, v in value.items())
    from offload_tool.errors import UsageError
    from offload_tool.ops.verify import parse_max_bytes
    try:
        return ",".join(f"{k}:{n}" for k, n in parse_max_bytes(str(value)).items())
    except UsageError as exc:
        raise SCons.Errors.UserError(f"offload: OFFLOAD_MAX_BYTES: {exc}") from None


# --------------------------------------------------------------------------------------------
# Link flags

def _link_opt_flag(target, source, env, for_signature):
    """The last -O flag of the final link's `$LINKFLAGS` (it comes after `$OFFLOAD_LINKFLAGS` on
    that command line): it sets the LTO level of the AMD device links split out of that link."""
    flags = [str(f) for f in SCons.Util.flatten([env.get("LINKFLAGS") or []])]
    opt = [f for f in flags if f.startswith("-O")]
    return opt[-1] if opt else ""


# --------------------------------------------------------------------------------------------
# Defaults

CALLABLES = {
    "OFFLOAD_CLANGXX": _clangxx,
    "OFFLOAD_LINK_JOBS": _scons_jobs,
    "OFFLOAD_LOCAL_LAUNCHER": _local_launcher,
    "_OFFLOAD_LAUNCH": _launch,
    "_OFFLOAD_CLANG_ID": _clang_id,
    "_OFFLOAD_NVCC_ID": _nvcc_id,
    "_OFFLOAD_LIBRARY_ID": _library_id,
    "_OFFLOAD_VENDORFLAGS": _vendor_flags,
    "_OFFLOAD_NVPTX_BCFLAG": _nvptx_bc_flag,
    "_OFFLOAD_FATBIN_ID": _fatbin_id,
    "_OFFLOAD_PACKAGERFLAGS": _packager_flags,
    "_OFFLOAD_LLVMVERSIONFLAG": _llvm_version_flag,
    "_OFFLOAD_IMAGES": _images,
    "_OFFLOAD_EMBED_IMAGES": _embed_images,
    "_OFFLOAD_LINK_OPTFLAG": _link_opt_flag,
    "_OFFLOAD_HIPFB_TARGETS": _hipfb_targets,
    "_OFFLOAD_COMPRESSFLAG": _compress_flag,
    "_OFFLOAD_INPUTFLAGS": _input_flags,
    "_OFFLOAD_OUTPUTFLAGS": _output_flags,
    "_OFFLOAD_INPUTFLAG": _input_flag,
    "_OFFLOAD_OUTPUTFLAG": _output_flag,
    "_OFFLOAD_TARGET_TMP": _target_tmp,
    "_OFFLOAD_BUNDLETARGETS": _bundle_targets,
    "_OFFLOAD_BUNDLETYPE": _bundle_type,
    "_OFFLOAD_VERIFY_CMDS": _verify_cmds,
    "_OFFLOAD_DEVICE_RUNTIME": _device_runtime_flags,
}


def user_defaults() -> dict:
    """The documented variables' defaults (docs/scons-tool.md lists each)."""
    d = {
        "OFFLOAD_ARCHS": [],
        "OFFLOAD_LANG": "",
        "OFFLOAD_CUDA_COMPILER": "clang",
        "OFFLOAD_HIP_COMPILER": "clang",
        "OFFLOAD_HIP_DRIVER": "auto",
        "OFFLOAD_HOSTFLAGS": SCons.Util.CLVar(""),
        "OFFLOAD_DEVICEFLAGS": SCons.Util.CLVar(""),
        "OFFLOAD_NVCCFLAGS": SCons.Util.CLVar(""),
        "OFFLOAD_CUDA_PTX": False,
        "OFFLOAD_NVCC_SPLIT": True,
        "OFFLOAD_LINKFLAGS": SCons.Util.CLVar(""),
        "OFFLOAD_BUNDLERFLAGS": SCons.Util.CLVar(""),
        "OFFLOAD_COMPRESS": False,
        "OFFLOAD_LAUNCHER": "",
        "OFFLOAD_VERBOSE": False,
        "OFFLOAD_PYTHON": sys.executable,
        "OFFLOAD_AR": "ar",
        "OFFLOAD_ARFLAGS": SCons.Util.CLVar("rcsD"),
        "OFFLOAD_CUDA_PATH": "/usr/local/cuda" if os.path.isdir("/usr/local/cuda") else "",
        "OFFLOAD_ROCM_PATH": "/usr" if os.path.isdir("/usr/lib/x86_64-linux-gnu/amdgcn") else "",
        "OFFLOAD_ROCM_DEVICE_LIB_PATH": ("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"
                                         if os.path.isdir("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode") else ""),
        "OFFLOAD_SPLIT_DEVICE_LINK": True,
    }
    d.update(CALLABLES)
    return d


def set_defaults(env, commands: dict, comstrs: dict) -> None:
    """Set every construction variable the user has not set (idempotent; never clobbers):
    the user variables, the builders' `*COM` commands and `*COMSTR` messages, and the programs."""
    defaults = user_defaults()
    defaults.update(commands)
    if "OFFLOAD_CLANG" not in env:
        defaults["OFFLOAD_CLANG"] = _toolchain.find_clang(env)
    if "OFFLOAD_NVCC" not in env:
        defaults["OFFLOAD_NVCC"] = _toolchain.find_program(env, ["nvcc"])
    if "OFFLOAD_HIPCC" not in env:
        defaults["OFFLOAD_HIPCC"] = _toolchain.find_program(env, ["hipcc"])
    verbose = env.get("OFFLOAD_VERBOSE") or os.environ.get("OFFLOAD_VERBOSE", "") not in ("", "0")
    for k, v in comstrs.items():
        defaults[k] = "" if verbose else v
    for k, v in defaults.items():
        if k not in env:
            env[k] = v
    # hipcc picks its platform from the environment.
    env["ENV"].setdefault("HIP_PLATFORM", "amd")
