"""The library's one ELF module: reading through pyelftools, editing natively.

Reading symbols, relocations and section contents goes through pyelftools (`open_elffile`, over
the caller's buffer without copying it).  Two things it cannot do are native here: writing
(pyelftools has no writer: adding and removing sections, `empty_relocatable_like`), and listing
sections as zero-copy slices of a large memory-mapped input (`read_sections`: pyelftools reads each
section's contents into new bytes, and inspecting a multi-gigabyte program must not).  The native
reader covers only the header and the section table, which the editor needs anyway.

Object-file bundles (`__CLANG_OFFLOAD_BUNDLE__<id>` sections) and `.llvm.offloading` embedding
need what `llvm-objcopy --add-section` / `--remove-section` do, without llvm-objcopy at run time.
Headers are read and written with declarative `struct` layouts named after the ELF spec's fields;
32- and 64-bit, little- and big-endian, extended section numbering.  Every offset, size and count
taken from the file is checked before use; bad input raises `ElfError` naming the offset and field.

Relocatable objects (ET_REL), the case that matters, are re-laid out as llvm-objcopy does: ELF
header, program headers if any, section contents in their original file order each aligned to its
`sh_addralign` (padding capped at 4096: file offsets carry no meaning in ET_REL, only tables need
natural alignment), the new sections, then the section header table.  Contents of untouched
sections are copied verbatim (streamed from memoryview slices), so host symbols and relocations
stay intact; removal renumbers section and symbol indices wherever they occur.

Executables and shared objects (ET_EXEC, ET_DYN; LLVM's bundler accepts any ELF host) are edited
in place instead: nothing a segment covers moves; new sections, the grown name table and the new
section header table go after the end.  Only non-loadable (non-SHF_ALLOC) sections can be removed
there.  Core files and other types are refused.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable

from ..rules.string_table import string_table
from .. import budget
from ..errors import ElfError
from ..fileio import byte_view
from .layout import Layout, field_error
from .kinds import ELF_MAGIC, FileKind, Format, OffloadBinariesAt
from ..records import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO

__all__ = [
    "SHT_NULL", "SHT_PROGBITS", "SHT_SYMTAB", "SHT_STRTAB", "SHT_RELA", "SHT_NOBITS", "SHT_REL",
    "SHT_GROUP", "SHT_SYMTAB_SHNDX", "SHT_LLVM_ADDRSIG", "SHT_LLVM_OFFLOADING", "SHF_EXCLUDE",
    "SHF_GROUP", "SHF_INFO_LINK", "SHF_LINK_ORDER", "ElfSection", "NewSection", "ElfType",
    "EM_CUDA", "SHT_CUDA_NO_FILE_BYTES", "holds_file_bytes",
    "is_elf", "elf_type", "read_sections", "open_elffile", "add_sections", "remove_sections",
    "empty_relocatable_like",
]

ELFCLASS32, ELFCLASS64 = 1, 2
ELFDATA2LSB, ELFDATA2MSB = 1, 2
ET_NONE, ET_REL, ET_EXEC, ET_DYN, ET_CORE = 0, 1, 2, 3, 4
EM_MIPS = 8

SHT_NULL = 0
SHT_PROGBITS = 1
SHT_SYMTAB = 2
SHT_STRTAB = 3
SHT_RELA = 4
SHT_NOBITS = 8
SHT_REL = 9
SHT_DYNSYM = 11
SHT_GROUP = 17
SHT_SYMTAB_SHNDX = 18
SHT_CREL = 0x40000014
SHT_ANDROID_REL, SHT_ANDROID_RELA = 0x60000001, 0x60000002
SHT_LLVM_ADDRSIG = 0x6FFF4C03
SHT_LLVM_OFFLOADING = 0x6FFF4C0B

EM_CUDA = 190

#: NVIDIA's processor-specific section types that, like SHT_NOBITS, reserve device memory and
#: take no bytes of the file: `.nv.global` (SHT_CUDA_GLOBAL), `.nv.local.<f>` (SHT_CUDA_LOCAL),
#: `.nv.shared.<f>` (SHT_CUDA_SHARED) and `.nv.shared.reserved.*` (SHT_CUDA_SHARED_RESERVED).
#: ptxas writes them in relocatable device code (`-rdc`, clang's CUDA and OpenMP device objects);
#: their `sh_offset + sh_size` may lie past the end of the file.  `.nv.global.init` (0x70000008)
#: and the constant banks hold their bytes.  The values mean nothing on other machines.
SHT_CUDA_NO_FILE_BYTES = {0x70000007: "SHT_CUDA_GLOBAL", 0x70000009: "SHT_CUDA_LOCAL",
                          0x7000000A: "SHT_CUDA_SHARED", 0x70000015: "SHT_CUDA_SHARED_RESERVED"}


def holds_file_bytes(sh_type: int, e_machine: int) -> bool:
    """Whether a section of type `sh_type` in an ELF file for `e_machine` stores its contents in
    the file (SHT_NOBITS never does, nor NVIDIA's memory-reserving types)."""
    if sh_type == SHT_NOBITS:
        return False
    return not (e_machine == EM_CUDA and sh_type in SHT_CUDA_NO_FILE_BYTES)

SHF_ALLOC = 0x2
SHF_INFO_LINK = 0x40
SHF_LINK_ORDER = 0x80
SHF_GROUP = 0x200
SHF_EXCLUDE = 0x80000000

SHN_UNDEF = 0
SHN_LORESERVE = 0xFF00
SHN_XINDEX = 0xFFFF

# Padding to a section's alignment is capped: in ET_REL files the linker takes alignment from
# sh_addralign, not from the file offset; only table sections need natural (word) alignment.
_MAX_PAD_ALIGN = 4096


# ---------------------------------------------------------------------------------------------
# Declarative layouts (field names as in the ELF specification)
# ---------------------------------------------------------------------------------------------

class _ElfLayout:
    """One ELF structure, declared once with the specification's field names for each class:
    a `layout.Layout` (`Elf64_Shdr`, `Elf32_Shdr`) per class and byte order, so that readers,
    writers and messages (`offset_of`) share it."""

    def __init__(self, name: str, fields64: list[tuple[str, str]], fields32: list[tuple[str, str]]):
        self.name = name
        self._layouts = {(cls, order): Layout(name.replace("Elf_", f"Elf{bits}_"), fields, prefix)
                         for cls, bits, fields in ((ELFCLASS64, 64, fields64), (ELFCLASS32, 32, fields32))
                         for order, prefix in ((ELFDATA2LSB, "<"), (ELFDATA2MSB, ">"))}

    def struct(self, cls: int, order: int) -> Layout:
        """The layout of class `cls` (ELFCLASS32/64) in byte order `order` (ELFDATA2LSB/MSB)."""
        return self._layouts[cls, order]

    def tuple(self, cls: int):
        """The record (namedtuple) type of class `cls`'s layout."""
        return self._layouts[cls, ELFDATA2LSB].record


# e_ident (16 bytes) is handled separately; these follow it.
Elf_Ehdr = _ElfLayout(
    "Elf_Ehdr",
    [("e_type", "H"), ("e_machine", "H"), ("e_version", "I"), ("e_entry", "Q"), ("e_phoff", "Q"),
     ("e_shoff", "Q"), ("e_flags", "I"), ("e_ehsize", "H"), ("e_phentsize", "H"), ("e_phnum", "H"),
     ("e_shentsize", "H"), ("e_shnum", "H"), ("e_shstrndx", "H")],
    [("e_type", "H"), ("e_machine", "H"), ("e_version", "I"), ("e_entry", "I"), ("e_phoff", "I"),
     ("e_shoff", "I"), ("e_flags", "I"), ("e_ehsize", "H"), ("e_phentsize", "H"), ("e_phnum", "H"),
     ("e_shentsize", "H"), ("e_shnum", "H"), ("e_shstrndx", "H")],
)
_SHDR_FIELDS = ["sh_name", "sh_type", "sh_flags", "sh_addr", "sh_offset", "sh_size", "sh_link", "sh_info",
                "sh_addralign", "sh_entsize"]
Elf_Shdr = _ElfLayout(
    "Elf_Shdr",
    list(zip(_SHDR_FIELDS, "IIQQQQIIQQ")),
    list(zip(_SHDR_FIELDS, "IIIIIIIIII")),
)
Elf_Sym = _ElfLayout(
    "Elf_Sym",
    [("st_name", "I"), ("st_info", "B"), ("st_other", "B"), ("st_shndx", "H"), ("st_value", "Q"), ("st_size", "Q")],
    [("st_name", "I"), ("st_value", "I"), ("st_size", "I"), ("st_info", "B"), ("st_other", "B"), ("st_shndx", "H")],
)
Elf_Rel = _ElfLayout("Elf_Rel", [("r_offset", "Q"), ("r_info", "Q")], [("r_offset", "I"), ("r_info", "I")])
Elf_Rela = _ElfLayout("Elf_Rela", [("r_offset", "Q"), ("r_info", "Q"), ("r_addend", "q")],
                   [("r_offset", "I"), ("r_info", "I"), ("r_addend", "i")])

Elf_Phdr = _ElfLayout(
    "Elf_Phdr",
    [("p_type", "I"), ("p_flags", "I"), ("p_offset", "Q"), ("p_vaddr", "Q"), ("p_paddr", "Q"), ("p_filesz", "Q"),
     ("p_memsz", "Q"), ("p_align", "Q")],
    [("p_type", "I"), ("p_offset", "I"), ("p_vaddr", "I"), ("p_paddr", "I"), ("p_filesz", "I"), ("p_memsz", "I"),
     ("p_flags", "I"), ("p_align", "I")],
)


_IDENT_SIZE = 16


# ---------------------------------------------------------------------------------------------
# Public data model
# ---------------------------------------------------------------------------------------------

class ElfSection(Record):
    """One section header with its name resolved and its contents as a slice of the input
    (empty for SHT_NOBITS).  The trailing fields are the rest of the header, for editors."""

    __slots__ = ("index", "name", "sh_type", "flags", "offset", "size", "align", "data", "link", "info", "entsize",
                 "addr", "name_offset")

    def __init__(self, index: int, name: str, sh_type: int, flags: int, offset: int, size: int, align: int,
                 data: memoryview, link: int = 0, info: int = 0, entsize: int = 0, addr: int = 0,
                 name_offset: int = 0) -> None:
        self.index = index
        self.name = name
        self.sh_type = sh_type
        self.flags = flags
        self.offset = offset
        self.size = size
        self.align = align
        self.data = data
        self.link = link
        self.info = info
        self.entsize = entsize
        self.addr = addr
        self.name_offset = name_offset


class NewSection(Record):
    """A section to add: contents are written verbatim, after all existing section contents."""

    __slots__ = ("name", "data", "sh_type", "flags", "align")

    def __init__(self, name: str, data: bytes | memoryview, sh_type: int = SHT_PROGBITS, flags: int = SHF_EXCLUDE,
                 align: int = 1) -> None:
        self.name = name
        self.data = data
        self.sh_type = sh_type
        self.flags = flags
        self.align = align


class ElfType(str):
    """The ELF file type as a short word (`"rel"`, `"exec"`, `"dyn"`, `"core"`, `"none"`, or
    `"other:<n>"`).  For callers written against other spellings it also compares equal to the
    `ET_*` constant name (`"ET_REL"`) and to the numeric `e_type`."""

    e_type: int

    def __new__(cls, e_type: int):
        word = _ET_WORDS.get(e_type, f"other:{e_type}")
        self = super().__new__(cls, word)
        self.e_type = e_type
        return self

    def __eq__(self, other) -> bool:
        if isinstance(other, bool):
            return False
        if isinstance(other, int):
            return other == self.e_type
        if isinstance(other, str):
            return str.__eq__(self, other) or (self.e_type in _ET_NAMES and other == _ET_NAMES[self.e_type])
        return NotImplemented

    def __ne__(self, other) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = str.__hash__


_ET_WORDS = {ET_NONE: "none", ET_REL: "rel", ET_EXEC: "exec", ET_DYN: "dyn", ET_CORE: "core"}
_ET_NAMES = {ET_NONE: "ET_NONE", ET_REL: "ET_REL", ET_EXEC: "ET_EXEC", ET_DYN: "ET_DYN", ET_CORE: "ET_CORE"}


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------

def is_elf(buf) -> bool:
    """True if `buf` starts with the ELF magic (what LLVM's identify_magic checks)."""
    return bytes(buf[:4]) == ELF_MAGIC


def elf_type(buf) -> ElfType:
    """The ELF file type of `buf` (`"rel"` for relocatable objects, see `ElfType`)."""
    return ElfType(_Elf(buf).ehdr.e_type)


def read_sections(buf) -> list[ElfSection]:
    """All section headers of `buf` in index order (index 0, the null section, included)."""
    return _Elf(buf).sections


class _ViewStream(io.RawIOBase):
    """A read-only, seekable stream over a buffer: pyelftools reads through it without the whole
    file being copied into `bytes` first."""

    def __init__(self, buf) -> None:
        super().__init__()
        self._view = byte_view(buf)
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self._view)}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, target) -> int:
        chunk = self._view[self._pos:self._pos + len(target)]
        target[:len(chunk)] = chunk
        self._pos += len(chunk)
        return len(chunk)


