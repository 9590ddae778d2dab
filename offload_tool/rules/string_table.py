"""`llvm::StringTableBuilder` (ELF kind) with `finalize()`: the string tables LLVM writes.

Both an OffloadBinary's string table and every ELF string table llvm-objcopy rebuilds come from
it, so one layout serves both: distinct strings sorted by their reversed bytes, largest first, so
that a string which ends the one stored before it is stored as that string's tail (tail merging);
a leading NUL, so "" is offset 0.  Byte-identical output depends on this exact order."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["string_table"]


def string_table(strings: Iterable[bytes]) -> tuple[bytes, dict[bytes, int]]:
    """The table's bytes and each string's offset in it."""
    out = bytearray(b"\0")
    offsets: dict[bytes, int] = {}
    previous = b""
    for s in sorted(set(strings) - {b""}, key=lambda s: s[::-1], reverse=True):
        if previous.endswith(s):
            offsets[s] = len(out) - len(s) - 1
            continue
        offsets[s] = len(out)
        out += s + b"\0"
        previous = s
    offsets[b""] = 0
    return bytes(out), offsets
