"""Finding OffloadBinary images in raw packages, ELF objects/executables, bitcode and archives;
our reader agrees with `llvm-objdump-19/22 --offloading` on real clang 19 and 22 output."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from conftest import find_tool, need_tool, run
from offload_tool.errors import OffloadBinaryError, OffloadError
from offload_tool.ops.extract import file_kind, find_offload_images
from offload_tool.formats.offload_binary import (OffloadImage, objdump_image_kind_name, offload_kind_name,
                                         write_offload_binary)

NV_BC = "--libomptarget-nvptx-bc-path=/usr/lib/llvm-19/lib"
OMP_SRC = "int main(void){int x=0;\n#pragma omp target map(tofrom:x)\nx=42;\nreturn x==42?0:1;}\n"
HIP_SRC = "__attribute__((device)) int dv = 1;\n__attribute__((device)) int f(int a){ return a+dv; }\n"


def _compile(out: Path, *args) -> Path | None:
    res = run([*args, "-o", out])
    return out if res.returncode == 0 and out.exists() else None


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> dict[str, Path]:
    """Real fat objects, executables and bitcode from clang 19 and 22 (whatever can be built here)."""
    d = tmp_path_factory.mktemp("real")
    (d / "s.c").write_text(OMP_SRC)
    (d / "h.hip").write_text(HIP_SRC)
    made: dict[str, Path | None] = {}
    c19, c22 = find_tool("clang-19"), find_tool("clang-22")
    if c19:
        made["omp19_nvptx.o"] = _compile(d / "omp19_nvptx.o", c19, "-fopenmp", "--offload-arch=sm_80", NV_BC, "-c", d / "s.c")
        made["omp19_amdgcn.o"] = _compile(d / "omp19_amdgcn.o", c19, "-fopenmp", "--offload-arch=gfx90a", "-nogpulib",
                                          "-c", d / "s.c")
        made["omp19_nvptx.bc"] = _compile(d / "omp19_nvptx.bc", c19, "-fopenmp", "--offload-arch=sm_80", NV_BC, "-c",
                                          "-emit-llvm", d / "s.c")
        made["omp19_nvptx.exe"] = _compile(d / "omp19_nvptx.exe", c19, "-fopenmp", "--offload-arch=sm_80", NV_BC,
                                           d / "s.c")
        made["omp19_nvptx.so"] = _compile(d / "omp19_nvptx.so", c19, "-fopenmp", "--offload-arch=sm_80", NV_BC,
                                          "-fPIC", "-shared", d / "s.c")
        made["omp19_amdgcn.exe"] = _compile(d / "omp19_amdgcn.exe", c19, "-fopenmp", "--offload-arch=gfx90a",
                                            "--rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode", d / "s.c")
        made["hip19.o"] = _compile(d / "hip19.o", c19, "-x", "hip", "--offload-new-driver", "-fgpu-rdc",
                                   "--offload-arch=gfx90a", "-nogpulib", "-nogpuinc", "-c", d / "h.hip")
    if c22:
        made["omp22_both.o"] = _compile(d / "omp22_both.o", c22, "-fopenmp", "--offload-arch=sm_80,gfx90a",
                                        "-nogpulib", "-c", d / "s.c")
        made["hip22.o"] = _compile(d / "hip22.o", c22, "-x", "hip", "--offload-new-driver", "-fgpu-rdc",
                                   "--offload-arch=gfx90a", "-nogpulib", "-nogpuinc", "-c", d / "h.hip")
    return {k: v for k, v in made.items() if v is not None}


def _objdump(tool: str, path: Path) -> list[dict[str, str]]:
    res = run([tool, "--offloading", path])
    assert res.returncode == 0, res.stderr
    images: list[dict[str, str]] = []
    for line in res.stdout.decode().splitlines():
        if line.startswith("OFFLOADING IMAGE ["):
            images.append({})
        elif images and len(line) > 16 and line[:16].strip() in ("kind", "arch", "triple", "producer"):
            images[-1][line[:16].strip()] = line[16:]
    return images


def _ours(path: Path, version: int) -> list[dict[str, str]]:
    found = find_offload_images(path.read_bytes(), str(path), llvm_version=version)
    return [{"kind": objdump_image_kind_name(f.image.image_kind), "arch": f.image.arch, "triple": f.image.triple,
             "producer": offload_kind_name(f.image.offload_kind, version)} for f in found]


@pytest.mark.parametrize("version", [19, 22])
def test_agrees_with_llvm_objdump(artifacts, version):
    objdump = need_tool(f"llvm-objdump-{version}")
    checked = 0
    for name, path in artifacts.items():
        if name.endswith(".bc"):
            continue  # objdump does not read bitcode
        expected = _objdump(objdump, path)
        assert _ours(path, version) == expected, name
        checked += bool(expected)
    if not checked:
        pytest.skip("no fat objects could be built here")


def test_hip_producer_value_depends_on_llvm(artifacts):
    if "hip19.o" not in artifacts or "hip22.o" not in artifacts:
        pytest.skip("clang 19 and 22 HIP (new driver) objects not buildable here")
    (h19,) = find_offload_images(artifacts["hip19.o"].read_bytes(), "hip19.o")
    (h22,) = find_offload_images(artifacts["hip22.o"].read_bytes(), "hip22.o")
    assert (h19.image.offload_kind, h22.image.offload_kind) == (3, 4)
    assert "or" in h19.image.producer and h22.image.producer == "hip"
    assert h19.container == "elf" and h19.section == ".llvm.offloading"
    assert h19.path == "hip19.o:.llvm.offloading[0]"


def test_bitcode_embedded_objects(artifacts):
    if "omp19_nvptx.bc" not in artifacts or "omp19_nvptx.o" not in artifacts:
        pytest.skip("clang-19 OpenMP bitcode not buildable here")
    (bc,) = find_offload_images(artifacts["omp19_nvptx.bc"].read_bytes(), "s.bc")
    assert bc.container == "bitcode" and bc.path == "s.bc:.llvm.offloading[0]"
    assert (bc.image.triple, bc.image.arch, bc.image.producer) == ("nvptx64-nvidia-cuda", "sm_80", "openmp")


def test_bitcode_matches_llvm_packager(artifacts, tmp_path):
    tool = need_tool("clang-offload-packager-19")
    if "omp19_nvptx.bc" not in artifacts:
        pytest.skip("clang-19 OpenMP bitcode not buildable here")
    bc = artifacts["omp19_nvptx.bc"]
    assert run([tool, bc, "--image=file=" + str(tmp_path / "x"), ], cwd=tmp_path).returncode == 0
    (found,) = find_offload_images(bc.read_bytes(), "s.bc")
    assert bytes(found.image.image) == (tmp_path / "x").read_bytes()


def test_bitcode_without_embedded_objects(tmp_path):
    clang = need_tool("clang-19")
    (tmp_path / "p.c").write_text("int f(int x){return x+1;}\n")
    assert run([clang, "-c", "-emit-llvm", tmp_path / "p.c", "-o", tmp_path / "p.bc"]).returncode == 0
    assert find_offload_images((tmp_path / "p.bc").read_bytes(), "p.bc") == []


@pytest.fixture(scope="module")
def bitcode_sample(artifacts) -> bytes:
    if "omp19_nvptx.bc" not in artifacts:
        pytest.skip("clang-19 OpenMP bitcode not buildable here")
    return artifacts["omp19_nvptx.bc"].read_bytes()


@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_corrupt_bitcode_only_raises_offload_error(bitcode_sample, data):
    buf = bytearray(bitcode_sample)
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.integers(0, len(buf) - 1))
        buf[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(4, len(buf)))
    try:
        find_offload_images(bytes(buf[:cut]), "x.bc")
    except OffloadError:
        pass


def test_raw_packages_and_kinds():
    a = write_offload_binary(OffloadImage(1, 1, 0, {"triple": "t", "arch": "a"}, b"A"))
    b = write_offload_binary(OffloadImage(2, 3, 0, {"triple": "t", "arch": "b"}, b"B"))
    found = find_offload_images(a + b, "pk.out")
    assert [f.path for f in found] == ["pk.out[0]", "pk.out[1]"]
    assert [f.container for f in found] == ["package", "package"] and found[1].section is None
    assert file_kind(a) == "package" and file_kind(b"!<arch>\n") == "archive" and file_kind(b"BC\xc0\xde") == "bitcode"
    assert find_offload_images(b"just text", "t") == [] and find_offload_images(b"", "e") == []
    with pytest.raises(OffloadBinaryError, match="pk.out"):
        find_offload_images(a + b[:-8], "pk.out")


def test_archives_recursive(artifacts, tmp_path):
    ar = need_tool("llvm-ar-19")
    objs = [p for n, p in artifacts.items() if n.endswith(".o")]
    if len(objs) < 2:
        pytest.skip("need two fat objects")
    pkg = tmp_path / "raw.out"
    pkg.write_bytes(write_offload_binary(OffloadImage(1, 1, 0, {"triple": "t", "arch": "a"}, b"A")))
    assert run([ar, "rcs", tmp_path / "inner.a", objs[0], pkg]).returncode == 0
    assert run([ar, "rcs", tmp_path / "outer.a", objs[1], tmp_path / "inner.a"]).returncode == 0
    found = find_offload_images((tmp_path / "outer.a").read_bytes(), "outer.a")
    expected = (len(find_offload_images(objs[1].read_bytes(), "x")) + len(find_offload_images(objs[0].read_bytes(), "x"))
                + 1)
    assert len(found) == expected
    paths = [f.path for f in found]
    assert any(p.startswith(f"outer.a({objs[1].name}):") for p in paths)
    assert any(p.startswith(f"outer.a(inner.a)({objs[0].name}):") for p in paths)
    assert "outer.a(inner.a)(raw.out)[0]" in paths
    assert found[-1].member == "raw.out"


def test_llvm_objdump_elf_scenarios(tmp_path):
    """llvm-objdump Offloading/elf.test, failure.test: a 4-image package placed in an ELF section by
    llvm-objcopy is read; a broken magic in the section is an error naming the problem."""
    objcopy = need_tool("llvm-objcopy-19")
    clang = need_tool("clang-19")
    imgs = [OffloadImage(2, 1, 0, {"triple": "amdgcn-amd-amdhsa", "arch": "gfx908"}, b""),
            OffloadImage(2, 1, 0, {"triple": "amdgcn-amd-amdhsa", "arch": "gfx90a"}, b""),
            OffloadImage(3, 1, 0, {"triple": "nvptx64-nvidia-cuda", "arch": "sm_52"}, b""),
            OffloadImage(0, 0, 0, {"triple": "nvptx64-nvidia-cuda", "arch": "sm_70"}, b"")]
    pkg = b"".join(write_offload_binary(i) for i in imgs)
    assert [len(write_offload_binary(i)) for i in imgs] == [144] * 4  # as yaml2obj writes Inputs/binary.yaml
    (tmp_path / "pkg").write_bytes(pkg)
    (tmp_path / "e.c").write_text("int x;\n")
    assert run([clang, "-c", tmp_path / "e.c", "-o", tmp_path / "e.o"]).returncode == 0
    res = run([objcopy, "--add-section", f".llvm.offloading={tmp_path / 'pkg'}",
               "--set-section-type=.llvm.offloading=0x6fff4c0b", "--set-section-flags=.llvm.offloading=exclude",
               "--set-section-alignment=.llvm.offloading=8", tmp_path / "e.o", tmp_path / "f.o"])
    if res.returncode != 0:
        pytest.skip(f"llvm-objcopy cannot set the section type here: {res.stderr.decode().strip()}")
    found = find_offload_images((tmp_path / "f.o").read_bytes(), "f.o")
    assert [(f.image.triple, f.image.arch, objdump_image_kind_name(f.image.image_kind)) for f in found] == [
        ("amdgcn-amd-amdhsa", "gfx908", "llvm ir"), ("amdgcn-amd-amdhsa", "gfx90a", "llvm ir"),
        ("nvptx64-nvidia-cuda", "sm_52", "cubin"), ("nvptx64-nvidia-cuda", "sm_70", "<none>")]
    objdump = find_tool("llvm-objdump-19")
    if objdump:
        assert _ours(tmp_path / "f.o", 19) == _objdump(objdump, tmp_path / "f.o")
    (tmp_path / "bad").write_bytes(bytes.fromhex("10ffb0ad"))
    res = run([objcopy, "--update-section", f".llvm.offloading={tmp_path / 'bad'}", tmp_path / "f.o", tmp_path / "g.o"])
    assert res.returncode == 0
    with pytest.raises(OffloadBinaryError, match="Invalid data"):
        find_offload_images((tmp_path / "g.o").read_bytes(), "g.o")


def test_nested_archive_depth_is_bounded():
    # An archive whose only member is itself nested far too deep: an error, not a recursion crash.
    def ar(name: bytes, data: bytes) -> bytes:
        hdr = name.ljust(16) + b"0".ljust(12) + b"0".ljust(6) + b"0".ljust(6) + b"644".ljust(8) + \
            str(len(data)).encode().ljust(10) + b"`\n"
        return b"!<arch>\n" + hdr + data + (b"\n" if len(data) % 2 else b"")

    data = b"not an object"
    for _ in range(40):
        data = ar(b"m.a/", data)
    try:
        find_offload_images(data, "deep.a")
    except OffloadError as exc:
        assert "nested" in str(exc) or "archive" in str(exc).lower()
    else:
        pytest.fail("no error for a 40-deep archive")


def test_llvm_objdump_coff_scenario(tmp_path):
    """llvm-objdump Offloading/coff.test: images in a COFF object's `.llvm.offloading` section."""
    clang = need_tool("clang-19")
    objcopy = need_tool("llvm-objcopy-19")
    pkg = b"".join(write_offload_binary(OffloadImage(k, 1, 0, {"triple": t, "arch": a}, b"img"))
                   for k, t, a in ((2, "amdgcn-amd-amdhsa", "gfx908"), (3, "nvptx64-nvidia-cuda", "sm_52")))
    (tmp_path / "pkg").write_bytes(pkg)
    (tmp_path / "e.c").write_text("int x;\n")
    res = run([clang, "--target=x86_64-pc-windows-msvc", "-c", tmp_path / "e.c", "-o", tmp_path / "e.obj"])
    if res.returncode != 0:
        pytest.skip("clang-19 cannot make COFF objects here")
    assert run([objcopy, "--add-section", f".llvm.offloading={tmp_path / 'pkg'}", tmp_path / "e.obj",
                tmp_path / "f.obj"]).returncode == 0
    found = find_offload_images((tmp_path / "f.obj").read_bytes(), "f.obj")
    assert [(f.container, f.image.arch) for f in found] == [("coff", "gfx908"), ("coff", "sm_52")]
    objdump = find_tool("llvm-objdump-19")
    if objdump:
        assert _ours(tmp_path / "f.obj", 19) == _objdump(objdump, tmp_path / "f.obj")
    assert find_offload_images((tmp_path / "e.obj").read_bytes(), "e.obj") == []


