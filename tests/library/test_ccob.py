"""Compressed bundles (CCOB v1/v2/v3, zlib/zstd): headers, round trips, checks LLVM lacks, interop."""

from __future__ import annotations

import hashlib
import io
import os
import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from conftest import REPO, need_tool, run
from offload_tool.formats import ccob
from offload_tool.formats.bundle import BundleEntry, read_binary_bundle, write_binary_bundle
from offload_tool.errors import CompressionError, OffloadError, UsageError


def _bundle(payloads=(b"Content of device file 1\n", b"Content of device file 2\n" * 40)) -> bytes:
    out = io.BytesIO()
    ids = ["hip-amdgcn-amd-amdhsa--gfx900", "hip-amdgcn-amd-amdhsa--gfx906"]
    write_binary_bundle([BundleEntry(i, p) for i, p in zip(ids, payloads)], out)
    return out.getvalue()


def _v1(data: bytes, method: int = 0) -> bytes:
    """A v1 CCOB (no writer produces these any more; LLVM still reads them)."""
    payload = zlib.compress(data, 6) if method == 0 else __import__("zstandard").ZstdCompressor().compress(data)
    digest = hashlib.md5(data).digest()[:8]
    return struct.pack("<4sHHI", b"CCOB", 1, method, len(data)) + digest + payload


@pytest.mark.parametrize("method", ["zstd", "zlib"])
@pytest.mark.parametrize("version", [2, 3])
def test_round_trip_and_header(method, version):
    data = _bundle()
    blob = ccob.compress(data, method=method, version=version)
    info = ccob.read_header(blob)
    assert (info.version, info.method, info.uncompressed_size) == (version, method, len(data))
    assert info.header_size == (24 if version == 2 else 32) and info.total_size == len(blob)
    assert info.truncated_md5 == int.from_bytes(hashlib.md5(data).digest()[:8], "little")
    assert blob[8 if version == 2 else 8:12] == struct.pack("<I", len(blob))
    out, info2 = ccob.decompress(blob)
    assert bytes(out) == data and info2 == info


def test_zlib_bytes_match_compress2():
    # LLVM's zlib path is compress2(level): identical to Python's zlib.compress.
    data = _bundle()
    blob = ccob.compress(data, method="zlib")
    assert blob[24:] == zlib.compress(data, 6)


@pytest.mark.parametrize("method", [0, 1])
def test_read_v1(method):
    data = _bundle()
    out, info = ccob.decompress(_v1(data, method))
    assert bytes(out) == data and info.version == 1 and info.total_size is None and info.header_size == 20


def test_verbose_lines():
    lines: list[str] = []
    blob = ccob.compress(_bundle(), verbose=True, log=lines.append)
    text = "".join(lines).splitlines()
    assert [t.split(":")[0] for t in text] == [
        "Compressed bundle format version", "Total file size (including headers)", "Compression method used",
        "Compression level", "Binary size before compression", "Binary size after compression",
        "Compression rate", "Compression ratio", "Compression speed", "Truncated MD5 hash"]
    assert text[0] == "Compressed bundle format version: 2" and text[2] == "Compression method used: zstd"
    assert text[3] == "Compression level: 3" and text[1] == f"Total file size (including headers): {len(blob):,} bytes"
    lines.clear()
    ccob.decompress(blob, verbose=True, log=lines.append)
    text = "".join(lines).splitlines()
    assert text[1] == f"Total file size (from header): {len(blob):,} bytes"
    assert text[2] == "Decompression method: zstd" and text[-1] == "Hashes match: Yes"
    lines.clear()
    ccob.decompress(_v1(_bundle()), verbose=True, log=lines.append)
    assert not "".join(lines).splitlines()[1].startswith("Total file size")


def test_hash_mismatch_is_an_error():
    blob = bytearray(ccob.compress(_bundle()))
    blob[16] ^= 1
    with pytest.raises(CompressionError, match="MD5 mismatch"):
        ccob.decompress(bytes(blob))


@pytest.mark.parametrize("method", ["zstd", "zlib"])
def test_size_claims_are_checked(method):
    data = _bundle()
    blob = bytearray(ccob.compress(data, method=method))
    big = bytearray(blob)
    struct.pack_into("<I", big, 12, 0xFFFFFFF0)  # claims 4 GiB: rejected without allocating it
    with pytest.raises(CompressionError, match="holds fewer|limit"):
        ccob.decompress(bytes(big), max_uncompressed_size=1 << 40)
    with pytest.raises(CompressionError, match="exceeds the limit"):
        ccob.decompress(bytes(big), max_uncompressed_size=1 << 20)
    small = bytearray(blob)
    struct.pack_into("<I", small, 12, 10)
    with pytest.raises(CompressionError, match="too small"):
        ccob.decompress(bytes(small))


