"""Compressed clang offload bundles ("CCOB" v1/v2/v3, zlib or zstd).

A CCOB wraps a whole serialized bundle (binary or text). LLVM 19 writes v2, LLVM 20+ v3 on request
(`COMPRESSED_BUNDLE_FORMAT_VERSION=3`, LLVM 22 by default). Unlike LLVM, every read checks the
truncated MD5, and the claimed uncompressed size is checked against the stream and a limit before
any large allocation: decompression is streamed and stops as soon as the output would exceed it."""

from __future__ import annotations

import io
import itertools
import mmap
import os
import sys
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping

from .. import budget
from ..errors import BundleFormatError, CompressionError, OffloadError, UsageError
from ..fileio import byte_view
from ..inputs import read_slice_into, read_slices
from . import bundle as _bundle
from .layout import Layout
from .kinds import CCOB_MAGIC, FileKind, Format
from ..records import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO

__all__ = [
    "CCOB_MAGIC", "CompressionInfo", "METHODS", "DEFAULT_LEVELS", "DEFAULT_MAX_UNCOMPRESSED_SIZE",
    "is_compressed", "read_header", "decompress", "compress", "compress_chunks", "truncated_md5",
    "format_with_commas", "Decompression", "zstd_output_bound", "env_format_version", "split_bundles",
]

#: `llvm::compression::Format` values stored in the header.
METHODS = {0: "zlib", 1: "zstd"}
_METHOD_IDS = {v: k for k, v in METHODS.items()}
#: LLVM's default levels (`OffloadBundlerConfig`): zstd 3, zlib 6.
DEFAULT_LEVELS = {"zstd": 3, "zlib": 6}
#: Refuse to decompress more than this unless the caller raises it (LLVM v2 fields cap at 4 GiB anyway).
DEFAULT_MAX_UNCOMPRESSED_SIZE = 16 << 30

# `CompressedOffloadBundle` headers, little-endian: the prefix, then per version the sizes (v1 has
# no total file size; v2 stores sizes as u32, v3 as u64) and the truncated MD5 of the contents.
_PREFIX_FIELDS = [("magic", "4s"), ("version", "H"), ("method", "H")]
_PREFIX = Layout("CCOB header", _PREFIX_FIELDS)
_HEADERS = {
    1: Layout("CCOB v1 header", _PREFIX_FIELDS + [("uncompressed_size", "I"), ("hash", "Q")]),
    2: Layout("CCOB v2 header", _PREFIX_FIELDS + [("total_file_size", "I"), ("uncompressed_size", "I"), ("hash", "Q")]),
    3: Layout("CCOB v3 header", _PREFIX_FIELDS + [("total_file_size", "Q"), ("uncompressed_size", "Q"), ("hash", "Q")]),
}

_PIECE = 4 << 20  # decompressed bytes handed on at a time (bounded memory, few Python steps)
_MT_THRESHOLD = 8 << 20  # payloads at least this large are hashed in a worker thread


class CompressionInfo(Record):
    """What a CCOB header says (and, after `compress`, what was written)."""

    __slots__ = ("version", "method", "header_size", "total_size", "uncompressed_size", "compressed_size",
                 "truncated_md5", "level")

    def __init__(self, version: int, method: str, header_size: int, total_size: int | None, uncompressed_size: int,
                 compressed_size: int, truncated_md5: int, level: int | None = None) -> None:
        self.version = version
        self.method = method  # "zlib" | "zstd"
        self.header_size = header_size
        self.total_size = total_size  # v2/v3 "total file size" field; None in v1
        self.uncompressed_size = uncompressed_size
        self.compressed_size = compressed_size
        self.truncated_md5 = truncated_md5
        self.level = level  # known only when we compressed


def is_compressed(buf) -> bool:
    """`identify_magic` == offload_bundle_compressed: starts with "CCOB"."""
    return bytes(buf[:4]) == CCOB_MAGIC


def truncated_md5(data: bytes | bytearray | memoryview) -> int:
    """`MD5(data).low()`: the first 8 digest bytes as a little-endian u64."""
    import hashlib  # here: a listing that meets no CCOB starts without it
    return int.from_bytes(hashlib.md5(data).digest()[:8], "little")


