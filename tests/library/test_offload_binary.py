"""OffloadBinary v1: layout, string table, kinds, LLVM's reader checks, round trips and corruption."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings, strategies as st

from conftest import need_tool, run
from offload_tool.errors import OffloadBinaryError
from offload_tool.formats.offload_binary import (
    ENTRY, HEADER, IMG_BITCODE, IMG_CUBIN, IMG_NONE, IMG_OBJECT, IMG_PTX, OffloadImage, image_kind_for_file,
    image_kind_name, llvm_path_extension, objdump_image_kind_name, offload_kind_name, offload_kind_value,
    read_offload_binaries, read_offload_binary, write_offload_binary, write_offload_binary_to,
)
from offload_tool.rules.string_table import string_table


def _img(strings=None, image=b"device code", **kw) -> OffloadImage:
    return OffloadImage(kw.get("image_kind", IMG_OBJECT), kw.get("offload_kind", 1), kw.get("flags", 0),
                        dict(strings if strings is not None else {"triple": "amdgcn-amd-amdhsa", "arch": "gfx906"}),
                        image)


def test_layout_of_a_simple_binary():
    data = write_offload_binary(_img({"arch": "gfx906", "triple": "amdgcn-amd-amdhsa"}))
    magic, version, size, entry_offset, entry_size = HEADER.unpack_from(data, 0)
    assert (magic, version, entry_offset, entry_size) == (b"\x10\xff\x10\xad", 1, 32, 40)
    assert size == len(data) and size % 8 == 0
    image_kind, offload_kind, flags, string_offset, num_strings, image_offset, image_size = ENTRY.unpack_from(data, 32)
    assert (image_kind, offload_kind, flags, string_offset, num_strings) == (1, 1, 0, 72, 2)
    table_start = 72 + 2 * 16
    # Observed on clang-offload-packager-19.
    table = b"\0arch\0triple\0amdgcn-amd-amdhsa\0gfx906\0"
    assert data[table_start:table_start + len(table)] == table
    assert image_offset == (table_start + len(table) + 7) & ~7
    assert data[image_offset:image_offset + image_size] == b"device code"
    assert struct.unpack_from("<QQQQ", data, 72) == (
        table_start + table.index(b"arch"), table_start + table.index(b"gfx906"),
        table_start + table.index(b"triple"), table_start + table.index(b"amdgcn"))


def test_string_table_tail_merging():
    table, offsets = string_table([b"triple", b"nvptx64-nvidia-cuda", b"a", b"arch", b""])
    assert table == b"\0arch\0triple\0nvptx64-nvidia-cuda\0"
    assert offsets[b"a"] == table.index(b"cuda") + 3  # 'a' points into "...cuda"
    assert offsets[b""] == 0
    # a suffix of the previous stored string only
    table, offsets = string_table([b"xab", b"ab", b"b"])
    assert table == b"\0xab\0" and offsets[b"ab"] == 2 and offsets[b"b"] == 3


def test_kinds():
    assert offload_kind_value("hip", 19) == 3 and offload_kind_value("hip", 22) == 4
    assert offload_kind_value("sycl", 19) == 0 and offload_kind_value("sycl", 22) == 8
    assert offload_kind_value("bogus") == 0 and offload_kind_value("openmp") == 1
    assert offload_kind_name(3, 19) == "hip" and offload_kind_name(3, 22) == "none"
    assert offload_kind_name(4, 19) == "none" and offload_kind_name(4, 22) == "hip"
    ambiguous = offload_kind_name(3, None)
    assert "hip" in ambiguous and "19" in ambiguous and "22" in ambiguous
    assert offload_kind_name(4, None) == "hip" and offload_kind_name(2, None) == "cuda"
    assert offload_kind_name(99, None) == "none"
    assert [image_kind_name(i) for i in range(6)] == ["", "o", "bc", "cubin", "fatbin", "s"]
    assert objdump_image_kind_name(IMG_BITCODE) == "llvm ir" and objdump_image_kind_name(IMG_NONE) == "<none>"
    assert objdump_image_kind_name(IMG_OBJECT) == "elf" and objdump_image_kind_name(IMG_PTX) == "ptx"


def test_image_kind_from_content_or_extension():
    assert image_kind_for_file("x.o", b"BC\xc0\xde....") == IMG_BITCODE
    assert image_kind_for_file("x.o", b"\xde\xc0\x17\x0b....") == IMG_BITCODE
    assert image_kind_for_file("x.o", b"\x7fELF") == IMG_OBJECT
    assert image_kind_for_file("dir.d/x.cubin", b"") == IMG_CUBIN
    assert image_kind_for_file("x.S", b"") == IMG_NONE
    assert image_kind_for_file("x", b"") == IMG_NONE
    assert llvm_path_extension("a.b/c") == "" and llvm_path_extension(".o") == "o"
    assert llvm_path_extension("..") == ""


def test_ambiguous_producer_is_reported():
    data = write_offload_binary(_img(offload_kind=3))
    (img,) = read_offload_binaries(data)
    assert img.kind_name() != "hip" and "hip" in img.kind_name()
    (img19,) = read_offload_binaries(data, llvm_version=19)
    assert img19.producer == "hip" and img19.kind_name(22) == "none"


def test_back_to_back_and_streaming(tmp_path):
    a, b = _img(image=b"x" * 13), _img({"triple": "nvptx64-nvidia-cuda", "arch": "sm_80"}, image=b"")
    data = write_offload_binary(a) + write_offload_binary(b)
    imgs = read_offload_binaries(data)
    assert [i.arch for i in imgs] == ["gfx906", "sm_80"] and bytes(imgs[0].image) == b"x" * 13
    assert imgs[1].offset == len(write_offload_binary(a))
    with open(tmp_path / "p", "wb") as f:
        n = write_offload_binary_to(f, a)
    assert (tmp_path / "p").read_bytes() == write_offload_binary(a) and n == len(write_offload_binary(a))


def _patch(data: bytes, offset: int, fmt: str, value) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d[:71], "Invalid data"),                                  # shorter than header + entry
    (lambda d: b"\x10\xff\xb0\xad" + d[4:], "Invalid data"),              # llvm-objdump failure.test
    (lambda d: _patch(d, 4, "<I", 3), "Version: 3 is not a version"),     # Version neither 1 nor 2
    (lambda d: _patch(d, 8, "<Q", len(d) + 8), "unexpectedly"),          # Size > buffer
    (lambda d: _patch(d, 8, "<Q", 16), "unexpectedly"),                  # Size < 40
    (lambda d: _patch(d, 16, "<Q", 999999999), "unexpectedly"),          # Inputs/malformed.yaml EntryOffset
    (lambda d: _patch(d, 24, "<Q", 1 << 40), "unexpectedly"),            # EntrySize
    (lambda d: _patch(d, 32 + 24, "<Q", 1 << 40), "unexpectedly"),       # ImageOffset
    (lambda d: _patch(d, 32 + 8, "<Q", 1 << 40), "unexpectedly"),        # StringOffset
    (lambda d: _patch(d, 32 + 32, "<Q", 1 << 40), "ImageSize"),          # beyond LLVM: ImageSize
    (lambda d: _patch(d, 32 + 16, "<Q", 1 << 60), "NumStrings"),         # beyond LLVM: NumStrings
    (lambda d: _patch(d, 72, "<Q", 1 << 33), "KeyOffset"),               # string offset out of range
    (lambda d: d + b"\0" * 8, "Invalid data"),                            # trailing garbage
])
def test_llvm_reader_checks(mutate, message):
    data = write_offload_binary(_img())
    with pytest.raises(OffloadBinaryError, match=message):
        read_offload_binaries(mutate(data))


def test_unterminated_string_is_an_error():
    data = bytearray(write_offload_binary(_img({"k": "v"}, image=b"")))
    size = len(data)
    # point the value at the final padding-free byte and make the tail non-NUL
    struct.pack_into("<Q", data, 72 + 8, size - 1)
    data[size - 1] = 0x41
    with pytest.raises(OffloadBinaryError, match="NUL"):
        read_offload_binary(bytes(data))


printable = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=20)


@settings(max_examples=150, deadline=None)
@given(image=st.binary(max_size=256), strings=st.dictionaries(printable, printable, max_size=8),
       image_kind=st.integers(0, 0xFFFF), offload_kind=st.integers(0, 0xFFFF), flags=st.integers(0, 0xFFFFFFFF))
def test_round_trip_like_offloading_test(image, strings, image_kind, offload_kind, flags):
    """llvm/unittests/Object/OffloadingTest.cpp: random image, strings and kinds survive write + read."""
    data = write_offload_binary(OffloadImage(image_kind, offload_kind, flags, strings, image))
    assert len(data) % 8 == 0
    (img,) = read_offload_binaries(data)
    assert (img.image_kind, img.offload_kind, img.flags) == (image_kind, offload_kind, flags)
    assert img.strings == strings and list(img.strings) == list(strings)
    assert bytes(img.image) == image and img.size == len(data)
    assert write_offload_binary(img) == data


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_corruption_only_raises_offload_binary_error(data):
    base = write_offload_binary(_img({"triple": "nvptx64-nvidia-cuda", "arch": "sm_80", "x": "y"}, image=b"\x01" * 40)) * 2
    buf = bytearray(base)
    for _ in range(data.draw(st.integers(1, 6))):
        pos = data.draw(st.integers(0, len(buf) - 1))
        buf[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(buf)))
    try:
        for img in read_offload_binaries(bytes(buf[:cut])):
            assert img.offset + img.size <= cut
            bytes(img.image)
    except OffloadBinaryError:
        pass


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_garbage_only_raises_offload_binary_error(junk):
    try:
        read_offload_binaries(b"\x10\xff\x10\xad\x01\x00\x00\x00" + junk)
    except OffloadBinaryError:
        pass


def test_reads_what_llvm_19_and_22_write(tmp_path):
    p19 = need_tool("clang-offload-packager-19")
    p22 = need_tool("llvm-offload-binary-22")
    (tmp_path / "k.o").write_bytes(b"\x7fELF-ish kernel")
    (tmp_path / "k.bc").write_bytes(b"BC\xc0\xde bitcode")
    images = ["--image=file=k.o,triple=amdgcn-amd-amdhsa,arch=gfx90a:xnack+,kind=hip,feature=+xnack,feature=+xnack",
              "--image=file=k.bc,triple=nvptx64-nvidia-cuda,arch=sm_80,kind=cuda"]
    for exe, version in ((p19, 19), (p22, 22)):
        assert run([exe, "-o", f"p{version}", *images], cwd=tmp_path).returncode == 0
        data = (tmp_path / f"p{version}").read_bytes()
        a, b = read_offload_binaries(data, llvm_version=version)
        assert a.strings["feature"] == "+xnack,+xnack" and a.arch == "gfx90a:xnack+" and a.producer == "hip"
        assert a.image_kind == IMG_OBJECT and bytes(a.image) == b"\x7fELF-ish kernel"
        assert b.image_kind == IMG_BITCODE and b.producer == "cuda" and b.triple == "nvptx64-nvidia-cuda"
        # our writer reproduces LLVM's bytes from what we read
        assert b"".join(write_offload_binary(i) for i in (a, b)) == data
    (h19,) = read_offload_binaries((tmp_path / "p19").read_bytes())[:1]
    (h22,) = read_offload_binaries((tmp_path / "p22").read_bytes())[:1]
    assert h19.offload_kind == 3 and h22.offload_kind == 4
    # each LLVM reads the other's HIP images as "none"; without a version we say so
    assert h19.kind_name(22) == "none" and h22.kind_name(19) == "none"
    assert "or" in h19.kind_name(None) and h22.kind_name(None) == "hip"


def test_hostile_string_table_is_bounded():
    """100k string entries pointing at distinct offsets of one 1 MiB string: LLVM would build
    ~50 GB of strings; we refuse once the decoded total is implausible."""
    n = 100_000
    region = 1 << 20
    string_offset = 72
    table = string_offset + 16 * n
    size = table + region + 8
    buf = bytearray(size)
    struct.pack_into("<4sIQQQ", buf, 0, b"\x10\xff\x10\xad", 1, size, 32, 40)
    struct.pack_into("<HHIQQQQ", buf, 32, 1, 1, 0, string_offset, n, size, 0)
    for i in range(n):
        struct.pack_into("<QQ", buf, string_offset + 16 * i, table + i * 8, table + i * 8 + 4)
    buf[table:table + region] = b"A" * region
    with pytest.raises(OffloadBinaryError, match="implausibly large"):
        read_offload_binaries(bytes(buf))


def test_make_image():
    from offload_tool.formats.offload_binary import make_image

    strings = {"triple": "t", "arch": "a"}
    img = make_image(b"x", strings, image_kind=IMG_CUBIN, offload_kind=2, flags=5)
    strings["arch"] = "changed"  # copied, not shared
    assert (img.image_kind, img.offload_kind, img.flags, img.arch, img.producer) == (3, 2, 5, "a", "cuda")
    assert read_offload_binaries(write_offload_binary(img))[0] == img
