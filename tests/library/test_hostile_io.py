"""Ordinary Unix files and hostile names at the edges of every CLI: special files as outputs
(`/dev/null`, `/dev/full`, FIFOs, standard output, a read-only file system) and as inputs (a FIFO
read once, `/dev/zero` bounded, a file truncated while mapped), all-or-nothing outputs (an error,
SIGTERM or SIGHUP leaves nothing behind), numeric options checked as LLVM checks them, messages and
listings kept to one line with control characters escaped, and files with no offload content."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time

import pytest

from conftest import REPO, find_tool, run, run_cli
from offload_tool import fileio
from offload_tool.errors import OffloadError
from offload_tool.formats.archive import read_archive, write_archive
from offload_tool.formats.bundle import BundleEntry, write_binary_bundle
from offload_tool.printable import printable

HOST = "host-x86_64-unknown-linux-gnu"
HIP = "hip-amdgcn-amd-amdhsa--gfx90a"
TRIPLE = "x86_64-unknown-linux-gnu"


def _env(**extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    for k in ("OFFLOAD_BUNDLER_COMPRESS", "OFFLOAD_BUNDLER_COMPRESSION_LEVEL", "OFFLOAD_TOOL_STREAM_LIMIT"):
        env.pop(k, None)
    env.update(extra)
    return env


def cli(module, *args, cwd, **kw):
    kw.setdefault("env", _env())
    return run_cli(module, *args, cwd=cwd, timeout=60, **kw)


def one_error_line(res, prog: str, option: bool = False) -> str:
    """The one error line; `option`: one of LLVM's option parser's, printed without `error:`."""
    err = res.stderr.decode()
    assert res.returncode == 1, err
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: " if option else f"{prog}: error: "), err
    return lines[0]


@pytest.fixture
def work(tmp_path):
    (tmp_path / "h.i").write_bytes(b"host code\n")
    (tmp_path / "d.i").write_bytes(b"device code\n")
    res = cli("bundler", "-type=i", f"-targets={HOST},{HIP}", "-input=h.i", "-input=d.i", "-output=b.i", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    return tmp_path


def _leftovers(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith((".tmp", ".old")))


# --- special files as outputs --------------------------------------------------------------------


def test_dev_null_output_stays_a_device(work):
    before = os.stat("/dev/null")
    res = cli("bundler", "-type=i", f"-targets={HOST},{HIP}", "-input=h.i", "-input=d.i", "-output=/dev/null",
              cwd=work)
    assert res.returncode == 0, res.stderr
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    assert not [n for n in os.listdir("/dev") if n.startswith(".null.")]


@pytest.mark.parametrize("args", [
    ("bundler", "-type=i", f"-targets={HOST},{HIP}", "-input=h.i", "-input=d.i", "-output=/dev/full"),
    ("bundler", "-unbundle", "-type=i", f"-targets={HOST},{HIP}", "-input=b.i", "-output=/dev/full", "-output=x"),
    ("packager", "-o", "/dev/full", f"--image=file=d.i,triple={TRIPLE},arch=a"),
])
def test_dev_full_output_is_one_error_naming_it(work, args):
    res = cli(*args, cwd=work)
    line = one_error_line(res, "offload-" + args[0])
    assert "'/dev/full': No space left on device" in line
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    assert not (work / "x").exists() and not _leftovers(work)


def test_stdout_full_or_closed_is_one_error_line(work):
    base = [sys.executable, "-m", "offload_tool.cli.packager"]
    for args in (("--help",), ("-o", "-", f"--image=file=d.i,triple={TRIPLE},arch=a")):
        with open("/dev/full", "wb") as full:
            res = subprocess.run(base + list(args), cwd=work, env=_env(), stdout=full, stderr=subprocess.PIPE,
                                 timeout=60)
        one_error_line(res, "offload-packager")
        res = subprocess.run(base + list(args), cwd=work, env=_env(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, preexec_fn=lambda: os.close(1), timeout=60)
        assert "closed" in one_error_line(res, "offload-packager")


def test_fifo_output_is_written_into_not_replaced(work):
    fifo = work / "out.fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    res = cli("bundler", "-type=i", f"-targets={HOST},{HIP}", "-input=h.i", "-input=d.i", f"-output={fifo}", cwd=work)
    reader.join(30)
    assert res.returncode == 0, res.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert got == [(work / "b.i").read_bytes()]


def test_stdout_dash_output(work):
    res = cli("packager", "-o", "-", f"--image=file=d.i,triple={TRIPLE},arch=a", cwd=work)
    assert res.returncode == 0, res.stderr
    cli("packager", "-o", "p.bin", f"--image=file=d.i,triple={TRIPLE},arch=a", cwd=work)
    assert res.stdout == (work / "p.bin").read_bytes()


def test_read_only_file_system_device_output(work):
    """An existing device in a read-only directory can be written (no temp file is needed)."""
    unshare = find_tool("unshare")
    if unshare is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare (util-linux) for a private read-only bind mount")
    ro = work / "ro"
    ro.mkdir()
    try:
        os.mknod(ro / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except OSError as exc:
        pytest.skip(f"cannot create a device node here: {exc}")
    script = (f"mount --bind {ro} {ro} && mount -o remount,bind,ro {ro} && "
              f"{sys.executable} -m offload_tool.cli.bundler -type=i -targets={HOST},{HIP} -input=h.i -input=d.i "
              f"-output={ro}/null && "
              f"! {sys.executable} -m offload_tool.cli.bundler -type=i -targets={HOST},{HIP} -input=h.i "
              f"-input=d.i -output={ro}/regular")
    res = subprocess.run([unshare, "-m", "sh", "-c", script], cwd=work, env=_env(), capture_output=True, timeout=60)
    if res.returncode != 0 and b"mount" in res.stderr and b"offload-bundler" not in res.stderr:
        pytest.skip(f"private mounts not permitted here: {res.stderr.decode().strip()}")
    assert res.returncode == 0, res.stderr
    assert b"Read-only file system" in res.stderr  # the regular output could not be made
    assert stat.S_ISCHR(os.stat(ro / "null").st_mode)


# --- special files as inputs ---------------------------------------------------------------------


def _feed_fifo(path, data: bytes) -> threading.Thread:
    def feed():
        with open(path, "wb") as f:
            f.write(data)

    t = threading.Thread(target=feed, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("args", [
    ("bundler", "-list", "-type=i", "-input=in.fifo"),
    ("bundler", "-unbundle", "-type=i", f"-targets={HOST},{HIP}", "-input=in.fifo", "-output=o1", "-output=o2"),
])
def test_fifo_input_is_read_once(work, args):
    os.mkfifo(work / "in.fifo")
    feeder = _feed_fifo(work / "in.fifo", (work / "b.i").read_bytes())
    res = cli(*args, cwd=work)
    feeder.join(5)
    assert res.returncode == 0, res.stderr
    if "-list" in args:
        assert res.stdout == cli("bundler", "-list", "-type=i", "-input=b.i", cwd=work).stdout
    else:
        assert (work / "o2").read_bytes() == b"device code\n"


def test_fifo_inputs_when_bundling_and_packaging(work):
    os.mkfifo(work / "d.fifo")
    feeder = _feed_fifo(work / "d.fifo", b"device code\n")
    res = cli("bundler", "-type=i", f"-targets={HOST},{HIP}", "-input=h.i", "-input=d.fifo", "-output=b2.i", cwd=work)
    feeder.join(5)
    assert res.returncode == 0, res.stderr
    assert (work / "b2.i").read_bytes() == (work / "b.i").read_bytes()
    feeder = _feed_fifo(work / "d.fifo", b"device code\n")
    res = cli("packager", "-o", "p1", f"--image=file=d.fifo,triple={TRIPLE},arch=a", cwd=work)
    feeder.join(5)
    assert res.returncode == 0, res.stderr
    cli("packager", "-o", "p2", f"--image=file=d.i,triple={TRIPLE},arch=a", cwd=work)
    assert (work / "p1").read_bytes() == (work / "p2").read_bytes()


def test_endless_device_input_is_bounded(work):
    res = cli("bundler", "-list", "-type=i", "-input=/dev/zero", cwd=work, env=_env(OFFLOAD_TOOL_STREAM_LIMIT="4M"))
    line = one_error_line(res, "offload-bundler")
    assert "'/dev/zero': more than 4 MiB" in line and "OFFLOAD_TOOL_STREAM_LIMIT" in line


_TRUNCATE_WHILE_MAPPED = r"""
import os, subprocess, sys, time
from offload_tool.inputs import InputChangedError, open_input_file, _LEASED
path = sys.argv[1]
try:
    with open_input_file(path) as src:
        if src.fd not in _LEASED:
            print("no-lease"); sys.exit(0)
        truncator = subprocess.Popen([sys.executable, "-c", f"import os; os.truncate({path!r}, 0)"])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            total = sum(src.view[i] for i in range(0, len(src.view), 4096))  # touch every page
            time.sleep(0.01)
        print("not-interrupted")