class _Hasher:
    """MD5 of a byte stream, computed in a worker thread for large inputs so that hashing overlaps
    (de)compression (hashlib and zstd both release the GIL)."""

    def __init__(self, threaded: bool) -> None:
        import hashlib
        self._md5 = hashlib.md5()
        self._thread = None
        if threaded:
            import queue
            import threading

            self._queue: "queue.Queue" = queue.Queue(maxsize=8)
            self._thread = threading.Thread(target=self._run, name="ccob-md5", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            self._md5.update(item)

    def update(self, data) -> None:
        if self._thread is None:
            self._md5.update(data)
        else:
            self._queue.put(data)

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def truncated(self) -> int:
        self.close()
        return int.from_bytes(self._md5.digest()[:8], "little")


def _pieces(chunks: Iterable, size: int = 8 << 20):
    """Split large chunks into pieces so hashing and compressing can interleave."""
    for chunk in chunks:
        view = memoryview(chunk).cast("B")
        if view.nbytes <= size:
            yield chunk
            continue
        for pos in range(0, view.nbytes, size):
            yield view[pos:pos + size]


def format_with_commas(n: int) -> str:
    return f"{n:,}"


def read_header(buf) -> CompressionInfo:
    """Parse and check a CCOB header; sizes must be consistent with the buffer."""
    size = len(buf)
    if size < _PREFIX.size:
        raise CompressionError("Compressed bundle header size too small")
    prefix = _PREFIX.read(buf, 0, CompressionError)
    version, method_id = prefix.version, prefix.method
    if method_id not in METHODS:
        raise CompressionError(f"Unknown compressing method {method_id} at offset {_PREFIX.offset_of('method')}")
    layout = _HEADERS.get(version)
    if layout is None:
        raise CompressionError(f"unsupported compressed bundle format version {version} at offset "
                               f"{_PREFIX.offset_of('version')}")
    if size < layout.size:
        raise CompressionError(f"Compressed bundle header size too small: version {version} needs "
                               f"{layout.size} bytes, file has {size}")
    header = layout.read(buf, 0, CompressionError)
    uncompressed, digest = header.uncompressed_size, header.hash
    if version == 1:
        total = None
        end = size
    else:
        total = header.total_file_size
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
               log: Callable[[str], None] | None = None, what: str = "compressed bundle"
               ) -> tuple[bytes | bytearray | mmap.mmap, CompressionInfo]:
    """Decompress a whole CCOB into memory; returns (the bundle as a bytes-like object, header info).

    For small CCOBs (archive members, inspection). Raises `CompressionError` for a bad header, a
    corrupt stream, a size that is not exactly the header's uncompressed size, a claimed size over
    `max_uncompressed_size`, or an MD5 mismatch; `BudgetError` when the size passes the run's
    `decompressed` budget. Large inputs stream through `Decompression.chunks` instead."""
    dec = Decompression(buf, max_uncompressed_size=max_uncompressed_size, verbose=verbose, log=log, what=what)
    return dec.read_all(), dec.info