def open_elffile(buf):
    """`buf` as a pyelftools `ELFFile` (for symbols, relocations and section contents); a file
    pyelftools cannot parse raises `ElfError`."""
    try:
        from elftools.elf.elffile import ELFFile
        return ELFFile(_ViewStream(buf))
    except Exception as exc:  # pyelftools raises ELFError, struct.error, ...
        raise ElfError(f"not a readable ELF file: {exc}") from None


def needed_libraries(buf) -> list[str]:
    """The `DT_NEEDED` names of a dynamic ELF file (a program or shared library), in order; none
    for a file without a dynamic section. A dynamic section pyelftools cannot read raises
    `ElfError`."""
    try:
        from elftools.elf.dynamic import DynamicSection
        out = []
        for sec in open_elffile(buf).iter_sections():
            if isinstance(sec, DynamicSection):
                out.extend(tag.needed for tag in sec.iter_tags() if tag.entry.d_tag == "DT_NEEDED")
        return out
    except ElfError:
        raise
    except Exception as exc:  # pyelftools raises ELFError, struct.error, UnicodeDecodeError, ...
        raise ElfError(f"unreadable dynamic section: {exc}") from None


class _Elf:
    """A parsed, validated ELF file: header, section headers, names."""

    def __init__(self, buf):
        self.buf = byte_view(buf)
        size = len(self.buf)
        if size < _IDENT_SIZE or bytes(self.buf[:4]) != ELF_MAGIC:
            raise ElfError("not an ELF file (offset 0: bad magic or file shorter than e_ident)")
        self.ident = bytes(self.buf[:_IDENT_SIZE])
        self.cls, self.order = self.ident[4], self.ident[5]
        if self.cls not in (ELFCLASS32, ELFCLASS64):
            raise ElfError(f"offset 4: e_ident[EI_CLASS] = {self.cls} is neither ELFCLASS32 nor ELFCLASS64")
        if self.order not in (ELFDATA2LSB, ELFDATA2MSB):
            raise ElfError(f"offset 5: e_ident[EI_DATA] = {self.order} is neither ELFDATA2LSB nor ELFDATA2MSB")
        self.is64 = self.cls == ELFCLASS64
        self.word = 8 if self.is64 else 4
        self.ehdr_struct = Elf_Ehdr.struct(self.cls, self.order)
        self.shdr_struct = Elf_Shdr.struct(self.cls, self.order)
        self.shdr_tuple = Elf_Shdr.tuple(self.cls)
        ehdr_end = _IDENT_SIZE + self.ehdr_struct.size
        if size < ehdr_end:
            raise ElfError(f"ELF header truncated: file has {size} bytes, the {'64' if self.is64 else '32'}-bit "
                           f"header needs {ehdr_end}")
        self.ehdr = Elf_Ehdr.tuple(self.cls)._make(self.ehdr_struct.unpack_from(self.buf, _IDENT_SIZE))
        self.shnum = 0
        self.shstrndx = SHN_UNDEF
        self.shstrtab = b""
        self.headers = []
        self.sections = self._read_section_headers()

    def _field_error(self, offset: int, field: str, msg: str) -> ElfError:
        return field_error(ElfError, offset, field, msg)

    def _shdr_at(self, offset: int):
        return self.shdr_tuple._make(self.shdr_struct.unpack_from(self.buf, offset))

    def header_offset(self, field: str) -> int:
        """The file offset of an `Elf_Ehdr` field (after `e_ident`), for messages."""
        return _IDENT_SIZE + self.ehdr_struct.offset_of(field)

    def program_headers(self) -> list:
        """The program header table's records (`Elf_Phdr`), after checking that the table and
        every segment's file bytes (`p_offset + p_filesz`) lie inside the file."""
        e = self.ehdr
        size = len(self.buf)
        if not e.e_phoff or not e.e_phnum:
            return []
        ph = Elf_Phdr.struct(self.cls, self.order)
        if e.e_phentsize != ph.size:
            raise self._field_error(self.header_offset("e_phentsize"), "e_phentsize",
                                    f"{e.e_phentsize}, expected {ph.size}")
        end = e.e_phoff + e.e_phnum * ph.size
        if e.e_phoff > size or end > size:
            raise self._field_error(self.header_offset("e_phoff"), "e_phoff",
                                    f"{e.e_phnum} program headers at {e.e_phoff:#x} run past the end of the "
                                    f"file ({size:#x} bytes)")
        out = []
        for i in range(e.e_phnum):
            at = e.e_phoff + i * ph.size
            p = ph.read(self.buf, at, ElfError)
            if p.p_filesz and (p.p_offset > size or p.p_filesz > size - p.p_offset):
                raise ElfError(f"program header {i} (at {at:#x}): p_offset {p.p_offset:#x} + p_filesz "
                               f"{p.p_filesz:#x} lies past the end of the file ({size:#x} bytes)")
            out.append(p)
        return out

    def _read_section_headers(self) -> list[ElfSection]:
        e = self.ehdr
        size = len(self.buf)
        # Field offsets, for messages.
        off_shoff, off_shentsize, off_shnum, off_shstrndx = (
            self.header_offset(f) for f in ("e_shoff", "e_shentsize", "e_shnum", "e_shstrndx"))
        if e.e_shoff == 0:
            if e.e_shnum != 0:
                raise self._field_error(off_shnum, "e_shnum", f"{e.e_shnum} sections but e_shoff is 0")
            return []
        if e.e_shentsize != self.shdr_struct.size:
            raise self._field_error(off_shentsize, "e_shentsize",
                                    f"{e.e_shentsize}, expected {self.shdr_struct.size}")
        if e.e_shoff > size or e.e_shoff + self.shdr_struct.size > size:
            raise self._field_error(off_shoff, "e_shoff", f"section header table at {e.e_shoff:#x} lies past "
                                    f"the end of the file ({size:#x} bytes)")
        shnum = e.e_shnum
        first = self._shdr_at(e.e_shoff)
        if shnum == 0:
            shnum = first.sh_size  # extended numbering: the count lives in section 0
            if shnum == 0:
                return []
        table_end = e.e_shoff + shnum * self.shdr_struct.size
        if table_end > size:
            raise self._field_error(off_shnum, "e_shnum", f"{shnum} section headers at {e.e_shoff:#x} run past "
                                    f"the end of the file ({size:#x} bytes)")
        shstrndx = e.e_shstrndx
        if shstrndx == SHN_XINDEX:
            shstrndx = first.sh_link
        if shstrndx >= shnum:
            raise self._field_error(off_shstrndx, "e_shstrndx", f"{shstrndx} is not a section index "
                                    f"(there are {shnum} sections)")
        self.shnum = shnum
        self.shstrndx = shstrndx
        headers = []
        make = self.shdr_tuple._make
        # A copy, not a view: an iterator over a memoryview holds an export of it, and an error
        # raised mid-table would keep that export alive in the traceback's frames; if those end up
        # in a reference cycle, CPython 3.11's collector cannot clear the view ("memoryview has 1
        # exported buffer") and the process may crash.  The table is small (64 bytes a section).
        table = self.shdr_struct.iter_unpack(bytes(self.buf[e.e_shoff:table_end]))
        machine = e.e_machine
        for i, fields in enumerate(table):
            h = make(fields)
            if h.sh_size and holds_file_bytes(h.sh_type, machine):
                if h.sh_offset > size or h.sh_size > size - h.sh_offset:
                    hoff = e.e_shoff + i * self.shdr_struct.size
                    raise ElfError(f"section {i} (header at {hoff:#x}): sh_offset {h.sh_offset:#x} + sh_size "
                                   f"{h.sh_size:#x} lies past the end of the file ({size:#x} bytes)")
            if h.sh_addralign > 1 and h.sh_addralign & (h.sh_addralign - 1):
                hoff = e.e_shoff + i * self.shdr_struct.size
                raise ElfError(f"section {i} (header at {hoff:#x}): sh_addralign {h.sh_addralign} is not a power of 2")
            headers.append(h)
        names = b""
        if shstrndx != SHN_UNDEF:
            sh = headers[shstrndx]
            if not holds_file_bytes(sh.sh_type, machine):
                raise self._field_error(off_shstrndx, "e_shstrndx", f"section {shstrndx} holding the section "
                                        f"names has no contents in the file (sh_type {sh.sh_type:#x})")
            names = bytes(self.buf[sh.sh_offset:sh.sh_offset + sh.sh_size])
        self.shstrtab = names
        budget.charge("entries", len(headers), f"ELF section header table at {e.e_shoff:#x}")
        sections = []
        resolved: dict[int, str] = {}  # sh_name -> name: headers sharing a name share one string
        # Names at distinct offsets may overlap (suffixes of one long name); a legitimate table
        # (tail-merged by the writer) decodes to a few times its size at most.
        allowance = 4 * len(names) + (64 << 10)
        for i, h in enumerate(headers):
            if shstrndx == SHN_UNDEF or (i == 0 and h.sh_name == 0):
                name = ""
            elif h.sh_name in resolved:
                name = resolved[h.sh_name]
            else:
                if h.sh_name >= len(names):
                    raise ElfError(f"section {i} (header at {e.e_shoff + i * self.shdr_struct.size:#x}): sh_name "
                                   f"{h.sh_name:#x} lies outside the section name table ({len(names)} bytes)")
                end = names.find(b"\0", h.sh_name)
                if end < 0:
                    raise ElfError(f"section {i}: sh_name {h.sh_name:#x}: name is not NUL-terminated in the "
                                   f"section name table")
                allowance -= end - h.sh_name
                if allowance < 0:
                    raise ElfError(f"section {i} (header at {e.e_shoff + i * self.shdr_struct.size:#x}): section "
                                   f"names overlap: they would take more than four times the {len(names)}-byte "
                                   f"section name table")
                budget.charge("names", end - h.sh_name, f"section {i} name")
                name = resolved[h.sh_name] = names[h.sh_name:end].decode("utf-8", "surrogateescape")
            if not holds_file_bytes(h.sh_type, machine):
                data = self.buf[0:0]
            else:
                data = self.buf[h.sh_offset:h.sh_offset + h.sh_size]
            sections.append(ElfSection(i, name, h.sh_type, h.sh_flags, h.sh_offset, h.sh_size, h.sh_addralign,
                                       data, h.sh_link, h.sh_info, h.sh_entsize, h.sh_addr, h.sh_name))
        self.headers = headers
        return sections

    def require_editable(self, what: str) -> None:
        if self.ehdr.e_type not in (ET_REL, ET_EXEC, ET_DYN):
            raise ElfError(f"cannot {what}: only relocatable objects, executables and shared objects can be "
                           f"edited, this file is {elf_word(self.ehdr.e_type)}")
        if not self.sections:
            raise ElfError(f"cannot {what}: the object has no section header table")
        if self.ehdr.e_phnum:
            ph_end = self.ehdr.e_phoff + self.ehdr.e_phnum * self.ehdr.e_phentsize
            if self.ehdr.e_phoff > len(self.buf) or ph_end > len(self.buf):
                raise ElfError(f"e_phoff {self.ehdr.e_phoff:#x}: program header table lies past the end of the file")


