"""hda.py: heterogeneous archive unbundling against clang-offload-bundler-19 -type=a -unbundle
(the archive scenarios of LLVM's clang-offload-bundler lit tests)."""

from __future__ import annotations

import io
import os
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import need_tool, run
from offload_tool.formats import archive
from offload_tool.formats import elf
from offload_tool.ops import hda
from offload_tool.rules import llvm_path
from offload_tool.formats import objbundle
from offload_tool.formats.bundle import BundleEntry, write_binary_bundle
from offload_tool.errors import ArchiveError, BundleError, OffloadError

HOST_C = "int host_fn(int x) { return x + 1; }\n"
MAIN_C = "int printf(const char *, ...);\nint host_fn(int);\nint main(void) { printf(\"%d\\n\", host_fn(41)); return 0; }\n"
DEV_C = "int dev_fn(int x) { return x * 2; }\nint gv = 3;\n"


def _binary_bundle(entries) -> bytes:
    out = io.BytesIO()
    write_binary_bundle([BundleEntry(i, d) for i, d in entries], out)
    return out.getvalue()


def _llvm_unbundle(tmp, archive_path, targets, extra=()):
    bundler = need_tool("clang-offload-bundler-19")
    outs = [tmp / f"llvm-{i}.a" for i in range(len(targets))]
    r = run([bundler, "-unbundle", "-type=a", "-targets=" + ",".join(targets), f"-input={archive_path}",
             *[f"-output={o}" for o in outs], *extra])
    return r, outs


def _ours(tmp, archive_path, targets, **kw):
    from offload_tool.rules.bundle_id import standardize

    outs = [tmp / f"ours-{i}.a" for i in range(len(targets))]
    hda.unbundle_archive(archive_path, [str(standardize(t)) for t in targets], outs, **kw)
    return outs


@pytest.fixture(scope="module")
def hip_lib(tmp_path_factory):
    """`llvm-ar cr` archive of two HIP binary bundles (gfx900/gfx906, no host), one compressed,
    plus an OpenMP nvptx bundle and a plain text member (the lit tests' 'HIP archive')."""
    bundler = need_tool("clang-offload-bundler-19")
    llvm_ar = need_tool("llvm-ar-19")
    tmp = tmp_path_factory.mktemp("hiplib")
    (tmp / "g900").write_bytes(b"gfx900 code\n")
    (tmp / "g906").write_bytes(b"gfx906 code!\n")
    (tmp / "sm70").write_bytes(b"\x7fcubin-ish sm_70 payload")
    t = "-targets=hip-amdgcn-amd-amdhsa--gfx900,hip-amdgcn-amd-amdhsa--gfx906"
    for args in ([t, f"-input={tmp / 'g900'}", f"-input={tmp / 'g906'}", f"-output={tmp / 'hip_bundle1'}"],
                 [t, f"-input={tmp / 'g906'}", f"-input={tmp / 'g900'}", f"-output={tmp / 'hip_bundle2.co'}",
                  "-compress"],
                 ["-targets=openmp-nvptx64-nvidia-cuda-sm_70,openmp-amdgcn-amd-amdhsa-gfx906:xnack+,"
                  "host-x86_64-unknown-linux-gnu", f"-input={tmp / 'sm70'}", f"-input={tmp / 'g906'}",
                  "-input=/dev/null", f"-output={tmp / 'omp_bundle.bin'}"]):
        r = run([bundler, "-type=o", *args])
        assert r.returncode == 0, r.stderr
    (tmp / "readme.txt").write_bytes(b"not a bundle\n")
    r = run([llvm_ar, "cr", tmp / "lib.a", tmp / "hip_bundle1", tmp / "hip_bundle2.co", tmp / "omp_bundle.bin",
             tmp / "readme.txt"])
    assert r.returncode == 0, r.stderr
    return tmp / "lib.a"


