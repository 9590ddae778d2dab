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


def test_a_file_shorter_than_its_size_said_changed_while_read(tmp_path):
    """A regular file read whole or as a slice in place: ending before the size taken from it is an
    input that changed under the reader, named with how far it got."""
    from offload_tool import inputs
    from offload_tool.errors import InputChangedError

    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert bytes(inputs._read_regular(fd, 10, "f")) == b"0123456789"
        with pytest.raises(InputChangedError, match="'f': the file shrank from 20 to 10 bytes while it was read"):
            inputs._read_regular(fd, 20, "f")
        view = memoryview(bytearray(6))
        inputs.read_slice_into(fd, 2, view)
        assert bytes(view) == b"234567"
        with pytest.raises(InputChangedError, match="input ended 3 bytes early at offset 10"):
            inputs.read_slice_into(fd, 7, memoryview(bytearray(6)))
    finally:
        os.close(fd)


def _vm_flags(path) -> list[str] | None:
    """The VmFlags of this process's mapping of `path` (/proc/self/smaps), None when unmapped."""
    with open("/proc/self/smaps") as f:
        lines = f.read().splitlines()
    mapped = False
    for line in lines:
        if line.endswith(" " + str(path)):
            mapped = True
        elif mapped and line.startswith("VmFlags:"):
            return line.split()[1:]
    return None


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs Linux's /proc/self/smaps")
def test_sparse_input_is_mapped_without_readahead(tmp_path):
    """`sparse=True` (inspect's listing, verify) advises the map random access: the kernel reads
    the pages touched, not the megabytes around them."""
    path = tmp_path / "lib.so"
    path.write_bytes(os.urandom(1 << 20))
    from offload_tool.inputs import open_input_file

    with open_input_file(path, sparse=True) as src:
        assert src.view[:4] and "rr" in (_vm_flags(path) or [])  # VM_RAND_READ
    with open_input_file(path) as src:
        flags = _vm_flags(path)
        assert src.view[:4] and flags is not None and "rr" not in flags


def test_listing_and_verify_open_inputs_sparse_hashing_does_not(tmp_path, monkeypatch):
    from offload_tool import inputs
    from offload_tool.formats.bundle import BundleEntry, write_binary_bundle
    from offload_tool.ops.inspector import inspect_file
    from offload_tool.ops.verify import verify_file

    path = tmp_path / "b.o"
    with open(path, "wb") as f:
        write_binary_bundle([BundleEntry("host-x86_64-unknown-linux-gnu", b"host"),
                             BundleEntry("hip-amdgcn-amd-amdhsa--gfx90a", b"device")], f)
    advised = []
    monkeypatch.setattr(inputs, "_advise_random", lambda mapped: advised.append(len(mapped)))
    inspect_file(path, keep_data=False, hashes=False)
    verify_file(path)
    assert len(advised) == 2
    inspect_file(path, keep_data=False, hashes=True)
    inspect_file(path)
    assert len(advised) == 2
