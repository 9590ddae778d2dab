"""High-level clang offload bundler operations, in-process: bundle, unbundle, list, read.

These are `OffloadBundler::BundleFiles / UnbundleFiles / ListBundleIDsInFile` of LLVM 19
with the same outputs, order rules and messages, plus the checks LLVM
lacks (damaged inputs are errors, outputs appear atomically and only when the whole run succeeds).
Inputs are memory-mapped and only the headers are read through the map: uncompressed payloads are
copied file to file by the kernel (`splice`, `copy_file_range`), so bundling or unbundling
gigabytes needs no more memory than a small file (what a plain file copy costs).

What differs between bundle formats (binary, text, object, compressed) is the business of the
handler classes of `bundler_handlers`, picked by `create_file_handler` (LLVM's `CreateFileHandler`);
this module holds what is the same for all: settings, target checks, which entry each target
receives and LLVM's messages about it.  `-type=a` unbundling is `hda`'s, as in LLVM."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Mapping

from .. import budget
from ..formats.bundle import BundleEntry
from ..errors import BundleError, UsageError
from ..fileio import open_input, open_input_file
from ..records import Record
from .bundler_handlers import WHOLE_INPUT, check_type, create_file_handler, open_bundle

TYPE_CHECKING = False
if TYPE_CHECKING:  # ccob (hashlib, zlib) is imported only when a bundle is compressed
    from ..formats.ccob import CompressionInfo

__all__ = ["Bundle", "BundlerConfig", "bundle", "unbundle", "list_bundle_ids", "read_bundle",
           "bundler_config", "plan_unbundle"]

class Bundle(Record):
    """A bundle read into plain data. `entries` are in file order; payloads are slices of the input.
    `kind` is the handler's (`bundler_handlers`): "binary", "text" or "object"."""

    __slots__ = ("kind", "entries", "compression")

    def __init__(self, kind: str, entries: list[BundleEntry] | None = None,
                 compression: CompressionInfo | None = None) -> None:
        self.kind = kind
        self.entries = [] if entries is None else entries
        self.compression = compression

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


def _write_stderr(text: str) -> None:
    sys.stderr.write(text)


class BundlerConfig(Record):
    """`OffloadBundlerConfig`: the settings the environment can change."""

    __slots__ = ("verbose", "compress", "compression_level", "compression_method", "format_version", "log")

    def __init__(self, verbose: bool = False, compress: bool = False, compression_level: int | None = None,
                 compression_method: str = "zstd", format_version: int = 2,
                 log: Callable[[str], None] = _write_stderr) -> None:
        self.verbose = verbose
        self.compress = compress
        self.compression_level = compression_level
        self.compression_method = compression_method
        self.format_version = format_version
        self.log = log


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
        if "COMPRESSED_BUNDLE_FORMAT_VERSION" in env:  # ccob (hashlib, zlib) only when it matters
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
        handler = create_file_handler(files_type, sources[host_index].view if sources else b"")
        if dry_run is not None:
            handler.dry_run_bundle(dry_run, ids, [os.fspath(p) for p in inputs], host_index, os.fspath(output))
            return
        handler.bundle(output, ids, sources, host_index, cfg, bundle_align)
        sources.clear()


# --- reading ----------------------------------------------------------------------------------------


@budget.metered
def read_bundle(source: str | os.PathLike | bytes | bytearray | memoryview, files_type: str | None = None, *,
                verbose: bool | None = False, env: Mapping[str, str] = os.environ) -> Bundle:
    """Read a bundle (binary, text or object; compressed or not) from a path or a buffer.

    With `files_type=None` the kind is detected from the content. Payloads are slices of the
    memory-mapped file (or of the decompressed data), valid as long as the entries are referenced."""
    cfg = bundler_config(verbose=verbose, env=env)
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _read(source, files_type, cfg, "input")
    with open_input(source) as buf:
        return _read(buf, files_type, cfg, os.fspath(source))


def _read(buf, files_type: str | None, cfg: BundlerConfig, what: str) -> Bundle:
    handler, data, compression = open_bundle(files_type, buf, cfg, what)
    return Bundle(handler.kind, handler.read(data), compression)


