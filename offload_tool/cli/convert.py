"""The `convert` command line (`offload-tool convert`): a heterogeneous static library from the
old offload driver's bundle format to the new driver's `.llvm.offloading` fat objects, or back,
done by `offload_tool.ops.convert`."""

from __future__ import annotations

import sys

from ..errors import UsageError
from ..ops.convert import convert_archive, infer_direction
from ..printable import printable
from .command_line import Option, llvm_version_argument, parse_or_help

__all__ = ["run", "USAGE"]

USAGE = """usage: {prog} [--to=new|old] IN.a -o OUT.a [--llvm-version=N] [--host-triple=TRIPLE]

Rewrite the static library IN.a for the other offload driver and write OUT.a. Without --to the
input tells the direction (bundles inside: --to=new; .llvm.offloading inside: --to=old), and
one line on stderr says which was chosen; an archive with both, or neither, needs --to.

  --to=new   members that are clang offload bundles (objects with __CLANG_OFFLOAD_BUNDLE__*
             sections, binary or compressed bundles) become fat objects whose .llvm.offloading
             section holds one OffloadBinary per device entry (what clang's new driver links)
  --to=old   fat objects with .llvm.offloading become object bundles (what clang's old driver and
             clang-offload-bundler -type=a read)

Device entries keep their triple and target ID (gfx90a:xnack+ stays gfx90a:xnack+). Members
without device code are copied unchanged. Prints one line per member.

  --llvm-version=N     producer numbering of the OffloadBinaries written (--to=new, default 19) or
                       read (--to=old; without it, value 3 is read as hip)
  --host-triple=TRIPLE host entry of the bundles written by --to=old (default: from the ELF machine)
"""

_OPTIONS = [Option("h"), Option("help"), Option("o", value=True, dest="output"), Option("output", value=True),
            Option("to", value=True), Option("llvm-version", value=True), Option("host-triple", value=True)]


def run(argv: list[str], prog: str) -> int:
    opts = parse_or_help(prog, _OPTIONS, USAGE, argv)
    if opts is None:
        return 0
    output = opts.required("output", "no output file given (-o OUT.a)")
    if len(opts.positionals) != 1:
        raise UsageError("expected exactly one input archive")
    to = opts.last("to")
    if to is None:
        to, why = infer_direction(opts.positionals[0])
        sys.stderr.write(f"{prog}: converting to the {'new' if to == 'new' else 'old'} driver's format "
                         f"(--to={to}): {printable(why)}\n")
    reports = convert_archive(opts.positionals[0], output, to=to,
                              llvm_version=llvm_version_argument(opts.last("llvm-version")),
                              host_triple=opts.last("host-triple"))
    for r in reports:
        sys.stdout.write(f"{r.name}: {', '.join(r.entries) if r.entries else 'copied (no device code)'}\n")
    return 0