@pytest.fixture(scope="module")
def fat_object(artifacts) -> bytes:
    if "omp19_amdgcn.o" not in artifacts:
        pytest.skip("clang-19 amdgcn fat object not buildable here")
    return artifacts["omp19_amdgcn.o"].read_bytes()


@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_corrupt_fat_object_only_raises_offload_error(fat_object, data):
    """Damage anywhere in a real fat object (headers, section table, the package): an
    OffloadError or a (possibly shorter) list of images, nothing else."""
    buf = bytearray(fat_object)
    # bias damage towards the package, which is what we parse ourselves
    start = fat_object.find(b"\x10\xff\x10\xad")
    for _ in range(data.draw(st.integers(1, 6))):
        lo = data.draw(st.sampled_from([0, max(start, 0)]))
        pos = data.draw(st.integers(lo, min(len(buf) - 1, lo + 400)))
        buf[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.sampled_from([len(buf), data.draw(st.integers(0, len(buf)))]))
    try:
        for f in find_offload_images(bytes(buf[:cut]), "x.o"):
            bytes(f.image.image)
    except OffloadError:
        pass


def _ll_bytes(data: bytes) -> str:
    return "".join(f"\\{b:02X}" for b in data)


def test_bitcode_follows_embedded_objects_metadata(tmp_path):
    """Only globals named by !llvm.embedded.objects with the string ".llvm.offloading" count (the
    global's own section does not), exactly as clang-offload-packager-19 extracts them."""
    clang = need_tool("clang-19")
    tool = need_tool("clang-offload-packager-19")
    listed = write_offload_binary(OffloadImage(1, 1, 0, {"triple": "t", "arch": "listed"}, b"LISTED"))
    unlisted = write_offload_binary(OffloadImage(1, 1, 0, {"triple": "t", "arch": "unlisted"}, b"UNLISTED"))
    other = write_offload_binary(OffloadImage(1, 1, 0, {"triple": "t", "arch": "other"}, b"OTHER"))
    ir = (
        'target triple = "x86_64-unknown-linux-gnu"\n'
        f'@u = private constant [{len(unlisted)} x i8] c"{_ll_bytes(unlisted)}", section ".llvm.offloading", align 8\n'
        f'@l = private constant [{len(listed)} x i8] c"{_ll_bytes(listed)}", align 8\n'
        f'@o = private constant [{len(other)} x i8] c"{_ll_bytes(other)}", align 8\n'
        "@llvm.compiler.used = appending global [3 x ptr] [ptr @u, ptr @l, ptr @o], section \"llvm.metadata\"\n"
        "define i32 @f() { ret i32 0 }\n"
        "!llvm.embedded.objects = !{!0, !1}\n"
        '!0 = !{ptr @l, !".llvm.offloading"}\n'
        '!1 = !{ptr @o, !".something.else"}\n'
    )
    (tmp_path / "x.ll").write_text(ir)
    res = run([clang, "-c", "-emit-llvm", tmp_path / "x.ll", "-o", tmp_path / "x.bc"])
    assert res.returncode == 0, res.stderr
    found = find_offload_images((tmp_path / "x.bc").read_bytes(), "x.bc")
    assert [f.image.arch for f in found] == ["listed"]
    assert run([tool, tmp_path / "x.bc", "--image=triple=t"], cwd=tmp_path).returncode == 0
    assert sorted(p.name for p in tmp_path.glob("x-*")) == ["x-t-listed.0.o"]


