"""High-level clang offload bundler operations, in-process: bundle, unbundle, list, read.

These are `OffloadBundler::BundleFiles / UnbundleFiles / ListBundleIDsInFile` of LLVM 19
with the same outputs, order rules and messages, plus the checks LLVM
lacks (damaged inputs are errors, outputs appear atomically and only when the whole run succeeds).
Inputs are memory-mapped and only the headers are read through the map: uncompressed payloads are
copied file to file by the kernel (`copy_file_range`), so bundling or unbundling gigabytes needs
no more memory than a small file (what a plain file copy costs)."""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from .. import budget
from ..formats.bundle import (BundleEntry, bundle_chunks, bundle_size, read_binary_bundle, read_text_bundle,
                     stringmap_entries)
from ..errors import BundleError, BundleFormatError, CompressionError, OffloadError, UsageError
from ..fileio import atomic_output, open_input, open_input_file, output_transaction
from ..formats.magic import FileKind, bundle_handler, identify, is_object_file, text_bundle_type

if TYPE_CHECKING:  # ccob (hashlib, zlib) is imported only when a bundle is compressed
    from ..formats.ccob import CompressionInfo

__all__ = ["Bundle", "BundlerConfig", "bundle", "unbundle", "list_bundle_ids", "read_bundle",
           "bundler_config", "plan_unbundle"]

FILE_TYPES = ("i", "ii", "cui", "hipi", "d", "ll", "bc", "s", "o", "a", "gch", "ast")


@dataclass
class Bundle:
    """A bundle read into plain data. `entries` are in file order; payloads are slices of the input."""

    kind: str  # "binary" | "text" | "object"
    entries: list[BundleEntry] = field(default_factory=list)
    compression: "CompressionInfo | None" = None

    @property
    def ids(self) -> list[str]:
        return [e.bundle_entry_id for e in self.entries]

    def get(self, bundle_entry_id: str) -> BundleEntry | None:
        """The entry LLVM would use for an ID (the last one, for duplicates)."""
        found = None
        for e in self.entries:
            if e.bundle_entry_id == bundle_entry_id:
                found = e
        return found


@dataclass
class BundlerConfig:
    """`OffloadBundlerConfig`: the settings the environment can change."""

    verbose: bool = False
    compress: bool = False
    compression_level: int | None = None
    compression_method: str = "zstd"
    format_version: int = 2
    log: Callable[[str], None] = field(default=lambda s: sys.stderr.write(s))


def bundler_config(*, verbose: bool | None = None, compress: bool | str | None = None,
                   compression_level: int | None = None, env: Mapping[str, str] = os.environ,
                   log: Callable[[str], None] | None = None) -> BundlerConfig:
    """Settings as LLVM computes them: environment first (unless `OFFLOAD_BUNDLER_IGNORE_ENV_VAR=1`),
    then explicit arguments (the CLI's `-verbose`, `-compress`, `-compression-level`) override."""
    cfg = BundlerConfig()
    if log is not None:
        cfg.log = log
    if env.get("OFFLOAD_BUNDLER_IGNORE_ENV_VAR") != "1":
        if "OFFLOAD_BUNDLER_VERBOSE" in env:
            cfg.verbose = env["OFFLOAD_BUNDLER_VERBOSE"] == "1"
        if "OFFLOAD_BUNDLER_COMPRESS" in env:
            cfg.compress = env["OFFLOAD_BUNDLER_COMPRESS"] == "1"
        raw = env.get("OFFLOAD_BUNDLER_COMPRESSION_LEVEL")
        if raw is not None:
            level = _llvm_int(raw)
            if level is None:
                cfg.log(f"Warning: Invalid value for OFFLOAD_BUNDLER_COMPRESSION_LEVEL: {raw}. Ignoring it.\n")
            else:
                cfg.compression_level = level
        from ..formats.ccob import env_format_version

        cfg.format_version = env_format_version(env, cfg.log)
    if verbose is not None:
        cfg.verbose = bool(verbose)
    if compress is not None:
        if isinstance(compress, str):
            if compress not in ("zstd", "zlib"):
                raise UsageError(f"unknown compression method '{compress}' (zstd or zlib)")
            cfg.compress, cfg.compression_method = True, compress
        else:
            cfg.compress = bool(compress)
    if compression_level is not None:
        cfg.compression_level = int(compression_level)
    cfg.compression_level = _compression_level(cfg.compression_method, cfg.compression_level)
    return cfg