@pytest.mark.parametrize("targets", [
    ["hip-amdgcn-amd-amdhsa--gfx900", "hip-amdgcn-amd-amdhsa--gfx906"],
    ["hipv4-amdgcn-amd-amdhsa-gfx906:xnack+", "hip-amdgcn-amd-amdhsa--gfx900"],
    ["openmp-nvptx64-nvidia-cuda-sm_70"],
    ["openmp-amdgcn-amd-amdhsa--gfx906:xnack+", "hip-amdgcn-amd-amdhsa--gfx906"],
    ["host-x86_64-unknown-linux-gnu", "openmp-amdgcn-amd-amdhsa--gfx906:xnack+"],
], ids=["hip", "hipv4-xnack", "cubin", "openmp-and-hip", "empty-host-entry"])
def test_binary_bundle_members_byte_identical(hip_lib, tmp_path, targets):
    r, theirs = _llvm_unbundle(tmp_path, hip_lib, targets)
    assert r.returncode == 0, r.stderr
    ours = _ours(tmp_path, hip_lib, targets)
    for a, b in zip(ours, theirs):
        assert a.read_bytes() == b.read_bytes()
    names = [m.name for m in archive.read_archive(ours[0].read_bytes())]
    assert names  # never vacuous: every target here has members


def test_member_names(hip_lib, tmp_path):
    outs = _ours(tmp_path, hip_lib, ["hip-amdgcn-amd-amdhsa--gfx906", "openmp-nvptx64-nvidia-cuda--sm_70"])
    assert [m.name for m in archive.read_archive(outs[0].read_bytes())] == [
        "hip_bundle1-hip-amdgcn-amd-amdhsa--gfx906hip_bundle1.bc",
        "hip_bundle2-hip-amdgcn-amd-amdhsa--gfx906hip_bundle2.bc"]
    m = archive.read_archive(outs[1].read_bytes())
    assert [x.name for x in m] == ["omp_bundle-openmp-nvptx64-nvidia-cuda--sm_70omp_bundle.cubin"]
    assert bytes(m[0].data) == b"\x7fcubin-ish sm_70 payload"


def test_name_helpers():
    assert hda.device_member_name("lib1.o", "hip-amdgcn-amd-amdhsa--gfx906") == \
        "lib1-hip-amdgcn-amd-amdhsa--gfx906lib1.bc"
    assert hda.device_member_name("lib1.o", "openmp-nvptx64-nvidia-cuda--sm_70") == \
        "lib1-openmp-nvptx64-nvidia-cuda--sm_70lib1.cubin"
    assert hda.device_member_name("fatx.o", "openmp-x86_64-pc-linux-gnu-") == "fatx-openmp-x86_64-pc-linux-gnu-fatx.o"
    assert hda.device_member_name("a.b.o", "hip-amdgcn-amd-amdhsa--gfx90a:xnack+") == \
        "a.b-hip-amdgcn-amd-amdhsa--gfx90a_xnack+a.b.bc"
    assert (llvm_path.stem(".bashrc"), llvm_path.extension(".bashrc")) == ("", ".bashrc")
    assert (llvm_path.stem("noext"), llvm_path.extension("noext")) == ("noext", "")
    assert (llvm_path.stem(".."), llvm_path.extension("..")) == ("..", "")


