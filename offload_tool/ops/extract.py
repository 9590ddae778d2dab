"""Finding OffloadBinary images wherever LLVM finds them (`extractOffloadBinaries`).

Dispatch is on the file's magic, as LLVM's `identify_magic`: a raw package (`10 FF 10 AD`) is
read back to back; ELF relocatable objects, executables and shared libraries contribute every
section of type `SHT_LLVM_OFFLOADING` (the name does not matter), COFF objects every section
whose name starts with `.llvm.offloading`; LLVM bitcode contributes the
globals listed in the `llvm.embedded.objects` named metadata whose section is
`.llvm.offloading`; static archives are searched member by member, recursively.  Anything else
holds no images (not an error, as in LLVM).

As in LLVM, every section header counts, even several naming the same bytes; such bytes are
parsed once, and every image found is charged to the run's `entries` budget, archive nesting to
its `depth` budget (`offload_tool.budget`), so work stays bounded by what the input holds."""

from __future__ import annotations

from dataclasses import dataclass

from .. import budget
from ..formats import coff
from ..formats import elf
from ..formats.bitcode import BitcodeError, embedded_objects
from ..errors import OffloadBinaryError, OffloadError
from ..fileio import byte_view
from ..formats.magic import FileKind, identify
from ..formats.offload_binary import OFFLOADING_SECTION, OffloadImage, read_offload_binaries

__all__ = ["FoundImage", "find_offload_images", "file_kind", "why_no_images", "MAX_ARCHIVE_DEPTH"]

#: The default archive nesting limit (the `depth` budget, raised with --budget=depth=N).
MAX_ARCHIVE_DEPTH = budget.DEFAULT_LIMITS.depth


@dataclass
class FoundImage:
    """An image and where it was found.

    `path` names the file, archive member and section, e.g. `lib.a(member.o):.llvm.offloading[0]`
    (the index counts binaries within that section or package).  `container` is `package` (a raw
    OffloadBinary file), `elf`, `coff` or `bitcode`.  `member` is the innermost archive member name (the
    buffer identifier LLVM gives the image: the input path, or the archive child's name)."""

    path: str
    container: str
    image: OffloadImage
    section: str | None
    member: str | None = None
    index: int = 0


def file_kind(buf) -> str:
    """Which searcher extraction uses for `buf` (`identify`'s kind, in extraction's words):
    `package`, `elf`, `coff`, `bitcode`, `archive` or `other` (holds no images)."""
    return _CONTAINER_WORDS.get(identify(buf), "other")


_NO_IMAGES = {
    "package": "the package holds no images",
    "elf": "an ELF file with no offloading section (SHT_LLVM_OFFLOADING)",
    "coff": "a COFF object with no .llvm.offloading section",
    "bitcode": "LLVM bitcode with no llvm.embedded.objects in .llvm.offloading",
    "archive": "an archive none of whose members holds an offload image",
}


def why_no_images(buf) -> str:
    """Why `find_offload_images` found nothing in `buf`, in a few words (for a warning)."""
    word = file_kind(buf)
    if word in _NO_IMAGES:
        return _NO_IMAGES[word]
    kind = identify(buf)
    if kind is not FileKind.UNKNOWN:
        return f"not a container offload images are extracted from (a file of kind '{kind.value}')"
    return ("not an offload package, object file, bitcode or archive (no known magic number)" if len(buf) else
            "the file is empty")


def _elf_images(buf, name: str, member: str | None, llvm_version: int | None) -> list[FoundImage]:
    found: list[FoundImage] = []
    etype = elf.elf_type(buf)
    # LLVM creates an ObjectFile only for these; cores and others hold no images.
    if etype not in ("ET_REL", "ET_EXEC", "ET_DYN", 1, 2, 3):
        return found
    parsed: dict[tuple[int, int], list[OffloadImage]] = {}  # several headers may name the same bytes
    for sec in elf.read_sections(buf):
        if sec.sh_type != elf.SHT_LLVM_OFFLOADING:
            continue
        _add_images(found, parsed, (sec.offset, sec.size), sec.data, llvm_version,
                     f"{name}: section {sec.name} at file offset {sec.offset:#x}", name, "elf", sec.name, member)
    return found


