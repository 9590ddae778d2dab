"""COFF objects: the section table, as far as finding offload sections needs it.

Layouts as in the PE/COFF specification (`IMAGE_FILE_HEADER`, `IMAGE_SECTION_HEADER`); long
section names (`/<decimal>`) are resolved through the string table that follows the symbol
table.  Every offset and size is checked against the buffer; errors name the field."""

from __future__ import annotations

from .. import budget
from ..errors import OffloadError
from .kinds import COFF_MACHINES, FileKind, Format, OffloadBinariesAt
from .layout import Layout
from .offload_binary import OFFLOADING_SECTION
from ..records import Record

__all__ = ["CoffSection", "read_sections", "FILE_HEADER", "SECTION_HEADER", "SYMBOL_SIZE"]

FILE_HEADER = Layout("IMAGE_FILE_HEADER", [
    ("Machine", "H"), ("NumberOfSections", "H"), ("TimeDateStamp", "I"), ("PointerToSymbolTable", "I"),
    ("NumberOfSymbols", "I"), ("SizeOfOptionalHeader", "H"), ("Characteristics", "H")])
SECTION_HEADER = Layout("IMAGE_SECTION_HEADER", [
    ("Name", "8s"), ("VirtualSize", "I"), ("VirtualAddress", "I"), ("SizeOfRawData", "I"),
    ("PointerToRawData", "I"), ("PointerToRelocations", "I"), ("PointerToLinenumbers", "I"),
    ("NumberOfRelocations", "H"), ("NumberOfLinenumbers", "H"), ("Characteristics", "I")])
SYMBOL_SIZE = 18  # IMAGE_SYMBOL
_MAX_LONG_NAME = 4096


class CoffSection(Record):
    """One section: its (long names resolved) name and where its raw data lies in the file."""

    __slots__ = ("name", "offset", "size")

    def __init__(self, name: str, offset: int, size: int) -> None:
        self.name = name
        self.offset = offset
        self.size = size


def read_sections(buf, name: str) -> list[CoffSection]:
    """Every section of the COFF object `buf` (`name` is used in messages), bounds-checked."""
    if len(buf) < FILE_HEADER.size:
        raise OffloadError(f"{name}: COFF header is truncated")
    hdr = FILE_HEADER.read(buf, 0, OffloadError, name)
    nsections = hdr.NumberOfSections
    table = FILE_HEADER.size + hdr.SizeOfOptionalHeader
    if table + SECTION_HEADER.size * nsections > len(buf):
        raise OffloadError(f"{name}: COFF section table ({nsections} sections at {table:#x}) runs past the end")
    strtab = hdr.PointerToSymbolTable + SYMBOL_SIZE * hdr.NumberOfSymbols
    budget.charge("entries", nsections, f"{name}: COFF section table")
    out = []
    resolved: dict[int, str] = {}  # long-name position -> name: headers sharing a name share one string
    # Long names at distinct positions may overlap; real string tables decode to their own size.
    allowance = 4 * len(buf) + (64 << 10)
    for i in range(nsections):
        sec = SECTION_HEADER.read(buf, table + SECTION_HEADER.size * i, OffloadError, name)
        raw_name = sec.Name.rstrip(b"\0")
        if raw_name.startswith(b"/") and not raw_name.startswith(b"//") and raw_name[1:].isdigit():
            pos = strtab + int(raw_name[1:])
            sec_name = resolved.get(pos)
            if sec_name is None:
                end = bytes(buf[pos:pos + _MAX_LONG_NAME]).find(b"\0") if pos < len(buf) else -1
                if end < 0:
                    raise OffloadError(f"{name}: COFF section {i} long name at {pos:#x} is out of range")
                allowance -= end
                if allowance < 0:
                    raise OffloadError(f"{name}: COFF section {i}: long section names overlap: they would take "
                                       f"more than four times the file's size")
                budget.charge("names", end, f"{name}: COFF section {i} name")
                sec_name = resolved[pos] = bytes(buf[pos:pos + end]).decode("utf-8", "surrogateescape")
        else:
            sec_name = raw_name.decode("utf-8", "surrogateescape")
        size, ptr = sec.SizeOfRawData, sec.PointerToRawData
        if size and ptr + size > len(buf):
            raise OffloadError(f"{name}: COFF section {sec_name} data ({size} bytes at {ptr:#x}) runs past the end")
        out.append(CoffSection(sec_name, ptr, size))
    return out


# ---------------------------------------------------------------------------------------------
# What the operations know of a COFF object (`magic.FORMAT_MODULES`); `inspect` searches its
# sections itself
# ---------------------------------------------------------------------------------------------

def _is_coff(head: bytes, _buf) -> bool:
    """`identify_magic`'s COFF object: the first two bytes (little-endian) a machine it knows.
    Two bytes accept much: this rule is asked after every other format's."""
    return len(head) >= 2 and (head[0] | head[1] << 8) in COFF_MACHINES


def _offload_binaries(buf, name: str):
    """`extract`: sections whose name starts with `.llvm.offloading` (LLVM's rule for COFF)."""
    for sec in read_sections(buf, name):
        if sec.name.startswith(OFFLOADING_SECTION):
            yield OffloadBinariesAt(sec.name, (sec.offset, sec.size), buf[sec.offset:sec.offset + sec.size],
                                    f"{name}: section {sec.name} at file offset {sec.offset:#x}")


FORMATS = (Format(FileKind.COFF, recognise=_is_coff, extract="coff", offload_binaries=_offload_binaries,
                  no_images="a COFF object with no .llvm.offloading section"),)
