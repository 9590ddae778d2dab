"""Toolchain flavours: one class per way of building offload code, in the spirit of LLVM's driver
`ToolChain` classes. A flavour owns the compile graph of a source (its nodes and how flags reach
each of them), whether its device objects may join the split AMD device link, and the runtime
its objects need at link time (a final link, and a static library's ld script).

    flavour        language  compiler      device code of a source                 runtime
    openmp-clang   openmp    clang         per-arch objects / bitcode, packaged    OpenMP's (the link's -fopenmp)
    cuda-clang     cuda      clang         per-arch objects, packaged (RDC)        libcudart
    cuda-nvcc      cuda      nvcc          nvcc's steps, a fat binary inside       libcudart
    hip-bundled    hip       clang, hipcc  per-arch code objects in a .hipfb       libamdhip64
    hip-packaged   hip       clang, hipcc  per-arch bitcode, packaged (new driver) libamdhip64
    host           host      $CC / $CXX    none                                    -

A `Language` record names its flavours by compiler (`Language.flavours`; HIP's new-driver fields
name the packaged one), and the compiler the environment asks for picks one (`flavour_for`).
Another way of building (SYCL, HIP on SPIR-V) is one more flavour (`register`, or
`env.OffloadAddFlavour`) and one more language record naming it; archs of a vendor of their own
(`amdgcnspirv`) are one arch rule (`_archs.add_rule`, `env.OffloadAddArchs`)."""

from __future__ import annotations

import os

import SCons.Errors
import SCons.Util

from ..settings import archs as _archs
from ..insight import compdb as _compdb
from ..graph import compile as _compile
from ..graph import host_ir as _host_ir
from ..settings import languages as _languages
from ..graph.nvcc import split as _nvcc
from ..settings import checks as _settings_check
from ..toolchain import discovery as _toolchain
from ..graph.common import pic_overrides, registry, settings, stem, wants

FLAVOURS: dict[str, "Flavour"] = {}


def register(flavour: "Flavour") -> "Flavour":
    """Add (or replace) a flavour; language records name it by `flavour.name`."""
    FLAVOURS[flavour.name] = flavour
    return flavour


def flavour_for(env, lang) -> "Flavour":
    """The flavour `env` builds sources of `lang` (a resolved record: its driver chosen) with."""
    compiler = _languages.compiler_for(env, lang)
    name = dict(lang.flavours).get(compiler)
    if name not in FLAVOURS:
        raise SCons.Errors.UserError(f"offload: language '{lang.name}' names no known flavour for compiler "
                                     f"'{compiler}' ({name or 'none'}; known: {', '.join(sorted(FLAVOURS))})")
    return FLAVOURS[name]


def of_node(n) -> "Flavour | None":
    """The flavour an object was built with, or None for an object of unknown origin."""
    return FLAVOURS.get(getattr(n.attributes, "offload_flavour", None) or "")


class Flavour:
    """A way of building offload code. Subclasses give `compile`; the rest has defaults."""

    name = ""
    #: The compiler variable it requires (the tool's 'not found' error names its package).
    compiler: tuple[str, str] | None = ("OFFLOAD_CLANG", "clang")
    #: Its device objects are images the linker wrapper links, so an AMD arch's may be linked in
    #: a `DEVICELINK` node of its own (see `_link._split_link_inputs`).
    split_device_link = False
    #: The language runtime its objects need at link time (`_Runtime`), if any.
    runtime: "_Runtime | None" = None
    #: Checks (`_settings_check`) that say before the build what keeps it from building in an
    #: environment (a runtime or a toolkit the compiler lacks).
    checks: tuple = ()

    def check(self, senv) -> None:
        """Run its checks on `senv` (asked once per object; each check says a thing once)."""
        for check in self.checks:
            check(senv)

    def compile(self, env, senv, s, fat, lang, archs: list[str], kw: dict, pic: bool) -> list:
        """The nodes of one source's object `fat` (made once: the caller's registry holds them)."""
        raise NotImplementedError

    def link_flags(self, env) -> list[str]:
        """What a final or shared link of its objects adds for their runtime."""
        return self.runtime.link_flags(env) if self.runtime else []

    def library_inputs(self, senv) -> list[str]:
        """What a static library's ld script names for its objects' runtime (a plain `g++` link of
        the library gets nothing else)."""
        return self.runtime.library_inputs(senv) if self.runtime else []


