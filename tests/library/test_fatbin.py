"""NVIDIA fat binaries: the layout derived from nvcc 13 holds for freshly generated nvcc and
fatbinary output; round trips; corrupt input only ever raises FatbinError."""

from __future__ import annotations

import re
import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import offload_samples as samples
from conftest import need_tool
from offload_tool.formats import fatbin
from offload_tool.errors import FatbinError
from offload_tool.formats.fatbin import (FLAG_64BIT, FLAG_ARCH_SPECIFIC, FLAG_LINUX, FLAG_LZ4, FLAG_ZSTD, KIND_ELF, KIND_PTX,
                                 FatbinEntry, lz4_block_decompress, make_entry, read_fatbin, read_fatbins,
                                 write_fatbin)


@pytest.fixture(scope="module")
def cuda():
    need_tool("nvcc")
    return samples.cuda()


def _elf_sections(path):
    from elftools.elf.elffile import ELFFile
    with open(path, "rb") as f:
        elf = ELFFile(f)
        return {s.name: s.data() for s in elf.iter_sections()}


# ---------------------------------------------------------------------------------------------
# Real nvcc / fatbinary output


def test_header_fields_of_nvcc_fatbin(cuda):
    path = samples.need(cuda, "nvcc.fatbin")
    data = path.read_bytes()
    magic, version, header_size, fat_size = struct.unpack_from("<IHHQ", data)
    assert (magic, version, header_size) == (0xBA55ED50, 1, 16)
    assert fat_size == len(data) - 16
    fb = read_fatbin(data)
    assert fb.fat_size == fat_size
    got = {(e.kind_name, e.arch) for e in fb.entries}
    assert got == {("elf", "sm_80"), ("elf", "sm_90"), ("ptx", "sm_90")}
    for e in fb.entries:
        assert e.format_version == 0x0101 and e.is_64bit and e.flags & FLAG_LINUX
        assert e.header_size >= 64 and len(e.payload) % 8 == 0
        if e.kind == KIND_PTX:
            # nvcc 13 compresses PTX with zstd by default and records PTX ISA 9.0.
            assert e.compression == "zstd" and (e.major, e.minor) == (9, 0)
            text = e.image()
            assert len(text) == e.uncompressed_size and b".target sm_90" in text and text.endswith(b"\0")
        else:
            img = e.image()
            assert img[:4] == b"\x7fELF" and img[7] == 0x41  # ELFOSABI_CUDA
            assert struct.unpack_from("<H", img, 18)[0] == 190  # EM_CUDA


def test_fatbinary_cubin_round_trips_in_every_compression_mode(cuda):
    cubin, ptx = samples.need(cuda, "sm80.cubin", "c90.ptx")
    expected_cubin = cubin.read_bytes()
    for mode, compression in (("default", "zstd"), ("none", None), ("speed", "lz4")):
        path = samples.need(cuda, f"{mode}.fatbin")
        (elf, text) = read_fatbin(path.read_bytes()).entries
        assert (elf.kind, elf.sm, text.kind, text.sm) == (KIND_ELF, 80, KIND_PTX, 90)
        assert elf.compression == compression and text.compression == compression
        # The cubin comes back byte for byte, whatever the compression.
        assert elf.image() == expected_cubin
        assert b".target sm_90" in text.image()


def test_writer_is_byte_identical_to_fatbinary(cuda):
    """Re-serialising what we read gives fatbinary's exact bytes (all modes, ident, options)."""
    for key in ("default.fatbin", "none.fatbin", "speed.fatbin", "ident.fatbin", "nvcc.fatbin"):
        data = samples.need(cuda, key).read_bytes()
        assert write_fatbin(read_fatbin(data).entries) == data, key


def test_make_entry_reproduces_uncompressed_fatbinary(cuda):
    cubin, ptx, none = samples.need(cuda, "sm80.cubin", "c90.ptx", "none.fatbin")
    stored = read_fatbin(none.read_bytes()).entries[1].image()
    built = write_fatbin([make_entry(KIND_ELF, 80, cubin.read_bytes()),
                          make_entry(KIND_PTX, 90, stored.rstrip(b"\0"))])
    assert built == none.read_bytes()


def test_ident_and_ptx_options(cuda):
    data = samples.need(cuda, "ident.fatbin").read_bytes()
    elf, text = read_fatbin(data).entries
    assert elf.name == b"saxpy.cu" and text.name == b"saxpy.cu"
    assert text.ptx_options == "-O3 -lineinfo"
    assert elf.options is None


