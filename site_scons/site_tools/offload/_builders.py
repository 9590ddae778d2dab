"""The offload builders: per-(source, arch) compile nodes, packaging, embedding, links, bundles.

Public builders are pseudo-builders (`env.AddMethod`) that fan out into hidden real builders
(`_Offload*` in `env['BUILDERS']`) with per-call overrides, so each (source, arch) is its own node:
its own `-j` task, its own incremental decision and its own cache entry (scons-guide §1.7, §3.2).
Every real action is a command action running a compiler or one of the library's CLIs (package +
embed of `OffloadObject` runs that CLI's code in the SCons process)."""

from __future__ import annotations

import hashlib
import os
import sys

import SCons.Action
import SCons.Builder
import SCons.Errors
import SCons.Node
import SCons.Scanner.Prog
import SCons.Tool
import SCons.Util

from . import _archs, _toolchain
from ._archs import archs_for, file_safe, language_of

# Bump when the meaning of the tool's own actions changes (part of every library-backed signature).
TOOL_SCHEMA = "offload-scons/1"


# --------------------------------------------------------------------------------------------
# Callable construction variables (evaluated during substitution; see scons-guide §1.9)

def _clang_path(env) -> str | None:
    clang = env.subst("$OFFLOAD_CLANG") if env.get("OFFLOAD_CLANG") else ""
    return _toolchain.resolve(env, clang) if clang else None


def _clang_id(target, source, env, for_signature):
    """Identity of the clang in use (`--version`), for the varlist of actions it drives."""
    return _toolchain.tool_identity(_clang_path(env))


def _nvcc_id(target, source, env, for_signature):
    nvcc = env.subst("$OFFLOAD_NVCC") if env.get("OFFLOAD_NVCC") else ""
    return _toolchain.tool_identity(_toolchain.resolve(env, nvcc) if nvcc else None)


def _library_id(target, source, env, for_signature):
    import offload_tool
    return f"offload_tool {offload_tool.__version__} {TOOL_SCHEMA}"


def clang_major(env) -> int:
    """Major version of the clang in use: from its name (`clang-22`) when it says, else probed."""
    import re
    clang = env.subst("$OFFLOAD_CLANG") if env.get("OFFLOAD_CLANG") else ""
    m = re.search(r"clang(?:\+\+)?-(\d+)$", os.path.basename(clang))
    if m:
        return int(m.group(1))
    major = _toolchain.clang_major(_toolchain.tool_identity(_clang_path(env)))
    return major or 19


def _scons_jobs():
    """`scons -jN`'s N: how many device links clang-linker-wrapper may run at once."""
    import SCons.Script
    try:
        return int(SCons.Script.GetOption("num_jobs") or 1)
    except (AttributeError, TypeError, ValueError):
        return 1


def _clangxx(target, source, env, for_signature):
    clang = env.subst("$OFFLOAD_CLANG")
    return _toolchain.clang_companion(clang, "clang++") if clang else "clang++"


def _llvm_libdir(env) -> str:
    path = _clang_path(env)
    return (_toolchain.llvm_lib_dir(path) or "") if path else ""


def _has_llc(env) -> bool:
    """`llc` beside the clang in use (Debian: package llvm-N), which the split device link runs."""
    path = _clang_path(env)
    return bool(path) and os.access(os.path.join(os.path.dirname(os.path.realpath(path)), "llc"), os.X_OK)


_bc_dirs: dict[str, str] = {}


def _nvptx_bc_path(target, source, env, for_signature):
    """Directory of libomptarget-nvptx-*.bc next to the clang in use (clang 19 needs it named)."""
    lib = _llvm_libdir(env)
    if lib not in _bc_dirs:
        try:
            found = bool(lib) and any(n.startswith("libomptarget-nvptx") for n in os.listdir(lib))
        except OSError:
            found = False
        _bc_dirs[lib] = lib if found else ""
    return _bc_dirs[lib]


def _vendor_flags(target, source, env, for_signature):
    """Flags a device compile needs for its vendor: device-library paths and the CUDA install."""
    arch = env.get("OFFLOAD_ARCH", "")
    lang = env.get("_OFFLOAD_LANG", "openmp")
    v = _archs.vendor(arch) if arch else None
    flags = []
    if v == "nvidia":
        if lang == "openmp":
            bc = _nvptx_bc_path(target, source, env, for_signature)
            if bc:
                flags.append("--libomptarget-nvptx-bc-path=" + bc)
        if env.get("OFFLOAD_CUDA_PATH"):
            flags.append("--cuda-path=$OFFLOAD_CUDA_PATH")
    elif v == "amd":
        if lang == "hip" and env.get("OFFLOAD_ROCM_PATH"):
            flags.append("--rocm-path=$OFFLOAD_ROCM_PATH")
        if env.get("OFFLOAD_ROCM_DEVICE_LIB_PATH"):
            flags.append("--rocm-device-lib-path=$OFFLOAD_ROCM_DEVICE_LIB_PATH")
    return " ".join(flags)


def _packager_flags(target, source, env, for_signature):
    return "--llvm-version=22" if clang_major(env) >= 20 else ""


def _llvm_version_flag(target, source, env, for_signature):
    """`--llvm-version=N` for the library CLIs: how the clang in use encodes OffloadBinary kinds."""
    return f"--llvm-version={min(max(clang_major(env), 19), 22)}"


def _embed_images(target, source, env, for_signature):
    """Images of a package+embed action: every source after the host object."""
    return _images(target, source[1:], env, for_signature)


def _images(target, source, env, for_signature):
    """One `--image=file=...,triple=...,arch=...,kind=...` per device object."""
    out = []
    for s in source:
        info = getattr(s.attributes, "offload_image", None)
        if info is None:
            raise SCons.Errors.UserError(f"offload: '{s}' is not an OffloadDeviceObject (no arch/kind known)")
        out.append(f"--image=file={s.get_path()},triple={info['triple']},arch={info['arch']},kind={info['kind']}")
    return " ".join(out)