class Decompression:
    """One compressed bundle, read as a stream: `prefix(n)` decompresses just the first `n` bytes
    (headers), `chunks()` the whole payload in order, in pieces of bounded size, with the MD5 computed
    alongside (in a worker thread for large payloads: zstd, zlib and hashlib all release the GIL, so
    decompressing, hashing and the caller's writes overlap) and checked after the last piece.

    The header's claims are checked before anything is decompressed: the uncompressed size against
    `max_uncompressed_size`, against what the stream can hold at most (zstd block headers, deflate's
    maximal ratio) and against the run's `decompressed` budget, so a small file that claims or
    expands to gigabytes costs neither the memory nor the time."""

    def __init__(self, buf, *, max_uncompressed_size: int = DEFAULT_MAX_UNCOMPRESSED_SIZE, verbose: bool = False,
                 log: Callable[[str], None] | None = None, what: str = "compressed bundle") -> None:
        info = read_header(buf)
        if info.uncompressed_size > max_uncompressed_size:
            raise CompressionError(f"uncompressed size field {info.uncompressed_size} exceeds the limit of "
                                   f"{max_uncompressed_size} bytes")
        self.info = info
        self.what = what
        self._verbose, self._log = verbose, log
        self._stream = memoryview(buf).cast("B")[info.header_size:info.header_size + info.compressed_size]
        self._window = 0
        if info.method == "zstd":
            self._window = _check_zstd_claim(self._stream, info.uncompressed_size)
        elif info.uncompressed_size > self._stream.nbytes * _DEFLATE_MAX_RATIO + 64:
            raise _size_error(info.uncompressed_size, False)

    def _pieces(self, limit: int, piece: int) -> Iterator[bytes]:
        """Decompressed bytes in order, at most `limit` of them (more would be an error for the caller)."""
        if self.info.method == "zstd":
            return _zstd_pieces(self._stream, limit, piece, self._window)
        return _zlib_pieces(self._stream, limit, piece)

    def prefix(self, n: int) -> bytes:
        """The first `min(n, uncompressed size)` bytes, charged to the budget; nothing is verified
        beyond them (the MD5 needs the whole payload): for reading headers only."""
        n = min(n, self.info.uncompressed_size)
        budget.charge("decompressed", n, self.what)
        parts, got = [], 0
        for piece in self._pieces(n, min(n, _PIECE) or 1):
            parts.append(piece)
            got += len(piece)
            if got >= n:
                break
        data = b"".join(parts)[:n]
        if len(data) < n:
            raise _size_error(self.info.uncompressed_size, False)
        return data

    def read_all(self) -> bytes | bytearray | mmap.mmap:
        """The whole payload in memory (checked as `chunks` checks it)."""
        expected = self.info.uncompressed_size
        # Anonymous memory: pages are committed as they are written, so a false claim costs nothing.
        out = mmap.mmap(-1, expected) if expected else bytearray()
        pos = 0
        for chunk in self.chunks():
            out[pos:pos + len(chunk)] = chunk
            pos += len(chunk)
        return out

    def chunks(self, piece: int = _PIECE) -> Iterator[bytes]:
        """The whole payload in order (pieces of at most `piece` bytes); after the last piece the size
        and the MD5 are checked, and a mismatch raises `CompressionError` (callers write the pieces
        to temporary outputs, which the error then discards). Charged to the budget up front."""
        info = self.info
        expected = info.uncompressed_size
        budget.charge("decompressed", expected, self.what)
        hasher = _Hasher(threaded=expected >= _MT_THRESHOLD)
        start = time.perf_counter()
        got = 0
        try:
            for chunk in self._pieces(expected + 1, piece):
                got += len(chunk)
                if got > expected:
                    raise _size_error(expected, True)
                hasher.update(chunk)
                yield chunk
        finally:
            hasher.close()
        if got != expected:
            raise _size_error(expected, False)
        self._finish(hasher.truncated(), time.perf_counter() - start)

    def _finish(self, actual: int, elapsed: float) -> None:
        info = self.info
        if self._verbose:
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
            _log_lines(self._log, lines)
        if actual != info.truncated_md5:
            raise CompressionError(f"truncated MD5 mismatch: header at offset {info.header_size - 8} says "
                                   f"0x{info.truncated_md5:016x}, decompressed data hashes to 0x{actual:016x}")


def _size_error(expected: int, got_more: bool) -> CompressionError:
    if got_more:
        return CompressionError("Could not decompress embedded file contents: Destination buffer is too small "
                                f"(stream holds more than the header's uncompressed size {expected})")
    return CompressionError(f"header claims {expected} uncompressed bytes but the compressed stream holds fewer")


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_BLOCK_MAX = 128 << 10
_ZSTD_DEFAULT_WINDOW = 1 << 27  # zstd's default limit for streaming; LLVM's frames (level <= 22, LDM) fit
_DEFLATE_MAX_RATIO = 1032  # deflate cannot expand a byte into more than ~1032 bytes


