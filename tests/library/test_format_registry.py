"""A new container format is one module plus one row of `magic.FORMAT_MODULES`: a toy format,
declared and registered from here, is recognised by `identify`, listed by `inspect` (alone, inside
an archive, holding OffloadBinaries) and searched by `extract`, with nothing else changed."""

from __future__ import annotations

import enum
import hashlib
import io
import struct
import types

import pytest

from offload_tool.errors import OffloadError
from offload_tool.formats import magic
from offload_tool.formats.archive import write_archive
from offload_tool.formats.kinds import FileKind, Format, OffloadBinariesAt
from offload_tool.formats.offload_binary import OFFLOAD_BINARY_MAGIC, make_image, write_offload_binary
from offload_tool.ops import extract, inspector

# -- the toy format: "TOYC", u32 count, count x (u64 offset, u64 size), the images ------------------

TOY_MAGIC = b"TOYC"
_ENTRY = struct.Struct("<QQ")


class ToyKind(str, enum.Enum):
    TOYC = "toyc"


def toy_entries(buf) -> list[tuple[int, int]]:
    head = bytes(buf[:8])
    if len(head) < 8:
        raise OffloadError("toy container: truncated header")
    (count,) = struct.unpack_from("<I", head, 4)
    table = bytes(buf[8:8 + count * _ENTRY.size])
    if len(table) != count * _ENTRY.size:
        raise OffloadError("toy container: truncated entry table")
    entries = [_ENTRY.unpack_from(table, i * _ENTRY.size) for i in range(count)]
    for offset, size in entries:
        if offset + size > len(buf):
            raise OffloadError(f"toy container: entry at {offset:#x} runs past the end")
    return entries


def _inspect(scan, data, path, wrappers, depth, compressed):
    for i, (offset, size) in enumerate(toy_entries(data)):
        image, ipath = data[offset:offset + size], f"{path}[{i}]"
        if scan.leaf_or_nested(image, ipath, wrappers + ["toyc"], depth, compressed):
            continue
        scan.add_image(path=ipath, container="toyc", producer="toy", triple="", arch="",
                       image_kind=scan.image_kind(image), size=len(image), compressed=compressed, sha256="",
                       wrappers=list(wrappers), details={"toy_entry": i}, data=image)


def _offload_binaries(buf, name):
    for i, (offset, size) in enumerate(toy_entries(buf)):
        if bytes(buf[offset:offset + 4]) == OFFLOAD_BINARY_MAGIC:
            yield OffloadBinariesAt(f"entry{i}", (offset, size), buf[offset:offset + size], f"{name}: entry {i}")


toy_module = types.ModuleType("toyc", "A made-up container format, declared as a format module declares one.")
toy_module.FORMATS = (Format(ToyKind.TOYC, magics=(TOY_MAGIC,), container="toyc", inspect=_inspect,
                             extract="toyc", offload_binaries=_offload_binaries,
                             no_images="a toy container none of whose entries is a package"),)


def toy(*images: bytes) -> bytes:
    offset = 8 + len(images) * _ENTRY.size
    table = b""
    for image in images:
        table += _ENTRY.pack(offset, len(image))
        offset += len(image)
    return TOY_MAGIC + struct.pack("<I", len(images)) + table + b"".join(images)


def _archive(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    write_archive(list(members.items()), out)
    return out.getvalue()


@pytest.fixture
def registered(monkeypatch):
    """The toy module as one more row of the format table."""
    monkeypatch.setattr(magic, "FORMAT_MODULES", magic.FORMAT_MODULES + (toy_module,))


ELF_IMAGE = b"\x7fELF" + bytes(60)  # what `inspect` calls an elf image
PACKAGE = write_offload_binary(make_image(b"\x7fELF-device-code", {"triple": "amdgcn-amd-amdhsa",
                                                                   "arch": "gfx90a"}, image_kind=1, offload_kind=1))
SAMPLE = toy(ELF_IMAGE, b"some text", PACKAGE)


# -- identify ------------------------------------------------------------------------------------

def test_identify_knows_the_toy_only_once_registered(monkeypatch):
    assert magic.identify(SAMPLE) is FileKind.UNKNOWN
    monkeypatch.setattr(magic, "FORMAT_MODULES", magic.FORMAT_MODULES + (toy_module,))
    assert magic.identify(SAMPLE) is ToyKind.TOYC
    assert magic.identify(b"TOY") is FileKind.UNKNOWN
    # The formats already known are unchanged beside it.
    assert magic.identify(PACKAGE) is FileKind.OFFLOAD_BINARY
    assert magic.identify(ELF_IMAGE) is FileKind.ELF


# -- inspect -------------------------------------------------------------------------------------

def test_inspect_lists_the_toy_images(registered):
    images = inspector.inspect_buffer(SAMPLE, "t.toyc")
    rows = [(d.path, d.container, d.image_kind, d.size, d.wrappers) for d in images]
    assert rows == [
        ("t.toyc[0]", "toyc", "elf", len(ELF_IMAGE), []),
        ("t.toyc[1]", "toyc", "unknown", 9, []),
        # A package inside a toy entry is unwrapped like a package anywhere else.
        ("t.toyc[2][0]", "offload-binary", "elf", len(b"\x7fELF-device-code"), ["toyc"]),
    ]
    assert images[0].sha256 == hashlib.sha256(ELF_IMAGE).hexdigest()
    assert images[2].arch == "gfx90a" and images[2].producer == "openmp"
    assert images[0].details == {"toy_entry": 0}


def test_inspect_finds_the_toy_inside_an_archive_and_a_package(registered):
    archive = _archive({"t.toyc": toy(ELF_IMAGE)})
    rows = [(d.path, d.container, d.wrappers, d.file) for d in inspector.inspect_buffer(archive, "lib.a")]
    assert rows == [("lib.a(t.toyc)[0]", "toyc", ["archive"], "lib.a(t.toyc)")]
    outer = write_offload_binary(make_image(toy(ELF_IMAGE), {"triple": "x86_64-unknown-linux-gnu", "arch": ""}))
    rows = [(d.path, d.container, d.wrappers) for d in inspector.inspect_buffer(outer, "p.bin")]
    assert rows == [("p.bin[0][0]", "toyc", ["offload-binary"])]


def test_unregistered_toy_is_no_container():
    assert inspector.inspect_buffer(SAMPLE, "t.toyc") == []


def test_a_damaged_toy_is_one_offload_error(registered):
    with pytest.raises(OffloadError, match=r"t\.toyc: toy container: entry at 0x81 runs past the end"):
        inspector.inspect_buffer(SAMPLE[:-1], "t.toyc")


# -- extract -------------------------------------------------------------------------------------

def test_extract_finds_the_packages_in_toy_entries(registered):
    found = extract.find_offload_images(SAMPLE, "t.toyc")
    assert [(f.path, f.container, f.section, f.image.arch, bytes(f.image.image)) for f in found] == [
        ("t.toyc:entry2[0]", "toyc", "entry2", "gfx90a", b"\x7fELF-device-code")]
    assert extract.file_kind(SAMPLE) == "toyc"
    assert extract.why_no_images(toy(ELF_IMAGE)) == "a toy container none of whose entries is a package"
    # Inside an archive, member by member, as for any other format.
    found = extract.find_offload_images(_archive({"t.toyc": SAMPLE}), "lib.a")
    assert [(f.path, f.member) for f in found] == [("lib.a(t.toyc):entry2[0]", "t.toyc")]
