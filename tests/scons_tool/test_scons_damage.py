"""A per-arch device object damaged after it was built (truncated to half, its timestamp kept or
not; any damage with a new timestamp) never reaches the program: the step that consumes it (the HIP bundle, nvcc's fat binary, the
package of clang device objects, the AMD device link) checks it first
(`offload_tool.ops.integrity`), the build stops with one line naming it, the file is removed, and
the next build remakes it; a damaged copy in SCons's `CacheDir` is dropped with it, so the next
build compiles the object again instead of fetching the same bytes. `offload-tool verify`
refuses a program holding a damaged image. Damage that keeps both the file's size and its timestamp
is caught when the step that reads the object next runs (the tool's files are judged by timestamp
first, so a null build reads none of them); until then the program holds the whole object."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from conftest import need_tool, run_cli
from scons_helpers import Project, assert_clean_failure, device_archs

pytestmark = pytest.mark.slow

HIP = """
#include <hip/hip_runtime.h>
__global__ void vadd(float *a) { a[threadIdx.x] += 1; }
int main() { return 0; }
"""

CUDA = """
__global__ void k(float *x) { x[threadIdx.x] *= 2; }
int main() { return 0; }
"""

OPENMP = """
int main(void) {
  int x = 0;
#pragma omp target map(tofrom: x)
  x = 1;
  return x == 1 ? 0 : 1;
}
"""


def _truncate(path, keep_mtime: bool) -> None:
    st = path.stat()
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    else:
        os.utime(path, (st.st_mtime + 5, st.st_mtime + 5))


def _stretch(path, keep_mtime: bool) -> None:
    """A section in the middle of the section header table made to end past the end of the file
    (its `sh_size` set to the file's size): the reader fails half-way through the table, with its
    views of the file still in use, which once crashed the SCons process when the error's
    traceback was collected."""
    import struct
    st = path.stat()
    data = bytearray(path.read_bytes())
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, path  # 64-bit little-endian
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    holding = [i for i in range(1, shnum)
               if struct.unpack_from("<I", data, shoff + i * shentsize + 4)[0] == 1  # SHT_PROGBITS
               and struct.unpack_from("<Q", data, shoff + i * shentsize + 32)[0]]
    assert len(holding) >= 2, path
    struct.pack_into("<Q", data, shoff + holding[len(holding) // 2] * shentsize + 32, len(data))
    path.write_bytes(bytes(data))
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    else:
        os.utime(path, (st.st_mtime + 5, st.st_mtime + 5))


def _damage_and_recover(p: Project, damaged, program: str, require: str, keep_mtime: bool, *args: str,
                        damage=_truncate) -> None:
    assert damaged.exists(), sorted(str(x) for x in damaged.parent.iterdir())
    damage(damaged, keep_mtime)
    cp = p.scons(*args, check=False)
    out = assert_clean_failure(cp)
    errors = [line for line in out.splitlines() if line.startswith("offload: error:")]
    assert len(errors) == 1, out
    assert f"{damaged.relative_to(p.root)}: damaged device object" in errors[0], out
    assert not damaged.exists()  # removed: its node is out of date now
    cp = p.scons(*args)
    assert damaged.exists()
    cp = run_cli("tool", "verify", str(p.root / program), "--require", require)
    assert cp.returncode == 0, cp.stdout + cp.stderr


@pytest.mark.parametrize("keep_mtime", [True, False], ids=["same-mtime", "new-mtime"])
def test_truncated_hip_code_object(tmp_path, keep_mtime):
    _hip_code_object(tmp_path, keep_mtime, _truncate)


def test_stretched_hip_code_object(tmp_path):
    # A new timestamp: the tool's files are judged by timestamp, then content, and a file of the
    # same size and time is taken as unchanged (test_damage_behind_the_timestamp_waits_for_its_step).
    _hip_code_object(tmp_path, False, _stretch)


def _hip_code_object(tmp_path, keep_mtime, damage):
    need_tool("clang-19")
    p = Project(tmp_path / "p", {
        "SConstruct": "env = Environment(tools=['default', 'offload'], OFFLOAD_CLANG='clang-19', "
                      "OFFLOAD_ARCHS=['gfx90a'], OFFLOAD_HIP_DRIVER='old')\nenv.OffloadProgram('v', ['src/v.hip'])\n",
        "src/v.hip": HIP})
    p.scons()
    _damage_and_recover(p, p.root / "src" / "v.gfx90a.co", "v", "gfx90a", keep_mtime, damage=damage)


@pytest.mark.parametrize("keep_mtime", [True, False], ids=["same-mtime", "new-mtime"])
def test_truncated_nvcc_cubin(tmp_path, keep_mtime):
    _nvcc_cubin(tmp_path, keep_mtime, _truncate)


def test_stretched_nvcc_cubin(tmp_path):
    # A new timestamp: nvcc's intermediates are judged by timestamp, then content, and a file of
    # the same size and time is taken as unchanged (the fat binary made from it is whole).
    _nvcc_cubin(tmp_path, False, _stretch)


def _nvcc_cubin(tmp_path, keep_mtime, damage):
    if not (shutil.which("nvcc") or os.path.exists("/usr/local/cuda/bin/nvcc")):
        pytest.skip("nvcc not available")
    p = Project(tmp_path / "p", {
        "SConstruct": "import os\nenv = Environment(tools=['default', 'offload'], ENV={'PATH': os.environ['PATH']}, "
                      "OFFLOAD_ARCHS=['sm_80'], OFFLOAD_CUDA_COMPILER='nvcc', OFFLOAD_NVCC_SPLIT=True)\n"
                      "env.OffloadProgram('k', ['src/k.cu'])\n",
        "src/k.cu": CUDA})
    p.scons()
    _damage_and_recover(p, p.root / "src" / "k.sm_80.cubin", "k", "sm_80", keep_mtime, damage=damage)


def _openmp_project(tmp_path) -> Project:
    """An OpenMP program for sm_80 and gfx90a, built."""
    need_tool("clang-19")
    p = Project(tmp_path / "p", {
        "SConstruct": "env = Environment(tools=['default', 'offload'], OFFLOAD_CLANG='clang-19', "
                      "OFFLOAD_ARCHS=['sm_80', 'gfx90a'])\nenv.OffloadProgram('app', ['src/main.c'])\n",
        "src/main.c": OPENMP})
    p.scons()
    return p


@pytest.mark.parametrize("keep_mtime, damage, name",
                         [(True, _truncate, "main.sm_80.o"), (False, _truncate, "main.sm_80.o"),
                          (True, _truncate, "main.gfx90a.bc"), (False, _truncate, "main.gfx90a.bc"),
                          (False, _stretch, "main.sm_80.o")],  # bitcode has no section table
                         ids=["sm_80-same-mtime", "sm_80-new-mtime", "gfx90a-same-mtime", "gfx90a-new-mtime",
                              "sm_80-stretched"])
def test_truncated_openmp_device_object(tmp_path, name, keep_mtime, damage):
    p = _openmp_project(tmp_path)
    _damage_and_recover(p, p.root / "src" / name, "app", "sm_80,gfx90a", keep_mtime, damage=damage)


def test_damage_behind_the_timestamp_waits_for_its_step(tmp_path):
    """A device object damaged with its size and timestamp kept: the tool's files are judged by
    timestamp first (a null build reads none of them), so the build is up to date, and the
    program, linked from the whole object, still verifies. The damage is caught when a step
    that reads the object runs again (here the package, removed): named, removed, remade."""
    p = _openmp_project(tmp_path)
    damaged = p.root / "src" / "main.sm_80.o"
    _stretch(damaged, True)
    assert p.up_to_date()
    cp = run_cli("tool", "verify", str(p.root / "app"), "--require", "sm_80,gfx90a")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    packages = [f for f in p.root.iterdir() if f.name.startswith("app.") and f.name.endswith(".pkg")]
    assert packages, sorted(f.name for f in p.root.iterdir())
    for f in packages:
        f.unlink()
    _damage_and_recover(p, damaged, "app", "sm_80,gfx90a", True, damage=lambda path, keep: None)


def test_every_file_the_tool_writes_is_judged_by_its_timestamp(tmp_path):
    """Every file the tool's builders write, whatever the step (host IR, host and device objects,
    package + embed, the program), is judged by its timestamp first: one changed with its size and
    timestamp kept leaves the build up to date (a null build reads none of them); given a new
    timestamp, the steps that read it run again."""
    need_tool("clang-19")
    p = Project(tmp_path / "p", {
        "SConstruct": "env = Environment(tools=['default', 'offload'], OFFLOAD_CLANG='clang-19', "
                      "OFFLOAD_ARCHS=['sm_80', 'sm_90'])\nenv.OffloadProgram('app', ['src/main.c'])\n",
        "src/main.c": OPENMP})
    p.scons()
    written = sorted(f for f in p.root.rglob("*") if f.is_file() and f.name not in ("SConstruct", "main.c")
                     and not f.name.startswith(".sconsign"))
    names = {f.name for f in written}
    assert {"main.host.bc", "main.host.o", "main.sm_80.o", "main.sm_90.o", "app"} <= names, names
    assert any(n.endswith(".pkg") for n in names), names    # package + embed
    time.sleep(1.1)   # a timestamp from the second a run began in is not trusted
    for f in written:
        st = f.stat()
        data = bytearray(f.read_bytes())
        data[len(data) // 2] ^= 0xFF
        f.write_bytes(bytes(data))
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert p.up_to_date(), f"{f.name}: changed with its size and timestamp kept, and the build ran"
    for f in written:
        if f.name != "app":
            os.utime(f, (f.stat().st_mtime + 5, f.stat().st_mtime + 5))
    assert not p.up_to_date()   # new timestamps: the readers compare content, which changed
    p.scons()
    cp = run_cli("tool", "verify", str(p.root / "app"), "--require", "sm_80,sm_90")
    assert cp.returncode == 0, cp.stdout + cp.stderr


@pytest.mark.parametrize("damaged, split", [("src/twice.o", "1"), ("scale.sm_80.dlink.cubin", "1"),
                                            ("src/twice.o", "0")],
                         ids=["nvlink-object", "dlink-cubin", "nvcc-dlink-object"])
def test_truncated_nvcc_rdc_device_link_input(tmp_path, damaged, split):
    """nvcc's device link of relocatable device code checks what it takes: an object of
    `-rdc=true` code before nvlink (or the one `nvcc -dlink` when the graph is not split), a cubin
    nvlink wrote before the link stub's fat binary. The damaged one is named and removed, and the
    next build remakes it and links a program `verify` accepts."""
    need_tool("nvcc")
    need_tool("clang-19")  # the tool validates archs with clang's table
    from test_scons_nvcc_rdc import MAIN, SCONSTRUCT, TWICE
    p = Project(tmp_path / "p", {"SConstruct": SCONSTRUCT, "src/main.cu": MAIN, "src/twice.cu": TWICE})
    p.scons(f"split={split}")
    _damage_and_recover(p, p.root / damaged, "scale", "sm_80", True, f"split={split}")


def _cache_copy(cache, target):
    """The file in the CacheDir `cache` that holds the same bytes as `target`."""
    data = target.read_bytes()
    copies = [f for f in cache.rglob("*") if f.is_file() and f.read_bytes() == data]
    assert len(copies) == 1, (target, sorted(str(f) for f in cache.rglob("*")))
    return copies[0]


@pytest.mark.parametrize("case", ["hip", "openmp"])
def test_damaged_cachedir_copy_is_dropped(tmp_path, case):
    """A clean build fetches a truncated copy from the CacheDir: the consumer names the object,
    removes it and its cache copy, and the next build compiles it (one DEVICE step for that arch)
    and links a program `verify` accepts; the cache then holds a whole copy again."""
    need_tool("clang-19")
    if case == "hip":
        files = {"SConstruct": "CacheDir('cache')\nenv = Environment(tools=['default', 'offload'], "
                               "OFFLOAD_CLANG='clang-19', OFFLOAD_ARCHS=['gfx90a'], OFFLOAD_HIP_DRIVER='old')\n"
                               "env.OffloadProgram('v', ['src/v.hip'])\n",
                 "src/v.hip": HIP}
        rel, program, archs, arch = "src/v.gfx90a.co", "v", "gfx90a", "gfx90a"
    else:
        files = {"SConstruct": "CacheDir('cache')\nenv = Environment(tools=['default', 'offload'], "
                               "OFFLOAD_CLANG='clang-19', OFFLOAD_ARCHS=['sm_80', 'gfx90a'])\n"
                               "env.OffloadProgram('app', ['src/main.c'])\n",
                 "src/main.c": OPENMP}
        rel, program, archs, arch = "src/main.gfx90a.bc", "app", "sm_80,gfx90a", "gfx90a"
    p = Project(tmp_path / "p", files)
    p.scons()
    target = p.root / rel
    copy = _cache_copy(p.root / "cache", target)
    _truncate(copy, keep_mtime=True)
    p.scons("-c")
    assert not target.exists()

    cp = p.scons(check=False)  # fetches every object from the cache, the damaged one too
    out = assert_clean_failure(cp)
    assert device_archs(cp)[arch] == 0, out
    errors = [line for line in out.splitlines() if line.startswith("offload: error:")]
    assert len(errors) == 1, out
    assert f"{rel}: damaged device object" in errors[0] and "CacheDir copy" in errors[0] \
        and "is removed" in errors[0], out
    assert not target.exists() and not copy.exists()

    cp = p.scons()
    assert device_archs(cp)[arch] == 1, cp.stdout
    cp = run_cli("tool", "verify", str(p.root / program), "--require", archs)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    from offload_tool.ops.integrity import check_image
    check_image(_cache_copy(p.root / "cache", target))  # the cache holds a whole copy again


def test_verify_refuses_a_package_holding_a_truncated_image(tmp_path):
    """A package (and a program carrying it) whose image is half a cubin fails `verify`, naming
    the image."""
    if not (shutil.which("nvcc") or os.path.exists("/usr/local/cuda/bin/nvcc")):
        pytest.skip("nvcc not available")
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    (tmp_path / "k.cu").write_text(CUDA)
    subprocess.run([nvcc, "-arch=sm_80", "-cubin", "-o", str(tmp_path / "k.cubin"), str(tmp_path / "k.cu")],
                   check=True, capture_output=True)
    good = (tmp_path / "k.cubin").read_bytes()
    (tmp_path / "half.cubin").write_bytes(good[:len(good) // 2])
    for image, ok in (("k.cubin", True), ("half.cubin", False)):
        pkg = tmp_path / f"{image}.pkg"
        cp = run_cli("packager", f"-o={pkg}",
                     f"--image=file={tmp_path / image},triple=nvptx64-nvidia-cuda,arch=sm_80,kind=cuda")
        assert cp.returncode == 0, cp.stderr
        cp = run_cli("tool", "verify", str(pkg))
        out = (cp.stdout + cp.stderr).decode("utf-8", "replace")
        if ok:
            assert cp.returncode == 0, out
        else:
            assert cp.returncode != 0 and "half.cubin.pkg[0]: damaged image:" in out and "section header table" in out, out


def test_host_ir_temporary_is_beside_the_output_and_unpredictable(tmp_path):
    """The file between an OpenMP device job and ptxas is not a name in the shared temporary
    folder that another user could pre-create: it lies beside the output, with a random part."""
    import sys
    import tempfile
    from conftest import REPO
    pytest.importorskip("SCons")
    sys.path.insert(0, str(REPO / "site_scons" / "site_tools"))
    from offload.graph import host_ir as _host_ir
    out = str(tmp_path / "k.sm_80.o")
    t = _host_ir.temp_path(out, ".s")
    assert os.path.dirname(t) == str(tmp_path) and t.endswith(".s")
    assert not t.startswith(tempfile.gettempdir() + os.sep + "offload-device-")
    assert _host_ir._RUN_TOKEN in os.path.basename(t) and len(_host_ir._RUN_TOKEN) >= 12
