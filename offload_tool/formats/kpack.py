"""ROCm kpack: device code split out of host binaries into per-architecture-family archives.

ROCm's kpack tooling (the `rocm-kpack` project, built into TheRock) takes the `.hip_fatbin`
code objects out of shared libraries and programs and stores them in `.kpack` archives, one per
architecture family; the host binary keeps only a reference the HIP runtime follows at load time.
Two things are read here, both as ROCm's own reader (`runtime/src/archive.cpp`,
`toc_parser.cpp`, `loader.cpp` of rocm-kpack) reads them:

The archive (`.kpack` file), little-endian:

    KpackHeader  Magic "KPAK", Version u32 = 1, TocOffset u64           (16 bytes)
    padding      to 64, then the kernel blob area
    TOC          one MessagePack map from TocOffset to the end of the file:
                 format_version, group_name, gfx_arch_family, gfx_arches [str],
                 compression_scheme "none" | "zstd-per-kernel",
                 "none":            blobs [{offset, size}]  (absolute file offsets), by ordinal
                 "zstd-per-kernel": zstd_offset, zstd_size: a blob of u32 kernel count, then per
                                    kernel u32 frame size + one zstd frame, in ordinal order
                 toc {binary key: {arch: {type, ordinal, original_size[, metadata]}}}

The binary key is `<path in the install tree>#<code object index>` (one index per translation unit
of an `-fgpu-rdc` binary).

The reference left in a split host binary: each 24-byte `__CudaFatBinaryWrapper` in
`.hipFatBinSegment` has its magic rewritten from `HIPF` to `HIPK` and its `reserved1` set to the
code object index, and its `binary` pointer aims at the `.rocm_kpack_ref` section, a MessagePack
map {kernel_name, kpack_search_paths [str]}: the binary key without `#<index>`, and the archives
to look in, relative to the binary.

Every offset, size, count and ordinal is checked before use, TOC entries are charged to the
`entries` budget and decompressed kernels to the `decompressed` budget."""

from __future__ import annotations

from .. import budget
from ..errors import KpackError, MessagePackError
from ..fileio import byte_view
from .layout import Layout, field_error
from .kinds import KPACK_MAGIC, FileKind, Format
from .msgpack import read_msgpack
from ..records import Record

__all__ = ["KpackError", "KPACK_MAGIC", "KPACK_VERSION", "KPACK_HEADER", "BLOB_ALIGNMENT", "ZSTD_COUNT",
           "ZSTD_FRAME_SIZE", "HIPF_MAGIC", "HIPK_MAGIC", "FAT_BINARY_WRAPPER", "KPACK_REF_SECTION",
           "WRAPPER_SECTION", "AMDGCN_TRIPLE", "KpackKernel", "KpackArchive", "KpackWrapper", "KpackRef",
           "read_kpack", "kernel_bytes", "read_kpack_ref", "read_kpack_wrappers"]


KPACK_VERSION = 1
#: Where the writer places the first blob (the header is padded to it).
BLOB_ALIGNMENT = 64
KPACK_HEADER = Layout("KpackHeader", [("Magic", "4s"), ("Version", "I"), ("TocOffset", "Q")])
#: The "zstd-per-kernel" blob: a kernel count, then a size before each frame.
ZSTD_COUNT = Layout("ZstdBlobHeader", [("NumKernels", "I")])
ZSTD_FRAME_SIZE = Layout("ZstdFrame", [("CompressedSize", "I")])

#: `__CudaFatBinaryWrapper` magics: HIP's fat binary, and one whose device code is in kpack archives.
HIPF_MAGIC = 0x48495046
HIPK_MAGIC = 0x4B504948
FAT_BINARY_WRAPPER = Layout("__CudaFatBinaryWrapper", [("magic", "I"), ("version", "I"), ("binary", "Q"),
                                                       ("reserved1", "Q")])
KPACK_REF_SECTION = ".rocm_kpack_ref"
WRAPPER_SECTION = ".hipFatBinSegment"
AMDGCN_TRIPLE = "amdgcn-amd-amdhsa"

_SCHEMES = ("none", "zstd-per-kernel")


class KpackKernel(Record):
    """One code object in a kpack archive: `binary` is the TOC's binary key (`path#index`).
    `offset`/`size` locate the stored bytes (a zstd frame when `compressed`)."""

    __slots__ = ("binary", "arch", "type", "ordinal", "original_size", "offset", "size", "compressed", "metadata")

    def __init__(self, binary: str, arch: str, type: str, ordinal: int, original_size: int | None, offset: int,
                 size: int, compressed: bool, metadata: object = None) -> None:
        self.binary = binary
        self.arch = arch
        self.type = type
        self.ordinal = ordinal
        self.original_size = original_size
        self.offset = offset
        self.size = size
        self.compressed = compressed
        self.metadata = metadata


