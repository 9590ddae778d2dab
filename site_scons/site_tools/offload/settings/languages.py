"""The offload languages: one record each (suffixes, flags, offload kind, archs, compilers).

A source's language comes from `OFFLOAD_LANG` when it is set (on the environment or per builder
call: real HIP code lives in `.cpp` files, and a plain `main.cpp` of a CUDA program needs no device
compile at all), else from its suffix. Adding a language (SYCL, say) is one `Language` record
passed to `register`, plus whatever flags it needs; the builders only read these records."""

from __future__ import annotations

import dataclasses
import os

import SCons.Errors

from . import archs as _archs
from . import drivers as _drivers
from ..toolchain import installations as _installations


@dataclasses.dataclass(frozen=True)
class Language:
    """How the tool builds sources of one language."""

    name: str                       # the value of OFFLOAD_LANG that selects it
    suffixes: tuple[str, ...]       # source suffixes that mean this language by default
    offload_kind: str | None        # OffloadBinary image kind (None: a plain host source)
    vendors: tuple[str, ...] = ()   # which offload archs it is built for ('nvidia', 'amd')
    # clang flags of the host-only and device-only compiles (substituted per node)
    host_flags: str = ""
    device_flags: str = ""
    # Variable naming the compiler (the first of `flavours` unless set).
    compiler_var: str | None = None
    # The compilers it may name, each with the flavour (`_flavours`: how its sources are built)
    # that compiler builds it with, by name.
    flavours: tuple[tuple[str, str], ...] = (("clang", "clang"),)
    # Offload entry names are derived from the source file's identity (st_dev, st_ino): host and
    # device objects must come from the same file, on this machine (never a distributed compile).
    file_identity: bool = False
    # The host compile is two nodes, the host IR and the object made from it, and every device
    # compile reads that IR instead of making its own (OpenMP, `_host_ir`); `host_backend_flags`
    # are the host flags of the object's compile (what the host IR already holds left out).
    host_ir: bool = False
    host_backend_flags: str = ""
    # Flags its device compiles add for a vendor ((vendor, flags) pairs), before the vendor's own.
    vendor_flags: tuple[tuple[str, str], ...] = ()
    # Device objects are code objects bundled into the host object (HIP's `.hipfb`), rather
    # than images of an OffloadBinary package embedded next to it.
    bundled_device_code: bool = False
    # C/C++ sources are of this language by their suffix alone, a guess (OpenMP's): a compile of
    # one that made a host side though its source holds no offload construct is noted, and a
    # failed one whose code looks like another language's says so (`graph.compile`).
    guessed_by_suffix: bool = False
    # Its suffixes that mean C: those sources' compiles take `$CFLAGS`, the others `$CXXFLAGS`.
    c_suffixes: frozenset[str] = frozenset()
    # A language clang builds with either offload driver: the variable that chooses ('new', 'old'
    # or 'auto': ask the compiler), and the fields that differ on the new driver. `resolve` gives
    # the record an environment builds with; `driver` says which one it is.
    driver_var: str | None = None
    new_driver: tuple[tuple[str, object], ...] = ()
    driver: str = ""

    @property
    def compilers(self) -> tuple[str, ...]:
        return tuple(c for c, _ in self.flavours)

    @property
    def gpu_kernels(self) -> bool:
        """Its sources are a GPU program's kernels (CUDA's and HIP's kinds): C/C++ sources beside
        them, or beside objects of it, are that program's host code unless they hold an OpenMP
        target construct (`graph.openmp_sources`)."""
        return self.offload_kind in ("cuda", "hip")

    @property
    def may_be_hip_code(self) -> bool:
        """Its suffixes are CUDA's, which HIP code keeps too (hipified `.cu` files): a source of it
        for which OFFLOAD_ARCHS names no arch of its vendors is looked into for
        `hip/hip_runtime.h`, so that the error says the fix is its language, not an arch."""
        return self.offload_kind == "cuda"

    def device_suffix(self, vendor: str) -> str:
        """What a device-only compile writes: a code object for HIP, an nvptx ELF object for
        NVIDIA, LLVM bitcode for AMD (linked at link time by the linker wrapper)."""
        if self.bundled_device_code:
            return ".co"
        return ".o" if vendor == "nvidia" else ".bc"


