"""Finding OffloadBinary images wherever LLVM finds them (`extractOffloadBinaries`, llvm-formats.md §6.3).

Dispatch is on the file's magic, as LLVM's `identify_magic`: a raw package (`10 FF 10 AD`) is
read back to back; ELF relocatable objects, executables and shared libraries contribute every
section of type `SHT_LLVM_OFFLOADING` (the name does not matter), COFF objects every section
whose name starts with `.llvm.offloading`; LLVM bitcode contributes the
globals listed in the `llvm.embedded.objects` named metadata whose section is
`.llvm.offloading`; static archives are searched member by member, recursively.  Anything else
holds no images (not an error, as in LLVM)."""

from __future__ import annotations

from dataclasses import dataclass

from .bitcode import BitcodeError, embedded_objects
from .errors import OffloadBinaryError, OffloadError
from .fileio import byte_view
from .offload_binary import OffloadImage, is_bitcode, read_offload_binaries

__all__ = ["FoundImage", "find_offload_images", "file_kind", "SHT_LLVM_OFFLOADING", "MAX_ARCHIVE_DEPTH"]

SHT_LLVM_OFFLOADING = 0x6FFF4C0B
OFFLOADING_SECTION = ".llvm.offloading"
MAX_ARCHIVE_DEPTH = 8

_ELF_MAGIC = b"\x7fELF"
# `identify_magic` COFF object machines: AMD64, ARM64, i386, ARMNT.
_COFF_MACHINES = {0x8664, 0xAA64, 0x014C, 0x01C4}
_AR_MAGIC = b"!<arch>\n"
_THIN_AR_MAGIC = b"!<thin>\n"


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
    """What `identify_magic` would call `buf`, as far as extraction cares:
    `package`, `elf`, `coff`, `bitcode`, `archive` or `other`."""
    head = bytes(buf[:8])
    if head[:4] == b"\x10\xff\x10\xad":
        return "package"
    if head[:4] == _ELF_MAGIC:
        return "elf"
    if is_bitcode(head):
        return "bitcode"
    if head == _AR_MAGIC or head == _THIN_AR_MAGIC:
        return "archive"
    if len(head) >= 2 and (head[0] | head[1] << 8) in _COFF_MACHINES:
        return "coff"
    return "other"


def _elf_images(buf, name: str, member: str | None, llvm_version: int | None) -> list[FoundImage]:
    from . import elf  # shared ELF reader (pyelftools based)

    found: list[FoundImage] = []
    etype = elf.elf_type(buf)
    # LLVM creates an ObjectFile only for these; cores and others hold no images.
    if etype not in ("ET_REL", "ET_EXEC", "ET_DYN", 1, 2, 3):
        return found
    for sec in elf.read_sections(buf):
        if sec.sh_type != SHT_LLVM_OFFLOADING:
            continue
        try:
            images = read_offload_binaries(sec.data, llvm_version=llvm_version)
        except OffloadBinaryError as exc:
            raise OffloadBinaryError(f"{name}: section {sec.name} at file offset {sec.offset:#x}: {exc}") from None
        for i, img in enumerate(images):
            found.append(FoundImage(f"{name}:{sec.name}[{i}]", "elf", img, sec.name, member, i))
    return found


def _bitcode_images(buf, name: str, member: str | None, llvm_version: int | None) -> list[FoundImage]:
    found: list[FoundImage] = []
    try:
        objects = embedded_objects(buf, name, OFFLOADING_SECTION)
    except BitcodeError as exc:
        raise OffloadBinaryError(str(exc)) from None  # as LLVM: extraction fails, not the container
    for data in objects:
        try:
            images = read_offload_binaries(data, llvm_version=llvm_version)
        except OffloadBinaryError as exc:
            raise OffloadBinaryError(f"{name}: embedded object in {OFFLOADING_SECTION}: {exc}") from None
        for i, img in enumerate(images):
            found.append(FoundImage(f"{name}:{OFFLOADING_SECTION}[{i}]", "bitcode", img, OFFLOADING_SECTION, member, i))
    return found


