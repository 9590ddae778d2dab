"""`offload-tool`: inspect, verify and embed offload containers.

    offload-tool inspect [--json] [--llvm-version N] FILE...
    offload-tool verify FILE... [--require ARCH[,ARCH...]] [--check-entries | --no-check-entries]
    offload-tool embed HOST.o PACKAGE -o OUT.o          (see `offload-tool embed --help`)

Errors are one line, `offload-tool: error: <message>`, with exit status 1; never a traceback."""

from __future__ import annotations

import sys

from .. import __version__, budget
from .command_line import ArgumentParser, Option, llvm_version_argument, run_command
from ..errors import UsageError

PROG = "offload-tool"

HELP = f"""\
OVERVIEW: {PROG}: list and check the device images in offload containers

USAGE: {PROG} <command> [options] FILE...

COMMANDS:
  inspect   List every device image in each FILE, however it is wrapped: OffloadBinary packages,
            clang offload bundles (binary, text, compressed), ELF objects, programs and shared
            libraries (.llvm.offloading, __CLANG_OFFLOAD_BUNDLE__*, .hip_fatbin, .nv_fatbin,
            __nv_relfatbin), NVIDIA fat binaries, LLVM bitcode and static archives (recursively).
  verify    Exit 0 only if each FILE holds every --require'd arch and its host and device
            OpenMP offload entries agree; otherwise print one line per problem and exit 1.
  embed     Add an OffloadBinary package to a host object as .llvm.offloading.

Run '{PROG} <command> --help' for a command's options.

OPTIONS:
  -h, --help       Show this help
  --version        Show the version
"""

INSPECT_HELP = f"""\
USAGE: {PROG} inspect [options] FILE...

List every device image in each FILE (a table by default).

OPTIONS:
  --json              Print a JSON array, one object per image, with the fields path, container,
                      producer, triple, arch, image_kind, size, compressed, sha256, wrappers
                      (and producer_note and format-specific details where they apply)
  --llvm-version=N    Read OffloadBinary producer kinds as LLVM N does (19..22).  Without it the
                      value 3, which is HIP for LLVM 19/20 but OpenMP|CUDA for LLVM 21+, is
                      shown as 'hip?' with a producer_note
  --budget=KIND=N,... Raise (or lower) a resource limit for this run: decompressed, entries,
                      depth, names (also $OFFLOAD_TOOL_BUDGET; see README, Reliability)
  -h, --help          Show this help
"""

VERIFY_HELP = f"""\
USAGE: {PROG} verify [options] FILE...

Check what each FILE ships; exit 0 if every check holds, else print one line per problem and
exit 1.

OPTIONS:
  --require=ARCH[,ARCH...]  Every ARCH must have a device image.  AMDGPU target IDs are matched
                      by compatibility: an image for gfx90a satisfies gfx90a:xnack+, one for
                      gfx90a:xnack+ does not satisfy gfx90a:xnack-.  sm_XX matches SASS or PTX
                      for that SM; compute_XX asks for PTX.  May be repeated.
  --check-entries     Require every host OpenMP offload entry (__omp_offloading_<dev>_<file-id>_...)
                      to be defined by every OpenMP device image of the same object or program.
                      This is ON by default when a file has such entries; with this option a
                      file without entries or without device images is reported too.
  --no-check-entries  Skip the entry check.
  --llvm-version=N    As for inspect.
  --budget=KIND=N,... As for inspect.
  -q, --quiet         Print nothing when all checks hold (default prints one 'ok' line per file)
  -h, --help          Show this help
"""


def _parse(argv: list[str], command: str, help_text: str, flags: list[str], valued: list[str]):
    """A command's options (names with their dashes; `-h`/`--help` added), parsed by the shared
    parser; None when help was asked for (and printed).  Files are required."""
    options = [Option(n.lstrip("-")) for n in flags + ["-h", "--help"]] + [Option(n.lstrip("-"), value=True)
                                                                          for n in valued + ["--budget"]]
    opts = ArgumentParser(PROG, options).parse(argv)
    if opts.flag("h", "help"):
        sys.stdout.write(help_text)
        return None
    if not opts.positionals:
        raise UsageError(f"{command}: no input files")
    return opts


def cmd_inspect(argv: list[str]) -> int:
    from ..ops.inspector import format_table, inspect_file, to_json
    opts = _parse(argv, "inspect", INSPECT_HELP, ["--json"], ["--llvm-version"])
    if opts is None:
        return 0
    files = opts.positionals
    llvm_version = llvm_version_argument(opts.last("llvm-version"))
    images = []
    with budget.run(budget.from_option(opts.values["budget"])):
        for path in files:
            images.extend(inspect_file(path, llvm_version=llvm_version, keep_data=False))
    sys.stdout.write(to_json(images) + "\n" if opts.flag("json") else format_table(images))
    return 0


def cmd_verify(argv: list[str]) -> int:
    from ..ops.verify import verify_file
    opts = _parse(argv, "verify", VERIFY_HELP, ["--check-entries", "--no-check-entries", "-q", "--quiet"],
                  ["--require", "--llvm-version"])
    if opts is None:
        return 0
    files = opts.positionals
    if opts.flag("check-entries") and opts.flag("no-check-entries"):
        raise UsageError("--check-entries and --no-check-entries cannot be used together")
    check = True if opts.flag("check-entries") else False if opts.flag("no-check-entries") else None
    require: list[str] = []
    for value in opts.values["require"]:
        for arch in value.split(","):
            arch = arch.strip()
            if not arch:
                raise UsageError(f"empty arch in --require '{value}'")
            if arch not in require:
                require.append(arch)
    llvm_version = llvm_version_argument(opts.last("llvm-version"))
    quiet = opts.flag("q", "quiet")
    status = 0
    limits = budget.from_option(opts.values["budget"])
    for path in files:
        with budget.run(limits):
            result = verify_file(path, require=require, check_entries=check, llvm_version=llvm_version)
        problems = result.problems + ([n for n in result.notes] if check else [])
        for line in problems:
            sys.stdout.write(line + "\n")
        if problems:
            status = 1
        elif not quiet:
            what = [f"{len(result.images)} device image(s)"]
            if require:
                what.append("required archs " + ",".join(require) + " present")
            if result.entries_checked:
                what.append(f"{result.entries_checked} entry/image pair(s) consistent")
            sys.stdout.write(f"{path}: ok: {'; '.join(what)}\n")
    return status


def cmd_embed(argv: list[str]) -> int:
    from . import embed
    prog = f"{PROG} embed"
    return run_command(prog, lambda: embed.run(argv, prog))


COMMANDS = {"inspect": cmd_inspect, "verify": cmd_verify, "embed": cmd_embed}


def run(argv: list[str]) -> int:
    if not argv:
        raise UsageError(f"no command given (run '{PROG} --help')")
    if argv[0] in ("-h", "--help", "help"):
        sys.stdout.write(HELP)
        return 0
    if argv[0] == "--version":
        sys.stdout.write(f"{PROG} {__version__}\n")
        return 0
    command = COMMANDS.get(argv[0])
    if command is None:
        raise UsageError(f"unknown command '{argv[0]}' (expected inspect, verify or embed)")
    return command(argv[1:])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    return run_command(PROG, lambda: run(argv))


if __name__ == "__main__":
    sys.exit(main())
