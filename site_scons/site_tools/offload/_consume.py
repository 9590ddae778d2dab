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

import sys

import SCons.Action

__all__ = ["check_before", "check_container", "CHECK_ACTION"]

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
