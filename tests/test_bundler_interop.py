"""offload-bundler against the real clang-offload-bundler 19 and 22: byte identity where LLVM is deterministic,
each side unbundling the other's output, LLVM's lit scenarios and a real hipcc .hip_fatbin."""

from __future__ import annotations

import os
import shutil

import pytest

from conftest import oracle_crashed, find_tool, need_tool, run, run_cli
from offload_tool.ops import bundler_api
from offload_tool.formats import ccob
from offload_tool.formats.bundle import read_binary_bundle

HOST = "host-x86_64-unknown-linux-gnu"
PPC = "openmp-powerpc64le-ibm-linux-gnu"
X86 = "openmp-x86_64-pc-linux-gnu"
LIT_TARGETS = [HOST, PPC, X86]
TEXT_TYPES = ["i", "ii", "cui", "hipi", "d", "ll", "s"]
BINARY_TYPES = ["bc", "gch", "ast"]


def _clean_env(extra=None):
    env = dict(os.environ)
    for k in ("OFFLOAD_BUNDLER_COMPRESS", "OFFLOAD_BUNDLER_VERBOSE", "OFFLOAD_BUNDLER_COMPRESSION_LEVEL",
              "OFFLOAD_BUNDLER_IGNORE_ENV_VAR", "COMPRESSED_BUNDLE_FORMAT_VERSION"):
        env.pop(k, None)
    env.update(extra or {})
    return env


def ours(cwd, *args, env=None):
    e = _clean_env(env)
    e["PYTHONPATH"] = str(__import__("conftest").REPO) + os.pathsep + e.get("PYTHONPATH", "")
    res = run_cli("bundler", *args, cwd=cwd, env=e)
    return res


def llvm(tool, cwd, *args, env=None):
    return run([need_tool(tool), *args], cwd=cwd, env=_clean_env(env))


def ok(res):
    assert res.returncode == 0, res.stderr.decode()
    return res


@pytest.fixture
def lit(tmp_path):
    """Inputs shaped like clang-offload-bundler.c's: a host file per type and two device files."""
    for t in TEXT_TYPES + BINARY_TYPES:
        (tmp_path / f"in.{t}").write_bytes(f"host {t} content\nline two\n".encode() if t in TEXT_TYPES
                                           else bytes(range(256)) * 3)
    (tmp_path / "tgt1").write_bytes(b"Content of device file 1\n")
    (tmp_path / "tgt2").write_bytes(b"Content of device file 2\n")
    (tmp_path / "empty").write_bytes(b"")
    return tmp_path


def _bundle_args(t, targets=LIT_TARGETS, inputs=None, out=None):
    inputs = inputs or [f"in.{t}", "tgt1", "tgt2"]
    return [f"-type={t}", "-targets=" + ",".join(targets), *[f"-input={i}" for i in inputs], f"-output={out or 'b.' + t}"]


@pytest.mark.parametrize("files_type", TEXT_TYPES + BINARY_TYPES)
def test_bundles_byte_identical_to_llvm19(lit, files_type):
    ok(llvm("clang-offload-bundler-19", lit, *_bundle_args(files_type, out="llvm.out")))
    ok(ours(lit, *_bundle_args(files_type, out="ours.out")))
    assert (lit / "ours.out").read_bytes() == (lit / "llvm.out").read_bytes()
    # Unordered targets (CK-TEXTI-UNORDERED): entries keep the user's order.
    order = [X86, HOST, PPC]
    ins = ["tgt2", f"in.{files_type}", "tgt1"]
    ok(llvm("clang-offload-bundler-19", lit, *_bundle_args(files_type, order, ins, "llvm2.out")))
    ok(ours(lit, *_bundle_args(files_type, order, ins, "ours2.out")))
    assert (lit / "ours2.out").read_bytes() == (lit / "llvm2.out").read_bytes()


