"""offload-bundler CLI: options, messages and exit statuses as clang-offload-bundler 19; atomic outputs;
environment variables; damaged inputs give one-line errors."""

from __future__ import annotations

import os
import struct

import pytest

from conftest import oracle_crashed, find_tool, run, run_cli
from offload_tool.ops import bundler_api
from offload_tool.formats import ccob
from offload_tool.errors import BundleError, OffloadError, UsageError

HOST = "host-x86_64-unknown-linux-gnu"
OMP = "openmp-powerpc64le-ibm-linux-gnu"
HIP906 = "hip-amdgcn-amd-amdhsa--gfx906"


@pytest.fixture
def files(tmp_path):
    (tmp_path / "h").write_bytes(b"host code\n")
    (tmp_path / "t1").write_bytes(b"Content of device file 1\n")
    (tmp_path / "t2").write_bytes(b"Content of device file 2\n")
    return tmp_path


def cli(tmp_path, *args, env=None):
    e = dict(os.environ)
    e["PYTHONPATH"] = str(__import__("conftest").REPO) + os.pathsep + e.get("PYTHONPATH", "")
    for k in ("OFFLOAD_BUNDLER_COMPRESS", "OFFLOAD_BUNDLER_VERBOSE", "OFFLOAD_BUNDLER_COMPRESSION_LEVEL",
              "OFFLOAD_BUNDLER_IGNORE_ENV_VAR", "COMPRESSED_BUNDLE_FORMAT_VERSION"):
        e.pop(k, None)
    e.update(env or {})
    return run_cli("bundler", *args, cwd=tmp_path, env=e)


# What LLVM's option parser reports is printed `<name>: <message>`, without `error:`.
OPTION_PARSER = ("for the --type option: must be specified at least once!",)


def _assert_one_line_error(res, message: str | None = None, option: bool = False):
    err = res.stderr.decode()
    assert res.returncode == 1, err
    lines = [line for line in err.splitlines() if "warning:" not in line]
    prefix = "offload-bundler: " if option else "offload-bundler: error: "
    assert len(lines) == 1 and lines[0].startswith(prefix), err
    assert "Traceback" not in err
    if message is not None:
        assert lines[0] == prefix + message


