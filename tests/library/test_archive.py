"""archive.py: byte identity with llvm-ar-19 rcD, reading GNU/BSD archives, robustness."""

from __future__ import annotations

import io
import os
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import need_tool, run
from offload_tool.formats import archive
from offload_tool.errors import ArchiveError, OffloadError

SRC_A = "int helper(int x) { return x * 3; }\n__attribute__((weak)) int wk(void) { return 7; }\nint gv = 5;\n"
SRC_MAIN = "int printf(const char *, ...);\nint helper(int);\nint main(void) { printf(\"%d\\n\", helper(14)); return 0; }\n"
SRC_STATIC = "static int f(void) { return 1; }\nint (*use_f)(void) = 0;\n"
SRC_NOGLOBAL = "static int f(void) { return 1; }\n"
SRC_FANCY = r"""
int aliasee(void) { return 1; }
int al(void) __attribute__((alias("aliasee")));
__thread int tlsvar = 5;
int commonvar;
__attribute__((visibility("hidden"))) int hid(void) { return 3; }
__attribute__((weak)) int wk2(void) { return 2; }
extern int undefined_thing; int ref(void) { return undefined_thing; }
static int impl(void) { return 4; }
int (*resolver(void))(void) { return impl; }
int ifn(void) __attribute__((ifunc("resolver")));
__asm__(".globl asm_sym\nasm_sym:\n.quad 0\n");
"""
SRC_DEV = "int dev_fn(int x) { return x * 2; }\nstatic int loc(int y) { return y; }\nint gv = 3;\n" \
          "extern int undef_fn(int);\nint calls(int z) { return undef_fn(z) + loc(z); }\n"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Member files: ELF objects (gcc, clang-19), bitcode (x86-64, amdgcn), text, odd sizes."""
    tmp = tmp_path_factory.mktemp("ar")
    out = {}

    def cc(name, src, *args, compiler="clang-19"):
        if not shutil.which(compiler):
            return
        (tmp / (name + ".c")).write_text(src)
        r = run([compiler, "-c", *args, tmp / (name + ".c"), "-o", tmp / name])
        if r.returncode == 0:
            out[name] = tmp / name

    cc("a.o", SRC_A)
    cc("main.o", SRC_MAIN)
    cc("gcc_static_member.o", SRC_STATIC, compiler="gcc")
    cc("noglobal.o", SRC_NOGLOBAL, compiler="gcc")
    cc("host.bc", SRC_A, "-emit-llvm")
    cc("fancy.bc", SRC_FANCY, "-emit-llvm", "-fcommon")  # aliases, ifunc, TLS, common, module asm
    cc("fancy.o", SRC_FANCY, "-fcommon")
    cc("gfx906_device_code.bc", SRC_DEV, "-emit-llvm", "--target=amdgcn-amd-amdhsa", "-mcpu=gfx906", "-nogpulib")
    cc("arm64.o", SRC_A, "--target=aarch64-linux-gnu")
    for name, data in [("odd.txt", b"odd"), ("even.txt", b"even"), ("exactly16chars.x", b"x" * 7),
                       ("empty", b""), ("sixteen_chars_ab", b"1")]:
        (tmp / name).write_bytes(data)
        out[name] = tmp / name
    if "a.o" not in out:
        pytest.skip("clang-19 not available")
    return out


SETS = [
    ["a.o", "main.o"],
    ["a.o", "odd.txt", "exactly16chars.x", "sixteen_chars_ab", "gcc_static_member.o"],
    ["odd.txt", "even.txt", "empty"],
    ["noglobal.o", "odd.txt"],
    ["host.bc", "gfx906_device_code.bc", "a.o"],
    ["arm64.o", "sixteen_chars_ab", "a.o"],
    ["fancy.bc", "fancy.o", "odd.txt"],
]


def _write(members, **kw):
    out = io.BytesIO()
    archive.write_archive(members, out, **kw)
    return out.getvalue()


@pytest.mark.parametrize("names", SETS, ids=lambda s: "+".join(s))
def test_byte_identical_to_llvm_ar(files, tmp_path, names):
    llvm_ar = need_tool("llvm-ar-19")
    if any(n not in files for n in names):
        pytest.skip("member not buildable here")
    paths = [files[n] for n in names]
    r = run([llvm_ar, "rcD", tmp_path / "ref.a", *paths])
    assert r.returncode == 0, r.stderr
    ref = (tmp_path / "ref.a").read_bytes()
    ours = _write([(p.name, p.read_bytes()) for p in paths])
    assert ours == ref
    got = archive.read_archive(ref)
    assert [(m.name, bytes(m.data)) for m in got] == [(p.name, p.read_bytes()) for p in paths]


@pytest.mark.parametrize("threshold", ["100", "400"])
@pytest.mark.parametrize("names", [SETS[0], SETS[3], SETS[4]], ids=lambda s: "+".join(s))
def test_sym64_table_matches_llvm_ar(files, tmp_path, monkeypatch, names, threshold):
    """LLVM switches to the /SYM64/ table when the last member header starts at or past 4 GiB;
    $SYM64_THRESHOLD lowers that limit (in LLVM and here), so the 64-bit layout is testable."""
    llvm_ar = need_tool("llvm-ar-19")
    if any(n not in files for n in names):
        pytest.skip("member not buildable here")
    monkeypatch.setenv("SYM64_THRESHOLD", threshold)
    paths = [files[n] for n in names]
    r = run([llvm_ar, "rcD", tmp_path / "ref.a", *paths])
    assert r.returncode == 0, r.stderr
    ref = (tmp_path / "ref.a").read_bytes()
    assert _write([(p.name, p.read_bytes()) for p in paths]) == ref
    got = archive.read_archive(ref)
    assert [m.name for m in got] == names


def test_duplicate_long_names_share_one_entry(files, tmp_path):
    llvm_ar = need_tool("llvm-ar-19")
    p = files["sixteen_chars_ab"]
    q = tmp_path / "sub"
    q.mkdir()
    (q / p.name).write_bytes(b"other")
    r = run([llvm_ar, "qcD", tmp_path / "ref.a", p, q / p.name, files["a.o"]])
    assert r.returncode == 0, r.stderr
    ours = _write([(p.name, p.read_bytes()), (p.name, b"other"), ("a.o", files["a.o"].read_bytes())])
    assert ours == (tmp_path / "ref.a").read_bytes()
    assert ours.count(b"sixteen_chars_ab/\n") == 1


def test_symbol_table_contents(files):
    """The '/' table lists global defined symbols per member, pointing at the member header."""
    data = _write([("a.o", files["a.o"].read_bytes()), ("t", b"text"), ("m.o", files["main.o"].read_bytes())])
    assert data.startswith(b"!<arch>\n/               0           0     0     0       ")
    count = int.from_bytes(data[68:72], "big")
    offsets = [int.from_bytes(data[72 + 4 * i:76 + 4 * i], "big") for i in range(count)]
    names = data[72 + 4 * count:].split(b"\0")[:count]
    assert names == [b"helper", b"wk", b"gv", b"main"]
    members = {m.name: m.offset for m in archive.read_archive(data)}
    assert offsets == [members["a.o"]] * 3 + [members["m.o"]]
    assert archive.member_symbols(files["host.bc"].read_bytes()) == [b"helper", b"wk", b"gv"]
    if "gfx906_device_code.bc" in files:
        # Defined globals only: undef_fn is undefined, loc is local.
        syms = archive.member_symbols(files["gfx906_device_code.bc"].read_bytes())
        assert b"dev_fn" in syms and b"gv" in syms and b"calls" in syms
        assert b"undef_fn" not in syms and b"loc" not in syms
    assert archive.member_symbols(b"plain text") is None


def test_no_symtab_and_empty(files):
    assert _write([]) == b"!<arch>\n"
    data = _write([("a.o", files["a.o"].read_bytes())], symtab=False)
    assert data[8:24] == b"a.o/".ljust(16)


def test_links_with_system_tools(files, tmp_path):
    if not shutil.which("gcc"):
        pytest.skip("no gcc")
    lib = tmp_path / "libx.a"
    lib.write_bytes(_write([("a.o", files["a.o"].read_bytes()), ("note.txt", b"not an object\n")]))
    r = run(["gcc", files["main.o"], lib, "-o", tmp_path / "prog"])
    assert r.returncode == 0, r.stderr
    assert run([tmp_path / "prog"]).stdout == b"42\n"
    if shutil.which("ar"):
        assert run(["ar", "t", lib]).stdout == b"a.o\nnote.txt\n"


def test_reads_gnu_ar_and_bsd(files, tmp_path):
    names = ["a.o", "odd.txt", "sixteen_chars_ab", "exactly16chars.x"]
    paths = [files[n] for n in names]
    expect = [(p.name, p.read_bytes()) for p in paths]
    if shutil.which("ar"):
        assert run(["ar", "rcs", tmp_path / "gnu.a", *paths]).returncode == 0
        got = archive.read_archive((tmp_path / "gnu.a").read_bytes())
        assert [(m.name, bytes(m.data)) for m in got] == expect
    llvm_ar = need_tool("llvm-ar-19")
    for fmt in ("bsd", "darwin"):
        assert run([llvm_ar, f"--format={fmt}", "rcs", tmp_path / f"{fmt}.a", *paths]).returncode == 0
        got = archive.read_archive((tmp_path / f"{fmt}.a").read_bytes())
        assert [m.name for m in got] == names, fmt
        for m, (_, data) in zip(got, expect):
            # Darwin pads members to 8 bytes inside ar_size; LLVM's reader returns the padding too.
            assert bytes(m.data) == data or (fmt == "darwin" and bytes(m.data).rstrip(b"\n") == data.rstrip(b"\n"))
    assert run([llvm_ar, "rcT", tmp_path / "thin.a", *paths]).returncode == 0
    with pytest.raises(ArchiveError, match="thin archives"):
        archive.read_archive((tmp_path / "thin.a").read_bytes())


@pytest.mark.parametrize("data,msg", [
    (b"", "too small"), (b"!<arch", "too small"), (b"\x7fELF" + bytes(60), "too small"),
    (b"!<arch>\nshort", "needs 60 bytes"),
    (b"!<arch>\n" + b"a/".ljust(48) + b"99".ljust(10) + b"`\n" + b"abc", "runs past"),
    (b"!<arch>\n" + b"a/".ljust(48) + b"x9".ljust(10) + b"`\n", "not a decimal"),
    (b"!<arch>\n" + b"a/".ljust(48) + b"1".ljust(10) + b"XX" + b"a", "ar_fmag"),
    (b"!<arch>\n" + b"/5".ljust(48) + b"1".ljust(10) + b"`\n" + b"a", "no '//' name table"),
])
def test_malformed(data, msg):
    with pytest.raises(ArchiveError, match=msg):
        archive.read_archive(data)


def test_bad_member_names():
    for bad in ("", "a\nb", "a\0b"):
        with pytest.raises(ArchiveError):
            _write([(bad, b"x")])


_names = st.text(alphabet=st.characters(blacklist_characters="\n\0", blacklist_categories=("Cs",)),
                 min_size=1, max_size=30).filter(lambda s: s.strip(" ") == s and s not in ("/", "//"))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_names, st.binary(max_size=200)), max_size=6), st.booleans())
def test_round_trip(members, symtab):
    data = _write(members, symtab=symtab)
    got = archive.read_archive(data)
    assert [(m.name, bytes(m.data)) for m in got] == members


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_corruption_only_raises_archive_error(files, data):
    buf = bytearray(_write([("a.o", files["a.o"].read_bytes()), ("sixteen_chars_ab", b"1"), ("t", b"xyz")]))
    for _ in range(data.draw(st.integers(1, 6))):
        pos = data.draw(st.integers(0, min(len(buf) - 1, 400)))
        buf[pos] = data.draw(st.sampled_from([0, 0x20, 0x2F, 0x30, 0x39, 0x0A, 0x60, 0xFF, 0x31]))
    if data.draw(st.booleans()):
        buf = buf[:data.draw(st.integers(0, len(buf)))]
    try:
        for m in archive.read_archive(bytes(buf)):
            archive.member_symbols(m.data)
    except ArchiveError:
        pass
    except OffloadError as exc:  # pragma: no cover
        raise AssertionError(f"wrong error type: {exc!r}")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_corrupt_bitcode_symbols_never_raise(files, data):
    """Archive symbol extraction from damaged bitcode gives some list, never an exception."""
    bc = bytearray(files["host.bc"].read_bytes())
    for _ in range(data.draw(st.integers(1, 8))):
        # The symbol and string table blocks are at the end of the file.
        bc[len(bc) - 1 - data.draw(st.integers(0, min(400, len(bc) - 1)))] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        bc = bc[:data.draw(st.integers(0, len(bc)))]
    syms = archive.member_symbols(bytes(bc))
    assert syms is None or isinstance(syms, list)


def test_system_archive_rewritten_like_llvm_ar(tmp_path):
    """A real system library (libgcc.a: hundreds of ELF members with TLS, IFUNC, weak symbols):
    reading it and writing its members gives the bytes `llvm-ar sD` (LLVM's rewrite) gives."""
    llvm_ar = need_tool("llvm-ar-19")
    if not shutil.which("gcc"):
        pytest.skip("no gcc")
    lib = run(["gcc", "-print-libgcc-file-name"]).stdout.decode().strip()
    if not lib or not os.path.isfile(lib):
        pytest.skip("libgcc.a not found")
    ref = tmp_path / "ref.a"
    shutil.copyfile(lib, ref)
    r = run([llvm_ar, "sD", ref])
    assert r.returncode == 0, r.stderr
    members = archive.read_archive(open(lib, "rb").read())
    assert len(members) > 10
    assert _write([(m.name, m.data) for m in members]) == ref.read_bytes()


def test_file_output_matches_in_memory_output_with_short_writes(tmp_path, monkeypatch):
    """Regular files are written with os.writev; short writes must resume where they stopped and give
    the same bytes as the buffered path (BytesIO), odd sizes (pad bytes) and a >1024-buffer vector included."""
    members = [(f"member-with-a-long-name-{i}.o", bytes([i % 251]) * (i % 37)) for i in range(700)]
    expected = io.BytesIO()
    archive.write_archive(members, expected, symtab=False)
    real_writev = os.writev
    calls = []

    def short_writev(fd, buffers):
        calls.append(len(buffers))
        first = bytes(memoryview(buffers[0]).cast("B")[:5]) if buffers else b""
        return real_writev(fd, [first]) if first else real_writev(fd, buffers)

    monkeypatch.setattr(os, "writev", short_writev)
    path = tmp_path / "out.a"
    with open(path, "wb") as f:
        archive.write_archive(members, f, symtab=False)
    assert path.read_bytes() == expected.getvalue()
    assert max(calls) == 1024  # batched by IOV_MAX