@pytest.mark.parametrize("align", ["1", "4096", "7"])
def test_binary_alignment_byte_identical(lit, align):
    args = _bundle_args("bc")
    ok(llvm("clang-offload-bundler-19", lit, *args[:-1], "-output=l", f"-bundle-align={align}"))
    ok(ours(lit, *args[:-1], "-output=o", f"-bundle-align={align}"))
    assert (lit / "o").read_bytes() == (lit / "l").read_bytes()
    # HIP device-only bundle (NOHOST) and its -list.
    hip = ["-type=bc", "-targets=hip-amdgcn-amd-amdhsa--gfx900,hipv4-amdgcn-amd-amdhsa-gfx906", "-input=tgt1",
           "-input=tgt2", f"-bundle-align={align}"]
    ok(llvm("clang-offload-bundler-19", lit, *hip, "-output=lh"))
    ok(ours(lit, *hip, "-output=oh"))
    assert (lit / "oh").read_bytes() == (lit / "lh").read_bytes()
    assert ok(ours(lit, "-list", "-type=bc", "-input=lh")).stdout == \
        ok(llvm("clang-offload-bundler-19", lit, "-list", "-type=bc", "-input=lh")).stdout


@pytest.mark.parametrize("tool", ["clang-offload-bundler-19", "clang-offload-bundler-22"])
@pytest.mark.parametrize("files_type", ["ll", "s", "bc"])
@pytest.mark.parametrize("compress", [False, True])
def test_each_side_unbundles_the_other(lit, tool, files_type, compress):
    extra = ["-compress"] if compress else []
    ok(llvm(tool, lit, *_bundle_args(files_type, out="by_llvm"), *extra))
    ok(ours(lit, *_bundle_args(files_type, out="by_ours"), *extra))
    if compress:
        assert ccob.is_compressed((lit / "by_ours").read_bytes())
    want = {HOST: f"in.{files_type}", PPC: "tgt1", X86: "tgt2"}
    for reader, src in ((ours, "by_llvm"), (lambda *a: llvm(tool, *a), "by_ours")):
        for subset in ([X86, HOST, PPC], [PPC]):
            outs = [f"u{n}" for n in range(len(subset))]
            ok(reader(lit, f"-type={files_type}", "-unbundle", "-targets=" + ",".join(subset), f"-input={src}",
                      *[f"-output={o}" for o in outs]))
            for t, o in zip(subset, outs):
                assert (lit / o).read_bytes() == (lit / want[t]).read_bytes(), (reader, src, t)


def test_list_matches_llvm19(lit):
    for t in ("bc", "ll"):
        ok(llvm("clang-offload-bundler-19", lit, *_bundle_args(t, out="b")))
        assert ok(ours(lit, "-list", f"-type={t}", "-input=b")).stdout == \
            ok(llvm("clang-offload-bundler-19", lit, "-list", f"-type={t}", "-input=b")).stdout


def test_no_magic_files(lit):
    """CKLST2 and the 'no magic strings' cases: -list prints nothing; -allow-missing-bundles gives the host
    the whole input and empty device outputs."""
    for t in ("i", "bc"):
        assert ok(ours(lit, "-list", f"-type={t}", "-input=tgt1")).stdout == b""
        ok(ours(lit, f"-type={t}", "-unbundle", "-allow-missing-bundles", f"-targets={HOST},{PPC}", "-input=tgt1",
                "-output=h", "-output=d"))
        assert (lit / "h").read_bytes() == (lit / "tgt1").read_bytes() and (lit / "d").read_bytes() == b""


def test_unknown_host_triple_and_missing_bundles(lit):
    ok(ours(lit, *_bundle_args("bc")))
    res = ours(lit, "-type=bc", "-unbundle", "-targets=host-amdgcn-xxx-linux-gnu", "-input=b.bc", "-output=x")
    assert res.returncode == 1 and b"Can't find bundles for host-amdgcn-xxx-linux-gnu-" in res.stderr
    ok(ours(lit, "-type=bc", "-unbundle", "-allow-missing-bundles", "-targets=host-amdgcn-xxx-linux-gnu",
            "-input=b.bc", "-output=x"))
    ref = llvm("clang-offload-bundler-19", lit, "-type=bc", "-unbundle", "-targets=host-amdgcn-xxx-linux-gnu",
               "-input=b.bc", "-output=x")
    assert oracle_crashed(ref) or (ref.returncode == 1 and b"Can't find bundles for host-amdgcn-xxx-linux-gnu-" in ref.stderr)