def test_bad_headers():
    blob = ccob.compress(_bundle())
    with pytest.raises(CompressionError, match="too small"):
        ccob.decompress(blob[:20])
    with pytest.raises(CompressionError, match="Unknown compressing method"):
        ccob.decompress(blob[:6] + b"\x07\x00" + blob[8:])
    with pytest.raises(CompressionError, match="version 9"):
        ccob.decompress(blob[:4] + b"\x09\x00" + blob[6:])
    with pytest.raises(CompressionError, match="exceeds the"):
        ccob.decompress(blob[:-5])  # v2 total-size field now larger than the file
    with pytest.raises(CompressionError, match="Could not decompress"):
        ccob.decompress(blob[:24] + b"\x00" * (len(blob) - 24))
    with pytest.raises(UsageError):
        ccob.compress(b"x", version=1)
    assert not ccob.is_compressed(b"CCO") and ccob.is_compressed(b"CCOB")


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=5000), st.sampled_from(["zstd", "zlib"]), st.sampled_from([2, 3]),
       st.integers(1, 9))
def test_round_trip_property(data, method, version, level):
    out, info = ccob.decompress(ccob.compress(data, method=method, version=version, level=level))
    assert bytes(out) == data and info.uncompressed_size == len(data)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_corruption_only_raises_offload_error(data):
    method = data.draw(st.sampled_from(["zstd", "zlib"]))
    version = data.draw(st.sampled_from([1, 2, 3]))
    raw = _bundle()
    blob = bytearray(_v1(raw, 0 if method == "zlib" else 1) if version == 1 else
                     ccob.compress(raw, method=method, version=version))
    for _ in range(data.draw(st.integers(1, 3))):
        blob[data.draw(st.integers(0, len(blob) - 1))] = data.draw(st.integers(0, 255))
    blob = blob[:data.draw(st.integers(0, len(blob)))]
    try:
        out, _ = ccob.decompress(bytes(blob))
    except OffloadError:
        return
    assert bytes(out) == raw  # anything accepted must be the original (MD5 checked)


def test_large_input_uses_threads_and_stays_readable(tmp_path):
    """An input over the threading threshold: zstd workers; LLVM 19 must still read it."""
    exe = need_tool("clang-offload-bundler-19")
    payload = os.urandom(1 << 20) * 12  # 12 MiB, compressible across the repeats
    (tmp_path / "dev").write_bytes(payload)
    out = io.BytesIO()
    write_binary_bundle([BundleEntry("hip-amdgcn-amd-amdhsa--gfx906", payload)], out)
    raw = out.getvalue()
    with open(tmp_path / "c.hipfb", "wb") as f:
        info = ccob.compress_chunks([raw[:1000], raw[1000:]], len(raw), f)
    assert info.compressed_size < len(raw) // 4
    res = run([exe, "-type=bc", "-unbundle", "-targets=hip-amdgcn-amd-amdhsa--gfx906", "-input=c.hipfb",
               "-output=d"], cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "d").read_bytes() == payload


