"""Finding OffloadBinary images wherever LLVM finds them (`extractOffloadBinaries`, llvm-formats.md §6.3).

Dispatch is on the file's magic, as LLVM's `identify_magic`: a raw package (`10 FF 10 AD`) is
read back to back; ELF relocatable objects, executables and shared libraries contribute every
section of type `SHT_LLVM_OFFLOADING` (the name does not matter), COFF objects every section
whose name starts with `.llvm.offloading`; LLVM bitcode contributes the
globals listed in the `llvm.embedded.objects` named metadata whose section is
`.llvm.offloading`; static archives are searched member by member, recursively.  Anything else
holds no images (not an error, as in LLVM)."""

from __future__ import annotations

from dataclasses import dataclass
from .errors import OffloadBinaryError, OffloadError
from .fileio import byte_view
from .offload_binary import OffloadImage, is_bitcode, read_offload_binaries

__all__ = ["FoundImage", "find_offload_images", "file_kind", "SHT_LLVM_OFFLOADING", "MAX_ARCHIVE_DEPTH"]

SHT_LLVM_OFFLOADING = 0x6FFF4C0B
OFFLOADING_SECTION = ".llvm.offloading"
MAX_ARCHIVE_DEPTH = 8

_ELF_MAGIC = b"\x7fELF"
# `identify_magic` COFF object machines: AMD64, ARM64, i386, ARMNT.
_COFF_MACHINES = {0x8664, 0xAA64, 0x014C, 0x01C4}
_AR_MAGIC = b"!<arch>\n"
_THIN_AR_MAGIC = b"!<thin>\n"


@dataclass
class FoundImage:
    """An image and where it was found.

    `path` names the file, archive member and section, e.g. `lib.a(member.o):.llvm.offloading[0]`
    (the index counts binaries within that section or package).  `container` is `package` (a raw
    OffloadBinary file), `elf`, `coff` or `bitcode`.  `member` is the innermost archive member name (the
    buffer identifier LLVM gives the image: the input path, or the archive child's name)."""

    path: str
    container: str
    image: OffloadImage
    section: str | None
    member: str | None = None
    index: int = 0


def file_kind(buf) -> str:
    """What `identify_magic` would call `buf`, as far as extraction cares:
    `package`, `elf`, `coff`, `bitcode`, `archive` or `other`."""
    head = bytes(buf[:8])
    if head[:4] == b"\x10\xff\x10\xad":
        return "package"
    if head[:4] == _ELF_MAGIC:
        return "elf"
    if is_bitcode(head):
        return "bitcode"
    if head == _AR_MAGIC or head == _THIN_AR_MAGIC:
        return "archive"
    if len(head) >= 2 and (head[0] | head[1] << 8) in _COFF_MACHINES:
        return "coff"
    return "other"


def _elf_images(buf, name: str, member: str | None, llvm_version: int | None) -> list[FoundImage]:
    from . import elf  # shared ELF reader (pyelftools based)

    found: list[FoundImage] = []
    etype = elf.elf_type(buf)
    # LLVM creates an ObjectFile only for these; cores and others hold no images.
    if etype not in ("ET_REL", "ET_EXEC", "ET_DYN", 1, 2, 3):
        return found
    for sec in elf.read_sections(buf):
        if sec.sh_type != SHT_LLVM_OFFLOADING:
            continue
        try:
            images = read_offload_binaries(sec.data, llvm_version=llvm_version)
        except OffloadBinaryError as exc:
            raise OffloadBinaryError(f"{name}: section {sec.name} at file offset {sec.offset:#x}: {exc}") from None
        for i, img in enumerate(images):
            found.append(FoundImage(f"{name}:{sec.name}[{i}]", "elf", img, sec.name, member, i))
    return found


def _bitcode_images(buf, name: str, member: str | None, llvm_version: int | None) -> list[FoundImage]:
    found: list[FoundImage] = []
    for section, data in _bitcode_objects(buf, name):
        try:
            images = read_offload_binaries(data, llvm_version=llvm_version)
        except OffloadBinaryError as exc:
            raise OffloadBinaryError(f"{name}: embedded object in {section}: {exc}") from None
        for i, img in enumerate(images):
            found.append(FoundImage(f"{name}:{section}[{i}]", "bitcode", img, section, member, i))
    return found


