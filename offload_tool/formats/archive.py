"""Static (`ar`) archives: read GNU/SysV and BSD archives; write them as LLVM 19 writes GNU ones.

The writer reproduces `llvm::writeArchive(K_GNU, Deterministic=true, NormalSymtab, Thin=false)`,
which is what `llvm-ar rcD` and `clang-offload-bundler -type=a -unbundle` produce:

    "!<arch>\\n"
    "/" symbol table      (when any member is an object file: ELF, or LLVM bitcode)
    "//" long-name table  (when any name is >= 16 characters or contains '/'; names deduplicated)
    members               ("name/" or "/<offset>" headers; date 0, uid 0, gid 0, mode 644)

each member padded to an even size with `\\n`.  The symbol table member (header mode `0`) holds a
big-endian u32 count, one u32 member-header offset per symbol and the NUL-terminated names, padded
with NULs to an even size; an archive with object members but no symbols gets an empty table of
8 zero bytes, as LLVM writes it.  Offsets that do not fit 32 bits switch to the `/SYM64/` table.

Archive symbols are what LLVM's `isArchiveSymbol` keeps: global (not local), defined, not
format-specific (no STT_FILE/STT_SECTION).  ELF symbols come from `.symtab`.  For LLVM bitcode
members LLVM parses the IR module; we read the module's precomputed IR symbol table (the
`SYMTAB_BLOCK` blob that clang writes into every bitcode file, built from the same
`ModuleSymbolTable`), which gives the same names in the same order.  Bitcode without that block
(e.g. written by a tool that omits it), or a member that does not parse, contributes no symbols
where LLVM would parse the IR or fail: a documented difference.
"""

from __future__ import annotations

import os
import struct
import stat
from collections.abc import Sequence

from .. import budget
from ..errors import ArchiveError, OffloadError
from ..fileio import byte_view
from .layout import Layout
from .kinds import AR_MAGIC, BC_MAGIC, BC_WRAPPER_MAGIC, ELF_MAGIC, THIN_AR_MAGIC, FileKind, Format
from ..records import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO

__all__ = ["ArchiveMember", "AR_HDR", "read_archive", "write_archive",
           "archive_symbols", "member_symbols"]

# The member header, `struct ar_hdr` of <ar.h>: space-padded text fields.
AR_HDR = Layout("ar_hdr", [("ar_name", "16s"), ("ar_date", "12s"), ("ar_uid", "6s"), ("ar_gid", "6s"),
                           ("ar_mode", "8s"), ("ar_size", "10s"), ("ar_fmag", "2s")])
_HEADER_SIZE = AR_HDR.size
_FMAG = b"`\n"
_SYM64_THRESHOLD = 1 << 32


class ArchiveMember(Record):
    """One archive member: its name (long names resolved, GNU's trailing '/' removed), its
    contents (a slice of the archive) and the file offset of its header."""

    __slots__ = ("name", "data", "offset")

    def __init__(self, name: str, data: memoryview, offset: int) -> None:
        self.name = name
        self.data = data
        self.offset = offset


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------

def _decimal(raw: bytes, field: str, offset: int) -> int:
    text = raw.rstrip(b" ")
    if not text or not text.isdigit():
        raise ArchiveError(f"truncated or malformed archive: member header at offset {offset:#x}: {field} "
                           f"{raw.decode('latin-1')!r} is not a decimal number")
    return int(text)


