"""ROCm kpack archives (`KPAK`) and split host binaries (`HIPK` wrappers, `.rocm_kpack_ref`).

The files are built here from the layout of ROCm's rocm-kpack writer and reader (header
"KPAK", u32 version 1, u64 TOC offset; blobs from offset 64; a MessagePack TOC to the end of
the file), with a MessagePack encoder written from the MessagePack specification, independent of
the library's decoder; one archive is also spelled out byte by byte."""

from __future__ import annotations

import io
import struct

import pytest
import zstandard

from offload_tool import budget
from offload_tool.errors import OffloadError
from offload_tool.formats import elf, kpack
from offload_tool.formats.magic import FileKind, identify
from offload_tool.errors import MessagePackError
from offload_tool.formats.msgpack import MAX_NESTING, read_msgpack
from offload_tool.ops.inspector import inspect_buffer, no_images_reason

from conftest import run_cli


def pack(obj) -> bytes:
    """MessagePack, as the specification spells each type (the shortest form, like msgpack-python)."""
    if obj is None:
        return b"\xc0"
    if isinstance(obj, bool):
        return b"\xc3" if obj else b"\xc2"
    if isinstance(obj, int):
        if 0 <= obj < 0x80:
            return bytes([obj])
        if -32 <= obj < 0:
            return bytes([obj & 0xFF])
        for tag, code, lo, hi in ((0xCC, ">B", 0, 1 << 8), (0xCD, ">H", 0, 1 << 16), (0xCE, ">I", 0, 1 << 32),
                                  (0xCF, ">Q", 0, 1 << 64), (0xD3, ">q", -(1 << 63), 0)):
            if lo <= obj < hi:
                return bytes([tag]) + struct.pack(code, obj)
    if isinstance(obj, str):
        raw = obj.encode()
        if len(raw) < 32:
            return bytes([0xA0 | len(raw)]) + raw
        return (b"\xd9" + struct.pack(">B", len(raw)) if len(raw) < 256 else b"\xda" + struct.pack(">H", len(raw))) + raw
    if isinstance(obj, bytes):
        return b"\xc4" + struct.pack(">B", len(obj)) + obj
    if isinstance(obj, list):
        head = bytes([0x90 | len(obj)]) if len(obj) < 16 else b"\xdc" + struct.pack(">H", len(obj))
        return head + b"".join(pack(v) for v in obj)
    if isinstance(obj, dict):
        head = bytes([0x80 | len(obj)]) if len(obj) < 16 else b"\xde" + struct.pack(">H", len(obj))
        return head + b"".join(pack(k) + pack(v) for k, v in obj.items())
    raise TypeError(obj)


def code_object(arch: str, n: int = 100) -> bytes:
    """Stand-in for an AMDGPU code object: ELF magic (so `inspect` calls it elf), then filler."""
    return b"\x7fELF\x02\x01\x01\x40" + (arch.encode() * n)[:n]


KERNELS = [("lib/libfoo.so#0", "gfx1100", code_object("gfx1100", 300)),
           ("lib/libfoo.so#0", "gfx1101", code_object("gfx1101", 257)),
           ("bin/app#1", "gfx1100", code_object("app", 64))]


def build_kpack(kernels=KERNELS, scheme: str = "none", toc_extra: dict | None = None) -> bytes:
    """A kpack archive as ROCm's `PackedKernelArchive.write` lays it out."""
    out = bytearray(struct.pack("<4sIQ", b"KPAK", 1, 0))
    out += bytes(-len(out) % 64)
    start = len(out)
    toc: dict = {"format_version": 1, "group_name": "blas", "gfx_arch_family": "gfx110X",
                 "gfx_arches": ["gfx1100", "gfx1101"], "compression_scheme": scheme}
    if scheme == "none":
        blobs = []
        for _b, _a, data in kernels:
            blobs.append({"offset": len(out), "size": len(data)})
            out += data
        toc["blobs"] = blobs
    else:
        blob = bytearray(struct.pack("<I", len(kernels)))
        for _b, _a, data in kernels:
            frame = zstandard.ZstdCompressor(level=3).compress(data)
            blob += struct.pack("<I", len(frame)) + frame
        out += blob
        toc["zstd_offset"], toc["zstd_size"] = start, len(blob)
    entries: dict = {}
    for ordinal, (binary, arch, data) in enumerate(kernels):
        entries.setdefault(binary, {})[arch] = {"type": "hsaco", "ordinal": ordinal, "original_size": len(data)}
    toc["toc"] = entries
    toc.update(toc_extra or {})
    toc_offset = len(out)
    out += pack(toc)
    struct.pack_into("<Q", out, 8, toc_offset)
    return bytes(out)