def _coff_sections(buf, name: str) -> list[tuple[str, int, int]]:
    """(name, file offset, size) of every section of a COFF object, bounds-checked."""
    import struct

    if len(buf) < 20:
        raise OffloadError(f"{name}: COFF header is truncated")
    _machine, nsections, _time, symtab_ptr, nsymbols, opt_size, _chars = struct.unpack_from("<HHIIIHH", buf, 0)
    table = 20 + opt_size
    if table + 40 * nsections > len(buf):
        raise OffloadError(f"{name}: COFF section table ({nsections} sections at {table:#x}) runs past the end")
    strtab = symtab_ptr + 18 * nsymbols
    out = []
    for i in range(nsections):
        off = table + 40 * i
        raw_name = bytes(buf[off:off + 8]).rstrip(b"\0")
        size, ptr = struct.unpack_from("<II", buf, off + 16)
        if raw_name.startswith(b"/") and not raw_name.startswith(b"//") and raw_name[1:].isdigit():
            pos = strtab + int(raw_name[1:])
            end = bytes(buf[pos:pos + 4096]).find(b"\0") if pos < len(buf) else -1
            if end < 0:
                raise OffloadError(f"{name}: COFF section {i} long name at {pos:#x} is out of range")
            raw_name = bytes(buf[pos:pos + end])
        sec_name = raw_name.decode("utf-8", "surrogateescape")
        if size and ptr + size > len(buf):
            raise OffloadError(f"{name}: COFF section {sec_name} data ({size} bytes at {ptr:#x}) runs past the end")
        out.append((sec_name, ptr, size))
    return out


def _coff_images(buf, name: str, member: str | None, llvm_version: int | None) -> list[FoundImage]:
    """COFF objects: sections whose name starts with `.llvm.offloading` (LLVM's rule for COFF)."""
    found: list[FoundImage] = []
    for sec_name, ptr, size in _coff_sections(buf, name):
        if not sec_name.startswith(OFFLOADING_SECTION):
            continue
        try:
            images = read_offload_binaries(buf[ptr:ptr + size], llvm_version=llvm_version)
        except OffloadBinaryError as exc:
            raise OffloadBinaryError(f"{name}: section {sec_name} at file offset {ptr:#x}: {exc}") from None
        for i, img in enumerate(images):
            found.append(FoundImage(f"{name}:{sec_name}[{i}]", "coff", img, sec_name, member, i))
    return found


def _archive_images(buf, name: str, llvm_version: int | None, depth: int) -> list[FoundImage]:
    from .archive import read_archive

    if depth >= MAX_ARCHIVE_DEPTH:
        raise OffloadError(f"{name}: archives nested more than {MAX_ARCHIVE_DEPTH} deep")
    found: list[FoundImage] = []
    for m in read_archive(buf):
        found.extend(_find(m.data, f"{name}({m.name})", m.name, llvm_version, depth + 1))
    return found


def _find(buf, name: str, member: str | None, llvm_version: int | None, depth: int) -> list[FoundImage]:
    kind = file_kind(buf)
    if kind == "package":
        try:
            images = read_offload_binaries(buf, llvm_version=llvm_version)
        except OffloadBinaryError as exc:
            raise OffloadBinaryError(f"{name}: {exc}") from None
        return [FoundImage(f"{name}[{i}]", "package", img, None, member, i) for i, img in enumerate(images)]
    if kind == "elf":
        return _elf_images(buf, name, member, llvm_version)
    if kind == "bitcode":
        return _bitcode_images(buf, name, member, llvm_version)
    if kind == "coff":
        return _coff_images(buf, name, member, llvm_version)
    if kind == "archive":
        if bytes(buf[:8]) == _THIN_AR_MAGIC:
            raise OffloadError(f"{name}: thin archives are not supported")
        return _archive_images(buf, name, llvm_version, depth)
    return []


def find_offload_images(buf, name: str, *, llvm_version: int | None = None) -> list[FoundImage]:
    """Every OffloadBinary image in `buf` (a file's contents; `name` is used in paths and errors).

    Bad packages raise `OffloadBinaryError`; bad containers the container's `OffloadError`."""
    return _find(byte_view(buf), name, None, llvm_version, 0)


# --------------------------------------------------------------------------------------------
# LLVM bitcode: just enough of the bitstream format to find `.llvm.offloading` globals.
#
# LLVM (`extractFromBitcode`) takes the globals named by `!llvm.embedded.objects` whose metadata
# section string is `.llvm.offloading` and whose initializer is a constant data array.  We read
# the module block's global variables, its constants and its metadata block for exactly that;
# function bodies and everything else are skipped by block length.