@pytest.fixture(scope="module")
def fat_lib(tmp_path_factory):
    """Object bundles made by clang-offload-bundler-19 -type=o from a clang-19 host object and
    real amdgcn bitcode (the lit tests' 'Archive unbundling of object bundles'), in an archive with a plain member."""
    bundler = need_tool("clang-offload-bundler-19")
    clang = need_tool("clang-19")
    llvm_ar = need_tool("llvm-ar-19")
    tmp = tmp_path_factory.mktemp("fatlib")
    (tmp / "host.c").write_text(HOST_C)
    (tmp / "dev.c").write_text(DEV_C)
    assert run([clang, "-c", "-O1", tmp / "host.c", "-o", tmp / "host.o"]).returncode == 0
    r = run([clang, "-c", "-emit-llvm", "--target=amdgcn-amd-amdhsa", "-mcpu=gfx906", "-nogpulib", tmp / "dev.c",
             "-o", tmp / "dev.bc"])
    if r.returncode != 0:
        pytest.skip("no amdgcn target in clang-19")
    r = run([bundler, "-type=o", "-targets=openmp-amdgcn-amd-amdhsa-gfx906,host-x86_64-unknown-linux-gnu",
             f"-input={tmp / 'dev.bc'}", f"-input={tmp / 'host.o'}", f"-output={tmp / 'simple.o'}"])
    assert r.returncode == 0, r.stderr
    # A second fat object written by us (objbundle), entries in the other order.
    fat2 = io.BytesIO()
    objbundle.write_object_bundle((tmp / "host.o").read_bytes(),
                                  [("host-x86_64-unknown-linux-gnu-", b"\0"),
                                   ("openmp-amdgcn-amd-amdhsa--gfx906", (tmp / "dev.bc").read_bytes())], fat2)
    (tmp / "ours_fat.o").write_bytes(fat2.getvalue())
    (tmp / "plain.txt").write_bytes(b"plain\n")
    assert run([llvm_ar, "cr", tmp / "libfat.a", tmp / "simple.o", tmp / "plain.txt", tmp / "ours_fat.o"]).returncode == 0
    return tmp / "libfat.a"


@pytest.mark.parametrize("targets,extra", [
    (["openmp-amdgcn-amd-amdhsa-gfx906"], ()),
    (["openmp-amdgcn-amd-amdhsa--gfx906:xnack+"], ()),
    (["hip-amdgcn-amd-amdhsa--gfx906"], ("-hip-openmp-compatible",)),
], ids=["gfx906", "xnack+-matches-any", "hip-openmp-compatible"])
def test_object_bundle_members(fat_lib, tmp_path, targets, extra):
    r, theirs = _llvm_unbundle(tmp_path, fat_lib, targets, extra)
    assert r.returncode == 0, r.stderr
    ours = _ours(tmp_path, fat_lib, targets, hip_openmp_compatible=bool(extra))
    assert ours[0].read_bytes() == theirs[0].read_bytes()
    names = [m.name for m in archive.read_archive(ours[0].read_bytes())]
    assert names == ["simple-openmp-amdgcn-amd-amdhsa--gfx906simple.bc",
                     "ours_fat-openmp-amdgcn-amd-amdhsa--gfx906ours_fat.bc"]


def test_hip_openmp_compatible_other_direction(hip_lib, tmp_path):
    targets = ["openmp-amdgcn-amd-amdhsa--gfx900"]
    r, theirs = _llvm_unbundle(tmp_path, hip_lib, targets, ("-hip-openmp-compatible",))
    assert r.returncode == 0, r.stderr
    ours = _ours(tmp_path, hip_lib, targets, hip_openmp_compatible=True)
    assert ours[0].read_bytes() == theirs[0].read_bytes()
    with pytest.raises(BundleError, match="no compatible code object"):
        _ours(tmp_path, hip_lib, targets)


