"""Checks of the tool's own containers at the moment a step consumes them.

A `.hipfb` bundle or a program's device-image carrier is read by a compiler or a linker that does
not look inside it: clang embeds whatever bytes `-fcuda-include-gpubinary` names, and the linker
links whatever the carrier holds.  Such a file may come from `CacheDir`, from an earlier
interrupted build or from a damaged disk; a partial build (`scons build/bin/x`) would then link it
silently.  So the step that consumes one first reads it with the library, and a file that does
not parse stops the build with one line naming it (packages are checked by the embed step that
reads them).  Added as a pre-action of the consuming node (`check_before`), so the builders
themselves stay as they are."""

from __future__ import annotations

import os
import sys

import SCons.Action

from ..scons import actions as _actions
from ..scons import nodes as _nodes

__all__ = ["check_before", "check_container", "CHECK_ACTION", "check_device_object", "with_device_check"]

HIPFB_SUFFIX = ".hipfb"
CARRIER_SUFFIX = ".offload.o"


def _check_hipfb(path: str) -> None:
    from offload_tool.errors import BundleFormatError
    from offload_tool.ops.bundler_api import read_bundle

    bundle = read_bundle(path, "o")
    if not any(not e.bundle_entry_id.startswith("host-") for e in bundle.entries):
        raise BundleFormatError("the bundle holds no device code object")


def _check_carrier(path: str) -> None:
    from offload_tool.errors import OffloadBinaryError
    from offload_tool.fileio import open_input
    from offload_tool.ops.extract import find_offload_images

    with open_input(path) as buf:
        if not find_offload_images(buf, path):
            raise OffloadBinaryError("the carrier object holds no offload image")


def check_container(path: str) -> str | None:
    """None if the container at `path` reads back whole, else the one-line reason it does not."""
    from offload_tool.errors import OffloadError
    from offload_tool.printable import printable

    check = _check_hipfb if path.endswith(HIPFB_SUFFIX) else _check_carrier if path.endswith(CARRIER_SUFFIX) else None
    if check is None:
        return None
    try:
        check(path)
    except OffloadError as exc:
        return printable(f"{path}: damaged offload container, not used: {exc} (remove it so that it is rebuilt; "
                         f"a CacheDir copy may be damaged)")
    return None


def _check_sources(target, source, env) -> int:
    for s in source:
        problem = check_container(str(s))
        if problem:
            sys.stderr.write(f"offload: error: {problem}\n")
            return 1
    return 0


# Silent (no command line shown): it is part of the consuming step, not a step of its own.
CHECK_ACTION = SCons.Action.Action(_check_sources, None)


def check_before(env, targets) -> None:
    """Check the `.hipfb` bundles and carriers among `targets`' sources before they are built."""
    env.AddPreAction(targets, CHECK_ACTION)


# --------------------------------------------------------------------------------------------
# Per-arch device objects

#: Kinds by suffix of the files nvcc's and clang's device steps write that carry no
#: `offload_image` mark (nvcc's split graph); a node with the mark is read by its magic.
_DEVICE_SUFFIXES = {".co": "elf", ".cubin": "elf", ".ptx": "ptx"}


#: The kind of an object nvcc compiled with relocatable device code (`offload_nvcc_rdc`), which
#: its device link reads (`_nvcc_link`): a host ELF object whose fat binary holds the per-arch code.
NVCC_RDC_OBJECT = "nvcc-rdc-object"


def device_kind(node) -> str | None:
    """What `check_image` checks `node` as, or None when it is no per-arch device object (a host
    object, a host IR, a package)."""
    attributes = _nodes.marks(node)
    if getattr(attributes, "offload_image", None) is not None:
        return "auto"  # a clang device object: ELF (`.o`, `.co`) or bitcode (`.bc`), by its magic
    if getattr(attributes, "offload_nvcc_rdc", None):
        return NVCC_RDC_OBJECT  # an archive of such objects carries the mark too: see `_check`
    return _DEVICE_SUFFIXES.get(os.path.splitext(str(node))[1])


def _check_nvcc_rdc_object(path: str) -> None:
    """The object as ELF (`check_image`), then every fat binary in its `__nv_relfatbin` /
    `.nv_fatbin` sections, headers and extents (the per-arch code nvlink takes from it). An
    archive of such objects carries the same mark; it is not read member by member here (nvlink
    reads it), as a static library may be large and is not a per-arch object."""
    from offload_tool.formats.elf import read_sections
    from offload_tool.formats.fatbin import FATBIN_SECTIONS, read_fatbins
    from offload_tool.ops.integrity import check_image

    with open(path, "rb") as f:
        data = f.read()
    if data.startswith(b"!<arch>\n"):
        return
    check_image(data, "elf", name=path)
    for sec in read_sections(data):
        if sec.name in FATBIN_SECTIONS and sec.size:
            read_fatbins(sec.data)


