"""LLVM bitcode: just enough of the bitstream format for the archive symbol table and offload extraction.

The bitstream (LLVM `BitCodeFormat.rst`) is a sequence of little-endian bit fields: blocks
(`ENTER_SUBBLOCK` block id, abbreviation width, 32-bit length in words ... `END_BLOCK`), records
(unabbreviated: VBR6 code, count, operands; or abbreviated by a `DEFINE_ABBREV` in the block or in
`BLOCKINFO`), with literal, fixed, VBR, array, char6 and blob operands.  The file starts with
`BC C0DE`, optionally behind the 20-byte bitcode wrapper header.  Only the blocks a query needs are
read; everything else is skipped by its length.  Every read is bounds-checked: bad input raises
`BitcodeError` naming the file and the bit offset.  Work is linear in the input: literal operands
of an abbreviation cost no bits when used, so an abbreviation of thousands of literals used by
3-bit records would expand each bit a thousandfold; literals are counted against one per four bits
of input (real bitcode has one or two per record, each record tens of bits).

Two queries:

* `symbol_table_blobs`: the `SYMTAB_BLOCK` blob (the precomputed `irsymtab` clang writes into
  every bitcode file) and the `STRTAB_BLOCK` blob its names point into (what `llvm-ar` lists).
* `embedded_objects`: the initializers of the globals `!llvm.embedded.objects` names with a given
  section string, as LLVM's `extractFromBitcode` finds them."""

from __future__ import annotations

from ..errors import BitcodeError, OffloadBinaryError
from .layout import Layout
from .kinds import BC_MAGIC, BC_WRAPPER_MAGIC, FileKind, Format, OffloadBinariesAt
from .offload_binary import OFFLOADING_SECTION

__all__ = ["BitcodeError", "BC_MAGIC", "BC_WRAPPER_MAGIC", "bitcode_stream", "symbol_table_blobs",
           "embedded_objects", "bitcode_symbols"]

# The wrapper header: magic, version, offset, size, cputype (u32 each).


# Abbreviation IDs every block has, and DEFINE_ABBREV operand encodings (0 here means a literal).
_END_BLOCK, _ENTER_SUBBLOCK, _DEFINE_ABBREV, _UNABBREV_RECORD = 0, 1, 2, 3
_ENC_FIXED, _ENC_VBR, _ENC_ARRAY, _ENC_CHAR6, _ENC_BLOB = 1, 2, 3, 4, 5
_CHAR6 = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._"
_MAX_BLOCK_DEPTH = 32

_BLOCKINFO_BLOCK_ID = 0
_BLOCKINFO_CODE_SETBID = 1
_MODULE_BLOCK_ID = 8
_CONSTANTS_BLOCK_ID = 11
_METADATA_BLOCK_ID = 15
_STRTAB_BLOCK_ID = 23
_SYMTAB_BLOCK_ID = 25
_BLOB_RECORD = 1  # SYMTAB_BLOB and STRTAB_BLOB


class _Bits:
    """LSB-first bit cursor over a byte buffer with bounds checks."""

    def __init__(self, buf, name: str, pos: int = 0) -> None:
        self.buf = buf
        self.nbits = len(buf) * 8
        self.pos = pos
        self.name = name

    def fail(self, what: str):
        raise BitcodeError(f"{self.name}: malformed bitcode at bit {self.pos} (byte {self.pos // 8:#x}): {what}")

    def read(self, n: int) -> int:
        if n == 0:
            return 0
        if n > 64:
            self.fail(f"field width {n} is too large")
        if self.pos + n > self.nbits:
            self.fail("unexpected end of data")
        start = self.pos >> 3
        shift = self.pos & 7
        v = int.from_bytes(self.buf[start:start + ((shift + n + 7) >> 3)], "little") >> shift
        self.pos += n
        return v & ((1 << n) - 1)

    def vbr(self, n: int) -> int:
        if n < 2 or n > 32:
            self.fail(f"VBR width {n} is invalid")
        hi = 1 << (n - 1)
        result = shift = 0
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
            self.fail(f"{nbytes} bytes of array or blob run past the end of the data")
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
    for _ in range(bits.vbr(5)):
        if bits.read(1):
            ops.append((0, bits.vbr(8)))
            continue
        enc = bits.read(3)
        if enc in (_ENC_FIXED, _ENC_VBR):
            width = bits.vbr(5)
            if width == 0:
                ops.append((0, 0))  # LLVM reads Fixed(0)/VBR(0) as literal 0
            elif enc == _ENC_VBR and width < 2 or width > 64:
                bits.fail(f"abbreviation operand width {width} is invalid")
            else:
                ops.append((enc, width))
        elif enc in (_ENC_ARRAY, _ENC_CHAR6, _ENC_BLOB):
            ops.append((enc, 0))
        else:
            bits.fail(f"unknown abbreviation encoding {enc}")
    for j, (enc, _) in enumerate(ops):
        if enc == _ENC_ARRAY and j != len(ops) - 2:
            bits.fail("array operand is not the second to last")
        if enc == _ENC_BLOB and j != len(ops) - 1:
            bits.fail("blob operand is not the last")
    return ops


