"""NVIDIA fat binaries: the container nvcc puts in `.nv_fatbin` / `__nv_relfatbin` and writes as
`.fatbin` files (`nvcc -fatbin`, `fatbinary --create`).

NVIDIA does not document the layout; everything here was derived from CUDA 13.0 output
(`nvcc -c -gencode ...`, `nvcc -rdc=true`, linked programs, and `fatbinary --create` with every
`--compress-mode`, `--ident`, `--cmdline`, `-g`, `-32`) and is checked by tests/library/test_fatbin.py
against freshly generated nvcc / fatbinary output.  Little-endian throughout.

Fat binary header (16 bytes)::

    u32 magic = 0xBA55ED50   u16 version = 1   u16 header_size = 16   u64 fat_size

`fat_size` counts the entries that follow the header.  Several fat binaries may be concatenated
(a linked program's `.nv_fatbin` holds one per module, the CUDA runtime's included), so a section
is read back to back, tolerating zero padding to 8 bytes in between and at the end.

Entry header (64 fixed bytes, then variable parts; `header_size` covers all of it)::

    @0  u16 kind            1 = PTX, 2 = ELF (SASS cubin)
    @2  u16 format_version  0x0101
    @4  u32 header_size     64 + name + options, each part padded to 8
    @8  u64 padded_size     payload bytes that follow the header (multiple of 8)
    @16 u32 compressed_size bytes of compressed data at the start of the payload (0: stored raw)
    @20 u32 options_offset  offset (in this header) of a {u32 offset, u32 size} options
                            descriptor; 0 if none.  PTX entries always have one (ptxas options
                            from `--cmdline`, e.g. `--compile-only`); sm_100+ ELF entries carry
                            a binary blob there
    @24 u16 minor, @26 u16 major   PTX: the PTX ISA version (9.0 for CUDA 13);
                                   ELF: the cubin ELF ABI version (1.8), as in e_ident
    @28 u32 sm              the SM number (80 for sm_80, 100 for sm_100a)
    @32 u32 name_offset, @36 u32 name_size   the `--ident` string (source file name), or 0/0
    @40 u64 flags           see FLAG_* below
    @48 u64 reserved        0
    @56 u64 uncompressed_size   size of the image once decompressed (0 when stored raw)

Payload: the image (raw, padded with NUL to 8; PTX text is NUL-terminated) or a compressed
stream of `compressed_size` bytes (zstd for FLAG_ZSTD, which nvcc 13 uses by default for PTX and
for `-rdc` ELF; LZ4 block format for FLAG_LZ4, `--compress-mode=speed`, also used by older
CUDA releases), padded to 8.

Decompression is charged to the run's `decompressed` budget (`offload_tool.budget`) before it
starts, by the size the entry claims (the output must be exactly that size): a 128 KiB file of
four 1 GiB zstd entries stops at the budget with one line naming the entry, and `image_chunks`
lets a caller that only hashes an image do so without holding it."""

from __future__ import annotations

import functools
import io

from .. import budget
from ..errors import FatbinError
from ..fileio import byte_view
from .layout import Layout
from .kinds import FATBIN_MAGIC, FileKind, Format
from ..records import Record

__all__ = [
    "FATBIN_MAGIC", "FatbinEntry", "Fatbin", "is_fatbin", "read_fatbin", "read_fatbins", "write_fatbin",
    "make_entry", "lz4_block_decompress", "KIND_PTX", "KIND_ELF", "FATBIN_SECTIONS",
    "FLAG_64BIT", "FLAG_DEBUG", "FLAG_LINUX", "FLAG_LZ4", "FLAG_ZSTD", "FLAG_ARCH_SPECIFIC",
    "FLAG_FAMILY_SPECIFIC",
]

FATBIN_VERSION = 1
#: Section names nvcc uses for fat binaries in host objects and programs (`__nv_relfatbin`: `-rdc`).
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
_FATBIN_HEAD = FATBIN_MAGIC.to_bytes(4, "little")

HEADER = Layout("fat binary header", [("magic", "I"), ("version", "H"), ("header_size", "H"), ("fat_size", "Q")])
ENTRY = Layout("fat binary entry header", [
    ("kind", "H"), ("format_version", "H"), ("header_size", "I"), ("padded_size", "Q"), ("compressed_size", "I"),
    ("options_offset", "I"), ("minor", "H"), ("major", "H"), ("sm", "I"), ("name_offset", "I"), ("name_size", "I"),
    ("flags", "Q"), ("reserved", "Q"), ("uncompressed_size", "Q")])
