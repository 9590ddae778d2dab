"""Declared binary layouts: one table of `(field, struct code)` per header, named as the format's
specification names the fields, used by both the reader and the writer of that format.

A `Layout` is a `struct.Struct` (so `size`, `pack`, `unpack_from` work as usual) that also knows
its field names: `read` returns a namedtuple and checks that the header fits before unpacking,
`build` packs by field name, `offset_of` gives a field's offset for messages.  Declaring the
layout once keeps reader and writer from drifting apart, and lets every error say which field at
which offset is wrong (`field_error`), instead of `struct.error` or a bare tuple index."""

from __future__ import annotations

import functools
import struct
from collections import namedtuple

from ..errors import OffloadError

__all__ = ["Layout", "field_error"]


def field_error(error: type[OffloadError], offset: int, field: str, message: str,
                where: str = "") -> OffloadError:
    """The library's one-line message for a bad field: `[where: ]offset 0x..: field: message`."""
    prefix = f"{where}: " if where else ""
    return error(f"{prefix}offset {offset:#x}: {field}: {message}")


class Layout(struct.Struct):
    """A named struct layout: `Layout("Header", [("magic", "4s"), ("version", "I")], "<")`."""

    def __init__(self, name: str, fields: list[tuple[str, str]], byte_order: str = "<"):
        if byte_order not in "<>":
            raise ValueError("a layout needs an explicit byte order ('<' or '>')")
        super().__init__(byte_order + "".join(code for _, code in fields))
        self.name = name
        self.fields = tuple(f for f, _ in fields)
        self._offsets = {}
        self._sizes = {}
        pos = 0
        for field, code in fields:  # explicit byte orders have no padding: offsets add up
            self._offsets[field] = pos
            self._sizes[field] = struct.calcsize(byte_order + code)
            pos += self._sizes[field]

    @functools.cached_property
    def record(self):
        """The namedtuple `read` returns, made on first use (a program starts without making one
        for each of the dozens of layouts its imports declare)."""
        return namedtuple("".join(c if c.isalnum() else "_" for c in self.name), self.fields)

    def offset_of(self, field: str) -> int:
        """The byte offset of `field` inside the layout."""
        return self._offsets[field]

    def size_of(self, field: str) -> int:
        """The size in bytes of `field`."""
        return self._sizes[field]

    def read(self, buf, offset: int, error: type[OffloadError], where: str = ""):
        """The record at `offset` of `buf`, after checking that the whole layout lies inside it."""
        if offset < 0 or offset + self.size > len(buf):
            have = max(0, len(buf) - offset)
            raise field_error(error, offset, self.name, f"truncated ({have} of {self.size} bytes)", where)
        return self.record._make(self.unpack_from(buf, offset))

    def build(self, **fields) -> bytes:
        """The packed layout from its fields given by name (every field is required)."""
        return self.pack(*self.record(**fields))
