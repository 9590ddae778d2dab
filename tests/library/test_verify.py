"""`verify`: required archs (target-ID compatible) and host/device OpenMP entry consistency,
on real clang 19 / 22 objects and programs, including the re-created-source (new inode) case."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import offload_samples as samples
from conftest import need_tool, run, run_cli
from offload_tool.errors import OffloadError, TargetIDError, UsageError
from offload_tool.formats.offload_binary import make_image, write_offload_binary
from offload_tool.ops.verify import (OMP_ENTRY_PREFIX, arch_satisfied, host_offload_entries, image_has_symbol,
                                 verify_buffer, verify_file)


# ---------------------------------------------------------------------------------------------
# Architectures


@pytest.mark.parametrize("provided,requested,image_kind,ok", [
    ("gfx90a", "gfx90a:xnack+", "elf", True),       # no feature pinned: runs anywhere
    ("gfx90a", "gfx90a", "elf", True),
    ("gfx90a:xnack+", "gfx90a:xnack+", "elf", True),
    ("gfx90a:xnack+", "gfx90a:xnack-", "elf", False),
    ("gfx90a:xnack+", "gfx90a", "elf", False),       # pinned on the image, "any" requested
    ("gfx906:sramecc+:xnack-", "gfx906:xnack-:sramecc+", "elf", True),  # feature order
    ("gfx801", "carrizo", "elf", True),              # alias canonicalised
    ("gfx90a", "gfx908", "elf", False),
    ("sm_80", "sm_80", "cubin", True),
    ("sm_80", "sm_90", "cubin", False),
    ("sm_90", "compute_90", "ptx", True),
    ("sm_90", "compute_90", "cubin", False),
    ("sm_90a", "sm_90", "cubin", False),
    ("", "gfx90a", "elf", False),
    ("gfx90a:bogus+", "gfx90a", "elf", False),       # malformed target ID in a file satisfies nothing
])
def test_arch_satisfied(provided, requested, image_kind, ok):
    assert arch_satisfied(provided, requested, image_kind) is ok


def _package(*images: tuple[str, str]) -> bytes:
    return b"".join(write_offload_binary(make_image(b"\x7fELF\x02\x01\x01" + bytes(57), {"triple": triple, "arch": arch},
                                                    image_kind=1, offload_kind=1))
                    for triple, arch in images)


def test_require_on_a_package():
    pkg = _package(("amdgcn-amd-amdhsa", "gfx90a"), ("nvptx64-nvidia-cuda", "sm_80"))
    assert verify_buffer(pkg, "p", require=["gfx90a:xnack+", "sm_80"]).ok
    res = verify_buffer(pkg, "p", require=["gfx90a:xnack-", "gfx908", "sm_80"])
    assert res.missing_archs == ["gfx908"]  # gfx90a:xnack- is satisfied by the gfx90a image
    assert res.problems == ["p: missing required arch 'gfx908'"]


@pytest.mark.parametrize("bad", ["banana", "gfx9999", "gfx90a:foo+", "", "-x"])
def test_bad_require_is_an_error(bad):
    with pytest.raises((UsageError, TargetIDError)):
        verify_buffer(_package(("amdgcn-amd-amdhsa", "gfx90a")), "p", require=[bad])


# ---------------------------------------------------------------------------------------------
# Host offload entries in real clang 19 / 22 output


@pytest.fixture(scope="module")
def omp():
    return samples.openmp()


@pytest.mark.parametrize("name,section", [
    ("omp19_nv.o", "omp_offloading_entries"), ("omp19_amd.o", "omp_offloading_entries"),
    ("omp19_nv.exe", "omp_offloading_entries"), ("omp19_amd.exe", "omp_offloading_entries"),
    ("omp19_nv.so", "omp_offloading_entries"), ("omp22.o", "llvm_offload_entries"),
    ("omp22_host.exe", "llvm_offload_entries"), ("omp22_host_nopie.exe", "llvm_offload_entries"),
])
def test_host_entries_found(omp, name, section):
    path = samples.need(omp, name)
    entries = host_offload_entries(path.read_bytes())
    assert [e.section for e in entries] == [section, section]
    names = [e.name for e in entries]
    # Two target regions, at lines 3 and 5 of main: __omp_offloading_<dev>_<inode>_main_l3 / _l5.
    assert all(n.startswith(OMP_ENTRY_PREFIX) for n in names)
    assert [n.rsplit("_", 2)[-2:] for n in names] == [["main", "l3"], ["main", "l5"]]
    # The inode part is the source file's inode, in hex.
    inode = (samples.workdir() / "omp.c").stat().st_ino
    assert all(f"_{inode:x}_main_" in n for n in names)


@pytest.mark.parametrize("name", ["omp19_nv.o", "omp19_amd.o", "omp19_nv.exe", "omp19_amd.exe", "omp19_nv.so",
                                  "omp22.o"])
def test_consistent_builds_pass(omp, name):
    path = samples.need(omp, name)
    res = verify_file(str(path), check_entries=True)
    assert res.ok, res.problems
    assert res.entries_checked >= 2
    assert not res.notes


def test_llvm_objdump_agrees_on_the_images_checked(omp):
    objdump = need_tool("llvm-objdump-19")
    path = samples.need(omp, "omp19_nv.exe")
    res = verify_file(str(path))
    out = run([objdump, "--offloading", path]).stdout.decode()
    assert out.count("OFFLOADING IMAGE") == len(res.images) >= 1
    assert res.entries_checked == 2 * len(res.images)


def test_host_only_object_is_fine_by_default_but_not_with_check_entries(tmp_path):
    c19 = need_tool("clang-19")
    (tmp_path / "s.c").write_text(samples.OMP_SRC)
    host = tmp_path / "host.o"
    assert run([c19, "-fopenmp", "--offload-arch=sm_80", "--offload-host-only", "-c", tmp_path / "s.c", "-o", host]
               ).returncode == 0
    assert verify_file(str(host)).ok
    res = verify_file(str(host), check_entries=True)
    assert res.ok and res.notes and "no OpenMP device images" in res.notes[0]
    cli = run_cli("tool", "verify", "--check-entries", host)
    assert cli.returncode == 1 and b"no OpenMP device images" in cli.stdout


# ---------------------------------------------------------------------------------------------
# The case this check exists for: host and device compiled from different file identities.


def _make_fat(tmp: Path, host: Path, device: Path, arch: str, triple: str, out: Path) -> Path:
    packager = need_tool("clang-offload-packager-19")
    pkg = tmp / (out.stem + ".pkg")
    res = run([packager, "-o", pkg, f"--image=file={device},triple={triple},arch={arch},kind=openmp"])
    assert res.returncode == 0, res.stderr
    res = run_cli("tool", "embed", host, pkg, "-o", out)
    assert res.returncode == 0, res.stderr
    return out


@pytest.mark.parametrize("arch,triple,flags", [
    ("sm_80", "nvptx64-nvidia-cuda", [samples.NV_BC]),                  # device image: CUDA ELF (symtab)
    ("gfx90a", "amdgcn-amd-amdhsa", [samples.ROCM_BC]),                 # device image: LLVM bitcode (byte search)
])
def test_recreated_source_is_caught(tmp_path, arch, triple, flags):
    c19 = need_tool("clang-19")
    src = tmp_path / "s.c"
    src.write_text(samples.OMP_SRC)
    omp = [c19, "-fopenmp", f"--offload-arch={arch}", *flags, "-c", src]
    host, dev_same, dev_new = tmp_path / "host.o", tmp_path / "dev_same.o", tmp_path / "dev_new.o"
    assert run([*omp, "--offload-host-only", "-o", host]).returncode == 0
    assert run([*omp, "--offload-device-only", "-o", dev_same]).returncode == 0
    # Re-create the source: same text, new inode (cp + mv, as an editor or a checkout does).
    old_inode = src.stat().st_ino
    shutil.copy(src, tmp_path / "s2.c")
    (tmp_path / "s2.c").rename(src)
    assert src.stat().st_ino != old_inode
    assert run([*omp, "--offload-device-only", "-o", dev_new]).returncode == 0

    good = _make_fat(tmp_path, host, dev_same, arch, triple, tmp_path / "good.o")
    bad = _make_fat(tmp_path, host, dev_new, arch, triple, tmp_path / "bad.o")
    host_names = [e.name for e in host_offload_entries(host.read_bytes())]
    assert len(host_names) == 2 and not any(image_has_symbol(dev_new.read_bytes(), n) for n in host_names)

    assert verify_file(str(good)).ok
    res = verify_file(str(bad))
    assert not res.ok
    assert sorted(name for name, _ in res.missing_entries) == sorted(host_names)
    # One line per (entry, image), naming both.
    cli = run_cli("tool", "verify", bad)
    assert cli.returncode == 1
    lines = cli.stdout.decode().splitlines()
    assert len(lines) == 2 and all("missing host offload entry '__omp_offloading_" in ln for ln in lines)
    assert all(".llvm.offloading[0]" in ln for ln in lines)
    assert run_cli("tool", "verify", "-q", good).returncode == 0
    assert run_cli("tool", "verify", "--no-check-entries", bad).returncode == 0

    # The same holds after linking into programs (clang-linker-wrapper keeps the host entries).
    link = [c19, "-fopenmp", f"--offload-arch={arch}", *flags]
    if arch.startswith("gfx"):
        link.append(samples.AMD_BC)
    good_exe, bad_exe = tmp_path / "good.exe", tmp_path / "bad.exe"
    assert run([*link, good, "-o", good_exe]).returncode == 0
    assert run([*link, bad, "-o", bad_exe]).returncode == 0
    assert verify_file(str(good_exe)).ok
    res = verify_file(str(bad_exe))
    assert sorted(name for name, _ in res.missing_entries) == sorted(host_names)


def test_archive_members_are_checked_separately(tmp_path, omp):
    ar = need_tool("llvm-ar-19")
    nv, amd = samples.need(omp, "omp19_nv.o", "omp19_amd.o")
    lib = tmp_path / "libomp.a"
    shutil.copy(nv, tmp_path / "a.o")
    shutil.copy(amd, tmp_path / "b.o")
    assert run([ar, "rcs", lib, tmp_path / "a.o", tmp_path / "b.o"]).returncode == 0
    res = verify_file(str(lib), require=["sm_80", "gfx90a"])
    assert res.ok, res.problems
    assert res.entries_checked == 4


# ---------------------------------------------------------------------------------------------
# Corrupt entry sections


def test_corrupt_entries_section_is_one_error(omp):
    path = samples.need(omp, "omp19_nv.o")
    data = bytearray(path.read_bytes())
    from elftools.elf.elffile import ELFFile
    import io
    elf = ELFFile(io.BytesIO(bytes(data)))
    rela = elf.get_section_by_name(".relaomp_offloading_entries")
    # Point the addend of the relocation of entry 0's name (r_offset 8) far outside the strings.
    index = next(i for i, r in enumerate(rela.iter_relocations()) if r["r_offset"] == 8)
    off = rela["sh_offset"] + 24 * index + 16
    data[off:off + 8] = (1 << 40).to_bytes(8, "little")
    with pytest.raises(OffloadError, match="outside its section"):
        host_offload_entries(bytes(data))
    bad = path.parent / "corrupt_entries.o"
    bad.write_bytes(bytes(data))
    res = run_cli("tool", "verify", bad)
    assert res.returncode == 1
    err = res.stderr.decode().strip().splitlines()
    assert len(err) == 1 and err[0].startswith("offload-tool: error: ")
    assert b"Traceback" not in res.stderr


@pytest.fixture(scope="module")
def entry_regions(omp):
    """A real clang 19 object and the byte ranges verify reads: entries, their relocations,
    the symbol and string tables, the entry-name strings."""
    from elftools.elf.elffile import ELFFile
    import io
    path = samples.need(omp, "omp19_nv.o")
    data = path.read_bytes()
    elf = ELFFile(io.BytesIO(data))
    regions = []
    for name in ("omp_offloading_entries", ".relaomp_offloading_entries", ".symtab", ".strtab"):
        sec = elf.get_section_by_name(name)
        regions.append((sec["sh_offset"], sec["sh_offset"] + sec["sh_size"]))
    regions.append((elf["e_shoff"], elf["e_shoff"] + elf["e_shnum"] * elf["e_shentsize"]))
    return data, regions


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(st.data())
def test_corrupt_host_objects_only_raise_offload_error(entry_regions, data):
    blob, regions = entry_regions
    blob = bytearray(blob)
    for _ in range(data.draw(st.integers(1, 4))):
        lo, hi = data.draw(st.sampled_from(regions))
        pos = data.draw(st.integers(lo, hi - 1))
        blob[pos] = data.draw(st.integers(0, 255))
    try:
        host_offload_entries(bytes(blob))
        verify_buffer(bytes(blob), "fuzz.o", require=["sm_80"])
    except OffloadError:
        pass
