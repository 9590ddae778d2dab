"""Crafted hostile inputs, generated (never stored): one generator per amplification class.

Each builds a small file that makes a naive reader do work out of proportion to its size: entries
that point at the same bytes again and again, nesting, tables whose names overlap, claimed sizes,
decompression bombs.  Sizes are parameters so a test can keep a case fast and a measurement
script can make it as large as the task text describes.  Only the library's own writers and
`struct` are used, so the files are exactly what the readers expect up to the hostile part."""

from __future__ import annotations

import struct

from offload_tool.formats import ccob as _ccob
from offload_tool.formats import fatbin as _fatbin
from offload_tool.formats.offload_binary import make_image, write_offload_binary

BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
DEVICE_ID = "hip-amdgcn-amd-amdhsa--gfx90a"
HOST_ID = "host-x86_64-unknown-linux-gnu-"


# --- clang offload bundles ------------------------------------------------------------------

def binary_bundle(entries: list[tuple[str, int, int]], tail: bytes = b"") -> bytes:
    """A binary bundle header with (id, offset, size) entries exactly as given, then `tail`."""
    out = bytearray(BUNDLE_MAGIC + struct.pack("<Q", len(entries)))
    for eid, off, size in entries:
        raw = eid.encode()
        out += struct.pack("<QQQ", off, size, len(raw)) + raw
    return bytes(out) + tail


def _header_size(ids: list[str]) -> int:
    return 32 + sum(24 + len(i.encode()) for i in ids)


def nested_shared_bundle(fanout: int = 16, depth: int = 8, leaf: bytes = b"device code") -> bytes:
    """Bundles nested `depth` deep, every entry of each level pointing at the one bundle of the
    next level: fanout**depth references in a file of about fanout * depth * 60 bytes."""
    inner = leaf
    for _ in range(depth):
        ids = [DEVICE_ID] * fanout
        hdr = _header_size(ids)
        inner = binary_bundle([(i, hdr, len(inner)) for i in ids], inner)
    return inner


def shared_ccob_bundle(entries: int = 50, expands_to: int = 256 << 20) -> bytes:
    """A bundle whose `entries` device entries all point at one small CCOB that expands to a
    bundle holding `expands_to` zero bytes."""
    inner = bytearray(_header_size([DEVICE_ID]))
    inner[:] = binary_bundle([(DEVICE_ID, len(inner), expands_to)])
    payload = b"".join(_bundle_chunks(bytes(inner), expands_to))
    compressed = _ccob.compress(payload, method="zstd", level=1)
    ids = [DEVICE_ID] * entries
    hdr = _header_size(ids)
    return binary_bundle([(i, hdr, len(compressed)) for i in ids], compressed)


def _bundle_chunks(header: bytes, zeros: int):
    yield header
    yield bytes(zeros)


# --- OffloadBinary packages -----------------------------------------------------------------

def offload_binary(image: bytes = b"\x7fELF device", arch: str = "gfx90a") -> bytes:
    return write_offload_binary(make_image(image, {"triple": "amdgcn-amd-amdhsa", "arch": arch},
                                           image_kind=1, offload_kind=3))


def overlapping_strings_package(total: int = 8 << 20, binary_size: int = 64 << 10, strlen: int = 4 << 10) -> bytes:
    """OffloadBinaries of `binary_size` bytes, each one `strlen`-byte string and as many string
    entries as fit, each naming a different offset into the string: every entry decodes a
    different, mostly overlapping string (about 8 MiB per 64 KiB binary)."""
    out = bytearray()
    nstr = (binary_size - 72 - strlen - 1) // 16
    table = 72 + nstr * 16
    while len(out) + binary_size <= total:
        head = struct.pack("<4sIQQQ", b"\x10\xff\x10\xad", 1, binary_size, 32, 40)
        head += struct.pack("<HHIQQQQ", 1, 3, 0, 72, nstr, binary_size, 0)
        entries = b"".join(struct.pack("<QQ", table + (2 * i) % strlen, table + (2 * i + 1) % strlen)
                           for i in range(nstr))
        body = head + entries + b"k" * strlen + b"\0"
        out += body + bytes(binary_size - len(body))
    return bytes(out)


