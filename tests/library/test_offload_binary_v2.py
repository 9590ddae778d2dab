"""OffloadBinary version 2: binaries built by hand from LLVM 23's layout (`Header` with
EntriesCount, 40-byte `Entry`s, 24-byte `StringEntry`s with ValueSize), every field read back,
our writer's bytes, the CLIs, and bad input as one error line naming offset and field."""

from __future__ import annotations

import io
import json
import struct

import pytest

from conftest import run_cli
from offload_tool import budget
from offload_tool.errors import BudgetError, OffloadBinaryError
from offload_tool.formats.offload_binary import OffloadImage, read_offload_binaries, write_offload_binary
from offload_tool.formats.offload_binary_v2 import read_offload_binary_v2, write_offload_binary_v2

MAGIC = b"\x10\xff\x10\xad"


def _hand_built() -> bytes:
    """Two entries laid out as LLVM's `OffloadBinary::write` (version 2) lays them out, with
    struct codes written out here rather than taken from the library."""
    # String table (StringTableBuilder ELF order: sorted by reversed string, descending).
    table = b"\0arch\0triple\0amdgcn-amd-amdhsa\0nvptx64-nvidia-cuda\0gfx90a\0"
    entries_size = 2 * 40
    string_entries_size = 3 * 24              # entry 0: 2 strings, entry 1: 1 string
    table_start = 32 + entries_size + string_entries_size
    data_start = (table_start + len(table) + 7) & ~7
    img0, img1 = b"GPU0", b"GPU-one"
    size = (data_start + len(img0) + len(img1) + 7) & ~7
    out = MAGIC + struct.pack("<IQQQ", 2, size, 32, 2)
    # Entry: TheImageKind u16, TheOffloadKind u16, Flags u32, StringOffset, NumStrings, ImageOffset, ImageSize
    out += struct.pack("<HHIQQQQ", 1, 4, 0, 32 + entries_size, 2, data_start, len(img0))
    out += struct.pack("<HHIQQQQ", 2, 1, 1, 32 + entries_size + 2 * 24, 1, data_start + len(img0), len(img1))

    def at(s: bytes) -> int:
        return table_start + table.index(s + b"\0")

    out += struct.pack("<QQQ", at(b"triple"), at(b"amdgcn-amd-amdhsa"), len(b"amdgcn-amd-amdhsa"))
    out += struct.pack("<QQQ", at(b"arch"), at(b"gfx90a"), 6)
    out += struct.pack("<QQQ", at(b"triple"), at(b"nvptx64-nvidia-cuda"), len(b"nvptx64-nvidia-cuda"))
    out += table
    out += bytes(data_start - len(out)) + img0 + img1
    return out + bytes(size - len(out))


def _images():
    return [OffloadImage(1, 4, 0, {"triple": "amdgcn-amd-amdhsa", "arch": "gfx90a"}, b"GPU0"),
            OffloadImage(2, 1, 1, {"triple": "nvptx64-nvidia-cuda"}, b"GPU-one")]


def test_every_field_of_a_hand_built_binary():
    data = _hand_built()
    images = read_offload_binaries(data)
    assert len(images) == 2
    a, b = images
    assert (a.version, a.index, a.offset, a.size) == (2, 0, 0, len(data))
    assert (b.version, b.index, b.offset, b.size) == (2, 1, 0, len(data))
    assert (a.image_kind, a.offload_kind, a.flags) == (1, 4, 0)
    assert (b.image_kind, b.offload_kind, b.flags) == (2, 1, 1)
    assert list(a.strings.items()) == [("triple", "amdgcn-amd-amdhsa"), ("arch", "gfx90a")]
    assert list(b.strings.items()) == [("triple", "nvptx64-nvidia-cuda")]
    assert (bytes(a.image), bytes(b.image)) == (b"GPU0", b"GPU-one")
    # Version 2 means LLVM 23's bit-flag kinds: 4 is HIP, not an ambiguous value.
    assert (a.producer, b.producer, a.llvm_version) == ("hip", "openmp", 23)