def read_archive(buf) -> list[ArchiveMember]:
    """The members of a GNU/SysV or BSD archive, in archive order (symbol tables and the GNU
    long-name table are not members).  Thin archives are refused: their members live in other
    files, and names from an untrusted archive must never select files to read."""
    view = byte_view(buf)
    size = len(view)
    head = bytes(view[:8])
    if head == THIN_AR_MAGIC:
        raise ArchiveError("thin archives are not supported (their members are separate files)")
    if head != AR_MAGIC:
        # LLVM's object::Archive gives this message for anything without the magic.
        raise ArchiveError("file too small to be an archive")
    members: list[ArchiveMember] = []
    long_names: bytes | None = None
    resolved: dict[int, str] = {}  # long-name offset -> name: members sharing a name share one string
    allowance = 0  # bytes of long names left to decode (set with the table)
    pos = 8
    while pos < size:
        if pos + _HEADER_SIZE > size:
            if pos + 1 == size and view[pos] == 0x0A:
                break  # a stray final padding byte
            raise ArchiveError(f"truncated or malformed archive: member header at offset {pos:#x} needs "
                               f"{_HEADER_SIZE} bytes, {size - pos} remain")
        hdr = AR_HDR.read(view, pos, ArchiveError)
        if hdr.ar_fmag != _FMAG:
            raise ArchiveError(f"truncated or malformed archive: member header at offset {pos:#x}: ar_fmag is "
                               f"{hdr.ar_fmag!r}, expected '`\\n'")
        data_size = _decimal(hdr.ar_size, "ar_size", pos)
        data_start = pos + _HEADER_SIZE
        if data_size > size - data_start:
            raise ArchiveError(f"truncated or malformed archive: member at offset {pos:#x}: ar_size {data_size} "
                               f"runs past the end of the archive ({size} bytes)")
        raw_name = hdr.ar_name.rstrip(b" ")
        data = view[data_start:data_start + data_size]
        next_pos = data_start + data_size + (data_size & 1)
        if raw_name in (b"/", b"/SYM64/", b"/<ECSYMBOLS>", b"__.SYMDEF", b"__.SYMDEF SORTED", b"__.SYMDEF_64",
                        b"__.SYMDEF_64 SORTED"):
            pos = next_pos
            continue
        if raw_name == b"//":
            long_names = bytes(data)
            # Where the last terminators lie: a search that cannot succeed is not started (each
            # lookup then costs the length of the name it finds, never the rest of the table).
            last_slash_nl, last_nl = long_names.rfind(b"/\n"), long_names.rfind(b"\n")
            resolved.clear()
            # Names at distinct offsets may overlap (suffixes of one long name); a legitimate
            # table decodes to its own size.
            allowance = 4 * len(long_names) + (64 << 10)
            pos = next_pos
            continue
        if raw_name.startswith(b"#1/"):
            # BSD: the name (length in the header) precedes the data and counts in ar_size.
            name_len = _decimal(raw_name[3:], "ar_name (#1/ length)", pos)
            if name_len > data_size:
                raise ArchiveError(f"truncated or malformed archive: member at offset {pos:#x}: BSD name length "
                                   f"{name_len} exceeds ar_size {data_size}")
            name_bytes = bytes(view[data_start:data_start + name_len]).rstrip(b"\0")
            if name_bytes in (b"__.SYMDEF", b"__.SYMDEF SORTED", b"__.SYMDEF_64", b"__.SYMDEF_64 SORTED"):
                pos = next_pos
                continue
            data = view[data_start + name_len:data_start + data_size]
        elif raw_name.startswith(b"/") and len(raw_name) > 1:
            name_off = _decimal(raw_name[1:], "ar_name (long-name offset)", pos)
            if long_names is None:
                raise ArchiveError(f"truncated or malformed archive: member at offset {pos:#x} refers to long "
                                   f"name {name_off} but the archive has no '//' name table")
            if name_off >= len(long_names):
                raise ArchiveError(f"truncated or malformed archive: member at offset {pos:#x}: long name offset "
                                   f"{name_off} is past the end of the name table ({len(long_names)} bytes)")
            name = resolved.get(name_off)
            if name is None:
                end = long_names.find(b"/\n", name_off) if name_off <= last_slash_nl else -1
                if end < 0:
                    end = long_names.find(b"\n", name_off) if name_off <= last_nl else -1
                    if end < 0:
                        end = len(long_names)
                allowance -= end - name_off
                if allowance < 0:
                    raise ArchiveError(f"truncated or malformed archive: member at offset {pos:#x}: long names "
                                       f"overlap: they would take more than four times the {len(long_names)}-byte "
                                       f"name table")
                name = resolved[name_off] = _member_name(long_names[name_off:end], pos)
            budget.charge("entries", 1, f"archive member at offset {pos:#x}")
            members.append(ArchiveMember(name, data, pos))
            pos = next_pos
            continue
        else:
            name_bytes = raw_name[:-1] if raw_name.endswith(b"/") else raw_name
        budget.charge("entries", 1, f"archive member at offset {pos:#x}")
        members.append(ArchiveMember(_member_name(name_bytes, pos), data, pos))
        pos = next_pos
    return members


