"""OffloadBinary version 2: several device images in one binary (LLVM 23's writer).

Version 1 holds exactly one entry; version 2 keeps the 32-byte header but reads its last field
as `EntriesCount`, places that many 40-byte entries at `EntriesOffset`, and gives each string
entry a third field, `ValueSize`, so values are sized byte strings (keys stay NUL-terminated):

    Header       Magic "10 FF 10 AD", Version u32 = 2, Size u64, EntriesOffset u64, EntriesCount u64
    Entry * n    TheImageKind u16, TheOffloadKind u16, Flags u32, StringOffset u64, NumStrings u64,
                 ImageOffset u64, ImageSize u64
    StringEntry  KeyOffset u64, ValueOffset u64, ValueSize u64   (all entries' string maps, in order)
    string table one ELF-style tail-merged table shared by every entry
    padding      to a multiple of 8, then the images back to back (not padded between), then
                 padding to a multiple of 8 (Size).

All offsets are absolute from the start of the binary.  LLVM checks the header and that each
entry's string map and image start inside the binary; here every offset, size and count is
checked before use, entries are charged to the run's `entries` budget and decoded strings to
its `names` budget, so a crafted header claiming 2^60 entries fails at once.

Version 2 exists only in LLVMs whose offload kinds are bit flags (HIP = 4), so its images are
read with that numbering unless the caller names a release."""

from __future__ import annotations

from collections.abc import Sequence

from .. import budget
from ..errors import OffloadBinaryError
from ..fileio import byte_view
from .layout import Layout, field_error
from ..rules.string_table import string_table
from .offload_binary_common import (ENTRY, MAGIC, OffloadImage, align, check_entry_fields, encode, image_nbytes,
                                    nul_ends)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO

__all__ = ["VERSION_2", "HEADER_V2", "STRING_ENTRY_V2", "V2_LLVM_VERSION", "read_offload_binary_v2",
           "write_offload_binary_v2", "write_offload_binary_v2_to"]

VERSION_2 = 2
#: The first LLVM release that writes version 2 (its offload kinds are LLVM 22's bit flags).
V2_LLVM_VERSION = 23

# `OffloadBinary::Header` and `StringEntry` as of version 2 (the entry is version 1's `ENTRY`).
HEADER_V2 = Layout("Header", [("Magic", "4s"), ("Version", "I"), ("Size", "Q"), ("EntriesOffset", "Q"),
                              ("EntriesCount", "Q")])
STRING_ENTRY_V2 = Layout("StringEntry", [("KeyOffset", "Q"), ("ValueOffset", "Q"), ("ValueSize", "Q")])


# --------------------------------------------------------------------------------------------
# Reading


class _Strings:
    """Keys (NUL-terminated) and values (sized) of one binary, decoded once each.

    Key NUL searches run in ascending offset order and reuse the previous terminator, so keys
    pointing into one long unterminated run cost one scan; every newly decoded string is
    charged to the `names` budget, so many entries naming one huge value stay bounded."""

    def __init__(self, view, base: int, size: int, key_offsets: set[int], where: str) -> None:
        self.view, self.base, self.size, self.where = view, base, size, where
        self.key_end = nul_ends(view, base, size, key_offsets, f"{where}: key string")
        self.cache: dict[tuple[int, int], str] = {}

    def _decode(self, off: int, n: int) -> str:
        s = self.cache.get((off, n))
        if s is None:
            budget.charge("names", n, f"{self.where}: string at {off:#x}")
            start = self.base + off
            s = self.cache[(off, n)] = bytes(self.view[start:start + n]).decode("utf-8", "surrogateescape")
        return s

    def key(self, off: int) -> str:
        return self._decode(off, self.key_end[off] - self.base - off)

    def value(self, off: int, n: int) -> str:
        return self._decode(off, n)


