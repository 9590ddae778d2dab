"""OffloadBinary (magic `10 FF 10 AD`) version 1: the device-image wrapper of the new offload driver.

Layout and writer behaviour follow `llvm/Object/OffloadBinary` of LLVM 19:
a 32-byte header, one 40-byte entry, `NumStrings` 16-byte string entries (absolute key/value
offsets), an ELF-style tail-merged string table, the image, zero padding to a multiple of 8.
The producer ("offload kind") numbering differs between LLVM releases: HIP is 3 in LLVM 19 and 4
in LLVM 22 (bit flags), so readers that do not know the producing LLVM report value 3 as
ambiguous instead of guessing."""

from __future__ import annotations

from collections.abc import Mapping

from ..rules.string_table import string_table
from .. import budget
from ..errors import OffloadBinaryError, OffloadError
from ..rules import llvm_path
from ..fileio import byte_view
from .layout import Layout
from .kinds import BC_MAGIC, BC_WRAPPER_MAGIC, OFFLOAD_BINARY_MAGIC, FileKind, Format, OffloadBinariesAt
from .offload_binary_common import (ALIGNMENT, DEFAULT_LLVM_VERSION, ENTRY, IMAGE_KINDS, IMG_BITCODE, IMG_CUBIN,
                                    IMG_FATBINARY, IMG_NONE, IMG_OBJECT, IMG_PTX, IMG_SPIRV, MAGIC,
                                    OFFLOAD_KINDS_19, OFFLOAD_KINDS_22, SUPPORTED_LLVM_VERSIONS, VERSION,
                                    OffloadImage, align, check_entry_fields, encode, image_kind_name,
                                    image_kind_value, image_nbytes, kinds_for, nul_ends, objdump_image_kind_name,
                                    offload_kind_name, offload_kind_value)
from .offload_binary_v2 import read_offload_binary_v2

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO

__all__ = [
    "MAGIC", "VERSION", "ALIGNMENT", "OFFLOADING_SECTION", "HEADER", "ENTRY", "STRING_ENTRY",
    "IMAGE_KINDS", "IMG_NONE", "IMG_OBJECT", "IMG_BITCODE", "IMG_CUBIN", "IMG_FATBINARY", "IMG_PTX",
    "IMG_SPIRV", "OFFLOAD_KINDS_19", "OFFLOAD_KINDS_22", "DEFAULT_LLVM_VERSION", "SUPPORTED_LLVM_VERSIONS",
    "OffloadImage", "read_offload_binaries", "read_offload_binary", "write_offload_binary",
    "write_offload_binary_to", "string_table", "image_kind_value", "image_kind_name",
    "image_kind_from_content", "image_kind_for_file", "objdump_image_kind_name", "offload_kind_value",
    "offload_kind_name", "llvm_path_extension", "make_image", "FORMATS",
]

#: The section clang embeds packages in (ELF: found by its type; COFF and bitcode: by this name).
OFFLOADING_SECTION = ".llvm.offloading"

# `llvm::object::OffloadBinary`'s Header and StringEntry of version 1, field names as in LLVM (the
# Entry is `offload_binary_common.ENTRY`).
HEADER = Layout("Header", [("Magic", "4s"), ("Version", "I"), ("Size", "Q"), ("EntryOffset", "Q"),
                           ("EntrySize", "Q")])
STRING_ENTRY = Layout("StringEntry", [("KeyOffset", "Q"), ("ValueOffset", "Q")])


def image_kind_from_content(buf) -> int | None:
    """IMG_Bitcode when the content is LLVM bitcode, else None (decide by extension)."""
    return IMG_BITCODE if bytes(buf[:4]) in (BC_MAGIC, BC_WRAPPER_MAGIC) else None


def llvm_path_extension(path: str) -> str:
    """`llvm::sys::path::extension(path)` without its dot (".o" -> "o", "a.b.c" -> "c"): the
    packager's image kind by file name."""
    return llvm_path.extension(path)[1:]


def image_kind_for_file(path: str, content) -> int:
    """The packager's rule: bitcode by magic, otherwise by extension ("Clang uses .o for LTO bitcode")."""
    kind = image_kind_from_content(content)
    return kind if kind is not None else image_kind_value(llvm_path_extension(path))


# --------------------------------------------------------------------------------------------
# Reading