def _member_name(raw: bytes, offset: int) -> str:
    budget.charge("names", len(raw), f"archive member name at offset {offset:#x}")
    return raw.decode("utf-8", "surrogateescape")


# ---------------------------------------------------------------------------------------------
# Archive symbols
# ---------------------------------------------------------------------------------------------

def member_symbols(data) -> list[bytes] | None:
    """The archive-symbol-table names LLVM lists for one member, or None if the member is not a
    symbolic file (no object: does not make LLVM write a symbol table)."""
    if bytes(data[:4]) not in _SYMBOLIC_HEADS:
        return None  # most device payloads: no identify() per member
    head = bytes(data[:4])
    if head == ELF_MAGIC and len(data) >= 18:  # identify_magic needs e_type too
        return _elf_symbols(data)
    if head in (BC_MAGIC, BC_WRAPPER_MAGIC):
        from .bitcode import bitcode_symbols  # here: only archives with bitcode members need it

        return bitcode_symbols(data)
    return None


_SYMBOLIC_HEADS = frozenset({ELF_MAGIC, BC_MAGIC, BC_WRAPPER_MAGIC})

STT_SECTION, STT_FILE = 3, 4
STB_LOCAL = 0
SHN_UNDEF = 0
EM_ARM, EM_AARCH64, EM_RISCV, EM_CSKY = 40, 183, 243, 252