#: Where the options blob lies inside the entry header.
DESCRIPTOR = Layout("fat binary options descriptor", [("offset", "I"), ("size", "I")])

KIND_PTX = 1
KIND_ELF = 2
KIND_NAMES = {KIND_PTX: "ptx", KIND_ELF: "elf"}
ENTRY_FORMAT_VERSION = 0x0101

FLAG_64BIT = 0x1            # `-64` (cleared by `fatbinary -32`)
FLAG_DEBUG = 0x2            # `-g`
FLAG_LINUX = 0x10           # host is Linux
FLAG_LZ4 = 0x2000           # payload is an LZ4 block (`--compress-mode=speed`)
FLAG_ZSTD = 0x8000          # payload is a zstd frame (default, size, balance modes)
FLAG_ARCH_SPECIFIC = 0x100000    # `sm_90a`: the `a` suffix
FLAG_FAMILY_SPECIFIC = 0x200000  # `sm_100f`: the `f` suffix
FLAG_NAMES = {FLAG_64BIT: "64bit", FLAG_DEBUG: "debug", FLAG_LINUX: "linux", FLAG_LZ4: "lz4",
              FLAG_ZSTD: "zstd", FLAG_ARCH_SPECIFIC: "arch-specific", FLAG_FAMILY_SPECIFIC: "family-specific"}

#: The largest image we agree to inflate (the field is 64-bit; real images are megabytes).  Memory
#: grows only with what a stream really inflates to, never with the claimed size alone.
MAX_UNCOMPRESSED_SIZE = 1 << 30
#: Number of fat binaries / entries we agree to list from one buffer (bounds the work on garbage).
MAX_ENTRIES = 1 << 16


def _align8(n: int) -> int:
    return (n + 7) & ~7


