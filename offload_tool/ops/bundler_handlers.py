"""The bundler's file handlers, as LLVM 19's `OffloadBundler.cpp` has them: one class per bundle
format, owning how a bundle of that format is read, in which order its entries are visited, and
how one is bundled and unbundled.  `create_file_handler` (LLVM's `CreateFileHandler`) is the one
place that picks the handler for a `-type` and a file.

* `BinaryFileHandler`: binary bundles (`__CLANG_OFFLOAD_BUNDLE__`): `-type=bc`, `gch`, `ast`, and
  `o` / `a` when the file is not an object file; entries are visited in `StringMap` order.
* `TextFileHandler`: text bundles (`i`, `ii`, `cui`, `hipi`, `d`, `ll`, `s`): entries between
  comment lines.
* `ObjectFileHandler`: `o` / `a` when the file is an object file (`is_object_file`): one
  `__CLANG_OFFLOAD_BUNDLE__<id>` section per entry, edited natively where LLVM runs llvm-objcopy.
* `CompressedBinaryFileHandler`: a compressed bundle (CCOB) holding a binary bundle, read through
  its `Decompression` without decompressing it whole.  LLVM decompresses every compressed input
  first and hands the result to the handler of what it holds; `open_bundle` does that for every
  other compressed input.

Binary and text bundles are written compressed when the configuration says so (`-compress`);
an object bundle never is (LLVM's llvm-objcopy step writes the uncompressed object).  Archives
(`-type=a` unbundling) are no file handler in LLVM either: `hda` reads each member with the
handler `create_file_handler("a", member)` picks."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence

from ..errors import BundleFormatError, CompressionError, ElfError, OffloadError, UsageError
from ..fileio import atomic_output, output_transaction
from ..formats.bundle import (BINARY_TYPES, TEXT_COMMENTS, BundleEntry, binary_bundle_header_size, bundle_chunks,
                              bundle_size, is_binary_bundle, read_binary_bundle, read_binary_bundle_index,
                              read_text_bundle, stringmap_entries, text_bundle_type)
from ..formats.kinds import CCOB_MAGIC, FileKind

TYPE_CHECKING = False
if TYPE_CHECKING:  # ccob (hashlib, zlib) is imported only when a bundle is compressed
    from ..formats.ccob import CompressionInfo, Decompression

__all__ = ["FILE_TYPES", "WHOLE_INPUT", "FileHandler", "BinaryFileHandler", "TextFileHandler", "ObjectFileHandler",
           "CompressedBinaryFileHandler", "check_type", "is_object_file", "create_file_handler", "open_bundle",
           "decompression_errors"]

FILE_TYPES = ("i", "ii", "cui", "hipi", "d", "ll", "bc", "s", "o", "a", "gch", "ast")

#: What an output receives when no entry matched and it is the host's: the whole input.
WHOLE_INPUT = BundleEntry("", b"")


def check_type(files_type: str) -> None:
    """A `-type` the bundler knows, or LLVM's error."""
    if files_type not in FILE_TYPES:
        raise UsageError(f"'{files_type}': invalid file type specified")


# The smallest header `createBinary` accepts per object kind (ELF is checked by parsing it).
_MIN_OBJECT_SIZE = {FileKind.COFF: 20, FileKind.MACHO: 28, FileKind.WASM: 8, FileKind.XCOFF: 20}


def identify(buf) -> FileKind:
    """`magic.identify`, imported on first use: `magic` imports every format module, which a
    `-type=bc` run (never asking) should not pay for at start-up."""
    from ..formats.magic import identify as _identify

    return _identify(buf)


def is_object_file(buf) -> bool:
    """Whether LLVM 19's bundler would pick the object handler for `buf` (`createBinary` gives an
    `ObjectFile`): a well-formed ELF file of any type, or a COFF / Mach-O / Wasm / XCOFF object by
    magic and minimum header size.  Bitcode, archives and everything else are not: LLVM then uses
    the binary bundle format (how `.hip_fatbin` contents, bundled with `-input=/dev/null`, are made)."""
    kind = identify(buf)
    if kind is FileKind.ELF:
        from ..formats import elf

        try:
            elf.read_sections(buf)
        except ElfError:
            return False
        return True
    return kind in _MIN_OBJECT_SIZE and len(buf) >= _MIN_OBJECT_SIZE[kind]


