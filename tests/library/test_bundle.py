"""Binary and text bundles: layout, LLVM 19 byte identity, round trips and damaged input."""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import given, settings, strategies as st

from conftest import need_tool, run
from offload_tool.formats.bundle import (BINARY_MAGIC, TEXT_COMMENTS, BundleEntry, binary_bundle_layout, bundle_size,
                                 is_binary_bundle, read_binary_bundle, read_text_bundle, stringmap_entries,
                                 write_binary_bundle, write_text_bundle)
from offload_tool.errors import BundleFormatError, OffloadError, UsageError

IDS = ["host-x86_64-unknown-linux-gnu-", "openmp-nvptx64-nvidia-cuda--sm_70", "hip-amdgcn-amd-amdhsa--gfx906"]


def _binary(entries, align=1) -> bytes:
    out = io.BytesIO()
    n = write_binary_bundle(entries, out, align)
    assert n == len(out.getvalue())
    return out.getvalue()


def test_layout_example_from_llvm():
    # As clang-offload-bundler-19 writes it: payloads of 4/6/4 bytes -> header 196 bytes, offsets 0xC4, 0xC8, 0xCE, size 0xD2.
    entries = [BundleEntry(i, d) for i, d in zip(IDS, [b"host", b"sm70!!", b"g906"])]
    data = _binary(entries)
    assert len(data) == 0xD2 and data.startswith(BINARY_MAGIC)
    header, offsets = binary_bundle_layout(IDS, [4, 6, 4])
    assert len(header) == 196 and offsets == [0xC4, 0xC8, 0xCE]
    assert struct.unpack_from("<Q", data, 24) == (3,)
    assert [(e.bundle_entry_id, bytes(e.data), e.offset) for e in read_binary_bundle(data)] == \
        [(i, bytes(d.data), o) for i, d, o in zip(IDS, entries, offsets)]
    assert bundle_size(entries, "bc") == len(data)


def test_alignment_and_zero_size_entries():
    # HIP fatbin shape: empty host entry, then a device entry at the same aligned offset.
    entries = [BundleEntry("host-x86_64-unknown-linux--", b""), BundleEntry("hipv4-amdgcn-amd-amdhsa--gfx90a", b"dev")]
    data = _binary(entries, 4096)
    got = read_binary_bundle(data)
    assert [e.offset for e in got] == [4096, 4096] and len(data) == 4099
    header_len = len(binary_bundle_layout([e.bundle_entry_id for e in entries], [0, 3])[0])
    assert header_len == 32 + 24 + 27 + 24 + 31
    assert data[header_len:4096] == bytes(4096 - header_len)
    assert bundle_size(entries, "bc", 4096) == 4099
    with pytest.raises(UsageError):
        _binary(entries, 0)


def test_text_bundle_exact_bytes():
    entries = [BundleEntry(IDS[0], b"int x;\n"), BundleEntry(IDS[2], b"no newline")]
    out = io.BytesIO()
    write_text_bundle(entries, out, "ll")
    assert out.getvalue() == (
        b"\n; __CLANG_OFFLOAD_BUNDLE____START__ host-x86_64-unknown-linux-gnu-\nint x;\n"
        b"\n; __CLANG_OFFLOAD_BUNDLE____END__ host-x86_64-unknown-linux-gnu-\n"
        b"\n; __CLANG_OFFLOAD_BUNDLE____START__ hip-amdgcn-amd-amdhsa--gfx906\nno newline"
        b"\n; __CLANG_OFFLOAD_BUNDLE____END__ hip-amdgcn-amd-amdhsa--gfx906\n")
    assert [(e.bundle_entry_id, bytes(e.data)) for e in read_text_bundle(out.getvalue(), "ll")] == \
        [(e.bundle_entry_id, e.data) for e in entries]
    assert bundle_size(entries, "ll") == len(out.getvalue())
    assert read_text_bundle(b"plain file, no markers\n", "i") == []
    with pytest.raises(UsageError, match="'zz': invalid file type specified"):
        read_text_bundle(b"", "zz")


def test_no_magic_means_no_entries():
    assert read_binary_bundle(b"") == [] and read_binary_bundle(b"hello world" * 5) == []
    assert not is_binary_bundle(BINARY_MAGIC)  # 24 bytes: identify_magic needs 25
    assert is_binary_bundle(BINARY_MAGIC + b"\0")


def test_duplicates_keep_last_in_stringmap_order():
    entries = [BundleEntry("a", b"1"), BundleEntry("b", b"2"), BundleEntry("a", b"3")]
    got = stringmap_entries(entries)
    assert sorted((e.bundle_entry_id, bytes(e.data)) for e in got) == [("a", b"3"), ("b", b"2")]


