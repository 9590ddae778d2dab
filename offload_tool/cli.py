"""`offload-tool`: inspect, verify and embed offload containers.

    offload-tool inspect [--json] [--llvm-version N] FILE...
    offload-tool verify FILE... [--require ARCH[,ARCH...]] [--check-entries | --no-check-entries]
    offload-tool embed HOST.o PACKAGE -o OUT.o          (see `offload-tool embed --help`)

Errors are one line, `offload-tool: error: <message>`, with exit status 1; never a traceback."""

from __future__ import annotations

import sys

from . import __version__
from .errors import OffloadError, UsageError

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
  -q, --quiet         Print nothing when all checks hold (default prints one 'ok' line per file)
  -h, --help          Show this help
"""


def _llvm_version(value: str) -> int:
    from .offload_binary import SUPPORTED_LLVM_VERSIONS
    try:
        v = int(value)
    except ValueError:
        raise UsageError(f"invalid --llvm-version '{value}'") from None
    if v not in SUPPORTED_LLVM_VERSIONS:
        raise UsageError(f"unsupported --llvm-version {v} "
                         f"(supported: {', '.join(map(str, SUPPORTED_LLVM_VERSIONS))})")
    return v


def _take_value(argv: list[str], i: int, arg: str, name: str) -> tuple[str, int]:
    """Value of `--name=V` or `--name V`; returns (value, next index)."""
    if arg.startswith(name + "="):
        return arg[len(name) + 1:], i
    if i >= len(argv):
        raise UsageError(f"option '{name}' needs a value")
    return argv[i], i + 1


def _parse(argv: list[str], flags: set[str], valued: set[str]) -> tuple[dict, list[str]]:
    opts: dict = {}
    files: list[str] = []
    i = 0
    only_files = False
    while i < len(argv):
        a = argv[i]
        i += 1
        if only_files or a == "-" or not a.startswith("-"):
            files.append(a)
        elif a == "--":
            only_files = True
        elif a in flags:
            opts[a] = True
        else:
            name = a.split("=", 1)[0]
            if name in valued:
                value, i = _take_value(argv, i, a, name)
                opts.setdefault(name, []).append(value)
            else:
                raise UsageError(f"unknown option '{a}' (see '{PROG} --help')")
    return opts, files


def cmd_inspect(argv: list[str]) -> int:
    from .inspector import format_table, inspect_file, to_json
    opts, files = _parse(argv, {"--json", "-h", "--help"}, {"--llvm-version"})
    if "-h" in opts or "--help" in opts:
        sys.stdout.write(INSPECT_HELP)
        return 0
    if not files:
        raise UsageError("inspect: no input files")
    llvm_version = _llvm_version(opts["--llvm-version"][-1]) if "--llvm-version" in opts else None
    images = []
    for path in files:
        images.extend(inspect_file(path, llvm_version=llvm_version, keep_data=False))
    sys.stdout.write(to_json(images) + "\n" if "--json" in opts else format_table(images))
    return 0


def cmd_verify(argv: list[str]) -> int:
    from .verify import verify_file
    opts, files = _parse(argv, {"--check-entries", "--no-check-entries", "-q", "--quiet", "-h", "--help"},
                         {"--require", "--llvm-version"})
    if "-h" in opts or "--help" in opts:
        sys.stdout.write(VERIFY_HELP)
        return 0
    if not files:
        raise UsageError("verify: no input files")
    if "--check-entries" in opts and "--no-check-entries" in opts:
        raise UsageError("--check-entries and --no-check-entries cannot be used together")
    check = True if "--check-entries" in opts else False if "--no-check-entries" in opts else None
    require: list[str] = []
    for value in opts.get("--require", []):
        for arch in value.split(","):
            arch = arch.strip()
            if not arch:
                raise UsageError(f"empty arch in --require '{value}'")
            if arch not in require:
                require.append(arch)
    llvm_version = _llvm_version(opts["--llvm-version"][-1]) if "--llvm-version" in opts else None
    quiet = "-q" in opts or "--quiet" in opts
    status = 0
    for path in files:
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
    return embed.main(argv, prog=f"{PROG} embed")


COMMANDS = {"inspect": cmd_inspect, "verify": cmd_verify, "embed": cmd_embed}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
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
    except OffloadError as exc:
        sys.stderr.write(f"{PROG}: error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: error: interrupted\n")
        return 1
    except BrokenPipeError:
        return 1
    except RecursionError:
        sys.stderr.write(f"{PROG}: error: input nested too deeply\n")
        return 1
    except Exception as exc:  # a bug, but still one line and status 1 for the build that ran us
        sys.stderr.write(f"{PROG}: error: internal error: {type(exc).__name__}: {exc}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
