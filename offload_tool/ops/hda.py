"""Heterogeneous archive unbundling (`clang-offload-bundler -type=a -unbundle`, LLVM 19).

A heterogeneous static library is an `ar` archive whose members are bundles: object bundles
(fat objects from `-fgpu-rdc` / the old offload driver), binary bundles, or compressed bundles of
either.  Unbundling writes one device-specific archive per requested target:

* members are visited in archive order; a compressed member is decompressed (hash checked), then
  read with the object handler if it is an object file, else as a binary bundle (StringMap order);
  members without bundle entries are skipped;
* every entry goes to *every* requested target it is compatible with
  (`bundle_id.is_code_object_compatible`), in `-targets` order;
* the new member is named `<stem>-<entry id><stem><ext>` with each ':' replaced by '_', where
  `<stem>`/`<ext>` are LLVM's `sys::path::stem`/`extension` of the member's file name and `<ext>`
  becomes `.bc` if the entry's target ID contains `gfx`, else `.cubin` if it contains `sm_`;
  a host entry of an object bundle yields the host object without its bundle sections;
* each output is written as LLVM's deterministic GNU archive writer does (`archive.write_archive`);
  a target without members is an error, or an empty archive (`!<arch>\\n`) with
  `allow_missing_bundles`;
* `check_input_archive` first rejects a member whose (not decompressed) entry IDs conflict.

Differences from LLVM 19, on purpose: outputs are written only after every target has been
resolved, each through a temporary file, so a failed run leaves no output behind (LLVM writes the
archives of earlier targets before failing on a later one); member names taken from the input are
passed through `fileio.sanitize_name` (a '/' in an entry ID becomes '_'); malformed members raise a
clear error where LLVM 19 sometimes silently skips them or crashes.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache

from .. import budget
from ..rules import llvm_path
from ..formats.archive import read_archive, write_archive
from ..errors import BundleError, CompressionError, UsageError
from ..fileio import open_input, output_transaction, sanitize_name
from ..formats.bundle import BINARY_MAGIC
from ..formats.kinds import CCOB_MAGIC
from .bundler_handlers import BinaryFileHandler, create_file_handler

__all__ = ["unbundle_archive", "archive_member_entries", "device_member_name"]


def device_member_name(member_name: str, bundle_entry_id: str) -> str:
    """The name LLVM 19 gives the extracted entry in the device-specific archive."""
    return _device_member_name(llvm_path.stem(member_name), llvm_path.extension(member_name), bundle_entry_id)


def _device_member_name(stem: str, member_extension: str, bundle_entry_id: str) -> str:
    """`device_member_name` from the member's stem and extension (computed once per member)."""
    ext = _device_extension(bundle_entry_id) or member_extension
    return (stem + "-" + bundle_entry_id + stem + ext).replace(":", "_")


@lru_cache(maxsize=1024)
def _device_extension(bundle_entry_id: str) -> str:
    """".bc" / ".cubin" by LLVM 19's re-parsed target ID of the stored entry ID (quirks included), else ""."""
    from ..rules.bundle_id import standardize

    target_id = standardize(bundle_entry_id).target_id
    if "gfx" in target_id:
        return ".bc"
    if "sm_" in target_id:
        return ".cubin"
    return ""


_UNSAFE_NAME = re.compile(r"[\x00-\x1f/\\]")


def _safe_member_name(name: str) -> str:
    """`fileio.sanitize_name`, skipped for the common already-safe name (archives have thousands)."""
    if name in ("", ".", "..") or _UNSAFE_NAME.search(name):
        return sanitize_name(name)
    return name


_BINARY = BinaryFileHandler()


def _entries(data, *, decompress: bool, where: str) -> list:
    """Bundle entries of one member in the order LLVM's handler yields them."""
    head = bytes(data[:24])
    if head == BINARY_MAGIC:
        # The common member, a binary bundle: not an object file, so the binary handler reads it.
        return _BINARY.order(_BINARY.read(data))
    if decompress and head[:4] == CCOB_MAGIC:
        from ..formats.ccob import decompress as ccob_decompress

        try:
            data = memoryview(ccob_decompress(data, what=f"compressed archive member {where}")[0])
        except CompressionError as exc:
            raise CompressionError(f"Failed to decompress code object: {exc} ({where})") from None
    handler = create_file_handler("a", data)
    return handler.order(handler.read(data))


def archive_member_entries(member_data, *, decompress: bool = True, where: str = "archive member") -> list:
    """The bundle entries (`BundleEntry`) of one archive member, as `-type=a` unbundling reads them."""
    return _entries(member_data, decompress=decompress, where=where)


def _check_archive(members, archive_path: str) -> None:
    """`CheckHeterogeneousArchive`: per member, the target-ID conflict rule on its entry IDs."""
    from ..rules.bundle_id import archive_conflict

    for m in members:
        # Not decompressed: LLVM checks the member as stored.
        ids = sorted(set(create_file_handler("a", m.data).ids(m.data)))
        conflict = archive_conflict(ids)
        if conflict:
            raise BundleError(f"conflicting TargetIDs [{conflict[0]}, {conflict[1]}] found in {m.name} of "
                              f"{archive_path}")


@budget.metered
def unbundle_archive(input_path, targets: list[str], output_paths: list[str], *, allow_missing_bundles: bool = False,
                     check_input_archive: bool = False, hip_openmp_compatible: bool = False) -> None:
    """Write one device-specific archive per target (standardized bundle entry IDs) from the
    heterogeneous archive at `input_path` (see the module docstring)."""
    from ..rules.bundle_id import is_code_object_compatible

    targets = [str(t) for t in targets]
    output_paths = [os.fspath(p) for p in output_paths]
    if len(targets) != len(output_paths):
        raise UsageError("number of output files and targets should match in unbundling mode")
    input_name = os.fspath(input_path)
    with open_input(input_path) as buf:
        members = read_archive(buf)
        if check_input_archive:
            _check_archive(members, input_name)
        outputs: dict[str, list[tuple[str, object]]] = {}
        compatible_cache: dict[str, list[str]] = {}
        for m in members:
            member_file = llvm_path.filename(m.name)
            stem, ext = llvm_path.stem(member_file), llvm_path.extension(member_file)
            for entry in _entries(m.data, decompress=True, where=m.name):
                compatible = compatible_cache.get(entry.bundle_entry_id)
                if compatible is None:
                    compatible = [t for t in targets
                                  if is_code_object_compatible(entry.bundle_entry_id, t,
                                                               hip_openmp_compatible=hip_openmp_compatible)]
                    compatible_cache[entry.bundle_entry_id] = compatible
                if not compatible:
                    continue
                name = _safe_member_name(_device_member_name(stem, ext, entry.bundle_entry_id))
                for t in compatible:
                    outputs.setdefault(t, []).append((name, entry.data))
        plan: dict[str, list] = {}
        for t, path in zip(targets, output_paths):
            if t in outputs:
                plan[path] = outputs[t]
            elif allow_missing_bundles:
                plan[path] = []
            else:
                raise BundleError(f"no compatible code object found for the target '{t}' in heterogeneous "
                                  f"archive library: {input_name}")
        # A path named twice keeps the later target's archive, as LLVM's sequential writes do.
        with output_transaction() as txn:
            for path, items in plan.items():
                write_archive(items, txn.open(path))
        del outputs, plan, members