def test_nvcc_object_sections(cuda):
    """`nvcc -c` puts one fat binary in `.nv_fatbin`; `-rdc` uses `__nv_relfatbin` (sm_90a)."""
    obj, rdc, standalone = samples.need(cuda, "nvcc.o", "rdc.o", "nvcc.fatbin")
    secs = _elf_sections(obj)
    assert secs[".nv_fatbin"] == standalone.read_bytes()
    rsecs = _elf_sections(rdc)
    assert ".nv_fatbin" not in rsecs
    (fb,) = read_fatbins(rsecs["__nv_relfatbin"])
    got = [(e.kind_name, e.arch, e.virtual_arch) for e in fb.entries]
    assert got == [("elf", "sm_80", "sm_80"), ("elf", "sm_90a", "sm_90a"), ("ptx", "sm_90a", "compute_90a")]
    assert all(e.flags & FLAG_ARCH_SPECIFIC for e in fb.entries[1:])
    # -rdc compresses the relocatable cubins too; they decompress to real CUDA ELF.
    assert all(e.compressed for e in fb.entries)
    assert all(e.image()[:4] == b"\x7fELF" for e in fb.entries[:2])
    assert "--compile-only" in fb.entries[2].ptx_options


def test_clang_cuda_fatbin(cuda):
    """clang 22's CUDA mode runs CUDA's fatbinary: same container, one cubin per --cuda-gpu-arch."""
    obj = samples.need(cuda, "clang22_cuda.o")
    data = _elf_sections(obj)[".nv_fatbin"]
    (fb,) = read_fatbins(data)
    assert [(e.kind_name, e.arch, e.compressed) for e in fb.entries] == [("elf", "sm_80", False), ("elf", "sm_90", False)]
    assert write_fatbin(fb.entries) == data


def test_linked_program_holds_concatenated_fatbins(cuda):
    exe = samples.need(cuda, "nvcc.exe")
    data = _elf_sections(exe)[".nv_fatbin"]
    fbs = read_fatbins(data)
    # The program's own module is one of them (the CUDA runtime may add its own).
    assert any({(e.kind_name, e.arch) for e in fb.entries} == {("elf", "sm_80"), ("elf", "sm_90"), ("ptx", "sm_90")}
               for fb in fbs)
    assert sum(fb.header_size + fb.fat_size for fb in fbs) <= len(data)


def _arch_from_image(kind_name: str, image: bytes) -> str:
    """The SM an image was built for, read from the image itself (an oracle independent of the
    fat binary's entry header): a cubin's ELF e_flags (CUDA 12.x/13 ABI: SM number in bits 8-15),
    a PTX file's `.target` directive."""
    if kind_name == "elf":
        assert image[:4] == b"\x7fELF"
        e_flags = struct.unpack_from("<I", image, 48)[0]
        return f"sm_{(e_flags >> 8) & 0xff}"
    target = re.search(rb"^\.target\s+(sm_\d+)", image, re.M)
    assert target, image[:200]
    return target.group(1).decode()


def test_entry_archs_match_the_images_themselves(cuda):
    """Each entry's arch label agrees with the cubin's e_flags / the PTX's .target line.
    (cuobjdump would be the natural oracle, but the CUDA 13 install here does not ship it.)"""
    obj = samples.need(cuda, "nvcc.o")
    (fb,) = read_fatbins(_elf_sections(obj)[".nv_fatbin"])
    seen = set()
    for e in fb.entries:
        assert _arch_from_image(e.kind_name, e.image()) == e.arch.rstrip("af")
        seen.add(("cubin" if e.kind_name == "elf" else "ptx", e.arch))
    assert seen == samples.NVCC_IMAGES


# ---------------------------------------------------------------------------------------------
# Unit tests on synthetic data


def test_lz4_block_decoder_literals_and_overlapping_match():
    # token 0x3? : 3 literals "abc", match offset 3, length 4+5=9 (overlapping), then 1 literal.
    block = bytes([0x35]) + b"abc" + bytes([3, 0]) + bytes([0x10]) + b"z"
    assert lz4_block_decompress(block, 13) == b"abcabcabcabcz"
    with pytest.raises(FatbinError, match="offset"):
        lz4_block_decompress(bytes([0x10]) + b"a" + bytes([5, 0]), 10)
    with pytest.raises(FatbinError, match="uncompressed_size"):
        lz4_block_decompress(bytes([0x30]) + b"abc", 2)


def test_read_fatbins_skips_zero_padding():
    one = write_fatbin([make_entry(KIND_ELF, 75, b"\x7fELF" + b"\0" * 12)])
    data = one + b"\0" * 8 + one + b"\0" * 16
    fbs = read_fatbins(data)
    assert [fb.offset for fb in fbs] == [0, len(one) + 8]
    with pytest.raises(FatbinError, match="no fat binary"):
        read_fatbins(b"\0" * 32)
    with pytest.raises(FatbinError, match="bad magic"):
        read_fatbins(one + b"junkjunk" + b"\0" * 8)


