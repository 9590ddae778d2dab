"""Offload packages (what `clang-offload-packager` 19 does): package images, extract images.

Packaging writes what LLVM writes, byte for byte: string entries in `DenseMap` order
(`rules/densemap.py`), producer kinds in the numbering of `--llvm-version` (19: HIP = 3; 22: HIP = 4).
Extraction selects images as LLVM does; names built from image metadata (no `file=`) follow
LLVM 19's pattern `<stem>-<triple>-<arch>.<idx>.<kind>` but are sanitized so they can never leave
the current directory (LLVM would happily write `../../x`); a warning says when that happens."""

from __future__ import annotations

from contextlib import ExitStack
from collections.abc import Mapping, Sequence

from .. import budget
from ..errors import UsageError
from ..fileio import atomic_output, open_input, open_input_file, output_transaction, safe_join, sanitize_name
from ..formats.offload_binary_v2 import V2_LLVM_VERSION, write_offload_binary_v2_to
from ..formats.offload_binary import (DEFAULT_LLVM_VERSION, OffloadImage, image_kind_for_file,
                                      image_kind_name, offload_kind_value, write_offload_binary_to)
from ..rules import llvm_path
from ..rules.densemap import DenseMap
from ..printable import printable

TYPE_CHECKING = False
if TYPE_CHECKING:  # extract (ELF, COFF, bitcode readers) is imported only when unbundling
    from .extract import FoundImage

__all__ = ["parse_image_arguments", "write_package", "bundle_images", "unbundle_images", "generated_name",
           "Warnings"]

class Warnings:
    """Collects the warnings of an extraction so callers can see them; `report`, when given, is
    also called with each one (the CLI prints it to stderr)."""

    def __init__(self, report=None) -> None:
        self.report = report
        self.messages: list[str] = []

    def __call__(self, msg: str) -> None:
        self.messages.append(msg)
        if self.report is not None:
            self.report(msg)


def parse_image_arguments(image: str) -> DenseMap:
    """`getImageArguments`: split on `,`, then on the first `=`; a repeated key joins values with `,`.

    Returns the `DenseMap` (its iteration order is the string-entry order LLVM writes)."""
    args = DenseMap()
    for arg in image.split(","):
        key, _, value = arg.partition("=")
        if key in args:
            args[key] = args[key] + "," + value
        else:
            args[key] = value
    return args


@budget.metered
def bundle_images(images: list[str], output: str, *, llvm_version: int = DEFAULT_LLVM_VERSION) -> None:
    """Package: one OffloadBinary per `file` of each `--image` string, concatenated, written atomically."""
    write_package([parse_image_arguments(image) for image in images], output, llvm_version=llvm_version)


def _as_densemap(spec: Mapping[str, str]) -> DenseMap:
    """`spec` as the `DenseMap` LLVM builds from an `--image` naming its keys in this order (its
    iteration order is the order the string entries are written in)."""
    if isinstance(spec, DenseMap):
        return spec
    args = DenseMap()
    for key, value in spec.items():
        args[key] = value
    return args


def write_package(images: Sequence[Mapping[str, str]], output: str, *,
                  llvm_version: int = DEFAULT_LLVM_VERSION) -> None:
    """Write the OffloadBinary package `output` (atomically) from parsed image specs: the keys of
    an `--image` (`parse_image_arguments`, or any mapping in the order the keys would be given):
    `file` (comma-separated paths, each one image) and `triple` are required, `kind` is the
    producer, every other key becomes a string entry."""
    with ExitStack() as stack:
        planned: list[OffloadImage] = []
        for spec in images:
            args = _as_densemap(spec)
            if "triple" not in args or "file" not in args:
                raise UsageError("'file' and 'triple' are required image arguments")
            offload_kind = 0
            strings: dict[str, str] = {}
            for key, value in args.items():
                if key == "kind":
                    offload_kind = offload_kind_value(value, llvm_version)
                elif key != "file":
                    strings[key] = value
            for path in args["file"].split(","):
                # Opened once (a FIFO cannot be read twice); LLVM reports only the error code's
                # text here (no path).
                data = stack.enter_context(open_input_file(path, quote_path=False)).view
                planned.append(OffloadImage(image_kind_for_file(path, data), offload_kind, 0, dict(strings), data,
                                            llvm_version))
        with atomic_output(output) as out:
            if llvm_version >= V2_LLVM_VERSION:
                # LLVM 23 writes one version 2 binary holding every image.
                write_offload_binary_v2_to(out, planned)
            else:
                for img in planned:
                    write_offload_binary_to(out, img)


