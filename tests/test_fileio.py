"""fileio: atomic outputs take their mode from the umask without ever changing it (the SCons tool
runs library code in its worker threads, where a briefly-zero umask would leak into other files)."""

from __future__ import annotations

import os
import stat

import pytest

from offload_tool import fileio


def test_atomic_output_mode_follows_umask_without_setting_it(tmp_path, monkeypatch):
    if not os.path.exists("/proc/self/status"):
        pytest.skip("no /proc/self/status on this system")
    old = os.umask(0o027)
    try:
        def no_umask(mask):
            raise AssertionError("os.umask called")

        monkeypatch.setattr(os, "umask", no_umask)
        with fileio.atomic_output(tmp_path / "out") as f:
            f.write(b"x")
    finally:
        monkeypatch.undo()
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "out").st_mode) == 0o640
    assert (tmp_path / "out").read_bytes() == b"x"
    assert os.listdir(tmp_path) == ["out"]


def test_failed_output_leaves_nothing(tmp_path):
    (tmp_path / "out").write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with fileio.atomic_output(tmp_path / "out") as f:
            f.write(b"partial")
            raise RuntimeError("boom")
    assert (tmp_path / "out").read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["out"]