except InputChangedError as exc:
    truncator.wait(20)
    print("changed:", exc, "size now", os.path.getsize(path))
"""


def test_truncation_of_a_mapped_input_is_an_error_not_sigbus(tmp_path):
    path = tmp_path / "big.bin"
    path.write_bytes(b"\x01" * (8 << 20))
    res = subprocess.run([sys.executable, "-c", _TRUNCATE_WHILE_MAPPED, str(path)], env=_env(),
                         capture_output=True, timeout=60)
    out = res.stdout.decode()
    assert res.returncode == 0, (res.returncode, res.stderr.decode())   # not -SIGBUS
    if out.startswith("no-lease"):
        pytest.skip("this file system or user cannot take read leases (the input is read, not mapped)")
    assert out.startswith("changed: '") and str(path) in out and out.rstrip().endswith("size now 0"), out


def test_input_outside_the_main_thread_is_read_not_mapped(tmp_path):
    """No lease can be handled outside the main thread: the bytes are copied, so a truncation later
    changes nothing that was read."""
    path = tmp_path / "x.bin"
    path.write_bytes(b"\x02" * 100000)
    seen = []

    def worker():
        with fileio.open_input_file(path) as src:
            os.truncate(path, 0)
            seen.append(bytes(src.view[-10:]))

    t = threading.Thread(target=worker)
    t.start()
    t.join(10)
    assert seen == [b"\x02" * 10]


# --- all or nothing ------------------------------------------------------------------------------


@pytest.mark.parametrize("order", ["directory-second", "directory-first"])
def test_unbundle_with_one_bad_output_writes_none(work, order):
    (work / "dir").mkdir()
    (work / "o1").write_bytes(b"previous")
    outputs = ["-output=o1", "-output=dir"] if order == "directory-second" else ["-output=dir", "-output=o1"]
    targets = f"-targets={HOST},{HIP}" if order == "directory-second" else f"-targets={HIP},{HOST}"
    res = cli("bundler", "-unbundle", "-type=i", targets, "-input=b.i", *outputs, cwd=work)
    assert "'dir': Is a directory" in one_error_line(res, "offload-bundler")
    assert (work / "o1").read_bytes() == b"previous" and not _leftovers(work)


def test_archive_unbundle_with_one_bad_output_writes_none(work):
    bc = work / "m.o"
    res = cli("bundler", "-type=bc", f"-targets={HOST},{HIP},hip-amdgcn-amd-amdhsa--gfx908", "-input=h.i",
              "-input=d.i", "-input=d.i", f"-output={bc}", cwd=work)
    assert res.returncode == 0, res.stderr
    with open(work / "lib.a", "wb") as f:
        write_archive([("m.o", bc.read_bytes())], f)
    (work / "dir").mkdir()
    res = cli("bundler", "-unbundle", "-type=a", f"-targets={HIP},hip-amdgcn-amd-amdhsa--gfx908", "-input=lib.a",
              "-output=a1.a", "-output=dir", cwd=work)
    one_error_line(res, "offload-bundler")
    assert not (work / "a1.a").exists() and not _leftovers(work)


def test_packager_extraction_with_one_bad_output_writes_none(work):
    res = cli("packager", "-o", "p.bin", f"--image=file=d.i,triple={TRIPLE},arch=a",
              f"--image=file=h.i,triple={TRIPLE},arch=b", cwd=work)
    assert res.returncode == 0, res.stderr
    (work / "dir").mkdir()
    res = cli("packager", "p.bin", "--image=file=x1,arch=a", "--image=file=dir,arch=b", cwd=work)
    one_error_line(res, "offload-packager")
    assert not (work / "x1").exists() and not _leftovers(work)


def test_transaction_rolls_back_renames_when_a_later_one_fails(tmp_path, monkeypatch):
    (tmp_path / "a").write_bytes(b"old a")
    real_replace = os.replace
    calls = []

    def failing_second(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_second)
    with pytest.raises(OffloadError, match="'.*b': No space left on device"):
        with fileio.output_transaction() as txn:
            txn.open(tmp_path / "a").write(b"new a")
            txn.open(tmp_path / "b").write(b"new b")
    monkeypatch.undo()
    assert (tmp_path / "a").read_bytes() == b"old a"
    assert sorted(os.listdir(tmp_path)) == ["a"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_signal_during_a_run_leaves_no_temp_file(work, signum):
    """The first output's temp file exists while the second output (a FIFO nobody reads) blocks:
    the signal ends the run, and nothing is left."""
    os.mkfifo(work / "blocked.fifo")
    # The run gets the signal's default disposition, as from a terminal: a test process started by
    # `nohup` or in a shell's background ignores SIGHUP or SIGINT, and its children would inherit
    # that (an ignored signal ends nothing, as it should).
    proc = subprocess.Popen([sys.executable, "-m", "offload_tool.cli.bundler", "-unbundle", "-type=i",
                             f"-targets={HOST},{HIP}", "-input=b.i", "-output=o1", "-output=blocked.fifo"],
                            cwd=work, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signum, signal.SIG_DFL))
    deadline = time.monotonic() + 120  # generous: a loaded CI machine starts Python slowly
    while not _leftovers(work) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _leftovers(work), "the run never created its temporary file"
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    line = err.decode().strip()
    assert line in ("offload-bundler: error: interrupted",
                    f"offload-bundler: error: terminated by {signal.Signals(signum).name}"), line
    assert not _leftovers(work) and not (work / "o1").exists()


# --- options and messages ------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["4294967296", "-1", " 5", "08", "0x", "1e3"])
def test_bundle_align_outside_uint_is_refused(work, value):
    res = cli("bundler", "-type=i", f"-targets={HOST},{HIP}", "-input=h.i", "-input=d.i", "-output=o",
              f"-bundle-align={value}", cwd=work)
    line = one_error_line(res, "offload-bundler", option=True)
    assert line == f"offload-bundler: for the --bundle-align option: '{value}' value invalid for uint argument!"
    assert not (work / "o").exists()
    llvm = find_tool("clang-offload-bundler-19")
    if llvm:
        ref = run([llvm, "-type=i", f"-targets={HOST},{HIP}", "-input=h.i", "-input=d.i", "-output=o",
                   f"-bundle-align={value}"], cwd=work)
        assert ref.returncode == 1


def test_bundle_align_takes_llvm_radix_prefixes(work):
    for value, expected in (("0x10", 16), ("010", 8), ("0b100", 4), ("0o20", 16)):
        res = cli("bundler", "-type=bc", f"-targets={HOST},{HIP}", "-input=h.i", "-input=d.i", "-output=o",
                  f"-bundle-align={value}", cwd=work)
        assert res.returncode == 0, res.stderr
        res16 = cli("bundler", "-type=bc", f"-targets={HOST},{HIP}", "-input=h.i", "-input=d.i", "-output=o2",
                    f"-bundle-align={expected}", cwd=work)
        assert res16.returncode == 0
        assert (work / "o").read_bytes() == (work / "o2").read_bytes()


def test_compression_level_range(work):
    res = cli("bundler", "-type=bc", "-compress", f"-targets={HOST},{HIP}", "-input=h.i", "-input=d.i", "-output=o",
              "-compression-level=99999999999", cwd=work)
    assert one_error_line(res, "offload-bundler", option=True) == ("offload-bundler: for the --compression-level option: "
                                                      "'99999999999' value invalid for integer argument!")
    # In int range but past zstd's levels: clamped as libzstd clamps it (LLVM passes it through).
    res = cli("bundler", "-type=bc", "-compress", f"-targets={HOST},{HIP}", "-input=h.i", "-input=d.i", "-output=o",
              "-compression-level=100", cwd=work)
    assert res.returncode == 0, res.stderr
    res = cli("bundler", "-unbundle", "-type=bc", f"-targets={HIP}", "-input=o", "-output=d.out", cwd=work)
    assert res.returncode == 0 and (work / "d.out").read_bytes() == b"device code\n"


def test_zlib_level_outside_its_range_is_a_usage_error(work):
    from offload_tool.errors import UsageError
    from offload_tool.ops import bundler_api

    with pytest.raises(UsageError, match="zlib"):
        bundler_api.bundler_config(compress="zlib", compression_level=12, env={})
    assert bundler_api.bundler_config(compress="zstd", compression_level=-(1 << 20), env={}).compression_level \
        == -(1 << 17)


def test_printable_escapes_every_control_character():
    assert printable("plain ü name") == "plain ü name"
    assert printable("a\nb\r\tc\x1b[31md\x7f\x85") == "a\\nb\\r\\tc\\x1b[31md\\x7f\\x85"
    assert printable("x\u2028y\udcff") == "x\\u2028y\\xff"


def _hostile_bundle(path, ids) -> None:
    with open(path, "wb") as f:
        write_binary_bundle([BundleEntry(i, b"payload " + str(n).encode()) for n, i in enumerate(ids)], f)


def test_names_from_a_file_cannot_forge_lines(tmp_path):
    evil = [f"{HOST}", "hip-amdgcn-amd-amdhsa--gfx90a\nforged line", "hip-amdgcn-amd-amdhsa--gfx\x1b[2J908"]
    _hostile_bundle(tmp_path / "evil.bc", evil)
    res = cli("bundler", "-list", "-type=bc", "-input=evil.bc", cwd=tmp_path)
    out = res.stdout.decode()
    assert res.returncode == 0 and "\x1b" not in out
    assert sorted(out.splitlines()) == sorted(printable(i) for i in evil)
    res = cli("tool", "inspect", "evil.bc", cwd=tmp_path)
    out = res.stdout.decode()
    assert "\x1b" not in out and "forged line" in out
    assert not any(line.startswith("forged line") for line in out.splitlines())
    # A message quoting a name from the file stays one line.
    res = cli("bundler", "-unbundle", "-type=bc", "-targets=hip-amdgcn-amd-amdhsa--gfx90a", "-input=evil.bc",
              "-output=o", cwd=tmp_path)
    if res.returncode:
        one_error_line(res, "offload-bundler")


def test_error_line_escapes_and_survives_a_closed_stderr(capsys):
    from offload_tool.cli.command_line import run_command

    def body():
        raise OffloadError("'x\ny': bad \x1b[31mred")

    assert run_command("prog", body) == 1
    assert capsys.readouterr().err == "prog: error: 'x\\ny': bad \\x1b[31mred\n"
    saved = sys.stderr
    sys.stderr = None
    try:
        assert run_command("prog", body) == 1
    finally:
        sys.stderr = saved


# --- files with no offload content ---------------------------------------------------------------


def test_packager_says_why_nothing_was_extracted(tmp_path):
    (tmp_path / "plain.txt").write_text("just text\n")
    res = cli("packager", "plain.txt", "--image=file=o,arch=sm_70", cwd=tmp_path)
    assert res.returncode == 0  # LLVM's exit status is kept
    err = res.stderr.decode()
    assert err.startswith("offload-packager: warning: nothing extracted from 'plain.txt': ") and "magic" in err
    assert not (tmp_path / "o").exists()


def test_inspect_require_images_names_the_file(tmp_path):
    (tmp_path / "plain.txt").write_text("just text\n")
    shutil.copy("/bin/true", tmp_path / "prog")
    res = cli("tool", "inspect", "plain.txt", cwd=tmp_path)
    assert res.returncode == 0
    res = cli("tool", "inspect", "--require-images", "plain.txt", "prog", cwd=tmp_path)
    err = res.stderr.decode().splitlines()
    assert res.returncode == 1 and len(err) == 2, err
    assert err[0].startswith("offload-tool: error: 'plain.txt': no device images: ")
    assert err[1].startswith("offload-tool: error: 'prog': no device images: ") and "elf" in err[1]


def test_packager_archive_member_names_are_sanitised(work):
    res = cli("packager", "-o", "p.bin", f"--image=file=d.i,triple={TRIPLE},arch=a", cwd=work)
    assert res.returncode == 0
    with open(work / "in.a", "wb") as f:
        write_archive([("../../evil.o", (work / "p.bin").read_bytes())], f)
    res = cli("packager", "in.a", "--image=file=out.a,arch=a", "--archive", cwd=work)
    assert res.returncode == 0, res.stderr
    assert "not a plain file name" in res.stderr.decode()
    names = [m.name for m in read_archive((work / "out.a").read_bytes())]
    assert names and all("/" not in n for n in names), names


def test_a_run_ending_removes_only_its_own_thread_temp_files(tmp_path):
    """A build tool runs library operations in threads: one run ending must not remove the
    temporary file another thread is still writing."""
    opened, release = threading.Event(), threading.Event()

    def other_run():
        with fileio.atomic_output(tmp_path / "theirs") as f:
            f.write(b"theirs")
            opened.set()
            release.wait(10)

    t = threading.Thread(target=other_run)
    t.start()
    assert opened.wait(10)
    fileio.remove_temp_files()
    release.set()
    t.join(10)
    assert (tmp_path / "theirs").read_bytes() == b"theirs"
