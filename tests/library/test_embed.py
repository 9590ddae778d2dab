"""Embedding a package as `.llvm.offloading`: section attributes, and the full flow
host-only object + our package -> clang-linker-wrapper link -> program that runs and lists its images."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from conftest import find_tool, need_tool, run, run_cli
from offload_tool.ops.embed import embed_offload_package
from offload_tool.errors import OffloadError
from offload_tool.ops.extract import find_offload_images
from offload_tool.formats.offload_binary import OffloadImage, write_offload_binary

NV_BC = "--libomptarget-nvptx-bc-path=/usr/lib/llvm-19/lib"
ROCM_LIBS = "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"
SRC = "#include <stdio.h>\nint main(void){int x=0;\n#pragma omp target map(tofrom:x)\nx=42;\nprintf(\"x=%d\\n\", x);\nreturn x==42?0:1;}\n"
RUN_ENV = dict(os.environ, LD_LIBRARY_PATH="/usr/lib/llvm-19/lib")


def _clang(tmp: Path, out: str, *args) -> Path:
    clang = need_tool("clang-19")
    res = run([clang, *args, "-o", tmp / out], cwd=tmp)
    assert res.returncode == 0, res.stderr.decode()
    return tmp / out


@pytest.fixture(scope="module")
def host_object(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("host")
    (d / "s.c").write_text(SRC)
    return _clang(d, "host.o", "-fopenmp", "--offload-arch=sm_80", "--offload-host-only", "-c", "s.c")


def _package() -> bytes:
    return b"".join(write_offload_binary(OffloadImage(1, 1, 0, {"triple": t, "arch": a}, b"\x7fELF" + a.encode() * 9))
                    for t, a in (("nvptx64-nvidia-cuda", "sm_80"), ("amdgcn-amd-amdhsa", "gfx90a")))


def test_section_attributes(host_object, tmp_path):
    package = _package()
    out = io.BytesIO()
    embed_offload_package(host_object.read_bytes(), package, out)
    (tmp_path / "e.o").write_bytes(out.getvalue())
    elf = ELFFile(io.BytesIO(out.getvalue()))
    (sec,) = [s for s in elf.iter_sections() if s.name == ".llvm.offloading"]
    assert sec["sh_type"] in (0x6FFF4C0B, "SHT_LLVM_OFFLOADING")
    assert sec["sh_flags"] == 0x80000000 and sec["sh_addralign"] == 8
    assert sec["sh_offset"] % 8 == 0
    assert sec.data() == package
    # every original section is still there with the same contents (string tables are rebuilt in
    # llvm-objcopy's layout, so symbols keep their names, not their name offsets)
    orig = ELFFile(io.BytesIO(host_object.read_bytes()))
    for s in orig.iter_sections():
        if s["sh_type"] not in ("SHT_NOBITS", "SHT_NULL", "SHT_STRTAB", "SHT_SYMTAB"):
            assert elf.get_section_by_name(s.name).data() == s.data(), s.name
    def symbols(f):
        return [(s.name, s["st_value"], s["st_size"], s["st_info"], s["st_shndx"])
                for s in f.get_section_by_name(".symtab").iter_symbols()]

    assert symbols(elf) == symbols(orig)
    found = find_offload_images(out.getvalue(), "e.o")
    assert [f.image.arch for f in found] == ["sm_80", "gfx90a"]
    readelf = find_tool("llvm-readelf-19")
    if readelf:
        res = run([readelf, "-S", tmp_path / "e.o"])
        line = [l for l in res.stdout.decode().splitlines() if ".llvm.offloading" in l][0]
        assert "LLVM_OFFLOADING" in line and line.split()[-4:] == ["E", "0", "0", "8"]


def test_objdump_lists_embedded_images(host_object, tmp_path):
    objdump = need_tool("llvm-objdump-19")
    (tmp_path / "p").write_bytes(_package())
    res = run_cli("embed", host_object, tmp_path / "p", "-o", tmp_path / "e.o")
    assert res.returncode == 0, res.stderr
    text = run([objdump, "--offloading", tmp_path / "e.o"]).stdout.decode()
    assert "arch            sm_80" in text and "arch            gfx90a" in text


@pytest.mark.parametrize("content, message", [
    (b"not an elf at all", "not an ELF"),
])
def test_bad_host(tmp_path, content, message):
    with pytest.raises(OffloadError, match=message):
        embed_offload_package(content, _package(), io.BytesIO())


def test_refuses_bad_package_and_executables_and_double_embedding(host_object, tmp_path):
    with pytest.raises(OffloadError, match="not a valid offload binary"):
        embed_offload_package(host_object.read_bytes(), b"\x10\xff\x10\xad junk", io.BytesIO())
    with pytest.raises(OffloadError, match="empty"):
        embed_offload_package(host_object.read_bytes(), b"", io.BytesIO())
    out = io.BytesIO()
    embed_offload_package(host_object.read_bytes(), _package(), out)
    with pytest.raises(OffloadError, match="already has an offloading section"):
        embed_offload_package(out.getvalue(), _package(), io.BytesIO())
    (tmp_path / "m.c").write_text("int main(void){return 0;}\n")
    exe = _clang(tmp_path, "m", "m.c")
    with pytest.raises(OffloadError, match="relocatable"):
        embed_offload_package(exe.read_bytes(), _package(), io.BytesIO())


def test_cli_errors_leave_no_output(tmp_path, host_object):
    (tmp_path / "bad.pkg").write_bytes(b"garbage")
    for args in ([host_object, tmp_path / "bad.pkg", "-o", tmp_path / "o.o"],
                 [host_object, "-o", tmp_path / "o.o"],
                 [host_object, tmp_path / "missing.pkg", "-o", tmp_path / "o.o"],
                 [host_object, tmp_path / "bad.pkg"]):
        res = run_cli("embed", *args)
        err = res.stderr.decode()
        assert res.returncode == 1 and len(err.splitlines()) == 1 and err.startswith("offload-embed: error: "), err
    assert sorted(os.listdir(tmp_path)) == ["bad.pkg"]


def _end_to_end(tmp_path: Path, arch: str, triple: str, device_flags: list[str], link_flags: list[str]):
    """host-only object + (device object packaged by our packager, embedded by us) -> link -> run."""
    objdump = need_tool("llvm-objdump-19")
    need_tool("clang-linker-wrapper-19")
    (tmp_path / "s.c").write_text(SRC)
    host = _clang(tmp_path, "host.o", "-fopenmp", f"--offload-arch={arch}", "--offload-host-only", "-c", "s.c")
    clang = need_tool("clang-19")
    res = run([clang, "-fopenmp", f"--offload-arch={arch}", "--offload-device-only", "-c", *device_flags, "s.c",
               "-o", "dev.o"], cwd=tmp_path)
    if res.returncode != 0:
        pytest.skip(f"cannot build the {arch} device object here: {res.stderr.decode().strip()[-200:]}")
    res = run_cli("packager", "-o", "dev.pkg", f"--image=file=dev.o,triple={triple},arch={arch},kind=openmp",
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    res = run_cli("embed", host, "dev.pkg", "-o", "fat.o", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    env = dict(os.environ)
    env["PATH"] = env.get("PATH", "") + os.pathsep + "/usr/local/cuda/bin"
    res = run([clang, "-fopenmp", f"--offload-arch={arch}", *link_flags, "fat.o", "-o", "app"], cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr.decode()
    res = run([tmp_path / "app"], env=RUN_ENV)
    assert res.returncode == 0 and res.stdout == b"x=42\n", res
    text = run([objdump, "--offloading", tmp_path / "app"]).stdout.decode()
    assert f"arch            {arch}" in text and f"triple          {triple}" in text
    assert "producer        openmp" in text
    # and our reader sees the same image in the linked program
    found = find_offload_images((tmp_path / "app").read_bytes(), "app")
    assert [(f.image.triple, f.image.arch) for f in found] == [(triple, arch)]


def test_end_to_end_nvptx(tmp_path):
    if not Path("/usr/lib/llvm-19/lib/libomptarget-nvptx.bc").exists() and not list(
            Path("/usr/lib/llvm-19/lib").glob("libomptarget-nvptx*.bc")):
        pytest.skip("libomptarget nvptx device bitcode not installed")
    _end_to_end(tmp_path, "sm_80", "nvptx64-nvidia-cuda", [NV_BC], [NV_BC])


def test_end_to_end_amdgcn(tmp_path):
    if not Path(ROCM_LIBS).is_dir():
        pytest.skip("ROCm device libraries not installed")
    flags = [f"--rocm-device-lib-path={ROCM_LIBS}"]
    _end_to_end(tmp_path, "gfx90a", "amdgcn-amd-amdhsa", flags, flags)


def test_empty_host_carrier(host_object, tmp_path):
    """`--empty-host`: the packages in an empty object of the host object's ELF class and machine,
    which LLVM's tools read and the system linker links beside host code (no exec-stack warning)."""
    objdump = need_tool("llvm-objdump-19")
    (tmp_path / "p").write_bytes(_package())
    res = run_cli("embed", "--empty-host", host_object, tmp_path / "p", "-o", tmp_path / "c.o")
    assert res.returncode == 0, res.stderr
    elf = ELFFile(io.BytesIO((tmp_path / "c.o").read_bytes()))
    host = ELFFile(io.BytesIO(host_object.read_bytes()))
    assert (elf["e_type"], elf["e_machine"], elf.elfclass) == ("ET_REL", host["e_machine"], host.elfclass)
    assert sorted(s.name for s in elf.iter_sections()) == ["", ".llvm.offloading", ".note.GNU-stack", ".strtab",
                                                           ".symtab"]
    assert [s.name for s in elf.get_section_by_name(".symtab").iter_symbols()] == [""]
    text = run([objdump, "--offloading", tmp_path / "c.o"]).stdout.decode()
    assert "arch            sm_80" in text and "arch            gfx90a" in text
    (tmp_path / "m.c").write_text("int main(void) { return 0; }\n")
    gcc = need_tool("gcc")
    res = run([gcc, "-Wl,--fatal-warnings", tmp_path / "m.c", tmp_path / "c.o", "-o", tmp_path / "m"])
    assert res.returncode == 0, res.stderr.decode()
    assert run([tmp_path / "m"]).returncode == 0