def _link_flags(target, source, env, for_signature):
    """Offload flags of a final or relocatable link: the OpenMP runtime and device runtime
    for every configured arch, the CUDA/HIP runtime when objects of those languages are linked."""
    archs = env.get("_OFFLOAD_LINK_ARCHS") or []
    langs = set(env.get("_OFFLOAD_LINK_LANGS") or ())
    flags = ["-fopenmp"]
    jobs = env.get("OFFLOAD_LINK_JOBS")
    if callable(jobs):
        jobs = jobs()
    if jobs and int(jobs) > 1:
        # Device links of the archs run in parallel in clang-linker-wrapper; not in signatures.
        flags.append(f"$( -Wl,--wrapper-jobs={int(jobs)} $)")
    if archs:
        flags.append("--offload-arch=" + ",".join(archs))
    libdir = _llvm_libdir(env)
    if libdir and os.path.isfile(os.path.join(libdir, "libomptarget.so")):
        # libomptarget lives outside the default search path (Debian: /usr/lib/llvm-N/lib): record
        # it, so programs run and consumers of a shared library link without extra flags.
        flags.append(f"-Wl,-rpath,{libdir}")
    vendors = {_archs.vendor(a) for a in archs}
    if "nvidia" in vendors:
        bc = _nvptx_bc_path(target, source, env, for_signature)
        if bc:
            flags.append("--libomptarget-nvptx-bc-path=" + bc)
        if env.get("OFFLOAD_CUDA_PATH"):
            flags.append("--cuda-path=$OFFLOAD_CUDA_PATH")
    if "amd" in vendors and env.get("OFFLOAD_ROCM_DEVICE_LIB_PATH"):
        flags.append("--rocm-device-lib-path=$OFFLOAD_ROCM_DEVICE_LIB_PATH")
    if "cuda" in langs and env.get("OFFLOAD_CUDA_PATH"):
        flags.append("-L$OFFLOAD_CUDA_PATH/lib64 -lcudart")
    if "hip" in langs:
        flags.append("-lamdhip64")
    return " ".join(flags)


def _link_opt_flag(target, source, env, for_signature):
    """The last -O flag of the final link's `$LINKFLAGS` (it comes after `$OFFLOAD_LINKFLAGS` on
    that command line): it sets the LTO level of the AMD device links split out of that link."""
    flags = [str(f) for f in SCons.Util.flatten([env.get("LINKFLAGS") or []])]
    opt = [f for f in flags if f.startswith("-O")]
    return opt[-1] if opt else ""


def _hipfb_targets(target, source, env, for_signature):
    return ",".join(["host-x86_64-unknown-linux"] +
                    [f"hipv4-amdgcn-amd-amdhsa--{s.attributes.offload_image['arch']}" for s in source])


def _input_flags(target, source, env, for_signature):
    return " ".join("-input=" + s.get_path() for s in source)


def _output_flags(target, source, env, for_signature):
    return " ".join("-output=" + t.get_path() for t in target)


def _compress_flag(target, source, env, for_signature):
    return "-compress" if env.get("OFFLOAD_COMPRESS") else ""


def _bundle_targets(target, source, env, for_signature):
    return ",".join(str(t) for t in SCons.Util.flatten(env.get("OFFLOAD_TARGETS") or []))


def _bundle_type(target, source, env, for_signature):
    t = env.get("OFFLOAD_BUNDLE_TYPE")
    if t:
        return str(t)
    return _type_from_suffix(env.get("_OFFLOAD_BUNDLE_FILE", "x.o"))


def _type_from_suffix(name: str) -> str:
    ext = os.path.splitext(str(name))[1].lstrip(".")
    return {"hipfb": "o", "": "o", "cubin": "o", "co": "o"}.get(ext, ext)


def _verify_cmds(target, source, env, for_signature):
    """`offload-tool verify` of the inputs (host/device entry consistency; plus the required
    archs), run before the manifest is written so a failing check leaves no manifest."""
    require = env.get("OFFLOAD_REQUIRE")
    if require is True:
        require = env.get("_OFFLOAD_CANONICAL_ARCHS") or []
    req = ",".join(SCons.Util.flatten(require)) if require else ""
    if not env.get("OFFLOAD_VERIFY", True) and not req:
        return ""
    c = "$( $OFFLOAD_PYTHON $) -m offload_tool.cli verify -q " + " ".join(s.get_path() for s in source)
    if req:
        c += " --require=" + req
    return c + " &&"


# --------------------------------------------------------------------------------------------
# Defaults

COMSTRS = {
    "OFFLOAD_HOSTCOMSTR": "HOST ${SOURCE}",
    "OFFLOAD_DEVICECOMSTR": "DEVICE ${OFFLOAD_ARCH} ${SOURCE}",
    "OFFLOAD_NVCCCOMSTR": "NVCC ${SOURCE}",
    "OFFLOAD_HIPFBCOMSTR": "BUNDLE ${TARGET}",
    "OFFLOAD_PACKAGECOMSTR": "PACKAGE ${TARGET}",
    "OFFLOAD_EMBEDCOMSTR": "EMBED ${TARGET}",
    "OFFLOAD_PACKAGEEMBEDCOMSTR": "PACKAGE+EMBED ${TARGETS[1]}",
    "OFFLOAD_CARRIERCOMSTR": "PACKAGE+EMBED ${TARGETS[1]}",
    "OFFLOAD_DEVICELINKCOMSTR": "DEVICELINK ${OFFLOAD_ARCH} ${TARGET}",
    "OFFLOAD_LINKCOMSTR": "LINK ${TARGET}",
    "OFFLOAD_SHLINKCOMSTR": "LINK ${TARGET}",
    "OFFLOAD_RELOCCOMSTR": "RELOCATABLE ${TARGET}",
    "OFFLOAD_ARCOMSTR": "AR ${TARGET}",
    "OFFLOAD_LDSCRIPTCOMSTR": "LDSCRIPT ${TARGET}",
    "OFFLOAD_BUNDLECOMSTR": "BUNDLE ${TARGET}",
    "OFFLOAD_UNBUNDLECOMSTR": "UNBUNDLE ${SOURCE}",
    "OFFLOAD_UNBUNDLEARCHIVECOMSTR": "UNBUNDLE ${SOURCE}",
    "OFFLOAD_MANIFESTCOMSTR": "MANIFEST ${TARGET}",
}

_LAUNCH = "$( $OFFLOAD_LAUNCHER $)"
_PACKAGE_EMBED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_package_embed.py")
_DEVICE_LINK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_device_link.py")
_PY = "$( $OFFLOAD_PYTHON $)"