def test_encoder_matches_the_specification():
    # Spot checks against the specification's own examples, so the encoder above is not trusted blindly.
    assert pack({"a": [1, -1, None, True]}) == b"\x81\xa1a\x94\x01\xff\xc0\xc3"
    assert pack(300) == b"\xcd\x01\x2c" and pack("x" * 40)[:2] == b"\xd9\x28"


def test_identify_kpack():
    assert identify(build_kpack()) is FileKind.KPACK
    assert identify(b"KPAK") is FileKind.KPACK
    assert identify(b"KPA") is FileKind.UNKNOWN


@pytest.mark.parametrize("scheme", ["none", "zstd-per-kernel"])
def test_every_field(scheme):
    data = build_kpack(scheme=scheme)
    a = kpack.read_kpack(data)
    assert (a.version, a.format_version, a.group_name, a.gfx_arch_family, a.gfx_arches, a.compression_scheme) == (
        1, 1, "blas", "gfx110X", ["gfx1100", "gfx1101"], scheme)
    assert a.toc_offset == struct.unpack_from("<Q", data, 8)[0] and data[a.toc_offset] & 0xF0 == 0x80
    assert [(k.binary, k.arch, k.type, k.ordinal, k.original_size, k.compressed) for k in a.kernels] == [
        (b, ar, "hsaco", i, len(d), scheme != "none") for i, (b, ar, d) in enumerate(KERNELS)]
    pos = 64 if scheme == "none" else 68
    for k, (_b, _a, d) in zip(a.kernels, KERNELS):
        assert bytes(kpack.kernel_bytes(data, k)) == d
        if scheme == "none":
            assert (k.offset, k.size) == (pos, len(d))
            pos += len(d)
        else:
            assert struct.unpack_from("<I", data, k.offset - 4)[0] == k.size
            pos = k.offset + k.size + 4
    assert a.kernels[0].offset == (64 if scheme == "none" else 72)


def test_archive_spelled_out_byte_by_byte():
    image = b"\x7fELFcode"
    toc = (b"\x84"                                     # map of 4
           b"\xb2compression_scheme\xa4none"
           b"\xa5blobs\x91\x82\xa6offset\x40\xa4size\x08"  # [{offset: 64, size: 8}]
           b"\xaagfx_arches\x91\xa6gfx942"
           b"\xa3toc\x81\xa6a.so#0\x81\xa6gfx942\x82\xa7ordinal\x00\xa4type\xa5hsaco")
    data = b"KPAK" + struct.pack("<IQ", 1, 72) + bytes(48) + image + toc
    a = kpack.read_kpack(data)
    assert (a.gfx_arches, a.group_name, a.compression_scheme) == (["gfx942"], "", "none")
    [k] = a.kernels
    assert (k.binary, k.arch, k.type, k.ordinal, k.original_size, k.offset, k.size) == (
        "a.so#0", "gfx942", "hsaco", 0, None, 64, 8)
    [img] = inspect_buffer(data, "a.kpack")
    assert (img.path, img.container, img.producer, img.triple, img.arch, img.image_kind, img.size) == (
        "a.kpack[a.so#0][gfx942]", "kpack", "hip", "amdgcn-amd-amdhsa", "gfx942", "elf", 8)


@pytest.mark.parametrize("scheme", ["none", "zstd-per-kernel"])
def test_inspect_lists_every_kernel(scheme, tmp_path):
    path = tmp_path / "blas_gfx110X.kpack"
    path.write_bytes(build_kpack(scheme=scheme))
    images = inspect_buffer(path.read_bytes(), str(path))
    assert [(i.path.split("kpack", 1)[1], i.arch, i.size, i.compressed, i.details["kpack_ordinal"])
            for i in images] == [(f"[{b}][{a}]", a, len(d), scheme != "none", n)
                                  for n, (b, a, d) in enumerate(KERNELS)]
    import hashlib
    assert [i.sha256 for i in images] == [hashlib.sha256(d).hexdigest() for _b, _a, d in KERNELS]
    res = run_cli("tool", "inspect", "--json", path)
    import json
    rows = json.loads(res.stdout)
    assert res.returncode == 0 and [(r["arch"], r["container"], r["kpack_binary"], r["kpack_group"]) for r in rows] == [
        (a, "kpack", b, "blas") for b, a, _d in KERNELS]