def zstd_output_bound(view: memoryview) -> int:
    """An upper bound of what a zstd stream can decompress to, from its frame and block headers alone
    (raw/RLE blocks state their size, a compressed block yields at most 128 KiB). Lets a header that
    claims more than the stream can hold be rejected before anything is allocated."""
    size, pos, bound = view.nbytes, 0, 0
    while pos < size:
        magic = int.from_bytes(view[pos:pos + 4], "little") if size - pos >= 4 else None
        if pos and (magic is None or (magic != _ZSTD_MAGIC and magic & 0xFFFFFFF0 != 0x184D2A50)):
            # Bytes after a complete frame that are no frame: zstd's (and so LLVM's) "source size"
            # error, the stream being longer than its frames (a CCOB v2 is read to the end of its file).
            raise CompressionError("Could not decompress embedded file contents: Src size is incorrect "
                                   f"(stream offset {pos}, after a complete frame, starts no zstd frame)")
        if magic is None:
            raise CompressionError(f"Could not decompress embedded file contents: truncated zstd frame at offset {pos}")
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable frame
            if size - pos < 8:
                raise CompressionError(f"Could not decompress embedded file contents: truncated skippable frame at {pos}")
            pos += 8 + int.from_bytes(view[pos + 4:pos + 8], "little")
            continue
        if magic != _ZSTD_MAGIC:
            raise CompressionError("Could not decompress embedded file contents: Unknown frame descriptor "
                                   f"(no zstd magic at stream offset {pos})")
        if pos + 5 > size:
            raise CompressionError(f"Could not decompress embedded file contents: truncated zstd frame at offset {pos}")
        fhd = view[pos + 4]
        single_segment = (fhd >> 5) & 1
        fcs_size = (1 if single_segment else 0, 2, 4, 8)[fhd >> 6]
        pos += 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[fhd & 3] + fcs_size
        while True:
            if pos + 3 > size:
                raise CompressionError(f"Could not decompress embedded file contents: truncated zstd block header "
                                       f"at stream offset {pos}")
            header = int.from_bytes(view[pos:pos + 3], "little")
            last, block_type, block_size = header & 1, (header >> 1) & 3, header >> 3
            pos += 3
            if block_type == 0:
                bound += block_size
                pos += block_size
            elif block_type == 1:
                bound += block_size
                pos += 1
            elif block_type == 2:
                bound += _ZSTD_BLOCK_MAX
                pos += block_size
            else:
                raise CompressionError(f"Could not decompress embedded file contents: reserved zstd block type at "
                                       f"stream offset {pos - 3}")
            if last:
                break
        if (fhd >> 2) & 1:
            pos += 4
    if pos > size:
        raise CompressionError("Could not decompress embedded file contents: zstd stream is truncated")
    return bound


def _check_zstd_claim(view: memoryview, expected: int) -> int:
    """Reject a size claim the stream cannot meet; returns the window the decoder must allow."""
    import zstandard

    # The claim must fit what the stream's block headers allow before anything is decompressed.
    if zstd_output_bound(view) < expected:
        raise _size_error(expected, False)
    try:
        params = zstandard.get_frame_parameters(view)
    except zstandard.ZstdError as exc:
        raise CompressionError(f"Could not decompress embedded file contents: {exc}") from None
    if params.content_size != zstandard.CONTENTSIZE_UNKNOWN and params.content_size > expected:
        raise _size_error(expected, True)
    # zstd allocates min(window, frame content size) for its window: bounded by the checked claim.
    return max(_ZSTD_DEFAULT_WINDOW, min(params.window_size, 1 << 31))


def _zstd_pieces(view: memoryview, limit: int, piece: int, window: int) -> Iterator[bytes]:
    import zstandard

    reader = zstandard.ZstdDecompressor(max_window_size=window).stream_reader(
        view, read_size=1 << 20, read_across_frames=True)
    got = 0
    try:
        while got < limit:
            chunk = reader.read(min(piece, limit - got))
            if not chunk:
                return
            got += len(chunk)
            yield chunk
    except zstandard.ZstdError as exc:
        raise CompressionError(f"Could not decompress embedded file contents: {exc}") from None


def _zlib_pieces(view: memoryview, limit: int, piece: int) -> Iterator[bytes]:
    d = zlib.decompressobj()
    size, pos, got = view.nbytes, 0, 0
    tail: bytes | memoryview = b""
    try:
        while got < limit:
            if not tail:
                if pos >= size:
                    break
                tail = view[pos:pos + (1 << 20)]
                pos += len(tail)
            chunk = d.decompress(tail, min(piece, limit - got))
            tail = d.unconsumed_tail  # input zlib could not use yet: at most one input slice
            if chunk:
                got += len(chunk)
                yield chunk
            if d.eof:
                return
    except zlib.error as exc:
        raise CompressionError(f"Could not decompress embedded file contents: {exc}") from None
    if got < limit:
        raise CompressionError("Could not decompress embedded file contents: zlib stream is truncated")