# OpenMP host: without any offload target, --offload-host-only compiles target regions as plain
# host code (no offload entries, the program never offloads). With a target the host object is
# byte-identical whatever the targets or archs (checked on clang 19 and 22), so a fixed triple set
# keeps the host compile independent of OFFLOAD_ARCHS. `$_OFFLOAD_SOURCE_ID` names the file
# identity for compiler caches (see `file_identity`); the host object's compile reads IR, which
# holds it already.
OPENMP_TARGETS = "-fopenmp-targets=nvptx64-nvidia-cuda,amdgcn-amd-amdhsa"
OPENMP = Language(
    "openmp", (".c", ".cc", ".cpp", ".cxx", ".C", ".c++"), "openmp", ("nvidia", "amd"),
    host_flags=f"-fopenmp {OPENMP_TARGETS} $_OFFLOAD_SOURCE_ID",
    device_flags="-fopenmp $_OFFLOAD_SOURCE_ID",
    file_identity=True, host_ir=True, host_backend_flags=f"-fopenmp {OPENMP_TARGETS}", guessed_by_suffix=True,
    c_suffixes=frozenset({".c"}),
    flavours=(("clang", "openmp-clang"),), vendor_flags=(("nvidia", "$_OFFLOAD_NVPTX_BCFLAG"),))


def new_driver_rdc_flags(x: str, both: str = "", host: str = "") -> dict[str, str]:
    """`host_flags` and `device_flags` of a language clang compiles on the new offload driver with
    relocatable device code (CUDA; HIP's new driver): `-x <x>`, and the pinned CUID on both sides,
    `$_OFFLOAD_CUIDFLAG`: the driver's `-cuid=` where the driver forwards it to the host and device
    -cc1 jobs (clang 20 on), which a compiler cache takes; else straight to -cc1 through
    `-Xclang`, because clang 19 drops the driver's `-cuid=` there ("argument unused") and would
    name externalised device statics after the file's (dev, inode) instead
    (`graph.compile.cuid_flag`). `both` is added to both compiles, `host` to the host compile only."""
    flags = f"-x {x} --offload-new-driver -fgpu-rdc $_OFFLOAD_CUIDFLAG" + (f" {both}" if both else "")
    return {"host_flags": f"{flags} {host}" if host else flags, "device_flags": flags}


# CUDA, new driver + RDC (`new_driver_rdc_flags`); the CUDA install reaches the host compile, the
# device compile gets it per vendor (`_OFFLOAD_VENDORFLAGS`).
CUDA = Language(
    "cuda", (".cu",), "cuda", ("nvidia",),
    **new_driver_rdc_flags("cuda", both="-Wno-unknown-cuda-version", host="$_OFFLOAD_CUDAPATHFLAG"),
    compiler_var="OFFLOAD_CUDA_COMPILER",
    flavours=(("clang", "cuda-clang"), ("nvcc", "cuda-nvcc")))

# HIP, old driver: per-arch code objects bundled into a `.hipfb` that the host compile includes.
# clang drops `-cuid=` from `--offload-host-only` compiles (every host object would then define
# `__hip_cuid_`, a duplicate symbol once two HIP sources are linked), so the host compile passes
# it to -cc1; the device compile's driver `-cuid=` gives the same `__hip_cuid_<hash>`.
HIP = Language(
    "hip", (".hip",), "hip", ("amd",),
    host_flags="-x hip -Xclang -cuid=$_OFFLOAD_CUID $_OFFLOAD_ROCMFLAGS $_OFFLOAD_HOST_ARCHFLAGS "
               "$_OFFLOAD_HIPFB_INCLUDE",
    device_flags="-x hip --no-gpu-bundle-output -cuid=$_OFFLOAD_CUID",
    compiler_var="OFFLOAD_HIP_COMPILER",
    flavours=(("clang", "hip-bundled"), ("hipcc", "hip-bundled-hipcc")), vendor_flags=(("amd", "$_OFFLOAD_ROCMFLAGS"),),
    bundled_device_code=True,
    # HIP, new driver + RDC (OFFLOAD_HIP_DRIVER): per-arch bitcode packaged (kind hip) and embedded
    # in `.llvm.offloading` like CUDA (`new_driver_rdc_flags`); the link's clang-linker-wrapper
    # makes the `.hip_fatbin`.
    driver_var="OFFLOAD_HIP_DRIVER",
    new_driver=(*new_driver_rdc_flags("hip", host="$_OFFLOAD_ROCMFLAGS").items(),
                ("bundled_device_code", False),
                ("flavours", (("clang", "hip-packaged"), ("hipcc", "hip-packaged-hipcc")))))