class FatbinEntry(Record):
    """One image in a fat binary: a SASS cubin (kind ELF) or PTX text for one SM.

    `payload` is the stored payload (padded; compressed if `compressed`), a slice of the input
    where possible.  `offset` is the entry header's offset in the buffer read."""

    __slots__ = ("kind", "sm", "flags", "payload", "compressed_size", "uncompressed_size", "minor", "major", "name",
                 "options", "format_version", "reserved", "header_size", "offset")
    _uncompared = frozenset({"offset"})

    def __init__(self, kind: int, sm: int, flags: int, payload: bytes | memoryview, compressed_size: int = 0,
                 uncompressed_size: int = 0, minor: int = 0, major: int = 0, name: bytes = b"",
                 options: bytes | None = None, format_version: int = ENTRY_FORMAT_VERSION, reserved: int = 0,
                 header_size: int = 0, offset: int = 0) -> None:
        self.kind = kind
        self.sm = sm
        self.flags = flags
        self.payload = payload
        self.compressed_size = compressed_size
        self.uncompressed_size = uncompressed_size
        self.minor = minor
        self.major = major
        self.name = name
        self.options = options
        self.format_version = format_version
        self.reserved = reserved
        self.header_size = header_size
        self.offset = offset

    @property
    def kind_name(self) -> str:
        """`ptx`, `elf`, or `kind<N>` for kinds nvcc 13 does not write."""
        return KIND_NAMES.get(self.kind, f"kind{self.kind}")

    @property
    def arch(self) -> str:
        """The CUDA arch as `cuobjdump` names it: `sm_80`, `sm_90a`, `sm_100f` (PTX too)."""
        suffix = "a" if self.flags & FLAG_ARCH_SPECIFIC else "f" if self.flags & FLAG_FAMILY_SPECIFIC else ""
        return f"sm_{self.sm}{suffix}"

    @property
    def virtual_arch(self) -> str:
        """`compute_90` for PTX images (what `-gencode code=compute_90` asks for); else `arch`."""
        from ..rules.offload_arch import ptx_of_sass  # here: `inspect` never needs it
        return ptx_of_sass(self.arch) if self.kind == KIND_PTX else self.arch

    @property
    def compressed(self) -> bool:
        return bool(self.flags & (FLAG_LZ4 | FLAG_ZSTD)) and self.compressed_size != 0

    @property
    def compression(self) -> str | None:
        if not self.compressed:
            return None
        return "zstd" if self.flags & FLAG_ZSTD else "lz4"

    @property
    def is_64bit(self) -> bool:
        return bool(self.flags & FLAG_64BIT)

    @property
    def flag_names(self) -> list[str]:
        names = [n for bit, n in FLAG_NAMES.items() if self.flags & bit]
        rest = self.flags & ~sum(FLAG_NAMES)
        if rest:
            names.append(f"{rest:#x}")
        return names

    @property
    def size(self) -> int:
        """Size of the image itself (decompressed; stored padding included for raw images)."""
        return self.uncompressed_size if self.compressed else len(self.payload)

    @property
    def ptx_options(self) -> str:
        """The ptxas options recorded for a PTX image (e.g. `--compile-only`), else ""."""
        if self.kind != KIND_PTX or not self.options:
            return ""
        return bytes(self.options).split(b"\0", 1)[0].decode("utf-8", "replace").strip()

    def image(self) -> bytes:
        """The image bytes, decompressed if needed (bounded by `uncompressed_size` and the budget)."""
        if not self.compressed:
            return bytes(self.payload)
        where, data = self._compressed_data()
        if self.flags & FLAG_ZSTD:
            return b"".join(_zstd_chunks(data, self.uncompressed_size, where))
        return lz4_block_decompress(data, self.uncompressed_size, where)

    def text_length(self, scratch: Scratch | None = None) -> int:
        """The image's length up to its first NUL (a PTX text's), its size if it has none, read
        without keeping the image: a compressed one is inflated (and checked, as by `image`) piece
        by piece (zstd) or into `scratch` (LZ4; reused from entry to entry)."""
        if not self.compressed:
            end = bytes(self.payload).find(b"\0")
            return len(self.payload) if end < 0 else end
        if self.flags & FLAG_ZSTD:
            got, end = 0, -1
            for chunk in self.image_chunks():  # every piece: the stream is checked to its end
                if end < 0 and (at := chunk.find(b"\0")) >= 0:
                    end = got + at
                got += len(chunk)
            return got if end < 0 else end
        where, data = self._compressed_data()
        src, size = bytes(data), self.uncompressed_size
        out = (scratch or Scratch()).get(size) if _lz4_plausible(src, size) and _native_lz4() else None
        if out is None or not _lz4_native_into(src, size, out):
            image = lz4_block_decompress(src, size, where)
            end = image.find(b"\0")
            return len(image) if end < 0 else end
        end = out.find(b"\0", 0, size)
        return size if end < 0 else end

    def image_chunks(self):
        """The image as a sequence of pieces of at most 1 MiB (zstd entries are decompressed as
        they are consumed: hashing an image never holds all of it)."""
        if self.compressed and self.flags & FLAG_ZSTD:
            where, data = self._compressed_data()
            return _zstd_chunks(data, self.uncompressed_size, where)
        return iter((self.image(),))

    def _compressed_data(self):
        where = f"fat binary entry at offset {self.offset:#x} ({self.kind_name} for {self.arch})"
        if self.compressed_size > len(self.payload):
            raise FatbinError(f"{where}: compressed_size {self.compressed_size} exceeds payload size {len(self.payload)}")
        if self.uncompressed_size > MAX_UNCOMPRESSED_SIZE:
            raise FatbinError(f"{where}: uncompressed_size {self.uncompressed_size} is implausibly large")
        budget.charge("decompressed", self.uncompressed_size, where)
        return where, self.payload[: self.compressed_size]


class Fatbin(Record):
    """One fat binary: its header fields and entries (`offset`: where it starts in the buffer)."""

    __slots__ = ("entries", "version", "header_size", "fat_size", "offset")
    _uncompared = frozenset({"offset"})

    def __init__(self, entries: list[FatbinEntry], version: int = FATBIN_VERSION, header_size: int = HEADER.size,
                 fat_size: int = 0, offset: int = 0) -> None:
        self.entries = entries
        self.version = version
        self.header_size = header_size
        self.fat_size = fat_size
        self.offset = offset


def is_fatbin(buf) -> bool:
    """True if `buf` starts with a fat binary header."""
    return bytes(buf[:4]) == _FATBIN_HEAD


