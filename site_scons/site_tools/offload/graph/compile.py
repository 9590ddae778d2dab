"""Compile builders: one host compile per source, one device compile per (source, arch), and the
per-source containers (OffloadBinary package + fat object, or HIP's `.hipfb` bundle).

    OffloadHostObject, OffloadDeviceObject, OffloadPackage, OffloadEmbed, OffloadObject

The language of each source (`_languages`) decides the graph: OpenMP and CUDA with clang are
host + device nodes + package/embed (OpenMP's host compile in two nodes, the host IR that every
device compile of the source reads and the host object made from it: `_host_ir`); HIP bundles its code objects into the host compile; CUDA with
nvcc is one compile per source; a plain host source (`OFFLOAD_LANG='host'`) is the environment's
own `Object`."""

from __future__ import annotations

import functools
import hashlib
import os
import sys

import SCons.Errors

from offload_tool.rules import bundle_id
from offload_tool.rules.target_id import AMDGCN_TRIPLE

from ..settings import archs as _archs
from ..dist import openmp_entries as _dist_entries
from ..dist import openmp_wrappers as _dist_wrappers
from ..insight import compdb as _compdb
from . import consume as _consume
from . import host_ir as _host_ir
from ..settings import languages as _languages
from . import openmp_sources as _openmp_sources
from ..settings import checks as _settings_check
from ..toolchain import discovery as _toolchain
from ..toolchain import installations as _installations
from ..scons import actions as _actions
from ..scons import nodes as _nodes
from ..scons.signatures import GroupSignatureAction
from ..settings.archs import archs_for, file_safe
from .common import (COMPILER_VARS, LAUNCH, LIBRARY_VARS, PACKAGE_EMBED, PY, TOOL_DIR, action, builder, canonical,
                     command_path, group_builder, group_env, images, names_when_cleaning, node, nodes,
                     package_embed_builder, pic_overrides, read_path, registry, scanned_files, settings, stem,
                     wants)
from ..settings.languages import language_of

COMMANDS = {
    "OFFLOAD_HOSTCOM": f"{LAUNCH} $OFFLOAD_CLANG $_OFFLOAD_HOST_LANGFLAGS --offload-host-only -c -o $TARGET "
                       "$OFFLOAD_HOSTFLAGS $_OFFLOAD_SRCFLAGS $_CCCOMCOM $SOURCE",
    # OpenMP: the host front end once per source (`<stem>.host.bc`), the host object from its IR.
    "OFFLOAD_HOSTIRCOM": f"{LAUNCH} $OFFLOAD_CLANG $_OFFLOAD_HOST_LANGFLAGS --offload-host-only -emit-llvm "
                         "-Xclang -disable-llvm-passes -c -o $TARGET $OFFLOAD_HOSTFLAGS $_OFFLOAD_SRCFLAGS $_CCCOMCOM "
                         "$SOURCE",
    "OFFLOAD_HOSTBACKENDCOM": f"{LAUNCH} $OFFLOAD_CLANG $_OFFLOAD_HOST_BACKENDFLAGS --offload-host-only -c -o $TARGET "
                              "$OFFLOAD_HOSTFLAGS $_OFFLOAD_SRCFLAGS $( -Wno-unused-command-line-argument $) $SOURCE",
    "OFFLOAD_DEVICECOM": f"{LAUNCH} $OFFLOAD_CLANG $_OFFLOAD_DEVICE_LANGFLAGS --offload-device-only "
                         "--offload-arch=$OFFLOAD_ARCH $_OFFLOAD_VENDORFLAGS -c -o $TARGET "
                         "$OFFLOAD_DEVICEFLAGS $_OFFLOAD_SRCFLAGS $_CCCOMCOM $SOURCE",
    # OpenMP through sccache-dist: host and every arch of a source in one driver job (`fat_object`).
    "OFFLOAD_FATCOM": f"{LAUNCH} $OFFLOAD_CLANG $_OFFLOAD_FATFLAGS -c -o $TARGET $_OFFLOAD_FAT_XARCHFLAGS "
                      "$_OFFLOAD_SRCFLAGS $_CCCOMCOM $SOURCE",
    # nvcc's one compile of a source: OFFLOAD_NVCCCOM, with nvcc's own commands (_nvcc).
    "OFFLOAD_HIPFBCOM": f"{PY} -m offload_tool.cli.bundler -type=o -bundle-align=4096 $_OFFLOAD_COMPRESSFLAG "
                        "-targets=$_OFFLOAD_HIPFB_TARGETS -input=/dev/null "
                        '$_OFFLOAD_INPUTFLAGS $_OFFLOAD_OUTPUTFLAG',
    "OFFLOAD_PACKAGECOM": f"{PY} -m offload_tool.cli.packager $_OFFLOAD_PACKAGERFLAGS -o $TARGET $_OFFLOAD_IMAGES",
    "OFFLOAD_EMBEDCOM": f"{PY} -m offload_tool.cli.embed ${{SOURCES[0]}} ${{SOURCES[1:]}} -o $TARGET",
    "OFFLOAD_PACKAGEEMBEDCOM": f"$( $OFFLOAD_PYTHON {PACKAGE_EMBED} $) ${{TARGETS[0]}} ${{TARGETS[1]}} "
                               "${SOURCES[0]} $_OFFLOAD_PACKAGERFLAGS $_OFFLOAD_EMBED_IMAGES",
}