DEFAULTS = {
    "OFFLOAD_HOSTCOM": f"{_LAUNCH} $OFFLOAD_CLANG $_OFFLOAD_HOST_LANGFLAGS --offload-host-only -c -o $TARGET "
                       "$OFFLOAD_HOSTFLAGS $_OFFLOAD_SRCFLAGS $_CCCOMCOM $SOURCE",
    "OFFLOAD_DEVICECOM": f"{_LAUNCH} $OFFLOAD_CLANG $_OFFLOAD_DEVICE_LANGFLAGS --offload-device-only "
                         "--offload-arch=$OFFLOAD_ARCH $_OFFLOAD_VENDORFLAGS -c -o $TARGET "
                         "$OFFLOAD_DEVICEFLAGS $_OFFLOAD_SRCFLAGS $_CCCOMCOM $SOURCE",
    "OFFLOAD_NVCCCOM": f"{_LAUNCH} $OFFLOAD_NVCC -c -o $TARGET $_OFFLOAD_NVCC_GENCODE $OFFLOAD_HOSTFLAGS "
                       "$OFFLOAD_DEVICEFLAGS $CCFLAGS $CXXFLAGS $_CCCOMCOM $SOURCE",
    "OFFLOAD_HIPFBCOM": f"{_PY} -m offload_tool.bundler -type=o -bundle-align=4096 $_OFFLOAD_COMPRESSFLAG "
                        "-targets=$_OFFLOAD_HIPFB_TARGETS -input=/dev/null "
                        '$_OFFLOAD_INPUTFLAGS -output=$TARGET',
    "OFFLOAD_PACKAGECOM": f"{_PY} -m offload_tool.packager $_OFFLOAD_PACKAGERFLAGS -o $TARGET $_OFFLOAD_IMAGES",
    "OFFLOAD_EMBEDCOM": f"{_PY} -m offload_tool.embed ${{SOURCES[0]}} ${{SOURCES[1:]}} -o $TARGET",
    "OFFLOAD_PACKAGEEMBEDCOM": f"$( $OFFLOAD_PYTHON {_PACKAGE_EMBED} $) ${{TARGETS[0]}} ${{TARGETS[1]}} "
                               "${SOURCES[0]} $_OFFLOAD_PACKAGERFLAGS $_OFFLOAD_EMBED_IMAGES",
    "OFFLOAD_CARRIERCOM": f"$( $OFFLOAD_PYTHON {_PACKAGE_EMBED} $) --empty-host ${{TARGETS[0]}} ${{TARGETS[1]}} "
                          "$_OFFLOAD_CARRIER_REF $_OFFLOAD_PACKAGERFLAGS $_OFFLOAD_IMAGES",
    "OFFLOAD_DEVICELINKCOM": f"$( $OFFLOAD_PYTHON {_DEVICE_LINK} $) $TARGET $_OFFLOAD_CARRIER_REF $OFFLOAD_CLANGXX "
                             "-fopenmp --offload-arch=$OFFLOAD_ARCH $_OFFLOAD_VENDORFLAGS "
                             "-L$_OFFLOAD_LLVM_LIBDIR -lomptarget.devicertl $OFFLOAD_LINKFLAGS $_OFFLOAD_LINK_OPTFLAG "
                             "-- $_OFFLOAD_IMAGES",
    "OFFLOAD_LINKCOM": "$OFFLOAD_CLANGXX -o $TARGET $_OFFLOAD_LINKFLAGS $OFFLOAD_LINKFLAGS $LINKFLAGS "
                       "$SOURCES $_LIBDIRFLAGS $_LIBFLAGS",
    "OFFLOAD_SHLINKCOM": "$OFFLOAD_CLANGXX -shared -o $TARGET $_OFFLOAD_LINKFLAGS $OFFLOAD_LINKFLAGS "
                         "$SHLINKFLAGS $SOURCES $_LIBDIRFLAGS $_LIBFLAGS",
    "OFFLOAD_RELOCCOM": "$OFFLOAD_CLANGXX -r -o $TARGET $_OFFLOAD_LINKFLAGS $OFFLOAD_LINKFLAGS "
                        "-L$_OFFLOAD_LLVM_LIBDIR -lomptarget.devicertl $SOURCES",
    "OFFLOAD_ARCOM": "$OFFLOAD_AR $OFFLOAD_ARFLAGS $TARGET $SOURCES",
    "OFFLOAD_BUNDLECOM": f"{_PY} -m offload_tool.bundler -type=$_OFFLOAD_BUNDLETYPE $_OFFLOAD_COMPRESSFLAG "
                         '-targets=$_OFFLOAD_BUNDLETARGETS $_OFFLOAD_INPUTFLAGS '
                         "-output=$TARGET $OFFLOAD_BUNDLERFLAGS",
    "OFFLOAD_UNBUNDLECOM": f"{_PY} -m offload_tool.bundler -unbundle -type=$_OFFLOAD_BUNDLETYPE "
                           '-targets=$_OFFLOAD_BUNDLETARGETS -input=$SOURCE '
                           '$_OFFLOAD_OUTPUTFLAGS $OFFLOAD_BUNDLERFLAGS',
    "OFFLOAD_UNBUNDLEARCHIVECOM": f"{_PY} -m offload_tool.bundler -unbundle -type=a -allow-missing-bundles "
                                  '-targets=$_OFFLOAD_BUNDLETARGETS -input=$SOURCE '
                                  '$_OFFLOAD_OUTPUTFLAGS $OFFLOAD_BUNDLERFLAGS',
    "OFFLOAD_MANIFESTCOM": f"$_OFFLOAD_VERIFY_CMDS {_PY} -m offload_tool.cli inspect --json "
                           "$_OFFLOAD_LLVMVERSIONFLAG $SOURCES > ${TARGET}.tmp && mv ${TARGET}.tmp $TARGET",
}


def set_defaults(env) -> None:
    """Set every construction variable the user has not set (idempotent; never clobbers)."""
    import sys

    defaults = {
        "OFFLOAD_ARCHS": [],
        "OFFLOAD_CUDA_COMPILER": "clang",
        "OFFLOAD_HIP_COMPILER": "clang",
        "OFFLOAD_HOSTFLAGS": SCons.Util.CLVar(""),
        "OFFLOAD_DEVICEFLAGS": SCons.Util.CLVar(""),
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
        "OFFLOAD_CLANGXX": _clangxx,
        "OFFLOAD_LINK_JOBS": _scons_jobs,
        "OFFLOAD_SPLIT_DEVICE_LINK": True,
        "_OFFLOAD_CLANG_ID": _clang_id,
        "_OFFLOAD_NVCC_ID": _nvcc_id,
        "_OFFLOAD_LIBRARY_ID": _library_id,
        "_OFFLOAD_VENDORFLAGS": _vendor_flags,
        "_OFFLOAD_PACKAGERFLAGS": _packager_flags,
        "_OFFLOAD_LLVMVERSIONFLAG": _llvm_version_flag,
        "_OFFLOAD_IMAGES": _images,
        "_OFFLOAD_EMBED_IMAGES": _embed_images,
        "_OFFLOAD_LINKFLAGS": _link_flags,
        "_OFFLOAD_LINK_OPTFLAG": _link_opt_flag,
        "_OFFLOAD_HIPFB_TARGETS": _hipfb_targets,
        "_OFFLOAD_COMPRESSFLAG": _compress_flag,
        "_OFFLOAD_INPUTFLAGS": _input_flags,
        "_OFFLOAD_OUTPUTFLAGS": _output_flags,
        "_OFFLOAD_BUNDLETARGETS": _bundle_targets,
        "_OFFLOAD_BUNDLETYPE": _bundle_type,
        "_OFFLOAD_VERIFY_CMDS": _verify_cmds,
        "_OFFLOAD_LLVM_LIBDIR": lambda target, source, env, for_signature: _llvm_libdir(env),
    }
    defaults.update(DEFAULTS)
    if "OFFLOAD_CLANG" not in env:
        defaults["OFFLOAD_CLANG"] = _toolchain.find_clang(env)
    if "OFFLOAD_NVCC" not in env:
        defaults["OFFLOAD_NVCC"] = _toolchain.find_program(env, ["nvcc"])
    if "OFFLOAD_HIPCC" not in env:
        defaults["OFFLOAD_HIPCC"] = _toolchain.find_program(env, ["hipcc"])
    verbose = env.get("OFFLOAD_VERBOSE") or os.environ.get("OFFLOAD_VERBOSE", "") not in ("", "0")
    for k, v in COMSTRS.items():
        defaults[k] = "" if verbose else v
    for k, v in defaults.items():
        if k not in env:
            env[k] = v
    # hipcc picks its platform from the environment.
    env["ENV"].setdefault("HIP_PLATFORM", "amd")


