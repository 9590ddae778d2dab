"""The `embed` command line (`offload-tool embed`, `python -m offload_tool.cli.embed`): a package
into a host object's `.llvm.offloading` section, done by `offload_tool.ops.embed`."""

from __future__ import annotations

import sys

from ..errors import UsageError
from ..ops.embed import embed_files
from .command_line import Option, parse_or_help, run_command

__all__ = ["run", "main", "PROG"]

PROG = "offload-embed"


USAGE = """usage: {prog} [--empty-host] HOST.o PACKAGE [PACKAGE...] -o OUT.o

Add PACKAGE (OffloadBinaries, e.g. from offload-packager -o) to the ELF relocatable object HOST.o
as its .llvm.offloading section (SHT_LLVM_OFFLOADING, SHF_EXCLUDE, align 8) and write OUT.o.
Several packages are concatenated in the order given.

  --empty-host   put the packages in an empty object of HOST.o's ELF class and machine
                 instead (a carrier of device images without host code)
"""


_OPTIONS = [Option("empty-host"), Option("h"), Option("help"), Option("o", value=True, dest="output"),
            Option("output", value=True)]


def run(argv: list[str], prog: str = PROG) -> int:
    """The embed command line (`prog` names the command in messages)."""
    opts = parse_or_help(prog, _OPTIONS, USAGE, argv)
    if opts is None:
        return 0
    output = opts.required("output", "no output file given (-o OUT.o)")
    if len(opts.positionals) < 2:
        raise UsageError("expected a host object and at least one package")
    embed_files(opts.positionals[0], opts.positionals[1:], output, empty_host=opts.flag("empty-host"))
    return 0


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    """`python -m offload_tool.cli.embed HOST.o PACKAGE -o OUT.o`"""
    argv = sys.argv[1:] if argv is None else list(argv)
    return run_command(prog, lambda: run(argv, prog))


if __name__ == "__main__":
    sys.exit(main())