class _StringReader:
    """C strings at absolute offsets inside one binary, with bounded total work.

    LLVM reads the strings without any checks; here every string must end inside the binary,
    NUL searches never rescan bytes (offsets are resolved in ascending order), equal offsets
    share one decoded string, and the decoded total is capped at four times the binary's size
    (tail-merged tables of real binaries decode to less than their size) and charged to the run's
    `names` budget, so a hostile table cannot make us build gigabytes of overlapping strings."""

    def __init__(self, buf, base: int, size: int, offsets: set[int]) -> None:
        self.buf, self.base, self.size = buf, base, size
        self.nul = nul_ends(buf, base, size, offsets, f"offload binary at offset {base:#x}: string")
        self.cache: dict[int, str] = {}
        self.budget = 4 * size

    def get(self, off: int) -> str:
        s = self.cache.get(off)
        if s is None:
            start = self.base + off
            n = self.nul[off] - start
            self.budget -= n
            if self.budget < 0:
                raise OffloadBinaryError(
                    f"offload binary at offset {self.base:#x}: string table references are implausibly large "
                    f"(overlapping strings decode to more than four times the {self.size}-byte binary)")
            budget.charge("names", n, f"offload binary at offset {self.base:#x}: string at {off:#x}")
            s = self.cache[off] = bytes(self.buf[start:start + n]).decode("utf-8", "surrogateescape")
        return s


def read_offload_binary(buf, offset: int = 0, *, llvm_version: int | None = None) -> OffloadImage:
    """Parse one OffloadBinary at `offset` of `buf` (checks of `OffloadBinary::create`, plus bounds).

    The image is a memoryview slice of `buf` (no copy)."""
    view = byte_view(buf)
    total = len(view)
    avail = total - offset
    where = f"offload binary at offset {offset:#x}"
    if avail < HEADER.size + ENTRY.size:
        raise OffloadBinaryError(
            f"{where}: {avail} bytes is too small for a header and entry (72 bytes) "
            "(Invalid data was encountered while parsing the file)")
    h = HEADER.read(view, offset, OffloadBinaryError, where)
    magic, version, size, entry_offset, entry_size = h.Magic, h.Version, h.Size, h.EntryOffset, h.EntrySize
    if magic != MAGIC:
        raise OffloadBinaryError(
            f"{where}: bad magic {magic.hex()} (expected 10ff10ad) "
            "(Invalid data was encountered while parsing the file)")
    if version != VERSION:
        raise OffloadBinaryError(
            f"{where}: unsupported Version {version} (expected 1) "
            "(Invalid data was encountered while parsing the file)")
    if size > avail or size < ENTRY.size or size < HEADER.size:
        raise OffloadBinaryError(
            f"{where}: Size {size} does not fit the {avail} bytes available "
            "(The end of the file was unexpectedly encountered)")
    if size < HEADER.size + ENTRY.size:
        # LLVM re-parses a copy of exactly Size bytes, which then fails its 72-byte minimum.
        raise OffloadBinaryError(
            f"{where}: Size {size} is smaller than a header and entry (72 bytes) "
            "(Invalid data was encountered while parsing the file)")
    if entry_offset > size - ENTRY.size or entry_size > size - HEADER.size:
        raise OffloadBinaryError(
            f"{where}: EntryOffset {entry_offset} / EntrySize {entry_size} exceed Size {size} "
            "(The end of the file was unexpectedly encountered)")
    e = ENTRY.read(view, offset + entry_offset, OffloadBinaryError, where)
    string_offset, num_strings, image_offset, image_size = e.StringOffset, e.NumStrings, e.ImageOffset, e.ImageSize
    if image_offset > size:
        raise OffloadBinaryError(
            f"{where}: ImageOffset {image_offset} is beyond Size {size} "
            "(The end of the file was unexpectedly encountered)")
    if string_offset > size:
        raise OffloadBinaryError(
            f"{where}: StringOffset {string_offset} is beyond Size {size} "
            "(The end of the file was unexpectedly encountered)")
    # Beyond LLVM: LLVM trusts NumStrings, the string offsets and ImageSize.
    if image_size > size - image_offset:
        raise OffloadBinaryError(
            f"{where}: ImageSize {image_size} at ImageOffset {image_offset} exceeds Size {size}")
    if num_strings > (size - string_offset) // STRING_ENTRY.size:
        raise OffloadBinaryError(
            f"{where}: NumStrings {num_strings} at StringOffset {string_offset} exceeds Size {size}")
    entries = []
    for i in range(num_strings):
        key_off, value_off = STRING_ENTRY.read(view, offset + string_offset + i * STRING_ENTRY.size,
                                               OffloadBinaryError, where)
        if key_off >= size or value_off >= size:
            raise OffloadBinaryError(
                f"{where}: string entry {i} KeyOffset {key_off} / ValueOffset {value_off} is beyond Size {size}")
        entries.append((key_off, value_off))
    reader = _StringReader(view, offset, size, {o for kv in entries for o in kv})
    strings: dict[str, str] = {}
    for key_off, value_off in entries:
        strings[reader.get(key_off)] = reader.get(value_off)
    image = view[offset + image_offset:offset + image_offset + image_size]
    return OffloadImage(e.TheImageKind, e.TheOffloadKind, e.Flags, strings, image, llvm_version, offset, size)


