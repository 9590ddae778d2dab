"""Compressed clang offload bundles ("CCOB" v1/v2/v3, zlib or zstd), llvm-formats.md §4.

A CCOB wraps a whole serialized bundle (binary or text). LLVM 19 writes v2, LLVM 20+ v3 on request
(`COMPRESSED_BUNDLE_FORMAT_VERSION=3`, LLVM 22 by default). Unlike LLVM, every read checks the
truncated MD5, and the claimed uncompressed size is checked against the stream and a limit before
any large allocation: decompression is streamed and stops as soon as the output would exceed it."""

from __future__ import annotations

import hashlib
import io
import os
import struct
import sys
import time
import zlib
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterable

from .errors import CompressionError, UsageError

__all__ = [
    "CCOB_MAGIC", "CompressionInfo", "METHODS", "DEFAULT_LEVELS", "DEFAULT_MAX_UNCOMPRESSED_SIZE",
    "is_compressed", "read_header", "decompress", "compress", "compress_chunks", "truncated_md5",
    "format_with_commas",
]

CCOB_MAGIC = b"CCOB"
#: `llvm::compression::Format` values stored in the header.
METHODS = {0: "zlib", 1: "zstd"}
_METHOD_IDS = {v: k for k, v in METHODS.items()}
#: LLVM's default levels (`OffloadBundlerConfig`): zstd 3, zlib 6.
DEFAULT_LEVELS = {"zstd": 3, "zlib": 6}
#: Refuse to decompress more than this unless the caller raises it (LLVM v2 fields cap at 4 GiB anyway).
DEFAULT_MAX_UNCOMPRESSED_SIZE = 16 << 30

# Packed little-endian headers (magic, u16 version, u16 method, ...).
_V1 = struct.Struct("<4sHHIQ")  # uncompressed size u32, truncated MD5 u64
_V2 = struct.Struct("<4sHHIIQ")  # total file size u32, uncompressed size u32, truncated MD5 u64
_V3 = struct.Struct("<4sHHQQQ")  # total file size u64, uncompressed size u64, truncated MD5 u64
_PREFIX = struct.Struct("<4sHH")

_CHUNK = 32 << 20
_MT_THRESHOLD = 8 << 20  # inputs at least this large use zstd's worker threads


@dataclass
class CompressionInfo:
    """What a CCOB header says (and, after `compress`, what was written)."""

    version: int
    method: str  # "zlib" | "zstd"
    header_size: int
    total_size: int | None  # v2/v3 "total file size" field; None in v1
    uncompressed_size: int
    compressed_size: int
    truncated_md5: int
    level: int | None = None  # known only when we compressed


def is_compressed(buf) -> bool:
    """`identify_magic` == offload_bundle_compressed: starts with "CCOB"."""
    return len(buf) >= 4 and bytes(buf[:4]) == CCOB_MAGIC


def truncated_md5(data: bytes | bytearray | memoryview) -> int:
    """`MD5(data).low()`: the first 8 digest bytes as a little-endian u64."""
    return int.from_bytes(hashlib.md5(data).digest()[:8], "little")


def format_with_commas(n: int) -> str:
    return f"{n:,}"


def read_header(buf) -> CompressionInfo:
    """Parse and check a CCOB header; sizes must be consistent with the buffer."""
    size = len(buf)
    if size < _PREFIX.size:
        raise CompressionError("Compressed bundle header size too small")
    _, version, method_id = _PREFIX.unpack_from(buf, 0)
    if method_id not in METHODS:
        raise CompressionError(f"Unknown compressing method {method_id} at offset 6")
    if version == 1:
        layout = _V1
    elif version == 2:
        layout = _V2
    elif version == 3:
        layout = _V3
    else:
        raise CompressionError(f"unsupported compressed bundle format version {version} at offset 4")
    if size < layout.size:
        raise CompressionError(f"Compressed bundle header size too small: version {version} needs "
                               f"{layout.size} bytes, file has {size}")
    fields = layout.unpack_from(buf, 0)
    if version == 1:
        total, uncompressed, digest = None, fields[3], fields[4]
        end = size
    else:
        total, uncompressed, digest = fields[3], fields[4], fields[5]
        if total < layout.size:
            raise CompressionError(f"total file size field {total} at offset 8 is smaller than the "
                                   f"{layout.size}-byte header")
        if total > size:
            raise CompressionError(f"total file size field {total} at offset 8 exceeds the {size}-byte input")
        # LLVM 19 decompresses the rest of the file and only prints this field; a v2 field may have
        # wrapped for inputs over 4 GiB, so only a v3 field bounds the stream.
        end = total if version == 3 else size
    return CompressionInfo(version, METHODS[method_id], layout.size, total, uncompressed, end - layout.size, digest)


def _log_lines(log: Callable[[str], None] | None, lines: list[str]) -> None:
    if log is None:
        log = lambda s: sys.stderr.write(s)  # noqa: E731
    log("".join(line + "\n" for line in lines))