def _read_entry(buf, off: int, end: int) -> FatbinEntry:
    if off + ENTRY.size > end:
        raise FatbinError(f"fat binary entry at offset {off:#x}: header truncated ({end - off} of {ENTRY.size} bytes)")
    e = ENTRY.read(buf, off, FatbinError)
    header_size, padded_size, compressed_size = e.header_size, e.padded_size, e.compressed_size
    name_offset, name_size, options_offset = e.name_offset, e.name_size, e.options_offset
    where = f"fat binary entry at offset {off:#x}"
    if header_size < ENTRY.size:
        raise FatbinError(f"{where}: header_size {header_size} is smaller than {ENTRY.size}")
    if header_size > end - off:
        raise FatbinError(f"{where}: header_size {header_size} runs past the end of the fat binary")
    if padded_size > end - off - header_size:
        raise FatbinError(f"{where}: payload size {padded_size} runs past the end of the fat binary")
    if compressed_size > padded_size:
        raise FatbinError(f"{where}: compressed_size {compressed_size} exceeds payload size {padded_size}")
    header = buf[off: off + header_size]
    name = b""
    if name_size or name_offset:
        if name_offset < ENTRY.size or name_offset > header_size or name_size > header_size - name_offset:
            raise FatbinError(f"{where}: name (offset {name_offset}, size {name_size}) lies outside the entry header")
        name = bytes(header[name_offset: name_offset + name_size])
    options = None
    if options_offset:
        if options_offset < ENTRY.size or options_offset > header_size - DESCRIPTOR.size:
            raise FatbinError(f"{where}: options_offset {options_offset} lies outside the entry header")
        descriptor = DESCRIPTOR.read(header, options_offset, FatbinError, where)
        opt_off, opt_size = descriptor.offset, descriptor.size
        if opt_off > header_size or opt_size > header_size - opt_off:
            raise FatbinError(f"{where}: options (offset {opt_off}, size {opt_size}) lie outside the entry header")
        options = bytes(header[opt_off: opt_off + opt_size])
    payload = buf[off + header_size: off + header_size + padded_size]
    return FatbinEntry(kind=e.kind, sm=e.sm, flags=e.flags, payload=payload, compressed_size=compressed_size,
                       uncompressed_size=e.uncompressed_size, minor=e.minor, major=e.major, name=name,
                       options=options, format_version=e.format_version, reserved=e.reserved,
                       header_size=header_size, offset=off)


def read_fatbin(buf, offset: int = 0) -> Fatbin:
    """Read the fat binary starting at `offset` of `buf`; raises FatbinError if malformed."""
    buf = byte_view(buf)
    if offset + HEADER.size > len(buf):
        raise FatbinError(f"fat binary at offset {offset:#x}: header truncated ({max(0, len(buf) - offset)} of 16 bytes)")
    h = HEADER.read(buf, offset, FatbinError)
    magic, version, header_size, fat_size = h.magic, h.version, h.header_size, h.fat_size
    if magic != FATBIN_MAGIC:
        raise FatbinError(f"fat binary at offset {offset:#x}: bad magic {magic:#010x} (expected {FATBIN_MAGIC:#010x})")
    if header_size < HEADER.size or header_size > len(buf) - offset:
        raise FatbinError(f"fat binary at offset {offset:#x}: bad header_size {header_size}")
    start = offset + header_size
    if fat_size > len(buf) - start:
        raise FatbinError(f"fat binary at offset {offset:#x}: fat_size {fat_size} runs past the end of the data "
                          f"({len(buf) - start} bytes left)")
    end = start + fat_size
    entries: list[FatbinEntry] = []
    off = start
    while off < end:
        if len(entries) >= MAX_ENTRIES:
            raise FatbinError(f"fat binary at offset {offset:#x}: more than {MAX_ENTRIES} entries")
        budget.charge("entries", 1, f"fat binary entry at offset {off:#x}")
        entry = _read_entry(buf, off, end)
        entries.append(entry)
        off += entry.header_size + len(entry.payload)
    return Fatbin(entries=entries, version=version, header_size=header_size, fat_size=fat_size, offset=offset)


