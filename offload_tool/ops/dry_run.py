"""`clang-offload-bundler -###`: print the external commands LLVM would run, write nothing.

LLVM 19 edits objects by running `llvm-objcopy`; under `-###` it prints each command line to stderr
instead (every argument in double quotes, unescaped, one space apart) and runs nothing.  This tool
edits objects natively, so the lines are composed here exactly as LLVM composes them, which keeps
scripts that use `-###` as a dry run (or grep its output) working:

* bundling `-type=o`: `--add-section=__CLANG_OFFLOAD_BUNDLE__<id>=<file>` and
  `--set-section-flags=__CLANG_OFFLOAD_BUNDLE__<id>=readonly,exclude` per target in `-targets`
  order, the host's file being a temporary one-byte file, then `-- <host input> <output>`;
* unbundling an object's host entry: `--regex --remove-section=__CLANG_OFFLOAD_BUNDLE__.* --
  <input> <temporary file>`.

`llvm-objcopy` is looked up as LLVM does: first in the directory of the program as invoked
(argv[0] if that names an existing file, else the running program), then on PATH.  Temporary names
follow LLVM's `createTemporaryFile("clang-offload-bundler", "tmp")` (TMPDIR, TMP, TEMP, TEMPDIR, else
/tmp); none is created."""

from __future__ import annotations

import os
import secrets
import shutil
import sys
from collections.abc import Mapping, Sequence

from ..errors import OffloadError
from ..formats.objbundle import bundle_section_name
from ..records import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

__all__ = ["DryRun", "find_objcopy", "command_line", "temporary_name"]


def find_objcopy(argv0: str, env: Mapping[str, str] = os.environ) -> str:
    """The `llvm-objcopy` LLVM's bundler would run when invoked as `argv0`."""
    program = argv0 if os.path.exists(argv0) else (shutil.which(argv0, path=env.get("PATH", os.defpath))
                                                  or os.path.realpath(sys.argv[0] or sys.executable))
    beside = os.path.join(os.path.dirname(program), "llvm-objcopy")
    if os.path.dirname(program) and os.path.isfile(beside) and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("llvm-objcopy", path=env.get("PATH", os.defpath))
    if found is None:
        raise OffloadError("unable to find 'llvm-objcopy' in path")
    return found


def temporary_name(env: Mapping[str, str] = os.environ) -> str:
    """A name of LLVM's temporary-file shape (`<tmp>/clang-offload-bundler-xxxxxx.tmp`)."""
    directory = next((env[v] for v in ("TMPDIR", "TMP", "TEMP", "TEMPDIR") if env.get(v)), "/tmp")
    return os.path.join(directory, f"clang-offload-bundler-{secrets.token_hex(3)}.tmp")


def command_line(args: Sequence[str]) -> str:
    """One command as LLVM's `-###` prints it: each argument in double quotes, one space apart."""
    return " ".join(f'"{a}"' for a in args) + "\n"


class DryRun(Record):
    """What `-###` needs: the name the bundler was invoked by, where to print, the environment."""

    __slots__ = ("argv0", "stream", "env")

    def __init__(self, argv0: str, stream: TextIO | None = None, env: Mapping[str, str] | None = None) -> None:
        self.argv0 = argv0
        self.stream = sys.stderr if stream is None else stream
        self.env = os.environ if env is None else env

    def add_sections(self, ids: Sequence[str], inputs: Sequence[str], host_index: int, output: str) -> None:
        """The objcopy call that bundles `inputs` (one per bundle entry ID) into the host object."""
        args = [find_objcopy(self.argv0, self.env)]
        for n, (bundle_entry_id, path) in enumerate(zip(ids, inputs)):
            section = bundle_section_name(bundle_entry_id)
            payload = temporary_name(self.env) if n == host_index else path
            args += [f"--add-section={section}={payload}", f"--set-section-flags={section}=readonly,exclude"]
        args += ["--", inputs[host_index], output]
        self.stream.write(command_line(args))

    def remove_sections(self, input: str) -> None:
        """The objcopy call that extracts the host object from an object bundle."""
        args = [find_objcopy(self.argv0, self.env), "--regex", f"--remove-section={bundle_section_name('.*')}", "--",
                input, temporary_name(self.env)]
        self.stream.write(command_line(args))