def _check(path: str, kind: str) -> None:
    """Raise an `OffloadError` when the file at `path` is damaged as `kind`."""
    from offload_tool.ops.integrity import check_image

    if kind == NVCC_RDC_OBJECT:
        _check_nvcc_rdc_object(path)
    else:
        check_image(path, kind)


def _damage(path: str, kind: str) -> str | None:
    """How the file at `path` is damaged as `kind` (the library's one-line message), or None when
    it is whole, missing or unreadable (a step that reads it says so in its own words).

    Only the message is kept, never the exception: its traceback holds the reader's frames and
    their views of the file, and a caller's local naming it closes a reference cycle through
    `f_back`, which CPython's collector may fail to clear (a crash of the SCons process)."""
    from offload_tool.errors import OffloadError

    try:
        _check(path, kind)
    except OSError:
        return None
    except OffloadError as exc:
        return str(exc)
    return None


def check_device_object(path: str, kind: str, built: bool = True) -> str | None:
    """None if the device object at `path` is structurally whole as `kind`, else the one-line
    reason it is not, after removing it when `built` (a file the build made).

    Why remove it: SCons decides what to rebuild from its own records (`.sconsign`), not from the
    bytes of a target it made, so a target damaged after it was built (a killed compiler, a full
    disk, a bad copy) stays "up to date" for ever and the user would have to find and delete it.
    Without the file its node is out of date: the next build remakes it, and only it and what
    consumes it. A file no step of the build makes (a source the user wrote or copied in) is
    never removed, only named."""
    from offload_tool.printable import printable

    damage = _damage(path, kind)
    if damage is None:
        return None
    what = "not used"
    if built:
        try:
            os.remove(path)
            what = "removed so that the next build remakes it"
        except OSError as rm:
            what = f"remove it so that it is rebuilt (it could not be removed: {rm.strerror or rm})"
    return printable(f"{path}: damaged device object, not used: {damage} ({what})")


def drop_damaged_cache_copy(node, kind: str) -> str | None:
    """Remove `node`'s copy in SCons's `CacheDir` when that copy is damaged as `kind`; what was
    done, for the error line, or None when there is no copy or it is whole.

    Why: SCons fetches a target from the cache by its build signature without reading it, so
    once a damaged copy lies there (a full disk or a killed copy while SCons pushed it, a bad
    shared cache), removing the target is not enough: the next build fetches the same bytes,
    this check stops it again, and so on for ever. Without the copy the next build compiles the
    object and pushes a whole one. A whole copy is kept: the target was damaged after it was
    fetched, and fetching it again mends it."""
    from offload_tool.printable import printable

    from ..scons import hooks as _scons_hooks

    path = _scons_hooks.cache_copy_path(node)
    if path is None or not os.path.isfile(path) or _damage(path, kind) is None:
        return None
    try:
        os.remove(path)
    except OSError as rm:
        return printable(f"its CacheDir copy {path} is damaged too and could not be removed "
                         f"({rm.strerror or rm}): remove it, or each build fetches it again")
    return printable(f"its CacheDir copy {path} was damaged too and is removed")


def _check_device_sources(target, source, env) -> int:
    failed = 0
    for s in source:
        kind = device_kind(s)
        if kind is None:
            continue
        built = _nodes.has_builder(s)
        problem = check_device_object(str(s), kind, built=built)
        if problem:
            cache = drop_damaged_cache_copy(s, kind) if built else None
            sys.stderr.write(f"offload: error: {problem}{'; ' + cache if cache else ''}\n")
            failed = 1
    return failed


#: The check of a step's per-arch device objects, run before the step (silent). It adds nothing
#: to the step's signature: a step is not rebuilt because the tool checks its inputs.
DEVICE_CHECK_ACTION = _actions.unsigned(_check_device_sources)


def with_device_check(act):
    """`act` preceded by the structural check of the per-arch device objects among its sources
    (`offload_tool.ops.integrity`: headers and tables only, microseconds per object): the bundle
    of HIP code objects, nvcc's fat binary of cubins and PTX, the package of clang device
    objects, the device link of bitcode, nvcc's device link of relocatable device code (its
    objects for nvlink or `nvcc -dlink`, the linked cubins for the link stub's fat binary). A
    damaged one stops the step with one line naming it and is removed (`check_device_object`),
    and so is its `CacheDir` copy when that is damaged too (`drop_damaged_cache_copy`), so the
    next build remakes it; the step's signature is the one of `act` alone."""
    return _actions.sequence([DEVICE_CHECK_ACTION, act])
