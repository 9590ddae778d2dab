"""`inspect` without `--hash` and `verify` read headers and tables, not the images: proved on
buffers whose images' inner pages are unreadable (`PROT_NONE`: a read kills the process), in a
child so that the one run that must read them (`--hash`) can die of it.  Also: hashes only with
`--hash` (table column, JSON field), compressed cubins not inflated without it, the PTX length
found without keeping the text, liblz4 and the decoder here agreeing, and the docs saying where the
hash went."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO, run_cli
from offload_tool import budget
from offload_tool.formats import fatbin
from offload_tool.ops.inspector import inspect_buffer

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import hostile_inputs as H  # noqa: E402

PAGE = 4096


def device_elf(text_size: int = 16 * PAGE, fill: int = 0xAB) -> bytes:
    """A structurally whole ELF64 device object: header, a `text_size` section, section headers last."""
    names = b"\0.strtab\0.text\0"
    blobs = names + bytes(-len(names) % 8) + bytes([fill]) * text_size
    return H.elf64([(1, 3, 0, len(names)), (9, 1, len(blobs) - text_size, text_size)], blobs, 1)


def _text_range(image_offset: int, image: bytes) -> tuple[int, int]:
    """The whole pages of an image's text (between its ELF header and its section headers)."""
    start, end = image_offset + 64 + 24, image_offset + len(image) - 3 * 64 - 8
    return -(-start // PAGE) * PAGE, end // PAGE * PAGE


def fatbin_case() -> tuple[bytes, list[tuple[int, int]]]:
    images = [device_elf(fill=0x11), device_elf(fill=0x22)]
    data = fatbin.write_fatbin([fatbin.make_entry(fatbin.KIND_ELF, sm, im) for sm, im in zip((80, 90), images)])
    guarded, off = [], 16
    for im in images:
        off += 64  # the entry header
        guarded.append(_text_range(off, im))
        off += len(im) + (-len(im) % 8)
    return data, guarded


def hip_fatbin_case() -> tuple[bytes, list[tuple[int, int]]]:
    """A host ELF whose `.hip_fatbin` holds two bundles, 4096-aligned, as a linked HIP library's."""
    section, guarded_rel = bytearray(), []
    for n in range(2):
        images = [device_elf(fill=0x30 + n), device_elf(fill=0x40 + n)]
        ids = [H.HOST_ID, "hipv4-amdgcn-amd-amdhsa--gfx90a", "hipv4-amdgcn-amd-amdhsa--gfx942"]
        off = H._header_size(ids)
        off += -off % PAGE
        entries, body = [(H.HOST_ID, off, 0)], b""
        for eid, im in zip(ids[1:], images):
            entries.append((eid, off + len(body), len(im)))
            guarded_rel.append((len(section) + off + len(body), im))
            body += im + bytes(-len(im) % PAGE)
        header = H.binary_bundle(entries)
        bundle = header + bytes(off - len(header)) + body
        section += bundle + bytes(-len(bundle) % PAGE)
    names = b"\0.strtab\0.hip_fatbin\0"
    lead = names + bytes(-(64 + len(names)) % PAGE)  # the section starts on a page
    data = H.elf64([(1, 3, 0, len(names)), (9, 1, len(lead), len(section))], lead + bytes(section), 1)
    base = 64 + len(lead)
    return data, [_text_range(base + rel, im) for rel, im in guarded_rel]


CHILD = textwrap.dedent("""
    import ctypes, json, mmap, sys
    sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests", sys.argv[1] + "/tests/library"]
    import test_inspect_reads_headers as T
    from offload_tool import budget
    from offload_tool.ops.inspector import inspect_buffer
    from offload_tool.ops.verify import verify_buffer
    case, what = sys.argv[2], sys.argv[3]
    data, guarded = getattr(T, case)()
    mm = mmap.mmap(-1, len(data) + T.PAGE)
    mm[:len(data)] = data
    base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    assert all(end - start >= 4 * T.PAGE for start, end in guarded), guarded
    for start, end in guarded:
        assert libc.mprotect(base + start, end - start, 0) == 0  # PROT_NONE
    view = memoryview(mm)[:len(data)].toreadonly()
    with budget.run():
        if what == "verify":
            r = verify_buffer(view, "lib")
            out = {"ok": r.ok, "problems": r.problems, "images": [i.to_dict() for i in r.images]}
        else:
            images = inspect_buffer(view, "lib", keep_data=False, hashes=what == "hash")
            out = {"images": [i.to_dict() for i in images]}
    print(json.dumps(out))
""")


def _child(case: str, what: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, str(REPO), case, what], capture_output=True, text=True,
                          cwd=REPO, timeout=120)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mprotect through libc")