def test_host_entries_are_working_objects(fat_lib, tmp_path):
    """The host target gets the host objects without bundle sections (LLVM uses objcopy, so
    bytes differ); names, symbols and behaviour agree, and the archive links."""
    targets = ["host-x86_64-unknown-linux-gnu"]
    r, theirs = _llvm_unbundle(tmp_path, fat_lib, targets)
    assert r.returncode == 0, r.stderr
    ours = _ours(tmp_path, fat_lib, targets)
    a = archive.read_archive(ours[0].read_bytes())
    b = archive.read_archive(theirs[0].read_bytes())
    assert [m.name for m in a] == [m.name for m in b] == ["simple-host-x86_64-unknown-linux-gnu-simple.o",
                                                          "ours_fat-host-x86_64-unknown-linux-gnu-ours_fat.o"]
    host = (fat_lib.parent / "host.o").read_bytes()
    for x, y in zip(a, b):
        assert archive.member_symbols(x.data) == archive.member_symbols(y.data) == [b"host_fn"]
        assert not any(s.name.startswith("__CLANG") for s in elf.read_sections(x.data))
        # Same sections and contents as the original host object (string tables aside).
        assert [(s.name, s.sh_type, bytes(s.data)) for s in elf.read_sections(x.data) if s.sh_type != 3] == \
               [(s.name, s.sh_type, bytes(s.data)) for s in elf.read_sections(host) if s.sh_type != 3]
    if shutil.which("gcc"):
        (tmp_path / "main.c").write_text(MAIN_C)
        r = run(["gcc", tmp_path / "main.c", ours[0], "-o", tmp_path / "prog"])
        assert r.returncode == 0, r.stderr
        assert run([tmp_path / "prog"]).stdout == b"42\n"


def test_llvm22_compressed_members(tmp_path):
    """Members compressed by clang-offload-bundler-22 (CCOB v3, which LLVM 19 cannot read)."""
    bundler22 = need_tool("clang-offload-bundler-22")
    (tmp_path / "p1").write_bytes(b"gfx906 payload")
    (tmp_path / "p2").write_bytes(b"gfx90a payload")
    r = run([bundler22, "-type=o", "-targets=hip-amdgcn-amd-amdhsa--gfx906,hip-amdgcn-amd-amdhsa--gfx90a",
             f"-input={tmp_path / 'p1'}", f"-input={tmp_path / 'p2'}", f"-output={tmp_path / 'b22.co'}", "-compress"])
    assert r.returncode == 0, r.stderr
    lib = io.BytesIO()
    archive.write_archive([("b22.co", (tmp_path / "b22.co").read_bytes())], lib)
    (tmp_path / "lib.a").write_bytes(lib.getvalue())
    outs = _ours(tmp_path, tmp_path / "lib.a", ["hip-amdgcn-amd-amdhsa--gfx90a", "hipv4-amdgcn-amd-amdhsa--gfx906"])
    got = [[(m.name, bytes(m.data)) for m in archive.read_archive(o.read_bytes())] for o in outs]
    assert got == [[("b22-hip-amdgcn-amd-amdhsa--gfx90ab22.bc", b"gfx90a payload")],
                   [("b22-hip-amdgcn-amd-amdhsa--gfx906b22.bc", b"gfx906 payload")]]


def test_missing_and_allow_missing(fat_lib, tmp_path):
    targets = ["openmp-amdgcn-amd-amdhsa--gfx803"]
    r, _ = _llvm_unbundle(tmp_path, fat_lib, targets)
    assert r.returncode == 1
    with pytest.raises(BundleError) as exc:
        _ours(tmp_path, fat_lib, targets)
    assert str(exc.value) == ("no compatible code object found for the target 'openmp-amdgcn-amd-amdhsa--gfx803' "
                              f"in heterogeneous archive library: {fat_lib}")
    assert r.stderr.decode().strip().endswith(str(exc.value))
    assert not list(tmp_path.glob("ours-*")) and not list(tmp_path.glob(".ours*"))  # nothing written
    r, theirs = _llvm_unbundle(tmp_path, fat_lib, ["openmp-amdgcn-amd-amdhsa-gfx906", *targets],
                               ("-allow-missing-bundles",))
    assert r.returncode == 0, r.stderr
    ours = _ours(tmp_path, fat_lib, ["openmp-amdgcn-amd-amdhsa-gfx906", *targets], allow_missing_bundles=True)
    assert ours[1].read_bytes() == theirs[1].read_bytes() == b"!<arch>\n"
    assert ours[0].read_bytes() == theirs[0].read_bytes()


