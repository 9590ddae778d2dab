"""Link builders: programs, shared libraries, relocatable offload links, static libraries, and
the split AMD device link.

    OffloadProgram, OffloadSharedLibrary, OffloadArchive, OffloadRelocatableObject,
    OffloadStaticLibrary

A link with OpenMP objects (or objects of unknown origin) is an OpenMP offload link (`-fopenmp`,
the OpenMP runtimes); a CUDA/HIP-only link is linked as clang links those languages
(`--offload-link`, their runtime, no OpenMP runtime)."""

from __future__ import annotations

import hashlib
import os
import sys

import SCons.Action
import SCons.Script
import SCons.Util

from ..scons import actions as _actions
from ..scons import nodes as _nodes
from ..settings import archs as _archs
from . import compile as _compile
from ..dist import sccache as _dist
from ..flavours import registry as _flavours
from ..settings import languages as _languages
from . import libraries as _libraries
from .nvcc import device_link as _nvcc_link
from . import objects as _objects
from ..settings import checks as _settings_check
from ..toolchain import discovery as _toolchain
from ..toolchain import installations as _installations
from . import consume as _consume
from . import memory_budget as _memory
from ..settings.archs import archs_for, file_safe
from .common import (COMPILER_VARS, LIBRARY_VARS, PACKAGE_EMBED, TOOL_DIR, action, builder, canonical, cleaning,
                     node, nodes, package_embed_builder, registry, settings)

_DEVICE_LINK = os.path.join(TOOL_DIR, "_device_link.py")

COMMANDS = {
    "OFFLOAD_CARRIERCOM": f"$( $OFFLOAD_PYTHON {PACKAGE_EMBED} $) --empty-host ${{TARGETS[0]}} ${{TARGETS[1]}} "
                          "$_OFFLOAD_CARRIER_REF $_OFFLOAD_PACKAGERFLAGS $_OFFLOAD_IMAGES",
    "OFFLOAD_DEVICELINKCOM": f"$( $OFFLOAD_PYTHON {_DEVICE_LINK} $) --llvm=$_OFFLOAD_DEVLINK_LLVM $TARGET "
                             "$_OFFLOAD_CARRIER_REF $OFFLOAD_CLANGXX -fopenmp --offload-arch=$OFFLOAD_ARCH $_OFFLOAD_VENDORFLAGS "
                             "$_OFFLOAD_DEVICE_RUNTIME $OFFLOAD_LINKFLAGS $_OFFLOAD_LINK_OPTFLAG "
                             "-- $_OFFLOAD_IMAGES",
    "OFFLOAD_LINKCOM": "$OFFLOAD_CLANGXX -o $TARGET $_OFFLOAD_LINKFLAGS $OFFLOAD_LINKFLAGS $LINKFLAGS "
                       "$SOURCES $_LIBDIRFLAGS $_LIBFLAGS",
    "OFFLOAD_SHLINKCOM": "$OFFLOAD_CLANGXX -shared -o $TARGET $_OFFLOAD_LINKFLAGS $OFFLOAD_LINKFLAGS "
                         "$SHLINKFLAGS $SOURCES $_LIBDIRFLAGS $_LIBFLAGS",
    "OFFLOAD_RELOCCOM": "$OFFLOAD_CLANGXX -r -o $TARGET $_OFFLOAD_LINKFLAGS $OFFLOAD_LINKFLAGS "
                        "$_OFFLOAD_DEVICE_RUNTIME $SOURCES",
    "OFFLOAD_ARCOM": "$OFFLOAD_AR $OFFLOAD_ARFLAGS $TARGET $SOURCES",
}

COMSTRS = {
    "OFFLOAD_CARRIERCOMSTR": "PACKAGE+EMBED ${TARGETS[1]}",
    "OFFLOAD_DEVICELINKCOMSTR": "DEVICELINK ${OFFLOAD_ARCH} ${TARGET}",
    "OFFLOAD_LINKCOMSTR": "LINK ${TARGET}",
    "OFFLOAD_SHLINKCOMSTR": "LINK ${TARGET}",
    "OFFLOAD_RELOCCOMSTR": "RELOCATABLE ${TARGET}",
    "OFFLOAD_ARCOMSTR": "AR ${TARGET}",
    "OFFLOAD_LDSCRIPTSTR": "LDSCRIPT ${TARGET}",  # a Python step: no *COM
}