@pytest.mark.parametrize("tool, env_version, expect_version", [
    ("clang-offload-bundler-19", None, 2),
    ("clang-offload-bundler-22", None, 3),
    ("clang-offload-bundler-22", "2", 2),
])
def test_we_read_llvm_compressed(tmp_path, tool, env_version, expect_version):
    exe = need_tool(tool)
    (tmp_path / "a").write_bytes(b"Content of device file 1\n")
    (tmp_path / "b").write_bytes(b"Content of device file 2\n" * 100)
    env = dict(os.environ)
    env.pop("COMPRESSED_BUNDLE_FORMAT_VERSION", None)
    if env_version:
        env["COMPRESSED_BUNDLE_FORMAT_VERSION"] = env_version
    res = run([exe, "-type=bc", "-compress", "-targets=hip-amdgcn-amd-amdhsa--gfx900,hip-amdgcn-amd-amdhsa--gfx906",
               "-input=a", "-input=b", "-output=c"], cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    data, info = ccob.decompress((tmp_path / "c").read_bytes())
    assert info.version == expect_version and info.method == "zstd"
    assert [bytes(e.data) for e in read_binary_bundle(data)] == [(tmp_path / "a").read_bytes(),
                                                                 (tmp_path / "b").read_bytes()]


@pytest.mark.parametrize("tool, version, method", [
    ("clang-offload-bundler-19", 2, "zstd"), ("clang-offload-bundler-19", 2, "zlib"),
    ("clang-offload-bundler-22", 2, "zstd"), ("clang-offload-bundler-22", 3, "zstd"),
    ("clang-offload-bundler-22", 3, "zlib"),
])
def test_llvm_reads_ours(tmp_path, tool, version, method):
    exe = need_tool(tool)
    payloads = (b"Content of device file 1\n", b"Content of device file 2\n" * 100)
    (tmp_path / "c").write_bytes(ccob.compress(_bundle(payloads), method=method, version=version))
    res = run([exe, "-type=bc", "-unbundle", "-targets=hip-amdgcn-amd-amdhsa--gfx900,hip-amdgcn-amd-amdhsa--gfx906",
               "-input=c", "-output=x", "-output=y", "-verbose"], cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert b"Hashes match: Yes" in res.stderr
    assert (tmp_path / "x").read_bytes() == payloads[0] and (tmp_path / "y").read_bytes() == payloads[1]


def test_llvm19_cannot_read_v3(tmp_path):
    """Why v2 stays the default: LLVM 19 misreads v3 (documented LLVM behaviour, not ours)."""
    exe = need_tool("clang-offload-bundler-19")
    (tmp_path / "c").write_bytes(ccob.compress(_bundle(), version=3))
    res = run([exe, "-type=bc", "-unbundle", "-targets=hip-amdgcn-amd-amdhsa--gfx900", "-input=c", "-output=x"],
              cwd=tmp_path)
    assert res.returncode != 0


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=300_000), st.integers(1, 19), st.booleans())
def test_zstd_output_bound_covers_real_streams(data, level, checksum):
    """The block-header bound used to reject inflated size claims is never below the real size."""
    import zstandard

    stream = zstandard.ZstdCompressor(level=level, write_checksum=checksum).compress(data)
    assert ccob.zstd_output_bound(memoryview(stream)) >= len(data)


def test_zstd_output_bound_rejects_garbage():
    with pytest.raises(CompressionError, match="Unknown frame descriptor"):
        ccob.zstd_output_bound(memoryview(b"\x00" * 16))
    import zstandard

    stream = zstandard.ZstdCompressor().compress(b"x" * 100_000)
    with pytest.raises(CompressionError, match="truncated"):
        ccob.zstd_output_bound(memoryview(stream[:7]))


# --- decompression bombs: a small file that expands to gigabytes -------------------------------------

_BOMB_ID = "hip-amdgcn-amd-amdhsa--gfx900"


def _bomb(size: int, version: int = 2, with_hash: bool = False) -> bytes:
    """A CCOB of a binary bundle whose one payload is `size` - header zero bytes, written by hand as a
    zstd frame of RLE blocks (4 bytes per 128 KiB): ~128 KiB of file per 4 GiB of output."""
    header = io.BytesIO()
    write_binary_bundle([BundleEntry(_BOMB_ID, b"")], header)
    head = bytearray(header.getvalue())
    struct.pack_into("<Q", head, 32 + 8, size - len(head))  # the entry's Size: the rest of the bundle
    blocks = [struct.pack("<I", (len(head) << 3) | 0)[:3] + bytes(head)]  # one raw block
    left = size - len(head)
    while left:
        n = min(left, 128 << 10)
        left -= n
        blocks.append(struct.pack("<I", (n << 3) | (1 << 1) | (0 if left else 1))[:3] + b"\0")
    frame = struct.pack("<IBB", 0xFD2FB528, 0xC0, 17 << 3) + struct.pack("<Q", size) + b"".join(blocks)
    digest = 0
    if with_hash:
        md5 = hashlib.md5(head)
        zeros = bytes(8 << 20)
        left = size - len(head)
        while left:
            md5.update(zeros[:min(left, len(zeros))])
            left -= min(left, len(zeros))
        digest = int.from_bytes(md5.digest()[:8], "little")
    if version == 2:
        return struct.pack("<4sHHIIQ", b"CCOB", 2, 1, 24 + len(frame), size, digest) + frame
    return struct.pack("<4sHHQQQ", b"CCOB", 3, 1, 32 + len(frame), size, digest) + frame