def test_failure_writes_nothing(fat_lib, tmp_path):
    """An error on a later target leaves no archive for earlier ones (LLVM would leave them)."""
    with pytest.raises(BundleError):
        _ours(tmp_path, fat_lib, ["openmp-amdgcn-amd-amdhsa--gfx906", "openmp-amdgcn-amd-amdhsa--gfx803"])
    assert os.listdir(tmp_path) == []


def test_check_input_archive(hip_lib, tmp_path):
    llvm_ar = need_tool("llvm-ar-19")
    (tmp_path / "conf.bin").write_bytes(_binary_bundle([("hip-amdgcn-amd-amdhsa--gfx906", b"a"),
                                                         ("hip-amdgcn-amd-amdhsa--gfx906:sramecc+", b"b")]))
    lib = tmp_path / "libconf.a"
    assert run([llvm_ar, "rc", lib, tmp_path / "conf.bin"]).returncode == 0
    targets = ["hip-amdgcn-amd-amdhsa--gfx906"]
    r, _ = _llvm_unbundle(tmp_path, lib, targets, ("-check-input-archive",))
    assert r.returncode == 1
    with pytest.raises(BundleError) as exc:
        _ours(tmp_path, lib, targets, check_input_archive=True)
    assert str(exc.value) == (f"conflicting TargetIDs [hip-amdgcn-amd-amdhsa--gfx906, "
                              f"hip-amdgcn-amd-amdhsa--gfx906:sramecc+] found in conf.bin of {lib}")
    assert r.stderr.decode().strip().endswith(str(exc.value))
    # Without the check the same archive unbundles: only the plain gfx906 entry matches gfx906.
    _ours(tmp_path, lib, targets)
    # A consistent archive passes the check.
    _ours(tmp_path, hip_lib, targets, check_input_archive=True)


def test_not_an_archive(tmp_path):
    (tmp_path / "x.o").write_bytes(b"Content of device file 1\n")
    r, _ = _llvm_unbundle(tmp_path, tmp_path / "x.o", ["hip-amdgcn-amd-amdhsa--gfx906"])
    assert b"file too small to be an archive" in r.stderr
    with pytest.raises(ArchiveError, match="^file too small to be an archive$"):
        _ours(tmp_path, tmp_path / "x.o", ["hip-amdgcn-amd-amdhsa--gfx906"])
    with pytest.raises(OffloadError, match="No such file"):
        _ours(tmp_path, tmp_path / "missing.a", ["hip-amdgcn-amd-amdhsa--gfx906"])


def test_hostile_names_stay_inside_outputs(tmp_path):
    """Member and entry names come from the file: '/' and control characters never reach a path."""
    bad_id = "hip-amdgcn-amd-amdhsa--gfx906/../../evil"
    data = _binary_bundle([(bad_id, b"payload"), ("hip-amdgcn-amd-amdhsa--gfx906", b"good")])
    lib = io.BytesIO()
    archive.write_archive([("../../x\x01y.o", data)], lib)
    (tmp_path / "lib.a").write_bytes(lib.getvalue())
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    hda.unbundle_archive(tmp_path / "lib.a", ["hip-amdgcn-amd-amdhsa--gfx906"], [out_dir / "dev.a"])
    assert os.listdir(out_dir) == ["dev.a"]
    names = [m.name for m in archive.read_archive((out_dir / "dev.a").read_bytes())]
    assert names == ["x_y-hip-amdgcn-amd-amdhsa--gfx906x_y.bc"]
    assert all("/" not in n and "\x01" not in n for n in names)