def test_llvm_objdump_alignment_scenario(tmp_path):
    """llvm-objdump Offloading/alignment.test: a package at a file offset that is not a multiple of
    8 still parses (LLVM copies it to aligned memory; we never depend on alignment)."""
    clang = need_tool("clang-19")
    from offload_tool.formats import elf

    pkg = b"".join(write_offload_binary(OffloadImage(2, 1, 0, {"triple": "amdgcn-amd-amdhsa", "arch": a}, b"x" * 5))
                   for a in ("gfx908", "gfx90a"))
    (tmp_path / "pkg").write_bytes(pkg)
    (tmp_path / "e.c").write_text("int x;\n")
    assert run([clang, "-c", tmp_path / "e.c", "-o", tmp_path / "e.o"]).returncode == 0
    with open(tmp_path / "f.o", "wb") as out:
        elf.add_sections((tmp_path / "e.o").read_bytes(), [
            elf.NewSection(".llvm.offloading", pkg, elf.SHT_LLVM_OFFLOADING, elf.SHF_EXCLUDE, 8)], out)
    # move the section's contents to an odd file offset at the end of the file (patch sh_offset)
    data = bytearray((tmp_path / "f.o").read_bytes())
    (sec,) = [s for s in elf.read_sections(bytes(data)) if s.name == ".llvm.offloading"]
    e_shoff, e_shentsize = struct.unpack_from("<Q", data, 0x28)[0], struct.unpack_from("<H", data, 0x3A)[0]
    new_offset = len(data) + (1 if len(data) % 8 == 0 else 0)
    data += bytes(new_offset - len(data)) + pkg
    struct.pack_into("<Q", data, e_shoff + sec.index * e_shentsize + 24, new_offset)
    (tmp_path / "f.o").write_bytes(bytes(data))
    data = bytes(data)
    (sec,) = [s for s in elf.read_sections(data) if s.name == ".llvm.offloading"]
    assert sec.offset % 8 != 0
    assert [f.image.arch for f in find_offload_images(data, "f.o")] == ["gfx908", "gfx90a"]
    objdump = find_tool("llvm-objdump-19")
    if objdump:
        assert _ours(tmp_path / "f.o", 19) == _objdump(objdump, tmp_path / "f.o")