@pytest.mark.parametrize("targets, message", [
    (["hip-amdgcn-amd-amdhsa--gfx906"], "Can't find bundles for hip-amdgcn-amd-amdhsa--gfx906"),
    (["hip-amdgcn-amd-amdhsa--gfx906", "hip-amdgcn-amd-amdhsa--gfx803"],
     "Can't find bundles for hip-amdgcn-amd-amdhsa--gfx803 and hip-amdgcn-amd-amdhsa--gfx906"),
    (["hip-amdgcn-amd-amdhsa--gfx906", "hip-amdgcn-amd-amdhsa--gfx1010", "hip-amdgcn-amd-amdhsa--gfx803"],
     "Can't find bundles for hip-amdgcn-amd-amdhsa--gfx1010, hip-amdgcn-amd-amdhsa--gfx803, and "
     "hip-amdgcn-amd-amdhsa--gfx906"),
])
def test_missing_bundle_messages(lit, targets, message):
    """MISS1/2/3."""
    ok(ours(lit, "-type=bc", "-targets=hip-amdgcn-amd-amdhsa--gfx900", "-input=tgt1", "-output=hip.bc"))
    args = ["-type=bc", "-unbundle", "-targets=" + ",".join(targets), "-input=hip.bc",
            *[f"-output=o{n}" for n in range(len(targets))]]
    res = ours(lit, *args)
    assert res.returncode == 1 and res.stderr.decode().strip() == f"offload-bundler: error: {message}"
    ref = llvm("clang-offload-bundler-19", lit, *args)
    if not oracle_crashed(ref):
        assert ref.stderr.decode().strip().endswith(message)


@pytest.mark.parametrize("entry, target, compatible", [
    ("gfx906", "gfx906:xnack-", True), ("gfx906", "gfx906:xnack+", True),
    ("gfx906:xnack+", "gfx906:xnack-", False), ("gfx906:xnack+", "gfx906", False),
    ("gfx906:xnack+", "gfx906:xnack+", True), ("gfx906:sramecc+", "gfx906:sramecc+:xnack-", True),
])
def test_target_id_compatible_extraction(lit, entry, target, compatible):
    """Compatible extraction / NOXNACK / NOGFX906, against LLVM 19's answer."""
    ok(ours(lit, "-type=bc", f"-targets=hip-amdgcn-amd-amdhsa--{entry}", "-input=tgt1", "-output=hip.bc"))
    args = ["-type=bc", "-unbundle", f"-targets=hip-amdgcn-amd-amdhsa--{target}", "-input=hip.bc", "-output=x"]
    res = ours(lit, *args)
    assert (res.returncode == 0) == compatible, res.stderr
    if compatible:
        assert (lit / "x").read_bytes() == (lit / "tgt1").read_bytes()
    assert (llvm("clang-offload-bundler-19", lit, *args).returncode == 0) == compatible


def test_unbundle_assignment_order_matches_llvm(lit):
    """Two entries compatible with one target, two targets compatible with one entry: who gets what follows
    StringMap order in both tools."""
    ok(ours(lit, "-type=bc", "-targets=hip-amdgcn-amd-amdhsa--gfx906,hipv4-amdgcn-amd-amdhsa--gfx906:xnack+",
            "-input=tgt1", "-input=tgt2", "-output=two.bc"))
    for targets in (["hip-amdgcn-amd-amdhsa--gfx906:xnack+", "hipv4-amdgcn-amd-amdhsa--gfx906:sramecc+:xnack+"],
                    ["hipv4-amdgcn-amd-amdhsa--gfx906:xnack+", "hip-amdgcn-amd-amdhsa--gfx906:sramecc-:xnack+"],
                    ["hip-amdgcn-amd-amdhsa-unknown-gfx906:xnack+", "hipv4-amdgcn-amd-amdhsa--gfx906:xnack+"]):
        args = ["-type=bc", "-unbundle", "-allow-missing-bundles", "-targets=" + ",".join(targets), "-input=two.bc"]
        ok(ours(lit, *args, "-output=a1", "-output=a2"))
        ok(llvm("clang-offload-bundler-19", lit, *args, "-output=b1", "-output=b2"))
        assert (lit / "a1").read_bytes() == (lit / "b1").read_bytes()
        assert (lit / "a2").read_bytes() == (lit / "b2").read_bytes()