def _corrupt_toc(**change) -> bytes:
    return build_kpack(toc_extra=change)


BAD = {
    "version": lambda: b"KPAK" + struct.pack("<IQ", 2, 16) + b"\x80",
    "toc offset past the end": lambda: b"KPAK" + struct.pack("<IQ", 1, 1 << 62) + b"\x80",
    "toc offset in the header": lambda: b"KPAK" + struct.pack("<IQ", 1, 4) + b"\x80",
    "truncated header": lambda: b"KPAK\x01\x00",
    "toc not a map": lambda: b"KPAK" + struct.pack("<IQ", 1, 16) + b"\x91\x01",
    "toc truncated": lambda: build_kpack()[:-3],
    "unknown scheme": lambda: _corrupt_toc(compression_scheme="lz4"),
    "blob outside": lambda: _corrupt_toc(blobs=[{"offset": 64, "size": 1 << 40}] * 3),
    "blob in header": lambda: _corrupt_toc(blobs=[{"offset": 0, "size": 8}] * 3),
    "negative offset": lambda: _corrupt_toc(blobs=[{"offset": -1, "size": 8}] * 3),
    "ordinal out of range": lambda: _corrupt_toc(blobs=[]),
    "toc entry not a map": lambda: _corrupt_toc(toc={"a#0": {"gfx1100": 5}}),
    "huge map count": lambda: b"KPAK" + struct.pack("<IQ", 1, 16) + b"\xdf\xff\xff\xff\xff",
    "huge array count": lambda: b"KPAK" + struct.pack("<IQ", 1, 16) + b"\x81\xa1a\xdd\xff\xff\xff\xff",
    "huge string": lambda: b"KPAK" + struct.pack("<IQ", 1, 16) + b"\x81\xa1a\xdb\xff\xff\xff\xff",
    "deep nesting": lambda: b"KPAK" + struct.pack("<IQ", 1, 16) + b"\x91" * 100_000 + b"\xc0",
    "extension type": lambda: b"KPAK" + struct.pack("<IQ", 1, 16) + b"\xd4\x01\x02",
    "array as map key": lambda: b"KPAK" + struct.pack("<IQ", 1, 16) + b"\x81\x90\x01",
    "zstd blob outside": lambda: build_kpack(scheme="zstd-per-kernel", toc_extra={"zstd_size": 1 << 40}),
    "zstd frame count": lambda: _zstd_patch(lambda blob: struct.pack("<I", 1 << 30) + blob[4:]),
    "zstd frame size": lambda: _zstd_patch(lambda blob: blob[:4] + struct.pack("<I", 1 << 31) + blob[8:]),
    "zstd original_size lie": lambda: _zstd_patch(lambda blob: blob, original_size=10),
}


def _zstd_patch(edit, original_size=None) -> bytes:
    data = bytearray(build_kpack(scheme="zstd-per-kernel"))
    a = kpack.read_kpack(bytes(data))
    toc = {"format_version": 1, "compression_scheme": "zstd-per-kernel", "zstd_offset": 64,
           "zstd_size": a.toc_offset - 64,
           "toc": {"x#0": {"gfx1100": {"ordinal": 0, "original_size": original_size or len(KERNELS[0][2])}}}}
    blob = edit(bytes(data[64:a.toc_offset]))
    out = bytearray(data[:64]) + blob
    toc["zstd_size"] = len(blob)
    struct.pack_into("<Q", out, 8, len(out))
    return bytes(out + pack(toc))


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_archive_is_one_error(case, tmp_path):
    data = BAD[case]()
    with budget.run(), pytest.raises(OffloadError):
        inspect_buffer(data, "bad.kpack")
    path = tmp_path / "bad.kpack"
    path.write_bytes(data)
    res = run_cli("tool", "inspect", path)
    err = res.stderr.decode()
    assert res.returncode == 1 and res.stdout == b"", err
    assert err.count("\n") == 1 and err.startswith("offload-tool: error: ") and "Traceback" not in err, err


