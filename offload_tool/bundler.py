"""`offload-bundler`: a drop-in replacement for `clang-offload-bundler` 19.

Same options (single or double dash, `-opt=value` or `-opt value`), same checks in the same order
with the same messages, same exit statuses and output files (llvm-formats.md §5.1). Every failure is
one line `offload-bundler: error: ...` and exit status 1, never a traceback. Imports are lazy so
that small operations start fast."""

from __future__ import annotations

import os
import sys

PROG = "offload-bundler"
VERSION = "0.1.0"

HELP = f"""OVERVIEW: A tool to bundle several input files of the specified type <type> 
referring to the same source file but different targets into a single 
one. The resulting file can also be unbundled into different files by 
this tool if -unbundle is provided.

USAGE: {PROG} [options]

OPTIONS:

Generic Options:

  --help                  - Display available options
  --version               - Display the version of this program

clang-offload-bundler options:

  --###                   - Accepted for compatibility: this tool runs no external commands.
  --allow-missing-bundles - Create empty files if bundles are missing when unbundling.
  --bundle-align=<uint>   - Alignment of bundle for binary files
  --check-input-archive   - Check if input heterogeneous archive is valid in terms of TargetID rules.
  --compress              - Compress output file when bundling.
  --compression-level=<n> - Specify the compression level (integer)
  --hip-openmp-compatible - Treat hip and hipv4 offload kinds as compatible with openmp kind, and vice versa.
  --input=<string>        - Input file. Can be specified multiple times for multiple input files.
  --inputs=<string>       - [<input file>,...] (deprecated)
  --list                  - List bundle IDs in the bundled file.
  --output=<string>       - Output file. Can be specified multiple times for multiple output files.
  --outputs=<string>      - [<output file>,...] (deprecated)
  --targets=<string>      - [<offload kind>-<target triple>,...]
  --type=<string>         - Type of the files to be bundled/unbundled.
                            Current supported types are:
                              i    - cpp-output
                              ii   - c++-cpp-output
                              cui  - cuda-cpp-output
                              hipi - hip-cpp-output
                              d    - dependency
                              ll   - llvm
                              bc   - llvm-bc
                              s    - assembler
                              o    - object
                              a    - archive of objects
                              gch  - precompiled-header
                              ast  - clang AST file
  --unbundle              - Unbundle bundled file into several output files.
  --verbose               - Print debug information.
"""

# `-###` prints "external commands" in LLVM (llvm-objcopy for -type=o); this tool runs none, so the
# flag is accepted and the work is simply done.
_FLAGS = ("###", "unbundle", "list", "allow-missing-bundles", "check-input-archive", "compress", "hip-openmp-compatible",
          "verbose", "help", "h", "version")
_VALUES = ("type", "targets", "input", "inputs", "output", "outputs", "bundle-align", "compression-level")
_COMMA_LISTS = ("targets", "inputs", "outputs")


class _Fail(Exception):
    """A message for `<prog>: error: <msg>` (or the plain line in `.raw`)."""

    def __init__(self, msg: str, raw: bool = False) -> None:
        super().__init__(msg)
        self.raw = raw


def _parse_bool(name: str, value: str) -> bool:
    if value in ("true", "TRUE", "True", "1"):
        return True
    if value in ("false", "FALSE", "False", "0"):
        return False
    raise _Fail(f"for the --{name} option: '{value}' is invalid value for boolean argument! Try 0 or 1")


def parse_args(argv: list[str]) -> dict:
    """LLVM `cl` parsing of the bundler's options; lists keep every occurrence."""
    opts: dict = {"values": {n: [] for n in _VALUES}, "flags": {}}
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--" or not arg.startswith("-") or arg == "-":
            raise _Fail(f"unexpected argument '{arg}' (options start with '-'; see --help)")
        body = arg[2:] if arg.startswith("--") else arg[1:]
        name, eq, value = body.partition("=")
        if name in _FLAGS:
            opts["flags"][name] = _parse_bool(name, value) if eq else True
            continue
        if name in _VALUES:
            if not eq:
                if i >= len(argv):
                    raise _Fail(f"for the --{name} option: requires a value!")
                value = argv[i]
                i += 1
            if name in _COMMA_LISTS:
                opts["values"][name].extend(value.split(","))
            else:
                opts["values"][name].append(value)
            continue
        raise _Fail(f"Unknown command line argument '{arg}'.  Try: '{PROG} --help'")
    return opts


def _uint(name: str, text: str, signed: bool) -> int:
    body = text[1:] if signed and text.startswith("-") else text
    if not body.isascii() or not body.isdigit():
        raise _Fail(f"for the --{name} option: '{text}' value invalid for {'integer' if signed else 'uint'} argument!")
    return int(text)