def test_hip_hipv4_and_openmp_compatibility(lit):
    """hip <-> hipv4 via -type=o on a non-object (binary fallback); -hip-openmp-compatible both ways."""
    ok(ours(lit, "-type=o", "-targets=hip-amdgcn-amd-amdhsa--gfx906", "-input=tgt1", "-output=h.o"))
    assert read_binary_bundle((lit / "h.o").read_bytes())  # binary fallback
    ok(ours(lit, "-type=o", "-unbundle", "-targets=hipv4-amdgcn-amd-amdhsa--gfx906", "-input=h.o", "-output=x"))
    assert (lit / "x").read_bytes() == b"Content of device file 1\n"
    args = ["-type=o", "-unbundle", "-targets=openmp-amdgcn-amd-amdhsa--gfx906", "-input=h.o", "-output=y"]
    assert ours(lit, *args).returncode == 1
    ok(ours(lit, *args, "-hip-openmp-compatible"))
    ok(llvm("clang-offload-bundler-19", lit, *args, "-hip-openmp-compatible"))


def test_compressed_lit_scenario(lit):
    """clang-offload-bundler-zstd.c: -compress -verbose sizes agree between bundling and unbundling;
    -compression-level=9; -bundle-align=4096 with -compress; zlib variant (ours only, LLVM builds use zstd)."""
    res = ok(ours(lit, "-type=bc", "-targets=hip-amdgcn-amd-amdhsa--gfx900,hip-amdgcn-amd-amdhsa--gfx906",
                  "-input=tgt1", "-input=tgt2", "-output=c.bc", "-compress", "-verbose"))
    lines = res.stderr.decode().splitlines()
    size = next(line for line in lines if line.startswith("Total file size (including headers)")).split(": ")[1]
    res = ok(llvm("clang-offload-bundler-19", lit, "-type=bc", "-unbundle", "-verbose",
                  "-targets=hip-amdgcn-amd-amdhsa--gfx900,hip-amdgcn-amd-amdhsa--gfx906", "-input=c.bc", "-output=a",
                  "-output=b"))
    assert f"Total file size (from header): {size}" in res.stderr.decode() and b"Hashes match: Yes" in res.stderr
    assert (lit / "a").read_bytes() == (lit / "tgt1").read_bytes() and (lit / "b").read_bytes() == (lit / "tgt2").read_bytes()
    res = ok(ours(lit, "-type=bc", "-targets=hip-amdgcn-amd-amdhsa--gfx900", "-input=tgt1", "-output=c9",
                  "-compress", "-verbose", "-compression-level=9"))
    assert b"Compression level: 9" in res.stderr
    ok(ours(lit, "-type=bc", "-bundle-align=4096", "-compress", "-targets=hip-amdgcn-amd-amdhsa--gfx900,"
            "hip-amdgcn-amd-amdhsa--gfx906", "-input=tgt1", "-input=tgt2", "-output=ca"))
    ok(llvm("clang-offload-bundler-19", lit, "-type=bc", "-bundle-align=4096", "-unbundle",
            "-targets=hip-amdgcn-amd-amdhsa--gfx906", "-input=ca", "-output=z"))
    assert (lit / "z").read_bytes() == (lit / "tgt2").read_bytes()
    bundler_api.bundle("bc", ["hip-amdgcn-amd-amdhsa--gfx906"], [str(lit / "tgt2")], str(lit / "zl"),
                       compress="zlib", env={})
    assert ccob.read_header((lit / "zl").read_bytes()).method == "zlib"
    res = ok(llvm("clang-offload-bundler-19", lit, "-type=bc", "-unbundle", "-verbose",
                  "-targets=hip-amdgcn-amd-amdhsa--gfx906", "-input=zl", "-output=w"))
    assert b"Decompression method: zlib" in res.stderr and (lit / "w").read_bytes() == (lit / "tgt2").read_bytes()


@pytest.fixture
def host_object(tmp_path):
    clang = need_tool("clang-19")
    (tmp_path / "m.c").write_text("int answer(void) { return 42; }\nint main(void) { return answer() - 42; }\n")
    ok(run([clang, "-c", "m.c", "-o", "m.o"], cwd=tmp_path))
    (tmp_path / "tgt1").write_bytes(b"Content of device file 1\n")
    (tmp_path / "tgt2").write_bytes(b"Content of device file 2\n")
    return tmp_path