# --------------------------------------------------------------------------------------------
# Real (hidden) builders

def _action(com: str, varlist: list[str]) -> SCons.Action.Action:
    return SCons.Action.Action("$" + com, "$" + com + "STR", varlist=varlist)


class _PackageEmbedAction(SCons.Action.CommandAction):
    """`$OFFLOAD_PACKAGEEMBEDCOM`, run in the SCons process when it is the tool's own command.

    The command line stays what SCons shows (`scons -n`, verbose output), signs and caches; only
    the execution skips a Python start-up per source (~0.15 s of CPU, a tenth of what a source
    costs at 4 archs). A command the user replaced is spawned as usual."""

    def execute(self, target, source, env, executor=None):
        if executor:
            target, source = executor.get_all_targets(), executor.get_all_sources()
        cmd_list, ignore, _ = self.process(target, list(map(SCons.Action.rfile, source)), env, executor)
        python = env.subst("$OFFLOAD_PYTHON")
        argvs = [[str(a) for a in cmd] for cmd in filter(len, cmd_list)]
        # Another interpreter may carry another offload_tool: only ours runs in-process.
        if not (len(argvs) == 1 and argvs[0][:2] == [python, _PACKAGE_EMBED] and python == sys.executable):
            return super().execute(target, source, env, executor)
        from . import _package_embed

        try:
            status = _package_embed.main(argvs[0][2:])
        except Exception as exc:  # never a traceback from a library step: one line, as the CLI
            sys.stderr.write(f"offload-packager: error: internal error: {type(exc).__name__}: {exc}\n")
            status = 1
        if status and not ignore:
            return SCons.Errors.BuildError(errstr=f"Error {status}", status=status, action=self,
                                           command=argvs[0])
        return 0


_COMPILER_VARS = ["_OFFLOAD_CLANG_ID"]
_LIBRARY_VARS = ["_OFFLOAD_LIBRARY_ID"]


def _write_ldscript(target, source, env):
    with open(target[0].get_abspath(), "w", encoding="utf-8") as f:
        f.write(env["_OFFLOAD_LDSCRIPT"])
    return 0


def hidden_builders() -> dict:
    scanner = SCons.Tool.CScanner

    def b(**kw):
        # The programs these actions run are tracked by identity in `varlist` (compiler
        # `--version`, offload_tool version), so SCons need not look each one up on the PATH
        # and hash it per node (a fifth of a null build's time at 100 sources x 4 archs).
        return SCons.Builder.Builder(IMPLICIT_COMMAND_DEPENDENCIES=0, **kw)
    return {
        "_OffloadHostCompile": b(action=_action("OFFLOAD_HOSTCOM", _COMPILER_VARS), source_scanner=scanner),
        "_OffloadDeviceCompile": b(action=_action("OFFLOAD_DEVICECOM", _COMPILER_VARS), source_scanner=scanner),
        "_OffloadNvccCompile": b(action=_action("OFFLOAD_NVCCCOM", ["_OFFLOAD_NVCC_ID"]), source_scanner=scanner),
        "_OffloadHipfb": b(action=_action("OFFLOAD_HIPFBCOM", _LIBRARY_VARS)),
        "_OffloadPackage": b(action=_action("OFFLOAD_PACKAGECOM", _LIBRARY_VARS + ["_OFFLOAD_PACKAGERFLAGS"])),
        "_OffloadEmbed": b(action=_action("OFFLOAD_EMBEDCOM", _LIBRARY_VARS)),
        "_OffloadPackageEmbed": b(action=_PackageEmbedAction("$OFFLOAD_PACKAGEEMBEDCOM",
                                                             cmdstr="$OFFLOAD_PACKAGEEMBEDCOMSTR",
                                                             varlist=_LIBRARY_VARS + ["_OFFLOAD_PACKAGERFLAGS"])),
        "_OffloadCarrier": b(action=_PackageEmbedAction("$OFFLOAD_CARRIERCOM", cmdstr="$OFFLOAD_CARRIERCOMSTR",
                                                        varlist=_LIBRARY_VARS + ["_OFFLOAD_PACKAGERFLAGS"])),
        "_OffloadDeviceLink": b(action=_action("OFFLOAD_DEVICELINKCOM", _COMPILER_VARS + _LIBRARY_VARS)),
        "_OffloadLink": b(action=_action("OFFLOAD_LINKCOM", _COMPILER_VARS),
                          target_scanner=SCons.Scanner.Prog.ProgramScanner()),
        "_OffloadShLink": b(action=_action("OFFLOAD_SHLINKCOM", _COMPILER_VARS),
                            target_scanner=SCons.Scanner.Prog.ProgramScanner()),
        "_OffloadReloc": b(action=_action("OFFLOAD_RELOCCOM", _COMPILER_VARS)),
        "_OffloadAr": b(action=_action("OFFLOAD_ARCOM", [])),
        "_OffloadLdScript": b(action=SCons.Action.Action(_write_ldscript, "$OFFLOAD_LDSCRIPTCOMSTR",
                                                         varlist=["_OFFLOAD_LDSCRIPT"])),
        "_OffloadBundle": b(action=_action("OFFLOAD_BUNDLECOM", _LIBRARY_VARS)),
        "_OffloadUnbundle": b(action=_action("OFFLOAD_UNBUNDLECOM", _LIBRARY_VARS)),
        "_OffloadUnbundleArchive": b(action=_action("OFFLOAD_UNBUNDLEARCHIVECOM", _LIBRARY_VARS)),
        "_OffloadManifest": b(action=_action("OFFLOAD_MANIFESTCOM", _LIBRARY_VARS)),
    }