# --- ELF --------------------------------------------------------------------------------------

SHT_PROGBITS, SHT_STRTAB, SHT_LLVM_OFFLOADING = 1, 3, 0x6FFF4C0B


def elf64(sections: list[tuple[int, int, int, int]], blobs: bytes, shstrndx: int) -> bytes:
    """An ELF64 LE relocatable object: `blobs` at offset 64, then the section headers given as
    (sh_name, sh_type, offset-in-blobs, size); a null section is added first."""
    shoff = 64 + len(blobs)
    shoff += -shoff % 8
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    ehdr = ident + struct.pack("<HHIQQQIHHHHHH", 1, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(sections) + 1,
                               shstrndx)
    out = bytearray(ehdr + blobs)
    out += bytes(shoff - len(out))
    out += bytes(64)
    for name, sh_type, off, size in sections:
        out += struct.pack("<IIQQQQIIQQ", name, sh_type, 0, 0, 64 + off, size, 0, 0, 1, 0)
    return bytes(out)


def elf_shared_offloading(headers: int = 4000, binaries: int = 64) -> bytes:
    """`headers` SHT_LLVM_OFFLOADING section headers, all pointing at one section of `binaries`
    packages."""
    names = b"\0.strtab\0.llvm.offloading\0"
    package = b"".join(offload_binary() for _ in range(binaries))
    blobs = names + bytes(-len(names) % 8) + package
    poff = len(blobs) - len(package)
    secs = [(1, SHT_STRTAB, 0, len(names))] + [(9, SHT_LLVM_OFFLOADING, poff, len(package))] * headers
    return elf64(secs, blobs, 1)


