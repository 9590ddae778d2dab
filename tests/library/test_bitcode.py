"""The shared LLVM bitstream reader: symbol-table blobs and `!llvm.embedded.objects` from real
clang-19 bitcode, hand-built bitstreams for the encodings clang rarely uses (BLOCKINFO
abbreviations, char6 arrays, nested blocks), and corruption that only ever raises BitcodeError."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings, strategies as st

from conftest import need_tool, run
from offload_tool.formats import archive
from offload_tool.formats.bitcode import (BC_MAGIC, BC_WRAPPER_MAGIC, BitcodeError, bitcode_stream, embedded_objects,
                                  symbol_table_blobs)
from offload_tool.errors import OffloadBinaryError, OffloadError
from offload_tool.ops.extract import find_offload_images
from offload_tool.formats.offload_binary import OffloadImage, write_offload_binary

SRC = ("int counter = 1;\nstatic int hidden;\nint answer(int x){return x+counter+hidden;}\n"
       "extern int ext(void);\nint call(void){return ext();}\n")
PKG1 = write_offload_binary(OffloadImage(1, 1, 0, {"triple": "nvptx64-nvidia-cuda", "arch": "sm_80"}, b"A" * 100))
PKG2 = write_offload_binary(OffloadImage(1, 1, 0, {"triple": "amdgcn-amd-amdhsa", "arch": "gfx90a"}, b"BBB"))


@pytest.fixture(scope="module")
def real(tmp_path_factory) -> dict[str, bytes]:
    """Plain, Darwin-wrapped and offload-embedding bitcode from clang-19."""
    clang = need_tool("clang-19")
    d = tmp_path_factory.mktemp("bc")
    (d / "s.c").write_text(SRC)
    (d / "p1").write_bytes(PKG1)
    (d / "p2").write_bytes(PKG2)
    cmds = {
        "plain.bc": [clang, "-c", "-emit-llvm"],
        "darwin.bc": [clang, "--target=x86_64-apple-macos11", "-c", "-emit-llvm"],
        "embed.bc": [clang, "-fopenmp", "--offload-arch=sm_80", "--offload-host-only", "-Xclang",
                     f"-fembed-offload-object={d / 'p1'}", "-Xclang", f"-fembed-offload-object={d / 'p2'}",
                     "-emit-llvm", "-c"],
    }
    out = {}
    for name, cmd in cmds.items():
        res = run([*cmd, d / "s.c", "-o", d / name])
        assert res.returncode == 0, res.stderr
        out[name] = (d / name).read_bytes()
    return out


def _irsymtab_names(symtab: bytes, strtab: bytes) -> list[bytes]:
    # irsymtab::storage::Header.Symbols is a Range {offset, size} at 28; each Symbol is 6 u32s.
    off, count = struct.unpack_from("<II", symtab, 28)
    return [strtab[n:n + size] for n, size, *_ in struct.iter_unpack("<6I", symtab[off:off + 24 * count])]


def test_symbol_table_of_real_bitcode(real):
    symtab, strtab = symbol_table_blobs(real["plain.bc"], "plain.bc")
    assert struct.unpack_from("<I", symtab)[0] >= 1  # irsymtab version
    assert set(_irsymtab_names(symtab, strtab)) >= {b"answer", b"call", b"counter", b"ext"}
    assert archive.member_symbols(real["plain.bc"]) == [b"answer", b"call", b"counter"]


def test_wrapped_bitcode(real):
    wrapped = real["darwin.bc"]
    assert wrapped[:4] == BC_WRAPPER_MAGIC
    offset, size = struct.unpack_from("<II", wrapped, 8)
    assert bytes(bitcode_stream(wrapped, "d.bc")) == wrapped[offset:offset + size]
    symtab, strtab = symbol_table_blobs(wrapped, "d.bc")
    assert {b"_answer", b"_call", b"_counter"} <= set(_irsymtab_names(symtab, strtab))
    assert embedded_objects(wrapped, "d.bc") == []


def test_embedded_objects(real):
    assert embedded_objects(real["embed.bc"], "e.bc") == [PKG1, PKG2]
    assert embedded_objects(real["embed.bc"], "e.bc", section=".other") == []
    assert embedded_objects(real["plain.bc"], "p.bc") == []
    assert archive.member_symbols(real["embed.bc"]) == [b"answer", b"call", b"counter"]


def test_callers_keep_their_error_policy():
    damaged = BC_MAGIC + b"\x35\x14\x00\x00\xff\xff\xff\xff"
    with pytest.raises(BitcodeError):
        embedded_objects(damaged, "x.bc")
    with pytest.raises(OffloadBinaryError, match="x.bc: malformed bitcode at bit"):
        find_offload_images(damaged, "x.bc")
    assert archive.member_symbols(damaged) is None


# --- hand-built bitstreams --------------------------------------------------------------------

class _Writer:
    """A minimal bitstream writer (LSB first), enough to build the cases below."""

    def __init__(self) -> None:
        self.value = int.from_bytes(BC_MAGIC, "little")
        self.n = 32

    def emit(self, v: int, width: int) -> None:
        self.value |= v << self.n
        self.n += width

    def vbr(self, v: int, width: int) -> None:
        hi = 1 << (width - 1)
        while v >= hi:
            self.emit(v & (hi - 1) | hi, width)
            v >>= width - 1
        self.emit(v, width)

    def align(self) -> None:
        self.n = (self.n + 31) & ~31

    def begin(self, outer_width: int, block_id: int, width: int) -> int:
        self.emit(1, outer_width)
        self.vbr(block_id, 8)
        self.vbr(width, 4)
        self.align()
        self.n += 32  # length, patched by end()
        return self.n

    def end(self, width: int, body: int) -> None:
        self.emit(0, width)
        self.align()
        self.value |= ((self.n - body) // 32) << (body - 32)

    def record(self, width: int, code: int, ops: list[int]) -> None:
        self.emit(3, width)
        self.vbr(code, 6)
        self.vbr(len(ops), 6)
        for op in ops:
            self.vbr(op, 6)

    def define(self, width: int, ops: list[tuple]) -> None:
        self.emit(2, width)
        self.vbr(len(ops), 5)
        for op in ops:
            if op[0] == "lit":
                self.emit(1, 1)
                self.vbr(op[1], 8)
            else:
                self.emit(0, 1)
                self.emit({"fixed": 1, "vbr": 2, "array": 3, "char6": 4, "blob": 5}[op[0]], 3)
                if op[0] in ("fixed", "vbr"):
                    self.vbr(op[1], 5)

    def blob(self, data: bytes) -> None:
        self.vbr(len(data), 6)
        self.align()
        for b in data:
            self.emit(b, 8)
        self.align()

    def data(self) -> bytes:
        return self.value.to_bytes((self.n + 7) // 8, "little")


def _symtab_stream(symtab_body=None) -> bytes:
    w = _Writer()
    info = w.begin(2, 0, 2)  # BLOCKINFO: SYMTAB records get abbreviation 4 = [1, blob]
    w.record(2, 1, [25])
    w.define(2, [("lit", 1), ("blob",)])
    w.end(2, info)
    sym = w.begin(2, 25, 3)
    w.record(3, 2, [7, 8])       # an unabbreviated record
    inner = w.begin(3, 30, 2)    # a nested block, skipped
    w.record(2, 1, [1])
    w.end(2, inner)
    if symtab_body is None:
        w.emit(4, 3)             # the BLOCKINFO abbreviation
        w.blob(b"SYMTAB-BYTES")
    else:
        symtab_body(w)
    w.end(3, sym)
    strt = w.begin(2, 23, 3)
    w.define(3, [("lit", 5), ("array",), ("char6",)])
    w.emit(4, 3)
    w.vbr(3, 6)
    for c in (0, 62, 63):        # "a._"
        w.emit(c, 6)
    w.define(3, [("lit", 1), ("array",), ("fixed", 8)])
    w.emit(5, 3)
    w.vbr(5, 6)
    for b in b"names":
        w.emit(b, 8)
    w.end(3, strt)
    return w.data()


def test_hand_built_stream_encodings():
    assert symbol_table_blobs(_symtab_stream(), "h.bc") == (b"SYMTAB-BYTES", b"names")
    assert embedded_objects(_symtab_stream(), "h.bc") == []  # no module block
    # Two SYMTAB_BLOB records: the last one counts, as in LLVM's readBlobInRecord.
    two = _symtab_stream(lambda w: (w.emit(4, 3), w.blob(b"first"), w.emit(4, 3), w.blob(b"second")))
    assert symbol_table_blobs(two, "h.bc") == (b"second", b"names")


def test_missing_block_gives_none():
    w = _Writer()
    strt = w.begin(2, 23, 3)
    w.end(3, strt)
    assert symbol_table_blobs(w.data(), "h.bc") is None


@pytest.mark.parametrize("body, message", [
    (lambda w: w.emit(6, 3), "undefined abbreviation 6 in block 25"),
    (lambda w: w.define(3, [("lit", 1), ("blob",), ("fixed", 8)]), "blob operand is not the last"),
    (lambda w: w.define(3, [("lit", 1), ("vbr", 1)]), "operand width 1 is invalid"),
    (lambda w: (w.emit(4, 3), w.vbr(1 << 20, 6)), "run past the end of the data"),
])
def test_bad_records_name_the_fault(body, message):
    with pytest.raises(BitcodeError, match=message):
        symbol_table_blobs(_symtab_stream(body), "h.bc")


def test_blockinfo_abbreviation_before_setbid():
    w = _Writer()
    info = w.begin(2, 0, 2)
    w.define(2, [("lit", 1)])
    w.end(2, info)
    with pytest.raises(BitcodeError, match="h.bc: malformed bitcode at bit .*before SETBID"):
        symbol_table_blobs(w.data(), "h.bc")


def test_block_length_is_checked():
    data = bytearray(_symtab_stream())
    short = bytes(data[:-8])
    with pytest.raises(BitcodeError, match="runs past the end of the data"):
        symbol_table_blobs(short, "h.bc")
    # A SYMTAB block whose length ends inside its blob: the record runs into what follows.
    w = _Writer()
    sym = w.begin(2, 25, 3)
    w.define(3, [("lit", 1), ("blob",)])
    w.emit(4, 3)
    w.blob(b"x" * 8)
    w.end(3, sym)
    w.value -= 2 << (sym - 32)
    with pytest.raises(BitcodeError, match="record runs past the end of block 25"):
        symbol_table_blobs(w.data() + b"\0" * 8, "h.bc")


@pytest.mark.parametrize("data, message", [
    (b"\x7fELF" + b"\0" * 16, "x.bc: bad bitcode magic"),
    (BC_WRAPPER_MAGIC + b"\0" * 8, "wrapper header is truncated"),
    (BC_WRAPPER_MAGIC + struct.pack("<IIII", 0, 20, 100, 7), "wrapper offset 20 / size 100 exceed the file"),
    (BC_MAGIC + b"\x00\x00\x00\x00", "expected a top-level block"),
])
def test_container_errors(data, message):
    for query in (symbol_table_blobs, embedded_objects):
        with pytest.raises(BitcodeError, match=message):
            query(data, "x.bc")
    assert issubclass(BitcodeError, OffloadError)


# --- corruption -------------------------------------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_corrupt_real_bitcode_only_raises_bitcode_error(real, data):
    buf = bytearray(real[data.draw(st.sampled_from(["embed.bc", "darwin.bc"]))])
    for _ in range(data.draw(st.integers(1, 8))):
        buf[data.draw(st.integers(0, len(buf) - 1))] = data.draw(st.integers(0, 255))
    buf = bytes(buf[:data.draw(st.integers(0, len(buf)))])
    for query in (symbol_table_blobs, embedded_objects):
        try:
            query(buf, "c.bc")
        except BitcodeError:
            pass


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=300))
def test_garbage_after_magic_only_raises_bitcode_error(junk):
    for query in (symbol_table_blobs, embedded_objects):
        try:
            query(BC_MAGIC + junk, "g.bc")
        except BitcodeError:
            pass