_BC_WRAPPER_MAGIC = b"\xde\xc0\x17\x0b"
_BC_MAGIC = b"BC\xc0\xde"

_END_BLOCK, _ENTER_SUBBLOCK, _DEFINE_ABBREV, _UNABBREV_RECORD = 0, 1, 2, 3
_BLOCKINFO_BLOCK_ID = 0
_MODULE_BLOCK_ID = 8
_CONSTANTS_BLOCK_ID = 11

_MODULE_CODE_VERSION = 1
_MODULE_CODE_SECTIONNAME = 5
_MODULE_CODE_GLOBALVAR = 7
_MODULE_CODE_FUNCTION = 8
_MODULE_CODE_ALIAS_OLD = 9
_MODULE_CODE_ALIAS = 14
_MODULE_CODE_IFUNC = 15
_CST_CODE_SETTYPE = 1
_CST_CODE_STRING = 8
_CST_CODE_CSTRING = 9
_CST_CODE_DATA = 22

_ENC_FIXED, _ENC_VBR, _ENC_ARRAY, _ENC_CHAR6, _ENC_BLOB = 1, 2, 3, 4, 5
_CHAR6 = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._"
_MAX_BLOCK_DEPTH = 32


class _BitcodeError(OffloadBinaryError):
    pass


class _Bits:
    """LSB-first bit reader over a byte buffer with bounds checks."""

    def __init__(self, buf, name: str) -> None:
        self.buf = buf
        self.nbits = len(buf) * 8
        self.pos = 0
        self.name = name

    def fail(self, what: str):
        raise _BitcodeError(f"{self.name}: malformed bitcode at bit {self.pos} (byte {self.pos // 8:#x}): {what}")

    def read(self, n: int) -> int:
        if n == 0:
            return 0
        if n > 64:
            self.fail(f"field width {n} is too large")
        if self.pos + n > self.nbits:
            self.fail("unexpected end of data")
        start = self.pos >> 3
        shift = self.pos & 7
        nbytes = (shift + n + 7) >> 3
        v = int.from_bytes(self.buf[start:start + nbytes], "little") >> shift
        self.pos += n
        return v & ((1 << n) - 1)

    def vbr(self, n: int) -> int:
        if n < 2 or n > 32:
            self.fail(f"VBR width {n} is invalid")
        hi = 1 << (n - 1)
        result = 0
        shift = 0
        while True:
            piece = self.read(n)
            result |= (piece & (hi - 1)) << shift
            if not piece & hi:
                return result
            shift += n - 1
            if shift > 64:
                self.fail("VBR value is too long")

    def align32(self) -> None:
        self.pos = (self.pos + 31) & ~31
        if self.pos > self.nbits:
            self.fail("unexpected end of data")

    def bytes_at(self, nbytes: int) -> bytes:
        """`nbytes` whole bytes starting at the current (any) bit position."""
        if self.pos + nbytes * 8 > self.nbits:
            self.fail("array runs past the end of the data")
        start = self.pos >> 3
        shift = self.pos & 7
        if shift == 0:
            data = bytes(self.buf[start:start + nbytes])
        else:
            v = int.from_bytes(self.buf[start:start + nbytes + 1], "little") >> shift
            data = (v & ((1 << (8 * nbytes)) - 1)).to_bytes(nbytes, "little")
        self.pos += nbytes * 8
        return data


def _read_abbrev(bits: _Bits) -> list[tuple[int, int]]:
    """DEFINE_ABBREV: a list of (encoding, value); encoding 0 means a literal."""
    ops = []
    count = bits.vbr(5)
    i = 0
    while i < count:
        if bits.read(1):
            ops.append((0, bits.vbr(8)))
        else:
            enc = bits.read(3)
            if enc in (_ENC_FIXED, _ENC_VBR):
                width = bits.vbr(5)
                if width == 0:
                    ops.append((0, 0))  # LLVM reads Fixed(0)/VBR(0) as literal 0
                else:
                    if enc == _ENC_VBR and width < 2 or width > 64:
                        bits.fail(f"abbreviation operand width {width} is invalid")
                    ops.append((enc, width))
            elif enc in (_ENC_ARRAY, _ENC_CHAR6, _ENC_BLOB):
                ops.append((enc, 0))
            else:
                bits.fail(f"unknown abbreviation encoding {enc}")
        i += 1
    for j, (enc, _) in enumerate(ops):
        if enc == _ENC_ARRAY and j != len(ops) - 2:
            bits.fail("array operand is not the second to last")
        if enc == _ENC_BLOB and j != len(ops) - 1:
            bits.fail("blob operand is not the last")
    return ops