@budget.metered
def list_bundle_ids(files_type: str, input: str | os.PathLike, *, llvm_order: bool = False,
                    verbose: bool | None = None, env: Mapping[str, str] = os.environ) -> list[str]:
    """The bundle entry IDs of a bundle: file order, or with `llvm_order=True` the order LLVM 19's
    `-list` prints (StringMap order for binary bundles, duplicates once)."""
    cfg = bundler_config(verbose=verbose, env=env)
    check_type(files_type)
    with open_input(input) as buf:
        # A compressed binary bundle: only its header is decompressed, the IDs are all -list needs.
        # Verbose runs decompress it all: they report the hash check, as LLVM does.
        handler, data, _ = open_bundle(files_type, buf, cfg, os.fspath(input), stream=not cfg.verbose)
        entries = handler.read(data)
        if llvm_order:
            entries = handler.order(entries)
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
    indices of targets left without one). Duplicated standardized targets: the last one is used.

    Compatibility is LLVM 19's own (`bundle_id.llvm19_compatible`), so the same runs fail: an entry
    without a GPU target ID is taken only by a target that standardizes to exactly its spelling, and
    one written without the trailing empty field (clang 15 and hipcc's `host-x86_64-unknown-linux`,
    `host-x86_64-pc-linux-gnu`) by none ("Can't find bundles for host-x86_64-unknown-linux--")."""
    from ..rules.bundle_id import llvm19_compatible
    from ..rules.stringmap import StringMap

    worklist: StringMap[int] = StringMap()
    for n, t in enumerate(targets):
        worklist[t] = n
    assigned: dict[int, BundleEntry] = {}
    for entry in entries:
        if len(worklist) == 0:
            break
        for t, n in worklist.items():
            if llvm19_compatible(entry.bundle_entry_id, t, hip_openmp_compatible=hip_openmp_compatible):
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
    check_type(files_type)
    # The StringMap worklist keeps one output per standardized target: the last given.
    last_output = {t: o for t, o in zip(ids, outputs)}
    unique_ids = list(dict.fromkeys(ids))
    with open_input_file(input) as source:
        # A compressed binary bundle is decompressed piece by piece straight to the outputs.
        handler, data, _ = open_bundle(files_type, source.view, cfg, os.fspath(input), stream=True)
        entries = handler.order(handler.read(data))
        contents = _unbundle_plan(entries, unique_ids, last_output, allow_missing_bundles, hip_openmp_compatible)
        if dry_run is not None:
            handler.dry_run_unbundle(dry_run, os.fspath(input), contents)
            return
        # Outputs named for duplicated targets but not kept by the worklist are not written (as LLVM).
        # Payloads still in the input file are copied by the kernel from their offsets.
        handler.unbundle(data, entries, contents, source.fd if data is source.view else None)
        del data, entries, contents


def _unbundle_plan(entries: list[BundleEntry], unique_ids: list[str], last_output: dict[str, str],
                   allow_missing_bundles: bool, hip_openmp_compatible: bool) -> dict[str, BundleEntry | None]:
    """Output path -> the entry it receives (None: an empty file; `WHOLE_INPUT`: the whole input),
    with LLVM 19's errors for missing bundles."""
    from ..rules.bundle_id import parse_bundle_entry_id

    assigned, missing = plan_unbundle(entries, unique_ids, hip_openmp_compatible=hip_openmp_compatible)
    if missing and not allow_missing_bundles:
        raise BundleError(_can_t_find([unique_ids[n] for n in missing]))
    contents: dict[str, BundleEntry | None] = {}
    if len(missing) == len(unique_ids):
        # Nothing matched (only reachable with -allow-missing-bundles): host gets the whole input.
        for t in unique_ids:
            contents[last_output[t]] = WHOLE_INPUT if parse_bundle_entry_id(t).is_host else None
        return contents
    found_host = any(parse_bundle_entry_id(e.bundle_entry_id).is_host for e in assigned.values())
    host_requested = any(parse_bundle_entry_id(t).is_host for t in unique_ids)
    if not (found_host or not host_requested or allow_missing_bundles):
        raise BundleError("Can't find bundle for the host target")
    for n, t in enumerate(unique_ids):
        contents[last_output[t]] = assigned.get(n)
    return contents