def elf_word(e_type: int) -> str:
    return str(ElfType(e_type))


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------

class _OutSection(Record):
    """A section of the output: its header fields and where its contents come from."""

    __slots__ = ("name_offset", "sh_type", "flags", "addr", "link", "info", "align", "entsize", "data", "size",
                 "order", "orig_offset", "orig_data", "name")

    def __init__(self, name_offset: int, sh_type: int, flags: int, addr: int, link: int, info: int, align: int,
                 entsize: int, data: bytes | memoryview, size: int, order: tuple, orig_offset: int | None = None,
                 orig_data: object = None, name: str = "") -> None:
        self.name_offset = name_offset
        self.sh_type = sh_type
        self.flags = flags
        self.addr = addr
        self.link = link
        self.info = info
        self.align = align
        self.entsize = entsize
        self.data = data
        self.size = size  # sh_size (for NOBITS not the data length)
        self.order = order  # file-layout sort key
        self.orig_offset = orig_offset  # where an existing section's bytes are in the input
        self.orig_data = orig_data  # the input slice, to tell whether the contents were rewritten
        self.name = name  # for messages


def _pad_align(sec: _OutSection, word: int) -> int:
    align = max(1, min(sec.align, _MAX_PAD_ALIGN))
    if sec.sh_type in (SHT_SYMTAB, SHT_DYNSYM, SHT_REL, SHT_RELA, SHT_GROUP, SHT_SYMTAB_SHNDX):
        align = max(align, word if sec.sh_type in (SHT_SYMTAB, SHT_DYNSYM, SHT_REL, SHT_RELA) else 4)
    return align