def test_usage_errors(hip_lib, tmp_path):
    from offload_tool.errors import UsageError

    with pytest.raises(UsageError):
        hda.unbundle_archive(hip_lib, ["hip-amdgcn-amd-amdhsa--gfx906"], [])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_corrupt_archives_only_raise_offload_error(hip_lib, tmp_path_factory, data):
    buf = bytearray(hip_lib.read_bytes())
    for _ in range(data.draw(st.integers(1, 6))):
        buf[data.draw(st.integers(0, len(buf) - 1))] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        buf = buf[:data.draw(st.integers(0, len(buf)))]
    tmp = tmp_path_factory.mktemp("corrupt")
    (tmp / "c.a").write_bytes(bytes(buf))
    try:
        hda.unbundle_archive(tmp / "c.a", ["hip-amdgcn-amd-amdhsa--gfx906", "openmp-nvptx64-nvidia-cuda--sm_70"],
                             [tmp / "o1.a", tmp / "o2.a"], allow_missing_bundles=True,
                             check_input_archive=data.draw(st.booleans()))
    except OffloadError:
        assert not (tmp / "o1.a").exists() and not (tmp / "o2.a").exists()


_ID_POOL = ["hip-amdgcn-amd-amdhsa--gfx906", "hip-amdgcn-amd-amdhsa--gfx906:xnack+",
            "hipv4-amdgcn-amd-amdhsa--gfx90a:sramecc-:xnack+", "openmp-amdgcn-amd-amdhsa--gfx908",
            "openmp-nvptx64-nvidia-cuda--sm_70", "host-x86_64-unknown-linux-gnu-", "hip-amdgcn-amd-amdhsa--gfx1030",
            "hipv4-amdgcn-amd-amdhsa--gfx906:xnack-"]
_TARGET_POOL = ["hip-amdgcn-amd-amdhsa-gfx906", "hip-amdgcn-amd-amdhsa--gfx906:xnack+",
                "hipv4-amdgcn-amd-amdhsa--gfx906:xnack-", "hip-amdgcn-amd-amdhsa--gfx90a:xnack+:sramecc-",
                "openmp-amdgcn-amd-amdhsa--gfx908", "openmp-nvptx64-nvidia-cuda-sm_70",
                "host-x86_64-unknown-linux-gnu", "hip-amdgcn-amd-amdhsa--gfx1030", "openmp-amdgcn-amd-amdhsa--gfx1030"]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(members=st.lists(st.lists(st.sampled_from(_ID_POOL), min_size=1, max_size=4, unique=True), min_size=1,
                        max_size=4),
       targets=st.lists(st.sampled_from(_TARGET_POOL), min_size=1, max_size=3, unique=True),
       flags=st.fixed_dictionaries({"allow": st.booleans(), "hipomp": st.booleans()}))
def test_random_archives_match_llvm(tmp_path_factory, members, targets, flags):
    """Random binary-bundle members and target lists: the same archives (bytes) or the same error."""
    from offload_tool.rules.bundle_id import validate_bundler_targets

    need_tool("clang-offload-bundler-19")
    tmp = tmp_path_factory.mktemp("rand")
    items = [(f"m{i}.o", _binary_bundle([(e, f"{i}:{e}".encode()) for e in ids])) for i, ids in enumerate(members)]
    lib = io.BytesIO()
    archive.write_archive(items, lib)
    (tmp / "lib.a").write_bytes(lib.getvalue())
    extra = (["-allow-missing-bundles"] if flags["allow"] else []) + (["-hip-openmp-compatible"] if flags["hipomp"]
                                                                      else [])
    r, theirs = _llvm_unbundle(tmp, tmp / "lib.a", targets, extra)
    try:
        std = [str(t) for t in validate_bundler_targets(targets, bundling=False)]
        outs = [tmp / f"ours-{i}.a" for i in range(len(targets))]
        hda.unbundle_archive(tmp / "lib.a", std, outs, allow_missing_bundles=flags["allow"],
                             hip_openmp_compatible=flags["hipomp"])
    except OffloadError as exc:
        assert r.returncode == 1 and r.stderr.decode().strip().endswith(str(exc)), (r.stderr, str(exc))
        return
    assert r.returncode == 0, r.stderr
    for a, b in zip(outs, theirs):
        assert a.read_bytes() == b.read_bytes()