# libzstd's level range (ZSTD_minCLevel() .. ZSTD_maxCLevel()); zlib's is -1 (default) .. 9.
_ZSTD_LEVELS = (-(1 << 17), 22)
_ZLIB_LEVELS = (-1, 9)


def _compression_level(method: str, level: int | None) -> int | None:
    """The level as the compressor will use it. LLVM passes any `int` to libzstd, which clamps it
    into its range, so zstd levels are clamped the same way; zlib rejects a level outside -1..9
    (LLVM 19 then asserts or fails with no message), so that is an error naming the range."""
    if level is None:
        return None
    if not -(1 << 31) <= level < (1 << 31):
        raise UsageError(f"compression level {level} is not a 32-bit integer")
    if method == "zstd":
        return min(max(level, _ZSTD_LEVELS[0]), _ZSTD_LEVELS[1])
    if not _ZLIB_LEVELS[0] <= level <= _ZLIB_LEVELS[1]:
        raise UsageError(f"invalid compression level {level} for zlib (expected {_ZLIB_LEVELS[0]} to "
                         f"{_ZLIB_LEVELS[1]})")
    return level


def _llvm_int(text: str) -> int | None:
    """`StringRef::getAsInteger(10, int)`: optional '-', decimal digits only, fits in int."""
    body = text[1:] if text.startswith("-") else text
    if not body or not body.isascii() or not body.isdigit():
        return None
    value = int(text)
    return value if -(1 << 31) <= value < (1 << 31) else None


def _check_type(files_type: str) -> None:
    if files_type not in FILE_TYPES:
        raise UsageError(f"'{files_type}': invalid file type specified")


def _handler_kind(files_type: str, reference) -> str:
    """`magic.bundle_handler` for a checked `-type`."""
    _check_type(files_type)
    return bundle_handler(files_type, reference)


_DECOMPRESS_INPUT = "Failed to decompress input: "


@contextlib.contextmanager
def _decompression_errors(prefix: str = _DECOMPRESS_INPUT):
    """LLVM's wording: a decompression failure is reported with `prefix` before the reason."""
    try:
        yield
    except CompressionError as exc:
        raise CompressionError(prefix + str(exc)) from None


def _open_compressed(buf, cfg: BundlerConfig, what: str):
    """A `ccob.Decompression` of `buf` if it is a CCOB, else None (said in verbose mode, as LLVM)."""
    from ..formats.ccob import Decompression, is_compressed

    if not is_compressed(buf):
        if cfg.verbose and len(buf) >= 20:
            cfg.log("Uncompressed bundle.\n")
        return None
    with _decompression_errors():
        return Decompression(buf, verbose=cfg.verbose, log=cfg.log, what=f"compressed bundle '{what}'")


def _maybe_decompress(buf, cfg: BundlerConfig, what: str = "input"):
    """The input as the handlers see it: decompressed whole if it is a CCOB (hash always checked)."""
    dec = _open_compressed(buf, cfg, what)
    if dec is None:
        return buf, None
    with _decompression_errors():
        return memoryview(dec.read_all()), dec.info


_HEAD_START = 4096


def _compressed_binary_head(dec) -> bytes | None:
    """The decompressed header of the binary bundle inside `dec` (no payload bytes beyond the first
    few KiB are decompressed), or None if it holds no binary bundle."""
    from ..formats.bundle import binary_bundle_header_size

    total = dec.info.uncompressed_size
    with _decompression_errors():
        head = dec.prefix(min(total, _HEAD_START))
        if identify(head) is not FileKind.CLANG_BUNDLE:
            return None
        while True:
            need = binary_bundle_header_size(head)
            if need <= len(head) or len(head) >= total:
                return head
            head = dec.prefix(min(total, max(need, 2 * len(head))))


def _read_entries(kind: str, buf, files_type: str) -> list[BundleEntry]:
    if kind == "text":
        return read_text_bundle(buf, files_type)
    if kind == "binary":
        return read_binary_bundle(buf)
    from ..formats.objbundle import read_object_bundle

    return read_object_bundle(buf)