def decompress(buf, *, max_uncompressed_size: int = DEFAULT_MAX_UNCOMPRESSED_SIZE, verbose: bool = False,
               log: Callable[[str], None] | None = None) -> tuple[bytearray, CompressionInfo]:
    """Decompress a CCOB; returns (the bundle bytes, header info).

    Raises `CompressionError` for a bad header, a corrupt stream, a size that is not exactly the
    header's uncompressed size, a claimed size over `max_uncompressed_size`, or an MD5 mismatch."""
    info = read_header(buf)
    if info.uncompressed_size > max_uncompressed_size:
        raise CompressionError(f"uncompressed size field {info.uncompressed_size} exceeds the limit of "
                               f"{max_uncompressed_size} bytes")
    view = memoryview(buf).cast("B")[info.header_size:info.header_size + info.compressed_size]
    start = time.perf_counter()
    if info.method == "zstd":
        out = _zstd_decompress(view, info.uncompressed_size)
    else:
        out = _zlib_decompress(view, info.uncompressed_size)
    elapsed = time.perf_counter() - start
    actual = truncated_md5(out)
    if verbose:
        lines = [f"Compressed bundle format version: {info.version}"]
        if info.version >= 2:
            lines.append(f"Total file size (from header): {format_with_commas(info.total_size)} bytes")
        lines += [
            f"Decompression method: {info.method}",
            f"Size before decompression: {format_with_commas(info.compressed_size)} bytes",
            f"Size after decompression: {format_with_commas(info.uncompressed_size)} bytes",
            f"Compression rate: {_rate(info.uncompressed_size, info.compressed_size)}",
            f"Compression ratio: {_ratio(info.uncompressed_size, info.compressed_size)}%",
            f"Decompression speed: {_speed(info.uncompressed_size, elapsed)} MB/s",
            f"Stored hash: 0x{info.truncated_md5:016x}",
            f"Recalculated hash: 0x{actual:016x}",
            f"Hashes match: {'Yes' if actual == info.truncated_md5 else 'No'}",
        ]
        _log_lines(log, lines)
    if actual != info.truncated_md5:
        raise CompressionError(f"truncated MD5 mismatch: header at offset {info.header_size - 8} says "
                               f"0x{info.truncated_md5:016x}, decompressed data hashes to 0x{actual:016x}")
    return out, info


def _size_error(expected: int, got_more: bool) -> CompressionError:
    if got_more:
        return CompressionError("Could not decompress embedded file contents: Destination buffer is too small "
                                f"(stream holds more than the header's uncompressed size {expected})")
    return CompressionError(f"header claims {expected} uncompressed bytes but the compressed stream holds fewer")


def _zstd_decompress(view: memoryview, expected: int) -> bytearray:
    import zstandard

    try:
        params = zstandard.get_frame_parameters(view)
    except zstandard.ZstdError as exc:
        raise CompressionError(f"Could not decompress embedded file contents: {exc}") from None
    if params.content_size not in (zstandard.CONTENTSIZE_UNKNOWN, expected):
        if params.content_size > expected:
            raise _size_error(expected, True)
        # The frame says less than the header claims: reject before allocating anything.
        raise _size_error(expected, False)
    out = bytearray()
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(view, read_across_frames=True)
        with reader:
            while True:
                want = min(_CHUNK, expected + 1 - len(out))
                chunk = reader.read(want)
                if not chunk:
                    break
                out += chunk
                if len(out) > expected:
                    raise _size_error(expected, True)
    except zstandard.ZstdError as exc:
        raise CompressionError(f"Could not decompress embedded file contents: {exc}") from None
    if len(out) != expected:
        raise _size_error(expected, False)
    return out


def _zlib_decompress(view: memoryview, expected: int) -> bytearray:
    d = zlib.decompressobj()
    out = bytearray()
    try:
        pending: bytes | memoryview = view
        while True:
            chunk = d.decompress(pending, min(_CHUNK, expected + 1 - len(out)))
            out += chunk
            if len(out) > expected:
                raise _size_error(expected, True)
            pending = d.unconsumed_tail
            if d.eof or (not chunk and not pending):
                break
        if not d.eof:
            raise CompressionError("Could not decompress embedded file contents: zlib stream is truncated")
    except zlib.error as exc:
        raise CompressionError(f"Could not decompress embedded file contents: {exc}") from None
    if len(out) != expected:
        raise _size_error(expected, False)
    return out


def _rate(uncompressed: int, compressed: int) -> str:
    return f"{uncompressed / compressed:.2f}" if compressed else "inf"


def _ratio(uncompressed: int, compressed: int) -> str:
    return f"{compressed * 100.0 / uncompressed:.2f}" if uncompressed else "nan"


def _speed(size: int, seconds: float) -> str:
    return f"{size / (1024 * 1024) / seconds:.2f}" if seconds > 0 else "inf"