def link_flags(target, source, env, for_signature):
    """Offload flags of a final or relocatable link. With OpenMP objects (or objects of unknown
    origin): the OpenMP runtime and device runtime for every linked arch. Without: a CUDA / HIP
    link as clang does it (`--offload-link`, no OpenMP runtime); plus the runtimes of the objects'
    flavours (`Flavour.link_flags`)."""
    archs = env.get("_OFFLOAD_LINK_ARCHS") or []
    present = set(env.get("_OFFLOAD_LINK_FLAVOURS") or ())
    openmp = env.get("_OFFLOAD_LINK_OPENMP", True)
    flags = ["-fopenmp"] if openmp else ["--offload-link"]
    jobs = env.get("OFFLOAD_LINK_JOBS")
    if callable(jobs):
        jobs = jobs()
    if jobs and int(jobs) > 1:
        # Device links of the archs run in parallel in clang-linker-wrapper; not in signatures.
        flags.append(f"$( -Wl,--wrapper-jobs={int(jobs)} $)")
    if archs and openmp:
        flags.append("--offload-arch=" + ",".join(archs))
    libdir = _toolchain.llvm_libdir(env)
    if openmp and libdir and os.path.isfile(os.path.join(libdir, "libomptarget.so")):
        # libomptarget lives outside the default search path (Debian: /usr/lib/llvm-N/lib): record
        # it, so programs run and consumers of a shared library link without extra flags.
        flags.append(f"-Wl,-rpath,{libdir}")
    vendors = {_archs.vendor(a) for a in archs}
    if "nvidia" in vendors and openmp:
        flags.append("$_OFFLOAD_NVPTX_BCFLAG")
    flags.extend(_installations.device_flags(env, vendors))
    # The runtimes of the objects' flavours (libcudart, libamdhip64), in the flavours' order.
    for flavour in _flavours.FLAVOURS.values():
        if flavour.name in present:
            flags.extend(f for f in flavour.link_flags(env) if f not in flags)
    return " ".join(flags)


def link_jobs():
    """Default of `OFFLOAD_LINK_JOBS`: `scons -jN`'s N, how many device links clang-linker-wrapper
    may run at once (`link_flags` calls it)."""
    try:
        return int(SCons.Script.GetOption("num_jobs") or 1)
    except (AttributeError, TypeError, ValueError):
        return 1


def link_opt_flag(target, source, env, for_signature):
    """`$_OFFLOAD_LINK_OPTFLAG`: the last -O flag of the final link's `$LINKFLAGS` (it comes after
    `$OFFLOAD_LINKFLAGS` on that command line): it sets the LTO level of the AMD device links split
    out of that link."""
    flags = [str(f) for f in SCons.Util.flatten([env.get("LINKFLAGS") or []])]
    opt = [f for f in flags if f.startswith("-O")]
    return opt[-1] if opt else ""


def device_runtime_flags(target, source, env, for_signature):
    """`$_OFFLOAD_DEVICE_RUNTIME`: `-L<dir> -l<name>` of the OpenMP device runtime of the clang in
    use (relocatable and split device links add it themselves; a final link gets it from the
    driver)."""
    info = _toolchain.clang_info(env)
    rt = info.device_runtime if info else None
    if not rt:
        return ""
    return f"-L{os.path.dirname(rt)} -l{os.path.basename(rt)[3:-2]}"


def _script_word(name: str) -> str:
    """A file name as a GNU ld script names it: quoted when it holds a blank or a character the
    script language reads (`(`, `)`, `,`, `;`, `"`); a quote in a name cannot be written."""
    return f'"{name}"' if any(c in name for c in " \t(),;=") else name