def _cli(tmp_path, *args, env_budget=None):
    """Run offload-bundler in a child and return (status, stdout, stderr, peak RSS MiB)."""
    import subprocess
    import sys

    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("OFFLOAD_TOOL_BUDGET", None)
    if env_budget:
        env["OFFLOAD_TOOL_BUDGET"] = env_budget
    # A fresh interpreter measures only itself: ru_maxrss of a child started through a small helper.
    code = ("import os, subprocess, sys; p = subprocess.Popen(sys.argv[1:]); _, s, u = os.wait4(p.pid, 0); "
            "print(u.ru_maxrss // 1024, os.waitstatus_to_exitcode(s), file=sys.stderr)")
    res = subprocess.run([sys.executable, "-c", code, sys.executable, "-m", "offload_tool.cli.bundler", *args],
                         cwd=tmp_path, env=env, capture_output=True)
    lines = res.stderr.decode(errors="replace").splitlines()
    rss, status = (int(x) for x in lines[-1].split())
    return status, res.stdout.decode(errors="replace"), "\n".join(lines[:-1]), rss


def test_list_of_a_bomb_decompresses_only_the_header(tmp_path):
    """-list needs the inner bundle's header only: a 128 KiB file claiming 4 GiB lists in bounded memory."""
    blob = _bomb(0xFFFF0000)
    assert len(blob) < 160 << 10
    (tmp_path / "bomb").write_bytes(blob)
    status, out, err, rss = _cli(tmp_path, "-type=bc", "-list", "-input=bomb")
    assert status == 0, err
    assert out == _BOMB_ID + "\n"
    assert rss < 256, f"peak RSS {rss} MiB"


def test_unbundling_a_bomb_over_the_budget_fails_before_decompressing(tmp_path):
    (tmp_path / "v3").write_bytes(_bomb(8 << 30, version=3))  # over the default 4 GiB budget
    status, _, err, rss = _cli(tmp_path, "-type=bc", "-unbundle", f"-targets={_BOMB_ID}", "-input=v3", "-output=x")
    assert status == 1 and "over the decompressed budget of 4 GiB" in err and "'v3'" in err, err
    assert not (tmp_path / "x").exists() and rss < 256
    (tmp_path / "v2").write_bytes(_bomb(2 << 30))
    status, _, err, _ = _cli(tmp_path, "-type=bc", "-unbundle", f"-targets={_BOMB_ID}", "-input=v2", "-output=x",
                             env_budget="decompressed=1G")
    assert status == 1 and "over the decompressed budget of 1 GiB" in err, err
    assert sorted(os.listdir(tmp_path)) == ["v2", "v3"]  # no output, no temporary file left


def test_unbundling_streams_within_the_budget(tmp_path):
    """Within the budget, a large payload streams to its output: memory stays far below its size."""
    size = 768 << 20
    (tmp_path / "big").write_bytes(_bomb(size, with_hash=True))
    status, _, err, rss = _cli(tmp_path, "-type=bc", "-unbundle", f"-targets={_BOMB_ID}", "-input=big", "-output=x")
    assert status == 0, err
    assert (tmp_path / "x").stat().st_size == size - 32 - 24 - len(_BOMB_ID)
    assert rss < 300, f"peak RSS {rss} MiB"


def test_decompression_is_charged_to_the_budget():
    from offload_tool import budget
    from offload_tool.errors import BudgetError

    blob = ccob.compress(_bundle())
    with budget.run(budget.Limits(decompressed=100)):
        with pytest.raises(BudgetError, match="compressed bundle: over the decompressed budget of 100 bytes"):
            ccob.decompress(blob)
    with budget.run(budget.Limits(decompressed=10 << 10)):
        ccob.decompress(blob)
        assert budget.remaining("decompressed") == (10 << 10) - len(_bundle())


@pytest.mark.parametrize("system", [True, False])
def test_compress_with_and_without_the_system_libzstd(monkeypatch, system):
    """zstd goes through the system libzstd (LLVM's library) when there is one, else `zstandard`;
    both write one frame with the content size that either reader decompresses."""
    from offload_tool.formats import libzstd

    if system and libzstd._library() is None:
        pytest.skip("no system libzstd (install libzstd1)")
    if not system:
        monkeypatch.setattr(libzstd, "open_compressor", lambda *a: None)
    data = _bundle((os.urandom(3000) * 50, b"x" * (3 << 20)))
    out = io.BytesIO()
    info = ccob.compress_chunks([data[:5000], memoryview(data)[5000:]], len(data), out, method="zstd")
    blob = out.getvalue()
    import zstandard

    assert zstandard.get_frame_parameters(blob[24:]).content_size == len(data)
    assert bytes(ccob.decompress(blob)[0]) == data and info.compressed_size == len(blob) - 24


def _zstd_frame(blob: bytes) -> bytes:
    return blob[24:]  # after a v2 header