def create_file_handler(files_type: str | None, content) -> "FileHandler":
    """LLVM's `CreateFileHandler`: the handler for files of `-type` `files_type` whose host input
    (bundling) or bundle (reading) is `content`.  The text types get the text handler, `bc` / `gch`
    / `ast` the binary one, and `o` / `a` the object handler if `content` is an object file, else
    the binary one (how `.hip_fatbin` contents come out as binary bundles).

    With `files_type=None` (`read_bundle` of a file whose type is not given) `content` alone
    decides: a binary bundle, else an object file, else the text type of its first marker;
    anything else is a `BundleFormatError`."""
    if files_type is None:
        if is_binary_bundle(content):
            return BinaryFileHandler()
        if is_object_file(content):
            return ObjectFileHandler()
        files_type = text_bundle_type(content)
        if files_type is None:
            raise BundleFormatError("not a clang offload bundle (no bundle magic, object or text markers)")
        return TextFileHandler(files_type)
    check_type(files_type)
    if files_type in TEXT_COMMENTS:
        return TextFileHandler(files_type)
    if files_type in BINARY_TYPES or not is_object_file(content):
        return BinaryFileHandler()
    return ObjectFileHandler()


# --- compressed inputs -------------------------------------------------------------------------------

_DECOMPRESS_INPUT = "Failed to decompress input: "


@contextlib.contextmanager
def decompression_errors(prefix: str = _DECOMPRESS_INPUT):
    """LLVM's wording: a decompression failure is reported with `prefix` before the reason."""
    try:
        yield
    except CompressionError as exc:
        raise CompressionError(prefix + str(exc)) from None


def _open_compressed(buf, cfg, what: str) -> "Decompression | None":
    """A `ccob.Decompression` of `buf` if it is a CCOB, else None (said in verbose mode, as LLVM).
    The magic is checked here (`ccob.is_compressed`'s test): ccob, with hashlib and zlib, is
    imported only for a compressed input."""
    if bytes(buf[:len(CCOB_MAGIC)]) != CCOB_MAGIC:
        if cfg.verbose and len(buf) >= 20:
            cfg.log("Uncompressed bundle.\n")
        return None
    from ..formats.ccob import Decompression

    with decompression_errors():
        return Decompression(buf, verbose=cfg.verbose, log=cfg.log, what=f"compressed bundle '{what}'")


_HEAD_START = 4096


def _compressed_binary_head(dec: "Decompression") -> bytes | None:
    """The decompressed header of the binary bundle inside `dec` (no payload bytes beyond the first
    few KiB are decompressed), or None if it holds no binary bundle."""
    total = dec.info.uncompressed_size
    with decompression_errors():
        head = dec.prefix(min(total, _HEAD_START))
        if not is_binary_bundle(head):
            return None
        while True:
            need = binary_bundle_header_size(head)
            if need <= len(head) or len(head) >= total:
                return head
            head = dec.prefix(min(total, max(need, 2 * len(head))))


def open_bundle(files_type: str | None, buf, cfg, what: str = "input", *, stream: bool = False
                ) -> "tuple[FileHandler, object, CompressionInfo | None]":
    """The handler that reads the bundle input `buf` (`cfg`: the run's `BundlerConfig`), what it
    reads, and the input's compression (None if it is not compressed).

    As in LLVM, a compressed input is decompressed whole (its hash checked) and read by the handler
    of what it holds.  With `stream`, one holding a binary bundle is read through its
    `Decompression` instead (`CompressedBinaryFileHandler`): its header first, its payload only
    when unbundling, piece by piece."""
    dec = _open_compressed(buf, cfg, what)
    if dec is None:
        return create_file_handler(files_type, buf), buf, None
    if stream:
        head = _compressed_binary_head(dec)
        if head is not None:
            handler = create_file_handler(files_type, head).streaming_handler(head)
            if handler is not None:
                return handler, dec, dec.info
    with decompression_errors():
        data = memoryview(dec.read_all())
    return create_file_handler(files_type, data), data, dec.info


# --- writing -----------------------------------------------------------------------------------------