def _write_ldscript(target, source, env):
    """`libfoo.a`: the script text, and a comment with the digest of the archive it names. A
    consumer's link depends on `libfoo.a` alone (SCons's LIBS scanner finds that file, not what it
    names), so the script's bytes must change whenever `libfoo-offload.a` does: else an edit of the
    library stops here and its consumers keep the old host and device code."""
    digest = hashlib.sha256()
    with open(_nodes.abspath(source[0]), "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    with open(_nodes.abspath(target[0]), "w", encoding="utf-8") as f:
        f.write(env["_OFFLOAD_LDSCRIPT"])
        f.write(f"/* {source[0].name} sha256 {digest.hexdigest()} */\n")
    return 0


def _devicelink_emitter(target, source, env):
    """One arch's device link of a program (the target asked for): `<program>.<arch>.devlink.o`,
    an image of that arch, of the kind of the language whose device link it is (OpenMP's:
    `flavours.registry.SPLIT_DEVICE_LINK`)."""
    program, arch = target[0], env.subst("$OFFLOAD_ARCH")
    made = program.dir.File(f"{program.name}.{file_safe(arch)}.devlink.o")
    kind = _languages.LANGUAGES[_flavours.SPLIT_DEVICE_LINK.language].offload_kind
    _nodes.marks(made).offload_image = {"arch": arch, "triple": _archs.triple(arch), "kind": kind}
    return [made], source


def _carrier_emitter(target, source, env):
    """The device images of a program (the target asked for), packaged and embedded in an empty
    object: `<program>.offload.pkg` and `<program>.offload.o`."""
    program = target[0]
    carrier = program.dir.File(program.name + ".offload.o")
    # it holds the split device link's AMD images (OpenMP's), and whatever else
    _flavours.SPLIT_DEVICE_LINK.mark([carrier])
    return [program.dir.File(program.name + ".offload.pkg"), carrier], source


def builders() -> dict:
    return {
        "_OffloadCarrier": package_embed_builder("OFFLOAD_CARRIERCOM", emitter=_carrier_emitter),
        # (the bitcode it links is checked first: `_consume`)
        # The links run within the memory budget (`_memory`: OFFLOAD_LINK_MEMORY), whatever -j says.
        "_OffloadDeviceLink": builder(action=_actions.budgeted(_consume.with_device_check(
                                          action("OFFLOAD_DEVICELINKCOM", COMPILER_VARS + LIBRARY_VARS)),
                                          _memory.hold("DEVICELINK")),
                                      emitter=_devicelink_emitter, report_kind="device-link"),
        "_OffloadLink": builder(action=_actions.budgeted(action("OFFLOAD_LINKCOM", COMPILER_VARS),
                                                         _memory.hold("LINK")),
                                target_scanner=_actions.program_scanner(), report_kind="link",
                                final_binary=True),
        "_OffloadShLink": builder(action=_actions.budgeted(action("OFFLOAD_SHLINKCOM", COMPILER_VARS),
                                                           _memory.hold("LINK")),
                                  target_scanner=_actions.program_scanner(), report_kind="link",
                                  final_binary=True),
        "_OffloadReloc": builder(action=_actions.budgeted(action("OFFLOAD_RELOCCOM", COMPILER_VARS),
                                                          _memory.hold("RELOCATABLE")),
                                 report_kind="relocatable-link"),
        "_OffloadAr": builder(action=action("OFFLOAD_ARCOM", []), report_kind="archive", final_binary=True),
        "_OffloadLdScript": builder(action=SCons.Action.Action(_write_ldscript, "$OFFLOAD_LDSCRIPTSTR",
                                                               varlist=["_OFFLOAD_LDSCRIPT"]),
                                    report_kind="ldscript"),
    }


# --------------------------------------------------------------------------------------------
# What a link links

def _link_overrides(env, objs, kw, target=None) -> dict:
    senv = settings(env, kw)
    _compile.require_clang(senv)
    _memory.check(senv)
    known = [getattr(_nodes.marks(o), "offload_lang", "") for o in objs]
    langs = sorted({lang for lang in known if lang and getattr(_languages.LANGUAGES.get(lang), "offload_kind", "")
                    is not None})  # the offload languages (no plain host objects)
    flavours = [f.name for f in _link_flavours(objs)]
    archs = canonical(senv)
    if langs and all(known):
        # Only the archs the linked languages were built for: adding a gfx arch does not re-link a
        # CUDA-only program (objects of unknown origin keep the whole list).
        archs = [a for a in archs if any(a in archs_for(_languages.LANGUAGES[lang], [a]) for lang in langs)]
    # An OpenMP offload link unless every object is known and none is OpenMP's.
    openmp = not all(known) or any(_languages.LANGUAGES[lang].file_identity for lang in langs) or not langs
    _settings_check.unused_in_link(senv, target, [_flavours.of_node(o) or _flavours.UNKNOWN for o in objs],
                                   lambda var: _used_elsewhere(env, var))
    return dict(kw, _OFFLOAD_LINK_ARCHS=archs, _OFFLOAD_LINK_FLAVOURS=flavours, _OFFLOAD_LINK_OPENMP=openmp)


def _used_elsewhere(env, var: str) -> bool:
    """Whether a step `env` made so far reads `var`: a clang device compile OFFLOAD_DEVICEFLAGS,
    another variable an object whose flavour reads it (`Flavour.flag_vars`: nvcc's
    OFFLOAD_NVCCFLAGS)."""
    if var == "OFFLOAD_DEVICEFLAGS":
        return any(True for _ in registry.made_of(env, "device"))
    return any(var in f.flag_vars for made in registry.made_of(env, "object") for n in made
               if (f := _flavours.of_node(n)) is not None)


def _link_flavours(objs) -> list:
    """The flavours of a link's objects (those the tool built), each once, in order."""
    out = []
    for o in objs:
        f = _flavours.of_node(o)
        if f is not None and f not in out:
            out.append(f)
    return out


def _file_name(env, target, prefix: str, suffix: str):
    """A target given as a string, named as SCons's own builders name it: the prefix on the file
    name, not on the path (`shlib/bar` -> `shlib/libbar.so`), and the suffix added; a name that
    already ends with the suffix is taken as it is. A node is taken as it is."""
    if not isinstance(target, str):
        return target
    prefix, suffix = env.subst(prefix), env.subst(suffix)
    d, b = os.path.split(target)
    if suffix and b.endswith(suffix):
        return target
    return os.path.join(d, prefix + b + suffix)


def OffloadProgram(env, target, source, **kw):
    """Final link with the offload-aware driver (clang-linker-wrapper does the device link; AMD
    OpenMP device links are nodes of their own when that is safe, see `_split_link_inputs`)."""
    t = _file_name(settings(env, kw), target, "$PROGPREFIX", "$PROGSUFFIX")
    objs = _link_inputs(env, node(env, t), source, kw)
    made = env._OffloadLink(t, objs, **_link_overrides(env, objs, kw, t))
    _consume.check_before(env, made)  # the link takes a carrier's images unread
    return made


def OffloadSharedLibrary(env, target, source, **kw):
    """A shared library (objects compiled position-independent, device code linked in)."""
    t = _file_name(settings(env, kw), target, "$SHLIBPREFIX", "$SHLIBSUFFIX")
    objs = _link_inputs(env, node(env, t), source, kw, pic=True)
    made = env._OffloadShLink(t, objs, **_link_overrides(env, objs, kw, t))
    _consume.check_before(env, made)
    return made


def _link_inputs(env, target, sources, kw, pic=False) -> list:
    split = _split_link_inputs(env, target, nodes(env, sources), kw, pic)
    if split is None:
        _clean_split_leftovers(env, target)
    objs = split if split is not None else _objects.objects(env, sources, kw, pic=pic)
    # nvcc's -rdc=true objects: their device link first, as nvcc links it (archive members it
    # registers are then taken from the archives that follow).
    return _nvcc_link.device_link(env, target, objs, kw, pic) + objs


# --------------------------------------------------------------------------------------------
# The split AMD device link

def _split_parts(env, n, kw, pic):
    """(host object, {arch: device object}) of a source or OffloadObject whose flavour's device
    images the linker wrapper links (`Flavour.split_device_link`: OpenMP, CUDA with clang); "keep"
    for objects whose device code is already inside the host object (HIP's .hipfb, nvcc) or that
    have none (plain host sources); None for anything else (an object of unknown origin may carry
    device code)."""
    if _languages.is_offload_source(n):
        flavour, lang, archs = _objects.source_flavour(env, n, kw)
        if not flavour.split_device_link or flavour.whole(settings(env, kw)):
            return "keep"
        host, devices = flavour.split_parts(env, n, lang, archs, kw, pic)
        _dist.attach(settings(env, kw), [host, *devices.values()], flavour)
        return host, devices
    flavour = _flavours.of_node(n)
    if flavour is None:
        return None
    parts = getattr(_nodes.marks(n), "offload_parts", None)
    if flavour.split_device_link and parts and parts.devices and parts.package is not None \
            and parts.package.name.endswith(".pkg"):
        return parts.host, parts.devices
    return "keep"


_said: set[str] = set()


def _note(senv, message: str) -> None:
    """Say once per build why the split device link is off (unless the user turned it off)."""
    if senv.get("OFFLOAD_SPLIT_DEVICE_LINK") is not True or message in _said:
        return
    _said.add(message)
    sys.stderr.write(f"offload: note: {message}\n")


def _carried_without_device_link(items) -> bool:
    """Some of a link's inputs carry device images, and each is of a flavour whose programs link
    one carrier of them even without an AMD device link (`Flavour.carrier_without_device_link`:
    OpenMP; no package and fat object per source, two files fewer per source, and SCons's cost
    follows the files). CUDA with clang keeps its fat objects."""
    split = [p for _, p in items if p not in ("keep", None) and p[1]]
    return bool(split) and all(getattr(_flavours.of_node(host), "carrier_without_device_link", False)
                               for host, _ in split)


def _split_link_inputs(env, target, items_in, kw, pic):
    """The inputs of a final link whose AMD OpenMP device links are nodes of their own, or None
    to let clang-linker-wrapper link all device code inside the final link.

    The wrapper LTO-links every AMD arch's bitcode (with the device runtime) each time the program
    links: ~25 s per arch at 100 sources, re-run when one source changes or one arch is added. Split,
    each AMD arch is a `DEVICELINK` node (see `_device_link.py`) that only re-runs when its own device
    objects change; the link takes the host objects plus one carrier object holding the NVIDIA images
    and the linked AMD objects (each the object the wrapper's own code generator wrote), and gives
    a byte-identical device image. Without AMD archs an OpenMP program takes the same shape, its
    carrier holding only images (`_carried_without_device_link`). Used only when every input is the tool's
    own and no library in `LIBS` may carry device code (see `_libraries`);
    `OFFLOAD_SPLIT_DEVICE_LINK=False` turns it off."""
    senv = settings(env, kw)
    if not senv.get("OFFLOAD_SPLIT_DEVICE_LINK"):
        return None
    kws = _objects.source_overrides(env, items_in, kw)
    items = [(n, _split_parts(env, n, kws[n], pic)) for n in items_in]
    archs = list(canonical(senv))
    for _, p in items:  # objects built elsewhere may carry archs this environment does not list
        if p not in ("keep", None):
            archs.extend(a for a in p[1] if a not in archs)
    amd = [a for a in archs if _archs.vendor(a) == "amd"
           and any(p not in ("keep", None) and a in p[1] and p[1][a].name.endswith(".bc") for _, p in items)]
    if not amd and not _carried_without_device_link(items):
        return None
    unknown = [str(n) for n, p in items if p is None]
    if unknown:
        if amd:
            _note(senv, f"{target}: AMD device code is linked inside the final link: '{unknown[0]}' is not built "
                        "by the offload builders and may carry device code (use OffloadObject, or "
                        "OFFLOAD_LANG='host' for plain host sources)")
        return None
    reason = _libraries.device_code_reason(senv)
    if reason:
        if amd:
            _note(senv, f"{target}: AMD device code is linked inside the final link: {reason}")
        return None
    split = [p for _, p in items if p != "keep"]
    ref = split[0][0]
    llvm = _toolchain.clang_major(senv)  # how its linker wrapper forwards device-linker options
    carrier_images = []
    for a in archs:
        if a in amd:
            images = [devices[a] for _, devices in split if a in devices]
            dl = env._OffloadDeviceLink(target, images, OFFLOAD_ARCH=a,
                                        _OFFLOAD_LANG=_flavours.SPLIT_DEVICE_LINK.language,
                                        _OFFLOAD_CARRIER_REF=ref, _OFFLOAD_DEVLINK_LLVM=llvm, **kw)
            env.Requires(dl, ref)
            carrier_images.extend(dl)
        else:
            carrier_images.extend(devices[a] for _, devices in split if a in devices)
    carrier = env._OffloadCarrier(target, carrier_images, _OFFLOAD_CARRIER_REF=ref, **kw)
    env.Requires(carrier, ref)
    _compile.clean_stale_archs(env, carrier, target.dir, target.name + ".", (".o",), amd)
    objs = []
    for n, parts in items:
        if parts == "keep":
            objs.extend(_objects.offload_object(env, n, None, kws[n], pic=pic) if _languages.is_offload_source(n)
                        else [n])
        else:
            objs.append(parts[0])
            if _languages.is_offload_source(n):
                _clean_fat_leftovers(env, carrier, parts[0], pic)
    return objs + [carrier[1]]


# A program linked split after it was linked from fat objects (an AMD arch added), or the other way
# round, leaves the files of the other way behind: no node of this build names them. `scons -c`
# removes them too (they are the tool's names, see the docs' file table).

def _clean_fat_leftovers(env, owner, host, pic) -> None:
    """`x.o` + `x.pkg` (`x.os` + `x.pic.pkg`) of a source whose host object is `x.host.o` (`.os`)."""
    if not cleaning():
        return
    base, ext = os.path.splitext(host.name)
    if not base.endswith(".host"):
        return
    stem = base[:-len(".host")]
    env.Clean(owner, [host.dir.File(stem + ext), host.dir.File(stem + (".pic.pkg" if pic else ".pkg"))])


def _clean_split_leftovers(env, target) -> None:
    """The carrier and device links of a split link (`app.offload.o`, `app.offload.pkg`,
    `app.<arch>.devlink.o`) when this link is not split."""
    if not cleaning():
        return
    env.Clean(target, [target.dir.File(target.name + ".offload.o"), target.dir.File(target.name + ".offload.pkg")])
    _compile.clean_stale_archs(env, target, target.dir, target.name + ".", (".o",), [])


# --------------------------------------------------------------------------------------------
# Libraries

def _libname(env, target) -> object:
    return _file_name(env, target, "$LIBPREFIX", "$LIBSUFFIX")


def OffloadArchive(env, target, source, **kw):
    """A heterogeneous static library: fat objects in `ar`; the device link is deferred."""
    objs = _objects.objects(env, source, kw)
    made = env._OffloadAr(_libname(settings(env, kw), target), objs, **kw)
    for n in made:
        _nodes.marks(n).offload_device_code = True
    _nvcc_link.carry(made, objs)
    return made


def OffloadRelocatableObject(env, target, source, **kw):
    """Relocatable offload link (`clang -r`): device code linked and registered, so the result
    is a plain host object."""
    objs = _objects.objects(env, source, kw)
    objs = _nvcc_link.device_link(env, node(env, target), objs, kw) + objs
    return env._OffloadReloc(target, objs, _OFFLOAD_RELOCATABLE=1, **_link_overrides(env, objs, kw, target))


def OffloadStaticLibrary(env, target, source, **kw):
    """A static library a plain `g++ app.cpp -L. -lfoo` links and runs.

    `libfoo.a` is a GNU ld input script naming `libfoo-offload.a` (an archive of the relocatable
    offload link of the objects) and the OpenMP offload runtime libraries of the clang in use,
    so the consumer needs no offload flags. Returns [libfoo.a, libfoo-offload.a, foo-offload.o]."""
    senv = settings(env, kw)
    lib = env.File(_libname(senv, target))
    prefix, suffix = senv.subst("$LIBPREFIX"), senv.subst("$LIBSUFFIX")
    base = lib.name[len(prefix) if lib.name.startswith(prefix) else 0:-len(suffix) or None]
    reloc = OffloadRelocatableObject(env, lib.dir.File(base + "-offload.o"), source, **kw)
    inner = env._OffloadAr(lib.dir.File(prefix + base + "-offload" + suffix), reloc, **kw)
    libdir = _toolchain.llvm_libdir(senv)
    runtime = [os.path.join(libdir, n) for n in ("libomptarget.so", "libomp.so") if libdir]
    # the languages' runtimes, which the consumer's plain link needs too
    for flavour in _link_flavours(_objects.objects(env, source, kw)):
        runtime.extend(f for f in flavour.library_inputs(senv) if f not in runtime)
    text = ("/* GNU ld script written by the offload SCons tool: the library and its runtime. */\n"
            f"INPUT ( {' '.join(map(_script_word, [inner[0].name] + runtime))} )\n")
    script = env._OffloadLdScript(lib, inner, _OFFLOAD_LDSCRIPT=text, **kw)
    return _nodes.node_list(list(script) + list(inner) + list(reloc))


PSEUDO_BUILDERS = [OffloadProgram, OffloadSharedLibrary, OffloadArchive, OffloadRelocatableObject,
                   OffloadStaticLibrary]