def _handler_order(kind: str, entries: list[BundleEntry]) -> list[BundleEntry]:
    """Entries in the order LLVM 19's handler yields them (binary: StringMap order, last duplicate wins)."""
    return stringmap_entries(entries) if kind == "binary" else entries


# --- writing ----------------------------------------------------------------------------------------

_COPY_CHUNK = 64 << 20


def _copy_file_range(src_fd: int, out, offset: int, size: int) -> None:
    """Append `size` bytes at `offset` of `src_fd` to the file object `out`, in the kernel when possible
    (no pages of the input mapped into this process: a bundle is "close to a plain file copy")."""
    out.flush()
    dst_fd = out.fileno()
    remaining, pos = size, offset
    use_kernel = hasattr(os, "copy_file_range")
    while remaining:
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
            view = memoryview(chunk)
            try:
                while view:
                    view = view[os.write(dst_fd, view):]
            except OSError as exc:
                name = getattr(getattr(out, "raw", None), "output_name", "")
                raise OffloadError(f"'{name}': {exc.strerror or exc}" if name else str(exc.strerror or exc)) from None
        if n == 0:
            raise BundleFormatError(f"input ended {remaining} bytes early while copying offset {pos}")
        pos += n
        remaining -= n
    try:
        out.seek(0, os.SEEK_END)
    except (OSError, ValueError):
        pass


def _stream(out, chunks, file_slices: dict[int, tuple[int, int]]) -> None:
    """Write `chunks`; a chunk listed in `file_slices` (by id) is copied from (fd, offset) instead."""
    for chunk in chunks:
        src = file_slices.get(id(chunk))
        if src is not None:
            _copy_file_range(src[0], out, src[1], memoryview(chunk).nbytes)
        elif memoryview(chunk).nbytes:
            out.write(chunk)


def _write(output, kind: str, files_type: str, entries: Sequence[BundleEntry], cfg: BundlerConfig,
           bundle_align: int, host_object=None, file_slices: dict[int, tuple[int, int]] | None = None) -> None:
    """Write a bundle atomically. `file_slices` maps payloads (by id) to (fd, offset) for kernel copies."""
    with atomic_output(output) as out:
        if kind == "object":
            # LLVM compresses nothing here (objcopy overwrites the compressed buffer).
            from ..formats.objbundle import write_object_bundle

            write_object_bundle(host_object, [(e.bundle_entry_id, e.data) for e in entries], out)
        elif cfg.compress:
            from ..formats.ccob import compress_chunks

            compress_chunks(bundle_chunks(entries, files_type, bundle_align),
                            bundle_size(entries, files_type, bundle_align), out,
                            method=cfg.compression_method, level=cfg.compression_level,
                            version=cfg.format_version, verbose=cfg.verbose, log=cfg.log, file_slices=file_slices)
        else:
            _stream(out, bundle_chunks(entries, files_type, bundle_align), file_slices or {})