# --------------------------------------------------------------------------------------------
# Helpers for the pseudo-builders

def _node(env, x):
    if isinstance(x, SCons.Node.Node):
        return x
    return env.File(x)


def _nodes(env, xs) -> list:
    return [_node(env, x) for x in SCons.Util.flatten([xs]) if x is not None]


def _settings(env, kw):
    """The environment the pseudo-builder reads settings from (caller's overrides applied)."""
    return env.Override(kw) if kw else env


def _canonical(env) -> list[str]:
    return _archs.canonical_archs(env, clang_major(env))


def _stem(node) -> str:
    return os.path.splitext(node.name)[0]


def _identity(node) -> str:
    """The source file's (st_dev, st_ino), read now (SConscript time): clang names OpenMP
    offload entries after it, so host and device objects of a source must come from the same
    file identity. A re-created file (new inode) changes this value and rebuilds every node of
    that source together."""
    src = node.srcnode()
    try:
        st = os.stat(src.get_abspath())
        return f"{src.get_path()} dev={st.st_dev} ino={st.st_ino}"
    except OSError:
        return f"{src.get_path()} absent"


def _cuid(node) -> str:
    """A stable per-source `-cuid`: hash of the path relative to the top directory, so CUDA/HIP
    nodes are the same in every clone (and shareable through CacheDir)."""
    return hashlib.sha1(node.srcnode().get_path().encode()).hexdigest()[:16]


def _src_flags(node) -> str:
    return "$CCFLAGS $CFLAGS" if os.path.splitext(node.name)[1] in _archs.C_SUFFIXES else "$CCFLAGS $CXXFLAGS"


_LANG_FLAGS = {
    # (host flags, device flags) per language for the clang paths.
    # OpenMP host: without any offload target, --offload-host-only compiles target regions as
    # plain host code (no offload entries, the program never offloads). With a target the host
    # object is byte-identical whatever the targets or archs (checked on clang 19 and 22), so a
    # fixed triple set keeps the host compile independent of OFFLOAD_ARCHS.
    "openmp": ("-fopenmp -fopenmp-targets=nvptx64-nvidia-cuda,amdgcn-amd-amdhsa", "-fopenmp"),
    # CUDA, new driver + RDC: clang 19 does not forward `-cuid=` there ("argument unused") and
    # names externalised device statics after the file's (dev, inode) instead
    # (`_ZL5dstat__static__<ino><dev>_...`), so the pinned CUID goes straight to -cc1.
    "cuda": ("-x cuda --offload-new-driver -fgpu-rdc -Xclang -cuid=$_OFFLOAD_CUID -Wno-unknown-cuda-version "
             "$_OFFLOAD_CUDAPATHFLAG",
             "-x cuda --offload-new-driver -fgpu-rdc -Xclang -cuid=$_OFFLOAD_CUID -Wno-unknown-cuda-version"),
    "hip": ("-x hip -cuid=$_OFFLOAD_CUID $_OFFLOAD_ROCMFLAGS $_OFFLOAD_HOST_ARCHFLAGS $_OFFLOAD_HIPFB_INCLUDE",
            "-x hip --no-gpu-bundle-output -cuid=$_OFFLOAD_CUID"),
}


def _device_suffix(lang: str, arch: str) -> str:
    """What a device-only compile writes: nvptx objects (cubin ELF) for NVIDIA, LLVM bitcode for
    AMD OpenMP (linked at link time by the linker wrapper), a code object for HIP."""
    if lang == "hip":
        return ".co"
    return ".o" if _archs.vendor(arch) == "nvidia" else ".bc"


class _Registry:
    """Nodes already created per (environment, target path): calling OffloadObject twice on
    one source (e.g. from OffloadProgram and by hand) reuses the nodes."""

    def __init__(self):
        self.nodes: dict[tuple, object] = {}

    def get(self, env, path, make):
        key = (id(env), path)
        if key not in self.nodes:
            self.nodes[key] = make()
        return self.nodes[key]


_registry = _Registry()


def _record_compdb(env, targets, sources, com: str) -> None:
    """Chain our compiles into the `compilation_db` tool's entries when it is loaded."""
    if "compilation_db" not in (env.get("TOOLS") or []):
        return
    import SCons.Tool.compilation_db as cdb
    entries = getattr(cdb, "__COMPILATION_DB_ENTRIES", None)
    if entries is None:
        return
    action = SCons.Action.Action("$" + com)
    for t in targets:
        entries.append((t, sources[0], env, action))


# --------------------------------------------------------------------------------------------
# Pseudo-builders (the public API)

def OffloadHostObject(env, source, target=None, **kw):
    """Host-only compile of one source (`--offload-host-only`)."""
    out = []
    for s in _nodes(env, source):
        out.extend(_host_object(env, s, target, kw))
    return SCons.Util.NodeList(out)


def _common_overrides(env, s, lang, kw) -> dict:
    o = dict(kw)
    o.update(_OFFLOAD_LANG=lang, _OFFLOAD_SRCFLAGS=_src_flags(s), _OFFLOAD_CUID=_cuid(s),
             _OFFLOAD_CUDAPATHFLAG="--cuda-path=$OFFLOAD_CUDA_PATH" if env.get("OFFLOAD_CUDA_PATH") else "",
             _OFFLOAD_ROCMFLAGS=("--rocm-path=$OFFLOAD_ROCM_PATH" if env.get("OFFLOAD_ROCM_PATH") else ""))
    o["_OFFLOAD_HOST_LANGFLAGS"], o["_OFFLOAD_DEVICE_LANGFLAGS"] = _LANG_FLAGS[lang]
    return o


def _require_clang(env):
    _toolchain.require(env, "OFFLOAD_CLANG", "clang")


def _host_object(env, s, target, kw, extra_sources=(), pic=False):
    senv = _settings(env, kw)
    _require_clang(senv)
    lang = language_of(s)
    suffix = ".host.os" if pic else ".host.o"
    tgt = _node(env, target) if target else s.dir.File(_stem(s) + suffix)

    def make():
        o = _common_overrides(senv, s, lang, kw)
        o["_OFFLOAD_HIPFB_INCLUDE"] = ("-Xclang -fcuda-include-gpubinary -Xclang ${SOURCES[1]}"
                                       if extra_sources else "")
        if pic:
            o["OFFLOAD_HOSTFLAGS"] = SCons.Util.CLVar(senv.get("OFFLOAD_HOSTFLAGS", [])) + ["-fPIC"]
        nodes = env._OffloadHostCompile(tgt, [s] + list(extra_sources), **o)
        if lang == "openmp":
            env.Depends(nodes, env.Value(_identity(s)))
        for n in nodes:
            n.attributes.offload_lang = lang
        _record_compdb(senv.Override(o), nodes, [s], "OFFLOAD_HOSTCOM")
        return nodes

    return _registry.get(env, (tgt.get_path(), "host", bool(extra_sources)), make)


