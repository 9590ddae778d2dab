"""What kind of file is this?  One answer for the whole library, from the leading bytes only.

`identify` is LLVM's `llvm::identify_magic` for the kinds offloading meets, plus the containers
LLVM recognises elsewhere (text bundles, NVIDIA fat binaries, kpack archives).  Every operation
that dispatches on content (extraction, inspection, bundling, archive symbols, verification) asks
it.  It knows no magic number itself: each format module declares its own in its `FORMATS`
(`kinds.Format`: magic numbers, or a rule), and `FORMAT_MODULES` below, the one table of format
modules, is what `identify`, the inspector and extraction read.  A new container format is a new
module with its `FORMATS` and one row here.

This is the top of the formats tier: it imports the format modules, so they never import it (they
take their magic numbers and `FileKind` from `kinds`, re-exported here for the operations).  What
the bundler asks beyond the kind (is it an object file? which handler reads it?) is answered by
`ops.bundler_handlers`."""

from __future__ import annotations

from . import archive, bitcode, bundle, ccob, coff, elf, fatbin, kinds, kpack, offload_binary
from .kinds import (AR_MAGIC, BC_MAGIC, BC_WRAPPER_MAGIC, BUNDLE_MAGIC, CCOB_MAGIC, COFF_MACHINES, ELF_MAGIC,
                    FATBIN_MAGIC, KPACK_MAGIC, OFFLOAD_BINARY_MAGIC, TEXT_BUNDLE_COMMENTS, TEXT_BUNDLE_START,
                    THIN_AR_MAGIC, FileKind, Format)

__all__ = ["FileKind", "Format", "identify", "identify_format", "format_of_kind", "formats", "FORMAT_MODULES",
           "COFF_MACHINES", "TEXT_BUNDLE_COMMENTS", "TEXT_BUNDLE_START", "ELF_MAGIC", "AR_MAGIC", "THIN_AR_MAGIC",
           "OFFLOAD_BINARY_MAGIC", "BC_MAGIC", "BC_WRAPPER_MAGIC", "CCOB_MAGIC", "BUNDLE_MAGIC", "FATBIN_MAGIC",
           "KPACK_MAGIC"]

#: The format modules, each declaring its kinds in `FORMATS`.  Magic numbers are matched whatever
#: the order; the rules (`Format.recognise`) are asked in this order, so a rule that accepts more
#: (COFF's two-byte machine numbers) comes after the ones it could shadow (bundles).
FORMAT_MODULES = (offload_binary, bundle, ccob, fatbin, archive, kpack, elf, bitcode, kinds, coff)


class _Index:
    """`FORMAT_MODULES` arranged for `identify`: magic numbers by their first 4 bytes (one dict
    lookup per call, as archives and bundles identify thousands of members and payloads; shorter
    magics apart), then the rules.  Rebuilt when the table is replaced (a test adding a toy format)."""

    def __init__(self, modules) -> None:
        self.modules = modules
        self.formats: tuple[Format, ...] = tuple(fmt for module in modules for fmt in module.FORMATS)
        by_head: dict[bytes, list[tuple[bytes, Format]]] = {}
        short: list[tuple[bytes, Format]] = []
        for fmt in self.formats:
            for magic in fmt.magics:
                (by_head.setdefault(magic[:4], []) if len(magic) >= 4 else short).append((magic, fmt))
        # Longest first where one magic is a prefix of another.
        self.by_head = {head: tuple(sorted(found, key=lambda m: -len(m[0]))) for head, found in by_head.items()}
        self.short = tuple(short)
        self.rules = tuple(fmt for fmt in self.formats if fmt.recognise is not None)
        self.by_kind = {}
        for fmt in self.formats:
            self.by_kind.setdefault(fmt.kind, fmt)


_index = _Index(FORMAT_MODULES)


def _current() -> _Index:
    global _index
    if _index.modules is not FORMAT_MODULES:
        _index = _Index(FORMAT_MODULES)
    return _index


def formats() -> tuple[Format, ...]:
    """Every declared format, in the table's order."""
    return _current().formats


def identify_format(buf) -> Format | None:
    """The declaration of the kind of file whose contents start `buf`, or None if unknown."""
    index = _current()
    head = bytes(buf[:32])
    for magic, fmt in index.by_head.get(head[:4], index.short):
        if head.startswith(magic):
            return fmt
    for fmt in index.rules:
        if fmt.recognise(head, buf):
            return fmt
    return None


def identify(buf) -> FileKind:
    """The kind of the file whose contents start `buf` (see `FileKind`; a format module added
    since may declare a kind of its own)."""
    fmt = identify_format(buf)
    return FileKind.UNKNOWN if fmt is None else fmt.kind


def format_of_kind(kind) -> Format | None:
    """The declaration of `kind` (the first, where a kind has several)."""
    return _current().by_kind.get(kind)
