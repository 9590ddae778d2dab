"""`inspect`: every device image in real clang 19/22, nvcc 13 and hipcc output, bundles (plain,
compressed, text, object), packages and archives; JSON fields agree with what
`llvm-objdump --offloading`, `clang-offload-bundler -list` and the nvcc gencodes say."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import offload_samples as samples
from conftest import find_tool, need_tool, run, run_cli
from offload_tool.formats import fatbin
from offload_tool.errors import OffloadError
from offload_tool.cli.inspect_output import format_table
from offload_tool.ops.inspector import AMBIGUOUS_PRODUCER, inspect_buffer, inspect_file
from offload_tool.formats.offload_binary import make_image, write_offload_binary

REQUIRED_FIELDS = {"path", "container", "producer", "triple", "arch", "image_kind", "size", "compressed", "sha256"}


@pytest.fixture(scope="module")
def omp():
    return samples.openmp()


@pytest.fixture(scope="module")
def cuda():
    return samples.cuda()


@pytest.fixture(scope="module")
def hip():
    return samples.hip()


def _json(*paths, extra=()) -> list[dict]:
    res = run_cli("tool", "inspect", "--json", "--hash", *extra, *paths)  # sha256 only with --hash
    assert res.returncode == 0, res.stderr
    images = json.loads(res.stdout)
    for img in images:
        assert REQUIRED_FIELDS <= img.keys()
    return images


def _objdump(tool: str, path) -> list[dict[str, str]]:
    res = run([tool, "--offloading", path])
    assert res.returncode == 0, res.stderr
    images: list[dict[str, str]] = []
    for line in res.stdout.decode().splitlines():
        if line.startswith("OFFLOADING IMAGE ["):
            images.append({})
        elif images and line[:16].strip() in ("kind", "arch", "triple", "producer"):
            images[-1][line[:16].strip()] = line[16:]
    return images


# ---------------------------------------------------------------------------------------------
# OpenMP (OffloadBinary in .llvm.offloading) vs llvm-objdump


@pytest.mark.parametrize("name,version", [
    ("omp19_nv.o", 19), ("omp19_amd.o", 19), ("omp19_nv.exe", 19), ("omp19_amd.exe", 19), ("omp19_nv.so", 19),
    ("omp22.o", 22),
])
def test_openmp_images_match_llvm_objdump(omp, name, version):
    objdump = need_tool(f"llvm-objdump-{version}")
    path = samples.need(omp, name)
    ours = _json(path, extra=[f"--llvm-version={version}"])
    theirs = _objdump(objdump, path)
    assert len(ours) == len(theirs) >= 1
    for o, t in zip(ours, theirs):
        assert (o["image_kind"], o["arch"], o["triple"], o["producer"]) == \
               (t["kind"], t["arch"], t["triple"], t["producer"])
        assert o["container"] == "offload-binary" and o["wrappers"] == ["elf"]
        assert o["path"].startswith(f"{path}:.llvm.offloading[")
        assert o["compressed"] is False and len(o["sha256"]) == 64


def test_host_bitcode(omp):
    """`-emit-llvm` host bitcode carries the package in its `.llvm.offloading` global."""
    path = samples.need(omp, "omp19_nv.bc")
    (img,) = _json(path)
    assert (img["arch"], img["triple"], img["producer"], img["image_kind"]) == \
        ("sm_80", "nvptx64-nvidia-cuda", "openmp", "llvm ir")  # -emit-llvm: the device side is bitcode too
    assert img["wrappers"] == ["bitcode"]


def test_omp22_lists_both_vendors(omp):
    path = samples.need(omp, "omp22.o")
    got = {(i["triple"], i["arch"]) for i in _json(path)}
    assert got == {("nvptx64-nvidia-cuda", "sm_80"), ("amdgcn-amd-amdhsa", "gfx90a")}


def test_sha256_and_size_are_of_the_image(omp):
    packager = need_tool("clang-offload-packager-19")
    path = samples.need(omp, "omp19_nv.o")
    (img,) = _json(path)
    out = samples.workdir() / "extracted_sm80.o"
    assert run([packager, path, f"--image=file={out},arch=sm_80"]).returncode == 0
    data = out.read_bytes()
    assert img["size"] == len(data) and img["sha256"] == hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------------------------
# NVIDIA fat binaries


@pytest.mark.parametrize("name,section", [("nvcc.o", ".nv_fatbin"), ("nvcc.fatbin", None), ("nvcc.exe", ".nv_fatbin")])
def test_nvcc_images(cuda, name, section):
    need_tool("nvcc")
    path = samples.need(cuda, name)
    images = _json(path)
    got = {(i["image_kind"], i["arch"]) for i in images}
    assert samples.NVCC_IMAGES <= got
    if name != "nvcc.exe":  # a program may also carry the CUDA runtime's own fat binary
        assert got == samples.NVCC_IMAGES and len(images) == 3
    for i in images:
        assert i["container"] == "fatbin" and i["producer"] == "cuda" and i["triple"] == "nvptx64-nvidia-cuda"
        assert i["path"].startswith(str(path) + (f":{section}[" if section else "["))
        # nvcc 13 compresses PTX (zstd) but stores plain (non -rdc) cubins raw.
        assert i["compressed"] is (i["image_kind"] == "ptx")


def test_nvcc_cubin_hash_matches_nvcc_cubin(cuda):
    obj, cubin = samples.need(cuda, "nvcc.o", "sm80.cubin")
    (img,) = [i for i in _json(obj) if i["arch"] == "sm_80"]
    assert img["sha256"] == hashlib.sha256(cubin.read_bytes()).hexdigest()


def test_rdc_object(cuda):
    path = samples.need(cuda, "rdc.o")
    images = _json(path)
    assert [(i["image_kind"], i["arch"]) for i in images] == [("cubin", "sm_80"), ("cubin", "sm_90a"), ("ptx", "sm_90a")]
    assert all(i["path"].startswith(f"{path}:__nv_relfatbin[") and i["compressed"] for i in images)


def test_clang_cuda_objects(cuda):
    """clang 22 CUDA: `.nv_fatbin` written by CUDA's fatbinary (old model), OffloadBinary (new driver, rdc)."""
    old, new = samples.need(cuda, "clang22_cuda.o", "clang22_rdc.o")
    images = _json(old)
    assert [(i["container"], i["image_kind"], i["arch"]) for i in images] == [("fatbin", "cubin", "sm_80"),
                                                                              ("fatbin", "cubin", "sm_90")]
    (img,) = _json(new)
    theirs = _objdump(need_tool("llvm-objdump-22"), new)
    assert [(img["image_kind"], img["arch"], img["triple"], img["producer"])] == \
        [(t["kind"], t["arch"], t["triple"], t["producer"]) for t in theirs]