def OffloadDeviceObject(env, source, target=None, **kw):
    """Device-only compile of one source for one arch (`OFFLOAD_ARCH=...`)."""
    senv = _settings(env, kw)
    arch = kw.get("OFFLOAD_ARCH") or senv.get("OFFLOAD_ARCH")
    if not arch:
        raise SCons.Errors.UserError("offload: OffloadDeviceObject needs OFFLOAD_ARCH=<arch>")
    from offload_tool import target_id
    from offload_tool.errors import OffloadError
    try:
        canon = target_id.canonical_offload_arch(str(arch), llvm_version=clang_major(senv))
    except OffloadError as exc:
        raise SCons.Errors.UserError(f"offload: OFFLOAD_ARCH: '{arch}': {exc}") from None
    kw = dict(kw)
    kw.pop("OFFLOAD_ARCH", None)
    out = []
    for s in _nodes(env, source):
        out.extend(_device_object(env, s, canon, target, kw))
    return SCons.Util.NodeList(out)


def _device_object(env, s, arch, target, kw):
    senv = _settings(env, kw)
    _require_clang(senv)
    lang = language_of(s)
    if arch not in archs_for(lang, [arch]):
        raise SCons.Errors.UserError(f"offload: '{s}' ({lang}) cannot be compiled for '{arch}'")
    tgt = (_node(env, target) if target else
           s.dir.File(f"{_stem(s)}.{file_safe(arch)}{_device_suffix(lang, arch)}"))

    def make():
        o = _common_overrides(senv, s, lang, kw)
        o["OFFLOAD_ARCH"] = arch
        nodes = env._OffloadDeviceCompile(tgt, s, **o)
        if lang == "openmp":
            env.Depends(nodes, env.Value(_identity(s)))
        for n in nodes:
            n.attributes.offload_image = {"arch": arch, "triple": _archs.triple(arch),
                                          "kind": {"openmp": "openmp", "cuda": "cuda", "hip": "hip"}[lang]}
            n.attributes.offload_lang = lang
        _record_compdb(senv.Override(o), nodes, [s], "OFFLOAD_DEVICECOM")
        return nodes

    return _registry.get(env, (tgt.get_path(), "device"), make)


def OffloadPackage(env, target, source, **kw):
    """An OffloadBinary of device objects (triple/arch/kind from each OffloadDeviceObject)."""
    srcs = _nodes(env, source)
    for s in srcs:
        if getattr(s.attributes, "offload_image", None) is None:
            raise SCons.Errors.UserError(f"offload: OffloadPackage: '{s}' is not an OffloadDeviceObject")
    return env._OffloadPackage(target, srcs, **kw)


def OffloadEmbed(env, target, source, **kw):
    """The fat object: host object + `.llvm.offloading` section holding the package(s)."""
    srcs = _nodes(env, source)
    if len(srcs) < 2:
        raise SCons.Errors.UserError("offload: OffloadEmbed needs [host_object, package, ...]")
    nodes = env._OffloadEmbed(target, srcs, **kw)
    for n in nodes:
        n.attributes.offload_lang = getattr(srcs[0].attributes, "offload_lang", "openmp")
    return nodes


def OffloadObject(env, source, target=None, **kw):
    """The workhorse: host compile once + one device compile per arch + package + embed.

    Returns the object to link (one per source). The parts are on the node as
    `node.attributes.offload_parts` (dict: host, devices {arch: node}, package)."""
    out = []
    for s in _nodes(env, source):
        out.extend(_offload_object(env, s, target, kw))
    return SCons.Util.NodeList(out)


def _compiler_for(senv, lang: str) -> str:
    """'clang', 'nvcc' or 'hipcc': what compiles a source of `lang` (validated)."""
    if lang == "cuda":
        compiler = senv.subst("$OFFLOAD_CUDA_COMPILER")
        if compiler not in ("clang", "nvcc"):
            raise SCons.Errors.UserError(f"offload: OFFLOAD_CUDA_COMPILER must be 'clang' or 'nvcc', not '{compiler}'")
        return compiler
    if lang == "hip":
        compiler = senv.subst("$OFFLOAD_HIP_COMPILER")
        if compiler not in ("clang", "hipcc"):
            raise SCons.Errors.UserError(f"offload: OFFLOAD_HIP_COMPILER must be 'clang' or 'hipcc', not '{compiler}'")
        return compiler
    return "clang"


def _offload_object(env, s, target, kw, pic=False):
    senv = _settings(env, kw)
    lang = language_of(s)
    archs = archs_for(lang, _canonical(senv))
    objsuffix = ".os" if pic else ".o"
    fat = _node(env, target) if target else s.dir.File(_stem(s) + objsuffix)
    compiler = _compiler_for(senv, lang)

    def make():
        if compiler == "nvcc":
            return _nvcc_object(env, senv, s, fat, archs, kw, pic)
        if compiler == "hipcc":
            # hipcc (clang 15 underneath) takes the same per-arch graph as clang: its path
            # replaces OFFLOAD_CLANG in these nodes (and its identity goes into their varlist).
            _toolchain.require(senv, "OFFLOAD_HIPCC", "hipcc")
            kw2 = dict(kw, OFFLOAD_CLANG="$OFFLOAD_HIPCC")
        else:
            kw2 = kw
        devices = {a: _device_object(env, s, a, None, kw2)[0] for a in archs}
        parts = {"host": None, "devices": devices, "package": None}
        if lang == "hip":
            extra = []
            if devices:
                hipfb = env._OffloadHipfb(s.dir.File(_stem(s) + ".hipfb"), list(devices.values()), **kw)
                parts["package"] = hipfb[0]
                extra = [hipfb[0]]
            kw2 = dict(kw2, _OFFLOAD_HOST_ARCHFLAGS=" ".join(f"--offload-arch={a}" for a in archs))
            nodes = _host_object(env, s, fat, kw2, extra_sources=extra, pic=pic)
            parts["host"] = nodes[0]
        else:
            host = _host_object(env, s, None, kw, pic=pic)
            parts["host"] = host[0]
            if devices:
                # Package and fat object: two targets of one action (run inside SCons).
                both = env._OffloadPackageEmbed([s.dir.File(_stem(s) + (".pic.pkg" if pic else ".pkg")), fat],
                                                [host[0]] + list(devices.values()), **kw)
                parts["package"] = both[0]
                nodes = both[1:]
            else:
                nodes = host
        for n in nodes:
            n.attributes.offload_lang = lang
            n.attributes.offload_parts = parts
        return nodes

    return _registry.get(env, (fat.get_path(), "object"), make)


