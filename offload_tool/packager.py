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

from . import __version__
from .densemap import DenseMap
from .errors import OffloadError, UsageError
from .extract import FoundImage, find_offload_images
from .fileio import atomic_output, open_input, safe_join, sanitize_name
from .offload_binary import (DEFAULT_LLVM_VERSION, SUPPORTED_LLVM_VERSIONS, OffloadImage, image_kind_for_file,
                             image_kind_name, offload_kind_value, write_offload_binary_to)

__all__ = ["main", "parse_image_arguments", "bundle_images", "unbundle_images", "generated_name", "PROG"]

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
    """Package: one OffloadBinary per `file` of each `--image`, concatenated, written atomically."""
    with ExitStack() as stack:
        planned: list[OffloadImage] = []
        for image in images:
            args = parse_image_arguments(image)
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
    return f"{_llvm_stem(input_file)}-{img.triple}-{img.arch}.{idx}.{image_kind_name(img.image_kind, llvm_version)}"


def _llvm_stem(path: str) -> str:
    """`llvm::sys::path::stem`: the file name without its last extension."""
    if path.endswith("/") and path != "/":
        name = "."  # llvm::sys::path::filename of "dir/" is "."
    else:
        name = path.rsplit("/", 1)[-1] or "/"
    if name in (".", ".."):
        return name
    pos = name.rfind(".")
    return name if pos < 0 else name[:pos]


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


def _parse(argv: list[str]) -> dict:
    opts = {"output": None, "images": [], "archive": False, "inputs": [], "llvm_version": DEFAULT_LLVM_VERSION,
            "help": False, "version": False}
    i = 0
    only_positional = False
    while i < len(argv):
        arg = argv[i]
        i += 1
        if only_positional or arg == "-" or not arg.startswith("-"):
            opts["inputs"].append(arg)
            continue
        if arg == "--":
            only_positional = True
            continue
        body = arg[2:] if arg.startswith("--") else arg[1:]
        name, eq, value = body.partition("=")
        if name in ("o", "image", "llvm-version"):
            if not eq:
                if i >= len(argv):
                    raise UsageError(f"for the -{name} option: requires a value!")
                value = argv[i]
                i += 1
            if name == "o":
                opts["output"] = value
            elif name == "image":
                opts["images"].append(value)
            else:
                try:
                    opts["llvm_version"] = int(value)
                except ValueError:
                    raise UsageError(f"for the --llvm-version option: '{value}' value invalid for integer argument!") \
                        from None
                if opts["llvm_version"] not in SUPPORTED_LLVM_VERSIONS:
                    raise UsageError(f"unsupported --llvm-version={value} (supported: "
                                     f"{', '.join(map(str, SUPPORTED_LLVM_VERSIONS))})")
        elif name == "archive":
            if eq and value.lower() not in ("true", "1", "false", "0"):
                raise UsageError(f"for the --archive option: '{value}' is invalid value for boolean argument! "
                                 "Try 0 or 1")
            opts["archive"] = not eq or value.lower() in ("true", "1")
        elif name in ("help", "help-list", "help-hidden", "help-list-hidden") and not eq:
            opts["help"] = True
        elif name == "version" and not eq:
            opts["version"] = True
        else:
            raise UsageError(f"Unknown command line argument '{arg}'.  Try: '{PROG} --help'")
    if len(opts["inputs"]) > 1:
        raise UsageError("Too many positional arguments specified! Can specify at most 1 positional arguments")
    return opts


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        opts = _parse(argv)
        if opts["help"]:
            sys.stdout.write(HELP)
            return 0
        if opts["version"]:
            release = LLVM_RELEASE.get(opts["llvm_version"], str(opts["llvm_version"]))
            sys.stdout.write(f"{PROG} (offload-tool {__version__}) compatible with clang-offload-packager {release}\n")
            return 0
        input_file = opts["inputs"][0] if opts["inputs"] else None
        if input_file is not None and opts["output"] is not None:
            raise UsageError("Packaging to an output file and extracting from an input file are mutually exclusive.")
        if opts["output"] is not None:
            bundle_images(opts["images"], opts["output"], llvm_version=opts["llvm_version"])
        elif input_file is not None:
            unbundle_images(input_file, opts["images"], archive=opts["archive"], llvm_version=opts["llvm_version"],
                            warn=_Warn(sys.stderr))
        return 0
    except OffloadError as exc:
        msg = " ".join(str(exc).splitlines())
        print(f"{PROG}: error: {msg}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: error: interrupted", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