COMSTRS = {
    "OFFLOAD_HOSTCOMSTR": "HOST ${SOURCE}",
    "OFFLOAD_HOSTIRCOMSTR": "HOSTIR ${SOURCE}",
    "OFFLOAD_HOSTBACKENDCOMSTR": "HOST ${SOURCE}",
    "OFFLOAD_DEVICECOMSTR": "DEVICE ${OFFLOAD_ARCH} ${SOURCE}",
    "OFFLOAD_FATCOMSTR": "FAT ${SOURCE}",
    "OFFLOAD_NVCCCOMSTR": "NVCC ${SOURCE}",
    "OFFLOAD_HIPFBCOMSTR": "BUNDLE ${TARGET}",
    "OFFLOAD_PACKAGECOMSTR": "PACKAGE ${TARGET}",
    "OFFLOAD_EMBEDCOMSTR": "EMBED ${TARGET}",
    "OFFLOAD_PACKAGEEMBEDCOMSTR": "PACKAGE+EMBED ${TARGETS[1]}",
}


def _file_identities(target, source, env) -> bytes:
    """What a compile adds to its signature, for a language whose offload entry names come from
    the source file's identity (OpenMP): that identity and its headers' (`_identity`), so that a
    re-created file rebuilds every compile of it together, and no node of its own stands for it
    in every null build."""
    lang = _languages.LANGUAGES.get(env.get("_OFFLOAD_LANG", ""))
    if lang is not None and lang.file_identity and source and hasattr(source[0], "srcnode"):
        files = [_identity(source[0])] + [_identity(n) for n in scanned_files(target)]
        return ("\0file " + "\0file ".join(files)).encode()
    return b""


def _after_compile(target, source, env, status, host_side: bool = False) -> None:
    """Once a compile returned: when a source that was compiled as OpenMP offload because of its
    suffix fails and it is written in CUDA or HIP, say so and name the setting that fixes it (real
    HIP code lives in `.cpp` files; clang's own error, `hip_runtime.h: Must define exactly one of
    __HIP_PLATFORM_AMD__ ...`, does not say why); when the compile of such a source's host side
    (`host_side`) succeeded, say when it holds no target construct (`_openmp_sources`)."""
    guessed = getattr(_languages.LANGUAGES.get(env.get("_OFFLOAD_LANG", "")), "guessed_by_suffix", False)
    if not status and host_side and guessed:
        _openmp_sources.note_without_target(env, source[0], target[0])
    if status and guessed and not env.get("OFFLOAD_LANG"):
        src = source[0]
        hint = _foreign_language_hint(src)
        if hint:
            sys.stderr.write(f"offload: note: '{src}' was compiled as OpenMP offload (from its suffix) but "
                             f"looks like {hint} code; set OFFLOAD_LANG='{hint.lower()}' for it "
                             f"(e.g. env.OffloadObject('{src}', OFFLOAD_LANG='{hint.lower()}'))\n")


def _device_jobs(cmd_list, target, source, env):
    """What a device compile runs instead of its driver command, for a source whose host IR is a
    node of its own (OpenMP: the target's `offload_host_ir`): the driver's device jobs reading
    that IR (`_host_ir`), since the driver command makes the host IR again; None (the command
    itself) otherwise. Its signature is the driver command all the same (it determines the jobs),
    so signing a node never asks the driver anything."""
    host_ir = getattr(_nodes.marks(target[0]), "offload_host_ir", None) if target else None
    if host_ir is None or len(cmd_list) != 1 or not source:
        return None
    penv = _toolchain.build_env(env)
    jobs = _host_ir.device_jobs(_toolchain.argv_as_run(cmd_list[0], env, penv), command_path(source[0]),
                                str(target[0]), str(host_ir), penv)
    if jobs is None:
        return None
    # One command line (`a && b`, as SCons runs and shows a shell command), so that a
    # verbose build prints every job it runs.
    line = []
    for job in jobs:
        line.extend(([_actions.word("&&", None)] if line else []) + [_quoted(a) for a in job])
    return [line]


def _remove_host_ir_temp(target, source, env) -> None:
    """However a device compile from the host IR ended, the temporary files of its jobs go."""
    if getattr(_nodes.marks(target[0]), "offload_host_ir", None) is not None:
        _host_ir.remove_temp(str(target[0]))


def _compile_action(com: str, host_side: bool = False, device: bool = False, **kw):
    """A host (`host_side`) or device (`device`) compile's action, signed once per group of nodes
    with the same overrides (`scons.signatures`) plus the source's identity where the language
    needs it (`_file_identities`), with the notes after it (`_after_compile`) and, for a device
    compile, the jobs from the host IR (`_device_jobs`)."""
    return _actions.CompileAction(com, contents=_file_identities,
                                  after=functools.partial(_after_compile, host_side=host_side),
                                  rewrite=_device_jobs if device else None,
                                  cleanup=_remove_host_ir_temp if device else None, **kw)


