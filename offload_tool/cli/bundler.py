"""`offload-bundler`: a drop-in replacement for `clang-offload-bundler` 19.

Same options (single or double dash, `-opt=value` or `-opt value`), same checks in the same order
with the same messages, same exit statuses and output files. Every failure is
one line and exit status 1, never a traceback: `<argv[0]>: error: ...`, or, for what LLVM's option
parser reports, `<program name>: ...` (`command_line`). Imports are lazy so
that small operations start fast."""

from __future__ import annotations

import os
import sys

from .. import budget
from .command_line import ArgumentParser, Option, invoked_as as _invoked_as, run_command
from ..errors import OptionError, UsageError

PROG = "offload-bundler"
VERSION = "0.1.0"

_OVERVIEW = """OVERVIEW: A tool to bundle several input files of the specified type <type> 
referring to the same source file but different targets into a single 
one. The resulting file can also be unbundled into different files by 
this tool if -unbundle is provided.

USAGE: {prog} [options]

OPTIONS:
"""

# LLVM's `cl` help: (name, description, hidden); `--help` groups the generic options apart, the
# `--help-list` variants print one sorted list; `-hidden` adds the hidden ones.
_GENERIC = [("help", "Display available options (--help-hidden for more)", False),
            ("help-hidden", "Display all available options", True),
            ("help-list", "Display list of available options (--help-list-hidden for more)", False),
            ("help-list-hidden", "Display list of all available options", True),
            ("version", "Display the version of this program", False)]
_BUNDLER = [("###", "Print any external commands that are to be executed instead of actually executing them - "
                    "for testing purposes.", False),
            ("allow-missing-bundles", "Create empty files if bundles are missing when unbundling.", False),
            ("bundle-align=<uint>", "Alignment of bundle for binary files", False),
            ("check-input-archive", "Check if input heterogeneous archive is valid in terms of TargetID rules.",
             False),
            ("compress", "Compress output file when bundling.", False),
            ("compression-level=<n>", "Specify the compression level (integer)", False),
            ("hip-openmp-compatible", "Treat hip and hipv4 offload kinds as compatible with openmp kind, and vice "
                                      "versa.", False),
            ("input=<string>", "Input file. Can be specified multiple times for multiple input files.", False),
            ("inputs=<string>", "[<input file>,...] (deprecated)", False),
            ("list", "List bundle IDs in the bundled file.", False),
            ("output=<string>", "Output file. Can be specified multiple times for multiple output files.", False),
            ("outputs=<string>", "[<output file>,...] (deprecated)", False),
            ("targets=<string>", "[<offload kind>-<target triple>,...]", False),
            ("type=<string>", """Type of the files to be bundled/unbundled.
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
                              ast  - clang AST file""", False),
            ("unbundle", "Unbundle bundled file into several output files.", False),
            ("verbose", "Print debug information.", False)]


def help_text(prog: str, style: str = "help") -> str:
    """LLVM's `cl` help for `--help`, `--help-hidden`, `--help-list` or `--help-list-hidden`."""
    hidden = style.endswith("hidden")

    def lines(options) -> str:
        return "".join(f"  --{name:<21} - {text}\n" for name, text, is_hidden in options if hidden or not is_hidden)

    text = _OVERVIEW.format(prog=prog)
    if style.startswith("help-list"):
        # The flat list hides `--help-list` itself unless hidden options are shown (as LLVM's `cl`).
        options = [(n, t, h or n == "help-list") for n, t, h in _GENERIC + _BUNDLER]
        return text + lines(sorted(options, key=lambda o: o[0].lower()))
    return text + "\nGeneric Options:\n\n" + lines(_GENERIC) + "\nclang-offload-bundler options:\n\n" + lines(_BUNDLER)


# `-###` is a dry run, as in LLVM: the external commands LLVM would run (llvm-objcopy, for objects)
# are printed, and nothing is written.
_FLAGS = ("###", "unbundle", "list", "allow-missing-bundles", "check-input-archive", "compress", "hip-openmp-compatible",
          "verbose", "help", "h", "help-hidden", "help-list", "help-list-hidden", "version")
# `-budget=` is this tool's own (docs/reliability.md); LLVM's help has no line for it, nor does ours.
_VALUES = ("type", "input", "output", "bundle-align", "compression-level", "budget")
_COMMA_LISTS = ("targets", "inputs", "outputs")
_OPTIONS = ([Option(n) for n in _FLAGS] + [Option(n, value=True) for n in _VALUES]
            + [Option(n, value=True, comma_list=True) for n in _COMMA_LISTS])
PARSER = ArgumentParser(PROG, _OPTIONS, style="llvm", positionals=False)