def test_duplicate_ids_are_written_as_llvm_does():
    """LLVM 19 pads every payload up to the offset its ID map holds, i.e. the last duplicate's: the first
    duplicate's header offset then points at padding and the payloads follow each other."""
    entries = [BundleEntry("a", b"1"), BundleEntry("b", b"2"), BundleEntry("a", b"3")]
    data = _binary(entries)
    header, offsets = binary_bundle_layout(["a", "b", "a"], [1, 1, 1])
    assert offsets == [len(header), len(header) + 1, len(header) + 2]
    assert data == header + b"\0\0" + b"123" and bundle_size(entries, "bc") == len(data)
    got = {e.bundle_entry_id: bytes(e.data) for e in stringmap_entries(read_binary_bundle(data))}
    assert got == {"a": b"1", "b": b"\0"}  # what LLVM 19 itself reads back


@pytest.mark.parametrize("damage, match", [
    (lambda d: d[:28], "NumberOfBundles"),
    (lambda d: d[:24] + struct.pack("<Q", 1 << 60) + d[32:], "cannot fit"),
    (lambda d: d[:60], "cannot fit"),
    (lambda d: d[:110], "outside"),
    (lambda d: d[:32] + struct.pack("<Q", 0) + d[40:], "outside"),
    (lambda d: d[:32] + struct.pack("<Q", 10 ** 9) + d[40:], "outside"),
    (lambda d: d[:40] + struct.pack("<Q", 10 ** 9) + d[48:], "outside"),
    (lambda d: d[:48] + struct.pack("<Q", 10 ** 12) + d[56:], "past the end"),
    (lambda d: d[:0xD0], "outside"),
])
def test_damaged_binary_headers(damage, match):
    data = _binary([BundleEntry(i, d) for i, d in zip(IDS, [b"host", b"sm70!!", b"g906"])])
    with pytest.raises(BundleFormatError, match=match):
        read_binary_bundle(damage(data))


def test_text_missing_end_marker():
    with pytest.raises(BundleFormatError, match="no END marker"):
        read_text_bundle(b"\n// __CLANG_OFFLOAD_BUNDLE____START__ host-x86_64--\nabc", "i")


_ids = st.text(st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)), min_size=1, max_size=40)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(_ids, st.binary(max_size=300)), max_size=8, unique_by=lambda t: t[0]),
       st.sampled_from([1, 2, 8, 4096]))
def test_binary_round_trip(items, align):
    entries = [BundleEntry(i, d) for i, d in items]
    data = _binary(entries, align) if entries else _binary(entries, align)
    got = read_binary_bundle(data)
    assert [(e.bundle_entry_id, bytes(e.data)) for e in got] == items
    assert all(e.offset % align == 0 for e in got)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(_ids, st.binary(max_size=300)), max_size=6), st.sampled_from(sorted(TEXT_COMMENTS)))
def test_text_round_trip(items, files_type):
    comment = TEXT_COMMENTS[files_type]
    end = b"\n" + comment + b" __CLANG_OFFLOAD_BUNDLE____END__ "
    items = [(i, d.replace(end, b"")) for i, d in items if end not in d.replace(end, b"")]
    entries = [BundleEntry(i, d) for i, d in items]
    out = io.BytesIO()
    write_text_bundle(entries, out, files_type)
    assert [(e.bundle_entry_id, bytes(e.data)) for e in read_text_bundle(out.getvalue(), files_type)] == items


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_binary_corruption_only_raises_offload_error(data):
    blob = bytearray(_binary([BundleEntry(i, d) for i, d in zip(IDS, [b"host", b"sm70!!", b"g906"])]))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(blob) - 1))
        blob[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(blob)))
    try:
        for e in read_binary_bundle(bytes(blob[:cut])):
            assert 0 < e.offset and e.offset + e.size <= cut
    except OffloadError:
        pass


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=400))
def test_text_reader_never_crashes(blob):
    try:
        read_text_bundle(b"\n// __CLANG_OFFLOAD_BUNDLE____START__ " + blob, "i")
    except OffloadError:
        pass


def test_reader_matches_llvm_written_bundle(tmp_path):
    """What LLVM 19 writes, we read (entries, offsets, payloads)."""
    exe = need_tool("clang-offload-bundler-19")
    for n, payload in enumerate([b"host", b"sm70!!", b"g906"]):
        (tmp_path / f"in{n}").write_bytes(payload)
    res = run([exe, "-type=bc", "-bundle-align=16", "-targets=host-x86_64-unknown-linux-gnu,"
               "openmp-nvptx64-nvidia-cuda-sm_70,hip-amdgcn-amd-amdhsa--gfx906", "-input=in0", "-input=in1",
               "-input=in2", "-output=b"], cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    got = read_binary_bundle((tmp_path / "b").read_bytes())
    assert [(e.bundle_entry_id, bytes(e.data)) for e in got] == list(zip(IDS, [b"host", b"sm70!!", b"g906"]))
    assert [e.offset % 16 for e in got] == [0, 0, 0]
