"""The `Flavour` base class and the registry of flavours (`register`, `flavour_for`, `of_node`).

A flavour is one way of building offload code, in the spirit of LLVM's driver `ToolChain` classes
(clang's `Driver/ToolChains/`: every decision of a toolchain a method or field of its class). It
owns every fact about itself, so that nothing outside `flavours/` (and `settings/languages.py`,
whose records name flavours) asks which flavour or language an object is by name:

- the compile graph of a source (`compile`) and the checks of its settings (`checks`,
  `check_archs`);
- the runtime its objects need at link time (`runtime`: a final link's flags, a static library's
  ld script), and whether its device objects may join the split AMD device link
  (`split_device_link`);
- which flag variables its steps read and where flags it does not read belong (`flag_vars`,
  `misplaced_flags`: `settings.checks.unused_in_link` notes the others);
- what its compiles do when the build distributes through sccache-dist (`dist`, a
  `dist.sccache.Policy`);
- the marks its objects carry (`mark`: `offload_lang`, `offload_flavour`), by which links find
  the flavour again (`of_node`).

Each built-in flavour is a module of its own (`openmp_clang`, `cuda_clang`, `cuda_nvcc`, `hip`,
`host`, the generic `clang`), registered in one place, `flavours.registry`."""

from __future__ import annotations

import types

import SCons.Errors

from ..scons import nodes as _nodes
from ..dist import sccache as _dist
from ..settings import archs as _archs
from ..settings import languages as _languages
from ..toolchain import discovery as _toolchain

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
    return FLAVOURS.get(getattr(_nodes.marks(n), "offload_flavour", None) or "")


class Runtime:
    """A language runtime a link needs: flags for the offload link, the file for an ld script."""

    def __init__(self, link, library):
        self._link, self._library = link, library

    def link_flags(self, env) -> list[str]:
        return [] if env.get("_OFFLOAD_RELOCATABLE") else self._link(env)

    def library_inputs(self, senv) -> list[str]:
        return self._library(senv)


#: The flag variables the steps of clang's graphs read: every host compile `OFFLOAD_HOSTFLAGS`,
#: each device compile `OFFLOAD_DEVICEFLAGS`.
HOST_AND_DEVICE_FLAGS = frozenset({"OFFLOAD_HOSTFLAGS", "OFFLOAD_DEVICEFLAGS"})


class Flavour:
    """A way of building offload code. Subclasses give `compile`; the rest has defaults, those
    of a flavour on clang (an object of unknown origin is judged as one: `UNKNOWN`)."""

    name = ""
    #: The language it builds, whose name marks objects it makes beyond a source's compile (a
    #: device link's object, a program's carrier of device images); '' for the generic flavour.
    language = ""
    #: The compiler variable it requires (the tool's 'not found' error names its package).
    compiler: tuple[str, str] | None = ("OFFLOAD_CLANG", "clang")
    #: Its device objects are images the linker wrapper links, so an AMD arch's may be linked in
    #: a `DEVICELINK` node of its own (see `graph.link._split_link_inputs`).
    split_device_link = False
    #: A program of its objects links one carrier of their device images even when no arch needs
    #: a device link of its own (no package and fat object per source; see `graph.link`).
    carrier_without_device_link = False
    #: The language runtime its objects need at link time (`Runtime`), if any.
    runtime: Runtime | None = None
    #: Checks (`settings.checks`) that say before the build what keeps it from building in an
    #: environment (a runtime or a toolkit the compiler lacks).
    checks: tuple = ()
    #: What its compiles do when the build distributes through sccache-dist (`dist.sccache`).
    dist: _dist.Policy = _dist.SENT
    #: The flag variables its steps read.
    flag_vars: frozenset = HOST_AND_DEVICE_FLAGS
    #: Flag variables its steps do not read, each with where such flags belong: noted for a link
    #: whose objects no step read them in (`settings.checks.unused_in_link`).
    misplaced_flags: types.MappingProxyType = types.MappingProxyType({})

    def whole(self, senv) -> bool:
        """Whether its sources compile as one job each in `senv` (host and every arch: a fat
        object, no per-arch nodes), so the split device link has no device objects of theirs."""
        return False

    def check(self, senv) -> None:
        """Run its checks on `senv` (asked once per object; each check says a thing once)."""
        for check in self.checks:
            check(senv)

    def compile(self, env, senv, s, fat, lang, archs: list[str], kw: dict, pic: bool) -> list:
        """The nodes of one source's object `fat` (made once: the caller's registry holds them)."""
        raise NotImplementedError

    def mark(self, nodes, lang: str | None = None) -> None:
        """Mark `nodes` as objects of this flavour, of language `lang` (by default its own)."""
        for n in nodes:
            _nodes.marks(n).offload_lang = self.language if lang is None else lang
            _nodes.marks(n).offload_flavour = self.name

    def link_flags(self, env) -> list[str]:
        """What a final or shared link of its objects adds for their runtime."""
        return self.runtime.link_flags(env) if self.runtime else []

    def library_inputs(self, senv) -> list[str]:
        """What a static library's ld script names for its objects' runtime (a plain `g++` link of
        the library gets nothing else)."""
        return self.runtime.library_inputs(senv) if self.runtime else []

    def check_archs(self, senv, archs, lang, source) -> None:
        """PTX-only archs (`compute_NN`) are nvcc's alone; an arch the compiler that would build the
        source does not know (sm_120 with clang 19, gfx940 with clang 22) is refused here, naming
        that compiler, its release and the archs it knows: else it fails per compile, or, where
        the tool judged by another release's tables, a good arch was refused. The compiler is
        asked (`toolchain.discovery.offload_archs`, kept between runs). Another clang-based
        driver (hipcc) is not: it is a script whose clang its environment picks, so its answers
        could not be kept, and asking it would cost ~0.4 s in every null build; it says itself
        when it compiles."""
        compiler = (self.compiler or ("", "clang"))[1]
        _archs.refuse_ptx_only(archs, compiler, lang.name)
        if self.compiler and self.compiler[0] == "OFFLOAD_CLANG":
            clang = senv.subst("$OFFLOAD_CLANG").strip()
            refuse_unknown(senv, archs, lang, source, clang, _toolchain.offload_archs(senv, clang),
                           _toolchain.clang_major(senv))


#: The flavour an object of unknown origin is judged as (its flags read as clang's steps read them).
UNKNOWN = Flavour()


def refuse_unknown(senv, archs, lang, source, command: str, known, major: int | None) -> None:
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