class KpackArchive(Record):
    __slots__ = ("version", "toc_offset", "format_version", "group_name", "gfx_arch_family", "gfx_arches",
                 "compression_scheme", "kernels")

    def __init__(self, version: int, toc_offset: int, format_version: object, group_name: str, gfx_arch_family: str,
                 gfx_arches: list[str], compression_scheme: str, kernels: list[KpackKernel] | None = None) -> None:
        self.version = version
        self.toc_offset = toc_offset
        self.format_version = format_version
        self.group_name = group_name
        self.gfx_arch_family = gfx_arch_family
        self.gfx_arches = gfx_arches
        self.compression_scheme = compression_scheme
        self.kernels = [] if kernels is None else kernels


class KpackWrapper(Record):
    """One `__CudaFatBinaryWrapper` of `.hipFatBinSegment` (`co_index` is its `reserved1`)."""

    __slots__ = ("index", "magic", "version", "binary", "co_index")

    def __init__(self, index: int, magic: int, version: int, binary: int, co_index: int) -> None:
        self.index = index
        self.magic = magic
        self.version = version
        self.binary = binary
        self.co_index = co_index

    @property
    def is_kpack(self) -> bool:
        return self.magic == HIPK_MAGIC


class KpackRef(Record):
    """The `.rocm_kpack_ref` marker of a split host binary."""

    __slots__ = ("kernel_name", "search_paths")

    def __init__(self, kernel_name: str, search_paths: list[str]) -> None:
        self.kernel_name = kernel_name
        self.search_paths = search_paths


def _str(value, what: str, where: str) -> str:
    if not isinstance(value, str):
        raise KpackError(f"{where}: {what} is {type(value).__name__}, not a string")
    return value


def _uint(value, what: str, where: str, limit: int = 1 << 64) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < limit:
        raise KpackError(f"{where}: {what} is {value!r}, not an unsigned integer below {limit:#x}")
    return value


def _toc(view, toc_offset: int, where: str) -> dict:
    try:
        toc, _end = read_msgpack(view, toc_offset, where=f"{where}: TOC")
    except MessagePackError as exc:
        raise KpackError(str(exc)) from None
    if not isinstance(toc, dict):
        raise KpackError(f"{where}: TOC at {toc_offset:#x} is {type(toc).__name__}, not a map")
    return toc


def _blob_places(toc: dict, scheme: str, view, toc_offset: int, where: str) -> list[tuple[int, int]]:
    """(offset, size) of the stored bytes of each ordinal, every one inside the blob area."""
    places = []
    if scheme == "none":
        blobs = toc.get("blobs", [])
        if not isinstance(blobs, list):
            raise KpackError(f"{where}: TOC blobs is {type(blobs).__name__}, not an array")
        for i, blob in enumerate(blobs):
            if not isinstance(blob, dict):
                raise KpackError(f"{where}: TOC blobs[{i}] is {type(blob).__name__}, not a map")
            off = _uint(blob.get("offset"), f"blobs[{i}].offset", where)
            size = _uint(blob.get("size"), f"blobs[{i}].size", where)
            if off < KPACK_HEADER.size or off > toc_offset or size > toc_offset - off:
                raise KpackError(f"{where}: blobs[{i}]: {size} bytes at {off:#x} are outside the blob area "
                                 f"{KPACK_HEADER.size:#x}..{toc_offset:#x}")
            places.append((off, size))
        return places
    start = _uint(toc.get("zstd_offset"), "zstd_offset", where)
    size = _uint(toc.get("zstd_size"), "zstd_size", where)
    if start < KPACK_HEADER.size or start > toc_offset or size > toc_offset - start:
        raise KpackError(f"{where}: zstd blob of {size} bytes at {start:#x} is outside the blob area "
                         f"{KPACK_HEADER.size:#x}..{toc_offset:#x}")
    end = start + size
    blob = view[:end]  # frames may not run past the blob
    count = ZSTD_COUNT.read(blob, start, KpackError, where).NumKernels
    if count > (size - ZSTD_COUNT.size) // ZSTD_FRAME_SIZE.size:
        raise field_error(KpackError, start, "NumKernels",
                          f"{count} frames cannot fit in the {size}-byte zstd blob", where)
    budget.charge("entries", count, f"{where}: zstd frames")
    pos = start + ZSTD_COUNT.size
    for i in range(count):
        n = ZSTD_FRAME_SIZE.read(blob, pos, KpackError, where).CompressedSize
        pos += ZSTD_FRAME_SIZE.size
        if n > end - pos:
            raise field_error(KpackError, pos - ZSTD_FRAME_SIZE.size, f"frame {i} CompressedSize",
                              f"{n} bytes run past the end of the zstd blob ({end - pos} left)", where)
        places.append((pos, n))
        pos += n
    return places