def elf_overlapping_names(size: int = 2 << 20) -> bytes:
    """Half the file one section name without a NUL until its end, half section headers whose
    names start at successive offsets into it (each name is a different suffix)."""
    name_len = size // 2
    names = b"\0" + b"n" * name_len + b"\0"
    headers = (size - len(names)) // 64 - 2
    secs = [(0, SHT_STRTAB, 0, len(names))] + [(1 + (i * 61) % (name_len // 2), SHT_PROGBITS, 0, 0)
                                               for i in range(headers)]
    return elf64(secs, names, 1)


def elf_shared_names(size: int = 2 << 20) -> bytes:
    """Every section header names the same long name: one decoded string would do."""
    name_len = size // 2
    names = b"\0" + b"n" * name_len + b"\0"
    headers = (size - len(names)) // 64 - 2
    secs = [(0, SHT_STRTAB, 0, len(names))] + [(1, SHT_PROGBITS, 0, 0)] * headers
    return elf64(secs, names, 1)


def elf_hip_fatbin(size: int = 10 << 20, bundle_size: int = 4096) -> bytes:
    """A `.hip_fatbin` section of many small bundles, each padded to 4096 as the linker aligns."""
    payload = b"\x7fELF" + bytes(60)
    ids = [HOST_ID, DEVICE_ID]
    hdr = _header_size(ids)
    one = binary_bundle([(HOST_ID, hdr, 0), (DEVICE_ID, hdr, len(payload))], payload)
    one += bytes(bundle_size - len(one))
    section = one * max(1, (size - 4096) // bundle_size)
    names = b"\0.strtab\0.hip_fatbin\0"
    blobs = names + bytes(-len(names) % 8) + section
    return elf64([(1, SHT_STRTAB, 0, len(names)), (9, SHT_PROGBITS, len(blobs) - len(section), len(section))],
                 blobs, 1)


# --- archives -------------------------------------------------------------------------------

def _ar_header(name: bytes, size: int) -> bytes:
    return (name.ljust(16) + b"0".ljust(12) + b"0".ljust(6) + b"0".ljust(6) + b"644".ljust(8)
            + str(size).encode().ljust(10) + b"`\n")


def archive_long_names(size: int = 1 << 20) -> bytes:
    """A GNU archive whose `//` table is one long name without a terminator and whose members
    (empty) each name a different offset into it."""
    table_len = size // 2
    table = b"x" * table_len
    out = bytearray(b"!<arch>\n" + _ar_header(b"//", len(table)) + table)
    i = 0
    while len(out) + 60 <= size:
        out += _ar_header(b"/" + str((i * 4093) % (table_len // 2)).encode(), 0)
        i += 1
    return bytes(out)


# --- NVIDIA fat binaries --------------------------------------------------------------------

def zstd_rle_frame(size: int) -> bytes:
    """A zstd frame of `size` zero bytes made of RLE blocks: 4 bytes per 128 KiB, built without
    compressing anything."""
    block = 128 << 10
    # Frame header: 8-byte content size, a 1 MiB window (not single-segment: decoders refuse
    # gigabyte windows), no checksum.
    out = bytearray(struct.pack("<IBB", 0xFD2FB528, 0xC0, 10 << 3) + struct.pack("<Q", size))
    left = size
    while left:
        n = min(block, left)
        left -= n
        header = (1 if not left else 0) | (1 << 1) | (n << 3)
        out += header.to_bytes(3, "little") + b"\0"
    return bytes(out)


def fatbin_zstd_bomb(entries: int = 4, each: int = 1 << 30) -> bytes:
    """A fat binary of `entries` zstd ELF entries, each inflating to `each` bytes."""
    items = []
    for i in range(entries):
        frame = zstd_rle_frame(each)
        e = _fatbin.FatbinEntry(kind=_fatbin.KIND_ELF, sm=80 + i, flags=_fatbin.FLAG_64BIT | _fatbin.FLAG_ZSTD,
                                payload=frame + bytes(-len(frame) % 8), compressed_size=len(frame),
                                uncompressed_size=each, minor=8, major=1)
        items.append(e)
    return _fatbin.write_fatbin(items)


# --- LLVM bitcode ---------------------------------------------------------------------------

class _BitWriter:
    """LSB-first bit writer; whole bytes are flushed as they fill (no ever-growing integer)."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.cur = 0
        self.curbits = 0

    @property
    def nbits(self) -> int:
        return len(self.out) * 8 + self.curbits

    def emit(self, value: int, width: int) -> None:
        self.cur |= value << self.curbits
        self.curbits += width
        if self.curbits >= 1 << 15:
            nbytes = self.curbits // 8
            self.out += (self.cur & ((1 << (nbytes * 8)) - 1)).to_bytes(nbytes, "little")
            self.cur >>= nbytes * 8
            self.curbits -= nbytes * 8

    def vbr(self, value: int, width: int) -> None:
        hi = 1 << (width - 1)
        while value >= hi:
            self.emit((value & (hi - 1)) | hi, width)
            value >>= width - 1
        self.emit(value, width)

    def align32(self) -> None:
        self.emit(0, -self.nbits % 32)

    def data(self) -> bytes:
        return bytes(self.out) + self.cur.to_bytes((self.curbits + 7) // 8, "little")


def bitcode_literal_abbrev(size: int = 2 << 20, literals: int = 4096) -> bytes:
    """A module block with one abbreviation of `literals` literal operands, used by as many
    3-bit records as fit: each record costs 3 bits and expands to `literals` operands."""
    w = _BitWriter()
    w.emit(0xDEC04342, 32)  # 'BC' 0xC0DE
    w.emit(1, 2)            # ENTER_SUBBLOCK (top level width 2)
    w.vbr(8, 8)             # MODULE_BLOCK
    w.vbr(3, 4)             # abbreviation width 3
    w.align32()
    length_at = w.nbits
    w.emit(0, 32)           # block length in words, patched below
    start = w.nbits
    w.emit(2, 3)            # DEFINE_ABBREV
    w.vbr(literals, 5)
    for _ in range(literals):
        w.emit(1, 1)        # a literal operand
        w.vbr(5, 8)
    records = max(0, (size * 8 - w.nbits - 64) // 3)
    group = 1000
    chunk = sum(4 << (3 * j) for j in range(group))  # `group` uses of abbreviation 4
    for _ in range(records // group):
        w.emit(chunk, 3 * group)
    w.emit(0, 3)            # END_BLOCK
    w.align32()
    data = bytearray(w.data())
    data[length_at // 8:length_at // 8 + 4] = struct.pack("<I", (w.nbits - start) // 32)
    return bytes(data)