_COPY_CHUNK = 64 << 20
#: Bytes spliced per call, and the size asked of the pipe they pass through (Linux's unprivileged
#: maximum, `/proc/sys/fs/pipe-max-size`).
_PIPE_BYTES = 1 << 20
_F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ (Linux), named here so fcntl need not be imported for it
#: Outputs smaller than this together are copied one after another: threads would cost more.
_PARALLEL_BYTES = 16 << 20


def _output_error(out, exc: OSError) -> OffloadError:
    name = getattr(getattr(out, "raw", None), "output_name", "")
    return OffloadError(f"'{name}': {exc.strerror or exc}" if name else str(exc.strerror or exc))


def _write_all(dst_fd: int, data, out) -> None:
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(dst_fd, view):]
    except OSError as exc:
        raise _output_error(out, exc) from None


def _splice(src_fd: int, dst_fd: int, out, pos: int, remaining: int, stop) -> tuple[int, int]:
    """Copy by `splice` through a pipe of `_PIPE_BYTES`: the input's page-cache pages enter the pipe
    by reference and are copied once, into the output.  `copy_file_range` does the same inside the
    kernel through a 16-page pipe, and costs ~1.6x the CPU (3 x 128 MiB on ext4: 0.31 s against
    0.19 s of system time): the larger pipe lets the output take each 1 MiB in one write.

    Returns (pos, remaining) where it stopped: at the end, when `stop` is set, or where the input
    or the output refuses splicing (the caller copies the rest another way)."""
    try:
        r, w = os.pipe2(os.O_CLOEXEC)
    except (AttributeError, OSError):
        return pos, remaining
    try:
        try:
            import fcntl

            fcntl.fcntl(w, _F_SETPIPE_SZ, _PIPE_BYTES)
        except OSError:
            pass  # a smaller pipe still works, in more calls
        while remaining and not (stop is not None and stop.is_set()):
            try:
                n = os.splice(src_fd, w, min(remaining, _PIPE_BYTES), offset_src=pos)
            except OSError:
                return pos, remaining  # the input cannot be spliced
            if n == 0:
                return pos, remaining  # the input ended early: the caller says so
            pos += n
            remaining -= n
            left = n
            while left:
                try:
                    left -= os.splice(r, dst_fd, left)
                except OSError:
                    # The output takes no splice (a terminal, /dev/full) or failed: what the pipe
                    # holds is written plainly (an error then names the output), the rest likewise.
                    held = bytearray()
                    while len(held) < left:
                        piece = os.read(r, left - len(held))
                        if not piece:
                            break
                        held += piece
                    _write_all(dst_fd, held, out)
                    return pos, remaining
        return pos, remaining
    finally:
        os.close(r)
        os.close(w)


def _copy_range(src_fd: int, out, offset: int, size: int, stop=None) -> None:
    """Append `size` bytes at `offset` of `src_fd` to the file object `out`, in the kernel when
    possible (no pages of the input mapped into this process: a bundle is "close to a plain file
    copy"): spliced (`_splice`), else by `copy_file_range`, else read and written.  `stop` (a
    `threading.Event`) ends the copy early when set: another output of the run has failed."""
    out.flush()
    dst_fd = out.fileno()
    pos, remaining = _splice(src_fd, dst_fd, out, offset, size, stop)
    use_kernel = hasattr(os, "copy_file_range")
    while remaining and not (stop is not None and stop.is_set()):
        n = 0
        if use_kernel:
            try:
                n = os.copy_file_range(src_fd, dst_fd, min(remaining, 1 << 30), pos)
            except OSError:
                use_kernel = False
                continue
        else:
            chunk = os.pread(src_fd, min(remaining, _COPY_CHUNK), pos)
            n = len(chunk)
            _write_all(dst_fd, chunk, out)
        if n == 0:
            raise BundleFormatError(f"input ended {remaining} bytes early while copying offset {pos}")
        pos += n
        remaining -= n
    try:
        out.seek(0, os.SEEK_END)
    except (OSError, ValueError):
        pass