def _write_elf(elf: _Elf, sections: list[_OutSection], shstrndx: int, out: BinaryIO) -> None:
    """Lay out and write an ET_REL file: header, program headers, contents, section header table."""
    # (ET_REL program headers, which no common toolchain writes, are copied verbatim.)
    e = elf.ehdr
    word = elf.word
    ehsize = max(e.e_ehsize, _IDENT_SIZE + elf.ehdr_struct.size)
    if ehsize > len(elf.buf):
        ehsize = _IDENT_SIZE + elf.ehdr_struct.size
    pos = ehsize
    phoff = e.e_phoff
    ph_bytes = b""
    if e.e_phnum:
        ph_bytes = elf.buf[e.e_phoff:e.e_phoff + e.e_phnum * e.e_phentsize]
        pos = _align(pos, word)
        phoff = pos
        pos += len(ph_bytes)
    # Contents in layout order.
    offsets = [0] * len(sections)
    order = sorted(range(1, len(sections)), key=lambda i: sections[i].order)
    plan = []
    for i in order:
        sec = sections[i]
        pos = _align(pos, _pad_align(sec, word))
        offsets[i] = pos
        if sec.sh_type != SHT_NOBITS:
            plan.append((pos, sec.data))
            pos += len(sec.data)
    shoff = _align(pos, word)
    table, e_shnum, e_shstrndx = _section_table(elf, sections, offsets, shstrndx)
    hdr = e._replace(e_phoff=phoff if e.e_phnum else e.e_phoff, e_shoff=shoff, e_shnum=e_shnum,
                     e_shstrndx=e_shstrndx, e_shentsize=elf.shdr_struct.size)
    written = 0

    def emit(chunk) -> None:
        nonlocal written
        if len(chunk):
            out.write(chunk)
            written += len(chunk)

    emit(elf.ident)
    emit(elf.ehdr_struct.pack(*hdr))
    emit(elf.buf[_IDENT_SIZE + elf.ehdr_struct.size:ehsize])
    if e.e_phnum:
        emit(b"\0" * (phoff - written))
        emit(ph_bytes)
    for off, data in plan:
        if off > written:
            emit(b"\0" * (off - written))
        emit(data)
    emit(b"\0" * (shoff - written))
    emit(table)