def run(argv: list[str], env=os.environ) -> int:
    opts = parse_args(argv)
    flags, values = opts["flags"], opts["values"]
    if flags.get("help") or flags.get("h"):
        sys.stdout.write(HELP)
        return 0
    if flags.get("version"):
        sys.stdout.write(f"{PROG} {VERSION} (offload-tool; drop-in for clang-offload-bundler 19)\n")
        return 0
    if not values["type"]:
        raise _Fail("for the --type option: must be specified at least once!")
    files_type = values["type"][-1]
    # Like LLVM's cl::opt, a repeated option keeps its last value.
    bundle_align = _uint("bundle-align", values["bundle-align"][-1], False) if values["bundle-align"] else 1
    level = _uint("compression-level", values["compression-level"][-1], True) if values["compression-level"] else None
    if bundle_align == 0:
        # LLVM 19 divides by zero (SIGFPE); refuse instead.
        raise _Fail("for the --bundle-align option: must be at least 1")
    unbundle, list_ids = flags.get("unbundle", False), flags.get("list", False)
    check_archive = flags.get("check-input-archive", False)
    targets = values["targets"]
    inputs, outputs = list(values["input"]), list(values["output"])
    if values["input"] and values["inputs"]:
        raise _Fail("-inputs and -input cannot be used together, use only -input instead")
    if values["inputs"]:
        sys.stderr.write(f"{PROG}: warning: -inputs is deprecated, use -input instead\n")
        inputs += values["inputs"]
    if values["output"] and values["outputs"]:
        raise _Fail("-outputs and -output cannot be used together, use only -output instead")
    if values["outputs"]:
        sys.stderr.write(f"{PROG}: warning: -outputs is deprecated, use -output instead\n")
        outputs += values["outputs"]

    from . import bundler_api

    verbose = flags.get("verbose") if "verbose" in flags else None
    compress = flags.get("compress") if "compress" in flags else None
    if list_ids:
        if unbundle:
            raise _Fail("-unbundle and -list cannot be used together")
        if len(inputs) != 1:
            raise _Fail("only one input file supported for -list")
        if outputs:
            raise _Fail("-outputs option is invalid for -list")
        if targets:
            raise _Fail("-targets option is invalid for -list")
        ids = bundler_api.list_bundle_ids(files_type, inputs[0], llvm_order=True, verbose=verbose, env=env)
        sys.stdout.write("".join(i + "\n" for i in ids))
        return 0
    if check_archive:
        if not unbundle:
            raise _Fail("-check-input-archive cannot be used while bundling")
        if files_type != "a":
            raise _Fail("-check-input-archive can only be used for unbundling archives (-type=a)")
    if not outputs:
        raise _Fail("no output file specified!")
    if not targets:
        raise _Fail("for the --targets option: must be specified at least once!")
    if unbundle:
        if len(inputs) != 1:
            raise _Fail("only one input file supported in unbundling mode")
        if len(outputs) != len(targets):
            raise _Fail("number of output files and targets should match in unbundling mode")
    else:
        if files_type == "a":
            raise _Fail("Archive files are only supported for unbundling")
        if len(outputs) != 1:
            raise _Fail("only one output file supported in bundling mode")
        if len(inputs) != len(targets):
            raise _Fail("number of input files and targets should match in bundling mode")
    if unbundle:
        bundler_api.unbundle(files_type, targets, inputs[0], outputs,
                             allow_missing_bundles=flags.get("allow-missing-bundles", False),
                             hip_openmp_compatible=flags.get("hip-openmp-compatible", False),
                             check_input_archive=check_archive, verbose=verbose, env=env)
    else:
        bundler_api.bundle(files_type, targets, inputs, outputs[0], bundle_align=bundle_align, compress=compress,
                           compression_level=level,
                           hip_openmp_compatible=flags.get("hip-openmp-compatible", False), verbose=verbose,
                           env=env)
    return 0


def _one_line(text: str) -> str:
    return " ".join(str(text).split()) or "unknown error"


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns (and exits with) the status."""
    args = sys.argv[1:] if argv is None else argv
    try:
        status = run(args)
    except _Fail as exc:
        sys.stderr.write(f"{PROG}: error: {_one_line(exc)}\n")
        status = 1
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: error: interrupted\n")
        status = 1
    except BaseException as exc:  # noqa: BLE001 - the CLI contract: one line, never a traceback
        if isinstance(exc, SystemExit):
            raise
        from .errors import OffloadError

        if isinstance(exc, OffloadError):
            msg = _one_line(exc)
        elif isinstance(exc, MemoryError):
            msg = "out of memory"
        elif isinstance(exc, BrokenPipeError):
            _silence_stdout()
            msg = "broken pipe while writing to standard output"
        elif isinstance(exc, OSError):
            name = exc.filename if exc.filename is not None else ""
            msg = _one_line(f"'{name}': {exc.strerror or exc}" if name else (exc.strerror or exc))
        else:
            msg = _one_line(f"internal error: {type(exc).__name__}: {exc}")
        sys.stderr.write(f"{PROG}: error: {msg}\n")
        status = 1
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        status = 1
        _silence_stdout()
    return status


def _silence_stdout() -> None:
    """After a broken pipe (`-list | head`), point stdout at /dev/null so that the interpreter's final
    flush does not print a traceback."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


if __name__ == "__main__":
    sys.exit(main())