class Clang(Flavour):
    """clang's per-arch graph: a host compile (OpenMP: host IR + object), one device compile per
    arch, then the device code packaged and embedded beside the host object, or, for a language
    whose device code is bundled (HIP's old driver), bundled into a `.hipfb` the host compile
    includes. With `program_var`, another clang-based driver (hipcc) runs every node."""

    split_device_link = True

    def __init__(self, name: str, program_var: str | None = None, program: str = "", runtime: "_Runtime | None" = None,
                 split_device_link: bool | None = None, checks=()):
        self.name = name
        self.checks = tuple(checks)
        self.program_var = program_var
        if program_var:
            self.compiler = (program_var, program)
        self.runtime = runtime
        if split_device_link is not None:
            self.split_device_link = split_device_link

    def compile(self, env, senv, s, fat, lang, archs, kw, pic):
        kw2 = kw
        if self.program_var:
            _toolchain.require(senv, *self.compiler)
            # its path replaces OFFLOAD_CLANG in these nodes (and its identity goes into their varlist)
            kw2 = dict(kw, OFFLOAD_CLANG="$" + self.program_var)
        # OpenMP: the host IR of this object's host compile, read by every device compile.
        ir = _compile.host_ir(env, s, None, kw, pic)[0] if _host_ir.wanted(env, kw, lang) else None
        devices = {a: _compile.device_object(env, s, a, None, kw2, ir)[0] for a in archs}
        parts = {"host": None, "devices": devices, "package": None}
        if lang.bundled_device_code:
            extra = []
            if devices:
                hipfb = env._OffloadHipfb(fat, list(devices.values()), **kw)
                parts["package"] = hipfb[0]
                extra = [hipfb[0]]
            kw2 = dict(kw2, _OFFLOAD_HOST_ARCHFLAGS=" ".join(f"--offload-arch={a}" for a in archs))
            made = _compile.host_object(env, s, fat, kw2, extra_sources=extra, pic=pic)
            parts["host"] = made[0]
        else:
            host = _compile.host_object(env, s, None, kw, pic=pic)
            parts["host"] = host[0]
            if devices:
                # Package and fat object: two targets of one action (run inside SCons).
                both = env._OffloadPackageEmbed(fat, [host[0]] + list(devices.values()), _OFFLOAD_PIC=pic,
                                                _OFFLOAD_LANG=lang.name, **kw)
                parts["package"] = both[0]
                made = both[1:]
            else:
                made = host
        for n in made:
            n.attributes.offload_parts = parts
        parts["host"].attributes.offload_flavour = self.name  # (linked alone by a split device link)
        return made

    def split_parts(self, env, s, lang, archs, kw, pic):
        """(host object, {arch: device object}) of source `s` for the split device link."""
        host = _compile.host_object(env, s, None, kw, pic=pic)[0]
        host.attributes.offload_flavour = self.name
        return host, {a: _compile.device_object(env, s, a, None, kw)[0] for a in archs}


class Nvcc(Flavour):
    """nvcc: the steps of its `--dryrun` as nodes per arch (`_nvcc`), else one compile per source
    with a `-gencode` per arch; objects of relocatable device code are marked for the device link
    (`_nvcc_link`)."""

    name = "cuda-nvcc"
    compiler = ("OFFLOAD_NVCC", "nvcc")

    def __init__(self, runtime: "_Runtime"):
        self.runtime = runtime

    def compile(self, env, senv, s, fat, lang, archs, kw, pic):
        _toolchain.require(senv, *self.compiler)
        o = dict(kw, _OFFLOAD_NVCC_ARCHS=list(archs), _OFFLOAD_LANG="cuda")
        if pic:
            pic_overrides(senv, o)
        plan = _nvcc.plan_for(senv, o, [fat], [s])
        made = _nvcc.split_object(env, senv, s, fat, o, plan) if plan else env._OffloadNvccCompile(fat, s, **o)
        for n in made if not plan else ():
            n.attributes.offload_parts = {"host": n, "devices": {}, "package": None}
        _nvcc.clean_leftovers(env, made, fat.dir, stem(fat) + ".")
        _nvcc.mark(made, senv, o, plan)
        _compdb.record(senv.Override(o), made, [s], "OFFLOAD_NVCCDBCOM")
        return made


