"""`offload-tool`: inspect, verify and embed offload containers.

    offload-tool inspect [--json] [--hash] [--llvm-version N] FILE...
    offload-tool verify FILE... [--require ARCH[,ARCH...]] [--runs-on GPU[,GPU...]] [--check-entries | --no-check-entries]
    offload-tool embed HOST.o PACKAGE -o OUT.o          (see `offload-tool embed --help`)
    offload-tool cost --add ARCH REPORT.json            (see `offload-tool cost --help`)

Errors are one line, `offload-tool: error: <message>`, with exit status 1; never a traceback."""

from __future__ import annotations

import sys

from .. import __version__, budget
from ..printable import printable
from .command_line import ArgumentParser, Option, error_line, llvm_version_argument, run_command
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
  verify    Exit 0 only if each FILE holds every --require'd arch, runs on every --runs-on GPU
            and its host and device OpenMP offload entries agree; otherwise print one line per
            problem and exit 1.
  embed     Add an OffloadBinary package to a host object as .llvm.offloading.
  convert   Rewrite a heterogeneous static library between the old offload driver's bundles and
            the new driver's .llvm.offloading fat objects ([--to=new|old] IN.a -o OUT.a; without
            --to, the direction the input calls for).
  cost      Estimate what adding an arch would cost, from a build report (scons --offload-report).

Run '{PROG} <command> --help' for a command's options.

OPTIONS:
  -h, --help       Show this help
  --version        Show the version
"""

INSPECT_HELP = f"""\
USAGE: {PROG} inspect [options] FILE...

List every device image in each FILE (a table by default).  Only the headers and tables
that say what each image is are read, not the images themselves: no hash unless --hash.