def _copy_ranges(src_fd: int, jobs: list[tuple[object, int, int]]) -> None:
    """Each job (out, offset, size) copied from `src_fd` as `_copy_range` does.  Several outputs
    of some size are copied side by side, one thread each, when more than one CPU is usable: the
    copies run in the kernel with the GIL released, so a second core halves the wall time (the
    copy is most of an unbundling's time).  An error in any copy stops the others and is raised
    once every thread has ended, so the caller's transaction discards outputs no thread writes."""
    if (len(jobs) < 2 or sum(size for _, _, size in jobs) < _PARALLEL_BYTES or not _cpus_beyond_one()
            or not _separate_files(jobs)):
        for out, offset, size in jobs:
            _copy_range(src_fd, out, offset, size)
        return
    import threading

    stop = threading.Event()
    errors: list[BaseException] = []
    pending = list(reversed(jobs))

    def work() -> None:
        try:
            while pending and not stop.is_set():
                try:
                    out, offset, size = pending.pop()
                except IndexError:  # another thread took the last one
                    return
                _copy_range(src_fd, out, offset, size, stop)
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=work, name="offload-copy", daemon=True) for _ in range(min(len(jobs), 8) - 1)]
    try:
        for t in threads:
            t.start()
        work()
        for t in threads:
            t.join()
    finally:
        # However this ends (a signal may interrupt a join), no thread outlives it: each stops
        # within one piece once `stop` is set, before the transaction closes its output.
        stop.set()
        for t in threads:
            if t.ident is not None:
                t.join()
    if errors:
        raise errors[0]


def _separate_files(jobs) -> bool:
    """Whether every output is a regular file of its own: two outputs into one FIFO, device or
    standard output (`-output=- -output=-`) must get their bytes one after the other."""
    import stat

    seen = set()
    for out, _, _ in jobs:
        try:
            st = os.fstat(out.fileno())
        except (AttributeError, OSError, ValueError):
            return False
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) in seen:
            return False
        seen.add((st.st_dev, st.st_ino))
    return True


def _cpus_beyond_one() -> bool:
    try:
        return len(os.sched_getaffinity(0)) > 1
    except (AttributeError, OSError):
        return (os.cpu_count() or 1) > 1


def _stream(out, chunks, file_slices: dict[int, tuple[int, int]]) -> None:
    """Write `chunks`; a chunk listed in `file_slices` (by id) is copied from (fd, offset) instead."""
    for chunk in chunks:
        src = file_slices.get(id(chunk))
        if src is not None:
            _copy_range(src[0], out, src[1], memoryview(chunk).nbytes)
        elif memoryview(chunk).nbytes:
            out.write(chunk)


def _is_host_entry(entry) -> bool:
    from ..rules.bundle_id import parse_bundle_entry_id

    return entry is not None and entry is not WHOLE_INPUT and parse_bundle_entry_id(entry.bundle_entry_id).is_host


# --- the handlers ------------------------------------------------------------------------------------