def _align(value: int, align: int) -> int:
    return (value + align - 1) // align * align if align > 1 else value


def _existing(sec: ElfSection) -> _OutSection:
    return _OutSection(sec.name_offset, sec.sh_type, sec.flags, sec.addr, sec.link, sec.info, sec.align,
                       sec.entsize, sec.data, sec.size, (0, sec.offset, sec.index), sec.offset, sec.data,
                       sec.name)


def _write(elf: _Elf, sections: list[_OutSection], shstrndx: int, out: BinaryIO) -> None:
    if elf.ehdr.e_type == ET_REL:
        _write_elf(elf, sections, shstrndx, out)
    else:
        _write_linked(elf, sections, shstrndx, out)


def _section_table(elf: _Elf, sections: list[_OutSection], offsets: list[int], shstrndx: int) -> tuple[bytes, int, int]:
    """The packed section header table, and e_shnum / e_shstrndx (gABI extended numbering when needed:
    the count goes to section 0's sh_size, the name-table index to its sh_link)."""
    shnum = len(sections)
    s0 = sections[0]
    s0_size = shnum if shnum >= SHN_LORESERVE else 0
    s0_link = shstrndx if shstrndx >= SHN_LORESERVE else 0
    pack = elf.shdr_struct.pack
    table = bytearray(pack(s0.name_offset, s0.sh_type, s0.flags, s0.addr, 0, s0_size, s0_link, s0.info,
                           s0.align, s0.entsize))
    for i in range(1, shnum):
        sec = sections[i]
        table += pack(sec.name_offset, sec.sh_type, sec.flags, sec.addr, offsets[i], sec.size, sec.link,
                      sec.info, sec.align, sec.entsize)
    e_shnum = 0 if shnum >= SHN_LORESERVE else shnum
    e_shstrndx = SHN_XINDEX if shstrndx >= SHN_LORESERVE else shstrndx
    return bytes(table), e_shnum, e_shstrndx


def _keep_unknown_tail(elf: _Elf, keep_end: int) -> int:
    """Where the copied prefix of a linked image must end: `keep_end`, unless bytes after it belong
    to nothing this file describes (not a section, not the old section header table, not zero
    padding) -- such trailing data (signatures, appended payloads) is then kept whole."""
    size = len(elf.buf)
    if keep_end >= size:
        return keep_end
    machine = elf.ehdr.e_machine
    known = [(s.offset, s.offset + s.size) for s in elf.sections
             if s.size and holds_file_bytes(s.sh_type, machine)]
    e = elf.ehdr
    if e.e_shoff:
        known.append((e.e_shoff, e.e_shoff + elf.shnum * elf.shdr_struct.size))
    pos = keep_end
    for start, end in sorted(known):
        if end <= pos:
            continue
        if start > pos and any(elf.buf[pos:start]):
            return size
        pos = max(pos, end)
    if pos < size and any(elf.buf[pos:size]):
        return size
    return keep_end


def _write_linked(elf: _Elf, sections: list[_OutSection], shstrndx: int, out: BinaryIO) -> None:
    """Write an executable or shared object: every byte a segment or a kept section occupies stays
    where it is (loadable images must not move); rewritten contents of the same size are patched in
    place, larger ones (the grown name table) and new sections go after the end, followed by the new
    section header table.  Bytes only removed sections or the old header table used are dropped
    when they are at the end of the file."""
    e = elf.ehdr
    word = elf.word
    size = len(elf.buf)
    hdr_end = _IDENT_SIZE + elf.ehdr_struct.size
    keep_end = max(e.e_ehsize if e.e_ehsize <= size else hdr_end, hdr_end)
    phdrs = elf.program_headers()
    if phdrs:
        keep_end = max(keep_end, e.e_phoff + e.e_phnum * e.e_phentsize)
    for p in phdrs:
        if p.p_filesz:
            keep_end = max(keep_end, p.p_offset + p.p_filesz)
    offsets = [0] * len(sections)
    patches: list[tuple[int, bytes]] = []
    appended: list[int] = []
    for i, sec in enumerate(sections[1:], 1):
        if sec.orig_offset is None:
            appended.append(i)
            continue
        unchanged = sec.data is sec.orig_data
        if sec.sh_type == SHT_NOBITS or unchanged or len(sec.data) == len(sec.orig_data):
            offsets[i] = sec.orig_offset
            if sec.sh_type != SHT_NOBITS:
                keep_end = max(keep_end, sec.orig_offset + len(sec.data))
                if not unchanged:
                    patches.append((sec.orig_offset, bytes(sec.data)))
        elif sec.flags & SHF_ALLOC:
            raise ElfError(f"cannot resize loadable section {i} '{sec.name}' of an executable or shared object")
        else:
            appended.append(i)
    keep_end = _keep_unknown_tail(elf, keep_end)
    pos = keep_end
    plan = []
    for i in appended:
        sec = sections[i]
        pos = _align(pos, _pad_align(sec, word))
        offsets[i] = pos
        plan.append((pos, sec.data))
        pos += len(sec.data)
    shoff = _align(pos, word)
    table, e_shnum, e_shstrndx = _section_table(elf, sections, offsets, shstrndx)
    hdr = e._replace(e_shoff=shoff, e_shnum=e_shnum, e_shstrndx=e_shstrndx, e_shentsize=elf.shdr_struct.size)
    out.write(elf.ident)
    out.write(elf.ehdr_struct.pack(*hdr))
    written = hdr_end
    for off, data in sorted(patches):
        if off < written:
            raise ElfError(f"section contents at {off:#x} overlap the ELF header or another rewritten section")
        out.write(elf.buf[written:off])
        out.write(data)
        written = off + len(data)
    out.write(elf.buf[written:keep_end])
    written = keep_end
    for off, data in plan:
        out.write(b"\0" * (off - written))
        out.write(data)
        written = off + len(data)
    out.write(b"\0" * (shoff - written))
    out.write(table)