# A plain host source in an offload program (`main.cpp` of a CUDA program): the environment's own
# C/C++ compile (`Object`), no device compile, no offload flags.
HOST = Language("host", (), None, flavours=(("clang", "host"),))

LANGUAGES: dict[str, Language] = {}
_BY_SUFFIX: dict[str, Language] = {}


def register(language: Language) -> Language:
    """Add (or replace) a language record; its suffixes now mean it."""
    LANGUAGES[language.name] = language
    for s in language.suffixes:
        _BY_SUFFIX[s] = language
    return language


for _lang in (OPENMP, CUDA, HIP, HOST):
    register(_lang)


def OffloadAddLanguage(env, name: str, suffixes=(), offload_kind: str | None = None, vendors=(), **fields):
    """`env.OffloadAddLanguage('sycl', suffixes=['.sycl'], offload_kind='sycl', vendors=['nvidia', 'amd'],
    host_flags='...', device_flags='...')`: one more language record (see `Language` for the
    fields). Its suffixes then mean it in every environment; `OFFLOAD_LANG=name` selects it."""
    return register(Language(name, tuple(suffixes), offload_kind, tuple(vendors), **fields))


def suffix_language(node) -> Language | None:
    """The language a source's suffix means, or None (an object, or an unknown suffix)."""
    return _BY_SUFFIX.get(os.path.splitext(node.name)[1])


def is_offload_source(node) -> bool:
    """A source file (by suffix) that the offload builders compile, rather than an object."""
    return os.path.splitext(node.name)[1] in _BY_SUFFIX


def language_of(node, env) -> Language:
    """The language of a source: `OFFLOAD_LANG` when set, else its suffix."""
    forced = env.get("OFFLOAD_LANG")
    if forced:
        name = env.subst(str(forced)) if not isinstance(forced, Language) else forced.name
        if name not in LANGUAGES:
            raise SCons.Errors.UserError(
                f"offload: OFFLOAD_LANG='{name}' for '{node}' is not a language "
                f"(known: {', '.join(sorted(LANGUAGES))})")
        return resolve(LANGUAGES[name], env)
    lang = _BY_SUFFIX.get(os.path.splitext(node.name)[1])
    if lang is None:
        raise SCons.Errors.UserError(
            f"offload: cannot tell the offload language of '{node}' from its suffix "
            f"(known: {', '.join(sorted(_BY_SUFFIX))}); set OFFLOAD_LANG")
    return resolve(lang, env)


def resolve(lang: Language, env) -> Language:
    """The record `env` builds `lang` with: for a language with two offload drivers, its fields
    for the driver chosen (see `_drivers`), `driver` naming it."""
    if not lang.driver_var or lang.driver:
        return lang
    if _drivers.driver_of(env, lang, compiler_for(env, lang)) == "new":
        return dataclasses.replace(lang, driver="new", **dict(lang.new_driver))
    return dataclasses.replace(lang, driver="old")


def compiler_for(env, lang: Language) -> str:
    """'clang', 'nvcc' or 'hipcc': what compiles a source of `lang` (validated)."""
    if not lang.compiler_var:
        return lang.compilers[0]
    compiler = env.subst("$" + lang.compiler_var) if env.get(lang.compiler_var) else lang.compilers[0]
    if compiler not in lang.compilers:
        choices = " or ".join(f"'{c}'" for c in lang.compilers)
        raise SCons.Errors.UserError(f"offload: {lang.compiler_var} must be {choices}, not '{compiler}'")
    return compiler


def device_vendor_flags(lang, env, vendors) -> list[str]:
    """The flags device code of `vendors` needs: the language's (`Language.vendor_flags`: the
    OpenMP NVIDIA device bitcode, HIP's ROCm path; none for `lang` None), then the vendors'
    installations' (`installations.device_flags`: the CUDA folder or the ROCm device libraries).
    For one arch's device compile, an OpenMP source's one job over all its archs, and a link."""
    flags = [f for vendor, f in (lang.vendor_flags if lang else ()) if vendor in vendors]
    flags.extend(_installations.device_flags(env, vendors))
    return flags


def vendor_flags(target, source, env, for_signature):
    """`$_OFFLOAD_VENDORFLAGS`: flags a device compile needs for its vendor (`device_vendor_flags`)."""
    arch = env.get("OFFLOAD_ARCH", "")
    lang = LANGUAGES.get(env.get("_OFFLOAD_LANG", "openmp"))
    return " ".join(device_vendor_flags(lang, env, {_archs.vendor(arch)} if arch else set()))
