"""The jobs of a clang driver's `-###` listing, read back into argument lists.

The driver prints each job it would run on a line of its own, starting with a space, every
argument as `llvm::sys::printArg` quotes it: in double quotes, with `"`, `\\` and `$` escaped by a
backslash.  Lines that do not start with ` "` (the version, `Thread model:`, `InstalledDir:`,
warnings) are not jobs.  One reader serves every part of the tool that asks the driver what it
would run (the host-IR device jobs, the toolchain archive of sccache-dist); `shlex` is not one:
it keeps the backslash of an escaped `$` inside double quotes."""

from __future__ import annotations

import re

__all__ = ["parse_jobs"]

_ARG = re.compile(r'"((?:[^"\\]|\\.)*)"|(\S+)')
_ESCAPE = re.compile(r"\\(.)")


def parse_jobs(text: str) -> list[list[str]]:
    """The jobs of a `-###` listing (`text`: what the driver wrote to stderr), in order, each as
    its argument list (the program first)."""
    return [[_ESCAPE.sub(r"\1", m.group(1)) if m.group(1) is not None else m.group(2)
             for m in _ARG.finditer(line)]
            for line in text.splitlines() if line.startswith(' "')]