@budget.metered
def bundle(files_type: str, targets: list[str], inputs: list[str], output: str, *, bundle_align: int = 1,
           compress: bool | str | None = None, compression_level: int | None = None,
           hip_openmp_compatible: bool = False, verbose: bool | None = None,
           env: Mapping[str, str] = os.environ, dry_run=None) -> None:
    """`clang-offload-bundler -type=T -targets=... -input=... -output=O` (bundling), byte-identical to
    LLVM 19 for uncompressed binary and text bundles. `compress` may also name the method ("zstd",
    "zlib"). `hip_openmp_compatible` only matters when unbundling (accepted for symmetry with the CLI).
    With `dry_run` (an `ops.dry_run.DryRun`, the CLI's `-###`) nothing is written; for objects the
    objcopy command LLVM would run is printed. Raises an `OffloadError` subclass."""
    from ..rules.bundle_id import validate_bundler_targets

    if files_type == "a":
        raise UsageError("Archive files are only supported for unbundling")
    if len(inputs) != len(targets):
        raise UsageError("number of input files and targets should match in bundling mode")
    if bundle_align < 1:
        raise UsageError(f"invalid -bundle-align value {bundle_align}: must be at least 1")
    ids = [str(i) for i in validate_bundler_targets(list(targets), bundling=True)]
    host_index = next((n for n, i in enumerate(ids) if i.startswith("host-")), 0)
    cfg = bundler_config(verbose=verbose, compress=compress, compression_level=compression_level, env=env)
    with contextlib.ExitStack() as stack:
        # Each input opened once (a FIFO cannot be opened twice); its descriptor serves kernel copies.
        sources = [stack.enter_context(open_input_file(p)) for p in inputs]
        buffers = [s.view for s in sources]
        kind = _handler_kind(files_type, buffers[host_index] if buffers else b"")
        if dry_run is not None:
            if kind == "object":
                dry_run.add_sections(ids, [os.fspath(p) for p in inputs], host_index, os.fspath(output))
            return
        if kind == "object":
            entries = [BundleEntry(i, b"\0" if i.startswith("host-") else buf) for i, buf in zip(ids, buffers)]
            _write(output, kind, files_type, entries, cfg, bundle_align, host_object=buffers[host_index])
        else:
            entries = [BundleEntry(i, buf) for i, buf in zip(ids, buffers)]
            # Headers from sizes only; payloads copied file to file by the kernel, or read piecewise
            # into the compressor (never mapped whole).
            slices = {}
            for source, e in zip(sources, entries):
                if source.fd is not None and os.fstat(source.fd).st_size == memoryview(e.data).nbytes:
                    slices[id(e.data)] = (source.fd, 0)
            _write(output, kind, "bc" if kind == "binary" else files_type, entries, cfg, bundle_align,
                   file_slices=slices)
        del entries
        buffers.clear()
        sources.clear()


# --- reading ----------------------------------------------------------------------------------------


def _read_any(buf, files_type: str | None, cfg: BundlerConfig, what: str = "input") -> Bundle:
    data, info = _maybe_decompress(buf, cfg, what)
    if files_type is None:
        if identify(data) is FileKind.CLANG_BUNDLE:
            kind, ftype = "binary", "bc"
        else:
            if is_object_file(data):
                kind, ftype = "object", "o"
            else:
                ftype = text_bundle_type(data)
                if ftype is None:
                    raise BundleFormatError("not a clang offload bundle (no bundle magic, object or text markers)")
                kind = "text"
    else:
        ftype = files_type
        kind = _handler_kind(files_type, data)
    return Bundle(kind, _read_entries(kind, data, ftype), info)


@budget.metered
def read_bundle(source: str | os.PathLike | bytes | bytearray | memoryview, files_type: str | None = None, *,
                verbose: bool | None = False, env: Mapping[str, str] = os.environ) -> Bundle:
    """Read a bundle (binary, text or object; compressed or not) from a path or a buffer.

    With `files_type=None` the kind is detected from the content. Payloads are slices of the
    memory-mapped file (or of the decompressed data), valid as long as the entries are referenced."""
    cfg = bundler_config(verbose=verbose, env=env)
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _read_any(source, files_type, cfg)
    with open_input(source) as buf:
        return _read_any(buf, files_type, cfg, os.fspath(source))


@budget.metered
def list_bundle_ids(files_type: str, input: str | os.PathLike, *, llvm_order: bool = False,
                    verbose: bool | None = None, env: Mapping[str, str] = os.environ) -> list[str]:
    """The bundle entry IDs of a bundle: file order, or with `llvm_order=True` the order LLVM 19's
    `-list` prints (StringMap order for binary bundles, duplicates once)."""
    cfg = bundler_config(verbose=verbose, env=env)
    _check_type(files_type)
    with open_input(input) as buf:
        dec = _open_compressed(buf, cfg, os.fspath(input))
        # Verbose runs decompress it all: they report the hash check, as LLVM does.
        head = _compressed_binary_head(dec) if dec is not None and not cfg.verbose else None
        if head is not None and _handler_kind(files_type, head) == "binary":
            # Only the header is decompressed: the IDs are all -list needs.
            from ..formats.bundle import read_binary_bundle_index

            entries = [BundleEntry(i, b"", offset)
                       for i, offset, _ in read_binary_bundle_index(head, dec.info.uncompressed_size)]
            kind = "binary"
        else:
            data = buf
            if dec is not None:
                with _decompression_errors():
                    data = memoryview(dec.read_all())
            kind = _handler_kind(files_type, data)
            entries = _read_entries(kind, data, files_type)
        if llvm_order:
            entries = _handler_order(kind, entries)
        return [e.bundle_entry_id for e in entries]