def _add_images(found: list[FoundImage], parsed: dict | None, key, data, llvm_version: int | None, where: str,
                name: str, container: str, section: str, member: str | None) -> None:
    """The OffloadBinaries in `data` (one section or embedded object, described by `where` in
    errors and budget charges) appended to `found`; `parsed` keeps each (offset, size) read once,
    as several section headers may name the same bytes."""
    images = parsed.get(key) if parsed is not None else None
    if images is None:
        try:
            images = read_offload_binaries(data, llvm_version=llvm_version)
        except OffloadBinaryError as exc:
            raise OffloadBinaryError(f"{where}: {exc}") from None
        if parsed is not None:
            parsed[key] = images
    budget.charge("entries", len(images), where)
    found.extend(FoundImage(f"{name}:{section}[{i}]", container, img, section, member, i)
                 for i, img in enumerate(images))


def _bitcode_images(buf, name: str, member: str | None, llvm_version: int | None) -> list[FoundImage]:
    found: list[FoundImage] = []
    try:
        objects = embedded_objects(buf, name, OFFLOADING_SECTION)
    except BitcodeError as exc:
        raise OffloadBinaryError(str(exc)) from None  # as LLVM: extraction fails, not the container
    for data in objects:
        _add_images(found, None, None, data, llvm_version, f"{name}: embedded object in {OFFLOADING_SECTION}",
                    name, "bitcode", OFFLOADING_SECTION, member)
    return found


def _coff_images(buf, name: str, member: str | None, llvm_version: int | None) -> list[FoundImage]:
    """COFF objects: sections whose name starts with `.llvm.offloading` (LLVM's rule for COFF)."""
    found: list[FoundImage] = []
    parsed: dict[tuple[int, int], list[OffloadImage]] = {}  # several headers may name the same bytes
    for sec in coff.read_sections(buf, name):
        sec_name, ptr = sec.name, sec.offset
        if not sec_name.startswith(OFFLOADING_SECTION):
            continue
        _add_images(found, parsed, (ptr, sec.size), buf[ptr:ptr + sec.size], llvm_version,
                    f"{name}: section {sec_name} at file offset {ptr:#x}", name, "coff", sec_name, member)
    return found


def _archive_images(buf, name: str, llvm_version: int | None, depth: int) -> list[FoundImage]:
    from ..formats.archive import read_archive

    found: list[FoundImage] = []
    with budget.nested(f"{name}: archive"):
        for m in read_archive(buf):
            found.extend(_find(m.data, f"{name}({m.name})", m.name, llvm_version, depth + 1))
    return found


def _package_images(buf, name: str, member: str | None, llvm_version: int | None) -> list[FoundImage]:
    try:
        images = read_offload_binaries(buf, llvm_version=llvm_version)
    except OffloadBinaryError as exc:
        raise OffloadBinaryError(f"{name}: {exc}") from None
    budget.charge("entries", len(images), name)
    return [FoundImage(f"{name}[{i}]", "package", img, None, member, i) for i, img in enumerate(images)]


def _thin_archive(buf, name: str, *_args) -> list[FoundImage]:
    raise OffloadError(f"{name}: thin archives are not supported")


# The kinds extraction searches: kind -> (word for `file_kind`, searcher).
_SEARCHERS = {
    FileKind.OFFLOAD_BINARY: ("package", _package_images),
    FileKind.ELF: ("elf", _elf_images),
    FileKind.BITCODE: ("bitcode", _bitcode_images),
    FileKind.COFF: ("coff", _coff_images),
    FileKind.THIN_ARCHIVE: ("archive", _thin_archive),
}
_CONTAINER_WORDS = {kind: word for kind, (word, _) in _SEARCHERS.items()}
_CONTAINER_WORDS[FileKind.ARCHIVE] = "archive"


def _find(buf, name: str, member: str | None, llvm_version: int | None, depth: int) -> list[FoundImage]:
    kind = identify(buf)
    if kind is FileKind.ARCHIVE:
        return _archive_images(buf, name, llvm_version, depth)
    if kind in _SEARCHERS:
        return _SEARCHERS[kind][1](buf, name, member, llvm_version)
    return []


def find_offload_images(buf, name: str, *, llvm_version: int | None = None) -> list[FoundImage]:
    """Every OffloadBinary image in `buf` (a file's contents; `name` is used in paths and errors).

    Bad packages raise `OffloadBinaryError`; bad containers the container's `OffloadError`."""
    with budget.run():
        return _find(byte_view(buf), name, None, llvm_version, 0)