def _scalar(bits: _Bits, enc: int, value: int) -> int:
    if enc == 0:
        return value
    if enc == _ENC_FIXED:
        return bits.read(value)
    if enc == _ENC_VBR:
        return bits.vbr(value)
    if enc == _ENC_CHAR6:
        return _CHAR6[bits.read(6)]
    bits.fail("array or blob used as a scalar")


def _read_abbreviated(bits: _Bits, ops: list[tuple[int, int]]) -> tuple[int, list[int] | bytes]:
    """An abbreviated record: (code, operands).  A byte array or blob comes back as `bytes`."""
    if not ops:
        bits.fail("empty abbreviation")
    values: list[int] = []
    tail: bytes | None = None
    i = 0
    while i < len(ops):
        enc, v = ops[i]
        if enc == _ENC_ARRAY:
            n = bits.vbr(6)
            elt_enc, elt_v = ops[i + 1]
            if elt_enc not in (_ENC_FIXED, _ENC_VBR, _ENC_CHAR6):
                bits.fail("array element is not a scalar encoding")
            if n > bits.nbits - bits.pos:
                bits.fail(f"array of {n} elements runs past the end of the data")
            if elt_enc == _ENC_FIXED and elt_v == 8:
                tail = bits.bytes_at(n)
            else:
                values.extend(_scalar(bits, elt_enc, elt_v) for _ in range(n))
            i += 2
            continue
        if enc == _ENC_BLOB:
            n = bits.vbr(6)
            bits.align32()
            tail = bits.bytes_at(n)
            bits.align32()
            i += 1
            continue
        values.append(_scalar(bits, enc, v))
        i += 1
    if values:
        code, rest = values[0], values[1:]
    elif tail:
        code, tail, rest = tail[0], tail[1:], []
    else:
        bits.fail("record without a code")
    if tail is None:
        return code, rest
    if not rest:
        return code, tail
    # Scalars before a byte array: keep them as a list of ints with the bytes appended.
    return code, rest + list(tail)


class _BitstreamWalker:
    """Walks blocks, keeping BLOCKINFO abbreviations, and calls back for records of chosen blocks."""

    def __init__(self, bits: _Bits) -> None:
        self.bits = bits
        self.blockinfo: dict[int, list] = {}

    def skip_block(self) -> None:
        bits = self.bits
        bits.align32()
        nwords = bits.read(32)
        if bits.pos + nwords * 32 > bits.nbits:
            bits.fail(f"block length of {nwords} words runs past the end of the data")
        bits.pos += nwords * 32

    def enter(self) -> tuple[int, int]:
        """After ENTER_SUBBLOCK: (block id, abbreviation width); positioned at the block's body."""
        bits = self.bits
        block_id = bits.vbr(8)
        width = bits.vbr(4)
        if width < 1 or width > 32:
            bits.fail(f"abbreviation width {width} is invalid")
        return block_id, width

    def records(self, block_id: int, width: int, depth: int):
        """Yield ('record', code, ops) and ('block', id, width) events of one block until END_BLOCK."""
        bits = self.bits
        if depth > _MAX_BLOCK_DEPTH:
            bits.fail("blocks nested too deep")
        bits.align32()
        nwords = bits.read(32)
        end = bits.pos + nwords * 32
        if end > bits.nbits:
            bits.fail(f"block length of {nwords} words runs past the end of the data")
        abbrevs = list(self.blockinfo.get(block_id, []))
        current_info: int | None = None
        while True:
            if bits.pos >= end:
                bits.fail(f"block {block_id} has no END_BLOCK")
            abbrev_id = bits.read(width)
            if abbrev_id == _END_BLOCK:
                bits.align32()
                return
            if abbrev_id == _ENTER_SUBBLOCK:
                sub_id, sub_width = self.enter()
                yield ("block", sub_id, sub_width)
                continue
            if abbrev_id == _DEFINE_ABBREV:
                ops = _read_abbrev(bits)
                if block_id == _BLOCKINFO_BLOCK_ID:
                    if current_info is None:
                        bits.fail("BLOCKINFO abbreviation before SETBID")
                    self.blockinfo.setdefault(current_info, []).append(ops)
                else:
                    abbrevs.append(ops)
                continue
            if abbrev_id == _UNABBREV_RECORD:
                code = bits.vbr(6)
                n = bits.vbr(6)
                if n > bits.nbits - bits.pos:
                    bits.fail(f"record with {n} operands runs past the end of the data")
                ops = [bits.vbr(6) for _ in range(n)]
            else:
                idx = abbrev_id - 4
                if idx >= len(abbrevs):
                    bits.fail(f"undefined abbreviation {abbrev_id} in block {block_id}")
                code, ops = _read_abbreviated(bits, abbrevs[idx])
            if block_id == _BLOCKINFO_BLOCK_ID:
                if code == 1:  # SETBID
                    if not ops:
                        bits.fail("SETBID without a block id")
                    current_info = ops[0]
                continue
            yield ("record", code, ops)