def test_writer_matches_llvm_layout_and_round_trips():
    data = write_offload_binary_v2(_images())
    assert data == _hand_built()
    assert read_offload_binaries(data) == [
        OffloadImage(1, 4, 0, {"triple": "amdgcn-amd-amdhsa", "arch": "gfx90a"}, b"GPU0", 23),
        OffloadImage(2, 1, 1, {"triple": "nvptx64-nvidia-cuda"}, b"GPU-one", 23)]


def test_values_are_sized_not_nul_terminated():
    # ValueSize selects a prefix of the stored string: "gfx90a" read with size 3 is "gfx".
    data = bytearray(_hand_built())
    table_start = 32 + 80 + 72
    struct.pack_into("<Q", data, table_start - 2 * 24 + 16, 3)     # entry 0's arch ValueSize
    assert read_offload_binaries(bytes(data))[0].arch == "gfx"


def test_v1_and_v2_back_to_back_and_v1_stays_default(tmp_path):
    v1 = write_offload_binary(_images()[0])
    images = read_offload_binaries(v1 + _hand_built() + v1)
    assert [(i.version, i.index) for i in images] == [(1, 0), (2, 0), (2, 1), (1, 0)]
    (tmp_path / "a.o").write_bytes(b"GPU0")
    image = "--image=file=a.o,triple=amdgcn-amd-amdhsa,arch=gfx90a,kind=hip"
    assert run_cli("packager", "-o", "p19", image, cwd=tmp_path).returncode == 0
    assert struct.unpack_from("<I", (tmp_path / "p19").read_bytes(), 4) == (1,)


def _patched(field_offset: int, fmt: str, value) -> bytes:
    data = bytearray(_hand_built())
    struct.pack_into(fmt, data, field_offset, value)
    return bytes(data)


ENTRY1 = 32 + 40
STRINGS = 32 + 80


@pytest.mark.parametrize("data, offset, field", [
    (_hand_built()[:60], 0, "Header"),
    (_patched(4, "<I", 3), 4, "Version"),
    (_patched(8, "<Q", 1 << 40), 8, "Size"),
    (_patched(24, "<Q", 1 << 60), 24, "EntriesCount"),
    (_patched(16, "<Q", 1 << 20), 16, "EntriesOffset"),
    (_patched(ENTRY1 + 24, "<Q", 1 << 40), ENTRY1 + 24, "ImageOffset"),
    (_patched(ENTRY1 + 32, "<Q", 1 << 40), ENTRY1 + 32, "ImageSize"),
    (_patched(ENTRY1 + 8, "<Q", 1 << 40), ENTRY1 + 8, "StringOffset"),
    (_patched(ENTRY1 + 16, "<Q", 1 << 40), ENTRY1 + 16, "NumStrings"),
    (_patched(STRINGS, "<Q", 1 << 40), STRINGS, "KeyOffset"),
    (_patched(STRINGS + 8, "<Q", 1 << 40), STRINGS + 8, "ValueOffset"),
    (_patched(STRINGS + 16, "<Q", 1 << 40), STRINGS + 8, "ValueOffset"),
])
def test_bad_fields_name_offset_and_field(data, offset, field):
    with pytest.raises(OffloadBinaryError) as exc:
        read_offload_binaries(data)
    message = str(exc.value)
    assert "\n" not in message
    assert f"offset {offset:#x}: {field}:" in message


def test_unterminated_key_is_an_error():
    data = bytearray(_hand_built())
    size = len(data)
    struct.pack_into("<Q", data, STRINGS, size - 1)          # key at the last (padding) byte ...
    data[size - 1] = 0x41                                    # ... which is no longer NUL
    with pytest.raises(OffloadBinaryError, match="not NUL-terminated"):
        read_offload_binaries(bytes(data))


def test_entry_count_is_charged_to_the_budget():
    # A count that fits the claimed Size still stays under the run's entry budget.
    images = [OffloadImage(1, 4, 0, {}, b"") for _ in range(50)]
    data = write_offload_binary_v2(images)
    assert len(read_offload_binary_v2(data)) == 50
    with budget.run(budget.DEFAULT_LIMITS.replace(entries=10)):
        with pytest.raises(BudgetError, match="50 entries: over the entries budget of 10"):
            read_offload_binaries(data)