def generated_name(input_file: str, img: OffloadImage, idx: int, llvm_version: int = DEFAULT_LLVM_VERSION) -> str:
    """LLVM 19's name for an extracted image without `file=`: `<stem>-<triple>-<arch>.<idx>.<kind>`
    (LLVM 23 leaves out `-<arch>` when the image has no arch)."""
    if llvm_version >= V2_LLVM_VERSION and not img.arch:
        return f"{llvm_path.stem(input_file)}-{img.triple}.{idx}.{image_kind_name(img.image_kind, llvm_version)}"
    return f"{llvm_path.stem(input_file)}-{img.triple}-{img.arch}.{idx}.{image_kind_name(img.image_kind, llvm_version)}"


def _matches(found: FoundImage, args: DenseMap, llvm_version: int) -> bool:
    img = found.image
    for key, value in args.items():
        if key == "file":
            continue
        if key == "kind":
            if img.offload_kind != offload_kind_value(value, llvm_version):
                return False
        elif img.get(key) != value:
            return False
    return True


@budget.metered
def unbundle_images(input_file: str, images: list[str], *, archive: bool = False,
                    llvm_version: int = DEFAULT_LLVM_VERSION, warn=None, directory: str = ".") -> list[str]:
    """Extract: for each `--image`, the matching images of `input_file`; returns the paths written.

    Everything is planned (and every request checked) before the first file is written, and the
    files are written as one transaction: if writing one fails, none of them appears."""
    warn = warn or Warnings()
    with open_input(input_file) as buf:
        from .extract import find_offload_images, why_no_images

        found = find_offload_images(buf, input_file, llvm_version=llvm_version)
        if not found and images:
            # LLVM extracts nothing and says nothing (exit 0, kept); a word says why.
            warn(f"nothing extracted from '{printable(input_file)}': {why_no_images(buf)}")
        plan: list[tuple[str, str, object]] = []  # (path, "archive" | "image", members or image)
        for image in images:
            args = parse_image_arguments(image)
            extracted = [f for f in found if _matches(f, args, llvm_version)]
            if not extracted:
                continue
            if archive:
                if "file" not in args:
                    raise UsageError("Image must have a 'file' argument.")
                members = [(_member_name(f.member, warn) if f.member is not None else input_file, f.image.image)
                           for f in extracted]
                plan.append((args["file"], "archive", members))
            elif "file" in args:
                if len(extracted) > 1:
                    warn(f"Multiple inputs match to a single file, '{args['file']}'")
                plan.append((args["file"], "image", extracted[-1].image.image))
            else:
                for idx, f in enumerate(extracted):
                    raw = generated_name(input_file, f.image, idx, llvm_version)
                    name = sanitize_name(raw)
                    if name != raw:
                        warn(f"output name {raw!r} built from image metadata is not a plain file name; "
                             f"writing {name!r} instead")
                    full = safe_join(directory, name)
                    plan.append((name if directory == "." else full, "image", f.image.image))
        return _write_plan(plan)


def _member_name(name: str, warn) -> str:
    """An archive member name taken from the input archive, made safe as one path component (as
    every name from inside a file is); the user's own input path is kept as given, as LLVM does."""
    safe = sanitize_name(name)
    if safe != name:
        warn(f"archive member name '{printable(name)}' is not a plain file name; writing '{printable(safe)}' "
             f"instead")
    return safe


def _write_plan(plan: list[tuple[str, str, object]]) -> list[str]:
    """Write every planned file in one transaction: all appear, or (on any failure) none does."""
    with output_transaction() as txn:
        for path, what, payload in plan:
            out = txn.open(path)
            if what == "archive":
                from ..formats.archive import write_archive  # only archive output needs it

                write_archive([(n, bytes(d)) for n, d in payload], out, symtab=True)
            else:
                out.write(payload)
    return [path for path, _, _ in plan]