def read_kpack(buf, *, where: str = "kpack archive") -> KpackArchive:
    """The header, TOC and kernels of the kpack archive in `buf` (kernels in TOC order)."""
    view = byte_view(buf)
    h = KPACK_HEADER.read(view, 0, KpackError, where)
    if h.Magic != KPACK_MAGIC:
        raise field_error(KpackError, 0, "Magic", f"{h.Magic!r} is not {KPACK_MAGIC!r}", where)
    if h.Version != KPACK_VERSION:
        raise field_error(KpackError, KPACK_HEADER.offset_of("Version"), "Version",
                          f"{h.Version} is not a version this reader knows ({KPACK_VERSION})", where)
    if not KPACK_HEADER.size <= h.TocOffset < len(view):
        raise field_error(KpackError, KPACK_HEADER.offset_of("TocOffset"), "TocOffset",
                          f"{h.TocOffset:#x} is outside the file ({KPACK_HEADER.size:#x}..{len(view):#x})", where)
    toc = _toc(view, h.TocOffset, where)
    scheme = _str(toc.get("compression_scheme", "none"), "compression_scheme", where)
    if scheme not in _SCHEMES:
        raise KpackError(f"{where}: compression_scheme {scheme!r} is not one of {', '.join(_SCHEMES)}")
    arches = toc.get("gfx_arches", [])
    if not isinstance(arches, list):
        raise KpackError(f"{where}: gfx_arches is {type(arches).__name__}, not an array")
    archive = KpackArchive(
        version=h.Version, toc_offset=h.TocOffset, format_version=toc.get("format_version"),
        group_name=_str(toc.get("group_name", ""), "group_name", where),
        gfx_arch_family=_str(toc.get("gfx_arch_family", ""), "gfx_arch_family", where),
        gfx_arches=[_str(a, f"gfx_arches[{i}]", where) for i, a in enumerate(arches)],
        compression_scheme=scheme)
    places = _blob_places(toc, scheme, view, h.TocOffset, where)
    binaries = toc.get("toc", {})
    if not isinstance(binaries, dict):
        raise KpackError(f"{where}: toc is {type(binaries).__name__}, not a map")
    for binary, by_arch in binaries.items():
        binary = _str(binary, "toc key", where)
        if not isinstance(by_arch, dict):
            raise KpackError(f"{where}: toc[{binary!r}] is {type(by_arch).__name__}, not a map")
        for arch, entry in by_arch.items():
            arch = _str(arch, f"toc[{binary!r}] key", where)
            what = f"toc[{binary!r}][{arch!r}]"
            if not isinstance(entry, dict):
                raise KpackError(f"{where}: {what} is {type(entry).__name__}, not a map")
            ordinal = _uint(entry.get("ordinal"), f"{what}.ordinal", where)
            if ordinal >= len(places):
                raise KpackError(f"{where}: {what}.ordinal {ordinal} has no blob (the archive stores {len(places)})")
            original = entry.get("original_size")
            if original is not None:
                original = _uint(original, f"{what}.original_size", where)
            offset, size = places[ordinal]
            archive.kernels.append(KpackKernel(
                binary=binary, arch=arch, type=_str(entry.get("type", ""), f"{what}.type", where), ordinal=ordinal,
                original_size=original, offset=offset, size=size, compressed=scheme != "none",
                metadata=entry.get("metadata")))
    return archive