def test_toc_entries_are_charged_to_the_budget():
    many = [(f"lib/x.so#{i}", "gfx1100", code_object("x", 16)) for i in range(200)]
    data = build_kpack(many)
    assert len(kpack.read_kpack(data).kernels) == 200
    with budget.run(budget.DEFAULT_LIMITS.replace(entries=100)), pytest.raises(budget.BudgetError):
        kpack.read_kpack(data)


def test_msgpack_reader_bounds():
    assert read_msgpack(b"\x92\xcd\x01\x2c\xa2hi") == ([300, "hi"], 7)
    with pytest.raises(MessagePackError, match="nested more than"):
        read_msgpack(b"\x91" * (MAX_NESTING + 1) + b"\xc0")
    with pytest.raises(MessagePackError, match="cannot fit"):
        read_msgpack(b"\xdd\x7f\xff\xff\xff")


# -- split host binaries --------------------------------------------------------------------

def split_host_object(wrappers: bytes, marker: bytes) -> bytes:
    """An x86-64 relocatable object with the two sections ROCm's kpack transform leaves behind."""
    ehdr = b"\x7fELF\x02\x01\x01" + bytes(9) + struct.pack("<HHIQQQIHHHHHH", 1, 62, 1, 0, 0, 0, 0, 64, 0, 0, 64, 0, 0)
    out = io.BytesIO()
    elf.add_sections(elf.empty_relocatable_like(ehdr), [
        elf.NewSection(kpack.WRAPPER_SECTION, wrappers, flags=2, align=8),
        elf.NewSection(kpack.KPACK_REF_SECTION, marker)], out)
    return out.getvalue()


def hipk_wrappers(*co_indices: int, magic: int = kpack.HIPK_MAGIC) -> bytes:
    return b"".join(struct.pack("<IIQQ", magic, 1, 0, i) for i in co_indices)


MARKER = pack({"kpack_search_paths": ["../.kpack/blas_gfx110X.kpack", "../.kpack/blas_gfx942.kpack"],
               "kernel_name": "lib/libfoo.so"})


def test_split_host_binary_names_its_archives():
    obj = split_host_object(hipk_wrappers(0, 1), MARKER)
    ref = kpack.read_kpack_ref(MARKER)
    assert (ref.kernel_name, ref.search_paths) == (
        "lib/libfoo.so", ["../.kpack/blas_gfx110X.kpack", "../.kpack/blas_gfx942.kpack"])
    ws = kpack.read_kpack_wrappers(hipk_wrappers(0, 7) + hipk_wrappers(2, magic=kpack.HIPF_MAGIC))
    assert [(w.index, w.is_kpack, w.version, w.co_index) for w in ws] == [(0, True, 1, 0), (1, True, 1, 7),
                                                                          (2, False, 1, 2)]
    assert inspect_buffer(obj, "libfoo.so") == []
    assert no_images_reason(obj) == ("device code split out into kpack archives ../.kpack/blas_gfx110X.kpack, "
                                     "../.kpack/blas_gfx942.kpack as 'lib/libfoo.so' "
                                     "(HIPK wrappers for code objects #0, #1)")


@pytest.mark.parametrize("wrappers,marker,message", [
    (hipk_wrappers(0)[:20], MARKER, "not a multiple of the 24-byte wrapper"),
    (hipk_wrappers(0), pack({"kernel_name": "x"}), "lacks kernel_name or kpack_search_paths"),
    (hipk_wrappers(0), pack({"kernel_name": 5, "kpack_search_paths": []}), "kernel_name is int"),
    (hipk_wrappers(0), MARKER[:-4], "runs past the end"),
])
def test_bad_split_host_binary_is_one_error(wrappers, marker, message, tmp_path):
    path = tmp_path / "libfoo.so"
    path.write_bytes(split_host_object(wrappers, marker))
    with pytest.raises(kpack.KpackError if "past" not in message else OffloadError, match=message):
        inspect_buffer(path.read_bytes(), str(path))
    res = run_cli("tool", "inspect", path)
    err = res.stderr.decode()
    assert res.returncode == 1 and err.count("\n") == 1 and message in err, err
    assert (kpack.WRAPPER_SECTION if "wrapper" in message else kpack.KPACK_REF_SECTION) in err, err