# ---------------------------------------------------------------------------------------------
# HIP and clang offload bundles vs clang-offload-bundler -list


def _bundler_ids(path, type_):
    bundler = need_tool("clang-offload-bundler-19")
    res = run([bundler, "-list", f"-type={type_}", f"-input={path}"])
    assert res.returncode == 0, res.stderr
    return {i for i in res.stdout.decode().split() if not i.startswith("host-")}


@pytest.mark.parametrize("name,type_,container,compressed", [
    ("bundle.bc", "bc", "bundle", False),
    ("bundle_ccob.bc", "bc", "bundle", True),
    ("bundle_obj.o", "o", "object-bundle", False),
    ("bundle_text.ll", "ll", "text-bundle", False),
])
def test_bundles_match_bundler_list(hip, name, type_, container, compressed):
    path = samples.need(hip, name)
    images = _json(path)
    assert {i["bundle_entry_id"] for i in images} == \
        _bundler_ids(path, type_)
    for i in images:
        assert i["container"] == container and i["compressed"] is compressed
        assert i["producer"] in ("hipv4", "openmp")
        assert i["triple"] == "amdgcn-amd-amdhsa"
    if name != "bundle_text.ll":
        assert {(i["arch"], i["image_kind"]) for i in images} == {("gfx90a", "elf"), ("gfx906:xnack+", "elf")}