def _elf_symbols(data) -> list[bytes]:
    from . import elf
    from ..errors import ElfError

    try:
        e = elf._Elf(data)
    except ElfError:
        return []  # LLVM would fail to write the archive; we write it without this member's symbols
    symtab = next((s for s in e.sections if s.sh_type == elf.SHT_SYMTAB), None)
    if symtab is None or symtab.link >= len(e.sections):
        return []
    strtab = e.sections[symtab.link].data
    st = elf.Elf_Sym.struct(e.cls, e.order)
    tup = elf.Elf_Sym.tuple(e.cls)
    machine = e.ehdr.e_machine
    out = []
    strtab_b = bytes(strtab)
    for i in range(1, len(symtab.data) // st.size):
        sym = tup._make(st.unpack_from(symtab.data, i * st.size))
        bind, typ = sym.st_info >> 4, sym.st_info & 0xF
        if bind == STB_LOCAL or typ in (STT_SECTION, STT_FILE) or sym.st_shndx == SHN_UNDEF:
            continue
        if sym.st_name >= len(strtab_b):
            continue
        end = strtab_b.find(b"\0", sym.st_name)
        name = strtab_b[sym.st_name:end if end >= 0 else len(strtab_b)]
        if machine == EM_AARCH64 and name.startswith((b"$d", b"$x")):
            continue
        if machine == EM_ARM and (not name or name.startswith((b"$d", b"$t", b"$a"))):
            continue
        if machine == EM_CSKY and name.startswith((b"$d", b"$t")):
            continue
        if machine == EM_RISCV and name.startswith((b".L", b"$d", b"$x")):
            continue
        out.append(name)
    return out


def archive_symbols(members: Sequence[tuple[str, object]]) -> tuple[bool, list[list[bytes]]]:
    """(whether any member is a symbolic file, per-member archive symbol names)."""
    has_object = False
    per_member = []
    for _, data in members:
        syms = member_symbols(data)
        if syms is not None:
            has_object = True
        per_member.append(syms or [])
    return has_object, per_member


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------

def _field(value, field: str) -> bytes:
    """`value` as the space-padded text of an `ar_hdr` field."""
    width = AR_HDR.size_of(field)
    text = str(value).encode("ascii") if not isinstance(value, bytes) else value
    if len(text) > width:
        raise ArchiveError(f"archive header field {text!r} does not fit in {width} characters")
    return text.ljust(width, b" ")


_DIRECT_WRITE_SIZE = 1 << 20


# `AR_HDR` as one bytes format: a header per member of an archive of thousands, without six field calls.
_AR_HDR_FORMAT = b"%-16s%-12s%-6s%-6s%-8s%-10d`\n"
assert len(_AR_HDR_FORMAT % (b"", b"", b"", b"", b"", 0)) == _HEADER_SIZE


def _member_header(name_field: bytes, size: int, mode: bytes = b"644", date_uid_gid: bytes = b"0") -> bytes:
    """A member header as LLVM's deterministic writer fills it: date, uid and gid 0."""
    if len(name_field) <= 16 and size < 10**10 and len(mode) <= 8 and len(date_uid_gid) <= 6:
        return _AR_HDR_FORMAT % (name_field, date_uid_gid, date_uid_gid, date_uid_gid, mode, size)
    return AR_HDR.build(ar_name=_field(name_field, "ar_name"), ar_date=_field(date_uid_gid, "ar_date"),
                        ar_uid=_field(date_uid_gid, "ar_uid"), ar_gid=_field(date_uid_gid, "ar_gid"),
                        ar_mode=_field(mode, "ar_mode"), ar_size=_field(size, "ar_size"), ar_fmag=_FMAG)


def _sym64_threshold() -> int:
    """4 GiB, or `$SYM64_THRESHOLD` (decimal), which LLVM's writer honours for testing."""
    text = os.environ.get("SYM64_THRESHOLD")
    if text is not None and text.isascii() and text.isdigit():
        return int(text)
    return _SYM64_THRESHOLD


def _nbytes(data) -> int:
    return data.nbytes if isinstance(data, memoryview) else len(data)


def write_archive(members: Sequence[tuple[str, object]], out: BinaryIO, *, symtab: bool = True) -> None:
    """Write `members` ((name, contents) in order) as LLVM 19's deterministic GNU archive writer does."""
    names = []
    for name, _ in members:
        raw = name.encode("utf-8", "surrogateescape")
        if not raw:
            raise ArchiveError("archive member names must not be empty")
        if b"\n" in raw or b"\0" in raw:
            raise ArchiveError(f"archive member name {name!r} contains a newline or NUL")
        names.append(raw)
    if not members:
        out.write(AR_MAGIC)
        return
    # Long-name table: names >= 16 bytes or containing '/', deduplicated (first offset reused).
    long_table = bytearray()
    long_offsets: dict[bytes, int] = {}
    name_fields = []
    for raw in names:
        if len(raw) >= 16 or b"/" in raw:
            if raw not in long_offsets:
                long_offsets[raw] = len(long_table)
                long_table += raw + b"/\n"
            name_fields.append(b"/" + str(long_offsets[raw]).encode())
        else:
            name_fields.append(raw + b"/")
    if len(long_table) % 2:
        long_table += b"\n"
    has_object, per_member = archive_symbols(members) if symtab else (False, [[] for _ in members])
    sym_count = sum(len(s) for s in per_member)
    sym_names = b"".join(n + b"\0" for syms in per_member for n in syms)
    if has_object and not sym_names:
        sym_names = b"\0\0\0"  # LLVM's empty table "to satisfy Solaris tools"
    member_sizes = [_nbytes(d) for _, d in members]
    long_member_size = _HEADER_SIZE + len(long_table) if long_table else 0

    def symtab_size(word: int) -> int:
        size = word + word * sym_count + len(sym_names)
        return size + size % 2

    # LLVM switches to /SYM64/ when the last member header would start at or past the threshold
    # (4 GiB, or $SYM64_THRESHOLD as LLVM reads it), computed with the 32-bit table.
    word = 4
    if symtab and members:
        headers = 8 + _HEADER_SIZE + symtab_size(4) + long_member_size
        last_header = headers + sum(_HEADER_SIZE + n + (n & 1) for n in member_sizes[:-1])
        if last_header >= _sym64_threshold():
            word = 8
    write_symtab = symtab and bool(sym_names)
    pos = 8 + (_HEADER_SIZE + symtab_size(word) if write_symtab else 0) + long_member_size
    offsets = []
    for n in member_sizes:
        offsets.append(pos)
        pos += _HEADER_SIZE + n + (n & 1)
    symtab_bytes = symtab_size(word)
    out.write(AR_MAGIC)
    if write_symtab:
        fmt = ">I" if word == 4 else ">Q"
        body = bytearray(struct.pack(fmt, sym_count))
        for i, syms in enumerate(per_member):
            body += struct.pack(fmt, offsets[i]) * len(syms)
        body += sym_names
        body += b"\0" * (symtab_bytes - len(body))
        out.write(_member_header(b"/" if word == 4 else b"/SYM64/", symtab_bytes, b"0"))
        out.write(body)
    if long_table:
        out.write(_member_header(b"//", len(long_table), b"", b""))
        out.write(long_table)
    fd = _real_fd(out)
    if fd is not None:
        # Headers and payloads go to the kernel as one vector per ~1000 members: no payload is
        # copied in Python, and an archive of thousands of small device objects costs a few calls.
        out.flush()
        iov: list = []
        for field, n, (_, data) in zip(name_fields, member_sizes, members):
            iov.append(_member_header(field, n))
            if n:
                iov.append(data)
            if n & 1:
                iov.append(b"\n")
        _writev_all(fd, iov)
        return
    # Not a plain file (e.g. BytesIO): small members gathered into ~1 MiB writes, large payloads
    # written straight from their buffers.
    pending = bytearray()
    for (name, data), field, n in zip(members, name_fields, member_sizes):
        pending += _member_header(field, n)
        if n >= _DIRECT_WRITE_SIZE:
            out.write(pending)
            pending.clear()
            out.write(data)
        elif n:
            pending += data
        if n & 1:
            pending += b"\n"
        if len(pending) >= _DIRECT_WRITE_SIZE:
            out.write(pending)
            pending.clear()
    out.write(pending)


_IOV_MAX = 1024


def _real_fd(out) -> int | None:
    """The file descriptor behind `out` when it is a regular file, else None."""
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):
        return None
    try:
        return fd if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except OSError:
        return None