def _bitcode_stream(buf, name: str):
    data = memoryview(buf)
    if bytes(data[:4]) == _BC_WRAPPER_MAGIC:
        if len(data) < 20:
            raise _BitcodeError(f"{name}: bitcode wrapper header is truncated")
        offset = int.from_bytes(data[8:12], "little")
        size = int.from_bytes(data[12:16], "little")
        if offset > len(data) or size > len(data) - offset:
            raise _BitcodeError(f"{name}: bitcode wrapper offset {offset} / size {size} exceed the file")
        data = data[offset:offset + size]
    if bytes(data[:4]) != _BC_MAGIC:
        raise _BitcodeError(f"{name}: bad bitcode magic")
    return data


def _bitcode_objects(buf, name: str) -> list[tuple[str, bytes]]:
    """(section, bytes) of every global variable in the first module whose section is
    `.llvm.offloading` and whose initializer is a constant byte string."""
    data = _bitcode_stream(buf, name)
    bits = _Bits(data, name)
    bits.pos = 32
    walker = _BitstreamWalker(bits)
    while bits.pos + 32 <= bits.nbits:
        abbrev_id = bits.read(2)
        if abbrev_id != _ENTER_SUBBLOCK:
            bits.fail(f"expected a top-level block, got abbreviation {abbrev_id}")
        block_id, width = walker.enter()
        if block_id == _MODULE_BLOCK_ID:
            return _module_objects(walker, width, name)
        if block_id == _BLOCKINFO_BLOCK_ID:
            for _ in walker.records(block_id, width, 1):
                pass
        else:
            walker.skip_block()
    return []


_METADATA_BLOCK_ID = 15
_METADATA_STRING_OLD = 1
_METADATA_VALUE = 2
_METADATA_NODE = 3
_METADATA_NAME = 4
_METADATA_DISTINCT_NODE = 5
_METADATA_NAMED_NODE = 10
_METADATA_STRINGS = 35
# Module-level metadata records that do not define a metadata ID (every other record defines one).
_METADATA_NO_ID = {4, 6, 10, 11, 36, 38, 39}
_EMBEDDED_OBJECTS = b"llvm.embedded.objects"