def test_object_bundles_interop(host_object):
    """-type=o with a real ELF host object: LLVM lists/unbundles ours and we unbundle LLVM's; the host
    entry is a linkable object without bundle sections."""
    d = host_object
    args = ["-type=o", f"-targets={HOST},{PPC},hip-amdgcn-amd-amdhsa--gfx906", "-input=m.o", "-input=tgt1",
            "-input=tgt2"]
    ok(ours(d, *args, "-output=ours.o"))
    ok(llvm("clang-offload-bundler-19", d, *args, "-output=llvm.o"))
    assert ok(llvm("clang-offload-bundler-19", d, "-list", "-type=o", "-input=ours.o")).stdout == \
        ok(ours(d, "-list", "-type=o", "-input=llvm.o")).stdout
    un = ["-type=o", "-unbundle", f"-targets=hip-amdgcn-amd-amdhsa--gfx906,{HOST},{PPC}"]
    ok(llvm("clang-offload-bundler-19", d, *un, "-input=ours.o", "-output=l1", "-output=l2", "-output=l3"))
    ok(ours(d, *un, "-input=llvm.o", "-output=o1", "-output=o2", "-output=o3"))
    for f in ("l1", "o1"):
        assert (d / f).read_bytes() == (d / "tgt2").read_bytes()
    for f in ("l3", "o3"):
        assert (d / f).read_bytes() == (d / "tgt1").read_bytes()
    readelf = find_tool("llvm-readelf-19")
    if readelf:
        sections = run([readelf, "-S", "o2"], cwd=d).stdout
        assert b"__CLANG_OFFLOAD_BUNDLE__" not in sections and b".text" in sections
    ok(run([need_tool("clang-19"), "o2", "-o", "prog"], cwd=d))
    assert run([d / "prog"]).returncode == 0


@pytest.fixture(scope="module")
def hip_fatbin(tmp_path_factory):
    """A real `.hip_fatbin` from Debian's hipcc (clang 15 bundler: `host-x86_64-unknown-linux` entry)."""
    hipcc = need_tool("hipcc")
    objcopy = need_tool("llvm-objcopy-19") if find_tool("llvm-objcopy-19") else need_tool("llvm-objcopy")
    d = tmp_path_factory.mktemp("hip")
    (d / "k.hip").write_text("#include <hip/hip_runtime.h>\n"
                             "__global__ void k(int *p) { p[threadIdx.x] = threadIdx.x; }\n")
    env = dict(os.environ, HIP_PLATFORM="amd")
    res = run([hipcc, "--offload-arch=gfx90a", "-c", "k.hip", "-o", "k.o"], cwd=d, env=env)
    if res.returncode != 0:
        pytest.skip("hipcc could not compile: " + res.stderr.decode()[-300:])
    ok(run([objcopy, "--dump-section", ".hip_fatbin=fb.bin", "k.o"], cwd=d))
    return d


def test_real_hip_fatbin(hip_fatbin, tmp_path):
    d = hip_fatbin
    entries = read_binary_bundle((d / "fb.bin").read_bytes())
    assert [e.bundle_entry_id for e in entries] == ["host-x86_64-unknown-linux", "hipv4-amdgcn-amd-amdhsa--gfx90a"]
    assert [e.offset for e in entries] == [4096, 4096]  # -bundle-align=4096, empty host entry
    listed = ok(ours(d, "-list", "-type=o", "-input=fb.bin")).stdout
    assert listed == ok(llvm("clang-offload-bundler-19", d, "-list", "-type=o", "-input=fb.bin")).stdout
    for target in ("hipv4-amdgcn-amd-amdhsa--gfx90a", "hip-amdgcn-amd-amdhsa-gfx90a:xnack-",
                   "hipv4-amdgcn-amd-amdhsa-unknown-gfx90a"):
        ok(ours(d, "-type=o", "-unbundle", f"-targets={target}", "-input=fb.bin", f"-output={tmp_path}/dev"))
        assert (tmp_path / "dev").read_bytes() == bytes(entries[1].data)
        assert (tmp_path / "dev").read_bytes()[:4] == b"\x7fELF"
    ok(llvm("clang-offload-bundler-19", d, "-type=o", "-unbundle", "-targets=hipv4-amdgcn-amd-amdhsa--gfx90a",
            "-input=fb.bin", f"-output={tmp_path}/dev19"))
    assert (tmp_path / "dev19").read_bytes() == bytes(entries[1].data)
    # Re-making it the way clang 19's HIP driver does is byte-identical to LLVM 19.
    shutil.copy(tmp_path / "dev", tmp_path / "dev.o")
    mk = ["-type=o", "-bundle-align=4096", "-targets=host-x86_64-unknown-linux,hipv4-amdgcn-amd-amdhsa--gfx90a",
          "-input=/dev/null", "-input=dev.o"]
    ok(ours(tmp_path, *mk, "-output=ours.hipfb"))
    ok(llvm("clang-offload-bundler-19", tmp_path, *mk, "-output=llvm.hipfb"))
    assert (tmp_path / "ours.hipfb").read_bytes() == (tmp_path / "llvm.hipfb").read_bytes()
    b = bundler_api.read_bundle(tmp_path / "ours.hipfb")
    assert b.kind == "binary" and b.ids == ["host-x86_64-unknown-linux--", "hipv4-amdgcn-amd-amdhsa--gfx90a"]