def add_sections(buf, sections: list[NewSection], out: BinaryIO) -> None:
    """Write `buf` (an ET_REL object; ET_EXEC/ET_DYN are edited in place) with `sections` appended
    to `out`.

    New section headers follow the existing ones (in the order given), their contents follow all
    existing contents, and their names are appended to the section name table; every other
    section keeps its index, header fields and bytes, so symbols and relocations are untouched.
    This is what `llvm-objcopy --add-section=N=F --set-section-flags=N=...` produces."""
    elf = _Elf(buf)
    elf.require_editable("add sections")
    new_names = []
    for s in sections:
        if not isinstance(s.name, str) or not s.name:
            raise ElfError("cannot add a section without a name")
        raw = s.name.encode("utf-8", "surrogateescape")
        if b"\0" in raw:
            raise ElfError(f"section name {s.name!r} contains a NUL byte")
        if s.align < 0 or (s.align > 1 and s.align & (s.align - 1)):
            raise ElfError(f"section {s.name!r}: alignment {s.align} is not a power of 2")
        if s.sh_type == SHT_NOBITS:
            raise ElfError(f"section {s.name!r}: cannot add SHT_NOBITS sections with contents")
        new_names.append(raw)
    out_secs = [_existing(s) for s in elf.sections]
    shstrndx = elf.shstrndx
    if shstrndx == SHN_UNDEF:
        # No section name table yet: create one (name at offset 1, after the leading NUL).
        names = bytearray(b"\0.shstrtab\0")
        shstrndx = len(out_secs)
        out_secs.append(_OutSection(1, SHT_STRTAB, 0, 0, 0, 0, 1, 0, b"", 0, (1, 1 << 62, 0)))
    else:
        names = bytearray(elf.shstrtab)
        if names and names[-1] != 0:
            names += b"\0"
    for raw, s in zip(new_names, sections):
        name_offset = len(names)
        names += raw + b"\0"
        data = byte_view(s.data)
        out_secs.append(_OutSection(name_offset, s.sh_type, s.flags, 0, 0, 0, max(s.align, 0), 0, data,
                                    len(data), (1, len(out_secs), 0)))
    strtab = out_secs[shstrndx]
    strtab.data = bytes(names)
    strtab.size = len(names)
    if elf.ehdr.e_type == ET_REL:
        _rebuild_string_tables(elf, out_secs, shstrndx)
    _write(elf, out_secs, shstrndx, out)


def _string_at(table, offset: int, where: str) -> bytes:
    if offset >= len(table):
        raise ElfError(f"{where}: name offset {offset:#x} lies past its string table ({len(table)} bytes)")
    end = bytes(table).find(b"\0", offset)
    return bytes(table[offset:end if end >= 0 else len(table)])


