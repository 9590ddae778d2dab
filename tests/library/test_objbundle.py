"""objbundle.py: object-file bundles against clang-offload-bundler-19 -type=o."""

from __future__ import annotations

import io
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import need_tool, run
from offload_tool.formats import elf
from offload_tool.formats import objbundle
from offload_tool.errors import BundleFormatError, OffloadError
from offload_tool.ops.bundler_handlers import is_object_file

C_SRC = r"""
int printf(const char *, ...);
int helper(int x) { return x * 3; }
int main(void) { printf("host %d\n", helper(14)); return 0; }
"""

HIP_SRC = r"""
__attribute__((device)) int dev_fn(int x) { return x * 2; }
int host_fn(int x) { return x + 1; }
"""

TARGETS = ["host-x86_64-unknown-linux-gnu", "openmp-x86_64-pc-linux-gnu", "hip-amdgcn-amd-amdhsa-gfx906"]
STD_IDS = ["host-x86_64-unknown-linux-gnu-", "openmp-x86_64-pc-linux-gnu-", "hip-amdgcn-amd-amdhsa--gfx906"]
PAYLOADS = [b"Content of device file 1\n", b"\x00\x01gfx906 code\xff" * 50]


@pytest.fixture(scope="module")
def host_objects(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("objb")
    (tmp / "h.c").write_text(C_SRC)
    objs = {}
    for cc in ("clang-19", "gcc"):
        if shutil.which(cc):
            o = tmp / f"h-{cc}.o"
            if run([cc, "-c", "-O1", tmp / "h.c", "-o", o]).returncode == 0:
                objs[cc] = o.read_bytes()
    if not objs:
        pytest.skip("no C compiler")
    return objs


def _write(host, entries):
    out = io.BytesIO()
    objbundle.write_object_bundle(host, entries, out)
    return out.getvalue()


def _link_and_run(tmp_path, obj: bytes, name="p"):
    if not shutil.which("gcc"):
        pytest.skip("no gcc")
    (tmp_path / f"{name}.o").write_bytes(obj)
    r = run(["gcc", tmp_path / f"{name}.o", "-o", tmp_path / name])
    assert r.returncode == 0, r.stderr
    return run([tmp_path / name]).stdout


@pytest.mark.parametrize("cc", ["clang-19", "gcc"])
def test_ours_read_by_llvm(host_objects, tmp_path, cc):
    bundler = need_tool("clang-offload-bundler-19")
    if cc not in host_objects:
        pytest.skip(f"no {cc}")
    host = host_objects[cc]
    data = _write(host, [(STD_IDS[0], b"\0"), (STD_IDS[1], PAYLOADS[0]), (STD_IDS[2], PAYLOADS[1])])
    (tmp_path / "fat.o").write_bytes(data)
    r = run([bundler, "-list", "-type=o", f"-input={tmp_path / 'fat.o'}"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split() == STD_IDS  # object handler lists in section order
    outs = [tmp_path / n for n in ("host.o", "dev1", "dev2")]
    r = run([bundler, "-unbundle", "-type=o", "-targets=" + ",".join(TARGETS), f"-input={tmp_path / 'fat.o'}",
             *[f"-output={o}" for o in outs]])
    assert r.returncode == 0, r.stderr
    assert outs[1].read_bytes() == PAYLOADS[0] and outs[2].read_bytes() == PAYLOADS[1]
    assert _link_and_run(tmp_path, outs[0].read_bytes(), "llvmhost") == b"host 42\n"
    # The fat object itself links (bundle sections are SHF_EXCLUDE) and keeps the host symbols.
    assert _link_and_run(tmp_path, data, "fat") == b"host 42\n"
    if shutil.which("llvm-readelf-19"):
        text = run(["llvm-readelf-19", "-S", "-W", tmp_path / "fat.o"]).stdout.decode()
        for sid in STD_IDS:
            line = next(ln for ln in text.splitlines() if "__CLANG_OFFLOAD_BUNDLE__" + sid + " " in ln)
            assert " PROGBITS " in line and line.split()[-4:] == ["E", "0", "0", "1"]


def test_section_headers_match_llvm(host_objects, tmp_path):
    """Our bundle sections have the same names, types, flags, sizes and alignment as objcopy's."""
    bundler = need_tool("clang-offload-bundler-19")
    host = host_objects.get("clang-19") or next(iter(host_objects.values()))
    (tmp_path / "h.o").write_bytes(host)
    for i, p in enumerate(PAYLOADS):
        (tmp_path / f"d{i}").write_bytes(p)
    r = run([bundler, "-type=o", "-targets=" + ",".join(TARGETS), f"-input={tmp_path / 'h.o'}",
             f"-input={tmp_path / 'd0'}", f"-input={tmp_path / 'd1'}", f"-output={tmp_path / 'theirs.o'}"])
    assert r.returncode == 0, r.stderr
    theirs = (tmp_path / "theirs.o").read_bytes()
    ours = _write(host, [(STD_IDS[0], b"\0"), (STD_IDS[1], PAYLOADS[0]), (STD_IDS[2], PAYLOADS[1])])

    def bundle_secs(buf):
        return [(s.name, s.sh_type, s.flags, s.align, s.size, bytes(s.data)) for s in elf.read_sections(buf)
                if s.name.startswith("__CLANG")]

    assert bundle_secs(ours) == bundle_secs(theirs)
    assert [s.name for s in elf.read_sections(ours)][:len(elf.read_sections(host))] == \
           [s.name for s in elf.read_sections(host)]


def test_theirs_read_by_us(host_objects, tmp_path):
    bundler = need_tool("clang-offload-bundler-19")
    host = host_objects.get("clang-19") or next(iter(host_objects.values()))
    (tmp_path / "h.o").write_bytes(host)
    for i, p in enumerate(PAYLOADS):
        (tmp_path / f"d{i}").write_bytes(p)
    r = run([bundler, "-type=o", "-targets=" + ",".join(TARGETS), f"-input={tmp_path / 'h.o'}",
             f"-input={tmp_path / 'd0'}", f"-input={tmp_path / 'd1'}", f"-output={tmp_path / 'theirs.o'}"])
    assert r.returncode == 0, r.stderr
    theirs = (tmp_path / "theirs.o").read_bytes()
    assert is_object_file(theirs)
    entries = objbundle.read_object_bundle(theirs)
    assert [e.bundle_entry_id for e in entries] == STD_IDS
    assert [bytes(e.data) for e in entries[1:]] == PAYLOADS
    host_out = bytes(entries[0].data)
    assert not any(s.name.startswith("__CLANG_OFFLOAD_BUNDLE__") for s in elf.read_sections(host_out))
    assert objbundle.read_object_bundle(host_out) == []
    assert _link_and_run(tmp_path, host_out) == b"host 42\n"


def test_real_hip_fat_object(tmp_path):
    """A -fgpu-rdc fat object from clang-19's old offload driver: device entries equal LLVM's."""
    clang = need_tool("clang-19")
    bundler = need_tool("clang-offload-bundler-19")
    (tmp_path / "k.hip").write_text(HIP_SRC)
    r = run([clang, "-x", "hip", "-nogpulib", "-nogpuinc", "--offload-arch=gfx906", "--offload-arch=gfx90a:xnack+",
             "-fgpu-rdc", "--no-offload-new-driver", "-c", tmp_path / "k.hip", "-o", tmp_path / "k.o"])
    if r.returncode != 0:
        pytest.skip("clang-19 cannot build a HIP fat object here: " + r.stderr.decode()[-200:])
    fat = (tmp_path / "k.o").read_bytes()
    entries = objbundle.read_object_bundle(fat)
    listed = run([bundler, "-list", "-type=o", f"-input={tmp_path / 'k.o'}"]).stdout.decode().split()
    assert [e.bundle_entry_id for e in entries] == listed
    ids = [e.bundle_entry_id for e in entries]
    # A standardized host ID does not re-standardize to itself in LLVM 19.
    targets = [i.rstrip("-") if i.startswith("host-") else i for i in ids]
    outs = [tmp_path / f"o{i}" for i in range(len(ids))]
    r = run([bundler, "-unbundle", "-type=o", "-targets=" + ",".join(targets), f"-input={tmp_path / 'k.o'}",
             *[f"-output={o}" for o in outs]])
    assert r.returncode == 0, r.stderr
    for e, o in zip(entries, outs):
        if e.bundle_entry_id.startswith("host-"):
            host = bytes(e.data)
            syms = run(["llvm-readelf-19", "-s", "-W", o]).stdout.decode() if shutil.which("llvm-readelf-19") else ""
            (tmp_path / "ourhost.o").write_bytes(host)
            if syms:
                ours = run(["llvm-readelf-19", "-s", "-W", tmp_path / "ourhost.o"]).stdout.decode()
                assert ours.split("\n", 1)[1] == syms.split("\n", 1)[1] and "host_fn" in ours
        else:
            assert bytes(e.data) == o.read_bytes() and bytes(e.data[:4]) == b"BC\xc0\xde"
    # Re-bundling the unbundled parts with ours gives the same entries.
    host_entry = next(e for e in entries if e.bundle_entry_id.startswith("host-"))
    again = _write(bytes(host_entry.data), [(e.bundle_entry_id, b"\0" if e is host_entry else e.data)
                                            for e in entries])
    assert [(e.bundle_entry_id, bytes(e.data)) for e in objbundle.read_object_bundle(again) if e is not None][1:] == \
           [(e.bundle_entry_id, bytes(e.data)) for e in entries][1:]


def test_is_object_file(host_objects, tmp_path):
    host = next(iter(host_objects.values()))
    assert is_object_file(host)
    assert not is_object_file(host[:30])      # truncated ELF: LLVM uses the binary handler
    assert not is_object_file(b"BC\xc0\xde" + bytes(40))   # bitcode: binary handler
    assert not is_object_file(b"!<arch>\n")
    assert not is_object_file(b"")
    assert not is_object_file(b"Content of device file 1\n")
    assert is_object_file(b"\0asm\x01\0\0\0")
    assert is_object_file(b"\x64\x86" + bytes(40))  # COFF x86-64
    assert is_object_file(b"\xcf\xfa\xed\xfe" + bytes(40))  # Mach-O 64


def test_is_object_file_matches_llvm_handler_choice(host_objects, tmp_path):
    """LLVM prints an objcopy command (-###) only when it picked the object handler."""
    bundler = need_tool("clang-offload-bundler-19")
    host = next(iter(host_objects.values()))
    (tmp_path / "d").write_bytes(b"x")
    for name, data in [("elf", host), ("trunc", host[:30]), ("bc", b"BC\xc0\xde" + bytes(40)), ("text", b"hi\n")]:
        p = tmp_path / name
        p.write_bytes(data)
        r = run([bundler, "-type=o", "-targets=host-x86_64-unknown-linux-gnu,openmp-x86_64-pc-linux-gnu",
                 f"-input={p}", f"-input={tmp_path / 'd'}", f"-output={tmp_path / 'out'}", "-###"])
        assert (b"llvm-objcopy" in r.stderr) == is_object_file(data), name


def test_non_elf_objects_rejected():
    with pytest.raises(BundleFormatError, match="only ELF"):
        objbundle.read_object_bundle(b"\x64\x86" + bytes(40))
    with pytest.raises(BundleFormatError, match="only ELF"):
        _write(b"\0asm\x01\0\0\0", [("host-x86_64-unknown-linux-gnu-", b"\0")])


def test_strip_and_short_names(host_objects):
    host = next(iter(host_objects.values()))
    # A section named exactly the magic (24 chars) is not an entry but is stripped (objcopy's regex).
    data = _write(host, [("openmp-x86_64-pc-linux-gnu-", b"abc")])
    out = io.BytesIO()
    elf.add_sections(data, [elf.NewSection("__CLANG_OFFLOAD_BUNDLE__", b"zz")], out)
    data = out.getvalue()
    assert [e.bundle_entry_id for e in objbundle.read_object_bundle(data)] == ["openmp-x86_64-pc-linux-gnu-"]
    out = io.BytesIO()
    objbundle.strip_bundle_sections(data, out)
    assert not any(s.name.startswith("__CLANG") for s in elf.read_sections(out.getvalue()))
    with pytest.raises(BundleFormatError):
        _write(host, [("", b"x")])


_ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_:+.", min_size=1, max_size=40)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=st.lists(st.tuples(_ids, st.binary(max_size=300).filter(lambda b: b != b"\0")), max_size=5),
       with_host=st.booleans())
def test_round_trip(host_objects, entries, with_host):
    host = next(iter(host_objects.values()))
    items = ([("host-x86_64-unknown-linux-gnu-", b"\0")] if with_host else []) + entries
    data = _write(host, items)
    got = objbundle.read_object_bundle(data)
    assert [e.bundle_entry_id for e in got] == [i for i, _ in items]
    start = 1 if with_host else 0
    assert [bytes(e.data) for e in got[start:]] == [p for _, p in entries]
    if with_host:
        stripped = bytes(got[0].data)
        assert [s.name for s in elf.read_sections(stripped)] == [s.name for s in elf.read_sections(host)]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_corruption_only_raises_offload_error(host_objects, data):
    host = next(iter(host_objects.values()))
    buf = bytearray(_write(host, [(STD_IDS[0], b"\0"), (STD_IDS[1], PAYLOADS[0])]))
    e = elf._Elf(bytes(buf))
    lo = e.ehdr.e_shoff
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.one_of(st.integers(0, 63), st.integers(lo, len(buf) - 1), st.integers(0, len(buf) - 1)))
        buf[pos] = data.draw(st.integers(0, 255))
    try:
        objbundle.read_object_bundle(bytes(buf))
    except OffloadError:
        pass


def test_executable_host(tmp_path):
    """LLVM's bundler takes any ELF as the host (objcopy edits executables too): so do we."""
    bundler = need_tool("clang-offload-bundler-19")
    if not shutil.which("gcc"):
        pytest.skip("no gcc")
    (tmp_path / "h.c").write_text(C_SRC)
    assert run(["gcc", "-O1", tmp_path / "h.c", "-o", tmp_path / "prog"]).returncode == 0
    exe = (tmp_path / "prog").read_bytes()
    ours = _write(exe, [(STD_IDS[0], b"\0"), (STD_IDS[1], PAYLOADS[0])])
    (tmp_path / "fat").write_bytes(ours)
    outs = [tmp_path / "host", tmp_path / "dev"]
    r = run([bundler, "-unbundle", "-type=o", "-targets=" + ",".join(TARGETS[:2]), f"-input={tmp_path / 'fat'}",
             *[f"-output={o}" for o in outs]])
    assert r.returncode == 0, r.stderr
    assert outs[1].read_bytes() == PAYLOADS[0]
    for d in (tmp_path / "fat", outs[0]):
        d.chmod(0o755)
        assert run([d]).stdout == b"host 42\n"
    (tmp_path / "d0").write_bytes(PAYLOADS[0])
    r = run([bundler, "-type=o", "-targets=" + ",".join(TARGETS[:2]), f"-input={tmp_path / 'prog'}",
             f"-input={tmp_path / 'd0'}", f"-output={tmp_path / 'theirs'}"])
    assert r.returncode == 0, r.stderr
    entries = objbundle.read_object_bundle((tmp_path / "theirs").read_bytes())
    assert [e.bundle_entry_id for e in entries] == STD_IDS[:2] and bytes(entries[1].data) == PAYLOADS[0]
    (tmp_path / "h2").write_bytes(entries[0].data)
    (tmp_path / "h2").chmod(0o755)
    assert run([tmp_path / "h2"]).stdout == b"host 42\n"
    assert bytes(objbundle.read_object_bundle(ours)[0].data) == exe  # ours strips back to the original


def test_object_bundle_ids(host_objects):
    host = next(iter(host_objects.values()))
    data = _write(host, [(STD_IDS[0], b"\0"), (STD_IDS[2], PAYLOADS[1]), (STD_IDS[1], PAYLOADS[0])])
    assert objbundle.object_bundle_ids(data) == [STD_IDS[0], STD_IDS[2], STD_IDS[1]]
    assert objbundle.object_bundle_ids(host) == []