def _can_t_find(missing: list[str]) -> str:
    names = sorted(missing, key=lambda s: s.encode("utf-8", "surrogateescape"))
    if len(names) == 1:
        tail = f" {names[0]}"
    elif len(names) == 2:
        tail = f" {names[0]} and {names[1]}"
    else:
        tail = " " + ", ".join(names[:-1]) + f", and {names[-1]}"
    return "Can't find bundles for" + tail


def plan_unbundle(entries: list[BundleEntry], targets: list[str], *, hip_openmp_compatible: bool = False
                  ) -> tuple[dict[int, BundleEntry], list[int]]:
    """Which entry each target receives, by LLVM 19's rule: for each entry in handler order the first
    compatible target in the worklist's StringMap order takes it. Returns ({target index: entry},
    indices of targets left without one). Duplicated standardized targets: the last one is used."""
    from ..rules.bundle_id import is_code_object_compatible
    from ..rules.stringmap import StringMap

    worklist: StringMap[int] = StringMap()
    for n, t in enumerate(targets):
        worklist[t] = n
    assigned: dict[int, BundleEntry] = {}
    for entry in entries:
        if len(worklist) == 0:
            break
        for t, n in worklist.items():
            if is_code_object_compatible(entry.bundle_entry_id, t, hip_openmp_compatible=hip_openmp_compatible):
                assigned[n] = entry
                del worklist[t]
                break
    return assigned, [n for _, n in worklist.items()]


@budget.metered
def unbundle(files_type: str, targets: list[str], input: str | os.PathLike, outputs: list[str], *,
             allow_missing_bundles: bool = False, hip_openmp_compatible: bool = False,
             check_input_archive: bool = False, verbose: bool | None = None,
             env: Mapping[str, str] = os.environ, dry_run=None) -> None:
    """`clang-offload-bundler -unbundle`: write each target's entry to its output (LLVM 19's matching,
    messages and empty-output rules). `-type=a` goes to archive unbundling. All outputs are
    written to temporary files and renamed only when every one is complete."""
    from ..rules.bundle_id import validate_bundler_targets

    if len(outputs) != len(targets):
        raise UsageError("number of output files and targets should match in unbundling mode")
    if check_input_archive and files_type != "a":
        raise UsageError("-check-input-archive can only be used for unbundling archives (-type=a)")
    ids = [str(i) for i in validate_bundler_targets(list(targets), bundling=False)]
    if files_type == "a" and dry_run is not None:
        return  # LLVM runs no external command for archives; a dry run writes nothing
    if files_type == "a":
        from .hda import unbundle_archive

        unbundle_archive(os.fspath(input), ids, [os.fspath(o) for o in outputs],
                         allow_missing_bundles=allow_missing_bundles, check_input_archive=check_input_archive,
                         hip_openmp_compatible=hip_openmp_compatible)
        return
    cfg = bundler_config(verbose=verbose, env=env)
    _check_type(files_type)
    # The StringMap worklist keeps one output per standardized target: the last given.
    last_output = {t: o for t, o in zip(ids, outputs)}
    unique_ids = list(dict.fromkeys(ids))
    with open_input_file(input) as source:
        raw = source.view
        dec = _open_compressed(raw, cfg, os.fspath(input))
        head = _compressed_binary_head(dec) if dec is not None else None
        if head is not None and _handler_kind(files_type, head) == "binary":
            _unbundle_streaming(dec, head, unique_ids, last_output, allow_missing_bundles, hip_openmp_compatible,
                                dry_run=dry_run)
            return
        data = raw
        if dec is not None:
            with _decompression_errors():
                data = memoryview(dec.read_all())
        kind = _handler_kind(files_type, data)
        entries = _handler_order(kind, _read_entries(kind, data, files_type))
        contents = _unbundle_plan(entries, unique_ids, last_output, allow_missing_bundles, hip_openmp_compatible)
        if dry_run is not None:
            if kind == "object" and any(_is_host_entry(e) for e in contents.values()):
                dry_run.remove_sections(os.fspath(input))
            return
        # File offsets of payloads that are slices of the (uncompressed) input.
        offsets = {id(e): e.offset for e in entries if isinstance(e.data, memoryview) and kind != "object"}
        # Outputs named for duplicated targets but not kept by the worklist are not written (as LLVM);
        # all outputs appear together or none does.
        with output_transaction() as txn:
            # Payloads still in the input file are copied by the kernel from their offsets.
            src_fd = source.fd if data is raw else None
            files = [(txn.open(path), entry) for path, entry in contents.items()]
            for f, entry in files:
                if entry is None:
                    continue
                payload, offset = (data, 0) if entry is _WHOLE_INPUT else (entry.data, offsets.get(id(entry)))
                size = memoryview(payload).nbytes
                if not size:
                    continue
                if src_fd is not None and offset is not None:
                    _copy_file_range(src_fd, f, offset, size)
                else:
                    f.write(payload)
        del data