def read_fatbins(buf) -> list[Fatbin]:
    """Every fat binary in `buf` (a `.nv_fatbin` section or a `.fatbin` file), back to back.

    Zero bytes between and after fat binaries (alignment padding) are skipped; anything else
    that is not a fat binary header is an error."""
    buf = byte_view(buf)
    found: list[Fatbin] = []
    off = 0
    n = len(buf)
    while off < n:
        if bytes(buf[off: off + 8]).strip(b"\0") == b"" and (n - off < 16 or not is_fatbin(buf[off:])):
            # Padding: skip the rest of this 8-byte slot.
            off = _align8(off + 1)
            continue
        if len(found) >= MAX_ENTRIES:
            raise FatbinError(f"more than {MAX_ENTRIES} fat binaries")
        fb = read_fatbin(buf, off)
        found.append(fb)
        off += fb.header_size + fb.fat_size
    if not found:
        raise FatbinError("no fat binary found (no 0xBA55ED50 header)")
    return found


# --------------------------------------------------------------------------------------------
# Writing (the layout nvcc 13's fatbinary writes; byte-identical for the same fields).

def _padded_string(raw: bytes) -> bytes:
    """A NUL-terminated string padded with NULs to a multiple of 8 (how fatbinary stores them)."""
    return raw + b"\0" * (_align8(len(raw) + 1) - len(raw))


def _entry_bytes(entry: FatbinEntry) -> tuple[bytes, int]:
    """The entry header (with its name and options parts) and the padded payload length."""
    tail = b""
    name_offset = name_size = 0
    if entry.name:
        name_offset, name_size = ENTRY.size, len(entry.name)
        tail += _padded_string(bytes(entry.name))
    options_offset = 0
    if entry.options is not None:
        options_offset = ENTRY.size + len(tail)
        blob = bytes(entry.options)
        tail += DESCRIPTOR.build(offset=options_offset + DESCRIPTOR.size, size=len(blob)) + _padded_string(blob)
    payload_len = _align8(len(entry.payload))
    header = ENTRY.build(kind=entry.kind, format_version=entry.format_version, header_size=ENTRY.size + len(tail),
                         padded_size=payload_len, compressed_size=entry.compressed_size,
                         options_offset=options_offset, minor=entry.minor, major=entry.major, sm=entry.sm,
                         name_offset=name_offset, name_size=name_size, flags=entry.flags, reserved=entry.reserved,
                         uncompressed_size=entry.uncompressed_size)
    return header + tail, payload_len


def write_fatbin(entries: list[FatbinEntry]) -> bytes:
    """Serialize a fat binary holding `entries` (payloads as stored: raw, or already compressed)."""
    parts: list[bytes] = []
    total = 0
    for entry in entries:
        if entry.compressed_size > len(entry.payload):
            raise FatbinError(f"entry for {entry.arch}: compressed_size {entry.compressed_size} exceeds payload")
        header, payload_len = _entry_bytes(entry)
        payload = bytes(entry.payload)
        parts += [header, payload, b"\0" * (payload_len - len(payload))]
        total += len(header) + payload_len
    header = HEADER.build(magic=FATBIN_MAGIC, version=FATBIN_VERSION, header_size=HEADER.size, fat_size=total)
    return header + b"".join(parts)


def make_entry(kind: int, sm: int, image: bytes, *, flags: int = FLAG_64BIT | FLAG_LINUX, name: bytes = b"",
               options: bytes | None = None, minor: int | None = None, major: int | None = None) -> FatbinEntry:
    """An uncompressed entry as `fatbinary --compress-mode=none` writes it.

    PTX text gets its terminating NUL and an (empty) options descriptor, as fatbinary always
    writes one for PTX; the version defaults to PTX ISA 9.0 / cubin ABI 1.8 (CUDA 13)."""
    if kind == KIND_PTX:
        if not image.endswith(b"\0"):
            image += b"\0"
        if options is None:
            options = b""
        minor = 0 if minor is None else minor
        major = 9 if major is None else major
    else:
        minor = 8 if minor is None else minor
        major = 1 if major is None else major
    return FatbinEntry(kind=kind, sm=sm, flags=flags, payload=image, minor=minor, major=major, name=name,
                       options=options)


# --------------------------------------------------------------------------------------------
# Decompression