class FileHandler:
    """One bundle format (LLVM's `FileHandler`): reading, the order entries are visited in,
    bundling and unbundling."""

    #: What `Bundle.kind` says of a bundle this handler reads.
    kind = ""

    def read(self, data) -> list[BundleEntry]:
        """The entries of the bundle `data`, in file order (duplicates kept)."""
        raise NotImplementedError

    def ids(self, data) -> list[str]:
        """The entry IDs of the bundle `data` in file order (`-check-input-archive`)."""
        return [e.bundle_entry_id for e in self.read(data)]

    def order(self, entries: list[BundleEntry]) -> list[BundleEntry]:
        """`entries` in the order LLVM's handler visits them (`-list`, unbundling): file order."""
        return entries

    def streaming_handler(self, head: bytes) -> "FileHandler | None":
        """The handler that reads a compressed input whose decompressed bundle begins with `head`
        without decompressing it whole, or None (the default): it is decompressed first."""
        return None

    def bundle(self, output, ids: Sequence[str], sources: Sequence, host_index: int, cfg, bundle_align: int) -> None:
        """Write to `output`, atomically, the bundle whose entry `ids[n]` holds the opened input
        `sources[n]` (an `inputs.Input`); `host_index` is the host's entry, `cfg` the run's
        `BundlerConfig`."""
        raise NotImplementedError

    def dry_run_bundle(self, dry_run, ids: Sequence[str], inputs: Sequence[str], host_index: int,
                       output: str) -> None:
        """`-###` when bundling: print the external commands LLVM would run (none but for objects)."""

    def dry_run_unbundle(self, dry_run, input: str, contents: dict) -> None:
        """`-###` when unbundling into `contents` (as `unbundle` takes it): likewise."""

    def payload_offsets(self, entries: list[BundleEntry]) -> dict[int, int]:
        """Offset in the bundle of each payload (by its entry's id) the kernel may copy straight
        from the input file."""
        return {id(e): e.offset for e in entries if isinstance(e.data, memoryview)}

    def unbundle(self, data, entries: list[BundleEntry], contents: dict, source_fd: int | None) -> None:
        """Write the outputs: `contents` maps each output path to the entry it receives (None: an
        empty file; `WHOLE_INPUT`: the whole of `data`).  All outputs appear together or none does.
        `source_fd` is the input file when `data` is its bytes as stored: payloads are then copied by
        the kernel from their offsets."""
        offsets = self.payload_offsets(entries)
        with output_transaction() as txn:
            files = [(txn.open(path), entry) for path, entry in contents.items()]
            copies = []
            for f, entry in files:
                if entry is None:
                    continue
                payload, offset = (data, 0) if entry is WHOLE_INPUT else (entry.data, offsets.get(id(entry)))
                size = memoryview(payload).nbytes
                if not size:
                    continue
                if source_fd is not None and offset is not None:
                    copies.append((f, offset, size))
                else:
                    f.write(payload)
            _copy_ranges(source_fd, copies)


class _SerializedFileHandler(FileHandler):
    """Binary and text bundles: headers and payloads one after another.  Bundling computes the
    headers from the inputs' sizes only; payloads are copied file to file by the kernel, or read
    piecewise into the compressor (never mapped whole)."""

    def chunks(self, entries: Sequence[BundleEntry], bundle_align: int):
        """The serialized bundle as bytes-like chunks, payloads among them as given."""
        raise NotImplementedError

    def size(self, entries: Sequence[BundleEntry], bundle_align: int) -> int:
        """The size of the serialized (uncompressed) bundle."""
        raise NotImplementedError

    def bundle(self, output, ids, sources, host_index, cfg, bundle_align) -> None:
        entries = [BundleEntry(i, s.view) for i, s in zip(ids, sources)]
        slices = {}
        for source, e in zip(sources, entries):
            if source.fd is not None and os.fstat(source.fd).st_size == memoryview(e.data).nbytes:
                slices[id(e.data)] = (source.fd, 0)
        with atomic_output(output) as out:
            if cfg.compress:
                from ..formats.ccob import compress_chunks

                compress_chunks(self.chunks(entries, bundle_align), self.size(entries, bundle_align), out,
                                method=cfg.compression_method, level=cfg.compression_level,
                                version=cfg.format_version, verbose=cfg.verbose, log=cfg.log, file_slices=slices)
            else:
                _stream(out, self.chunks(entries, bundle_align), slices)


# StringMap iteration order depends only on the sequence of keys: archives repeat the same few.
_ORDER_CACHE: dict[tuple[str, ...], list[int]] = {}


class BinaryFileHandler(_SerializedFileHandler):
    """Binary bundles: `__CLANG_OFFLOAD_BUNDLE__`, the entry count, each entry's offset, size and
    ID, then the payloads (`formats.bundle`)."""

    kind = "binary"

    def read(self, data) -> list[BundleEntry]:
        return read_binary_bundle(data)

    def order(self, entries: list[BundleEntry]) -> list[BundleEntry]:
        """StringMap order, a duplicated ID visited once with its last payload (`stringmap_entries`)."""
        key = tuple(e.bundle_entry_id for e in entries)
        order = _ORDER_CACHE.get(key)
        if order is None:
            probes = [BundleEntry(i, b"", n) for n, i in enumerate(key)]
            order = [p.offset for p in stringmap_entries(probes)]
            if len(_ORDER_CACHE) < 1024:
                _ORDER_CACHE[key] = order
        return [entries[n] for n in order]

    def streaming_handler(self, head: bytes) -> "FileHandler":
        return CompressedBinaryFileHandler(head)

    def chunks(self, entries, bundle_align):
        return bundle_chunks(entries, "bc", bundle_align)

    def size(self, entries, bundle_align) -> int:
        return bundle_size(entries, "bc", bundle_align)