#: `_unbundle_plan`'s answer for the host output when no entry matched: the whole input.
_WHOLE_INPUT = BundleEntry("", b"")


def _unbundle_plan(entries: list[BundleEntry], unique_ids: list[str], last_output: dict[str, str],
                   allow_missing_bundles: bool, hip_openmp_compatible: bool) -> dict[str, BundleEntry | None]:
    """Output path -> the entry it receives (None: an empty file; `_WHOLE_INPUT`: the whole input),
    with LLVM 19's errors for missing bundles."""
    from ..rules.bundle_id import parse_bundle_entry_id

    assigned, missing = plan_unbundle(entries, unique_ids, hip_openmp_compatible=hip_openmp_compatible)
    if missing and not allow_missing_bundles:
        raise BundleError(_can_t_find([unique_ids[n] for n in missing]))
    contents: dict[str, BundleEntry | None] = {}
    if len(missing) == len(unique_ids):
        # Nothing matched (only reachable with -allow-missing-bundles): host gets the whole input.
        for t in unique_ids:
            contents[last_output[t]] = _WHOLE_INPUT if parse_bundle_entry_id(t).is_host else None
        return contents
    found_host = any(parse_bundle_entry_id(e.bundle_entry_id).is_host for e in assigned.values())
    host_requested = any(parse_bundle_entry_id(t).is_host for t in unique_ids)
    if not (found_host or not host_requested or allow_missing_bundles):
        raise BundleError("Can't find bundle for the host target")
    for n, t in enumerate(unique_ids):
        contents[last_output[t]] = assigned.get(n)
    return contents


def _is_host_entry(entry) -> bool:
    from ..rules.bundle_id import parse_bundle_entry_id

    return entry is not None and entry is not _WHOLE_INPUT and parse_bundle_entry_id(entry.bundle_entry_id).is_host


def _unbundle_streaming(dec, head: bytes, unique_ids: list[str], last_output: dict[str, str],
                        allow_missing_bundles: bool, hip_openmp_compatible: bool, dry_run=None) -> None:
    """Unbundle a compressed binary bundle in one pass: its header comes from a decompressed prefix,
    then the payload is decompressed piece by piece (hashed alongside) and each piece's bytes go
    straight to the outputs whose ranges it covers. No full-size buffer; the MD5 is checked after
    the last piece, before any output is renamed into place."""
    from ..formats.bundle import read_binary_bundle_index

    total = dec.info.uncompressed_size
    index = read_binary_bundle_index(head, total)
    entries = [BundleEntry(i, b"", offset) for i, offset, _ in index]
    sizes = {id(e): size for e, (_, _, size) in zip(entries, index)}
    contents = _unbundle_plan(_handler_order("binary", entries), unique_ids, last_output, allow_missing_bundles,
                              hip_openmp_compatible)
    if dry_run is not None:
        return  # no external command for a binary bundle; a dry run writes nothing
    with output_transaction() as txn:
        ranges = []
        for path, entry in contents.items():
            f = txn.open(path)
            if entry is _WHOLE_INPUT:
                ranges.append((f, 0, total))
            elif entry is not None and sizes[id(entry)]:
                ranges.append((f, entry.offset, entry.offset + sizes[id(entry)]))
        pos = 0
        with _decompression_errors():
            for piece in dec.chunks():
                end = pos + len(piece)
                view = memoryview(piece)
                for f, start, stop in ranges:
                    if start < end and stop > pos:
                        f.write(view[max(start, pos) - pos:min(stop, end) - pos])
                pos = end
