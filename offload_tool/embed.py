"""Embedding an offload package into a host object: the `.llvm.offloading` section.

This is what `clang -cc1 -fembed-offload-object=<package>` does at compile time, done afterwards
as a build step of its own, so that device code for one architecture can be rebuilt and
re-embedded without recompiling the host code.  The section matches clang's: type
`SHT_LLVM_OFFLOADING` (0x6fff4c0b), flags `SHF_EXCLUDE` only, alignment 8; `clang-linker-wrapper` finds it by type and the static linker drops it."""

from __future__ import annotations

import sys
from contextlib import ExitStack
from typing import BinaryIO

from .command_line import ArgumentParser, Option, run_command
from .errors import ElfError, OffloadBinaryError, UsageError
from .fileio import atomic_output, open_input
from .offload_binary import OFFLOADING_SECTION, read_offload_binaries

__all__ = ["embed_offload_package", "embed_files", "run", "main", "PROG", "OFFLOADING_SECTION", "SECTION_ALIGN"]

SECTION_ALIGN = 8
PROG = "offload-embed"


def _check_package(package) -> None:
    try:
        images = read_offload_binaries(package)
    except OffloadBinaryError as exc:
        raise OffloadBinaryError(f"package is not a valid offload binary: {exc}") from None
    if not images:
        raise OffloadBinaryError("package is empty (no offload binaries to embed)")


def embed_offload_package(host_object, package, out: BinaryIO) -> None:
    """Write `host_object` (an ELF relocatable object, bytes-like) with `package` added as its
    `.llvm.offloading` section to `out`.

    `package` must be one or more OffloadBinaries back to back (what `offload-packager -o` writes).
    A host object that already carries offload images is refused: the linker wrapper would link
    both sets, which is never what a build step that embeds "the" package means."""
    from . import elf

    if not elf.is_elf(host_object):
        raise ElfError("host object is not an ELF file")
    etype = elf.elf_type(host_object)
    if etype not in ("ET_REL", 1):
        raise ElfError(f"host object is not a relocatable object (ELF type {etype}); embed before linking")
    _check_package(package)
    for sec in elf.read_sections(host_object):
        if sec.sh_type == elf.SHT_LLVM_OFFLOADING or sec.name == OFFLOADING_SECTION:
            raise ElfError(f"host object already has an offloading section '{sec.name}' "
                           f"(at file offset {sec.offset:#x}); compile it with --offload-host-only")
    section = elf.NewSection(OFFLOADING_SECTION, package, elf.SHT_LLVM_OFFLOADING, elf.SHF_EXCLUDE, SECTION_ALIGN)
    elf.add_sections(host_object, [section], out)


def embed_files(host_path: str, package_paths: list[str], output: str, *, empty_host: bool = False) -> None:
    """Embed the concatenation of `package_paths` into the object at `host_path`; write `output` atomically.

    With `empty_host`, the packages go into an empty object shaped like `host_path` (same ELF
    class, byte order and machine) instead: a carrier of device images with no host code."""
    if not package_paths:
        raise UsageError("no package given")
    with ExitStack() as stack:
        views = [stack.enter_context(open_input(p)) for p in package_paths]
        # One package (the usual case) is embedded straight from its mapping, without a copy.
        package = views[0] if len(views) == 1 else b"".join(views)
        host = stack.enter_context(open_input(host_path))
        if empty_host:
            from . import elf

            host = elf.empty_relocatable_like(host)
        with atomic_output(output) as out:
            embed_offload_package(host, package, out)


USAGE = """usage: {prog} [--empty-host] HOST.o PACKAGE [PACKAGE...] -o OUT.o

Add PACKAGE (OffloadBinaries, e.g. from offload-packager -o) to the ELF relocatable object HOST.o
as its .llvm.offloading section (SHT_LLVM_OFFLOADING, SHF_EXCLUDE, align 8) and write OUT.o.
Several packages are concatenated in the order given.

  --empty-host   put the packages in an empty object of HOST.o's ELF class and machine
                 instead (a carrier of device images without host code)
"""


_OPTIONS = [Option("empty-host"), Option("h"), Option("help"), Option("o", value=True, dest="output"),
            Option("output", value=True)]


def run(argv: list[str], prog: str = PROG) -> int:
    """The embed command line (`prog` names the command in messages)."""
    opts = ArgumentParser(prog, _OPTIONS).parse(argv)
    if opts.flag("h", "help"):
        sys.stdout.write(USAGE.format(prog=prog))
        return 0
    output = opts.last("output")
    if output is None:
        raise UsageError("no output file given (-o OUT.o)")
    if len(opts.positionals) < 2:
        raise UsageError("expected a host object and at least one package")
    embed_files(opts.positionals[0], opts.positionals[1:], output, empty_host=opts.flag("empty-host"))
    return 0


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    """`python -m offload_tool.embed HOST.o PACKAGE -o OUT.o`"""
    argv = sys.argv[1:] if argv is None else list(argv)
    return run_command(prog, lambda: run(argv, prog))


if __name__ == "__main__":
    sys.exit(main())