def _rate(uncompressed: int, compressed: int) -> str:
    return f"{uncompressed / compressed:.2f}" if compressed else "inf"


def _ratio(uncompressed: int, compressed: int) -> str:
    return f"{compressed * 100.0 / uncompressed:.2f}" if uncompressed else "nan"


def _speed(size: int, seconds: float) -> str:
    return f"{size / (1024 * 1024) / seconds:.2f}" if seconds > 0 else "inf"


def compress_chunks(chunks: Iterable, uncompressed_size: int, out: BinaryIO, *, method: str = "zstd",
                    level: int | None = None, version: int = 2, verbose: bool = False,
                    log: Callable[[str], None] | None = None, threads: int | None = None,
                    file_slices: Mapping[int, tuple[int, int]] | None = None) -> CompressionInfo:
    """Compress the concatenation of `chunks` (exactly `uncompressed_size` bytes) into a CCOB on `out`.
    Chunks listed in `file_slices` (by `id`, as `(fd, offset)`) are read from that file rather than
    through their view (`inputs.read_slices`).

    Streams: the header is written as a placeholder and patched when the size and hash are known
    (`out` must be seekable; otherwise the result is assembled in memory). zstd runs in this thread
    and the MD5 in a second one; `threads` asks for zstd's worker threads instead (`-1` = one per
    usable CPU). Either way the frame is a standard single frame with its
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
                               verbose=verbose, log=log, threads=threads, file_slices=file_slices)
        out.write(buf.getbuffer())
        return info
    layout = _HEADERS[version]
    base = out.tell()
    out.write(bytes(layout.size))
    md5 = _Hasher(threaded=uncompressed_size >= _MT_THRESHOLD and _usable_cpus() > 1)
    file_slices = file_slices or {}
    pieces = _pieces(read_slices(chunks, file_slices))  # the input as the streaming paths take it
    start = time.perf_counter()
    written = 0
    counter = _CountingWriter(out)
    try:
        system = None
        if method == "zstd" and not threads:
            # The system libzstd, which LLVM links: LLVM's parameters and speed (see libzstd.py).
            from . import libzstd

            system = libzstd.open_compressor(level, uncompressed_size, counter, _LDM_BUCKET_SIZE_LOG)
        if system is not None:
            try:
                buffer = _in_place_buffer(uncompressed_size)
                if buffer is not None:
                    written = _compress_in_place(system, buffer, chunks, file_slices, uncompressed_size, md5)
                else:
                    for chunk in pieces:
                        md5.update(chunk)
                        system.write(chunk)
                        written += memoryview(chunk).nbytes
                    system.finish()
            except ValueError as exc:
                raise CompressionError(f"Could not compress the bundle: {exc}") from None
            finally:
                system.close()
        elif method == "zstd":
            import zstandard

            # Without a system libzstd (or with worker threads asked for): `zstandard`'s own zstd with
            # LLVM's parameters: the level, long-distance matching with the 128 MiB window LLVM's
            # ZSTD_compress2 gets, the content size in the frame; and the same LDM bucket size as on
            # the system library (_LDM_BUCKET_SIZE_LOG). One thread by default: a single standard
            # frame, as LLVM writes, while the MD5 runs beside it; zstd's worker threads
            # (`threads`) serialize LDM and lose ~3% in size on code objects, for no gain on 2 cores.
            extra = {}
            if threads:
                cores = _usable_cpus() if threads < 0 else threads
                extra["job_size"] = max(_MT_THRESHOLD, min(64 << 20, uncompressed_size // (2 * cores)))
            params = zstandard.ZstdCompressionParameters(compression_level=level, enable_ldm=True,
                                                         ldm_bucket_size_log=_LDM_BUCKET_SIZE_LOG,
                                                         threads=threads or 0, write_content_size=True, **extra)
            cctx = zstandard.ZstdCompressor(compression_params=params)
            with cctx.stream_writer(counter, size=uncompressed_size, closefd=False,
                                    write_size=zstandard.COMPRESSION_RECOMMENDED_OUTPUT_SIZE) as w:
                for chunk in pieces:
                    md5.update(chunk)
                    w.write(chunk)
                    written += memoryview(chunk).nbytes
        else:
            cobj = zlib.compressobj(level)
            for chunk in pieces:
                md5.update(chunk)
                counter.write(cobj.compress(chunk))
                written += memoryview(chunk).nbytes
            counter.write(cobj.flush())
    finally:
        md5.close()
    elapsed = time.perf_counter() - start
    if written != uncompressed_size:
        raise UsageError(f"internal error: bundle is {written} bytes, expected {uncompressed_size}")
    digest = md5.truncated()
    compressed = counter.count
    total = layout.size + compressed
    if version == 2 and total > 0xFFFFFFFF:
        raise UsageError("Total file size exceeds version 2 limit")
    end = out.tell()
    out.seek(base)
    out.write(layout.build(magic=CCOB_MAGIC, version=version, method=_METHOD_IDS[method], total_file_size=total,
                           uncompressed_size=uncompressed_size, hash=digest))
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


# Bundles up to this size are gathered into one buffer that zstd reads in place
# (`libzstd.Compressor.compress_whole`): 20-25% less CPU than streaming (LLVM holds ~3.4x the
# bundle in memory; this holds 1x). Larger ones stream with a bounded window. A constant, not a
# share of the machine's memory, so that a bundle's bytes never depend on the machine.
_IN_PLACE_LIMIT = 2 << 30


def _in_place_buffer(size: int):
    """An anonymous mapping of `size` bytes to compress in place (its pages faulted in at once,
    which costs half of touching them one by one), or None: over `_IN_PLACE_LIMIT`, or where the
    system will not map that much (then the bundle streams)."""
    if size > _IN_PLACE_LIMIT:
        return None
    if size == 0:
        return bytearray()
    flags = mmap.MAP_PRIVATE | getattr(mmap, "MAP_ANONYMOUS", 0x20) | getattr(mmap, "MAP_POPULATE", 0)
    try:
        return mmap.mmap(-1, size, flags=flags)
    except (OSError, ValueError, OverflowError):
        return None


def _compress_in_place(system, buffer, chunks, file_slices, size: int, md5: "_Hasher") -> int:
    """Gather `chunks` into `buffer` (`size` bytes; file slices read straight into it), hand it
    whole to the hasher (its thread hashes while zstd runs), then compress it in place. Returns the
    bytes gathered; the caller checks them against `size`."""
    try:
        view = memoryview(buffer)
        try:
            pos = 0
            for chunk in chunks:
                n = memoryview(chunk).nbytes
                if pos + n > size:
                    return pos + n
                src = file_slices.get(id(chunk))
                with view[pos:pos + n] as part:  # released even when reading fails, so the buffer closes
                    if src is None:
                        part[:] = chunk
                    else:
                        read_slice_into(src[0], src[1], part)
                pos += n
            if pos != size:
                return pos
            md5.update(view)
            if not system.compress_whole(buffer):
                for piece in _pieces([view]):
                    system.write(piece)
                system.finish()
        finally:
            md5.close()
            view.release()
        return pos
    finally:
        if isinstance(buffer, mmap.mmap):
            buffer.close()


# Long-distance matching keeps 2^2 candidates per hash bucket, where zstd's default is 2^3 (1.5.4,
# the release LLVM 19 links on Debian) or 2^4 (1.5.6+). The level and everything else stay LLVM's.
# Measured on 384 MiB: code-like input whose repeats lie far apart (what LDM is for) compresses in
# 1.25 s of CPU instead of 1.61 s for 1.3% more bytes; text-like and real code (LLVM's device
# bitcode, CUDA's and clang's shared libraries) compress in the same time to within 0.1% of the
# size. Bucket sizes are a compressor's choice: the frame is standard and every reader reads it.
_LDM_BUCKET_SIZE_LOG = 2


def _usable_cpus() -> int:
    """CPUs this process may run on (`taskset` and cgroup cpusets included), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


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