# (arguments, LLVM 19's message after "error: ") -- LLVM's lit test CK-ERR* lines.
ERRORS = [
    (["-type=bc", f"-targets={HOST}", "-input=h"], "no output file specified!"),
    (["-type=bc", "-input=h", "-output=x"], "for the --targets option: must be specified at least once!"),
    (["-targets=" + HOST, "-input=h", "-output=x"], "for the --type option: must be specified at least once!"),
    (["-type=zz", f"-targets={HOST}", "-input=h", "-output=x"], "'zz': invalid file type specified"),
    (["-type=bc", f"-targets={HOST}", "-input=nonexist", "-output=x"], "'nonexist': No such file or directory"),
    (["-type=bc", "-targets=hxst-powerpcxxle-ibm-linux-gnu", "-input=h", "-output=x"],
     "invalid target 'hxst-powerpcxxle-ibm-linux-gnu', unknown offloading kind 'hxst', unknown target triple "
     "'powerpcxxle-ibm-linux-gnu'"),
    (["-type=bc", f"-targets={OMP}", "-input=h", "-output=x"], "expecting exactly one host target but got 0"),
    (["-type=bc", f"-targets={HOST},{HOST}", "-input=h", "-input=h", "-output=x"],
     "Duplicate targets are not allowed"),
    (["-type=a", f"-targets={HOST}", "-input=h", "-output=x"], "Archive files are only supported for unbundling"),
    (["-type=bc", f"-targets={HOST}", "-input=h", "-inputs=h", "-output=x"],
     "-inputs and -input cannot be used together, use only -input instead"),
    (["-type=bc", f"-targets={HOST}", "-input=h", "-output=x", "-outputs=y"],
     "-outputs and -output cannot be used together, use only -output instead"),
    (["-type=bc", f"-targets={HOST}", "-input=h", "-output=x", "-output=y"],
     "only one output file supported in bundling mode"),
    (["-type=bc", f"-targets={HOST},{OMP}", "-input=h", "-output=x"],
     "number of input files and targets should match in bundling mode"),
    (["-type=bc", "-unbundle", f"-targets={HOST}", "-input=h", "-input=h", "-output=x"],
     "only one input file supported in unbundling mode"),
    (["-type=bc", "-unbundle", f"-targets={HOST},{OMP}", "-input=h", "-output=x"],
     "number of output files and targets should match in unbundling mode"),
    (["-type=bc", "-list", "-unbundle", "-input=h"], "-unbundle and -list cannot be used together"),
    (["-type=bc", "-list", "-input=h", "-input=h"], "only one input file supported for -list"),
    (["-type=bc", "-list", "-input=h", "-output=x"], "-outputs option is invalid for -list"),
    (["-type=bc", "-list", "-input=h", f"-targets={HOST}"], "-targets option is invalid for -list"),
    (["-type=bc", "-check-input-archive", f"-targets={HOST}", "-input=h", "-output=x"],
     "-check-input-archive cannot be used while bundling"),
    (["-type=bc", "-unbundle", "-check-input-archive", f"-targets={HOST}", "-input=h", "-output=x"],
     "-check-input-archive can only be used for unbundling archives (-type=a)"),
    (["-type=bc", "-targets=hip-amdgcn-amd-amdhsa--gfx906,hip-amdgcn-amd-amdhsa--gfx906:xnack+", "-input=t1",
      "-input=t2", "-output=x"],
     "Cannot bundle inputs with conflicting targets: 'hip-amdgcn-amd-amdhsa--gfx906' and "
     "'hip-amdgcn-amd-amdhsa--gfx906:xnack+'"),
]


@pytest.mark.parametrize("args, message", ERRORS, ids=[m[:40] for _, m in ERRORS])
def test_errors_match_llvm(files, args, message):
    res = cli(files, *args)
    _assert_one_line_error(res, message, option=message in OPTION_PARSER)
    assert not (files / "x").exists()
    llvm = find_tool("clang-offload-bundler-19")
    if llvm:
        ref = run([llvm, *args], cwd=files)
        if oracle_crashed(ref):  # LLVM 19 segfaults on some bad target IDs on some machines
            return
        assert ref.returncode == 1
        # The same line, LLVM's program name for ours: run by full path, LLVM names itself by that
        # path in run-time errors and by its base name in the option parser's.
        last = ref.stderr.decode().splitlines()[-1]
        name = os.path.basename(llvm)
        assert last.replace(llvm, "PROG", 1).replace(name, "PROG", 1) == \
            res.stderr.decode().strip().replace("offload-bundler", "PROG", 1)


@pytest.mark.parametrize("args, fragment", [
    (["-type=bc", "-bundle-align=x", f"-targets={HOST}", "-input=h", "-output=x"], "'x' value invalid for uint"),
    (["-type=bc", "-bundle-align=0", f"-targets={HOST}", "-input=h", "-output=x"], "must be at least 1"),
    (["-type=bc", "-compression-level=x", f"-targets={HOST}", "-input=h", "-output=x"], "invalid for integer"),
    (["-type=bc", "-foo"], "Unknown command line argument '-foo'"),
    (["-type=bc", "-unbundle=2"], "invalid value for boolean argument"),
    (["-type=bc", "h"], "Unknown command line argument 'h'.  Try: 'offload-bundler --help'"),
    (["-type"], "requires a value"),
])
def test_option_syntax_errors(files, args, fragment):
    res = cli(files, *args)
    # LLVM's option parser's mistakes: `<name>: <message>` (no `error:`); the checks after it: `error:`.
    _assert_one_line_error(res, option="must be at least 1" not in fragment)
    assert fragment in res.stderr.decode()