def _rebuild_string_tables(elf: _Elf, secs: list[_OutSection], shstrndx: int) -> None:
    """Rebuild the section name table, and the string table of each symbol table, in LLVM's layout
    (`rules.string_table`) and point every name at its new offset, as llvm-objcopy does when it writes
    a relocatable object.  Only for ET_REL: linked images are edited in place."""
    fmt = "<I" if elf.order == ELFDATA2LSB else ">I"
    sym = Elf_Sym.struct(elf.cls, elf.order)
    at_name = sym.offset_of("st_name")
    # table index -> (names of sections, [(symbol table index, entry count)])
    users: dict[int, tuple[bool, list[int]]] = {}
    if 0 < shstrndx < len(secs) and secs[shstrndx].sh_type == SHT_STRTAB:
        users[shstrndx] = (True, [])
    for i, sec in enumerate(secs):
        if sec.sh_type == SHT_SYMTAB and 0 < sec.link < len(secs) and secs[sec.link].sh_type == SHT_STRTAB:
            users.setdefault(sec.link, (False, []))[1].append(i)
    for t, (section_names, symtabs) in users.items():
        table = secs[t]
        if table.flags & SHF_ALLOC:
            continue
        old = bytes(table.data)
        strings = []
        if section_names:
            strings += [_string_at(old, s.name_offset, f"section {n} name") for n, s in enumerate(secs[1:], 1)]
        symbols = {}
        for i in symtabs:
            data = bytes(secs[i].data)
            names = [struct.unpack_from(fmt, data, k * sym.size + at_name)[0] for k in range(len(data) // sym.size)]
            symbols[i] = [_string_at(old, o, f"symbol {k} of section {i}") for k, o in enumerate(names)]
            strings += symbols[i]
        new, offsets = string_table(strings)
        if section_names:
            for n, s in enumerate(secs[1:], 1):
                s.name_offset = offsets[strings[n - 1]]
        for i, names in symbols.items():
            data = bytearray(secs[i].data)
            for k, name in enumerate(names):
                struct.pack_into(fmt, data, k * sym.size + at_name, offsets[name])
            secs[i].data = bytes(data)
        table.data = new
        table.size = len(new)


# ---------------------------------------------------------------------------------------------
# Removing
# ---------------------------------------------------------------------------------------------

def _uleb(data: bytes, pos: int, where: str) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ElfError(f"{where}: truncated ULEB128 at offset {pos:#x}")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ElfError(f"{where}: ULEB128 at offset {pos:#x} is too long")


def _enc_uleb(value: int) -> bytes:
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _is_reloc(sec: ElfSection) -> bool:
    return sec.sh_type in (SHT_REL, SHT_RELA)


def _group_members(elf: _Elf, sec: ElfSection) -> tuple[int, list[int]]:
    if sec.size % 4 or sec.size < 4:
        raise ElfError(f"group section {sec.index} '{sec.name}' at {sec.offset:#x}: sh_size {sec.size} is not a "
                       f"positive multiple of 4")
    fmt = ("<" if elf.order == ELFDATA2LSB else ">") + f"{sec.size // 4}I"
    words = struct.unpack(fmt, sec.data)
    for m in words[1:]:
        if m == 0 or m >= elf.shnum:
            raise ElfError(f"group section {sec.index} '{sec.name}' at {sec.offset:#x}: member {m} is not a "
                           f"section index")
    return words[0], list(words[1:])


def remove_sections(buf, predicate: Callable[[ElfSection], bool], out: BinaryIO) -> None:
    """Write `buf` (an ET_REL object; for ET_EXEC/ET_DYN only non-SHF_ALLOC sections) without the
    sections for which `predicate` is true.

    As llvm-objcopy --remove-section does, this also removes the relocation sections of removed
    sections, sections whose SHF_LINK_ORDER partner is removed, and groups left without members;
    symbols defined in removed sections are dropped (an error if a kept relocation uses one);
    section indices in headers (sh_link/sh_info), symbols (st_shndx, SHT_SYMTAB_SHNDX) and groups,
    and symbol indices in relocations, groups and `.llvm_addrsig` are renumbered."""
    elf = _Elf(buf)
    elf.require_editable("remove sections")
    secs = elf.sections
    n = len(secs)
    removed = set()
    for s in secs[1:]:
        if predicate(s):
            if s.index == elf.shstrndx:
                raise ElfError(f"cannot remove section {s.index} '{s.name}': it holds the section names")
            removed.add(s.index)
    if not removed:
        _write(elf, [_existing(s) for s in secs], elf.shstrndx, out)
        return
    linked = elf.ehdr.e_type != ET_REL
    groups = {s.index: _group_members(elf, s) for s in secs if s.sh_type == SHT_GROUP}
    # Cascade: relocations of removed sections, SHF_LINK_ORDER partners, emptied groups.
    changed = True
    while changed:
        changed = False
        for s in secs[1:]:
            if s.index in removed:
                continue
            if ((_is_reloc(s) or s.flags & SHF_INFO_LINK) and s.info in removed) or \
                    (s.flags & SHF_LINK_ORDER and s.link in removed) or \
                    (s.index in groups and all(m in removed for m in groups[s.index][1])):
                if s.index == elf.shstrndx:
                    raise ElfError(f"cannot remove section {s.index} '{s.name}': it holds the section names")
                removed.add(s.index)
                changed = True
    if linked:
        for r in sorted(removed):
            if secs[r].flags & SHF_ALLOC:
                raise ElfError(f"cannot remove section {r} '{secs[r].name}': it is loaded (SHF_ALLOC) in this "
                               f"executable or shared object")
    for s in secs[1:]:
        if s.index not in removed and s.link in removed and s.link != 0:
            raise ElfError(f"cannot remove section {s.link} '{secs[s.link].name}': section {s.index} "
                           f"'{s.name}' links to it")
    new_index = {}
    for s in secs:
        if s.index not in removed:
            new_index[s.index] = len(new_index)

    def map_index(old: int, where: str) -> int:
        if old == 0:
            return 0
        if old >= n:
            raise ElfError(f"{where}: {old} is not a section index (there are {n} sections)")
        try:
            return new_index[old]
        except KeyError:
            raise ElfError(f"{where} refers to removed section {old} '{secs[old].name}'") from None

    out_secs = [_existing(s) for s in secs if s.index not in removed]
    by_old = {s.index: out_secs[new_index[s.index]] for s in secs if s.index not in removed}
    # Symbol tables: drop symbols of removed sections, renumber st_shndx.
    sym_maps: dict[int, dict[int, int] | None] = {}
    shndx_of = {}
    for s in secs:
        if s.sh_type == SHT_SYMTAB_SHNDX and s.link < n:
            shndx_of[s.link] = s
    for s in secs:
        if s.sh_type not in (SHT_SYMTAB, SHT_DYNSYM) or s.index in removed:
            continue
        sym_maps[s.index] = _rewrite_symtab(elf, s, shndx_of.get(s.index), removed, new_index, by_old)
        if sym_maps[s.index] is not None and s.flags & SHF_ALLOC:
            raise ElfError(f"cannot remove sections that define dynamic symbols ({s.name})")
    # Other sections that carry section or symbol indices.
    for s in secs[1:]:
        if s.index in removed:
            continue
        o = by_old[s.index]
        if s.link:
            o.link = map_index(s.link, f"section {s.index} '{s.name}' sh_link")
        if _is_reloc(s) or (s.flags & SHF_INFO_LINK and s.sh_type not in (SHT_SYMTAB, SHT_DYNSYM, SHT_GROUP)):
            if s.info:
                o.info = map_index(s.info, f"section {s.index} '{s.name}' sh_info")
        smap = sym_maps.get(s.link)
        if _is_reloc(s) and smap is not None:
            o.data = _rewrite_relocs(elf, s, smap, secs)
        elif s.sh_type == SHT_GROUP:
            flags, members = groups[s.index]
            kept = [new_index[m] for m in members if m not in removed]
            fmt = ("<" if elf.order == ELFDATA2LSB else ">") + f"{1 + len(kept)}I"
            o.data = struct.pack(fmt, flags, *kept)
            o.size = len(o.data)
            if smap is not None:
                if s.info not in smap:
                    raise ElfError(f"group section {s.index} '{s.name}': its signature symbol {s.info} is "
                                   f"defined in a removed section")
                o.info = smap[s.info]
        elif s.sh_type in (SHT_CREL, SHT_ANDROID_REL, SHT_ANDROID_RELA) and smap is not None:
            raise ElfError(f"section {s.index} '{s.name}': renumbering symbols in compact/packed relocations "
                           f"(type {s.sh_type:#x}) is not supported")
        elif s.sh_type == SHT_LLVM_ADDRSIG and smap is not None:
            o.data = _rewrite_addrsig(s, smap)
            o.size = len(o.data)
    # Members of a removed group are no longer in a group.
    for g, (_, members) in groups.items():
        if g in removed:
            for m in members:
                if m in by_old:
                    by_old[m].flags &= ~SHF_GROUP
    if elf.shstrndx and elf.ehdr.e_type == ET_REL:
        _rebuild_string_tables(elf, out_secs, new_index[elf.shstrndx])
    elif elf.shstrndx:
        _trim_names(elf, secs, removed, by_old)
    _write(elf, out_secs, new_index[elf.shstrndx] if elf.shstrndx else 0, out)


def _trim_names(elf: _Elf, secs: list[ElfSection], removed: set[int], by_old: dict) -> None:
    """Drop the tail of the section name table that only removed sections used (the names that
    add_sections / objcopy appended), so add-then-remove gives back a table of the original size.
    Symbol names count too where the table doubles as a symbol string table (as clang writes it)."""
    names = elf.shstrtab
    used = 1
    for s in secs:
        if s.index in removed:
            continue
        if s.name_offset < len(names):
            used = max(used, names.find(b"\0", s.name_offset) + 1)
        if s.link == elf.shstrndx:
            if s.sh_type not in (SHT_SYMTAB, SHT_DYNSYM):
                return  # some other user of the table: leave it whole
            o = by_old[s.index]
            st = Elf_Sym.struct(elf.cls, elf.order)
            data = o.data
            for i in range(len(data) // st.size):
                st_name = struct.unpack_from(elf.order == ELFDATA2LSB and "<I" or ">I", data,
                                             i * st.size + st.offset_of("st_name"))[0]
                if st_name < len(names):
                    used = max(used, names.find(b"\0", st_name) + 1)
    if used < len(names):
        t = by_old[elf.shstrndx]
        t.data = bytes(names[:used])
        t.size = used


def _rewrite_symtab(elf: _Elf, s: ElfSection, shndx_sec: ElfSection | None, removed: set[int],
                    new_index: dict[int, int], by_old: dict) -> dict[int, int] | None:
    """Rewrite a symbol table in place in `by_old`; return the old->new symbol index map, or None
    when no symbol was dropped (indices unchanged)."""
    st = Elf_Sym.struct(elf.cls, elf.order)
    tup = Elf_Sym.tuple(elf.cls)
    where = f"symbol table {s.index} '{s.name}' at {s.offset:#x}"
    if s.size % st.size:
        raise ElfError(f"{where}: sh_size {s.size} is not a multiple of the symbol size {st.size}")
    count = s.size // st.size
    xfmt = "<I" if elf.order == ELFDATA2LSB else ">I"
    if shndx_sec is not None and shndx_sec.size < count * 4:
        raise ElfError(f"section {shndx_sec.index} '{shndx_sec.name}': SHT_SYMTAB_SHNDX has {shndx_sec.size // 4} "
                       f"entries for {count} symbols")
    if s.info > count:
        raise ElfError(f"{where}: sh_info {s.info} (first global symbol) exceeds the {count} symbols")
    out = bytearray()
    xout = bytearray()
    smap: dict[int, int] = {}
    locals_kept = 0
    dropped = False
    for i in range(count):
        sym = tup._make(st.unpack_from(s.data, i * st.size))
        shndx = sym.st_shndx
        ext = struct.unpack_from(xfmt, shndx_sec.data, i * 4)[0] if shndx_sec is not None else 0
        target = ext if shndx == SHN_XINDEX else (shndx if 0 < shndx < SHN_LORESERVE else None)
        if i > 0 and target is not None:
            if target in removed:
                dropped = True
                continue
            if target not in new_index:
                raise ElfError(f"{where}: symbol {i}: st_shndx {target} is not a section index")
            mapped = new_index[target]
            if shndx == SHN_XINDEX:
                ext = mapped
            elif mapped >= SHN_LORESERVE:
                raise ElfError(f"{where}: symbol {i}: renumbered section index {mapped} needs SHT_SYMTAB_SHNDX")
            else:
                sym = sym._replace(st_shndx=mapped)
        smap[i] = len(smap)
        if i < s.info:
            locals_kept += 1
        out += st.pack(*sym)
        if shndx_sec is not None:
            xout += struct.pack(xfmt, ext)
    o = by_old[s.index]
    o.data = bytes(out)
    o.size = len(out)
    o.info = locals_kept
    if shndx_sec is not None and shndx_sec.index in by_old:
        x = by_old[shndx_sec.index]
        x.data = bytes(xout)
        x.size = len(xout)
    return smap if dropped else None


def _rewrite_relocs(elf: _Elf, s: ElfSection, smap: dict[int, int], secs: list[ElfSection]) -> bytes:
    layout = Elf_Rela if s.sh_type == SHT_RELA else Elf_Rel
    st = layout.struct(elf.cls, elf.order)
    where = f"relocation section {s.index} '{s.name}' at {s.offset:#x}"
    if s.size % st.size:
        raise ElfError(f"{where}: sh_size {s.size} is not a multiple of the entry size {st.size}")
    if elf.is64 and elf.ehdr.e_machine == EM_MIPS:
        raise ElfError(f"{where}: renumbering MIPS64 relocations is not supported")
    shift, mask = (32, 0xFFFFFFFF) if elf.is64 else (8, 0xFF)
    out = bytearray()
    for i in range(s.size // st.size):
        rel = st.record._make(st.unpack_from(s.data, i * st.size))
        sym = rel.r_info >> shift
        if sym:
            if sym not in smap:
                raise ElfError(f"{where}: relocation {i} uses symbol {sym}, which is defined in a removed section")
            rel = rel._replace(r_info=(smap[sym] << shift) | (rel.r_info & mask))
        out += st.pack(*rel)
    return bytes(out)


def _rewrite_addrsig(s: ElfSection, smap: dict[int, int]) -> bytes:
    data = bytes(s.data)
    pos = 0
    out = bytearray()
    where = f"section {s.index} '{s.name}'"
    while pos < len(data):
        sym, pos = _uleb(data, pos, where)
        if sym in smap:
            out += _enc_uleb(smap[sym])
    return bytes(out)


# ---------------------------------------------------------------------------------------------
# An empty relocatable object
# ---------------------------------------------------------------------------------------------

def empty_relocatable_like(buf) -> bytes:
    """An ELF relocatable object with no code or data (null symbol, an empty `.note.GNU-stack`), of the same class,
    byte order, OS ABI, machine and flags as the ELF file `buf`: a carrier for an
    `.llvm.offloading` section that the host linker accepts beside that file."""
    view = byte_view(buf)
    if not is_elf(view) or len(view) < 20:
        raise ElfError("reference object is not an ELF file")
    ei_class, ei_data = view[4], view[5]
    if ei_class not in (ELFCLASS32, ELFCLASS64) or ei_data not in (ELFDATA2LSB, ELFDATA2MSB):
        raise ElfError(f"reference object: unsupported ELF class {ei_class} / data encoding {ei_data} at offset 4")
    ehdr_struct, shdr_struct = Elf_Ehdr.struct(ei_class, ei_data), Elf_Shdr.struct(ei_class, ei_data)
    ehsize, shentsize = _IDENT_SIZE + ehdr_struct.size, shdr_struct.size
    symsize = Elf_Sym.struct(ei_class, ei_data).size
    if len(view) < ehsize:
        raise ElfError(f"reference object: ELF header truncated ({len(view)} of {ehsize} bytes)")
    ref = Elf_Ehdr.tuple(ei_class)._make(ehdr_struct.unpack_from(view, _IDENT_SIZE))
    strtab = b"\0.symtab\0.strtab\0.note.GNU-stack\0"
    align = 8 if ei_class == ELFCLASS64 else 4
    sym_off = ehsize + len(strtab)
    sym_off += -sym_off % align
    shoff = sym_off + symsize
    shoff += -shoff % align
    ident = bytes(view[:4]) + bytes([ei_class, ei_data, 1, view[7], view[8]]) + b"\0" * 7
    header = ident + ehdr_struct.pack(*Elf_Ehdr.tuple(ei_class)(
        e_type=ET_REL, e_machine=ref.e_machine, e_version=1, e_entry=0, e_phoff=0, e_shoff=shoff,
        e_flags=ref.e_flags, e_ehsize=ehsize, e_phentsize=0, e_phnum=0, e_shentsize=shentsize, e_shnum=4,
        e_shstrndx=1))

    def shdr(name, sh_type, offset, size, link, info, addralign, entsize):
        return shdr_struct.pack(*Elf_Shdr.tuple(ei_class)(
            sh_name=name, sh_type=sh_type, sh_flags=0, sh_addr=0, sh_offset=offset, sh_size=size, sh_link=link,
            sh_info=info, sh_addralign=addralign, sh_entsize=entsize))

    out = bytearray(header)
    out += strtab
    out += b"\0" * (sym_off - len(out))
    out += b"\0" * symsize  # the null symbol
    out += b"\0" * (shoff - len(out))
    out += shdr(0, SHT_NULL, 0, 0, 0, 0, 0, 0)
    out += shdr(9, SHT_STRTAB, ehsize, len(strtab), 0, 0, 1, 0)           # .strtab (also section names)
    out += shdr(1, SHT_SYMTAB, sym_off, symsize, 1, 1, align, symsize)    # .symtab
    out += shdr(17, SHT_PROGBITS, shoff, 0, 0, 0, 1, 0)                 # .note.GNU-stack: no executable stack
    return bytes(out)


# ---------------------------------------------------------------------------------------------
# What the operations know of an ELF file (`magic.FORMAT_MODULES`); `inspect` searches its
# sections itself (they may hold every other container)
# ---------------------------------------------------------------------------------------------

def _offload_binaries(buf, name: str):
    """`extract`: every section of type `SHT_LLVM_OFFLOADING` (its name does not matter), in
    relocatable objects, executables and shared libraries only (LLVM makes an ObjectFile for those;
    cores and others hold no images)."""
    if elf_type(buf) not in ("ET_REL", "ET_EXEC", "ET_DYN", 1, 2, 3):
        return
    for sec in read_sections(buf):
        if sec.sh_type == SHT_LLVM_OFFLOADING:
            yield OffloadBinariesAt(sec.name, (sec.offset, sec.size), sec.data,
                                    f"{name}: section {sec.name} at file offset {sec.offset:#x}")


FORMATS = (Format(FileKind.ELF, magics=(ELF_MAGIC,), extract="elf", offload_binaries=_offload_binaries,
                  no_images="an ELF file with no offloading section (SHT_LLVM_OFFLOADING)"),)