# ---------------------------------------------------------------------------------------------
# What `inspect` lists of a compressed bundle (`magic.FORMAT_MODULES`)
# ---------------------------------------------------------------------------------------------

def _inspect(scan, data, path: str, wrappers: list[str], depth: int, compressed: bool) -> None:
    """The container the decompressed payload is (a bundle), listed as compressed; several bundles
    back to back (`split_bundles`) are each listed as `path@offset`."""
    parts = split_bundles(data)
    first = next(parts)
    second = next(parts, None)
    if second is not None:
        for start, part in itertools.chain((first, second), parts):
            if start == 0:  # begins where the whole does, already listed as this container
                with budget.nested(path):
                    _inspect(scan, part, f"{path}@{start:#x}", wrappers, depth, compressed)
            else:
                fmt = FORMATS[0] if is_compressed(part) else _bundle.FORMATS[0]
                scan.scan_container(fmt, part, f"{path}@{start:#x}", wrappers, depth, compressed)
        return
    inner, _info = decompress(first[1])
    inner = memoryview(inner)
    scan.remember(inner)
    inner_container = scan.container_at(inner)
    if inner_container is None:
        raise OffloadError(f"{path}: compressed bundle does not hold a bundle")
    try:
        scan.scan_container(inner_container, inner, path, wrappers + ["ccob"], depth + 1, compressed=True)
    finally:
        scan.forget(inner)