_SHELL_SPECIAL = set(" \t\n\"'\\$`;&|<>()*?[]{}~#!")


def _quoted(arg: str):
    """A job argument as SCons escapes a command line's: quoted when the shell would read it."""
    return _actions.word(arg, True if _SHELL_SPECIAL.intersection(arg) else None)


def _foreign_language_hint(src) -> str | None:
    try:
        with open(read_path(src), "rb") as f:
            text = f.read(1 << 20)
    except OSError:
        return None
    if b"hip/hip_runtime" in text or b"hipLaunchKernelGGL" in text:
        return "HIP"
    if b"cuda_runtime" in text or b"<<<" in text:
        return "CUDA"
    return None


# --------------------------------------------------------------------------------------------
# Target names: each builder names its targets (suffix callables and emitters), nowhere else.

def _host_suffix(env, sources) -> str:
    """The host half of an offload source: `<stem>.host.o` (`.host.os` position-independent)."""
    return ".host" + ("$SHOBJSUFFIX" if env.get("_OFFLOAD_PIC") else "$OBJSUFFIX")


def _arch_of(env) -> str:
    """The node's `OFFLOAD_ARCH`: the tool sets it to an arch name, substituted only if a caller
    gave an expression (one substitution less per device node)."""
    arch = env.get("OFFLOAD_ARCH", "")
    return env.subst(arch) if not isinstance(arch, str) or "$" in arch else arch


def _device_suffix(env, sources) -> str:
    """One arch's device code of a source: `<stem>.<arch><the language's device suffix>`
    (`main.gfx90a.bc`, `k.sm_80.o`, `k.gfx90a.co`)."""
    return device_file_suffix(_arch_of(env), _languages.resolve(_languages.LANGUAGES[env["_OFFLOAD_LANG"]], env))


def device_file_suffix(arch: str, lang) -> str:
    """`_device_suffix` of `arch` for the resolved language record `lang` (the name `device_objects`
    gives the builder, which then computes none)."""
    return f".{file_safe(arch)}{lang.device_suffix(_archs.vendor(arch))}"


def object_suffix(env, sources) -> str:
    """The object a source becomes (what links): `<stem>.o` (`.os` position-independent)."""
    return "$SHOBJSUFFIX" if env.get("_OFFLOAD_PIC") else "$OBJSUFFIX"


def _mark(**attributes):
    """An emitter that records what a target is on its node (`offload_lang`, `offload_image`):
    the link and the reports read it back."""
    def emit(target, source, env):
        lang = env["_OFFLOAD_LANG"]
        # A target named from its source by the builder's suffix is an Entry until SCons decides;
        # these are files, and whatever walks the graph (progress, reports) may ask now.
        target = [t if _nodes.is_file(t) else t.dir.File(t.name) for t in target]
        image = _image(_arch_of(env), lang) if attributes.get("image") else None
        for t in target:
            _nodes.marks(t).offload_lang = lang
            if image:
                _nodes.marks(t).offload_image = dict(image)
        return target, source
    return emit


@functools.lru_cache(maxsize=None)
def _triple(arch: str) -> str:
    return _archs.triple(arch)


def _image(arch: str, lang: str) -> dict:
    """What a device object of `arch` is (`offload_image`; the triple computed once per arch)."""
    return {"arch": arch, "triple": _triple(arch), "kind": _languages.LANGUAGES[lang].offload_kind}


def _package_emitter(target, source, env):
    """Package + embed: the fat object asked for, preceded by its package `<stem>.pkg`
    (`.pic.pkg` position-independent), two targets of one action."""
    fat = target[-1]
    pkg = fat.dir.File(stem(fat) + (".pic.pkg" if env.get("_OFFLOAD_PIC") else ".pkg"))
    _nodes.marks(fat).offload_lang = env["_OFFLOAD_LANG"]
    return [pkg, fat], source


def _hipfb_emitter(target, source, env):
    """HIP's fat binary `<stem>.hipfb` beside the object it goes into (the target asked for)."""
    obj = target[0]
    return [obj.dir.File(stem(obj) + ".hipfb")], source


