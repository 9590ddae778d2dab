"""Offload archs across LLVM releases: which vendor owns an arch, the releases whose tables the
library holds, the PTX and SASS names of one NVIDIA arch, and whether an image's arch meets a
requested one.

`target_id` answers as one release's driver does (`llvm_version`).  A tool that reads files any
release wrote (`verify`, `cost`, `--runs-on`) or builds with whichever clang is installed (the
SCons tool) asks here instead: every table, newest first, so that an arch that left LLVM
(`gfx940`, gone in 21) and one that arrived later (`sm_120`, new in 20) are both known.  That
decision is made once, in this module."""

from __future__ import annotations

import re

from ..errors import OffloadError
from . import target_id

__all__ = ["LLVM_RELEASES", "NEWEST_LLVM", "NAME_FORMS", "vendor", "vendor_by_name", "triple", "amd_row",
           "parse_target_id", "canonical_processor", "canonical_amd", "releases_knowing", "is_ptx",
           "sass_of_ptx", "ptx_of_sass", "arch_satisfied"]

#: The LLVM releases whose arch tables the library holds, newest first (`target_id` reads the
#: tables of older releases as 19's and of newer ones as 22's).
LLVM_RELEASES = (22, 21, 20, 19)
#: The newest LLVM release the library knows.
NEWEST_LLVM = LLVM_RELEASES[0]

#: Processor names of NVIDIA's and AMD's form, whichever release has them: a processor newer
#: than every table (`gfx9999`, `sm_130`) is still of a vendor.
NAME_FORMS = (("nvidia", re.compile(r"sm_\d+[af]?")),
              ("amd", re.compile(r"gfx[0-9a-f]+(?:(?:-\d+)*-generic)?")))

#: A PTX-only arch: `compute_90` is PTX for the virtual arch of `sm_90`, and no SASS.
_PTX = re.compile(r"compute_(\w+)")


def vendor(arch: str) -> str | None:
    """'nvidia' or 'amd' for an offload arch or target ID that some release's table knows (the
    newest deciding), else None.  Never raises: a malformed name is of no vendor."""
    for release in LLVM_RELEASES:
        try:
            found = target_id.offload_arch_vendor(arch, release)
        except OffloadError:
            found = None
        if found:
            return found
    return None


def vendor_by_name(arch: str) -> str | None:
    """The vendor of an arch by its processor's name: its form (`NAME_FORMS`), else any
    release's table (aliases such as `fiji`, `amdgcnspirv`).  Not whether a compiler knows it."""
    processor = arch.partition(":")[0]
    for name, pattern in NAME_FORMS:
        if pattern.fullmatch(processor):
            return name
    return vendor(processor)


def triple(arch: str) -> str:
    """The device triple of an arch of NVIDIA's or AMD's name (`vendor_by_name`), as the driver
    picks it: `nvptx64-nvidia-cuda`, `spirv64-amd-amdhsa` for `amdgcnspirv`, else AMDGCN's."""
    if vendor_by_name(arch) == "nvidia":
        return target_id.NVPTX_TRIPLE
    return "spirv64-amd-amdhsa" if arch.partition(":")[0] == "amdgcnspirv" else target_id.AMDGCN_TRIPLE


def amd_row(processor: str) -> dict | None:
    """The AMDGPU processor table's row of a processor or alias, from the newest release that has
    it (its features, whether it is generic), or None."""
    for release in LLVM_RELEASES:
        row = target_id._amdgcn_names(target_id._table_version(release)).get(processor)
        if row is not None:
            return row
    return None


def parse_target_id(text: str) -> target_id.TargetID | None:
    """`target_id.parse_target_id` (AMDGCN) of the newest release that takes `text`, or None."""
    for release in LLVM_RELEASES:
        try:
            return target_id.parse_target_id(text, llvm_version=release)
        except OffloadError:
            continue
    return None


def canonical_processor(name: str) -> str | None:
    """The canonical AMDGCN processor name (aliases resolved) in the newest release that knows
    `name`, or None."""
    for release in LLVM_RELEASES:
        found = target_id.canonical_processor(name, llvm_version=release)
        if found:
            return found
    return None


def canonical_amd(arch: str) -> str:
    """`canonical_offload_arch` of an AMD arch (HIP's rules) in the newest release that takes it:
    aliases resolved, features in canonical order.  Raises the oldest release's `TargetIDError`
    when none does."""
    error: OffloadError | None = None
    for release in LLVM_RELEASES:
        try:
            return target_id.canonical_offload_arch(arch, release, offload_kind="hip")
        except OffloadError as exc:
            error = exc
    raise error


def releases_knowing(arch: str) -> list[int]:
    """The releases whose driver takes `arch` as an offload arch, oldest first."""
    out = []
    for release in sorted(LLVM_RELEASES):
        try:
            target_id.canonical_offload_arch(arch, llvm_version=release)
            out.append(release)
        except OffloadError:
            pass
    return out


def is_ptx(arch: str) -> bool:
    """True for a PTX-only arch, `compute_NN` (nvcc's `code=compute_NN`)."""
    return _PTX.fullmatch(arch) is not None


def sass_of_ptx(arch: str) -> str | None:
    """The SASS arch of a PTX-only one (`compute_90a` -> `sm_90a`), or None for any other name."""
    m = _PTX.fullmatch(arch)
    return f"sm_{m.group(1)}" if m else None


def ptx_of_sass(arch: str) -> str:
    """The PTX name of an NVIDIA arch (`sm_90` -> `compute_90`)."""
    return "compute_" + arch[len("sm_"):]


def arch_satisfied(provided: str, requested: str, image_kind: str = "") -> bool:
    """Does an image built for `provided` (of `image_kind`, as `inspect` names it) satisfy a
    requirement for `requested`?  AMD archs by target-ID compatibility after canonicalising
    (`gfx90a` satisfies `gfx90a:xnack+`, `gfx90a:xnack+` not `gfx90a:xnack-`); `compute_NN`
    asks for a PTX image of `sm_NN`; any other arch by its name."""
    if not provided:
        return False
    if vendor(requested) == "amd":
        if vendor(provided) != "amd":
            return False
        try:
            return target_id.is_compatible_target_id(canonical_amd(provided), canonical_amd(requested))
        except OffloadError:
            return False  # a malformed target ID in the file satisfies nothing
    sass = sass_of_ptx(requested)
    if sass is not None:
        return image_kind == "ptx" and provided == sass
    return provided == requested
