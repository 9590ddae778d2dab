"""`offload-packager`: a drop-in for `clang-offload-packager` 19 (renamed `llvm-offload-binary` in 22).

    offload-packager -o OUT --image=file=F,triple=T[,arch=A,kind=K,key=value...] ...   # package
    offload-packager IN --image=key=value,... [--archive]                               # extract

Packaging writes what LLVM writes, byte for byte: string entries in `DenseMap` order
(`densemap.py`), producer kinds in the numbering of `--llvm-version` (19: HIP = 3; 22: HIP = 4).
Extraction selects images as LLVM does; names built from image metadata (no `file=`) follow
LLVM 19's pattern `<stem>-<triple>-<arch>.<idx>.<kind>` but are sanitized so they can never leave
the current directory (LLVM would happily write `../../x`); a warning says when that happens."""

from __future__ import annotations

import os
import sys
from contextlib import ExitStack
from typing import Mapping, Sequence

from . import __version__, llvm_path
from .command_line import ArgumentParser, Option, llvm_version_argument, run_command
from .densemap import DenseMap
from .errors import OffloadError, UsageError
from .extract import FoundImage, find_offload_images
from .fileio import atomic_output, open_input, safe_join, sanitize_name
from .offload_binary import (DEFAULT_LLVM_VERSION, OffloadImage, image_kind_for_file,
                             image_kind_name, offload_kind_value, write_offload_binary_to)

__all__ = ["main", "run", "parse_image_arguments", "write_package", "llvm_version_option", "bundle_images",
           "unbundle_images", "generated_name", "PROG", "PARSER"]

PROG = "offload-packager"
LLVM_RELEASE = {19: "19.1.7", 20: "20.1", 22: "22.1.8"}

HELP = f"""OVERVIEW: A utility for bundling several object files into a single binary.
The output binary can then be embedded into the host section table
to create a fatbinary containing offloading code.

USAGE: {PROG} [options] Extract from <file>.

OPTIONS:

Generic Options:

  --help                      - Display available options (--help-hidden for more)
  --help-list                 - Display list of available options (--help-list-hidden for more)
  --version                   - Display the version of this program

{PROG} options:

  --archive                   - Write extracted files to a static archive
  --image=<<key>=<value>,...> - List of key and value arguments. Required keywords are 'file' and 'triple'.
  --llvm-version=<N>          - Offload kind numbering of LLVM N (19: hip=3, 22: hip=4; default 19).
  -o <file>                   - Write output to <file>.
"""


class _Warn:
    """Collects warnings so tests and callers can see them; the CLI prints them to stderr."""

    def __init__(self, stream=None) -> None:
        self.stream = stream
        self.messages: list[str] = []

    def __call__(self, msg: str) -> None:
        self.messages.append(msg)
        if self.stream is not None:
            print(f"{PROG}: warning: {msg}", file=self.stream)


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


def _strerror(exc: OSError) -> str:
    return exc.strerror or os.strerror(exc.errno or 0) or str(exc)


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
                if path != "-":
                    # LLVM reports only the error code's text here (no path).
                    try:
                        open(path, "rb").close()
                    except OSError as exc:
                        raise OffloadError(_strerror(exc)) from None
                data = stack.enter_context(open_input(path))
                planned.append(OffloadImage(image_kind_for_file(path, data), offload_kind, 0, dict(strings), data,
                                            llvm_version))
        with atomic_output(output) as out:
            for img in planned:
                write_offload_binary_to(out, img)


def generated_name(input_file: str, img: OffloadImage, idx: int, llvm_version: int = DEFAULT_LLVM_VERSION) -> str:
    """LLVM 19's name for an extracted image without `file=`: `<stem>-<triple>-<arch>.<idx>.<kind>`."""
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


def unbundle_images(input_file: str, images: list[str], *, archive: bool = False,
                    llvm_version: int = DEFAULT_LLVM_VERSION, warn=None, directory: str = ".") -> list[str]:
    """Extract: for each `--image`, the matching images of `input_file`; returns the paths written.

    Everything is planned (and every request checked) before the first file is written, and
    each file is written atomically; if writing fails, files this call created are removed."""
    warn = warn or _Warn()
    with open_input(input_file) as buf:
        found = find_offload_images(buf, input_file, llvm_version=llvm_version)
        plan: list[tuple[str, str, object]] = []  # (path, "archive" | "image", members or image)
        for image in images:
            args = parse_image_arguments(image)
            extracted = [f for f in found if _matches(f, args, llvm_version)]
            if not extracted:
                continue
            if archive:
                if "file" not in args:
                    raise UsageError("Image must have a 'file' argument.")
                members = [(f.member if f.member is not None else input_file, f.image.image) for f in extracted]
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


def _write_plan(plan: list[tuple[str, str, object]]) -> list[str]:
    created: list[str] = []
    written: list[str] = []
    try:
        for path, what, payload in plan:
            existed = os.path.lexists(path)
            with atomic_output(path) as out:
                if what == "archive":
                    from .archive import write_archive  # only archive output needs it

                    write_archive([(n, bytes(d)) for n, d in payload], out, symtab=True)
                else:
                    out.write(payload)
            if not existed:
                created.append(path)
            written.append(path)
    except BaseException:
        for path in created:
            try:
                os.unlink(path)
            except OSError:
                pass
        raise
    return written


# --------------------------------------------------------------------------------------------
# Command line (llvm::cl conventions: `-x` and `--x`, `--x=v` or `--x v`, last `-o` wins)


PARSER = ArgumentParser(PROG, [Option("o", value=True), Option("image", value=True), Option("llvm-version", value=True),
                              Option("archive"), Option("help"), Option("help-list"), Option("help-hidden"),
                              Option("help-list-hidden"), Option("version")],
                        style="llvm", max_positionals=1)


def llvm_version_option(text: str | None) -> int:
    """The packager's `--llvm-version` (LLVM's wording for a bad value; default 19)."""
    version = llvm_version_argument(text, "llvm")
    return DEFAULT_LLVM_VERSION if version is None else version


def run(argv: list[str]) -> int:
    """The packager's command line: package (`-o`) or extract (an input file)."""
    opts = PARSER.parse(argv)
    llvm_version = llvm_version_option(opts.last("llvm-version"))
    if opts.flag("help", "help-list", "help-hidden", "help-list-hidden"):
        sys.stdout.write(HELP)
        return 0
    if opts.flag("version"):
        release = LLVM_RELEASE.get(llvm_version, str(llvm_version))
        sys.stdout.write(f"{PROG} (offload-tool {__version__}) compatible with clang-offload-packager {release}\n")
        return 0
    input_file = opts.positionals[0] if opts.positionals else None
    output = opts.last("o")
    if input_file is not None and output is not None:
        raise UsageError("Packaging to an output file and extracting from an input file are mutually exclusive.")
    if output is not None:
        bundle_images(opts.values["image"], output, llvm_version=llvm_version)
    elif input_file is not None:
        unbundle_images(input_file, opts.values["image"], archive=opts.flag("archive"), llvm_version=llvm_version,
                        warn=_Warn(sys.stderr))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    return run_command(PROG, lambda: run(argv))


if __name__ == "__main__":
    sys.exit(main())
