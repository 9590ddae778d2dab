"""How bundling and unbundling copy payloads file to file (`ops.bundler_handlers`): spliced through
a pipe, else `copy_file_range`, else read and written; several large outputs side by side in
threads.  Every way gives the same bytes, an output that refuses splicing gets them written
plainly, and a failure in one copy leaves no output behind."""

from __future__ import annotations

import errno
import os
import random
import threading

import pytest

from offload_tool.errors import BundleFormatError, OffloadError
from offload_tool.formats.bundle import BundleEntry, write_binary_bundle
from offload_tool.ops import bundler_api, bundler_handlers

TARGETS = ["host-x86_64-unknown-linux-gnu", "hip-amdgcn-amd-amdhsa--gfx906", "hip-amdgcn-amd-amdhsa--gfx90a"]


@pytest.fixture
def payloads() -> list[bytes]:
    # Together above _PARALLEL_BYTES, so the outputs are copied in threads where two CPUs are usable;
    # sizes that are no multiple of the pipe's 1 MiB.
    rng = random.Random(5)
    return [rng.randbytes(n) for n in ((7 << 20) + 13, (6 << 20) + 4097, (5 << 20) + 1)]


def _bundle(tmp_path, payloads) -> str:
    """The bundle `bundler_api.bundle` makes of `payloads` (copied from input files), checked against
    the one written from memory."""
    inputs = []
    for n, payload in enumerate(payloads):
        inputs.append(str(tmp_path / f"i{n}"))
        with open(inputs[-1], "wb") as f:
            f.write(payload)
    path = str(tmp_path / "b.bc")
    bundler_api.bundle("bc", TARGETS, inputs, path)
    with open(tmp_path / "expected.bc", "wb") as f:
        write_binary_bundle([BundleEntry(t + "-" * (t.startswith("host")), p) for t, p in zip(TARGETS, payloads)], f)
    assert _read(path) == _read(str(tmp_path / "expected.bc"))
    os.unlink(tmp_path / "expected.bc")
    return path


def _unbundle(tmp_path, bundle: str) -> list[str]:
    outs = [str(tmp_path / f"o{n}") for n in range(len(TARGETS))]
    bundler_api.unbundle("bc", TARGETS, bundle, outs)
    return outs


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _no_splice(*args, **kwargs):
    raise OSError(errno.EINVAL, "Invalid argument")


@pytest.mark.parametrize("way", ["splice", "copy_file_range", "pread", "sequential"])
def test_every_way_copies_the_same_bytes(tmp_path, monkeypatch, payloads, way):
    if way in ("copy_file_range", "pread"):
        monkeypatch.setattr(os, "splice", _no_splice)
    if way == "pread":
        monkeypatch.setattr(os, "copy_file_range", _no_splice)
    if way == "sequential":
        monkeypatch.setattr(bundler_handlers, "_cpus_beyond_one", lambda: False)
    outs = _unbundle(tmp_path, _bundle(tmp_path, payloads))
    assert [_read(o) for o in outs] == payloads


def test_an_output_refusing_splice_midway_gets_the_rest_written(tmp_path, monkeypatch, payloads):
    """The pipe already holds a piece when the output refuses it: that piece is written plainly and
    the copy goes on another way, nothing lost or doubled."""
    real = os.splice
    calls = {"out": 0}
    lock = threading.Lock()

    def splice(src, dst, count, offset_src=None, offset_dst=None, flags=0):
        if offset_src is None:  # pipe -> output
            with lock:
                calls["out"] += 1
                refuse = calls["out"] % 3 == 2
            if refuse:
                raise OSError(errno.EINVAL, "Invalid argument")
        return real(src, dst, count, offset_src, offset_dst, flags)

    monkeypatch.setattr(os, "splice", splice)
    outs = _unbundle(tmp_path, _bundle(tmp_path, payloads))
    assert [_read(o) for o in outs] == payloads


def _unbundle_into_fifo(tmp_path, payloads, second: str) -> bytes:
    """Unbundle with the first output a FIFO (read by a thread) and the second `second` (a path
    under tmp_path); returns what the FIFO carried."""
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(_read(fifo)))
    reader.start()
    bundle = _bundle(tmp_path, payloads)
    bundler_api.unbundle("bc", TARGETS, bundle, [fifo, str(tmp_path / second), str(tmp_path / "o2")])
    reader.join(30)
    assert _read(str(tmp_path / "o2")) == payloads[2]
    return got[0]


def test_a_fifo_output_is_spliced_in_order(tmp_path, payloads):
    assert _unbundle_into_fifo(tmp_path, payloads, "o1") == payloads[0]
    assert _read(str(tmp_path / "o1")) == payloads[1]


def test_two_outputs_into_one_fifo_come_one_after_the_other(tmp_path, payloads):
    """Only outputs that are regular files of their own are copied side by side."""
    os.symlink(tmp_path / "fifo", tmp_path / "link")  # another path to the same FIFO
    assert _unbundle_into_fifo(tmp_path, payloads, "link") == payloads[0] + payloads[1]


def test_a_failed_copy_leaves_no_output(tmp_path, monkeypatch, payloads):
    bundle = _bundle(tmp_path, payloads)
    real = bundler_handlers._copy_range

    def copy_range(src_fd, out, offset, size, stop=None):
        if size == len(payloads[1]):
            raise OffloadError("'o1': No space left on device")
        real(src_fd, out, offset, size, stop)

    monkeypatch.setattr(bundler_handlers, "_copy_range", copy_range)
    with pytest.raises(OffloadError, match="No space left"):
        _unbundle(tmp_path, bundle)
    assert sorted(os.listdir(tmp_path)) == ["b.bc", "i0", "i1", "i2"]


def test_an_input_ending_early_is_an_error(tmp_path, payloads):
    bundle = _bundle(tmp_path, payloads)
    source = os.open(bundle, os.O_RDONLY)
    try:
        with open(tmp_path / "out", "wb") as out:
            with pytest.raises(BundleFormatError, match="bytes early"):
                bundler_handlers._copy_range(source, out, os.path.getsize(bundle) - 10, 20)
            out.flush()
        assert _read(str(tmp_path / "out")) == _read(bundle)[-10:]
    finally:
        os.close(source)