def test_errors_name_offset_and_field():
    good = write_fatbin([make_entry(KIND_PTX, 90, b".version 9.0\n")])
    bad = bytearray(good)
    struct.pack_into("<Q", bad, 8, 1 << 40)  # fat_size
    with pytest.raises(FatbinError, match="fat_size"):
        read_fatbin(bytes(bad))
    bad = bytearray(good)
    struct.pack_into("<Q", bad, 16 + 8, 1 << 40)  # entry padded_size
    with pytest.raises(FatbinError, match=r"entry at offset 0x10: payload size"):
        read_fatbin(bytes(bad))
    bad = bytearray(good)
    struct.pack_into("<I", bad, 16 + 20, 4000)  # options_offset
    with pytest.raises(FatbinError, match="options_offset"):
        read_fatbin(bytes(bad))


_entries = st.lists(st.builds(
    lambda kind, sm, flags, image, name, options: FatbinEntry(
        kind=kind, sm=sm, flags=flags, payload=image + b"\0" * (-len(image) % 8), name=name, options=options),
    st.sampled_from([KIND_PTX, KIND_ELF]), st.integers(10, 130),
    st.sampled_from([FLAG_64BIT | FLAG_LINUX, FLAG_LINUX, FLAG_64BIT | FLAG_LINUX | FLAG_ARCH_SPECIFIC]),
    st.binary(max_size=64), st.binary(max_size=20).map(lambda b: b.replace(b"\0", b"x")),
    st.one_of(st.none(), st.binary(max_size=20).map(lambda b: b.replace(b"\0", b"y")))), max_size=4)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_entries)
def test_round_trip(entries):
    data = write_fatbin(entries)
    fb = read_fatbin(data)
    assert len(fb.entries) == len(entries)
    for got, want in zip(fb.entries, entries):
        assert (got.kind, got.sm, got.flags, got.name) == (want.kind, want.sm, want.flags, want.name)
        assert got.options == want.options
        assert bytes(got.payload) == bytes(want.payload)
        assert got.image() == bytes(want.payload)
    assert write_fatbin(fb.entries) == data


def _compressed_sample() -> bytes:
    import zstandard
    text = b".version 9.0\n.target sm_90\n" * 5 + b"\0"
    comp = zstandard.ZstdCompressor().compress(text)
    lz = bytes([0xF0, len(text) - 15]) + text  # one literal-only LZ4 sequence
    e1 = FatbinEntry(kind=KIND_PTX, sm=90, flags=FLAG_64BIT | FLAG_ZSTD, payload=comp, compressed_size=len(comp),
                     uncompressed_size=len(text), options=b"")
    e2 = FatbinEntry(kind=KIND_PTX, sm=80, flags=FLAG_64BIT | FLAG_LZ4, payload=lz, compressed_size=len(lz),
                     uncompressed_size=len(text), options=b"")
    return write_fatbin([e1, e2])


def test_compressed_synthetic_entries():
    fb = read_fatbin(_compressed_sample())
    assert [e.compression for e in fb.entries] == ["zstd", "lz4"]
    assert fb.entries[0].image() == fb.entries[1].image()


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_corruption_only_raises_fatbin_error(data):
    blob = bytearray(_compressed_sample())
    for _ in range(data.draw(st.integers(1, 6))):
        pos = data.draw(st.integers(0, len(blob) - 1))
        blob[pos] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        blob = blob[: data.draw(st.integers(0, len(blob)))]
    try:
        for fb in read_fatbins(bytes(blob)):
            for e in fb.entries:
                e.image()
                _ = (e.arch, e.flag_names, e.ptx_options)
    except FatbinError:
        pass


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 400))
def test_lz4_garbage_only_raises_fatbin_error(block, expected):
    try:
        out = lz4_block_decompress(block, expected)
        assert len(out) == expected
    except FatbinError:
        pass


def test_inflation_is_bounded_by_uncompressed_size():
    import zstandard
    big = zstandard.ZstdCompressor().compress(b"\0" * 1_000_000)
    e = FatbinEntry(kind=KIND_PTX, sm=90, flags=FLAG_64BIT | FLAG_ZSTD, payload=big, compressed_size=len(big),
                    uncompressed_size=100, options=b"")
    (got,) = read_fatbin(write_fatbin([e])).entries
    with pytest.raises(FatbinError, match="more than 100 bytes"):
        got.image()
    e.uncompressed_size = fatbin.MAX_UNCOMPRESSED_SIZE + 1
    (got,) = read_fatbin(write_fatbin([e])).entries
    with pytest.raises(FatbinError, match="implausibly large"):
        got.image()