@pytest.mark.parametrize("case, count", [("fatbin_case", 2), ("hip_fatbin_case", 4)])
def test_listing_and_verify_never_read_the_images(case, count):
    listed = _child(case, "list")
    assert listed.returncode == 0, listed.stderr
    images = json.loads(listed.stdout)["images"]
    assert len(images) == count and all("sha256" not in i for i in images)
    assert all(i["size"] == len(device_elf()) or i["container"] == "fatbin" for i in images)
    verified = _child(case, "verify")
    assert verified.returncode == 0, verified.stderr
    result = json.loads(verified.stdout)
    assert result["ok"], result["problems"]  # each image's header and section table were checked
    assert len(result["images"]) == count and all("sha256" not in i for i in result["images"])
    # The guard works: hashing reads the images, and the first read of a guarded page kills it.
    hashed = _child(case, "hash")
    assert hashed.returncode == -11, (hashed.returncode, hashed.stderr[-500:])


def test_hashes_only_when_asked():
    data, _ = fatbin_case()
    with budget.run():
        plain = inspect_buffer(data, "x.fatbin", keep_data=False, hashes=False)
    with budget.run():
        hashed = inspect_buffer(data, "x.fatbin", keep_data=False)  # the library's default: hashes
    assert [i.sha256 for i in plain] == [None, None]
    assert all(len(i.sha256) == 64 for i in hashed)
    strip = [{k: v for k, v in i.to_dict().items() if k != "sha256"} for i in hashed]
    assert [i.to_dict() for i in plain] == strip  # the same listing, less the hash


def _lz4_literals(raw: bytes) -> bytes:
    """One literal-only LZ4 sequence holding `raw`."""
    n = len(raw) - 15
    ext = b""
    while n >= 255:
        ext, n = ext + b"\xff", n - 255
    return bytes([0xF0]) + ext + bytes([n]) + raw


def _entry(kind: int, payload: bytes, flags: int, uncompressed: int) -> fatbin.FatbinEntry:
    return fatbin.FatbinEntry(kind=kind, sm=80, flags=fatbin.FLAG_64BIT | flags, payload=payload,
                              compressed_size=len(payload), uncompressed_size=uncompressed,
                              options=b"" if kind == fatbin.KIND_PTX else None)


def test_compressed_cubin_is_not_inflated_without_hash(tmp_path):
    garbage = bytes(range(256)) * 4  # no LZ4 stream: only --hash (or verify) inflates it
    path = tmp_path / "bad.fatbin"
    path.write_bytes(fatbin.write_fatbin([_entry(fatbin.KIND_ELF, garbage, fatbin.FLAG_LZ4, 12345)]))
    res = run_cli("tool", "inspect", "--json", path)
    assert res.returncode == 0, res.stderr
    (img,) = json.loads(res.stdout)
    assert img["size"] == 12345 and img["compressed"] and "sha256" not in img
    res = run_cli("tool", "inspect", "--hash", path)
    err = res.stderr.decode()
    assert res.returncode == 1 and len(err.splitlines()) == 1 and "LZ4" in err and "Traceback" not in err
    res = run_cli("tool", "verify", path)
    assert res.returncode == 1 and b"Traceback" not in res.stdout + res.stderr