def _writev_all(fd: int, buffers: list) -> None:
    """`os.writev` until every buffer is written (short writes resumed where they stopped)."""
    i = 0
    while i < len(buffers):
        batch = buffers[i:i + _IOV_MAX]
        written = os.writev(fd, batch)
        for b in batch:
            size = _nbytes(b)
            if written >= size:
                written -= size
                i += 1
            else:
                buffers[i] = memoryview(b)[written:]
                break


# ---------------------------------------------------------------------------------------------
# What the operations know of archives (`magic.FORMAT_MODULES`): members searched as files
# ---------------------------------------------------------------------------------------------

def _members(buf, name: str):
    """(name, bytes) of each member, read when the first is asked for (inside the caller's
    nesting budget)."""
    for m in read_archive(buf):
        yield m.name, m.data


def _thin_members(buf, name: str):
    """Thin archives are refused before anything is read (see `read_archive`)."""
    raise OffloadError(f"{name}: thin archives are not supported")


_NO_IMAGES = "an archive none of whose members holds an offload image"

FORMATS = (
    Format(FileKind.ARCHIVE, magics=(AR_MAGIC,), container="archive", members=_members, extract="archive",
           no_images=_NO_IMAGES),
    Format(FileKind.THIN_ARCHIVE, magics=(THIN_AR_MAGIC,), container="archive", members=_thin_members,
           extract="archive", no_images=_NO_IMAGES),
)