def compress_chunks(chunks: Iterable, uncompressed_size: int, out: BinaryIO, *, method: str = "zstd",
                    level: int | None = None, version: int = 2, verbose: bool = False,
                    log: Callable[[str], None] | None = None, threads: int | None = None) -> CompressionInfo:
    """Compress the concatenation of `chunks` (exactly `uncompressed_size` bytes) into a CCOB on `out`.

    Streams: the header is written as a placeholder and patched when the size and hash are known
    (`out` must be seekable; otherwise the result is assembled in memory). zstd uses worker threads
    for large inputs (`threads=-1` = one per core); the frame is a standard single frame with its
    content size, which LLVM 19 reads."""
    if method not in _METHOD_IDS:
        raise UsageError(f"unknown compression method '{method}' (zlib or zstd)")
    if version not in (2, 3):
        raise UsageError(f"cannot write compressed bundle format version {version} (2 or 3)")
    if version == 2 and uncompressed_size > 0xFFFFFFFF:
        raise UsageError("Uncompressed size exceeds version 2 limit")
    if level is None:
        level = DEFAULT_LEVELS[method]
    try:
        seekable = out.seekable()
    except (AttributeError, OSError, ValueError):
        seekable = False
    if not seekable:
        buf = io.BytesIO()
        info = compress_chunks(chunks, uncompressed_size, buf, method=method, level=level, version=version,
                               verbose=verbose, log=log, threads=threads)
        out.write(buf.getbuffer())
        return info
    layout = _V2 if version == 2 else _V3
    base = out.tell()
    out.write(bytes(layout.size))
    md5 = hashlib.md5()
    start = time.perf_counter()
    written = 0
    counter = _CountingWriter(out)
    if method == "zstd":
        import zstandard

        if threads is None:
            threads = -1 if uncompressed_size >= _MT_THRESHOLD else 0
        cctx = zstandard.ZstdCompressor(level=level, threads=threads, write_content_size=True)
        with cctx.stream_writer(counter, size=uncompressed_size, closefd=False,
                                write_size=zstandard.COMPRESSION_RECOMMENDED_OUTPUT_SIZE) as w:
            for chunk in chunks:
                md5.update(chunk)
                w.write(chunk)
                written += memoryview(chunk).nbytes
    else:
        cobj = zlib.compressobj(level)
        for chunk in chunks:
            md5.update(chunk)
            counter.write(cobj.compress(chunk))
            written += memoryview(chunk).nbytes
        counter.write(cobj.flush())
    elapsed = time.perf_counter() - start
    if written != uncompressed_size:
        raise UsageError(f"internal error: bundle is {written} bytes, expected {uncompressed_size}")
    digest = int.from_bytes(md5.digest()[:8], "little")
    compressed = counter.count
    total = layout.size + compressed
    if version == 2 and total > 0xFFFFFFFF:
        raise UsageError("Total file size exceeds version 2 limit")
    end = out.tell()
    out.seek(base)
    out.write(layout.pack(CCOB_MAGIC, version, _METHOD_IDS[method], total, uncompressed_size, digest))
    out.seek(end)
    info = CompressionInfo(version, method, layout.size, total, uncompressed_size, compressed, digest, level)
    if verbose:
        _log_lines(log, [
            f"Compressed bundle format version: {version}",
            f"Total file size (including headers): {format_with_commas(total)} bytes",
            f"Compression method used: {method}",
            f"Compression level: {level}",
            f"Binary size before compression: {format_with_commas(uncompressed_size)} bytes",
            f"Binary size after compression: {format_with_commas(compressed)} bytes",
            f"Compression rate: {_rate(uncompressed_size, compressed)}",
            f"Compression ratio: {_ratio(uncompressed_size, compressed)}%",
            f"Compression speed: {_speed(uncompressed_size, elapsed)} MB/s",
            f"Truncated MD5 hash: 0x{digest:016x}",
        ])
    return info


class _CountingWriter:
    """A write-only file wrapper that counts bytes (the compressed size)."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f
        self.count = 0

    def write(self, data) -> int:
        n = memoryview(data).nbytes
        if n:
            self._f.write(data)
            self.count += n
        return n

    def flush(self) -> None:
        self._f.flush()


def compress(data, *, method: str = "zstd", level: int | None = None, version: int = 2, verbose: bool = False,
             log: Callable[[str], None] | None = None, threads: int | None = None) -> bytes:
    """Compress a (small) bundle in memory; returns the CCOB bytes."""
    buf = io.BytesIO()
    compress_chunks([data], memoryview(data).nbytes, buf, method=method, level=level, version=version,
                    verbose=verbose, log=log, threads=threads)
    return buf.getvalue()


def env_format_version(env=os.environ, log: Callable[[str], None] | None = None) -> int:
    """`COMPRESSED_BUNDLE_FORMAT_VERSION` as LLVM 20+ reads it: 2 (default) or 3, warning otherwise."""
    raw = env.get("COMPRESSED_BUNDLE_FORMAT_VERSION")
    if raw is None:
        return 2
    try:
        value = int(raw.strip())
    except ValueError:
        _log_lines(log, [f"Warning: Invalid value for COMPRESSED_BUNDLE_FORMAT_VERSION: {raw}. "
                         "Using default version 2."])
        return 2
    if value not in (2, 3):
        _log_lines(log, [f"Warning: Invalid value for COMPRESSED_BUNDLE_FORMAT_VERSION: {raw}. "
                         "Valid values are 2 or 3. Using default version 2."])
        return 2
    return value