def test_help_and_version(files):
    res = cli(files, "--help")
    assert res.returncode == 0 and b"--bundle-align=<uint>" in res.stdout and b"hipi - hip-cpp-output" in res.stdout
    assert cli(files, "-help").stdout == res.stdout and cli(files, "-h").returncode == 0
    res = cli(files, "--version")
    assert res.returncode == 0 and b"offload-bundler" in res.stdout


def test_option_spellings(files):
    """Single/double dash, `-opt value`, comma lists, repeated -targets, deprecated -inputs/-outputs."""
    res = cli(files, "--type", "bc", "--targets", f"{HOST},{OMP}", "--input", "h", "-input=t1", "--output=a.bc")
    assert res.returncode == 0, res.stderr
    res = cli(files, "-type=bc", f"-targets={HOST}", f"-targets={OMP}", "-inputs=h,t1", "-output", "b.bc")
    assert res.returncode == 0 and b"warning: -inputs is deprecated, use -input instead" in res.stderr
    assert (files / "a.bc").read_bytes() == (files / "b.bc").read_bytes()
    res = cli(files, "-type=bc", "-unbundle=true", f"-targets={OMP},{HOST}", "-input=a.bc", "-outputs=o1,o2")
    assert res.returncode == 0 and b"-outputs is deprecated" in res.stderr
    assert (files / "o1").read_bytes() == (files / "t1").read_bytes()
    assert (files / "o2").read_bytes() == (files / "h").read_bytes()
    res = cli(files, "--list", "--type=bc", "--input=a.bc")
    assert sorted(res.stdout.decode().split()) == sorted([HOST + "-", OMP + "-"])


def test_failed_unbundle_leaves_no_outputs(files):
    assert cli(files, "-type=bc", f"-targets={HOST},{OMP}", "-input=h", "-input=t1", "-output=b.bc").returncode == 0
    (files / "stale").write_bytes(b"old contents")
    res = cli(files, "-type=bc", "-unbundle", f"-targets={HOST},{HIP906}", "-input=b.bc", "-output=new",
              "-output=stale")
    _assert_one_line_error(res, f"Can't find bundles for {HIP906}")
    assert not (files / "new").exists() and (files / "stale").read_bytes() == b"old contents"
    assert not [p for p in os.listdir(files) if p.endswith(".tmp")]


def test_allow_missing_bundles(files):
    assert cli(files, "-type=bc", f"-targets={HOST},{OMP}", "-input=h", "-input=t1", "-output=b.bc").returncode == 0
    res = cli(files, "-type=bc", "-unbundle", "-allow-missing-bundles", f"-targets={HOST},{HIP906}",
              "-input=b.bc", "-output=x", "-output=y")
    assert res.returncode == 0
    assert (files / "x").read_bytes() == b"host code\n" and (files / "y").read_bytes() == b""
    # A plain file (no bundle): host output is the whole input, others empty.
    res = cli(files, "-type=bc", "-unbundle", "-allow-missing-bundles", f"-targets={OMP},{HOST}", "-input=t2",
              "-output=x", "-output=y")
    assert res.returncode == 0
    assert (files / "x").read_bytes() == b"" and (files / "y").read_bytes() == (files / "t2").read_bytes()


def test_missing_host_bundle(files):
    assert cli(files, "-type=bc", "-targets=hip-amdgcn-amd-amdhsa--gfx906,hip-amdgcn-amd-amdhsa--gfx900",
               "-input=t1", "-input=t2", "-output=b.bc").returncode == 0
    res = cli(files, "-type=bc", "-unbundle", f"-targets={HOST},{HIP906}", "-input=b.bc", "-output=x", "-output=y")
    _assert_one_line_error(res, f"Can't find bundles for {HOST}-")
    with pytest.raises(BundleError, match="Can't find bundles for hip-amdgcn-amd-amdhsa--gfx1010, "
                                          "hip-amdgcn-amd-amdhsa--gfx803, and hip-amdgcn-amd-amdhsa--gfx908"):
        bundler_api.unbundle("bc", ["hip-amdgcn-amd-amdhsa--gfx908", "hip-amdgcn-amd-amdhsa--gfx803",
                                    "hip-amdgcn-amd-amdhsa--gfx1010"], files / "b.bc",
                             [str(files / n) for n in "abc"])