def _literal_count(ops: list[tuple[int, int]]) -> int:
    return sum(1 for enc, _ in ops if enc == 0)


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
        elif enc == _ENC_BLOB:
            n = bits.vbr(6)
            bits.align32()
            tail = bits.bytes_at(n)
            bits.align32()
            i += 1
        else:
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


class _Walker:
    """Walks blocks, keeping BLOCKINFO abbreviations (read wherever a BLOCKINFO block appears)."""

    def __init__(self, buf, name: str) -> None:
        self.bits = _Bits(bitcode_stream(buf, name), name, 32)
        self.blockinfo: dict[int, list] = {}
        # Literal operands the records may still expand to (see the module docstring).
        self.literals_left = self.bits.nbits // 4 + 4096

    def _block_end(self) -> int:
        bits = self.bits
        bits.align32()
        nwords = bits.read(32)
        end = bits.pos + nwords * 32
        if end > bits.nbits:
            bits.fail(f"block length of {nwords} words runs past the end of the data")
        return end

    def skip_block(self) -> None:
        """After `enter`: skip the block's body by its length."""
        self.bits.pos = self._block_end()

    def enter(self) -> tuple[int, int]:
        """After ENTER_SUBBLOCK: (block id, abbreviation width)."""
        bits = self.bits
        block_id = bits.vbr(8)
        width = bits.vbr(4)
        if width < 1 or width > 32:
            bits.fail(f"abbreviation width {width} is invalid")
        return block_id, width

    def top_level_blocks(self):
        """Yield (block id, width) of each top-level block but BLOCKINFO (read here); the consumer
        reads the block with `entries`/`records` or skips it with `skip_block`."""
        bits = self.bits
        while bits.pos + 32 <= bits.nbits:
            abbrev_id = bits.read(2)
            if abbrev_id != _ENTER_SUBBLOCK:
                bits.fail(f"expected a top-level block, got abbreviation {abbrev_id}")
            block_id, width = self.enter()
            if block_id == _BLOCKINFO_BLOCK_ID:
                self.skip_records(block_id, width, 1)
            else:
                yield block_id, width

    def skip_records(self, block_id: int, width: int, depth: int) -> None:
        for _ in self.records(block_id, width, depth):
            pass

    def records(self, block_id: int, width: int, depth: int):
        """Yield (code, operands) of one block's records, skipping its sub-blocks."""
        for kind, code, ops in self.entries(block_id, width, depth):
            if kind == "block":
                self.skip_block()
            else:
                yield code, ops

    def entries(self, block_id: int, width: int, depth: int):
        """Yield ('record', code, operands) and ('block', id, width) of one block until END_BLOCK
        (a sub-block must be read or skipped before the next step)."""
        bits = self.bits
        if depth > _MAX_BLOCK_DEPTH:
            bits.fail("blocks nested too deep")
        end = self._block_end()
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
                if sub_id == _BLOCKINFO_BLOCK_ID:
                    self.skip_records(sub_id, sub_width, depth + 1)
                else:
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
                self.literals_left -= _literal_count(abbrevs[idx])
                if self.literals_left < 0:
                    bits.fail("records expand to more literal operands than the data holds (an abbreviation "
                              "of literals used over and over)")
                code, ops = _read_abbreviated(bits, abbrevs[idx])
            if bits.pos > end:
                bits.fail(f"record runs past the end of block {block_id}")
            if block_id == _BLOCKINFO_BLOCK_ID:
                if code == _BLOCKINFO_CODE_SETBID:
                    if not ops:
                        bits.fail("SETBID without a block id")
                    current_info = ops[0]
                continue
            yield ("record", code, ops)