def _nvcc_object(env, senv, s, fat, archs, kw, pic):
    """nvcc: one compile per source with a `-gencode` per arch (coarser than the clang path:
    nvcc cannot compile the host side against a separately built fat binary)."""
    _toolchain.require(senv, "OFFLOAD_NVCC", "nvcc")
    gencode = " ".join(f"-gencode arch=compute_{a[3:]},code=sm_{a[3:]}" for a in archs)
    o = dict(kw, _OFFLOAD_NVCC_GENCODE=gencode)
    if pic:
        o["OFFLOAD_HOSTFLAGS"] = SCons.Util.CLVar(senv.get("OFFLOAD_HOSTFLAGS", [])) + ["-Xcompiler", "-fPIC"]
    nodes = env._OffloadNvccCompile(fat, s, **o)
    for n in nodes:
        n.attributes.offload_lang = "cuda"
        n.attributes.offload_parts = {"host": n, "devices": {}, "package": None}
    _record_compdb(senv.Override(o), nodes, [s], "OFFLOAD_NVCCCOM")
    return nodes


def _objects(env, sources, kw, pic=False) -> list:
    """Sources compiled with OffloadObject; objects (anything else) passed through."""
    out = []
    for n in _nodes(env, sources):
        if os.path.splitext(n.name)[1] in _archs.LANGUAGES:
            out.extend(_offload_object(env, n, None, kw, pic=pic))
        else:
            out.append(n)
    return out


def _link_overrides(env, objs, kw) -> dict:
    senv = _settings(env, kw)
    _require_clang(senv)
    langs = sorted({getattr(o.attributes, "offload_lang", "") for o in objs} - {""})
    archs = _canonical(senv)
    if langs and all(getattr(o.attributes, "offload_lang", "") for o in objs):
        # Only the archs the linked languages were built for: adding a gfx arch does not re-link a
        # CUDA-only program (objects of unknown origin keep the whole list).
        archs = [a for a in archs if any(a in archs_for(lang, [a]) for lang in langs)]
    return dict(kw, _OFFLOAD_LINK_ARCHS=archs, _OFFLOAD_LINK_LANGS=langs)


def OffloadProgram(env, target, source, **kw):
    """Final link with the offload-aware driver (clang-linker-wrapper does the device link; AMD
    OpenMP device links are nodes of their own when that is safe, see `_split_link_inputs`)."""
    t = env.subst("$PROGPREFIX") + str(target) + env.subst("$PROGSUFFIX") if isinstance(target, str) else target
    objs = _link_inputs(env, _node(env, t), source, kw)
    return env._OffloadLink(t, objs, **_link_overrides(env, objs, kw))


def OffloadSharedLibrary(env, target, source, **kw):
    """A shared library (objects compiled position-independent, device code linked in)."""
    t = (env.subst("$SHLIBPREFIX") + str(target) + env.subst("$SHLIBSUFFIX")
         if isinstance(target, str) and not str(target).endswith(env.subst("$SHLIBSUFFIX")) else target)
    objs = _link_inputs(env, _node(env, t), source, kw, pic=True)
    return env._OffloadShLink(t, objs, **_link_overrides(env, objs, kw))


def _link_inputs(env, target, sources, kw, pic=False) -> list:
    split = _split_link_inputs(env, target, _nodes(env, sources), kw, pic)
    return split if split is not None else _objects(env, sources, kw, pic=pic)


def _split_parts(env, n, kw, pic):
    """(host object, {arch: device object}) of a source or OffloadObject whose device images the
    linker wrapper links (OpenMP, CUDA with clang); "keep" for our objects whose device code is
    already inside the host object (HIP's .hipfb, nvcc); None for anything else."""
    if os.path.splitext(n.name)[1] in _archs.LANGUAGES:
        lang = language_of(n)
        senv = _settings(env, kw)
        if lang != "hip" and _compiler_for(senv, lang) == "clang":
            host = _host_object(env, n, None, kw, pic=pic)[0]
            return host, {a: _device_object(env, n, a, None, kw)[0] for a in archs_for(lang, _canonical(senv))}
        return "keep"
    parts = getattr(n.attributes, "offload_parts", None)
    if not parts:
        return None
    lang = getattr(n.attributes, "offload_lang", "")
    if lang in ("openmp", "cuda") and parts.get("devices") and parts.get("package") is not None \
            and parts["package"].name.endswith(".pkg"):
        return parts["host"], parts["devices"]
    return "keep"


def _split_link_inputs(env, target, nodes, kw, pic):
    """The inputs of a final link whose AMD OpenMP device links are nodes of their own, or None
    to let clang-linker-wrapper link all device code inside the final link.

    The wrapper LTO-links every AMD arch's bitcode (with the device runtime) each time the program
    links: ~25 s per arch at 100 sources, re-run when one source changes or one arch is added. Split,
    each AMD arch is a `DEVICELINK` node (see `_device_link.py`) that only re-runs when its own device
    objects change; the link takes the host objects plus one carrier object holding the NVIDIA images
    and the linked AMD objects, and gives a byte-identical device image. Used only when every input
    is the tool's own, no `LIBS` are linked (a library could carry device code that the separate
    device link would not see) and the clang has its `llc`; `OFFLOAD_SPLIT_DEVICE_LINK=False` turns
    it off."""
    senv = _settings(env, kw)
    if not senv.get("OFFLOAD_SPLIT_DEVICE_LINK") or senv.subst("$_LIBFLAGS").strip() or not _has_llc(senv):
        return None
    items = []
    for n in nodes:
        parts = _split_parts(env, n, kw, pic)
        if parts is None:
            return None
        items.append((n, parts))
    archs = list(_canonical(senv))
    for _, p in items:  # objects built elsewhere may carry archs this environment does not list
        if p != "keep":
            archs.extend(a for a in p[1] if a not in archs)
    amd = [a for a in archs if _archs.vendor(a) == "amd"
           and any(p != "keep" and a in p[1] and p[1][a].name.endswith(".bc") for _, p in items)]
    if not amd:
        return None
    split = [p for _, p in items if p != "keep"]
    ref = split[0][0]
    stem = target.get_path()
    carrier_images = []
    for a in archs:
        if a in amd:
            images = [devices[a] for _, devices in split if a in devices]
            dl = env._OffloadDeviceLink(env.File(f"{stem}.{file_safe(a)}.devlink.o"), images,
                                        OFFLOAD_ARCH=a, _OFFLOAD_LANG="openmp", _OFFLOAD_CARRIER_REF=ref,
                                        **kw)
            env.Requires(dl, ref)
            for d in dl:
                d.attributes.offload_image = {"arch": a, "triple": _archs.triple(a), "kind": "openmp"}
            carrier_images.extend(dl)
        else:
            carrier_images.extend(devices[a] for _, devices in split if a in devices)
    carrier = env._OffloadCarrier([env.File(stem + ".offload.pkg"), env.File(stem + ".offload.o")], carrier_images,
                                  _OFFLOAD_CARRIER_REF=ref, **kw)
    env.Requires(carrier, ref)
    carrier[1].attributes.offload_lang = "openmp"  # it holds OpenMP AMD images (and whatever else)
    objs = []
    for n, parts in items:
        if parts == "keep":
            objs.extend(_offload_object(env, n, None, kw, pic=pic)
                        if os.path.splitext(n.name)[1] in _archs.LANGUAGES else [n])
        else:
            objs.append(parts[0])
    return objs + [carrier[1]]