def test_env_compress_verbose_and_ignore(files):
    base = ["-type=bc", "-targets=hip-amdgcn-amd-amdhsa--gfx900,hip-amdgcn-amd-amdhsa--gfx906", "-input=t1",
            "-input=t2"]
    res = cli(files, *base, "-output=c.bc", env={"OFFLOAD_BUNDLER_COMPRESS": "1", "OFFLOAD_BUNDLER_VERBOSE": "1"})
    assert res.returncode == 0
    err = res.stderr.decode().splitlines()
    assert err[0] == "Compressed bundle format version: 2" and "Compression method used: zstd" in err
    assert "Compression level: 3" in err
    assert ccob.is_compressed((files / "c.bc").read_bytes())
    res = cli(files, *base, "-output=d.bc", env={"OFFLOAD_BUNDLER_COMPRESS": "1", "OFFLOAD_BUNDLER_IGNORE_ENV_VAR": "1"})
    assert res.returncode == 0 and not ccob.is_compressed((files / "d.bc").read_bytes())
    res = cli(files, *base, "-output=e.bc", "-compress", "-verbose", "-compression-level=9",
              env={"COMPRESSED_BUNDLE_FORMAT_VERSION": "3"})
    err = res.stderr.decode().splitlines()
    assert err[0] == "Compressed bundle format version: 3" and "Compression level: 9" in err
    assert ccob.read_header((files / "e.bc").read_bytes()).version == 3
    res = cli(files, *base, "-output=f.bc", "-compress", env={"OFFLOAD_BUNDLER_COMPRESSION_LEVEL": "x"})
    assert res.returncode == 0
    assert b"Warning: Invalid value for OFFLOAD_BUNDLER_COMPRESSION_LEVEL: x. Ignoring it." in res.stderr
    res = cli(files, *base, "-output=g.bc", "-compress=false", env={"OFFLOAD_BUNDLER_COMPRESS": "1"})
    assert not ccob.is_compressed((files / "g.bc").read_bytes())
    res = cli(files, "-type=bc", "-unbundle", "-verbose", "-targets=hip-amdgcn-amd-amdhsa--gfx906", "-input=e.bc",
              "-output=u")
    assert res.returncode == 0 and b"Hashes match: Yes" in res.stderr
    assert (files / "u").read_bytes() == (files / "t2").read_bytes()
    res = cli(files, "-list", "-type=bc", "-input=c.bc")
    assert sorted(res.stdout.split()) == [b"hip-amdgcn-amd-amdhsa--gfx900", b"hip-amdgcn-amd-amdhsa--gfx906"]


def _bundle_bytes(files) -> bytes:
    assert cli(files, "-type=bc", f"-targets={HOST},{OMP}", "-input=h", "-input=t1", "-output=b.bc").returncode == 0
    return (files / "b.bc").read_bytes()


@pytest.mark.parametrize("damage", [
    lambda d: d[:30],                                      # truncated count
    lambda d: d[:24] + struct.pack("<Q", 1 << 62) + d[32:],  # absurd entry count
    lambda d: d[:60],                                      # truncated after the first entry (LLVM 19: SIGSEGV)
    lambda d: d[:32] + struct.pack("<Q", 1 << 40) + d[40:],  # offset past the end
    lambda d: d[:-3],                                      # last payload cut short
])
@pytest.mark.parametrize("mode", ["list", "unbundle"])
def test_damaged_binary_input(files, damage, mode):
    (files / "bad").write_bytes(damage(_bundle_bytes(files)))
    if mode == "list":
        res = cli(files, "-list", "-type=bc", "-input=bad")
    else:
        res = cli(files, "-unbundle", "-type=bc", f"-targets={HOST},{OMP}", "-input=bad", "-output=x", "-output=y")
    _assert_one_line_error(res)
    assert not (files / "x").exists() and not (files / "y").exists()