def test_bundle_entry_hash_matches_unbundled(hip, tmp_path):
    bundler = need_tool("clang-offload-bundler-19")
    path = samples.need(hip, "bundle_ccob.bc")
    out = tmp_path / "gfx90a.co"
    assert run([bundler, "-unbundle", "-type=bc", "-targets=hipv4-amdgcn-amd-amdhsa--gfx90a", f"-input={path}",
                f"-output={out}"]).returncode == 0
    (img,) = [i for i in _json(path) if i["arch"] == "gfx90a"]
    assert img["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert img["wrappers"] == ["ccob"]


def test_hipcc_object(hip, tmp_path):
    path = samples.need(hip, "hipcc.o")
    images = _json(path)
    assert {i["arch"] for i in images} == {"gfx90a", "gfx906"}
    assert all(i["path"].startswith(f"{path}:.hip_fatbin[") and i["image_kind"] == "elf" for i in images)
    # Same IDs as the bundler lists for the section's contents.
    objcopy = need_tool("llvm-objcopy-19")
    sec = tmp_path / "hip_fatbin.bin"
    assert run([objcopy, f"--dump-section=.hip_fatbin={sec}", path, tmp_path / "junk.o"]).returncode == 0
    assert {i["bundle_entry_id"] for i in images} == _bundler_ids(sec, "bc")


def test_hipcc_program_lists_every_translation_unit(hip):
    """A linked program's .hip_fatbin holds one bundle per object, 4096-aligned."""
    exe, obj = samples.need(hip, "hipcc.exe", "hipcc.o")
    images = _json(exe)
    assert len(images) == 4
    assert {i["arch"] for i in images} == {"gfx90a", "gfx906"}
    offsets = {i["path"].split("@")[1].split("[")[0] for i in images}
    assert len(offsets) == 2 and "0x0" in offsets and all(int(o, 16) % 4096 == 0 for o in offsets)
    # The first translation unit's code objects are the ones in its object file.
    assert {i["sha256"] for i in _json(obj)} <= {i["sha256"] for i in images}


# ---------------------------------------------------------------------------------------------
# Packages: producer value 3, nesting


def test_hip_producer_is_reported_as_ambiguous(hip):
    path = samples.need(hip, "hip.pkg")
    images = _json(path)
    (amd,) = [i for i in images if i["triple"] == "amdgcn-amd-amdhsa"]
    assert amd["producer"] == AMBIGUOUS_PRODUCER and "LLVM" in amd["producer_note"]
    (amd19,) = [i for i in _json(path, extra=["--llvm-version=19"]) if i["triple"] == "amdgcn-amd-amdhsa"]
    assert amd19["producer"] == "hip" and "producer_note" not in amd19
    for version in (19, 22):
        objdump = find_tool(f"llvm-objdump-{version}")
        if objdump:
            (theirs,) = [t for t in _objdump(objdump, path) if t["triple"] == "amdgcn-amd-amdhsa"]
            (ours,) = [i for i in _json(path, extra=[f"--llvm-version={version}"]) if i["triple"] == "amdgcn-amd-amdhsa"]
            assert ours["producer"] == theirs["producer"]
    table = run_cli("tool", "inspect", path).stdout.decode()
    assert "hip?" in table and "note: hip?:" in table


def test_fatbin_inside_a_package_is_unwrapped(hip, cuda):
    path = samples.need(hip, "hip.pkg")
    samples.need(cuda, "nvcc.fatbin")
    nested = [i for i in _json(path) if i["container"] == "fatbin"]
    assert {(i["image_kind"], i["arch"]) for i in nested} == samples.NVCC_IMAGES
    assert all(i["wrappers"] == ["offload-binary"] and i["producer"] == "cuda" for i in nested)


def test_archive_member_by_member(hip):
    path = samples.need(hip, "mixed.a")
    images = _json(path)
    members = {i["path"].split(")")[0] + ")" for i in images}
    assert f"{path}(bundle_obj.o)" in members
    assert all(i["wrappers"][0] == "archive" for i in images)
    ccob = [i for i in images if i["path"].startswith(f"{path}(bundle_ccob.bc)")]
    assert ccob and all(i["compressed"] and i["wrappers"] == ["archive", "ccob"] for i in ccob)
    if samples.cuda().get("nvcc.o"):
        assert any(i["path"].startswith(f"{path}(nvcc.o):.nv_fatbin[") for i in images)


def test_table_output(cuda):
    path = samples.need(cuda, "nvcc.fatbin")
    res = run_cli("tool", "inspect", "--hash", path)
    assert res.returncode == 0
    lines = res.stdout.decode().splitlines()
    assert lines[0].split() == ["PATH", "CONTAINER", "PRODUCER", "TRIPLE", "ARCH", "IMAGE_KIND", "SIZE", "COMPRESSED",
                                "SHA256"]
    assert len(lines) == 4 and all("sm_" in ln for ln in lines[1:])


def test_file_without_images_lists_nothing(tmp_path):
    p = tmp_path / "plain.txt"
    p.write_text("hello\n")
    assert inspect_file(str(p)) == []
    assert _json(p) == []


# ---------------------------------------------------------------------------------------------
# Bad input: one error line, status 1, never a traceback; corruption only raises OffloadError


def _nested_sample() -> bytes:
    """A package holding a fat binary and a plain image."""
    fb = fatbin.write_fatbin([fatbin.make_entry(fatbin.KIND_ELF, 80, b"\x7fELF" + bytes(20)),
                              fatbin.make_entry(fatbin.KIND_PTX, 90, b".version 9.0\n")])
    return (write_offload_binary(make_image(fb, {"triple": "nvptx64-nvidia-cuda", "arch": "sm_80"},
                                            image_kind=4, offload_kind=2))
            + write_offload_binary(make_image(b"\x7fELF" + bytes(30), {"triple": "amdgcn-amd-amdhsa", "arch": "gfx90a"},
                                              image_kind=1, offload_kind=1)))


def test_nested_sample():
    images = inspect_buffer(_nested_sample(), "x")
    assert [(i.container, i.arch, i.image_kind) for i in images] == [
        ("fatbin", "sm_80", "cubin"), ("fatbin", "sm_90", "ptx"), ("offload-binary", "gfx90a", "elf")]
    assert "sm_80" in format_table(images)


@pytest.mark.parametrize("name", ["nvcc.fatbin", "nvcc.o"])
def test_truncated_real_inputs_give_one_error_line(cuda, tmp_path, name):
    src = samples.need(cuda, name)
    data = src.read_bytes()
    for cut in (len(data) // 3, len(data) - 100):
        bad = tmp_path / f"cut{cut}_{name}"
        bad.write_bytes(data[:cut])
        res = run_cli("tool", "inspect", bad)
        err = res.stderr.decode().strip().splitlines()
        assert res.returncode == 1 and len(err) == 1 and err[0].startswith("offload-tool: error: "), res.stderr
        assert res.stdout == b""


def test_missing_file_is_one_error_line(tmp_path):
    res = run_cli("tool", "inspect", tmp_path / "nope.o")
    assert res.returncode == 1 and res.stderr.decode().count("\n") == 1 and b"nope.o" in res.stderr


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_corruption_only_raises_offload_error(data):
    blob = bytearray(_nested_sample())
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.integers(0, len(blob) - 1))
        blob[pos] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        blob = blob[: data.draw(st.integers(0, len(blob)))]
    try:
        for img in inspect_buffer(bytes(blob), "fuzz"):
            assert len(img.sha256) == 64
    except OffloadError:
        pass


def test_split_hip_fatbin_bundles():
    import io
    from offload_tool.formats.bundle import BundleEntry, write_binary_bundle
    from offload_tool.formats.ccob import split_bundles

    def _split_bundles(data):
        return list(split_bundles(data))

    def bundle(payload: bytes) -> bytes:
        f = io.BytesIO()
        write_binary_bundle([BundleEntry("host-x86_64-unknown-linux--", b""),
                             BundleEntry("hipv4-amdgcn-amd-amdhsa--gfx90a", payload)], f, 4096)
        return f.getvalue()

    a, b = bundle(b"\x7fELF-one"), bundle(b"\x7fELF-two")
    section = a + bytes(-len(a) % 4096) + b + bytes(100)
    parts = _split_bundles(section)
    assert [(off, bytes(p)) for off, p in parts] == [(0, a), (len(a) + (-len(a) % 4096), b)]
    with pytest.raises(OffloadError, match="no bundle at offset"):
        _split_bundles(a + b"garbage!" + b)
    # Compressed bundles padded to 4 KiB, mixed with plain ones; trailing padding ends the list.
    from offload_tool.formats import ccob
    za, zb = ccob.compress(a), ccob.compress(b, version=3)
    pad = lambda x: x + bytes(-len(x) % 4096)  # noqa: E731
    seq = pad(za) + pad(zb) + pad(a)
    assert [(off, bytes(p)) for off, p in _split_bundles(seq)] == [
        (0, za), (len(pad(za)), zb), (len(pad(za)) + len(pad(zb)), a)]
    assert [(off, bytes(p)) for off, p in _split_bundles(pad(za))] == [(0, za)]
    assert _split_bundles(b"not a bundle")[0][0] == 0  # not a sequence: one part, the caller decides
    with pytest.raises(OffloadError, match="compressed bundle at offset 0x1000: .*version 0"):
        _split_bundles(pad(za) + b"CCOB" + bytes(40))


def test_many_bundles_in_a_file_are_bounded_by_the_budget():
    """A file of thousands of small bundles back to back is listed bundle by bundle (found lazily,
    each charged to the `entries` budget), and a budget that is too small stops it with one error."""
    import io
    from offload_tool import budget
    from offload_tool.errors import BudgetError
    from offload_tool.formats.bundle import BundleEntry, write_binary_bundle

    f = io.BytesIO()
    write_binary_bundle([BundleEntry("hipv4-amdgcn-amd-amdhsa--gfx90a", b"\x7fELF" + bytes(60))], f)
    one = f.getvalue() + bytes(-len(f.getvalue()) % 512)
    data = one * 4096
    images = inspect_buffer(data, "many.hip_fatbin", keep_data=False)
    assert len(images) == 4096 and images[-1].path == f"many.hip_fatbin@{(4095 * 512):#x}[hipv4-amdgcn-amd-amdhsa--gfx90a]"
    with budget.run(budget.DEFAULT_LIMITS.replace(entries=1000)):
        with pytest.raises(BudgetError):
            inspect_buffer(data, "many.hip_fatbin", keep_data=False)


# --- a linked program's .hip_fatbin, dumped to a file of its own ---------------------------------

#: A HIP source that needs neither the HIP headers nor the device libraries: the kernel's launch
#: stub only needs `hipLaunchKernel` declared.
_HEADERLESS_HIP = """\
struct dim3 { unsigned x, y, z; };
typedef struct ihipStream_t *hipStream_t;
extern "C" int hipLaunchKernel(const void *, dim3, dim3, void **, unsigned long, hipStream_t);
__attribute__((global)) void KERNEL(int *p) { *p = VALUE; }
"""


@pytest.fixture(scope="module")
def linked_hip(tmp_path_factory):
    """A shared library linked by clang 19 from two HIP translation units (gfx90a and gfx1030,
    `-fno-gpu-rdc`: one bundle per unit in `.hip_fatbin`, aligned by the linker), plain and with
    `--offload-compress` (CCOB), and each library's `.hip_fatbin` dumped by llvm-objcopy."""
    clang, objcopy = need_tool("clang-19"), need_tool("llvm-objcopy-19")
    d = tmp_path_factory.mktemp("linked_hip")
    made = {}
    for variant, extra in (("plain", []), ("ccob", ["--offload-compress"])):
        objs = []
        for n in (1, 2):
            src = d / f"tu{n}.hip"
            src.write_text(_HEADERLESS_HIP.replace("KERNEL", f"kernel{n}").replace("VALUE", str(n)))
            obj = d / f"tu{n}_{variant}.o"
            res = run([clang, "-x", "hip", "-nogpulib", "-nogpuinc", "--offload-arch=gfx90a",
                       "--offload-arch=gfx1030", "-fno-gpu-rdc", "-fPIC", *extra, "-c", src, "-o", obj])
            assert res.returncode == 0, res.stderr.decode()[-500:]
            objs.append(obj)
        lib = d / f"lib{variant}.so"
        res = run([clang, "-shared", *objs, "-o", lib])
        assert res.returncode == 0, res.stderr.decode()[-500:]
        sec = d / f"{variant}.hip_fatbin"
        res = run([objcopy, f"--dump-section=.hip_fatbin={sec}", lib, "/dev/null"])
        assert res.returncode == 0, res.stderr.decode()[-500:]
        made[variant] = (lib, sec)
    return made


@pytest.mark.parametrize("variant", ["plain", "ccob"])
def test_dumped_hip_fatbin_lists_every_bundle(linked_hip, variant):
    """The section's bytes in a file of their own list what the section lists inside the library:
    every translation unit's bundle (compressed ones too, padded to the linker's alignment), each
    as `file@offset`, not just the first."""
    lib, sec = linked_hip[variant]
    in_lib = _json(lib)
    dumped = _json(sec)
    assert len(in_lib) == len(dumped) == 4  # 2 translation units x 2 archs
    key = lambda i: (i["path"].split("@")[1], i["arch"], i["sha256"], i["size"], i["compressed"])  # noqa: E731
    assert sorted(map(key, dumped)) == sorted(map(key, in_lib))
    assert all(i["path"].startswith(f"{lib}:.hip_fatbin@") for i in in_lib)
    assert all(i["path"].startswith(f"{sec}@") for i in dumped)
    offsets = sorted({int(i["path"].split("@")[1].split("[")[0], 16) for i in dumped})
    assert len(offsets) == 2 and offsets[0] == 0 and offsets[1] % 4096 == 0
    assert {i["arch"] for i in dumped} == {"gfx90a", "gfx1030"}
    assert all(i["compressed"] is (variant == "ccob") for i in dumped)
    assert all(i["wrappers"] == (["ccob"] if variant == "ccob" else []) for i in dumped)


def test_dumped_hip_fatbin_with_the_bundlers(linked_hip, tmp_path):
    """What the bundlers make of the same files (offload-bundler answers as LLVM 19): a bundle is
    one bundle to them, what follows it unread.  Plain bundles: `-list` prints the first
    bundle's IDs, exit 0.  Compressed ones: LLVM 19 decompresses a version 2 CCOB to the end of
    its file, so the zero padding and the second CCOB after the first zstd frame are an error,
    exit 1: 'Failed to decompress input: Could not decompress embedded file contents: Src size is
    incorrect'."""
    plain, compressed = linked_hip["plain"][1], linked_hip["ccob"][1]
    first = [i.split("[")[1].rstrip("]") for i in
             (r["path"] for r in _json(plain)) if i.startswith(f"{plain}@0x0[")]
    for type_ in ("o", "bc"):
        res = run_cli("bundler", "-list", f"-type={type_}", f"-input={plain}")
        assert res.returncode == 0, res.stderr
        assert sorted(res.stdout.decode().split()) == sorted(first + ["host-x86_64-unknown-linux--"])
        res = run_cli("bundler", "-list", f"-type={type_}", f"-input={compressed}")
        err = res.stderr.decode()
        assert res.returncode == 1 and res.stdout == b"" and err.count("\n") == 1, err
        assert err.startswith("offload-bundler: error: Failed to decompress input: Could not decompress embedded "
                              "file contents: Src size is incorrect"), err
        llvm = find_tool("clang-offload-bundler-19")
        if llvm:
            for path, ours in ((plain, 0), (compressed, 1)):
                theirs = run([llvm, "-list", f"-type={type_}", f"-input={path}"])
                assert theirs.returncode == ours, theirs.stderr
                if ours == 0:
                    assert theirs.stdout == run_cli("bundler", "-list", f"-type={type_}", f"-input={path}").stdout
                else:
                    assert theirs.stderr.decode().strip().endswith(
                        "error: Failed to decompress input: Could not decompress embedded file contents: "
                        "Src size is incorrect")


# --- COFF objects, and files without images ---------------------------------------------------

def _coff_with_package(tmp_path, package: bytes) -> str:
    """A clang-19 COFF object with `package` added as its .llvm.offloading section (LLVM's
    llvm-objdump Offloading/coff.test), or a skip where clang cannot make COFF objects."""
    clang = need_tool("clang-19")
    objcopy = need_tool("llvm-objcopy-19")
    (tmp_path / "e.c").write_text("int x;\n")
    if run([clang, "--target=x86_64-pc-windows-msvc", "-c", tmp_path / "e.c", "-o", tmp_path / "e.obj"]).returncode:
        pytest.skip("clang-19 cannot make COFF objects here")
    (tmp_path / "pkg").write_bytes(package)
    assert run([objcopy, "--add-section", f".llvm.offloading={tmp_path / 'pkg'}", tmp_path / "e.obj",
                tmp_path / "f.obj"]).returncode == 0
    return str(tmp_path / "f.obj")


def _two_images() -> bytes:
    return b"".join(write_offload_binary(make_image(file_bytes, {"triple": t, "arch": a}, image_kind=k, offload_kind=1))
                    for file_bytes, t, a, k in ((b"BC\xc0\xde img", "amdgcn-amd-amdhsa", "gfx908", 2),
                                                (b"\x7fELF img", "nvptx64-nvidia-cuda", "sm_52", 3)))


def test_coff_object_images_are_listed(tmp_path):
    obj = _coff_with_package(tmp_path, _two_images())
    rows = _json(obj)
    assert [(r["path"], r["container"], r["triple"], r["arch"], r["wrappers"]) for r in rows] == [
        (f"{obj}:.llvm.offloading[0]", "offload-binary", "amdgcn-amd-amdhsa", "gfx908", ["coff"]),
        (f"{obj}:.llvm.offloading[1]", "offload-binary", "nvptx64-nvidia-cuda", "sm_52", ["coff"])]
    # The same images offload-packager extracts from it.
    from offload_tool.ops.extract import find_offload_images
    found = find_offload_images(open(obj, "rb").read(), obj)
    assert [f.image.arch for f in found] == [r["arch"] for r in rows]
    res = run_cli("tool", "inspect", str(tmp_path / "e.obj"))  # no section: a note, exit 0
    assert res.returncode == 0 and b"'coff'" in res.stderr


def test_damaged_package_in_coff_is_one_error_line(tmp_path):
    obj = _coff_with_package(tmp_path, _two_images()[:100])
    res = run_cli("tool", "inspect", obj)
    err = res.stderr.decode()
    assert res.returncode == 1 and err.count("\n") == 1, err
    assert err.startswith(f"offload-tool: error: {obj}:.llvm.offloading: ")
    assert res.stdout == b""


@pytest.mark.parametrize("content, why", [
    (b"just text\n", "no known magic number"),
    (b"\x10\xff\x10\xae damaged magic", "no known magic number"),
    (b"", "the file is empty"),
])
def test_file_without_images_says_why(tmp_path, content, why):
    """Exit 0, as clang-offload-packager-19 when it finds nothing, but never silently."""
    (tmp_path / "f").write_bytes(content)
    res = run_cli("tool", "inspect", str(tmp_path / "f"))
    err = res.stderr.decode()
    assert res.returncode == 0
    assert err.count("\n") == 1 and err.startswith(f"offload-tool: note: '{tmp_path / 'f'}': no device images: ")
    assert why in err
    assert res.stdout.decode().splitlines()[0].startswith("PATH")  # the (empty) table still comes
    # A program reading --json (an OffloadManifest step) sees the file has no rows; no note.
    res = run_cli("tool", "inspect", "--json", str(tmp_path / "f"))
    assert res.returncode == 0 and res.stderr == b"" and res.stdout.strip() == b"[]"


def test_damaged_package_header_is_one_error_line(tmp_path):
    (tmp_path / "p").write_bytes(_two_images()[:40])
    res = run_cli("tool", "inspect", str(tmp_path / "p"))
    err = res.stderr.decode()
    assert res.returncode == 1 and err.count("\n") == 1 and err.startswith("offload-tool: error: "), err
    assert "offload binary at offset 0x0" in err