def test_llvm_objdump_content_failure_scenario(tmp_path):
    """llvm-objdump Offloading/content-failure.test: the section's offset is beyond the end of
    the file: one OffloadError, no crash."""
    clang = need_tool("clang-19")
    from offload_tool.formats import elf

    pkg = write_offload_binary(OffloadImage(2, 1, 0, {"triple": "t", "arch": "a"}, b""))
    (tmp_path / "e.c").write_text("int x;\n")
    assert run([clang, "-c", tmp_path / "e.c", "-o", tmp_path / "e.o"]).returncode == 0
    with open(tmp_path / "f.o", "wb") as out:
        elf.add_sections((tmp_path / "e.o").read_bytes(), [
            elf.NewSection(".llvm.offloading", pkg, elf.SHT_LLVM_OFFLOADING, elf.SHF_EXCLUDE, 8)], out)
    data = bytearray((tmp_path / "f.o").read_bytes())
    (sec,) = [s for s in elf.read_sections(bytes(data)) if s.name == ".llvm.offloading"]
    e_shoff, e_shentsize = struct.unpack_from("<Q", data, 0x28)[0], struct.unpack_from("<H", data, 0x3A)[0]
    struct.pack_into("<Q", data, e_shoff + sec.index * e_shentsize + 24, 0x10000000)
    with pytest.raises(OffloadError):
        find_offload_images(bytes(data), "f.o")


def test_llvm_objdump_non_elf_scenario(tmp_path):
    """llvm-objdump Offloading/non-elf.test: a Mach-O object holds no images (LLVM only warns)."""
    clang = need_tool("clang-19")
    res = run([clang, "--target=x86_64-apple-macos11", "-c", "-x", "c", "-", "-o", tmp_path / "m.o"],
              input=b"int x;\n")
    if res.returncode != 0:
        pytest.skip("clang-19 cannot make Mach-O objects here")
    data = (tmp_path / "m.o").read_bytes()
    assert file_kind(data) == "other" and find_offload_images(data, "m.o") == []


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400), st.sampled_from([b"BC\xc0\xde", b"\xde\xc0\x17\x0b\0\0\0\0\x14\0\0\0\x40\0\0\0\0\0\0\0BC\xc0\xde"]))
def test_garbage_bitcode_only_raises_offload_error(junk, magic):
    try:
        find_offload_images(magic + junk, "g.bc")
    except OffloadError:
        pass