def split_bundles(data) -> Iterator[tuple[int, memoryview]]:
    """The bundles stored one after another in `data`: (offset, bytes) of each binary
    (`__CLANG_OFFLOAD_BUNDLE__`) or compressed (`CCOB`) bundle, in order, zero padding between
    them skipped.

    That is how a linker lays out the `.hip_fatbin` section of a program (one bundle per
    translation unit, each aligned to 4096), and so a file holding such a section's bytes.  Each
    bundle's extent comes from its header (a binary bundle ends where its header and last payload
    end, a CCOB's total size field says where it ends; a version 1 CCOB records none and takes the
    rest), never from a search for the next magic number.  After a bundle only zero bytes and
    further bundles may follow: anything else is a `BundleFormatError` naming its offset.  When
    `data` does not begin with a bundle it is yielded whole, one part (none when it is empty).

    Lazy, and linear in `len(data)`: each bundle is found when the previous one has been taken,
    padding is searched chunk by chunk, nothing is copied; each bundle is charged to the run's
    `entries` budget."""
    view = byte_view(data)
    size = len(view)
    pos = 0
    while pos < size:
        rest = view[pos:]
        if is_compressed(rest):
            what = "compressed bundle"
        elif _bundle.is_binary_bundle(rest):
            what = "bundle"
        elif not pos:
            yield 0, view
            return
        else:
            nonzero = _next_nonzero(view, pos)
            if nonzero is None:
                return  # zero padding to the end
            if nonzero == pos:
                raise BundleFormatError(f"no bundle at offset {pos:#x} after the previous one (only zero padding "
                                        "and bundles may follow a bundle)")
            pos = nonzero
            continue
        budget.charge("entries", 1, f"{what} at offset {pos:#x}")
        try:
            extent = read_header(rest).total_size if what != "bundle" else _binary_bundle_extent(rest)
        except OffloadError as exc:
            if not pos:
                raise
            raise type(exc)(f"{what} at offset {pos:#x}: {exc}") from None
        if extent is None or extent >= len(rest):
            yield pos, rest
            return
        yield pos, rest[:extent]
        pos += extent


def _binary_bundle_extent(view: memoryview) -> int:
    """Bytes taken by the binary bundle at the start of `view`: its header, or up to the end of its
    last payload (its header's offsets and sizes checked against `view`)."""
    index = _bundle.read_binary_bundle_index(view)
    return max([_bundle.binary_bundle_header_size(view)] + [offset + length for _id, offset, length in index])


def _next_nonzero(view: memoryview, pos: int, chunk: int = 1 << 12) -> int | None:
    """The offset of the first non-zero byte at or after `pos`, or None (searched chunk by chunk).

    The first chunk ends at a 4 KiB boundary and the next is 4 KiB, doubling from there: padding
    that aligns the next bundle to a page is searched without reading past that bundle's first
    page (its header; its images are not read for a listing)."""
    size = len(view)
    end = min(size, (pos // 4096 + 1) * 4096)
    while pos < size:
        block = bytes(view[pos:end])
        stripped = block.lstrip(b"\0")
        if stripped:
            return pos + len(block) - len(stripped)
        pos = end
        end = min(size, pos + chunk)
        chunk = min(chunk * 2, 1 << 22)
    return None


FORMATS = (Format(FileKind.COMPRESSED_BUNDLE, magics=(CCOB_MAGIC,), container="ccob", inspect=_inspect),)