def test_many_entries_naming_one_value_are_bounded():
    # 2,000 string entries all pointing at one 64 KiB value: decoded once, charged once.
    value = "v" * (64 << 10)
    data = bytearray(write_offload_binary_v2([OffloadImage(1, 4, 0, {"k": value}, b"")]))
    e = read_offload_binary_v2(bytes(data))[0]
    assert e.strings["k"] == value
    with budget.run(budget.DEFAULT_LIMITS.replace(names=1 << 10)):
        with pytest.raises(BudgetError, match="names budget"):
            read_offload_binaries(bytes(data))


def test_packager_23_writes_one_v2_binary_that_inspect_verify_and_extract_read(tmp_path):
    elf = b"\x7fELF\x02\x01\x01" + bytes(57)     # minimal valid ELF64 headers (verify checks structure)
    (tmp_path / "a.o").write_bytes(elf + b"GPU0")
    (tmp_path / "b.o").write_bytes(elf + b"GPU-one")
    res = run_cli("packager", "--llvm-version=23", "-o", "p23",
                  "--image=file=a.o,triple=amdgcn-amd-amdhsa,arch=gfx90a,kind=hip",
                  "--image=file=b.o,triple=nvptx64-nvidia-cuda,arch=sm_70,kind=openmp", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    data = (tmp_path / "p23").read_bytes()
    magic, version, size, entries_offset, count = struct.unpack_from("<4sIQQQ", data)
    assert (magic, version, size, entries_offset, count) == (MAGIC, 2, len(data), 32, 2)

    res = run_cli("tool", "inspect", "--json", "p23", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert [(r["producer"], r["arch"], r["binary_version"], r["entry_index"]) for r in rows] == [
        ("hip", "gfx90a", 2, 0), ("openmp", "sm_70", 2, 1)]
    assert run_cli("tool", "verify", "p23", cwd=tmp_path).returncode == 0

    res = run_cli("packager", "--llvm-version=23", "p23", "--image=kind=openmp,file=out.o", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "out.o").read_bytes() == elf + b"GPU-one"


def test_cli_reports_bad_v2_as_one_line(tmp_path):
    (tmp_path / "bad").write_bytes(_patched(24, "<Q", 1 << 60))
    for res in (run_cli("tool", "inspect", "bad", cwd=tmp_path), run_cli("packager", "bad", cwd=tmp_path)):
        assert res.returncode == 1
        lines = res.stderr.decode().strip().splitlines()
        assert len(lines) == 1 and "EntriesCount" in lines[0] and "offset 0x18" in lines[0], res.stderr


def test_inspect_splits_concatenated_ccobs_by_their_size_fields(tmp_path):
    # Two compressed bundles back to back (as LLVM writes them into one section): each header's
    # total size field, not a search for "CCOB", says where the next one begins.
    from offload_tool.formats import ccob
    from offload_tool.formats.bundle import BundleEntry, write_binary_bundle
    from offload_tool.ops.inspector import inspect_buffer

    def bundle(arch: str, code: bytes) -> bytes:
        out = io.BytesIO()
        write_binary_bundle([BundleEntry("host-x86_64-unknown-linux-gnu", b""),
                             BundleEntry(f"hip-amdgcn-amd-amdhsa--{arch}", code)], out)
        return ccob.compress(out.getvalue(), version=3)

    first = bundle("gfx906", b"device code naming CCOB, not a header" * 3)
    data = first + bundle("gfx90a", b"second")
    images = [i for i in inspect_buffer(data, "two.ccob") if i.arch]
    assert [(i.arch, i.compressed, i.path.split("@")[1].split("[")[0]) for i in images] == [
        ("gfx906", True, "0x0"), ("gfx90a", True, hex(len(first)))]
    with budget.run(budget.DEFAULT_LIMITS.replace(entries=1)):
        with pytest.raises(BudgetError):
            inspect_buffer(data + data, "four.ccob")
