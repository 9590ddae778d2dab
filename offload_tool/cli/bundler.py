"""`offload-bundler`: a drop-in replacement for `clang-offload-bundler` 19.

Same options (single or double dash, `-opt=value` or `-opt value`), same checks in the same order
with the same messages, same exit statuses and output files. Every failure is
one line `offload-bundler: error: ...` and exit status 1, never a traceback. Imports are lazy so
that small operations start fast."""

from __future__ import annotations

import os
import sys

from .. import budget
from .command_line import ArgumentParser, Option, run_command
from ..errors import UsageError

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
  --budget=<kind=N,...>   - Raise (or lower) a resource limit: decompressed, entries, depth, names
                            (also $OFFLOAD_TOOL_BUDGET; see README, Reliability).
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
_VALUES = ("type", "input", "output", "bundle-align", "compression-level", "budget")
_COMMA_LISTS = ("targets", "inputs", "outputs")

PARSER = ArgumentParser(PROG, [Option(n) for n in _FLAGS] + [Option(n, value=True) for n in _VALUES]
                        + [Option(n, value=True, comma_list=True) for n in _COMMA_LISTS],
                        style="llvm", positionals=False)


def _uint(name: str, text: str, signed: bool) -> int:
    body = text[1:] if signed and text.startswith("-") else text
    if not body.isascii() or not body.isdigit():
        raise UsageError(f"for the --{name} option: '{text}' value invalid for {'integer' if signed else 'uint'} "
                         f"argument!")
    return int(text)


def run(argv: list[str], env=os.environ) -> int:
    opts = PARSER.parse(argv)
    with budget.run(budget.from_option(opts.values["budget"])):
        return _run(opts, env)


def _run(opts, env) -> int:
    flags, values = opts.flags, opts.values
    if flags.get("help") or flags.get("h"):
        sys.stdout.write(HELP)
        return 0
    if flags.get("version"):
        sys.stdout.write(f"{PROG} {VERSION} (offload-tool; drop-in for clang-offload-bundler 19)\n")
        return 0
    if not values["type"]:
        raise UsageError("for the --type option: must be specified at least once!")
    files_type = values["type"][-1]
    # Like LLVM's cl::opt, a repeated option keeps its last value.
    bundle_align = _uint("bundle-align", values["bundle-align"][-1], False) if values["bundle-align"] else 1
    level = _uint("compression-level", values["compression-level"][-1], True) if values["compression-level"] else None
    if bundle_align == 0:
        # LLVM 19 divides by zero (SIGFPE); refuse instead.
        raise UsageError("for the --bundle-align option: must be at least 1")
    unbundle, list_ids = flags.get("unbundle", False), flags.get("list", False)
    check_archive = flags.get("check-input-archive", False)
    targets = values["targets"]
    inputs, outputs = list(values["input"]), list(values["output"])
    if values["input"] and values["inputs"]:
        raise UsageError("-inputs and -input cannot be used together, use only -input instead")
    if values["inputs"]:
        sys.stderr.write(f"{PROG}: warning: -inputs is deprecated, use -input instead\n")
        inputs += values["inputs"]
    if values["output"] and values["outputs"]:
        raise UsageError("-outputs and -output cannot be used together, use only -output instead")
    if values["outputs"]:
        sys.stderr.write(f"{PROG}: warning: -outputs is deprecated, use -output instead\n")
        outputs += values["outputs"]

    from ..ops import bundler_api

    verbose = flags.get("verbose") if "verbose" in flags else None
    compress = flags.get("compress") if "compress" in flags else None
    if list_ids:
        if unbundle:
            raise UsageError("-unbundle and -list cannot be used together")
        if len(inputs) != 1:
            raise UsageError("only one input file supported for -list")
        if outputs:
            raise UsageError("-outputs option is invalid for -list")
        if targets:
            raise UsageError("-targets option is invalid for -list")
        ids = bundler_api.list_bundle_ids(files_type, inputs[0], llvm_order=True, verbose=verbose, env=env)
        sys.stdout.write("".join(i + "\n" for i in ids))
        return 0
    if check_archive:
        if not unbundle:
            raise UsageError("-check-input-archive cannot be used while bundling")
        if files_type != "a":
            raise UsageError("-check-input-archive can only be used for unbundling archives (-type=a)")
    if not outputs:
        raise UsageError("no output file specified!")
    if not targets:
        raise UsageError("for the --targets option: must be specified at least once!")
    if unbundle:
        if len(inputs) != 1:
            raise UsageError("only one input file supported in unbundling mode")
        if len(outputs) != len(targets):
            raise UsageError("number of output files and targets should match in unbundling mode")
    else:
        if files_type == "a":
            raise UsageError("Archive files are only supported for unbundling")
        if len(outputs) != 1:
            raise UsageError("only one output file supported in bundling mode")
        if len(inputs) != len(targets):
            raise UsageError("number of input files and targets should match in bundling mode")
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


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns (and exits with) the status."""
    args = sys.argv[1:] if argv is None else argv
    return run_command(PROG, lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
