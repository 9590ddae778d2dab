"""MessagePack, read bounded: the table-of-contents encoding of ROCm's kpack files.

ROCm's kpack archives and the `.rocm_kpack_ref` markers of split host binaries store their
metadata as MessagePack (the msgpack-c and Python msgpack libraries write it).  Only reading is
needed, so this is a small decoder of the MessagePack specification's types, written so that a
crafted document cannot make it do unbounded work:

* every length is checked against the bytes left before anything is read or allocated;
* each array element and map pair is charged to the run's `entries` budget, each decoded string
  to its `names` budget, before it is decoded;
* nesting is bounded (`MAX_NESTING`), so a document of 100,000 `0x91` bytes is an error, not a
  `RecursionError`.

Strings are `str` (UTF-8, undecodable bytes kept with `surrogateescape`), `bin` values `bytes`,
maps `dict` (a key that is not hashable, such as an array, is an error), extension types an error:
no kpack writer produces them.

Why not the `msgpack` package's `Unpacker`: its `max_str_len`, `max_bin_len`, `max_array_len`
and `max_map_len` bound one value's lengths, and that much it would do, but (msgpack 1.2):
* its nesting limit is a constant of the C extension (1024 levels, `StackError` with an empty
  message), not a parameter, so `MAX_NESTING` could not be kept;
* its limits are per value, not the run's budget: nothing it decodes is charged to the
  `entries` and `names` budgets that bound all the documents one run reads, as every other
  parser of the library charges them;
* its errors name no offset or field (`FormatError` and `StackError` carry no message,
  `OutOfData` says "No more data to unpack."), where the library's errors say where in the
  file the bad byte is;
* it would be a compiled dependency for the hundred lines below."""

from __future__ import annotations

import struct

from .. import budget
from ..errors import MessagePackError

__all__ = ["MessagePackError", "read_msgpack", "MAX_NESTING"]

#: How deeply arrays and maps may nest (kpack's deepest document nests 4 levels).
MAX_NESTING = 64


_FIXED = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q",
          0xCA: ">f", 0xCB: ">d"}
_STR_LEN = {0xD9: ">B", 0xDA: ">H", 0xDB: ">I"}
_BIN_LEN = {0xC4: ">B", 0xC5: ">H", 0xC6: ">I"}
_ARRAY_LEN = {0xDC: ">H", 0xDD: ">I"}
_MAP_LEN = {0xDE: ">H", 0xDF: ">I"}


class _Reader:
    def __init__(self, view: memoryview, base: int, end: int, where: str) -> None:
        self.view, self.pos, self.base, self.end, self.where = view, base, base, end, where

    def fail(self, at: int, message: str) -> MessagePackError:
        return MessagePackError(f"{self.where}: offset {at:#x}: {message}")

    def take(self, n: int, what: str) -> memoryview:
        if n > self.end - self.pos:
            raise self.fail(self.pos, f"{what} of {n} bytes runs past the end ({self.end - self.pos} left)")
        out = self.view[self.pos:self.pos + n]
        self.pos += n
        return out

    def number(self, code: str, what: str):
        size = struct.calcsize(code)
        return struct.unpack(code, self.take(size, what))[0]

    def text(self, n: int, at: int) -> str:
        raw = self.take(n, "string")  # the length is checked before the string is charged or copied
        budget.charge("names", n, f"{self.where}: string at {at:#x}")
        return bytes(raw).decode("utf-8", "surrogateescape")

    def value(self, depth: int):
        at = self.pos
        tag = self.number(">B", "type byte")
        if tag <= 0x7F:
            return tag
        if tag >= 0xE0:
            return tag - 0x100
        if 0xA0 <= tag <= 0xBF:
            return self.text(tag & 0x1F, at)
        if 0x90 <= tag <= 0x9F:
            return self.array(tag & 0x0F, depth, at)
        if 0x80 <= tag <= 0x8F:
            return self.map(tag & 0x0F, depth, at)
        if tag == 0xC0:
            return None
        if tag in (0xC2, 0xC3):
            return tag == 0xC3
        if tag in _FIXED:
            return self.number(_FIXED[tag], "number")
        if tag in _STR_LEN:
            return self.text(self.number(_STR_LEN[tag], "string length"), at)
        if tag in _BIN_LEN:
            raw = self.take(self.number(_BIN_LEN[tag], "bin length"), "bin")
            budget.charge("names", len(raw), f"{self.where}: bin at {at:#x}")
            return bytes(raw)
        if tag in _ARRAY_LEN:
            return self.array(self.number(_ARRAY_LEN[tag], "array length"), depth, at)
        if tag in _MAP_LEN:
            return self.map(self.number(_MAP_LEN[tag], "map length"), depth, at)
        raise self.fail(at, f"type byte {tag:#04x} ({'extension' if tag >= 0xC7 else 'unused'}) is not read here")

    def nest(self, depth: int, at: int) -> int:
        if depth >= MAX_NESTING:
            raise self.fail(at, f"arrays and maps nested more than {MAX_NESTING} deep")
        return depth + 1

    def array(self, n: int, depth: int, at: int) -> list:
        depth = self.nest(depth, at)
        if n > self.end - self.pos:  # every element takes at least one byte
            raise self.fail(at, f"array of {n} elements cannot fit in the {self.end - self.pos} bytes left")
        budget.charge("entries", n, f"{self.where}: array at {at:#x}")
        return [self.value(depth) for _ in range(n)]

    def map(self, n: int, depth: int, at: int) -> dict:
        depth = self.nest(depth, at)
        if n > (self.end - self.pos) // 2:  # every pair takes at least two bytes
            raise self.fail(at, f"map of {n} pairs cannot fit in the {self.end - self.pos} bytes left")
        budget.charge("entries", n, f"{self.where}: map at {at:#x}")
        out = {}
        for _ in range(n):
            key_at = self.pos
            key = self.value(depth)
            try:
                out[key] = self.value(depth)
            except TypeError:
                raise self.fail(key_at, "map key is an array or a map") from None
        return out


def read_msgpack(buf, offset: int = 0, end: int | None = None, *, where: str = "msgpack") -> tuple[object, int]:
    """The MessagePack value at `offset` of `buf` (not reading at or past `end`) and the offset
    just after it.  Offsets in messages are from the start of `buf`."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    view = view.cast("B") if view.format != "B" else view
    end = len(view) if end is None else min(end, len(view))
    if not 0 <= offset <= end:
        raise MessagePackError(f"{where}: offset {offset:#x} is outside the {end} bytes available")
    reader = _Reader(view, offset, end, where)
    value = reader.value(0)
    return value, reader.pos