def test_read_bundle_api_autodetect(lit):
    ok(ours(lit, *_bundle_args("ll")))
    b = bundler_api.read_bundle(lit / "b.ll")
    assert b.kind == "text" and b.ids == [HOST + "-", PPC + "-", X86 + "-"] and b.compression is None
    assert bytes(b.get(PPC + "-").data) == b"Content of device file 1\n"
    ok(ours(lit, *_bundle_args("bc"), "-compress"))
    raw = (lit / "b.bc").read_bytes()
    b = bundler_api.read_bundle(raw)
    assert b.kind == "binary" and b.compression.method == "zstd" and len(b.entries) == 3
    assert bundler_api.list_bundle_ids("bc", lit / "b.bc") == [HOST + "-", PPC + "-", X86 + "-"]


def test_hip_archive_unbundling_via_cli(lit):
    """The lit HIP archive scenario through offload-bundler -type=a: two device-only bundles in an llvm-ar
    archive give one archive per target whose members are named `<stem>-<entry id>...` as LLVM names them;
    -allow-missing-bundles gives an empty archive; LLVM 19 agrees on the member names."""
    ar = need_tool("llvm-ar-19")
    ok(ours(lit, "-type=bc", "-targets=hip-amdgcn-amd-amdhsa--gfx900,hip-amdgcn-amd-amdhsa--gfx906",
            "-input=tgt1", "-input=tgt2", "-output=hip_bundle1.bc"))
    ok(ours(lit, "-type=bc", "-compress", "-targets=hip-amdgcn-amd-amdhsa--gfx900,hip-amdgcn-amd-amdhsa--gfx906",
            "-input=tgt2", "-input=tgt1", "-output=hip_bundle2.bc"))
    ok(run([ar, "cr", "lib.a", "hip_bundle1.bc", "hip_bundle2.bc"], cwd=lit))
    args = ["-type=a", "-unbundle", "-targets=hip-amdgcn-amd-amdhsa--gfx900,hip-amdgcn-amd-amdhsa--gfx906",
            "-input=lib.a"]
    ok(ours(lit, *args, "-output=o900.a", "-output=o906.a"))
    ok(llvm("clang-offload-bundler-19", lit, *args, "-output=l900.a", "-output=l906.a"))
    for a, b in (("o900.a", "l900.a"), ("o906.a", "l906.a")):
        names_ours = run([ar, "t", a], cwd=lit).stdout.split()
        assert names_ours == run([ar, "t", b], cwd=lit).stdout.split() and len(names_ours) == 2
        assert names_ours[0].startswith(b"hip_bundle1-hip-amdgcn-amd-amdhsa--gfx9")
    ok(run([ar, "x", "o906.a", "hip_bundle1-hip-amdgcn-amd-amdhsa--gfx906hip_bundle1.bc"], cwd=lit))
    assert (lit / "hip_bundle1-hip-amdgcn-amd-amdhsa--gfx906hip_bundle1.bc").read_bytes() == b"Content of device file 2\n"
    res = ours(lit, "-type=a", "-unbundle", "-targets=hip-amdgcn-amd-amdhsa--gfx803", "-input=lib.a", "-output=x.a")
    assert res.returncode == 1 and b"no compatible code object found for the target " \
        b"'hip-amdgcn-amd-amdhsa--gfx803' in heterogeneous archive library" in res.stderr
    ok(ours(lit, "-type=a", "-unbundle", "-allow-missing-bundles", "-targets=hip-amdgcn-amd-amdhsa--gfx803",
            "-input=lib.a", "-output=x.a"))
    assert (lit / "x.a").read_bytes() == b"!<arch>\n"
    res = ours(lit, "-type=a", "-unbundle", "-targets=hip-amdgcn-amd-amdhsa--gfx906", "-input=tgt1", "-output=y.a")
    assert res.returncode == 1 and b"file too small to be an archive" in res.stderr