@pytest.mark.parametrize("damage, fragment", [
    (lambda d: d[:16], "too small"),
    (lambda d: d[:16] + bytes([d[16] ^ 0xFF]) + d[17:], "MD5 mismatch"),
    (lambda d: d[:12] + struct.pack("<I", 0xFFFFFFF0) + d[16:], "holds fewer"),
    (lambda d: d[:24] + b"\xff" * (len(d) - 24), "Could not decompress"),
])
def test_damaged_compressed_input(files, damage, fragment):
    blob = ccob.compress(_bundle_bytes(files))
    (files / "bad").write_bytes(damage(blob))
    res = cli(files, "-unbundle", "-type=bc", f"-targets={HOST}", "-input=bad", "-output=x")
    _assert_one_line_error(res)
    assert "Failed to decompress input: " in res.stderr.decode() and fragment in res.stderr.decode()
    assert not (files / "x").exists()


def test_unexpected_failures_are_one_line(files):
    """A directory as input or output: still one line, exit 1."""
    res = cli(files, "-list", "-type=bc", f"-input={files}")
    _assert_one_line_error(res)
    _bundle_bytes(files)
    res = cli(files, "-unbundle", "-type=bc", f"-targets={HOST}", "-input=b.bc", "-output=nodir/x")
    _assert_one_line_error(res)


def test_api_errors_are_offload_errors(files):
    with pytest.raises(UsageError):
        bundler_api.bundle("bc", [HOST], [], str(files / "x"))
    with pytest.raises(OffloadError):
        bundler_api.list_bundle_ids("bc", files / "missing")
    with pytest.raises(UsageError, match="invalid file type"):
        bundler_api.list_bundle_ids("q", files / "h")


def test_unbundling_1gib_needs_no_1gib_of_memory(tmp_path):
    """A 1 GiB entry (sparse file) is unbundled with the input mapped/copied, not loaded: the child's peak
    RSS stays far below the payload size."""
    import subprocess
    import sys

    from offload_tool.formats.bundle import binary_bundle_layout

    size = 1 << 30
    ids = ["host-x86_64-unknown-linux-gnu-", "hip-amdgcn-amd-amdhsa--gfx906"]
    header, offsets = binary_bundle_layout(ids, [16, size])
    with open(tmp_path / "big.bc", "wb") as f:
        f.write(header)
        f.write(b"host payload 16b")
        f.truncate(offsets[1] + size)  # a hole: the device payload reads as zeros
    env = dict(os.environ)
    env["PYTHONPATH"] = str(__import__("conftest").REPO) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen([sys.executable, "-m", "offload_tool.cli.bundler", "-type=bc", "-unbundle",
                             "-targets=hip-amdgcn-amd-amdhsa--gfx906,host-x86_64-unknown-linux-gnu",
                             "-input=big.bc", "-output=dev", "-output=host"], cwd=tmp_path, env=env,
                            stderr=subprocess.PIPE)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, err
    assert os.path.getsize(tmp_path / "dev") == size and (tmp_path / "host").read_bytes() == b"host payload 16b"
    assert usage.ru_maxrss * 1024 < size // 4, usage.ru_maxrss
    with open(tmp_path / "dev", "rb") as f:
        f.seek(size - 4096)
        assert f.read() == bytes(4096)