class _Metadata:
    """What extraction needs from the module's metadata: `!llvm.embedded.objects`, its nodes,
    the value references they hold and which MDStrings spell `.llvm.offloading`."""

    def __init__(self) -> None:
        self.next_id = 0
        self.offloading_strings: set[int] = set()
        self.values: dict[int, int] = {}             # metadata ID -> value ID (ValueAsMetadata)
        self.nodes: dict[int, tuple[int, list[int]]] = {}  # metadata ID -> (operand count, first two operands)
        self.embedded: list[int] = []                # operands of !llvm.embedded.objects

    def read_block(self, walker: "_BitstreamWalker", width: int) -> None:
        target = OFFLOADING_SECTION.encode()
        pending_name: bytes | None = None
        for kind, code, ops in walker.records(_METADATA_BLOCK_ID, width, 2):
            if kind == "block":
                walker.skip_block()
                continue
            if code == _METADATA_STRINGS:
                if isinstance(ops, bytes) or len(ops) < 2:
                    walker.bits.fail("METADATA_STRINGS record without a count and offset")
                count, offset, blob = ops[0], ops[1], bytes(ops[2:])
                if offset > len(blob) or count > len(blob) * 8:
                    walker.bits.fail(f"METADATA_STRINGS count {count} / offset {offset} exceed the record")
                lengths = _Bits(blob[:offset], walker.bits.name)
                pos = offset
                for i in range(count):
                    n = lengths.vbr(6)
                    if pos + n > len(blob):
                        walker.bits.fail("METADATA_STRINGS string runs past the record")
                    if blob[pos:pos + n] == target:
                        self.offloading_strings.add(self.next_id + i)
                    pos += n
                self.next_id += count
                continue
            if isinstance(ops, bytes):
                ops = list(ops)
            if code == _METADATA_NAME:
                pending_name = bytes(x & 0xFF for x in ops)
            elif code == _METADATA_NAMED_NODE:
                if pending_name == _EMBEDDED_OBJECTS:
                    self.embedded.extend(ops)
                pending_name = None
            elif code in _METADATA_NO_ID:
                pass
            else:
                if code == _METADATA_STRING_OLD and bytes(x & 0xFF for x in ops) == target:
                    self.offloading_strings.add(self.next_id)
                elif code == _METADATA_VALUE and len(ops) >= 2:
                    self.values[self.next_id] = ops[1]
                elif code in (_METADATA_NODE, _METADATA_DISTINCT_NODE):
                    self.nodes[self.next_id] = (len(ops), ops[:2])
                self.next_id += 1

    def embedded_globals(self) -> list[int]:
        """Value IDs of the globals `extractFromBitcode` would take, in metadata order."""
        out = []
        for node_id in self.embedded:
            node = self.nodes.get(node_id)
            if node is None or node[0] < 2:
                continue
            value_md, section_md = node[1][0] - 1, node[1][1] - 1  # node operands are ID + 1
            if section_md not in self.offloading_strings or value_md not in self.values:
                continue
            out.append(self.values[value_md])
        return out


def _module_objects(walker: _BitstreamWalker, width: int, name: str) -> list[tuple[str, bytes]]:
    """Follow `extractFromBitcode`: the globals named by `!llvm.embedded.objects` nodes whose
    second operand is the string `.llvm.offloading`, with a constant byte-array initializer."""
    version = 0
    gv_init: dict[int, int] = {}  # value ID of a global variable -> value ID of its initializer
    num_values = 0
    constants: dict[int, bytes] = {}
    metadata = _Metadata()
    for event in walker.records(_MODULE_BLOCK_ID, width, 1):
        kind, code, ops = event
        if kind == "block":
            block_id, sub_width = code, ops
            if block_id == _CONSTANTS_BLOCK_ID:
                wanted = set(gv_init.values())
                for ev in walker.records(block_id, sub_width, 2):
                    if ev[0] == "block":
                        walker.skip_block()
                        continue
                    _, ccode, cops = ev
                    if ccode == _CST_CODE_SETTYPE:
                        continue
                    if num_values in wanted and ccode in (_CST_CODE_STRING, _CST_CODE_CSTRING, _CST_CODE_DATA):
                        raw = cops if isinstance(cops, bytes) else (
                            bytes(cops) if all(0 <= x < 256 for x in cops) else None)
                        if raw is not None:
                            constants[num_values] = raw + (b"\0" if ccode == _CST_CODE_CSTRING else b"")
                    num_values += 1
            elif block_id == _METADATA_BLOCK_ID:
                metadata.read_block(walker, sub_width)
            elif block_id == _BLOCKINFO_BLOCK_ID:
                for _ in walker.records(block_id, sub_width, 2):
                    pass
            else:
                walker.skip_block()
            continue
        if isinstance(ops, bytes):
            ops = list(ops)
        if code == _MODULE_CODE_VERSION and ops:
            version = ops[0]
        elif code == _MODULE_CODE_GLOBALVAR:
            base = 2 if version >= 2 else 0  # v2 records start with the strtab offset and size
            if len(ops) > base + 2 and ops[base + 2]:
                gv_init[num_values] = ops[base + 2] - 1
            num_values += 1
        elif code in (_MODULE_CODE_FUNCTION, _MODULE_CODE_ALIAS, _MODULE_CODE_ALIAS_OLD, _MODULE_CODE_IFUNC):
            num_values += 1
    result = []
    for value_id in metadata.embedded_globals():
        init = gv_init.get(value_id)
        if init is not None and init in constants:
            result.append((OFFLOADING_SECTION, constants[init]))
    return result