def invoked_as(argv0: str | None = None) -> str:
    """The name the program was started by, as the user typed it (`command_line.invoked_as`), as
    LLVM's tools name themselves in help and errors, so that a link named `clang-offload-bundler`
    speaks as one; `PROG` when run as a module."""
    return _invoked_as(PROG, argv0)


def _llvm_integer(name: str, text: str, signed: bool) -> int:
    """An option value as LLVM's `cl::opt<unsigned>` / `cl::opt<int>` parses it
    (`StringRef::getAsInteger(0, ...)`: radix from the prefix, `0x` / `0b` / `0o` / a leading `0`
    for octal, no sign on an unsigned, no blanks, and the value must fit in 32 bits)."""
    body = text[1:] if signed and text.startswith("-") else text
    digits, radix = body, 10
    lowered = body.lower()
    if lowered.startswith("0x"):
        digits, radix = body[2:], 16
    elif lowered.startswith("0b"):
        digits, radix = body[2:], 2
    elif body.startswith("0o"):
        digits, radix = body[2:], 8
    elif len(body) > 1 and body[0] == "0" and body[1].isdigit():
        digits, radix = body[1:], 8
    value = None
    if digits and digits.isascii() and digits.isalnum():
        try:
            value = int(digits, radix)
        except ValueError:
            value = None
    if value is not None and body is not text:
        value = -value
    low, high = (-(1 << 31), (1 << 31) - 1) if signed else (0, (1 << 32) - 1)
    if value is None or not low <= value <= high:
        raise OptionError(f"for the --{name} option: '{text}' value invalid for {'integer' if signed else 'uint'} "
                         f"argument!")
    return value


def run(argv: list[str], env=os.environ, argv0: str = PROG) -> int:
    """The command line `argv` (without the program name); `argv0` is the name it was invoked by."""
    # LLVM's option errors say "Try: '<argv[0]> --help'".
    opts = (PARSER if argv0 == PROG else ArgumentParser(argv0, _OPTIONS, style="llvm", positionals=False)).parse(argv)
    with budget.run(budget.from_option(opts.values["budget"])):
        return _run(opts, env, os.path.basename(argv0) or PROG, argv0)


def _run(opts, env, prog: str, argv0: str) -> int:
    flags, values = opts.flags, opts.values
    for style in ("help-list-hidden", "help-list", "help-hidden", "help", "h"):
        if flags.get(style):
            sys.stdout.write(help_text(prog, "help" if style == "h" else style))
            return 0
    if flags.get("version"):
        sys.stdout.write(f"{prog} {VERSION} (offload-tool; drop-in for clang-offload-bundler 19)\n")
        return 0
    # Like LLVM's cl::opt, a repeated option keeps its last value; values are parsed (and refused)
    # before the required options are missed, as LLVM's parser does.
    bundle_align = _llvm_integer("bundle-align", values["bundle-align"][-1], False) if values["bundle-align"] else 1
    level = (_llvm_integer("compression-level", values["compression-level"][-1], True)
             if values["compression-level"] else None)
    if not values["type"]:
        raise OptionError("for the --type option: must be specified at least once!")  # cl::Required
    files_type = values["type"][-1]
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
        sys.stderr.write(f"{argv0}: warning: -inputs is deprecated, use -input instead\n")
        inputs += values["inputs"]
    if values["output"] and values["outputs"]:
        raise UsageError("-outputs and -output cannot be used together, use only -output instead")
    if values["outputs"]:
        sys.stderr.write(f"{argv0}: warning: -outputs is deprecated, use -output instead\n")
        outputs += values["outputs"]

    from ..ops import bundler_api

    dry_run = None
    if flags.get("###"):  # only then: the plan printer is not start-up cost of every run
        from ..ops.dry_run import DryRun

        dry_run = DryRun(argv0, env=env)

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
        from ..printable import printable  # an ID from a hostile file must not forge lines

        sys.stdout.write("".join(printable(i) + "\n" for i in ids))
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
                             check_input_archive=check_archive, verbose=verbose, env=env, dry_run=dry_run)
    else:
        bundler_api.bundle(files_type, targets, inputs, outputs[0], bundle_align=bundle_align, compress=compress,
                           compression_level=level,
                           hip_openmp_compatible=flags.get("hip-openmp-compatible", False), verbose=verbose,
                           env=env, dry_run=dry_run)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns (and exits with) the status."""
    args = sys.argv[1:] if argv is None else argv
    argv0 = invoked_as() if argv is None else PROG
    return run_command(argv0, lambda: run(args, argv0=argv0))


if __name__ == "__main__":
    sys.exit(main())