def bitcode_stream(buf, name: str) -> memoryview:
    """The bitstream (from `BC C0DE` on) of raw or wrapped bitcode; BitcodeError otherwise."""
    data = memoryview(buf)
    if bytes(data[:4]) == BC_WRAPPER_MAGIC:
        if len(data) < 20:
            raise BitcodeError(f"{name}: bitcode wrapper header is truncated")
        offset = int.from_bytes(data[8:12], "little")
        size = int.from_bytes(data[12:16], "little")
        if offset > len(data) or size > len(data) - offset:
            raise BitcodeError(f"{name}: bitcode wrapper offset {offset} / size {size} exceed the file")
        data = data[offset:offset + size]
    if bytes(data[:4]) != BC_MAGIC:
        raise BitcodeError(f"{name}: bad bitcode magic")
    return data


def symbol_table_blobs(buf, name: str = "bitcode") -> tuple[bytes, bytes] | None:
    """(SYMTAB_BLOB, STRTAB_BLOB): the module's `irsymtab` and the string table its names point
    into, from the first top-level SYMTAB_BLOCK and STRTAB_BLOCK (the last blob record in each, as
    LLVM's `readBlobInRecord`, which also reads the block to its end); None when either is absent."""
    walker = _Walker(buf, name)
    blobs: dict[int, bytes] = {}
    for block_id, width in walker.top_level_blocks():
        if block_id not in (_SYMTAB_BLOCK_ID, _STRTAB_BLOCK_ID) or block_id in blobs:
            walker.skip_block()
            continue
        for code, ops in walker.records(block_id, width, 1):  # the whole block, as LLVM's readBlobInRecord
            if code == _BLOB_RECORD and isinstance(ops, bytes):
                blobs[block_id] = ops
        if len(blobs) == 2:
            return blobs[_SYMTAB_BLOCK_ID], blobs[_STRTAB_BLOCK_ID]
    return None


# --- !llvm.embedded.objects -------------------------------------------------------------------
#
# LLVM (`extractFromBitcode`) takes the globals named by `!llvm.embedded.objects` whose metadata
# section string is `.llvm.offloading` and whose initializer is a constant data array.  We read
# the module block's global variables, its constants and its metadata block for exactly that;
# function bodies and everything else are skipped by block length.

_MODULE_CODE_VERSION = 1
_MODULE_CODE_GLOBALVAR = 7
_MODULE_CODE_FUNCTION = 8
_MODULE_CODE_ALIAS_OLD = 9
_MODULE_CODE_ALIAS = 14
_MODULE_CODE_IFUNC = 15
_CST_CODE_SETTYPE = 1
_CST_CODE_STRING = 8
_CST_CODE_CSTRING = 9
_CST_CODE_DATA = 22
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
    the value references they hold and which MDStrings spell the wanted section."""

    def __init__(self, section: bytes) -> None:
        self.section = section
        self.next_id = 0
        self.section_strings: set[int] = set()
        self.values: dict[int, int] = {}             # metadata ID -> value ID (ValueAsMetadata)
        self.nodes: dict[int, tuple[int, list[int]]] = {}  # metadata ID -> (operand count, first two operands)
        self.embedded: list[int] = []                # operands of !llvm.embedded.objects

    def read_block(self, walker: _Walker, width: int) -> None:
        pending_name: bytes | None = None
        for code, ops in walker.records(_METADATA_BLOCK_ID, width, 2):
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
                    if blob[pos:pos + n] == self.section:
                        self.section_strings.add(self.next_id + i)
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
            elif code not in _METADATA_NO_ID:
                if code == _METADATA_STRING_OLD and bytes(x & 0xFF for x in ops) == self.section:
                    self.section_strings.add(self.next_id)
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
            if section_md in self.section_strings and value_md in self.values:
                out.append(self.values[value_md])
        return out


def embedded_objects(buf, name: str, section: str = ".llvm.offloading") -> list[bytes]:
    """The constant byte-string initializers of the globals that `!llvm.embedded.objects` nodes
    pair with the string `section`, in metadata order, from the file's first module."""
    walker = _Walker(buf, name)
    for block_id, width in walker.top_level_blocks():
        if block_id == _MODULE_BLOCK_ID:
            return _module_objects(walker, width, section.encode())
        walker.skip_block()
    return []