def _libname(env, target) -> object:
    if isinstance(target, str):
        d, b = os.path.split(target)
        if not b.endswith(env.subst("$LIBSUFFIX")):
            b = env.subst("$LIBPREFIX") + b + env.subst("$LIBSUFFIX")
        return os.path.join(d, b)
    return target


def OffloadArchive(env, target, source, **kw):
    """A heterogeneous static library: fat objects in `ar`; the device link is deferred."""
    objs = _objects(env, source, kw)
    return env._OffloadAr(_libname(env, target), objs, **kw)


def OffloadRelocatableObject(env, target, source, **kw):
    """Relocatable offload link (`clang -r`): device code linked and registered, so the result
    is a plain host object."""
    objs = _objects(env, source, kw)
    return env._OffloadReloc(target, objs, **_link_overrides(env, objs, kw))


def OffloadStaticLibrary(env, target, source, **kw):
    """A static library a plain `g++ app.cpp -L. -lfoo` links and runs.

    `libfoo.a` is a GNU ld input script naming `libfoo-offload.a` (an archive of the relocatable
    offload link of the objects) and the OpenMP offload runtime libraries of the clang in use,
    so the consumer needs no offload flags. Returns [libfoo.a, libfoo-offload.a, foo-offload.o]."""
    senv = _settings(env, kw)
    lib = env.File(_libname(env, target))
    base = lib.name[len(env.subst("$LIBPREFIX")):-len(env.subst("$LIBSUFFIX")) or None]
    reloc = OffloadRelocatableObject(env, lib.dir.File(base + "-offload.o"), source, **kw)
    inner = env._OffloadAr(lib.dir.File(env.subst("$LIBPREFIX") + base + "-offload" + env.subst("$LIBSUFFIX")),
                           reloc, **kw)
    libdir = _llvm_libdir(senv)
    runtime = [os.path.join(libdir, n) for n in ("libomptarget.so", "libomp.so") if libdir]
    text = ("/* GNU ld script written by the offload SCons tool: the library and its runtime. */\n"
            f"INPUT ( {inner[0].name} {' '.join(runtime)} )\n")
    script = env._OffloadLdScript(lib, inner, _OFFLOAD_LDSCRIPT=text, **kw)
    return SCons.Util.NodeList(list(script) + list(inner) + list(reloc))


def _bundle_targets_list(env, kw) -> list[str]:
    senv = _settings(env, kw)
    targets = [str(t) for t in SCons.Util.flatten([senv.get("OFFLOAD_TARGETS") or []])]
    if not targets:
        raise SCons.Errors.UserError("offload: OFFLOAD_TARGETS=[...] (bundle entry IDs) is required")
    return targets


def OffloadBundle(env, target, source, **kw):
    """Bundle inputs (one per OFFLOAD_TARGETS entry) with the library's bundler."""
    targets = _bundle_targets_list(env, kw)
    srcs = _nodes(env, source)
    if len(srcs) != len(targets):
        raise SCons.Errors.UserError(
            f"offload: OffloadBundle: {len(srcs)} inputs for {len(targets)} OFFLOAD_TARGETS (need one each)")
    t = _node(env, target)
    return env._OffloadBundle(t, srcs, _OFFLOAD_BUNDLE_FILE=t.name, **kw)


def _entry_name(stem: str, entry: str, ext: str) -> str:
    return f"{stem}-{file_safe(entry)}{ext}"


def OffloadUnbundle(env, source, target=None, **kw):
    """Unbundle: one named target per OFFLOAD_TARGETS entry (`<stem>-<entry><ext>`), one action."""
    targets = _bundle_targets_list(env, kw)
    out = []
    for s in _nodes(env, source):
        stem, ext = os.path.splitext(s.name)
        tg = [s.dir.File(_entry_name(stem, e, ext)) for e in targets]
        out.extend(env._OffloadUnbundle(tg, s, _OFFLOAD_BUNDLE_FILE=s.name, **kw))
    return SCons.Util.NodeList(out)


def OffloadUnbundleArchive(env, source, target=None, **kw):
    """Heterogeneous archive -> one device-specific archive per OFFLOAD_TARGETS entry."""
    targets = _bundle_targets_list(env, kw)
    out = []
    for s in _nodes(env, source):
        stem, ext = os.path.splitext(s.name)
        tg = [s.dir.File(_entry_name(stem, e, ext or ".a")) for e in targets]
        out.extend(env._OffloadUnbundleArchive(tg, s, **kw))
    return SCons.Util.NodeList(out)


def OffloadManifest(env, target, source, **kw):
    """JSON of `offload-tool inspect` for built outputs; `offload-tool verify` of each first
    (host/device entry consistency; with OFFLOAD_REQUIRE=[archs] or True, the archs too)."""
    senv = _settings(env, kw)
    o = dict(kw)
    if senv.get("OFFLOAD_REQUIRE") is True:
        o["_OFFLOAD_CANONICAL_ARCHS"] = _canonical(senv)
    nodes = env._OffloadManifest(target, _nodes(env, source), **o)
    env.NoCache(nodes)
    return nodes


PSEUDO_BUILDERS = [
    OffloadHostObject, OffloadDeviceObject, OffloadPackage, OffloadEmbed, OffloadObject, OffloadProgram,
    OffloadSharedLibrary, OffloadArchive, OffloadRelocatableObject, OffloadStaticLibrary, OffloadBundle,
    OffloadUnbundle, OffloadUnbundleArchive, OffloadManifest,
]
