"""Embedding an offload package into a host object: the `.llvm.offloading` section.

This is what `clang -cc1 -fembed-offload-object=<package>` does at compile time, done afterwards
as a build step of its own, so that device code for one architecture can be rebuilt and
re-embedded without recompiling the host code.  The section matches clang's: type
`SHT_LLVM_OFFLOADING` (0x6fff4c0b), flags `SHF_EXCLUDE` only, alignment 8; `clang-linker-wrapper` finds it by type and the static linker drops it."""

from __future__ import annotations

from contextlib import ExitStack

from ..errors import ElfError, OffloadBinaryError, UsageError
from ..fileio import atomic_output, open_input
from ..formats.offload_binary import OFFLOADING_SECTION, read_offload_binaries

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO

__all__ = ["embed_offload_package", "embed_files", "OFFLOADING_SECTION", "SECTION_ALIGN"]

SECTION_ALIGN = 8


def _check_package(package) -> None:
    try:
        images = read_offload_binaries(package)
    except OffloadBinaryError as exc:
        raise OffloadBinaryError(f"package is not a valid offload binary: {exc}") from None
    if not images:
        raise OffloadBinaryError("package is empty (no offload binaries to embed)")


def embed_offload_package(host_object, package, out: BinaryIO) -> None:
    """Write `host_object` (an ELF relocatable object, bytes-like) with `package` added as its
    `.llvm.offloading` section to `out`.

    `package` must be one or more OffloadBinaries back to back (what `offload-packager -o` writes).
    A host object that already carries offload images is refused: the linker wrapper would link
    both sets, which is never what a build step that embeds "the" package means."""
    from ..formats import elf

    if not elf.is_elf(host_object):
        raise ElfError("host object is not an ELF file")
    etype = elf.elf_type(host_object)
    if etype not in ("ET_REL", 1):
        raise ElfError(f"host object is not a relocatable object (ELF type {etype}); embed before linking")
    _check_package(package)
    for sec in elf.read_sections(host_object):
        if sec.sh_type == elf.SHT_LLVM_OFFLOADING or sec.name == OFFLOADING_SECTION:
            raise ElfError(f"host object already has an offloading section '{sec.name}' "
                           f"(at file offset {sec.offset:#x}); compile it with --offload-host-only")
    section = elf.NewSection(OFFLOADING_SECTION, package, elf.SHT_LLVM_OFFLOADING, elf.SHF_EXCLUDE, SECTION_ALIGN)
    elf.add_sections(host_object, [section], out)


def embed_files(host_path: str, package_paths: list[str], output: str, *, empty_host: bool = False) -> None:
    """Embed the concatenation of `package_paths` into the object at `host_path`; write `output` atomically.

    With `empty_host`, the packages go into an empty object shaped like `host_path` (same ELF
    class, byte order and machine) instead: a carrier of device images with no host code."""
    if not package_paths:
        raise UsageError("no package given")
    with ExitStack() as stack:
        views = [stack.enter_context(open_input(p)) for p in package_paths]
        # One package (the usual case) is embedded straight from its mapping, without a copy.
        package = views[0] if len(views) == 1 else b"".join(views)
        host = stack.enter_context(open_input(host_path))
        if empty_host:
            from ..formats import elf

            host = elf.empty_relocatable_like(host)
        with atomic_output(output) as out:
            embed_offload_package(host, package, out)