def builders() -> dict:
    scanner = _actions.c_scanner()
    src_suffix = sorted({sfx for lang in _languages.LANGUAGES.values() for sfx in lang.suffixes})
    return {
        "_OffloadHostCompile": group_builder(action=_compile_action("$OFFLOAD_HOSTCOM", host_side=True,
                                                                    cmdstr="$OFFLOAD_HOSTCOMSTR",
                                                                    varlist=COMPILER_VARS),
                                       source_scanner=scanner, suffix=_host_suffix, src_suffix=src_suffix,
                                       emitter=_mark(), report_kind="host-compile"),
        # OpenMP: the host IR (a source's compile), and the host object made from it (reads IR:
        # nothing to scan).
        "_OffloadHostIR": group_builder(action=_compile_action("$OFFLOAD_HOSTIRCOM", host_side=True,
                                                               cmdstr="$OFFLOAD_HOSTIRCOMSTR",
                                                               varlist=COMPILER_VARS),
                                        source_scanner=scanner, emitter=_mark(), report_kind="host-ir"),
        "_OffloadHostBackend": group_builder(action=GroupSignatureAction("$OFFLOAD_HOSTBACKENDCOM",
                                                                         cmdstr="$OFFLOAD_HOSTBACKENDCOMSTR",
                                                                         varlist=COMPILER_VARS),
                                             emitter=_mark(), report_kind="host-compile"),
        "_OffloadDeviceCompile": group_builder(action=_compile_action("$OFFLOAD_DEVICECOM", device=True,
                                                                      cmdstr="$OFFLOAD_DEVICECOMSTR",
                                                                      varlist=COMPILER_VARS),
                                         source_scanner=scanner, suffix=_device_suffix, src_suffix=src_suffix,
                                         emitter=_mark(image=True), report_kind="device-compile"),
        # OpenMP through sccache-dist: its entry names are checked once it is made (`_dist_entries`).
        "_OffloadFatCompile": group_builder(action=_actions.CompileAction(
                                                "$OFFLOAD_FATCOM", cmdstr="$OFFLOAD_FATCOMSTR", varlist=COMPILER_VARS,
                                                after=_after_fat_compile),
                                            source_scanner=scanner, emitter=_mark(), report_kind="fat-compile"),
        "_OffloadNvccCompile": builder(action=action("OFFLOAD_NVCCCOM", ["_OFFLOAD_NVCC_ID"]), source_scanner=scanner,
                                       suffix=object_suffix, src_suffix=".cu", emitter=_mark(),
                                       report_kind="nvcc-compile"),
        # (the code objects and device objects they take are checked first: `_consume`)
        "_OffloadHipfb": builder(action=_consume.with_device_check(action("OFFLOAD_HIPFBCOM", LIBRARY_VARS)),
                                 emitter=_hipfb_emitter, report_kind="bundle"),
        "_OffloadPackage": builder(action=_consume.with_device_check(
                                       action("OFFLOAD_PACKAGECOM", LIBRARY_VARS + ["_OFFLOAD_PACKAGERFLAGS"])),
                                   suffix=".pkg", report_kind="package"),
        "_OffloadEmbed": builder(action=action("OFFLOAD_EMBEDCOM", LIBRARY_VARS), suffix=object_suffix,
                                 emitter=_mark(), report_kind="embed"),
        "_OffloadPackageEmbed": package_embed_builder("OFFLOAD_PACKAGEEMBEDCOM", suffix=object_suffix,
                                                      emitter=_package_emitter),
    }


# --------------------------------------------------------------------------------------------
# Per-source values

def _file_id(node) -> tuple[int, int] | None:
    """The (st_dev, st_ino) of the file a compile reads for `node`, read once per run and node (a
    source's host and device nodes all ask), or None while it does not exist (a generated file
    not made yet: asked again later)."""
    if not hasattr(_nodes.marks(node), "offload_file_id"):
        path = read_path(node)
        try:
            st = os.stat(path)
        except OSError:
            return None
        _nodes.marks(node).offload_file_id = (st.st_dev, st.st_ino)
    return _nodes.marks(node).offload_file_id


def _identity(node) -> str:
    """A file's identity as a dependency: clang names OpenMP offload entries after the (device,
    inode) of the file that holds the target region (the source, or a header it includes), so
    host and device objects must come from the same files. A re-created file (new inode, same
    bytes: `git checkout`, rsync, an editor's safe write) changes this value and rebuilds every
    compile that reads it together."""
    fid = _file_id(node)
    path = _nodes.path(node)
    return f"{path} dev={fid[0]} ino={fid[1]}" if fid else f"{path} absent"


def _source_id_flag(target, node) -> str:
    """`-DOFFLOAD_TOOL_SOURCE_ID=<id> -include offload_ids.h` for the compiles of a file-identity
    language: a compiler cache (ccache, sccache) then keys those objects by the files they came
    from (the header turns the value into preprocessed text, which caches hash; a bare -D is not),
    so a cached object of another clone's files (or of a file since re-created) is never served.
    `<id>` is the source's `<dev>_<ino>`, followed by a hash of the identities of the headers it
    reads, if any. Outside the signature: these identities are in it already."""
    fid = _file_id(node)
    if not fid:
        return ""
    value = f"{fid[0]:x}_{fid[1]:x}"
    headers = [_identity(n) for n in scanned_files(target)]
    if headers:
        value += "_" + hashlib.sha1("\0".join(headers).encode()).hexdigest()[:16]
    return f"$( -DOFFLOAD_TOOL_SOURCE_ID={value} -include {ID_HEADER} $)"


def source_id_flags(target, source, env, for_signature):
    """`$_OFFLOAD_SOURCE_ID` (`_source_id_flag` of the first source), a callable rather than a
    per-node override so that the compiles of many sources share one environment's signature text
    (`_signatures`); the flag is outside signatures, so none is computed for one."""
    lang = _languages.LANGUAGES.get(env.get("_OFFLOAD_LANG", ""))
    if for_signature or not (lang and lang.file_identity) or not source or not hasattr(source[0], "srcnode"):
        return ""
    return _source_id_flag(target, source[0])