@pytest.mark.parametrize("path", ["in place", "in place refused", "streamed", "no mapping"])
def test_system_libzstd_paths_give_readable_frames(monkeypatch, path):
    """The system library compresses a bundle in place (one buffer read where it lies, as a one-shot
    ZSTD_compress2); where the library refuses that mode, the bundle is over the in-place limit or
    the system will not map a buffer that large, it streams. Every path writes one frame with the
    content size and the MD5 of the input."""
    from offload_tool.formats import libzstd

    if libzstd._library() is None:
        pytest.skip("no system libzstd (install libzstd1)")
    calls = []
    for name in ("write", "compress_whole"):
        real = getattr(libzstd.Compressor, name)
        monkeypatch.setattr(libzstd.Compressor, name,
                            lambda self, data, _real=real, _name=name: calls.append(_name) or _real(self, data))
    if path == "in place refused":
        monkeypatch.setattr(libzstd.Compressor, "compress_whole", lambda self, buffer: calls.append("refused") or False)
    if path == "streamed":
        monkeypatch.setattr(ccob, "_IN_PLACE_LIMIT", 1 << 20)
    if path == "no mapping":
        import errno
        import mmap

        def refuse(*args, **kwargs):
            raise OSError(errno.ENOMEM, "Cannot allocate memory")

        monkeypatch.setattr(mmap, "mmap", refuse)
    data = _bundle((os.urandom(3000) * 500, b"y" * (2 << 20)))
    out = io.BytesIO()
    info = ccob.compress_chunks([data[:7], memoryview(data)[7:]], len(data), out, method="zstd")
    monkeypatch.undo()  # reading it back maps memory again
    blob = out.getvalue()
    import zstandard

    assert zstandard.get_frame_parameters(_zstd_frame(blob)).content_size == len(data)
    assert info.truncated_md5 == int.from_bytes(hashlib.md5(data).digest()[:8], "little")
    assert bytes(ccob.decompress(blob)[0]) == data
    assert set(calls) == {"in place": {"compress_whole"}, "in place refused": {"refused", "write"},
                          "streamed": {"write"}, "no mapping": {"write"}}[path]


def test_in_place_frame_is_a_one_shot_frame():
    """The frame is byte for byte what a one-shot ZSTD_compress2 of the whole input gives with
    LLVM's level, long-distance matching and content size, and the tool's LDM bucket size."""
    import ctypes

    from offload_tool.formats import libzstd

    lib = libzstd._library()
    if lib is None:
        pytest.skip("no system libzstd (install libzstd1)")
    data = _bundle((os.urandom(5000) * 300, bytes(range(256)) * 9000))
    out = io.BytesIO()
    ccob.compress_chunks([data], len(data), out, method="zstd")
    cctx = lib.ZSTD_createCCtx()
    try:
        for param, value in ((100, ccob.DEFAULT_LEVELS["zstd"]), (160, 1), (163, ccob._LDM_BUCKET_SIZE_LOG), (200, 1)):
            assert not lib.ZSTD_isError(lib.ZSTD_CCtx_setParameter(cctx, param, value))
        dst = ctypes.create_string_buffer(len(data) + (1 << 16))
        compress2 = lib.ZSTD_compress2
        compress2.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
        compress2.restype = ctypes.c_size_t
        n = compress2(cctx, dst, len(dst), data, len(data))
        assert not lib.ZSTD_isError(n)
    finally:
        lib.ZSTD_freeCCtx(cctx)
    assert _zstd_frame(out.getvalue()) == dst.raw[:n]


@pytest.mark.parametrize("method", ["zstd", "zlib"])
def test_file_slices_are_read_from_their_file(tmp_path, method):
    """A chunk listed in `file_slices` is read from (fd, offset), not through its view; a file that
    ends early is an input that changed, reported as such."""
    from offload_tool.errors import InputChangedError

    payload = os.urandom(4096) * 64
    path = tmp_path / "dev"
    path.write_bytes(b"HEAD" + payload)
    stand_in = bytes(len(payload))  # what the view would give: must not be what is compressed
    fd = os.open(path, os.O_RDONLY)
    try:
        out = io.BytesIO()
        ccob.compress_chunks([b"pre", stand_in], 3 + len(payload), out, method=method,
                             file_slices={id(stand_in): (fd, 4)})
        assert bytes(ccob.decompress(out.getvalue())[0]) == b"pre" + payload
        os.truncate(path, 4 + len(payload) // 2)
        with pytest.raises(InputChangedError, match="input ended .* bytes early"):
            ccob.compress_chunks([b"pre", stand_in], 3 + len(payload), io.BytesIO(), method=method,
                                 file_slices={id(stand_in): (fd, 4)})
    finally:
        os.close(fd)