def read_offload_binary_v2(buf, offset: int = 0, *, llvm_version: int | None = None) -> list[OffloadImage]:
    """Every entry of the version 2 OffloadBinary at `offset` of `buf`, in entry order.

    Each image is a memoryview slice of `buf`; each `OffloadImage` carries `version` 2, its
    `index` in the binary and the binary's `offset`/`size` (shared by all its entries)."""
    view = byte_view(buf)
    avail = len(view) - offset
    where = f"offload binary at offset {offset:#x}"

    def bad(field_offset: int, name: str, message: str) -> OffloadBinaryError:
        return field_error(OffloadBinaryError, field_offset, name, message, where)

    if avail < HEADER_V2.size + ENTRY.size:
        raise bad(offset, "Header", f"{avail} bytes is too small for a header and an entry (72 bytes)")
    h = HEADER_V2.read(view, offset, OffloadBinaryError, where)

    if h.Magic != MAGIC:
        raise bad(offset, "Magic", f"{h.Magic.hex()} is not 10ff10ad")
    if h.Version != VERSION_2:
        raise bad(offset + HEADER_V2.offset_of("Version"), "Version",
                  f"{h.Version} is not a version this reader knows (1 or 2)")
    size = h.Size
    if size > avail or size < HEADER_V2.size + ENTRY.size:
        raise bad(offset + HEADER_V2.offset_of("Size"), "Size",
                  f"{size} is outside the {HEADER_V2.size + ENTRY.size}..{avail} bytes available")
    count = h.EntriesCount
    if count > (size - HEADER_V2.size) // ENTRY.size:
        raise bad(offset + HEADER_V2.offset_of("EntriesCount"), "EntriesCount",
                  f"{count} entries of {ENTRY.size} bytes do not fit in Size {size}")
    if h.EntriesOffset > size - count * ENTRY.size:
        raise bad(offset + HEADER_V2.offset_of("EntriesOffset"), "EntriesOffset",
                  f"{h.EntriesOffset} + {count} entries of {ENTRY.size} bytes exceeds Size {size}")
    budget.charge("entries", count, f"{where}: {count} entries")

    # Every entry and string entry is read and checked before any string is decoded.
    planned = []
    key_offsets: set[int] = set()
    for i in range(count):
        entry_at = offset + h.EntriesOffset + i * ENTRY.size
        e = ENTRY.read(view, entry_at, OffloadBinaryError, where)

        def field(name: str) -> int:
            return entry_at + ENTRY.offset_of(name)

        if e.ImageOffset > size:
            raise bad(field("ImageOffset"), "ImageOffset", f"entry {i}: {e.ImageOffset} is beyond Size {size}")
        if e.ImageSize > size - e.ImageOffset:
            raise bad(field("ImageSize"), "ImageSize",
                      f"entry {i}: {e.ImageSize} at ImageOffset {e.ImageOffset} exceeds Size {size}")
        if e.StringOffset > size:
            raise bad(field("StringOffset"), "StringOffset", f"entry {i}: {e.StringOffset} is beyond Size {size}")
        if e.NumStrings > (size - e.StringOffset) // STRING_ENTRY_V2.size:
            raise bad(field("NumStrings"), "NumStrings",
                      f"entry {i}: {e.NumStrings} string entries at StringOffset {e.StringOffset} exceed Size {size}")
        budget.charge("entries", e.NumStrings, f"{where}: entry {i}: {e.NumStrings} string entries")
        pairs = []
        for j in range(e.NumStrings):
            at = offset + e.StringOffset + j * STRING_ENTRY_V2.size
            s = STRING_ENTRY_V2.read(view, at, OffloadBinaryError, where)
            if s.KeyOffset >= size:
                raise bad(at + STRING_ENTRY_V2.offset_of("KeyOffset"), "KeyOffset",
                          f"entry {i} string {j}: {s.KeyOffset} is beyond Size {size}")
            if s.ValueOffset > size or s.ValueSize > size - s.ValueOffset:
                raise bad(at + STRING_ENTRY_V2.offset_of("ValueOffset"), "ValueOffset",
                          f"entry {i} string {j}: {s.ValueSize} bytes at {s.ValueOffset} exceed Size {size}")
            key_offsets.add(s.KeyOffset)
            pairs.append((s.KeyOffset, s.ValueOffset, s.ValueSize))
        planned.append((e, pairs))

    strings = _Strings(view, offset, size, key_offsets, where)
    version = V2_LLVM_VERSION if llvm_version is None else llvm_version
    images = []
    for index, (e, pairs) in enumerate(planned):
        table: dict[str, str] = {}
        for key_off, value_off, value_size in pairs:
            # As LLVM's MapVector: a repeated key keeps its first position and its last value.
            table[strings.key(key_off)] = strings.value(value_off, value_size)
        image = view[offset + e.ImageOffset:offset + e.ImageOffset + e.ImageSize]
        images.append(OffloadImage(e.TheImageKind, e.TheOffloadKind, e.Flags, table, image, version, offset, size,
                                   version=VERSION_2, index=index))
    return images


# --------------------------------------------------------------------------------------------
# Writing


def _plan(images: Sequence[OffloadImage]) -> tuple[bytes, list[int], int]:
    """Everything before the images, each image's size, and the binary's Size."""
    if not images:
        raise OffloadBinaryError("an offload binary needs at least one image")
    encoded = []
    for img in images:
        check_entry_fields(img)
        encoded.append([(encode(k), encode(v)) for k, v in img.strings.items()])
    table, offsets = string_table([s for pairs in encoded for kv in pairs for s in kv])
    sizes = [image_nbytes(img) for img in images]
    entries_size = ENTRY.size * len(images)
    string_entries_size = STRING_ENTRY_V2.size * sum(len(p) for p in encoded)
    table_start = HEADER_V2.size + entries_size + string_entries_size
    data_start = align(table_start + len(table))
    size = align(data_start + sum(sizes))

    out = bytearray(HEADER_V2.build(Magic=MAGIC, Version=VERSION_2, Size=size, EntriesOffset=HEADER_V2.size,
                                    EntriesCount=len(images)))
    string_at = HEADER_V2.size + entries_size
    image_at = data_start
    for img, pairs, n in zip(images, encoded, sizes):
        out += ENTRY.build(TheImageKind=img.image_kind, TheOffloadKind=img.offload_kind, Flags=img.flags,
                           StringOffset=string_at, NumStrings=len(pairs), ImageOffset=image_at, ImageSize=n)
        string_at += STRING_ENTRY_V2.size * len(pairs)
        image_at += n
    for pairs in encoded:
        for k, v in pairs:
            out += STRING_ENTRY_V2.build(KeyOffset=table_start + offsets[k], ValueOffset=table_start + offsets[v],
                                         ValueSize=len(v))
    out += table
    out += bytes(data_start - len(out))
    return bytes(out), sizes, size


def write_offload_binary_v2(images: Sequence[OffloadImage]) -> bytes:
    """`OffloadBinary::write` of LLVM 23: one version 2 binary holding `images` in order."""
    head, sizes, size = _plan(images)
    return b"".join([head, *(bytes(img.image) for img in images), bytes(size - len(head) - sum(sizes))])


def write_offload_binary_v2_to(out: BinaryIO, images: Sequence[OffloadImage]) -> int:
    """Stream `write_offload_binary_v2(images)` to `out` (images are not copied); returns Size."""
    head, sizes, size = _plan(images)
    out.write(head)
    for img in images:
        out.write(img.image)
    out.write(bytes(size - len(head) - sum(sizes)))
    return size