def _zstd_chunks(data, expected: int, where: str):
    """The zstd frame `data` decompressed, in pieces of at most 1 MiB; FatbinError unless it
    inflates to exactly `expected` bytes (checked as it goes: never more than that is produced)."""
    try:
        import zstandard
    except ImportError:  # pragma: no cover - zstandard is a declared dependency
        raise FatbinError(f"{where}: zstd-compressed image, but the zstandard module is missing") from None
    got = 0
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(bytes(data)), read_across_frames=False)
        while got <= expected:  # read in bounded chunks: memory follows real output, not the claim
            chunk = reader.read(min(1 << 20, expected + 1 - got))
            if not chunk:
                break
            got += len(chunk)
            if got > expected:
                break
            yield chunk
    except zstandard.ZstdError as exc:
        raise FatbinError(f"{where}: corrupt zstd data: {exc}") from None
    if got != expected:
        size = f"more than {expected}" if got > expected else str(got)
        raise FatbinError(f"{where}: zstd data inflates to {size} bytes, uncompressed_size says {expected}")


def _lz4_length(src: bytes, i: int, nibble: int, what: str) -> tuple[int, int]:
    """A token's length nibble plus its extension bytes (each 255 means "more follows")."""
    length = nibble
    if nibble == 15:
        while True:
            if i >= len(src):
                raise FatbinError(f"{what} runs past the end of the data")
            b = src[i]
            i += 1
            length += b
            if b != 255:
                break
    return length, i


#: LZ4 cannot inflate a block more than this (a match length grows by 255 per input byte).
_LZ4_MAX_RATIO = 255


@functools.lru_cache(maxsize=None)
def _native_lz4():
    """The system's liblz4 `LZ4_decompress_safe` (made for untrusted input: it never writes past
    the output's capacity), or None where there is no liblz4: then the decoder below does all."""
    import ctypes
    try:
        lib = ctypes.CDLL("liblz4.so.1")  # its soname on Linux since 2014; else a search
    except OSError:
        import ctypes.util
        name = ctypes.util.find_library("lz4")
        try:
            lib = ctypes.CDLL(name) if name else None
        except OSError:
            lib = None
    fn = getattr(lib, "LZ4_decompress_safe", None)
    if fn is None:
        return None
    fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def _lz4_native_into(src: bytes, expected: int, out) -> bool:
    """Inflate `src` into `out[:expected]` (a writable buffer at least that long) with liblz4;
    True when it inflates to exactly `expected` bytes.  False without liblz4, for sizes out of its
    range, and for data it refuses: the decoder below then decides, and words the error."""
    fn = _native_lz4()
    if fn is None or not _lz4_plausible(src, expected):
        return False
    import ctypes
    window = (ctypes.c_char * expected).from_buffer(out)
    got = fn(src, ctypes.addressof(window), len(src), expected)
    del window  # `out` may be copied, resized or closed
    return got == expected


def _lz4_plausible(src: bytes, expected: int) -> bool:
    """Whether `src` could inflate to `expected` bytes (and both fit liblz4's int sizes): an
    output buffer is only ever made for such a size."""
    return 0 < expected < (1 << 31) and len(src) < (1 << 31) and expected <= _LZ4_MAX_RATIO * len(src) + 16


class Scratch:
    """One anonymous mapping, reused from entry to entry, that LZ4 PTX texts are inflated into to
    be measured (`FatbinEntry.text_length`): the kernel hands out its pages zeroed, so nothing is
    cleared or copied, and only pages the text fills are touched."""

    def __init__(self) -> None:
        self.map = None

    def get(self, size: int):
        if self.map is None or len(self.map) < size:
            import mmap
            if self.map is not None:
                self.map.close()
            self.map = mmap.mmap(-1, max(size, 1))
        return self.map