@pytest.mark.parametrize("native", [True, False], ids=["liblz4", "python"])
def test_ptx_length_without_keeping_the_text(monkeypatch, native):
    if not native:
        monkeypatch.setattr(fatbin, "_native_lz4", lambda: None)
    text = b".version 9.0\n.target sm_80\n" + b"// line\n" * 5000
    raw = text + b"\0"
    import zstandard
    entries = [fatbin.make_entry(fatbin.KIND_PTX, 80, text),
               _entry(fatbin.KIND_PTX, _lz4_literals(raw), fatbin.FLAG_LZ4, len(raw)),
               _entry(fatbin.KIND_PTX, zstandard.ZstdCompressor().compress(raw), fatbin.FLAG_ZSTD, len(raw))]
    data = fatbin.write_fatbin(entries)
    for e in fatbin.read_fatbin(data).entries:
        assert e.text_length(bytearray()) == len(text)
        assert fatbin.lz4_block_decompress(_lz4_literals(raw), len(raw)) == raw
    with budget.run():
        listed = inspect_buffer(data, "p.fatbin", keep_data=False, hashes=False)
    with budget.run():
        hashed = inspect_buffer(data, "p.fatbin", keep_data=False)
    assert [i.size for i in listed] == [i.size for i in hashed] == [len(text)] * 3
    assert len({i.sha256 for i in hashed}) == 1  # the same text, however stored


def test_liblz4_and_the_decoder_here_agree(monkeypatch):
    if fatbin._native_lz4() is None:
        pytest.skip("no liblz4 on this machine")
    # Literals, then matches (offset 4, overlapping), then closing literals.
    block = bytes([0x4F]) + b"abcd" + b"\x04\x00" + b"\x10" + bytes([0x50]) + b"tail!"
    expected = 4 + 4 + 15 + 16 + 5
    native = fatbin.lz4_block_decompress(block, expected)
    monkeypatch.setattr(fatbin, "_native_lz4", lambda: None)
    assert fatbin.lz4_block_decompress(block, expected) == native
    assert native.startswith(b"abcd" * 9) and native.endswith(b"tail!")
    # What liblz4 refuses is worded by the decoder here (one FatbinError line).
    with pytest.raises(fatbin.FatbinError, match="LZ4"):
        fatbin.lz4_block_decompress(block, expected + 1)


def test_cli_hash_flag_and_help(tmp_path):
    data, _ = fatbin_case()
    path = tmp_path / "two.fatbin"
    path.write_bytes(data)
    table = run_cli("tool", "inspect", path).stdout.decode().splitlines()
    assert table[0].split()[-1] == "COMPRESSED" and "SHA256" not in table[0]
    hashed = run_cli("tool", "inspect", "--hash", path).stdout.decode().splitlines()
    assert hashed[0].split()[-1] == "SHA256" and all(len(r.split()[-1]) == 16 for r in hashed[1:])
    plain = json.loads(run_cli("tool", "inspect", "--json", path).stdout)
    full = json.loads(run_cli("tool", "inspect", "--json", "--hash", path).stdout)
    assert all("sha256" not in i for i in plain) and all(len(i["sha256"]) == 64 for i in full)
    sizes = json.loads(run_cli("tool", "inspect", "--sizes", "--json", path).stdout)
    assert sizes[0]["device_bytes"] == sum(i["size"] for i in plain)
    helptext = run_cli("tool", "inspect", "--help").stdout.decode()
    assert "--hash" in helptext and "sha256" in helptext
    assert "SHA256" not in run_cli("tool", "verify", path).stdout.decode()


def test_docs_say_where_the_hash_went():
    cli = (REPO / "docs" / "cli.md").read_text()
    assert "--hash" in cli and "no `sha256` field" in cli
    assert "inspect --hash" in cli  # the example that shows hashes asks for them
    bench = (REPO / "docs" / "benchmarks.md").read_text()
    assert "bench/vendor_libs.py" in bench