def kernel_bytes(buf, kernel: KpackKernel, *, where: str = "kpack archive"):
    """The code object of `kernel`: a slice of `buf`, or its zstd frame decompressed (at most
    `original_size` bytes where the TOC gives it, charged to the `decompressed` budget)."""
    view = byte_view(buf)
    stored = view[kernel.offset:kernel.offset + kernel.size]
    if not kernel.compressed:
        return stored
    import zstandard

    what = f"{where}: {kernel.binary} {kernel.arch}"
    cap = budget.remaining("decompressed")
    if kernel.original_size is not None:
        if kernel.original_size > cap:
            budget.charge("decompressed", kernel.original_size, what)
        cap = kernel.original_size
    try:
        claimed = zstandard.get_frame_parameters(bytes(stored[:18])).content_size
        if claimed != zstandard.CONTENTSIZE_UNKNOWN and claimed > cap:
            raise KpackError(f"{what}: zstd frame at {kernel.offset:#x} claims {claimed} bytes, more than "
                             f"{'original_size' if kernel.original_size is not None else 'the budget allows'} "
                             f"({cap})")
        out = zstandard.ZstdDecompressor().decompress(bytes(stored), max_output_size=cap)
    except zstandard.ZstdError as exc:
        raise KpackError(f"{what}: zstd frame at {kernel.offset:#x}: {exc}") from None
    if kernel.original_size is not None and len(out) != kernel.original_size:
        raise KpackError(f"{what}: zstd frame at {kernel.offset:#x} holds {len(out)} bytes, "
                         f"not original_size {kernel.original_size}")
    budget.charge("decompressed", len(out), what)
    return out


def read_kpack_ref(buf, *, where: str = KPACK_REF_SECTION) -> KpackRef:
    """The `.rocm_kpack_ref` marker in `buf` (the section's contents)."""
    try:
        marker, _end = read_msgpack(buf, 0, where=where)
    except MessagePackError as exc:
        raise KpackError(str(exc)) from None
    if not isinstance(marker, dict):
        raise KpackError(f"{where}: marker is {type(marker).__name__}, not a map")
    if "kernel_name" not in marker or "kpack_search_paths" not in marker:
        raise KpackError(f"{where}: marker lacks kernel_name or kpack_search_paths")
    paths = marker["kpack_search_paths"]
    if not isinstance(paths, list):
        raise KpackError(f"{where}: kpack_search_paths is {type(paths).__name__}, not an array")
    return KpackRef(kernel_name=_str(marker["kernel_name"], "kernel_name", where),
                    search_paths=[_str(p, f"kpack_search_paths[{i}]", where) for i, p in enumerate(paths)])


def read_kpack_wrappers(buf, *, where: str = WRAPPER_SECTION) -> list[KpackWrapper]:
    """The `__CudaFatBinaryWrapper`s of a `.hipFatBinSegment` section's contents."""
    view = byte_view(buf)
    if len(view) % FAT_BINARY_WRAPPER.size:
        raise KpackError(f"{where}: {len(view)} bytes is not a multiple of the "
                         f"{FAT_BINARY_WRAPPER.size}-byte wrapper")
    count = len(view) // FAT_BINARY_WRAPPER.size
    budget.charge("entries", count, where)
    out = []
    for i in range(count):
        w = FAT_BINARY_WRAPPER.read(view, i * FAT_BINARY_WRAPPER.size, KpackError, where)
        out.append(KpackWrapper(index=i, magic=w.magic, version=w.version, binary=w.binary,
                                co_index=w.reserved1 & 0xFFFFFFFF))
    return out


# ---------------------------------------------------------------------------------------------
# What `inspect` lists of a kpack archive (`magic.FORMAT_MODULES`)
# ---------------------------------------------------------------------------------------------

def _inspect(scan, data, path: str, wrappers: list[str], depth: int, compressed: bool) -> None:
    """Every kernel, as `path[binary][arch]` (decompressed where the archive compresses them)."""
    archive = read_kpack(data, where=path)
    for k in archive.kernels:
        kpath = f"{path}[{k.binary}][{k.arch}]"
        image = kernel_bytes(data, k, where=path)
        if scan.leaf_or_nested(image, kpath, wrappers + ["kpack"], depth, compressed or k.compressed):
            continue
        details = {"kpack_binary": k.binary, "kpack_ordinal": k.ordinal, "kpack_type": k.type,
                   "kpack_group": archive.group_name, "kpack_arch_family": archive.gfx_arch_family,
                   "kpack_compression": archive.compression_scheme}
        if k.compressed:
            details["kpack_stored_size"] = k.size
        scan.add_image(
            path=kpath, container="kpack", producer="hip", triple=AMDGCN_TRIPLE, arch=k.arch,
            image_kind=scan.image_kind(image), size=len(image), compressed=compressed or k.compressed,
            sha256="", wrappers=list(wrappers), details=details, data=image)


FORMATS = (Format(FileKind.KPACK, magics=(KPACK_MAGIC,), container="kpack", inspect=_inspect),)