def lz4_block_decompress(data, expected: int, where: str = "LZ4 block") -> bytes:
    """Decompress one LZ4 block (no frame) to exactly `expected` bytes.

    The system's liblz4, where there is one, inflates what it accepts (`_lz4_native_into`); anything
    else goes through the decoder here, written because LZ4 is not a dependency: every length
    and match offset is checked, so corrupt input raises FatbinError and output never exceeds
    `expected`."""
    src = bytes(data)
    if _lz4_plausible(src, expected):
        out = bytearray(expected)
        if _lz4_native_into(src, expected, out):
            return bytes(out)
        del out
    n = len(src)
    out = bytearray()
    i = 0
    while i < n:
        token = src[i]
        i += 1
        lit, i = _lz4_length(src, i, token >> 4, f"{where}: LZ4 literal length")
        if lit > n - i:
            raise FatbinError(f"{where}: LZ4 literals run past the end of the data")
        if len(out) + lit > expected:
            raise FatbinError(f"{where}: LZ4 data inflates past uncompressed_size {expected}")
        out += src[i: i + lit]
        i += lit
        if i >= n:
            break  # the last sequence has literals only
        if i + 2 > n:
            raise FatbinError(f"{where}: LZ4 match offset truncated")
        dist = src[i] | (src[i + 1] << 8)
        i += 2
        if dist == 0 or dist > len(out):
            raise FatbinError(f"{where}: LZ4 match offset {dist} is invalid at output position {len(out)}")
        mlen, i = _lz4_length(src, i, token & 15, f"{where}: LZ4 match length")
        mlen += 4
        if len(out) + mlen > expected:
            raise FatbinError(f"{where}: LZ4 data inflates past uncompressed_size {expected}")
        start = len(out) - dist
        if dist >= mlen:
            out += out[start: start + mlen]
        else:  # overlapping copy: repeat the last `dist` bytes
            chunk = bytes(out[start:])
            reps, rest = divmod(mlen, dist)
            out += chunk * reps + chunk[:rest]
    if len(out) != expected:
        raise FatbinError(f"{where}: LZ4 data inflates to {len(out)} bytes, uncompressed_size says {expected}")
    return bytes(out)


# ---------------------------------------------------------------------------------------------
# What `inspect` lists of a fat binary (`magic.FORMAT_MODULES`)
# ---------------------------------------------------------------------------------------------

def _inspect(scan, data, path: str, wrappers: list[str], depth: int, compressed: bool) -> None:
    """Every entry of the fat binaries back to back in `data`: PTX (up to its NUL) and cubins,
    numbered `path[i]`, or `path[j.i]` when there are several fat binaries."""
    fatbins = read_fatbins(data)
    scratch = Scratch()  # where LZ4 PTX texts are inflated to be measured
    for j, fb in enumerate(fatbins):
        for i, entry in enumerate(fb.entries):
            digest, size = "", None
            listing_only = not scan.keep_data and not getattr(scan, "hashes", True)
            if entry.kind == KIND_PTX and listing_only:
                # Listed up to its NUL: the text is read for its length, not kept.
                image, size = b"", entry.text_length(scratch)
            elif entry.kind == KIND_PTX:
                image = entry.image()
            elif listing_only:
                # Listing only, no hash: the entry header says all that is listed (the size of a
                # compressed image is its uncompressed_size, checked when it is decompressed).
                image, size = b"", entry.size
            elif not scan.keep_data and entry.compressed:
                # Listing only: hash the image as it is decompressed, never holding all of it.
                import hashlib  # only with hashes (`inspect --hash`)
                hasher = hashlib.sha256()
                for chunk in entry.image_chunks():
                    hasher.update(chunk)
                image, digest, size = b"", hasher.hexdigest(), entry.uncompressed_size
            elif not entry.compressed:
                image = entry.payload  # a view of the input: read only where a caller reads it
            else:
                image = entry.image()
            if entry.kind == KIND_PTX:
                kind = "ptx"
                if size is None:
                    end = image.find(b"\0")
                    image = image if end < 0 else image[:end]
            elif entry.kind == KIND_ELF:
                kind = "cubin"
            else:
                kind = entry.kind_name
            details = {"fatbin_offset": fb.offset, "fatbin_flags": entry.flag_names}
            if entry.compression:
                details["compression"] = entry.compression
            if entry.kind == KIND_PTX:
                details["ptx_version"] = f"{entry.major}.{entry.minor}"
                if entry.ptx_options:
                    details["ptx_options"] = entry.ptx_options
            if entry.name:
                details["ident"] = entry.name.decode("utf-8", "replace")
            label = f"{path}[{j}.{i}]" if len(fatbins) > 1 else f"{path}[{i}]"
            scan.add_image(
                path=label, container="fatbin", producer="cuda",
                triple="nvptx64-nvidia-cuda" if entry.is_64bit else "nvptx-nvidia-cuda", arch=entry.arch,
                image_kind=kind, size=len(image) if size is None else size,
                compressed=compressed or entry.compressed, sha256=digest,
                wrappers=list(wrappers), details=details, data=image)


FORMATS = (Format(FileKind.FATBIN, magics=(_FATBIN_HEAD,), container="fatbin", inspect=_inspect),)