_DEVICE_TARGETS = ["hip-amdgcn-amd-amdhsa--gfx900", "hipv4-amdgcn-amd-amdhsa--gfx906", "openmp-nvptx64-nvidia-cuda-sm_70",
                   "openmp-amdgcn-amd-amdhsa-gfx90a", "hip-amdgcn-amd-amdhsa--gfx1030"]


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(max_size=2000), min_size=len(_DEVICE_TARGETS) + 1, max_size=len(_DEVICE_TARGETS) + 1),
       st.sets(st.integers(0, len(_DEVICE_TARGETS) - 1), min_size=1), st.sampled_from(["bc", "ll", "s", "o"]),
       st.booleans(), st.sampled_from([1, 16, 4096]))
def test_api_round_trip(tmp_path_factory, payloads, chosen, files_type, compress, align):
    """bundle() then unbundle() through the API gives every chosen target its payload back."""
    d = tmp_path_factory.mktemp("rt")
    targets = ["host-x86_64-unknown-linux-gnu"] + [_DEVICE_TARGETS[i] for i in sorted(chosen)]
    if files_type in ("ll", "s"):  # a text payload must not contain an END marker
        payloads = [p.replace(b"__CLANG_OFFLOAD_BUNDLE__", b"") for p in payloads]
    inputs = []
    for n, t in enumerate(targets):
        (d / f"in{n}").write_bytes(payloads[n])
        inputs.append(str(d / f"in{n}"))
    bundler_api.bundle(files_type, targets, inputs, str(d / "b"), compress=compress, bundle_align=align, env={})
    b = bundler_api.read_bundle(d / "b", files_type)
    assert (b.compression is not None) == compress and len(b.entries) == len(targets)
    order = list(reversed(targets))
    outputs = [str(d / f"out{n}") for n in range(len(order))]
    bundler_api.unbundle(files_type, order, str(d / "b"), outputs, env={})
    for t, out in zip(order, outputs):
        assert (d / out).read_bytes() == payloads[targets.index(t)]


_ARG_POOL = ["-type=bc", "-type=ll", "-type=o", "-type=a", "-type=zz", "--type", "bc", "-unbundle", "-list",
             "-allow-missing-bundles", "-check-input-archive", "-compress", "-compress=0", "-verbose",
             "-hip-openmp-compatible", "-bundle-align=4096", "-bundle-align=0", "-bundle-align=-1",
             "-compression-level=9", "-compression-level=x", "-targets=host-x86_64-unknown-linux-gnu",
             "-targets=hip-amdgcn-amd-amdhsa--gfx906", "-targets=,", "-targets=host-x86_64--,hip-amdgcn-amd-amdhsa-gfx906",
             "-input=h", "-input=t1", "-input=b.bc", "-input=missing", "-input=.", "-inputs=h,t1",
             "-output=x", "-output=y", "-outputs=x,y", "-output=nodir/z", "--help", "--version", "-###", "-#", "--",
             "stray",
             "-targets", "-input"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(_ARG_POOL), max_size=9))
def test_cli_never_raises(tmp_path_factory, args):
    """Any combination of options: exit status 0 or 1, and at most one error line, never an exception."""
    import contextlib
    import io

    from offload_tool.cli import bundler

    d = tmp_path_factory.mktemp("fuzz")
    (d / "h").write_bytes(b"host code\n")
    (d / "t1").write_bytes(b"device\n")
    cwd = os.getcwd()
    err, out = io.StringIO(), io.StringIO()
    os.chdir(d)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            status = bundler.main(list(args))
    finally:
        os.chdir(cwd)
    assert status in (0, 1)
    # An error line: `offload-bundler: error: ...`, or the option parser's `offload-bundler: ...`.
    errors = [line for line in err.getvalue().splitlines() if "warning:" not in line]
    assert len(errors) == (1 if status else 0), err.getvalue()
    assert all(line.startswith("offload-bundler: ") for line in errors), err.getvalue()
    assert "Traceback" not in err.getvalue()