def read_offload_binaries(buf, *, llvm_version: int | None = None) -> list[OffloadImage]:
    """All OffloadBinaries stored back to back in `buf` (a raw package or a section's contents).

    As LLVM's `extractOffloadFiles`: any bytes left that do not parse are an error."""
    view = byte_view(buf)
    if llvm_version is not None:
        kinds_for(llvm_version)
    images = []
    offset = 0
    while offset < len(view):
        budget.charge("entries", 1, f"offload binary at offset {offset:#x}")
        if (_header_version(view, offset) or 0) >= 2:
            entries = read_offload_binary_v2(view, offset, llvm_version=llvm_version)
            images.extend(entries)
            offset += HEADER.read(view, offset, OffloadBinaryError).Size
            continue
        img = read_offload_binary(view, offset, llvm_version=llvm_version)
        images.append(img)
        offset += img.size
    return images


def _header_version(view, offset: int) -> int | None:
    """The Version field of a header at `offset` whose magic matches (None otherwise)."""
    if len(view) - offset < HEADER.size or bytes(view[offset:offset + 4]) != MAGIC:
        return None
    return HEADER.read(view, offset, OffloadBinaryError).Version


# --------------------------------------------------------------------------------------------
# Writing


def _header_bytes(image: OffloadImage) -> tuple[bytes, int, int]:
    """Everything before the image (header, entry, string entries, table, padding)."""
    check_entry_fields(image)
    pairs = [(encode(k), encode(v)) for k, v in image.strings.items()]
    table, offsets = string_table([s for kv in pairs for s in kv])
    string_entries_size = STRING_ENTRY.size * len(pairs)
    table_start = HEADER.size + ENTRY.size + string_entries_size
    image_offset = align(table_start + len(table))
    image_size = image_nbytes(image)
    size = align(image_offset + image_size)
    out = bytearray()
    out += HEADER.build(Magic=MAGIC, Version=VERSION, Size=size, EntryOffset=HEADER.size, EntrySize=ENTRY.size)
    out += ENTRY.build(TheImageKind=image.image_kind, TheOffloadKind=image.offload_kind, Flags=image.flags,
                       StringOffset=HEADER.size + ENTRY.size, NumStrings=len(pairs), ImageOffset=image_offset,
                       ImageSize=image_size)
    for k, v in pairs:
        out += STRING_ENTRY.build(KeyOffset=table_start + offsets[k], ValueOffset=table_start + offsets[v])
    out += table
    out += bytes(image_offset - len(out))
    return bytes(out), image_size, size


def write_offload_binary(image: OffloadImage) -> bytes:
    """`OffloadBinary::write`: the exact bytes LLVM writes for `image` (strings in `strings` order)."""
    head, image_size, size = _header_bytes(image)
    return b"".join((head, bytes(image.image), bytes(size - len(head) - image_size)))


def write_offload_binary_to(out: BinaryIO, image: OffloadImage) -> int:
    """Stream `write_offload_binary(image)` to `out` without building it in memory; returns its size."""
    head, image_size, size = _header_bytes(image)
    out.write(head)
    out.write(image.image)
    out.write(bytes(size - len(head) - image_size))
    return size


def make_image(image: bytes | memoryview, strings: Mapping[str, str], *, image_kind: int = IMG_NONE,
               offload_kind: int = 0, flags: int = 0, llvm_version: int | None = None) -> OffloadImage:
    """Convenience constructor (strings are copied in the given order)."""
    return OffloadImage(image_kind, offload_kind, flags, dict(strings), image, llvm_version)


# ---------------------------------------------------------------------------------------------
# What the operations know of a package file (`magic.FORMAT_MODULES`)
# ---------------------------------------------------------------------------------------------

def _inspect(scan, data, path: str, wrappers: list[str], depth: int, compressed: bool) -> None:
    """`inspect`: every image of the binaries back to back in `data`, numbered `path[i]`."""
    try:
        images = read_offload_binaries(data, llvm_version=scan.llvm_version)
    except OffloadError as exc:
        raise type(exc)(f"{path}: {exc}") from None
    for i, img in enumerate(images):
        scan.add_offload_image(img, f"{path}[{i}]", wrappers, depth, compressed)


def _offload_binaries(buf, name: str):
    """`extract`: a raw package is binaries back to back from its first byte."""
    yield OffloadBinariesAt(None, None, buf, name)


FORMATS = (Format(FileKind.OFFLOAD_BINARY, magics=(OFFLOAD_BINARY_MAGIC,), container="package", inspect=_inspect,
                  extract="package", offload_binaries=_offload_binaries, no_images="the package holds no images"),)