def _coff_sections(buf, name: str) -> list[tuple[str, int, int]]:
    """(name, file offset, size) of every section of a COFF object, bounds-checked."""
    import struct

    if len(buf) < 20:
        raise OffloadError(f"{name}: COFF header is truncated")
    _machine, nsections, _time, symtab_ptr, nsymbols, opt_size, _chars = struct.unpack_from("<HHIIIHH", buf, 0)
    table = 20 + opt_size
    if table + 40 * nsections > len(buf):
        raise OffloadError(f"{name}: COFF section table ({nsections} sections at {table:#x}) runs past the end")
    strtab = symtab_ptr + 18 * nsymbols
    out = []
    for i in range(nsections):
        off = table + 40 * i
        raw_name = bytes(buf[off:off + 8]).rstrip(b"\0")
        size, ptr = struct.unpack_from("<II", buf, off + 16)
        if raw_name.startswith(b"/") and not raw_name.startswith(b"//") and raw_name[1:].isdigit():
            pos = strtab + int(raw_name[1:])
            end = bytes(buf[pos:pos + 4096]).find(b"\0") if pos < len(buf) else -1
            if end < 0:
                raise OffloadError(f"{name}: COFF section {i} long name at {pos:#x} is out of range")
            raw_name = bytes(buf[pos:pos + end])
        sec_name = raw_name.decode("utf-8", "surrogateescape")
        if size and ptr + size > len(buf):
            raise OffloadError(f"{name}: COFF section {sec_name} data ({size} bytes at {ptr:#x}) runs past the end")
        out.append((sec_name, ptr, size))
    return out


def _coff_images(buf, name: str, member: str | None, llvm_version: int | None) -> list[FoundImage]:
    """COFF objects: sections whose name starts with `.llvm.offloading` (LLVM's rule for COFF)."""
    found: list[FoundImage] = []
    for sec_name, ptr, size in _coff_sections(buf, name):
        if not sec_name.startswith(OFFLOADING_SECTION):
            continue
        try:
            images = read_offload_binaries(buf[ptr:ptr + size], llvm_version=llvm_version)
        except OffloadBinaryError as exc:
            raise OffloadBinaryError(f"{name}: section {sec_name} at file offset {ptr:#x}: {exc}") from None
        for i, img in enumerate(images):
            found.append(FoundImage(f"{name}:{sec_name}[{i}]", "coff", img, sec_name, member, i))
    return found


def _archive_images(buf, name: str, llvm_version: int | None, depth: int) -> list[FoundImage]:
    from .archive import read_archive

    if depth >= MAX_ARCHIVE_DEPTH:
        raise OffloadError(f"{name}: archives nested more than {MAX_ARCHIVE_DEPTH} deep")
    found: list[FoundImage] = []
    for m in read_archive(buf):
        found.extend(_find(m.data, f"{name}({m.name})", m.name, llvm_version, depth + 1))
    return found


def _find(buf, name: str, member: str | None, llvm_version: int | None, depth: int) -> list[FoundImage]:
    kind = file_kind(buf)
    if kind == "package":
        try:
            images = read_offload_binaries(buf, llvm_version=llvm_version)
        except OffloadBinaryError as exc:
            raise OffloadBinaryError(f"{name}: {exc}") from None
        return [FoundImage(f"{name}[{i}]", "package", img, None, member, i) for i, img in enumerate(images)]
    if kind == "elf":
        return _elf_images(buf, name, member, llvm_version)
    if kind == "bitcode":
        return _bitcode_images(buf, name, member, llvm_version)
    if kind == "coff":
        return _coff_images(buf, name, member, llvm_version)
    if kind == "archive":
        if bytes(buf[:8]) == _THIN_AR_MAGIC:
            raise OffloadError(f"{name}: thin archives are not supported")
        return _archive_images(buf, name, llvm_version, depth)
    return []


def find_offload_images(buf, name: str, *, llvm_version: int | None = None) -> list[FoundImage]:
    """Every OffloadBinary image in `buf` (a file's contents; `name` is used in paths and errors).

    Bad packages raise `OffloadBinaryError`; bad containers the container's `OffloadError`."""
    return _find(byte_view(buf), name, None, llvm_version, 0)