def _module_objects(walker: _Walker, width: int, section: bytes) -> list[bytes]:
    version = 0
    gv_init: dict[int, int] = {}  # value ID of a global variable -> value ID of its initializer
    num_values = 0
    constants: dict[int, bytes] = {}
    metadata = _Metadata(section)
    for kind, code, ops in walker.entries(_MODULE_BLOCK_ID, width, 1):
        if kind == "block":
            if code == _CONSTANTS_BLOCK_ID:
                wanted = set(gv_init.values())
                for ccode, cops in walker.records(code, ops, 2):
                    if ccode == _CST_CODE_SETTYPE:
                        continue
                    if num_values in wanted and ccode in (_CST_CODE_STRING, _CST_CODE_CSTRING, _CST_CODE_DATA):
                        raw = cops if isinstance(cops, bytes) else (
                            bytes(cops) if all(0 <= x < 256 for x in cops) else None)
                        if raw is not None:
                            constants[num_values] = raw + (b"\0" if ccode == _CST_CODE_CSTRING else b"")
                    num_values += 1
            elif code == _METADATA_BLOCK_ID:
                metadata.read_block(walker, ops)
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
    return [constants[init] for init in (gv_init.get(v) for v in metadata.embedded_globals())
            if init is not None and init in constants]


# --- The module's IR symbol table (irsymtab) ---------------------------------------------------

def _str_fields(*names: str) -> list[tuple[str, str]]:
    """`irsymtab::storage::Str` / `Range<T>` members: a u32 offset and a u32 size (or count) each."""
    return [(f"{n}_{part}", "I") for n in names for part in ("Offset", "Size")]


# irsymtab::storage::Header and Symbol (little-endian u32 words).
_IRSYMTAB_HEADER = Layout("irsymtab_Header", [("Version", "I")] + _str_fields(
    "Producer", "Modules", "Comdats", "Symbols", "Uncommons", "TargetTriple", "SourceFileName", "COFFLinkerOpts",
    "DependentLibraries"))
_IRSYMTAB_SYMBOL = Layout("irsymtab_Symbol", _str_fields("Name", "IRName") + [("ComdatIndex", "I"), ("Flags", "I")])

# irsymtab::storage::Symbol::FlagBits
_FB_UNDEFINED = 1 << 3
_FB_GLOBAL = 1 << 10
_FB_FORMAT_SPECIFIC = 1 << 11


def bitcode_symbols(data) -> list[bytes] | None:
    """The defined global names of the module's `irsymtab`, exact and in order (what LLVM lists in
    an archive's symbol table); None (no symbols, as if not an object) when the module has no
    symbol table or it is damaged."""
    try:
        blobs = symbol_table_blobs(data)
    except BitcodeError:
        return None
    if blobs is None:
        return None
    symtab, strtab = blobs
    if len(symtab) < _IRSYMTAB_HEADER.size:
        return None
    header = _IRSYMTAB_HEADER.read(symtab, 0, BitcodeError)
    sym_off, sym_count = header.Symbols_Offset, header.Symbols_Size
    if sym_off > len(symtab) or sym_count > (len(symtab) - sym_off) // _IRSYMTAB_SYMBOL.size:
        return None
    out = []
    for i in range(sym_count):
        sym = _IRSYMTAB_SYMBOL.read(symtab, sym_off + _IRSYMTAB_SYMBOL.size * i, BitcodeError)
        if not sym.Flags & _FB_GLOBAL or sym.Flags & (_FB_UNDEFINED | _FB_FORMAT_SPECIFIC):
            continue
        if sym.Name_Offset + sym.Name_Size > len(strtab):
            continue
        out.append(strtab[sym.Name_Offset:sym.Name_Offset + sym.Name_Size])
    return out


# ---------------------------------------------------------------------------------------------
# What the operations know of bitcode (`magic.FORMAT_MODULES`); `inspect` searches it itself
# ---------------------------------------------------------------------------------------------

def _offload_binaries(buf, name: str):
    """`extract`: the globals `llvm.embedded.objects` pairs with `.llvm.offloading`.  A damaged
    module fails extraction (an `OffloadBinaryError`, as in LLVM), not the container."""
    try:
        objects = embedded_objects(buf, name, OFFLOADING_SECTION)
    except BitcodeError as exc:
        raise OffloadBinaryError(str(exc)) from None
    for data in objects:
        yield OffloadBinariesAt(OFFLOADING_SECTION, None, data, f"{name}: embedded object in {OFFLOADING_SECTION}")


FORMATS = (Format(FileKind.BITCODE, magics=(BC_MAGIC, BC_WRAPPER_MAGIC), extract="bitcode",
                  offload_binaries=_offload_binaries,
                  no_images="LLVM bitcode with no llvm.embedded.objects in .llvm.offloading"),)