class Host(Flavour):
    """A plain host source of an offload program: no device code, no runtime; its object is made
    by `plain_host_object`, which needs no flavour machinery."""

    name = "host"
    compiler = None


def plain_host_object(env, s, target, kw, pic):
    """The `host` flavour's object of `s`: the environment's own C/C++ compile (`StaticObject` /
    `SharedObject`), with `$OFFLOAD_HOSTFLAGS` after `$CCFLAGS` as in every other host compile
    (`-march=native` there reaches `main.cpp` too)."""
    senv = settings(env, kw)
    build = env.SharedObject if pic else env.StaticObject
    o = {k: v for k, v in kw.items() if k != "OFFLOAD_LANG"}
    if senv.get("OFFLOAD_HOSTFLAGS"):
        o["CCFLAGS"] = SCons.Util.CLVar(senv.get("CCFLAGS", [])) + SCons.Util.CLVar(senv["OFFLOAD_HOSTFLAGS"])

    def make():
        made = build(target, s, **o) if target else build(s, **o)
        for n in made:
            n.attributes.offload_lang = "host"
            n.attributes.offload_flavour = "host"
        return made

    return registry.get(env, _compile.request_key(env, s, target, "plain" + (" pic" if pic else "")), "plain",
                        wants(senv, "host", kw=kw), make)


class _Runtime:
    """A language runtime a link needs: flags for the offload link, the file for an ld script."""

    def __init__(self, link, library):
        self._link, self._library = link, library

    def link_flags(self, env) -> list[str]:
        return [] if env.get("_OFFLOAD_RELOCATABLE") else self._link(env)

    def library_inputs(self, senv) -> list[str]:
        return self._library(senv)


def _cuda_link(env):
    # libcudart.so lives outside the default search path (/usr/local/cuda/lib64); a relocatable
    # link takes no shared library (the static library's script names it).
    lib = _toolchain.CUDA_LIBDIR
    return [f"-L{lib} -Wl,-rpath,{lib} -lcudart"] if env.get("OFFLOAD_CUDA_PATH") else []


def _cuda_library(senv):
    cudart = os.path.join(senv.subst(_toolchain.CUDA_LIBDIR), "libcudart.so")
    return [cudart] if senv.get("OFFLOAD_CUDA_PATH") and os.path.isfile(cudart) else []


CUDA_RUNTIME = _Runtime(_cuda_link, _cuda_library)
HIP_RUNTIME = _Runtime(lambda env: ["-lamdhip64"], lambda senv: ["-lamdhip64"])

_AMD_CHECKS = [_settings_check.amd_device_libs]
for _flavour in (Clang("clang"), Clang("openmp-clang", checks=[_settings_check.openmp_runtime] + _AMD_CHECKS),
                 Clang("cuda-clang", runtime=CUDA_RUNTIME, checks=[_settings_check.cuda_for_clang]), Nvcc(CUDA_RUNTIME),
                 Clang("hip-bundled", runtime=HIP_RUNTIME, split_device_link=False, checks=_AMD_CHECKS),
                 Clang("hip-packaged", runtime=HIP_RUNTIME, split_device_link=False, checks=_AMD_CHECKS),
                 Clang("hip-bundled-hipcc", "OFFLOAD_HIPCC", "hipcc", HIP_RUNTIME, split_device_link=False),
                 Clang("hip-packaged-hipcc", "OFFLOAD_HIPCC", "hipcc", HIP_RUNTIME, split_device_link=False),
                 Host()):
    register(_flavour)