def test_duplicate_standardized_targets(lit, tmp_path):
    """Two spellings of one target: bundling writes two entries with the same stored ID (as LLVM 19);
    unbundling keeps one worklist item, so only the last output is written."""
    args = ["-type=bc", "-targets=hip-amdgcn-amd-amdhsa-gfx906,hip-amdgcn-amd-amdhsa--gfx906", "-input=tgt1",
            "-input=tgt2"]
    ok(ours(lit, *args, "-output=o.bc"))
    ok(llvm("clang-offload-bundler-19", lit, *args, "-output=l.bc"))
    assert (lit / "o.bc").read_bytes() == (lit / "l.bc").read_bytes()
    for tool, out in ((ours, "x"), (lambda *a: llvm("clang-offload-bundler-19", *a), "y")):
        (lit / out).mkdir()
        ok(tool(lit, "-type=bc", "-unbundle", "-targets=hip-amdgcn-amd-amdhsa-gfx906,hip-amdgcn-amd-amdhsa--gfx906",
                "-input=l.bc", f"-output={out}/a", f"-output={out}/b"))
    assert sorted(os.listdir(lit / "x")) == sorted(os.listdir(lit / "y")) == ["b"]
    assert (lit / "x" / "b").read_bytes() == (lit / "y" / "b").read_bytes()


_POOL = ["host-x86_64-unknown-linux-gnu", "host-x86_64-unknown-linux", "openmp-nvptx64-nvidia-cuda-sm_70",
         "openmp-nvptx64-nvidia-cuda--sm_80", "hip-amdgcn-amd-amdhsa--gfx906", "hipv4-amdgcn-amd-amdhsa-gfx90a:xnack+",
         "hip-amdgcn-amd-amdhsa-unknown-gfx1030", "openmp-x86_64-pc-linux-gnu", "hipv4-amdgcn-amd-amdhsa--gfx908:sramecc+:xnack-"]

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(_POOL[2:]), unique=True, max_size=5), st.sampled_from(_POOL[:2]),
       st.lists(st.binary(max_size=600), min_size=7, max_size=7), st.sampled_from(["bc", "ll", "i", "s", "o"]),
       st.sampled_from([1, 3, 64, 4096]))
def test_random_bundles_byte_identical_to_llvm19(tmp_path, devices, host, payloads, files_type, align):
    exe = need_tool("clang-offload-bundler-19")
    targets = [host] + devices
    d = tmp_path / f"r{abs(hash((tuple(targets), files_type, align, tuple(payloads))))}"
    d.mkdir()
    inputs = []
    for n, _ in enumerate(targets):
        (d / f"in{n}").write_bytes(payloads[n])
        inputs.append(str(d / f"in{n}"))
    args = [f"-type={files_type}", "-targets=" + ",".join(targets), *[f"-input={i}" for i in inputs],
            f"-bundle-align={align}"]
    ok(run([exe, *args, f"-output={d}/llvm"]))
    bundler_api.bundle(files_type, targets, inputs, str(d / "ours"), bundle_align=align, env={})
    assert (d / "ours").read_bytes() == (d / "llvm").read_bytes()
    listed = run([exe, "-list", f"-type={files_type}", f"-input={d}/ours"]).stdout.decode().split("\n")[:-1]
    assert listed == bundler_api.list_bundle_ids(files_type, d / "llvm", llvm_order=True, env={})