@pytest.mark.parametrize("ei_class, ei_data, machine", [(1, 1, 3), (2, 2, 43), (1, 2, 20)])
def test_empty_relocatable_like_other_elf_kinds(ei_class, ei_data, machine):
    """32-bit and big-endian references (i386, SPARC V9, PowerPC) give objects pyelftools reads back
    with the same class, byte order and machine; non-ELF references are an ElfError."""
    import struct

    from offload_tool.formats import elf as elf_mod
    from offload_tool.errors import ElfError

    end = "<" if ei_data == 1 else ">"
    size = 64 if ei_class == 2 else 52
    ref = bytearray(size)
    ref[:9] = b"\x7fELF" + bytes([ei_class, ei_data, 1, 0, 0])
    struct.pack_into(end + "HH", ref, 16, 1, machine)
    obj = ELFFile(io.BytesIO(elf_mod.empty_relocatable_like(bytes(ref))))
    assert obj.elfclass == (64 if ei_class == 2 else 32) and obj.little_endian == (ei_data == 1)
    assert obj["e_type"] == "ET_REL" and obj.header["e_machine"] in (machine, {3: "EM_386", 43: "EM_SPARCV9",
                                                                                20: "EM_PPC"}[machine])
    assert [s.name for s in obj.iter_sections()] == ["", ".strtab", ".symtab", ".note.GNU-stack"]
    for bad in (b"", b"not elf", b"\x7fELF\x03\x01" + bytes(60), b"\x7fELF\x02\x01" + bytes(20)):
        with pytest.raises(ElfError):
            elf_mod.empty_relocatable_like(bad)
