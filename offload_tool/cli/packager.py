"""`offload-packager`: a drop-in for `clang-offload-packager` 19 (renamed `llvm-offload-binary` in 22).

    offload-packager -o OUT --image=file=F,triple=T[,arch=A,kind=K,key=value...] ...   # package
    offload-packager IN --image=key=value,... [--archive]                               # extract

The work is done by `offload_tool.ops.package`; this module is the command line only."""

from __future__ import annotations

import sys

from .. import __version__, budget
from ..formats.offload_binary import DEFAULT_LLVM_VERSION
from ..errors import UsageError
from ..ops.package import Warnings, bundle_images, unbundle_images
from ..printable import printable
from .command_line import ArgumentParser, Option, invoked_as, llvm_version_argument, run_command

__all__ = ["main", "run", "llvm_version_option", "PROG", "PARSER"]

PROG = "offload-packager"
LLVM_RELEASE = {19: "19.1.7", 20: "20.1", 22: "22.1.8", 23: "23 (OffloadBinary version 2)"}

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
  --budget=<kind=N,...>       - Raise (or lower) a resource limit: decompressed, entries, depth, names
                                (also $OFFLOAD_TOOL_BUDGET; see docs/reliability.md).
  --image=<<key>=<value>,...> - List of key and value arguments. Required keywords are 'file' and 'triple'.
  --llvm-version=<N>          - Offload kind numbering of LLVM N (19: hip=3, 22: hip=4; default 19);
                                23 writes one version 2 binary holding every image.
  -o <file>                   - Write output to <file>.
"""



# --------------------------------------------------------------------------------------------
# Command line (llvm::cl conventions: `-x` and `--x`, `--x=v` or `--x v`, last `-o` wins)


PARSER = ArgumentParser(PROG, [Option("o", value=True), Option("image", value=True), Option("llvm-version", value=True),
                              Option("budget", value=True), Option("archive"), Option("help"), Option("help-list"), Option("help-hidden"),
                              Option("help-list-hidden"), Option("version")],
                        style="llvm", max_positionals=1)


def llvm_version_option(text: str | None) -> int:
    """The packager's `--llvm-version` (LLVM's wording for a bad value; default 19)."""
    version = llvm_version_argument(text, "llvm")
    return DEFAULT_LLVM_VERSION if version is None else version


def run(argv: list[str], argv0: str = PROG) -> int:
    """The packager's command line: package (`-o`) or extract (an input file); `argv0` is the name
    it was invoked by (LLVM's option errors say "Try: '<argv[0]> --help'")."""
    parser = PARSER if argv0 == PROG else ArgumentParser(argv0, PARSER.options.values(), style="llvm",
                                                         max_positionals=1)
    opts = parser.parse(argv)
    with budget.run(budget.from_option(opts.values["budget"])):
        return _run(opts, argv0)


def _run(opts, argv0: str = PROG) -> int:
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
                        warn=Warnings(lambda msg: print(f"{argv0}: warning: {printable(msg)}", file=sys.stderr)))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; errors name the program as it was invoked (`invoked_as`)."""
    argv0 = invoked_as(PROG) if argv is None else PROG
    argv = sys.argv[1:] if argv is None else list(argv)
    return run_command(argv0, lambda: run(argv, argv0))


if __name__ == "__main__":
    sys.exit(main())