def OffloadAddFlavour(env, flavour, link_flags=(), library_inputs=(), split_device_link: bool = False,
                      program_var: str | None = None, program: str = "") -> Flavour:
    """One more way of building, named by a language record's `flavours`: a `Flavour` instance,
    or the name of a flavour on clang's per-arch graph with its runtime, e.g.
    `env.OffloadAddFlavour('sycl-clang', link_flags=['-lsycl'], library_inputs=['-lsycl'])`
    (`program_var`/`program`: another clang-based driver that runs every node, as hipcc does)."""
    if isinstance(flavour, Flavour):
        return register(flavour)
    runtime = _Runtime(lambda env: list(link_flags), lambda senv: list(library_inputs))
    return register(Clang(str(flavour), program_var, program, runtime, split_device_link))


def check_archs(senv, archs, flavour: Flavour, lang, source) -> None:
    """PTX-only archs (`compute_NN`) are nvcc's alone; an arch the compiler that would build the
    source does not know (sm_120 with clang 19, gfx940 with clang 22, sm_70 with CUDA 13's nvcc) is
    refused here, naming that compiler, its release and the archs it knows: else it fails per
    compile, or, where the tool judged by another release's tables, a good arch was refused. The
    compiler is asked (`_toolchain.offload_archs`, kept between runs). hipcc is not: it is a
    script whose clang its environment picks, so its answers could not be kept, and asking it
    would cost ~0.4 s in every null build; it says itself when it compiles."""
    if isinstance(flavour, Nvcc):
        nvcc = senv.subst("$OFFLOAD_NVCC").strip() if senv.get("OFFLOAD_NVCC") else ""
        if nvcc:
            _refuse_unknown(senv, archs, lang, source, nvcc, _toolchain.offload_archs(senv, nvcc, nvcc=True), None)
        return
    compiler = (flavour.compiler or ("", "clang"))[1]
    _archs.refuse_ptx_only(archs, compiler, lang.name)
    if flavour.compiler and flavour.compiler[0] == "OFFLOAD_CLANG":
        clang = senv.subst("$OFFLOAD_CLANG").strip()
        _refuse_unknown(senv, archs, lang, source, clang, _toolchain.offload_archs(senv, clang),
                        _toolchain.clang_major(senv))


def _refuse_unknown(senv, archs, lang, source, command: str, known, major: int | None) -> None:
    """The `UserError` for the first of `archs` that `command` does not know (`major`: its LLVM
    release when it is clang; `known`: what it listed, None when it could not say)."""
    bad = next((a for a in archs if not _archs.known_to(a, known, major)), None)
    if bad is None:
        return
    nvcc = major is None
    vendor = _archs.vendor(bad)
    names = _archs.known_names(known or {}, vendor)
    if nvcc:  # the variants nvcc does not list, which `offload_archs` added
        names = [n for n in names if not (n[-1] in "af" and n[:-1] in names)]
    knows = f" (it knows {', '.join(names)})" if names else ""
    if nvcc:
        fix = "an arch it knows, or a CUDA whose nvcc knows it (OFFLOAD_NVCC)"
    else:
        releases = [v for v in _archs.releases_knowing(bad) if v != major]
        fix = ("a clang of LLVM " + (f"{releases[0]}" if len(releases) == 1 else f"{releases[0]} to {releases[-1]}")
               + " knows it (OFFLOAD_CLANG)") if releases else "an arch it knows, or a clang that knows it (OFFLOAD_CLANG)"
        if lang.offload_kind == "cuda":
            fix += ", or nvcc (OFFLOAD_CUDA_COMPILER='nvcc')"
    raise SCons.Errors.UserError(
        f"offload: OFFLOAD_ARCHS: '{bad}' is not an offload arch {_toolchain.compiler_words(senv, command, nvcc)} "
        f"knows{knows}, which compiles '{source}' ({lang.name}): {fix}")