class TextFileHandler(_SerializedFileHandler):
    """Text bundles: each entry between a START and an END line commented as the `-type`'s
    language comments (`formats.bundle`)."""

    kind = "text"

    def __init__(self, files_type: str) -> None:
        self.files_type = files_type

    def read(self, data) -> list[BundleEntry]:
        return read_text_bundle(data, self.files_type)

    def chunks(self, entries, bundle_align):
        return bundle_chunks(entries, self.files_type, bundle_align)

    def size(self, entries, bundle_align) -> int:
        return bundle_size(entries, self.files_type, bundle_align)


class ObjectFileHandler(FileHandler):
    """Object files: one `__CLANG_OFFLOAD_BUNDLE__<id>` section per entry, the host's holding one
    0x00 byte (`formats.objbundle`).  Its payloads are never copied from the input by offset: the
    host entry is the object re-written without its bundle sections."""

    kind = "object"

    def read(self, data) -> list[BundleEntry]:
        from ..formats.objbundle import read_object_bundle

        return read_object_bundle(data)

    def ids(self, data) -> list[str]:
        """The IDs of the bundle sections, the host entry not stripped (nothing is extracted)."""
        from ..formats.objbundle import object_bundle_ids

        return object_bundle_ids(data)

    def bundle(self, output, ids, sources, host_index, cfg, bundle_align) -> None:
        """The host object with one section per entry; LLVM compresses nothing here (llvm-objcopy
        overwrites the compressed buffer)."""
        from ..formats.objbundle import write_object_bundle

        entries = [(i, b"\0" if i.startswith("host-") else s.view) for i, s in zip(ids, sources)]
        with atomic_output(output) as out:
            write_object_bundle(sources[host_index].view, entries, out)

    def dry_run_bundle(self, dry_run, ids, inputs, host_index, output) -> None:
        dry_run.add_sections(ids, inputs, host_index, output)

    def dry_run_unbundle(self, dry_run, input, contents) -> None:
        if any(_is_host_entry(e) for e in contents.values()):
            dry_run.remove_sections(input)

    def payload_offsets(self, entries) -> dict[int, int]:
        return {}


class CompressedBinaryFileHandler(BinaryFileHandler):
    """A compressed bundle (CCOB) holding a binary bundle, read through its `Decompression` (the
    `data` its methods take) without decompressing it whole: the entry IDs come from the
    decompressed header `head` (all `-list` needs); unbundling decompresses the payload piece by
    piece (hashed alongside) and writes each piece's bytes straight to the outputs whose ranges it
    covers.  No full-size buffer; the MD5 is checked after the last piece, before any output is
    renamed into place."""

    def __init__(self, head: bytes) -> None:
        self.head = head
        self.sizes: dict[int, int] = {}

    def read(self, data: "Decompression") -> list[BundleEntry]:
        """The entries, payloads not read: each `offset` is where its payload starts in the
        decompressed bundle."""
        index = read_binary_bundle_index(self.head, data.info.uncompressed_size)
        entries = [BundleEntry(i, b"", offset) for i, offset, _ in index]
        self.sizes = {id(e): size for e, (_, _, size) in zip(entries, index)}
        return entries

    def unbundle(self, data: "Decompression", entries, contents, source_fd) -> None:
        total = data.info.uncompressed_size
        with output_transaction() as txn:
            ranges = []
            for path, entry in contents.items():
                f = txn.open(path)
                if entry is WHOLE_INPUT:
                    ranges.append((f, 0, total))
                elif entry is not None and self.sizes[id(entry)]:
                    ranges.append((f, entry.offset, entry.offset + self.sizes[id(entry)]))
            pos = 0
            with decompression_errors():
                for piece in data.chunks():
                    end = pos + len(piece)
                    view = memoryview(piece)
                    for f, start, stop in ranges:
                        if start < end and stop > pos:
                            f.write(view[max(start, pos) - pos:min(stop, end) - pos])
                    pos = end