OPTIONS:
  --json              Print a JSON array, one object per image, with the fields path, container,
                      producer, triple, arch, image_kind, size, compressed, wrappers (sha256
                      with --hash; producer_note and format-specific details where they apply)
  --hash              Hash every image: a SHA256 column (its first 16 hex digits) in the table,
                      the field sha256 (64 hex digits) in the JSON.  Reads every image's bytes
                      (and decompresses compressed ones).  Without it neither is printed
  --llvm-version=N    Read OffloadBinary producer kinds as LLVM N does (19..22).  Without it the
                      value 3, which is HIP for LLVM 19/20 but OpenMP|CUDA for LLVM 21+, is
                      shown as 'hip?' with a producer_note
  --require-images    Exit 1, naming the file and why, when a FILE holds no device image (a
                      plain file, an object without offload sections); the listing is printed
                      first.  Without it the table's reader gets one 'note:' line on stderr per
                      such FILE saying why (with --json, where a FILE without rows says it, none)
                      and the exit status stays 0 (as clang-offload-packager's); a damaged
                      container is always an error (exit 1)
  --sizes             Instead of the images, bytes per arch and per container kind in each FILE
                      (and the file's size); with --json, one object per file
  --budget=KIND=N,... Raise (or lower) a resource limit for this run: decompressed, entries,
                      depth, names (also $OFFLOAD_TOOL_BUDGET; see docs/reliability.md)
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
  --runs-on=GPU[,GPU...]  Each GPU (sm_86; gfx90a, or with its modes gfx90a:xnack-) must be able
                      to run each FILE's device code; one line per FILE and GPU says whether and
                      how: 'app: sm_86: yes (SASS sm_80, same major)', 'app: sm_90: yes (PTX
                      compute_80 (JIT))', 'app: sm_90: no: SASS sm_80 only (major 8), no PTX'.
                      NVIDIA: SASS sm_XY runs on sm_XZ, Z >= Y (not on Tegra), sm_XYa only on
                      sm_XY, sm_XYf on the same major with minor >= Y; PTX compute_XY is
                      JIT-compiled for compute capability >= X.Y.  AMD: code runs on its own
                      processor, generic targets on their processors; xnack+/- (and sramecc+/-)
                      code needs that mode, so a GPU named without it gets 'only if XNACK is
                      on' (a failure).  May be repeated.
  --check-entries     Require every host OpenMP offload entry (__omp_offloading_<dev>_<file-id>_...)
                      to be defined by every OpenMP device image of the same object or program.
                      This is ON by default when a file has such entries; with this option a
                      file without entries or without device images is reported too.
  --no-check-entries  Skip the entry check.
  --max-bytes=KEY:N[,KEY:N...]  Size budgets: KEY is an arch (its device images' bytes, as
                      'inspect --sizes' counts them), 'device' (all device images) or 'total' (the
                      file's size); N in bytes or with a K, M or G suffix (powers of 1024).  A
                      file over a budget is a problem.  May be repeated.
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
    from ..ops.inspector import inspect_file
    from .inspect_output import format_table, to_json
    opts = _parse(argv, "inspect", INSPECT_HELP, ["--json", "--require-images", "--sizes", "--hash"],
                  ["--llvm-version"])
    if opts is None:
        return 0
    files = opts.positionals
    llvm_version = llvm_version_argument(opts.last("llvm-version"))
    limits = budget.from_option(opts.values["budget"])
    if opts.flag("sizes"):
        with budget.run(limits):
            return _inspect_sizes(files, llvm_version, opts.flag("json"))
    hashes = opts.flag("hash")
    images = []
    empty: dict[str, str] = {}
    with budget.run(limits):
        for path in files:
            images.extend(inspect_file(path, llvm_version=llvm_version, keep_data=False, reasons=empty,
                                       hashes=hashes))
    sys.stdout.write(to_json(images) + "\n" if opts.flag("json") else format_table(images, hashes=hashes))
    if opts.flag("require-images") and empty:
        for path, why in empty.items():
            error_line(PROG, f"'{path}': no device images: {why}")
        return 1
    if not opts.flag("json"):  # not an error: tell the table's reader why it has nothing from it
        for path, why in empty.items():
            error_line(PROG, f"'{path}': no device images: {why}", label="note")
    return 0


def _inspect_sizes(files: list[str], llvm_version, as_json: bool) -> int:
    import json
    import os
    from ..ops.inspector import inspect_file, size_summary
    from .inspect_output import format_sizes
    summaries = [size_summary(inspect_file(path, llvm_version=llvm_version, keep_data=False, hashes=False),
                              path, os.path.getsize(path)) for path in files]
    sys.stdout.write(json.dumps(summaries, indent=2) + "\n" if as_json else format_sizes(summaries))
    return 0


def cmd_verify(argv: list[str]) -> int:
    from ..ops.verify import verify_file
    opts = _parse(argv, "verify", VERIFY_HELP, ["--check-entries", "--no-check-entries", "-q", "--quiet"],
                  ["--require", "--llvm-version", "--max-bytes", "--runs-on"])
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
    runs_on = _runs_on(opts.values["runs-on"])
    llvm_version = llvm_version_argument(opts.last("llvm-version"))
    quiet = opts.flag("q", "quiet")
    budgets = _max_bytes(opts.values["max-bytes"])
    status = 0
    limits = budget.from_option(opts.values["budget"])
    for path in files:
        with budget.run(limits):
            result = verify_file(path, require=require, check_entries=check, llvm_version=llvm_version,
                                 runs_on=runs_on)
        if not quiet:
            for verdict in result.runs_on:
                if verdict.ok:
                    sys.stdout.write(printable(f"{path}: {verdict.gpu.text}: {verdict.line}") + "\n")
        problems = result.problems + ([n for n in result.notes] if check else [])
        problems += _over_budget(result, path, budgets)
        for line in problems:
            sys.stdout.write(printable(line) + "\n")
        if problems:
            status = 1
        elif not quiet:
            what = [f"{len(result.images)} device image(s)"]
            if require:
                what.append("required archs " + ",".join(require) + " present")
            if runs_on:
                what.append("runs on " + ",".join(runs_on))
            if result.entries_checked:
                what.append(f"{result.entries_checked} entry/image pair(s) consistent")
            if budgets:
                what.append("within --max-bytes")
            sys.stdout.write(f"{printable(path)}: ok: {'; '.join(what)}\n")
    return status


def _runs_on(values: list[str]) -> list[str]:
    """--runs-on values, comma-split, in order, without repeats; each checked now (a typo must
    not pass silently)."""
    from ..ops.runs_on import parse_gpu
    gpus: list[str] = []
    for value in values:
        for gpu in value.split(","):
            gpu = gpu.strip()
            if not gpu:
                raise UsageError(f"empty GPU in --runs-on '{value}'")
            parse_gpu(gpu)
            if gpu not in gpus:
                gpus.append(gpu)
    return gpus


def _max_bytes(values: list[str]) -> dict[str, int]:
    from ..ops.verify import parse_max_bytes
    budgets: dict[str, int] = {}
    for value in values:
        budgets.update(parse_max_bytes(value))
    return budgets


def _over_budget(result, path: str, budgets: dict[str, int]) -> list[str]:
    import os
    from ..ops.verify import check_max_bytes
    return check_max_bytes(result.images, path, os.path.getsize(path), budgets) if budgets else []


def cmd_cost(argv: list[str]) -> int:
    from . import cost
    return cost.run(argv, f"{PROG} cost")


def cmd_embed(argv: list[str]) -> int:
    from . import embed
    prog = f"{PROG} embed"
    return run_command(prog, lambda: embed.run(argv, prog))


def cmd_convert(argv: list[str]) -> int:
    """`offload-tool convert`: a heterogeneous archive for the other offload driver (`cli.convert`)."""
    from . import convert
    prog = f"{PROG} convert"
    return run_command(prog, lambda: convert.run(argv, prog))


COMMANDS = {"inspect": cmd_inspect, "verify": cmd_verify, "embed": cmd_embed, "convert": cmd_convert,
            "cost": cmd_cost}


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
        raise UsageError(f"unknown command '{argv[0]}' (expected {', '.join(COMMANDS)})")
    return command(argv[1:])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    return run_command(PROG, lambda: run(argv))


if __name__ == "__main__":
    sys.exit(main())
