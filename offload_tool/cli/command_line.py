"""The command-line contract every CLI of the library shares: one argument parser, one error line.

Two option spellings exist because the drop-ins must accept what they replace:

* `llvm` (offload-bundler, offload-packager): LLVM's `cl` conventions, `-opt` or `--opt`,
  `-opt=value` or `-opt value`, a flag may say `=true`/`=0`, LLVM's wording for mistakes;
* `gnu` (offload-tool and its commands, embed): `--opt=value` / `--opt value`, `-o VALUE` / `-oVALUE`.

Whatever goes wrong, a CLI prints exactly one line, `<prog>: error: <message>`, and exits 1:
an `OffloadError`, bad usage, an interrupt, memory exhaustion, a closed pipe or a failed write,
and even a bug (named as an internal error).  Never a traceback: build tools show the line.

The drop-ins name themselves as LLVM 19's tools do (checked against clang-offload-bundler-19 and
clang-offload-packager-19): what LLVM's option parser reports (`OptionError`: an unknown option,
a bad or missing value, a required option not given) is `<basename of argv[0]>: <message>`,
without `error:`; every other error is `<argv[0]>: error: <message>`, argv[0] as the user typed
it (`clang-offload-bundler` when found on PATH, `/usr/bin/clang-offload-bundler` when run by
that path).  `invoked_as` recovers what the user typed (see there)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable

from ..errors import OffloadError, OptionError, UsageError
from ..printable import printable
from ..records import FrozenRecord, Record

__all__ = ["Option", "Parsed", "ArgumentParser", "run_command", "one_line", "error_line", "llvm_version_argument",
           "invoked_as"]

_TRUE = ("true", "TRUE", "True", "1")
_FALSE = ("false", "FALSE", "False", "0")


class Option(FrozenRecord):
    """One option: its name without dashes; `value` if it takes one; `comma_list` if a value is
    split on commas (LLVM's `cl::CommaSeparated`); `dest` where another spelling of the same
    option keeps its values (`-o` and `--output`)."""

    __slots__ = ("name", "value", "comma_list", "dest")

    def __init__(self, name: str, value: bool = False, comma_list: bool = False, dest: str = "") -> None:
        self._set("name", name)
        self._set("value", value)
        self._set("comma_list", comma_list)
        self._set("dest", dest)

    @property
    def key(self) -> str:
        return self.dest or self.name


class Parsed(Record):
    """What the command line said: flags given, every value of each valued option (in order),
    and the positional arguments."""

    __slots__ = ("flags", "values", "positionals")

    def __init__(self, flags: dict[str, bool] | None = None, values: dict[str, list[str]] | None = None,
                 positionals: list[str] | None = None) -> None:
        self.flags = {} if flags is None else flags
        self.values = {} if values is None else values
        self.positionals = [] if positionals is None else positionals

    def flag(self, *names: str) -> bool:
        return any(self.flags.get(n, False) for n in names)

    def given(self, name: str) -> bool:
        return name in self.flags

    def last(self, name: str, default=None):
        """The last value of `name` (a repeated option keeps its last value, as LLVM's `cl::opt`)."""
        values = self.values.get(name)
        return values[-1] if values else default

    def required(self, name: str, missing: str) -> str:
        """The last value of `name`; a `UsageError` saying `missing` when it was not given."""
        value = self.last(name)
        if value is None:
            raise UsageError(missing)
        return value


def parse_or_help(prog: str, options: Iterable["Option"], usage: str, argv: Iterable[str]) -> Parsed | None:
    """A subcommand's options (GNU style, with `-h`/`--help` among `options`); None when help was
    asked for (then `usage`, formatted with `prog`, is printed)."""
    opts = ArgumentParser(prog, options).parse(argv)
    if opts.flag("h", "help"):
        sys.stdout.write(usage.format(prog=prog))
        return None
    return opts


class ArgumentParser:
    """Parses argv for one program (see the module docstring for the two styles)."""

    def __init__(self, prog: str, options: Iterable[Option], *, style: str = "gnu", positionals: bool = True,
                 max_positionals: int | None = None):
        if style not in ("llvm", "gnu"):
            raise ValueError(f"unknown option style {style!r}")
        self.prog = prog
        self.options = {o.name: o for o in options}
        self.style = style
        self.positionals = positionals
        self.max_positionals = max_positionals
        # LLVM's `cl` mistakes are printed its way (`OptionError`); the GNU style's as any error.
        self.error = OptionError if style == "llvm" else UsageError

    def parse(self, argv: Iterable[str]) -> Parsed:
        argv = list(argv)
        parsed = Parsed(values={o.key: [] for o in self.options.values() if o.value})
        i = 0
        only_positionals = False
        while i < len(argv):
            arg = argv[i]
            i += 1
            if only_positionals or arg == "-" or not arg.startswith("-") or (arg == "--" and not self.positionals):
                self._positional(parsed, arg)
            elif arg == "--":
                only_positionals = True
            elif self.style == "llvm":
                i = self._llvm_option(parsed, argv, i, arg)
            else:
                i = self._gnu_option(parsed, argv, i, arg)
        if self.max_positionals is not None and len(parsed.positionals) > self.max_positionals:
            raise self.error(f"Too many positional arguments specified! Can specify at most {self.max_positionals} "
                             f"positional arguments")
        return parsed

    def _positional(self, parsed: Parsed, arg: str) -> None:
        if not self.positionals:
            if self.style == "llvm":  # LLVM's `cl` takes a stray word for an option it does not know
                raise OptionError(f"Unknown command line argument '{arg}'.  Try: '{self.prog} --help'")
            raise UsageError(f"unexpected argument '{arg}' (options start with '-'; see --help)")
        parsed.positionals.append(arg)

    def _take_value(self, parsed: Parsed, option: Option, argv: list[str], i: int, value: str | None,
                    missing: str) -> int:
        """Store the option's value (given inline, or the next argument); return the next index."""
        if value is None:
            if i >= len(argv):
                raise self.error(missing)
            value, i = argv[i], i + 1
        parsed.values[option.key].extend(value.split(",") if option.comma_list else [value])
        return i

    def _llvm_option(self, parsed: Parsed, argv: list[str], i: int, arg: str) -> int:
        body = arg[2:] if arg.startswith("--") else arg[1:]
        name, eq, value = body.partition("=")
        option = self.options.get(name)
        if option is None:
            raise OptionError(f"Unknown command line argument '{arg}'.  Try: '{self.prog} --help'")
        dashes = "-" if len(name) == 1 else "--"
        if not option.value:
            if eq and value not in _TRUE + _FALSE:
                raise OptionError(f"for the {dashes}{name} option: '{value}' is invalid value for boolean argument! "
                                 f"Try 0 or 1")
            parsed.flags[name] = not eq or value in _TRUE
            return i
        return self._take_value(parsed, option, argv, i, value if eq else None,
                                f"for the {dashes}{name} option: requires a value!")

    def _gnu_option(self, parsed: Parsed, argv: list[str], i: int, arg: str) -> int:
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
        else:  # a short option, its value attached (`-oFILE`) or the next argument
            name, value = arg[1:2], arg[2:]
            eq = "=" if value else ""
        option = self.options.get(name)
        if option is None or (not option.value and eq):
            raise UsageError(f"unknown option '{arg}' (see '{self.prog} --help')")
        if not option.value:
            parsed.flags[name] = True
            return i
        return self._take_value(parsed, option, argv, i, value if eq else None, f"option '{arg}' needs a value")


def llvm_version_argument(text: str | None, style: str = "gnu") -> int | None:
    """A `--llvm-version` value, checked against the releases whose encodings the library knows
    (None when not given); `style` words the message as the CLI's option style does."""
    from ..formats.offload_binary import SUPPORTED_LLVM_VERSIONS

    if text is None:
        return None
    try:
        version = int(text)
    except ValueError:
        if style == "gnu":
            raise UsageError(f"invalid --llvm-version '{text}'") from None
        raise OptionError(f"for the --llvm-version option: '{text}' value invalid for integer argument!") from None
    if version not in SUPPORTED_LLVM_VERSIONS:
        given = f" {version}" if style == "gnu" else f"={text}"
        raise UsageError(f"unsupported --llvm-version{given} (supported: "
                         f"{', '.join(map(str, SUPPORTED_LLVM_VERSIONS))})")
    return version


def one_line(text) -> str:
    """A message as one line (never empty): surrounding blank space removed, and every control
    character inside escaped (`printable`), so a name taken from a file cannot start a new line or
    drive the terminal."""
    return printable(str(text).strip()) or "unknown error"


def error_line(prog: str, message, label: str | None = "error") -> None:
    """Print `<prog>: error: <message>` to stderr, as one line (`<prog>: <message>` when `label` is
    None). A closed or full stderr is no reason for a traceback: the exit status still says what
    happened."""
    try:
        stderr = sys.stderr
        if stderr is not None:
            stderr.write(f"{prog}: {label + ': ' if label else ''}{one_line(message)}\n")
            stderr.flush()
    except (OSError, ValueError):
        pass


def _message(exc: BaseException) -> str:
    from ..fileio import Terminated

    if isinstance(exc, OffloadError):
        return str(exc)
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, Terminated):
        return str(exc)
    if isinstance(exc, MemoryError):
        return "out of memory"
    if isinstance(exc, RecursionError):
        return "input nested too deeply"
    if isinstance(exc, BrokenPipeError):
        _silence_stdout()
        return "broken pipe while writing to standard output"
    if isinstance(exc, OSError):
        name = exc.filename if exc.filename is not None else ""
        return f"'{name}': {exc.strerror or exc}" if name else str(exc.strerror or exc)
    return f"internal error: {type(exc).__name__}: {exc}"


def invoked_as(default: str, argv0: str | None = None) -> str:
    """The name the program was started by, as the user typed it (LLVM's tools print argv[0]);
    `default` when run as a module (`python -m`, argv[0] a `.py` file) or with no argv[0].

    A console script is a `#!python` script, and the kernel hands the interpreter the path the
    shell executed, not the word the user typed: a command found on PATH arrives as the full
    path of the file found (`offload-bundler` -> `/venv/bin/offload-bundler`), while a path
    typed with a slash (`./clang-offload-bundler`, `/opt/x/clang-offload-bundler`) arrives as
    typed.  (`$_` is set by some shells only, and to the same full path; /proc/self/cmdline and
    the auxiliary vector hold the same path.)  So the rule: an absolute argv[0] that is exactly
    what a PATH search for its base name finds is taken to be that name, typed bare; any other
    argv[0] is kept.  The one case it gets wrong: the full path of the very file PATH finds,
    typed out, is shown as the bare name."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    if not argv0 or argv0 == "-c" or argv0.endswith((".py", ".pyc")):
        return default
    if os.path.isabs(argv0):
        name = os.path.basename(argv0)
        try:
            import shutil  # here: shutil costs every command's start-up a few milliseconds
            found = shutil.which(name)
            if found and os.path.isabs(found) and os.path.samefile(found, argv0) and \
                    os.path.dirname(os.path.normpath(found)) == os.path.dirname(os.path.normpath(argv0)):
                return name
        except (OSError, ValueError):
            pass
    return argv0


def run_command(prog: str, body: Callable[[], int | None]) -> int:
    """Run a CLI's `body` under the error contract; return its exit status (0 if it returns None).
    `prog` is the name for errors (argv[0] for the drop-ins); an `OptionError` is printed as LLVM's
    option parser prints it, `<basename of prog>: <message>`.

    SIGTERM and SIGHUP end the run as SIGINT does (`fileio.removing_temp_files`): the outputs in
    progress are discarded and the one error line says which signal it was."""
    from ..fileio import removing_temp_files

    if sys.stdout is None:
        sys.stdout = _ClosedStdout()
    try:
        with removing_temp_files():
            status = body() or 0
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - the contract: one line, never a traceback
        try:
            message = _message(exc)
        except BaseException:  # noqa: BLE001 - even formatting the message can run out of memory
            message = f"{type(exc).__name__}"
        if isinstance(exc, OptionError):
            error_line(os.path.basename(prog) or prog, message, label=None)
        else:
            error_line(prog, message)
        status = 1
    try:
        sys.stdout.flush()
    except (OSError, ValueError) as exc:
        if status == 0:
            error_line(prog, f"error writing to standard output: {getattr(exc, 'strerror', None) or exc}")
        status = 1
        _silence_stdout()
    return status


class _ClosedStdout:
    """Stands for a closed standard output (`>&-`): writing to it is an error, as in LLVM's tools
    (not an `AttributeError` on None)."""

    def write(self, data):
        raise OffloadError("cannot write to standard output: it is closed")

    def flush(self) -> None:
        pass

    @property
    def buffer(self):
        return self

    def fileno(self) -> int:
        raise OSError(9, "standard output is closed")


def _silence_stdout() -> None:
    """After a broken pipe (`-list | head`), point stdout at /dev/null so that the interpreter's final
    flush does not print a traceback."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