ID_HEADER = os.path.join(TOOL_DIR, "offload_ids.h")


def fatbin_id(target, source, env, for_signature):
    """`$_OFFLOAD_FATBIN_ID`: a hash of the HIP fat binary a host compile embeds (its second
    source), read when the command runs, so a compiler cache keys the host object by the device
    code inside it; `0` before the file exists, and for a signature (the value is outside them)."""
    if for_signature or len(source) < 2:
        return "0"
    try:
        with open(_nodes.abspath(source[1]), "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()[:24]
    except OSError:
        return "0"


def hipfb_targets(target, source, env, for_signature):
    """`$_OFFLOAD_HIPFB_TARGETS`: the `.hipfb` bundle's entries, the empty host one and one per
    code object (its arch, as the HIP runtime looks it up)."""
    return ",".join([bundle_id.entry_id("host", "x86_64-unknown-linux")] +
                    [bundle_id.entry_id("hipv4", AMDGCN_TRIPLE, _nodes.marks(s).offload_image["arch"]) for s in source])


def embed_images(target, source, env, for_signature):
    """Images of a package+embed action: every source after the host object."""
    return images(source[1:])


def _cuid(env, node) -> str:
    """A stable per-source `-cuid`: hash of the source's path relative to the top directory, so
    CUDA/HIP nodes are the same in every clone and moved tree (and shareable through CacheDir),
    and two sources of one name in different folders get different ones (the CUID names the
    unit's externalised static device variables in relocatable device code). Named from the top
    explicitly: `get_path()` alone is relative to the SConscript being read, which gives the
    same word for `a/k.cu` and `b/k.cu` read from their own folders, and an absolute path for a
    variant directory's source."""
    return hashlib.sha1(_nodes.path(node.srcnode(), env.Dir("#")).encode()).hexdigest()[:16]


# The first clang whose driver forwards its `-cuid=` to the host and device -cc1 jobs of a
# new-driver compile (`--offload-host-only` / `--offload-device-only` included): clang 19 drops
# it ("argument unused"), clang 22 forwards it (measured); the change came in LLVM 20.
DRIVER_CUID_SINCE = 20


def cuid_through_driver(env) -> bool:
    """Whether the clang in use forwards the driver's `-cuid=` to a new-driver compile's jobs."""
    return _toolchain.clang_major(env) >= DRIVER_CUID_SINCE


def cuid_flag(env) -> str:
    """`$_OFFLOAD_CUIDFLAG`: how a new-driver CUDA/HIP compile gets its CUID. The driver's
    `-cuid=` where the clang in use forwards it (a compiler cache such as sccache takes it, and
    keys the compile by it), else `-Xclang -cuid=` straight to -cc1 (which sccache refuses to
    cache). Either way the host and device compiles of a source get the same CUID."""
    return "-cuid=$_OFFLOAD_CUID" if cuid_through_driver(env) else "-Xclang -cuid=$_OFFLOAD_CUID"


def _src_flags(node, lang) -> str:
    c = os.path.splitext(node.name)[1] in lang.c_suffixes
    return "$CCFLAGS $CFLAGS" if c else "$CCFLAGS $CXXFLAGS"


def _common_overrides(env, s, lang, kw) -> dict:
    o = dict(kw)
    # Only what differs between sources of one language is set per source (the CUDA/HIP `-cuid`):
    # OpenMP compiles of one arch then share their overrides, and their signature text.
    o.update(_OFFLOAD_LANG=lang.name, _OFFLOAD_SRCFLAGS=_src_flags(s, lang),
             _OFFLOAD_CUDAPATHFLAG=_installations.cuda(env).path_flag,
             _OFFLOAD_ROCMFLAGS=_installations.rocm(env).path_flag,
             _OFFLOAD_HOST_LANGFLAGS=lang.host_flags, _OFFLOAD_DEVICE_LANGFLAGS=lang.device_flags)
    if lang.host_ir:
        o["_OFFLOAD_HOST_BACKENDFLAGS"] = lang.host_backend_flags
    if "_OFFLOAD_CUID" in lang.host_flags + lang.device_flags:
        o["_OFFLOAD_CUID"] = _cuid(env, s)
    if "_OFFLOAD_CUIDFLAG" in lang.host_flags + lang.device_flags:
        o["_OFFLOAD_CUIDFLAG"] = cuid_flag(env)
    return o


_REQUIRED: set[str] = set()


def require_clang(env):
    """`OFFLOAD_CLANG` names a clang the build finds (a UserError otherwise); asked once per
    command and search path (every node of every source asks)."""
    key = env.subst("$OFFLOAD_CLANG") + "\0" + str(env["ENV"].get("PATH", "")) if env.get("OFFLOAD_CLANG") else None
    if key in _REQUIRED:
        return
    _toolchain.require(env, "OFFLOAD_CLANG", "clang")
    _settings_check.clang_is_clang(env)
    if key is not None:
        _REQUIRED.add(key)


# --------------------------------------------------------------------------------------------
# Host and device compiles

def request_key(env, s, target, what: str) -> str:
    """What the registry knows a compile request by: its target when the caller named one, else
    its source and what is made of it (the builder names the file)."""
    return _nodes.abspath(node(env, target)) if target else f"{_nodes.abspath(s)} [{what}]"


def host_object(env, s, target, kw, extra_sources=(), pic=False):
    senv = settings(env, kw)
    require_clang(senv)
    lang = language_of(s, senv)

    def make():
        o = _common_overrides(senv, s, lang, kw)
        # The fat binary's content hash goes into the preprocessed text too (`offload_ids.h`): a
        # compiler cache does not read the file -fcuda-include-gpubinary names.
        o["_OFFLOAD_HIPFB_INCLUDE"] = ("-Xclang -fcuda-include-gpubinary -Xclang ${SOURCES[1]} "
                                       f"$( -DOFFLOAD_TOOL_FATBIN_ID=$_OFFLOAD_FATBIN_ID -include {ID_HEADER} $)"
                                       if extra_sources else "")
        if pic:
            pic_overrides(senv, o)
        genv = group_env(env, o)
        if _host_ir.wanted(env, kw, lang):
            # The object from the host IR the device compiles read (`_host_ir`).
            ir_node = host_ir(env, s, target, kw, pic)
            obj = node(env, target) if target else \
                s.dir.File(stem(s) + senv.subst(_host_suffix({"_OFFLOAD_PIC": pic}, [s])))
            made = genv._OffloadHostBackend(obj, ir_node)
        else:
            made = genv._OffloadHostCompile(target, [s] + list(extra_sources))
            _compdb.record(genv, made, [s], "OFFLOAD_HOSTCOM")
        if extra_sources:
            _consume.check_before(env, made)  # the .hipfb clang embeds unread
        # Every clang-built source has a host object: it owns the source's stale per-arch files.
        clean_stale_archs(env, made, s.dir, stem(s) + ".", (".o", ".bc", ".co"), archs_for(lang, canonical(senv)))
        return made

    what = "host" + ("+hipfb" if extra_sources else "") + (" pic" if pic else "")
    return registry.get(env, request_key(env, s, target, what), "host",
                        wants(senv, lang.name, kw.get("OFFLOAD_CLANG"), kw=kw), make)


def _host_ir_node(env, s, target, pic: bool):
    """`<stem>.host.bc` (`.host.pic.bc` position-independent) beside the source, or the host
    object's name with `.bc` when the caller named that object."""
    if target:
        t = node(env, target)
        return t.dir.File(stem(t) + ".bc")
    return s.dir.File(stem(s) + (".host.pic.bc" if pic else ".host.bc"))


def host_ir(env, s, target, kw, pic=False):
    """The host IR of an OpenMP source (`OFFLOAD_HOSTIRCOM`): its host object and every device
    compile of the source read it (`_host_ir`)."""
    senv = settings(env, kw)
    lang = language_of(s, senv)
    ir = _host_ir_node(env, s, target, pic)

    def make():
        o = _common_overrides(senv, s, lang, kw)
        if pic:
            pic_overrides(senv, o)
        genv = group_env(env, o)
        made = genv._OffloadHostIR(ir, s)
        _compdb.record(genv, made, [s], "OFFLOAD_HOSTIRCOM")
        return made

    return registry.get(env, _nodes.abspath(ir), "hostir", wants(senv, lang.name, kw.get("OFFLOAD_CLANG"), kw=kw), make)


def device_object(env, s, arch, target, kw, ir=None):
    """One arch's device compile of `s`; for a language with a host-IR node (OpenMP), reading
    `ir` (by default the source's own `<stem>.host.bc`)."""
    return device_objects(env, s, [arch], target, kw, ir)[arch]


def device_objects(env, s, archs, target, kw, ir=None) -> dict:
    """{arch: [node]}: the device compiles of `s`, one per arch (`device_object`). What does not
    depend on the arch (the settings, the language, the compiler's check, the source's overrides)
    is found once for all of them: a null build reads every SConscript, and a source has a
    device node per arch."""
    senv = settings(env, kw)
    require_clang(senv)
    lang = language_of(s, senv)
    for arch in archs:
        if not lang.offload_kind or arch not in archs_for(lang, [arch]):
            raise SCons.Errors.UserError(f"offload: '{s}' ({lang.name}) cannot be compiled for '{arch}'")
    request = wants(senv, lang.name, kw.get("OFFLOAD_CLANG"), kw=kw)
    reads_ir = ir is not None or _host_ir.wanted(env, kw, lang)
    common = {}

    def make_for(arch):
        def make():
            if not common:
                common.update(_common_overrides(senv, s, lang, kw))
            genv = group_env(env, dict(common, OFFLOAD_ARCH=arch))
            t = target if target else s.dir.File(stem(s) + device_file_suffix(arch, lang))
            made = genv._OffloadDeviceCompile(t, s)
            if reads_ir:
                hir = ir if ir is not None else host_ir(env, s, None, kw)[0]
                env.Depends(made, hir)
                for n in made:
                    _nodes.marks(n).offload_host_ir = hir
            _compdb.record(genv, made, [s], "OFFLOAD_DEVICECOM")
            return made
        return make

    return {arch: registry.get(env, request_key(env, s, target, f"device {arch}"), "device", request, make_for(arch))
            for arch in archs}


def fat_object(env, s, fat, archs, kw, pic=False):
    """The object of OpenMP source `s` made by one driver job: the host object with every arch's
    device image packaged and embedded (`OFFLOAD_FATCOM`). What a build server of sccache-dist
    makes (`flavours.openmp_clang`): host and device code of one job name their offload entries
    after the same file, the server's copy of the source, so they agree by construction; that
    two sources' entries never meet is checked once each is made (`_dist_entries`)."""
    senv = settings(env, kw)
    require_clang(senv)
    lang = language_of(s, senv)
    o = _common_overrides(senv, s, lang, kw)
    o["_OFFLOAD_FAT_ARCHS"] = ",".join(archs)
    if pic:
        pic_overrides(senv, o)
    here = _openmp_sources.device_conditional(senv, s)
    if here:
        o["_OFFLOAD_LAUNCH"] = ""   # compiled here, from the files (see `_note_device_conditional`)
        top = _nodes.abspath(env.Dir("#"))
        path = here[0]
        _note_device_conditional(s, os.path.relpath(path, top) if path.startswith(top + os.sep) else path,
                                 *here[1:])
    genv = group_env(env, o)
    made = genv._OffloadFatCompile(fat, s)
    for n in made:
        _nodes.marks(n).offload_fat_job = True
    amd_math = _dist_wrappers.amd_math_header(senv) if any(_archs.vendor(a) == "amd" for a in archs) else None
    if amd_math:
        env.Depends(made, env.File(amd_math))
    _compdb.record(genv, made, [s], "OFFLOAD_FATCOM")
    clean_stale_archs(env, made, s.dir, stem(s) + ".", (".o", ".bc"), [])
    return made


_noted_here: set[str] = set()


def _note_device_conditional(s, path: str, line: int, macro: str) -> None:
    """Once per source and build: why its one job runs here rather than on a build server."""
    key = _nodes.path(s.srcnode())
    if key in _noted_here:
        return
    _noted_here.add(key)
    sys.stderr.write(f"offload: note: '{key}': an #if at {path}:{line} tests {macro}, which the text sent to a build "
                     "server would have decided for the host side (clang's -frewrite-includes evaluates #if and "
                     "#elif; #ifdef stays): compiled here\n")


def _after_fat_compile(target, source, env, status) -> None:
    _after_compile(target, source, env, status, host_side=True)
    if not status:
        _dist_entries.check_made(target[0], source[0], env, sent=env.get("_OFFLOAD_LAUNCH") != "")


def fat_flags(target, source, env, for_signature):
    """`$_OFFLOAD_FATFLAGS`: what makes a driver compile make the host object and every arch's
    image (`$_OFFLOAD_FAT_ARCHS`): `-fopenmp --offload-arch=`, the vendors' installation flags,
    and clang's OpenMP header wrappers first on the include path. A build server compiles the
    source with its includes inlined here (`rewrite_includes_only`), as the host side reads them;
    a device job reads `<math.h>` through clang's wrappers (which map `sin` to the device's
    libraries), so the wrappers are inlined too, and a host side that reads them through is
    the same code. With an AMD arch, the tool's header of clang's AMD math wrappers is given too
    (`dist.openmp_wrappers`)."""
    archs = [a for a in str(env.get("_OFFLOAD_FAT_ARCHS", "")).split(",") if a]
    vendors = {_archs.vendor(a) for a in archs}
    flags = ["-fopenmp"] + (["--offload-arch=" + ",".join(archs)] if archs else [])
    flags.extend(_languages.device_vendor_flags(_languages.LANGUAGES.get(env.get("_OFFLOAD_LANG", "")), env, vendors))
    wrappers = _toolchain.print_file_name(env, env.subst("$OFFLOAD_CLANG"), "include/openmp_wrappers")
    if wrappers and archs:
        flags += ["-isystem", wrappers]
    amd_math = _dist_wrappers.amd_math_header(env) if "amd" in vendors else None
    if amd_math:
        flags += ["-include", amd_math]   # what the inlined text leaves out for AMD (`dist.openmp_wrappers`)
    return flags


#: What clang 19's `-Xarch_device` takes of an optimisation level (it refuses `-O1`, `-O2`, `-Os`,
#: `-Oz`: "not all driver options can be forwarded via Xarch argument"; measured).
_XARCH_LEVELS = {"-O0", "-O3", "-O4", "-Ofast"}
#: Flags whose value is the next word, which `-Xarch_*` cannot carry ("options requiring
#: arguments are unsupported").
_SEPARATE_VALUE = {"-mllvm", "-Xclang", "-include", "-isystem", "-I", "-D", "-U", "-Xlinker", "-Xopenmp-target",
                   "-imacros", "-idirafter", "-iquote", "-x", "-arch", "-target"}


def _flag_words(env, var: str, target=None, source=None) -> list[str]:
    return [str(w) for line in _actions.command_lines(env, "$" + var, target, source) for w in line]


def fat_xarch_words(env, target=None, source=None) -> list[str] | None:
    """`OFFLOAD_HOSTFLAGS` for the host side and `OFFLOAD_DEVICEFLAGS` for the device side of one
    driver job, as each reaches its side in the per-arch graph: words both name once, to both;
    the others through `-Xarch_host` / `-Xarch_device`, except a host optimisation level, which
    clang 19 drops from `-Xarch_host` (measured): given to both, the device side's own level after
    it. None when clang cannot be given them so (a device level `-Xarch_device` refuses, a flag
    whose value is the next word)."""
    host = _flag_words(env, "OFFLOAD_HOSTFLAGS", target, source)
    device = _flag_words(env, "OFFLOAD_DEVICEFLAGS", target, source)
    if host == device:
        return host
    both = [w for w in host if w in device]
    only_host = [w for w in host if w not in device]
    only_device = [w for w in device if w not in host]
    if any(w in _SEPARATE_VALUE for w in only_host + only_device):
        return None
    out = list(both)
    host_opt = [w for w in only_host if w.startswith("-O")]
    device_opt = [w for w in only_device if w.startswith("-O")]
    if host_opt and not device_opt and not any(w.startswith("-O") for w in both):
        device_opt = ["-O0"]   # the device side's level where it names none: clang's default
    if any(w not in _XARCH_LEVELS for w in device_opt):
        return None
    out.extend(host_opt)
    for w in only_host:
        if not w.startswith("-O"):
            out += ["-Xarch_host", w]
    for w in device_opt + [w for w in only_device if not w.startswith("-O")]:
        out += ["-Xarch_device", w]
    return out


def fat_xarch_flags(target, source, env, for_signature):
    """`$_OFFLOAD_FAT_XARCHFLAGS`: `fat_xarch_words` (the plain host flags where clang cannot be
    given them: such an environment's OpenMP compiles do not take this command,
    `flavours.openmp_clang`)."""
    words = fat_xarch_words(env, target, source)
    return words if words is not None else _flag_words(env, "OFFLOAD_HOSTFLAGS", target, source)


def OffloadHostObject(env, source, target=None, **kw):
    """Host-only compile of one source (`--offload-host-only`)."""
    out = []
    for s in nodes(env, source):
        out.extend(host_object(env, s, target, kw))
    return _nodes.node_list(out)


def OffloadDeviceObject(env, source, target=None, **kw):
    """Device-only compile of one source for one arch (`OFFLOAD_ARCH=...`)."""
    senv = settings(env, kw)
    arch = kw.get("OFFLOAD_ARCH") or senv.get("OFFLOAD_ARCH")
    if not arch:
        raise SCons.Errors.UserError("offload: OffloadDeviceObject needs OFFLOAD_ARCH=<arch>")
    canon = _archs.canonical_arch(str(arch), _toolchain.clang_major(senv), "OFFLOAD_ARCH")
    kw = dict(kw)
    kw.pop("OFFLOAD_ARCH", None)
    out = []
    for s in nodes(env, source):
        out.extend(device_object(env, s, canon, target, kw))
    return _nodes.node_list(out)


def OffloadPackage(env, target, source, **kw):
    """An OffloadBinary of device objects (triple/arch/kind from each OffloadDeviceObject)."""
    srcs = nodes(env, source)
    for s in srcs:
        if getattr(_nodes.marks(s), "offload_image", None) is None:
            raise SCons.Errors.UserError(f"offload: OffloadPackage: '{s}' is not an OffloadDeviceObject")
    return env._OffloadPackage(target, srcs, **kw)


def OffloadEmbed(env, target, source, **kw):
    """The fat object: host object + `.llvm.offloading` section holding the package(s)."""
    srcs = nodes(env, source)
    if len(srcs) < 2:
        raise SCons.Errors.UserError("offload: OffloadEmbed needs [host_object, package, ...]")
    return env._OffloadEmbed(target, srcs, _OFFLOAD_LANG=getattr(_nodes.marks(srcs[0]), "offload_lang", "openmp"),
                             **kw)


# --------------------------------------------------------------------------------------------
# `scons -c` and archs no longer configured

def clean_stale_archs(env, owners, folder, prefix: str, suffixes: tuple[str, ...], archs: list[str]) -> None:
    """Under `scons -c`, also remove the per-arch files this tool wrote for archs that are no longer
    configured (`<prefix><arch><suffix>`, e.g. `main.gfx1030.bc`): only names whose middle part is
    a valid offload arch."""
    names = names_when_cleaning(folder)
    current = {file_safe(a) for a in archs}
    for name in names:
        if not name.startswith(prefix):
            continue
        middle, ext = os.path.splitext(name[len(prefix):])
        if not ext or ext not in suffixes or middle in current:
            continue
        middle = middle[:-len(".devlink")] if middle.endswith(".devlink") else middle
        if middle in current or not _archs.is_offload_arch_file_part(middle):
            continue
        env.Clean(owners, folder.File(name))


PSEUDO_BUILDERS = [OffloadHostObject, OffloadDeviceObject, OffloadPackage, OffloadEmbed]
