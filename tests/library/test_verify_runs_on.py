"""`offload-tool verify --runs-on`: the compatibility rules (table-driven) and real images built here."""

from __future__ import annotations

from pathlib import Path

import pytest

import offload_samples
from conftest import need_tool, run, run_cli
from offload_tool.errors import UsageError
from offload_tool.formats.offload_binary import make_image, write_offload_binary
from offload_tool.ops.runs_on import GENERIC_PROCESSORS, Code, amd_runs, nvidia_runs, parse_gpu, runs_on
from offload_tool.ops.inspector import DeviceImage, inspect_buffer
from offload_tool.ops.verify import verify_buffer
from offload_tool.formats.elf import needed_libraries
from offload_tool.rules.openmp_runtime import (CUDA_ELF_ABI_V1, CUDA_ELF_ABI_V2, Runtime, cuda_elf_abi, refusal,
                                               runtime_of)


# --------------------------------------------------------------------------------------------
# NVIDIA rules

@pytest.mark.parametrize("form, arch, gpu, ok", [
    ("sass", "sm_80", 80, True),
    ("sass", "sm_80", 86, True),     # same major, higher minor
    ("sass", "sm_80", 89, True),
    ("sass", "sm_86", 80, False),    # never downwards
    ("sass", "sm_80", 90, False),    # never across majors
    ("sass", "sm_90", 100, False),
    ("sass", "sm_100", 103, True),
    ("sass", "sm_80", 87, False),    # Tegra (Orin) keeps apart from desktop SASS
    ("sass", "sm_87", 89, False),
    ("sass", "sm_72", 72, True),
    ("sass", "sm_70", 72, False),
    ("sass", "sm_50", 53, False),    # desktop SASS never on Tegra (X1, X2, K1) ...
    ("sass", "sm_60", 62, False),
    ("sass", "sm_30", 32, False),
    ("sass", "sm_53", 53, True),     # ... Tegra SASS on its own SM only
    ("sass", "sm_53", 60, False),
    ("sass", "sm_110", 110, True),
    ("sass", "sm_101", 103, False),
    ("sass", "sm_90a", 90, True),    # arch-specific: exactly its SM
    ("sass", "sm_100a", 103, False),
    ("sass", "sm_100f", 100, True),  # family-specific: same major, minor >= Y
    ("sass", "sm_100f", 103, True),
    ("sass", "sm_103f", 100, False),
    ("sass", "sm_100f", 101, False),  # sm_101 is Tegra (Thor)
    ("sass", "sm_120f", 121, True),
    ("sass", "sm_120f", 100, False),
    ("ptx", "sm_80", 80, True),      # PTX compute_80: JIT for compute capability >= 8.0
    ("ptx", "sm_80", 90, True),
    ("ptx", "sm_80", 120, True),
    ("ptx", "sm_80", 87, True),      # PTX is JIT-compiled for Tegra too
    ("ptx", "sm_50", 53, True),
    ("ptx", "sm_90", 89, False),
    ("ptx", "sm_90a", 90, True),
    ("ptx", "sm_90a", 100, False),
    ("ptx", "sm_100f", 103, True),
    ("ptx", "sm_100f", 120, False),
    ("ir", "sm_80", 86, True),       # LLVM IR becomes SASS for its arch at link
    ("ir", "sm_80", 90, False),
])
def test_nvidia_rules(form, arch, gpu, ok):
    assert nvidia_runs(Code("nvidia", form, arch), gpu)[0] is ok


def test_nvidia_wording():
    assert nvidia_runs(Code("nvidia", "sass", "sm_80"), 86) == (True, "SASS sm_80, same major")
    assert nvidia_runs(Code("nvidia", "ptx", "sm_80"), 90) == (True, "PTX compute_80 (JIT)")
    assert nvidia_runs(Code("nvidia", "sass", "sm_80"), 90) == (False, "SASS sm_80 only (major 8)")


# --------------------------------------------------------------------------------------------
# AMD rules

ON_OFF = [True, False]


@pytest.mark.parametrize("code, gpu, modes, ok", [
    ("gfx90a", "gfx90a", {"xnack": True, "sramecc": True}, True),
    ("gfx90a", "gfx90a", {"xnack": False, "sramecc": False}, True),   # "any" runs in every mode
    ("gfx90a:xnack+", "gfx90a", {"xnack": True, "sramecc": False}, True),
    ("gfx90a:xnack+", "gfx90a", {"xnack": False, "sramecc": False}, False),
    ("gfx90a:xnack-", "gfx90a", {"xnack": True, "sramecc": False}, False),
    ("gfx90a:sramecc+:xnack-", "gfx90a", {"xnack": False, "sramecc": True}, True),
    ("gfx90a:sramecc+:xnack-", "gfx90a", {"xnack": False, "sramecc": False}, False),
    ("gfx90a", "gfx908", {"xnack": False, "sramecc": False}, False),  # a processor's own code only
    ("gfx942", "gfx950", {"xnack": False, "sramecc": False}, False),
    ("gfx1100", "gfx1101", {}, False),
    ("gfx9-generic", "gfx906", {"xnack": False, "sramecc": False}, True),
    ("gfx9-generic", "gfx90a", {"xnack": False, "sramecc": False}, False),
    ("gfx9-generic:xnack+", "gfx900", {"xnack": True}, True),
    ("gfx9-generic:xnack+", "gfx900", {"xnack": False}, False),
    ("gfx9-4-generic", "gfx942", {"xnack": False, "sramecc": True}, True),
    ("gfx9-4-generic:sramecc-", "gfx950", {"xnack": False, "sramecc": True}, False),
    ("gfx10-1-generic", "gfx1013", {"xnack": False}, True),
    ("gfx10-3-generic", "gfx1036", {}, True),
    ("gfx10-3-generic", "gfx1100", {}, False),
    ("gfx11-generic", "gfx1151", {}, True),
    ("gfx11-generic", "gfx1200", {}, False),
    ("gfx12-generic", "gfx1201", {}, True),
])
def test_amd_rules(code, gpu, modes, ok):
    assert amd_runs(Code("amd", "code", code), parse_gpu(gpu), modes)[0] is ok


def test_generic_members_are_processors_of_the_table():
    for generic, members in GENERIC_PROCESSORS.items():
        for p in members:
            if p in ("gfx940", "gfx941"):  # left LLVM in 21; still in the 19/20 table
                continue
            assert parse_gpu(p).processor == p, (generic, p)


@pytest.mark.parametrize("bad", ["sm_90a", "sm_100f", "compute_80", "gfx9-generic", "gfx1030:xnack+", "banana",
                                 "", "-x", "gfx90a:foo+"])
def test_bad_gpu_is_a_usage_error(bad):
    with pytest.raises(UsageError):
        parse_gpu(bad)


# --------------------------------------------------------------------------------------------
# Whole files (synthetic packages): units, modes, the lines

def _package(*images: tuple[str, str]) -> bytes:
    return b"".join(write_offload_binary(make_image(b"\x7fELF" + bytes(12), {"triple": triple, "arch": arch},
                                                    image_kind=1, offload_kind=1))
                    for triple, arch in images)


def _lines(buf, *gpus):
    res = verify_buffer(buf, "app", runs_on=list(gpus), check_entries=False)
    return [f"app: {v.gpu.text}: {v.line}" for v in res.runs_on], res


def test_lines_and_modes():
    pkg = _package(("amdgcn-amd-amdhsa", "gfx90a:xnack+"), ("nvptx64-nvidia-cuda", "sm_80"))
    lines, res = _lines(pkg, "sm_86", "sm_90", "gfx90a:xnack-", "gfx90a:xnack+", "gfx90a")
    assert lines == ["app: sm_86: yes (SASS sm_80, same major)",
                     "app: sm_90: no: SASS sm_80 only (major 8), no PTX",
                     "app: gfx90a:xnack-: no: gfx90a:xnack+ needs XNACK on",
                     "app: gfx90a:xnack+: yes (gfx90a:xnack+)",
                     "app: gfx90a: only if XNACK is on (gfx90a:xnack+)"]
    assert [v.ok for v in res.runs_on] == [True, False, False, True, False]
    assert not res.ok
    assert [p for p in res.problems if " damaged image" not in p] == [lines[1], lines[2], lines[4]]


def test_code_for_each_mode_runs_in_either():
    pkg = _package(("amdgcn-amd-amdhsa", "gfx90a:xnack+"), ("amdgcn-amd-amdhsa", "gfx90a:xnack-"))
    (line,), res = _lines(pkg, "gfx90a")
    assert res.runs_on[0].ok and line == ("app: gfx90a: yes (gfx90a:xnack+ where XNACK is on; "
                                    "gfx90a:xnack- where XNACK is off)")


def test_no_code_for_the_vendor():
    (line,), res = _lines(_package(("nvptx64-nvidia-cuda", "sm_80")), "gfx942")
    assert line == "app: gfx942: no: no AMD GPU code (SASS sm_80)" and not res.runs_on[0].ok


# --------------------------------------------------------------------------------------------
# Real images

KERNEL_CU = "__global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }\n"
KERNEL_HIP = """struct dim3 { unsigned x, y, z; };
typedef struct ihipStream_t *hipStream_t;
extern "C" int hipLaunchKernel(const void *, dim3, dim3, void **, unsigned long, hipStream_t);
__attribute__((global)) void k(float *x) { x[0] *= 2.0f; }
"""
OMP_C = """void f(float *x, int n) {
#pragma omp target teams distribute parallel for map(tofrom: x[0:n])
  for (int i = 0; i < n; ++i) x[i] *= 2.0f;
}
"""


@pytest.fixture(scope="module")
def nvcc_objects(tmp_path_factory) -> dict[str, Path]:
    nvcc = need_tool("nvcc")
    d = tmp_path_factory.mktemp("nvcc")
    (d / "k.cu").write_text(KERNEL_CU)
    out = {}
    for name, code in [("sass80", "arch=compute_80,code=sm_80"), ("both80", "arch=compute_80,code=[sm_80,compute_80]"),
                       ("sm90a", "arch=compute_90a,code=sm_90a")]:
        cp = run([nvcc, "-c", "-gencode", code, d / "k.cu", "-o", d / f"{name}.o"])
        assert cp.returncode == 0, cp.stderr.decode()
        out[name] = d / f"{name}.o"
    return out


def _verify(path, gpus: str):
    cp = run_cli("tool", "verify", "--runs-on", gpus, str(path))
    return cp.returncode, cp.stdout.decode().splitlines()


def test_nvcc_sass_only(nvcc_objects):
    p = nvcc_objects["sass80"]
    assert _verify(p, "sm_86") == (0, [f"{p}: sm_86: yes (SASS sm_80, same major)",
                                       f"{p}: ok: 1 device image(s); runs on sm_86"])
    assert _verify(p, "sm_80,sm_90") == (1, [f"{p}: sm_80: yes (SASS sm_80)",
                                             f"{p}: sm_90: no: SASS sm_80 only (major 8), no PTX"])


def test_nvcc_sass_and_ptx(nvcc_objects):
    p = nvcc_objects["both80"]
    rc, lines = _verify(p, "sm_86,sm_90,sm_75")
    assert rc == 1
    assert lines == [f"{p}: sm_86: yes (SASS sm_80, same major)", f"{p}: sm_90: yes (PTX compute_80 (JIT))",
                     f"{p}: sm_75: no: SASS sm_80 only (major 8), PTX compute_80 needs compute capability 8.0 or higher"]


def test_nvcc_arch_specific(nvcc_objects):
    p = nvcc_objects["sm90a"]
    assert _verify(p, "sm_90")[0] == 0
    for gpu in ("sm_80", "sm_100", "sm_120"):
        rc, lines = _verify(p, gpu)
        assert rc == 1 and lines == [f"{p}: {gpu}: no: SASS sm_90a runs on sm_90 only, no PTX"]


def test_with_require_and_max_bytes(nvcc_objects):
    p = nvcc_objects["both80"]
    cp = run_cli("tool", "verify", "-q", "--runs-on=sm_90", "--require=sm_80,compute_80", "--max-bytes=total:1M", str(p))
    assert cp.returncode == 0 and cp.stdout == b""
    cp = run_cli("tool", "verify", "--runs-on=sm_70", "--require=sm_90", "--max-bytes=total:10", str(p))
    out = cp.stdout.decode()
    assert cp.returncode == 1
    assert f"{p}: sm_70: no:" in out and "missing required arch 'sm_90'" in out and "over the budget" in out


@pytest.fixture(scope="module")
def clang_amd_objects(tmp_path_factory) -> dict[str, Path]:
    clang = need_tool("clang-19")
    d = tmp_path_factory.mktemp("amd")
    (d / "k.hip").write_text(KERNEL_HIP)
    (d / "omp.c").write_text(OMP_C)
    out = {}
    for name, cmd in [("hip_any", ["-x", "hip", "--offload-arch=gfx90a", "-nogpulib", "-c", d / "k.hip"]),
                      ("hip_xnack_on", ["-x", "hip", "--offload-arch=gfx90a:xnack+", "-nogpulib", "-c", d / "k.hip"]),
                      ("omp_xnack_off", ["-fopenmp", "--offload-arch=gfx90a:xnack-", "-nogpulib", "-c", d / "omp.c"])]:
        cp = run([clang, *cmd, "-o", d / f"{name}.o"])
        assert cp.returncode == 0, cp.stderr.decode()
        out[name] = d / f"{name}.o"
    return out


def test_clang_hip_xnack(clang_amd_objects):
    p = clang_amd_objects["hip_xnack_on"]
    assert _verify(p, "gfx90a:xnack-") == (1, [f"{p}: gfx90a:xnack-: no: gfx90a:xnack+ needs XNACK on"])
    assert _verify(p, "gfx90a:xnack+")[0] == 0
    assert _verify(p, "gfx90a") == (1, [f"{p}: gfx90a: only if XNACK is on (gfx90a:xnack+)"])
    assert _verify(p, "gfx908:xnack+") == (1, [f"{p}: gfx908:xnack+: no: gfx90a:xnack+ is for gfx90a only"])
    any_ = clang_amd_objects["hip_any"]
    assert _verify(any_, "gfx90a,gfx90a:xnack-,gfx90a:sramecc+:xnack+")[0] == 0


def test_clang_openmp_bitcode(clang_amd_objects):
    p = clang_amd_objects["omp_xnack_off"]
    assert _verify(p, "gfx90a:xnack-") == (0, [f"{p}: gfx90a:xnack-: yes (LLVM IR gfx90a:xnack-, code object at link)",
                                               f"{p}: ok: 1 device image(s); runs on gfx90a:xnack-; "
                                               "1 entry/image pair(s) consistent"])
    assert _verify(p, "gfx90a:xnack+")[0] == 1
    assert _verify(p, "sm_80") == (1, [f"{p}: sm_80: no: no NVIDIA GPU code (LLVM IR gfx90a:xnack-)"])


def test_bad_runs_on_is_a_usage_error(tmp_path):
    f = tmp_path / "x"
    f.write_bytes(b"plain")
    cp = run_cli("tool", "verify", "--runs-on=sm_90a", str(f))
    assert cp.returncode == 1 and b"the GPU is sm_90" in cp.stderr and b"Traceback" not in cp.stderr


# --------------------------------------------------------------------------------------------
# The SCons tool: OFFLOAD_RUNS_ON makes OffloadManifest's verify pass --runs-on

def test_scons_manifest_verify_passes_runs_on():
    import sys
    from conftest import REPO
    sys.path.insert(0, str(REPO / "site_scons" / "site_tools"))
    pytest.importorskip("SCons")
    import SCons.Errors
    from offload.graph import bundling as _bundling
    cmd = _bundling.verify_cmds(None, None, {"OFFLOAD_RUNS_ON": ["sm_86", "gfx90a:xnack-"]}, False)
    assert "verify -q $SOURCES" in cmd and " --runs-on=sm_86,gfx90a:xnack-" in cmd
    assert " --runs-on=sm_90" in _bundling.verify_cmds(None, None, {"OFFLOAD_RUNS_ON": "sm_90",
                                                                    "OFFLOAD_VERIFY": False}, False)
    assert "--runs-on" not in _bundling.verify_cmds(None, None, {}, False)
    with pytest.raises(SCons.Errors.UserError, match="OFFLOAD_RUNS_ON"):
        _bundling.runs_on({"OFFLOAD_RUNS_ON": "sm_90a"})


# --------------------------------------------------------------------------------------------
# The OpenMP runtime a program loads, and the cubin ABI it reads

@pytest.mark.parametrize("needed, want", [
    (["libm.so.6", "libomptarget.so.19.1", "libc.so.6"], Runtime("libomptarget.so.19.1", 19)),
    (["libomptarget.so.20"], Runtime("libomptarget.so.20", 20)),
    (["libomptarget.so.22.0"], Runtime("libomptarget.so.22.0", 22)),
    (["libomptarget.so"], None),            # no version in the name: nothing to tell by
    (["libomptarget.so.19.1.x"], None),
    (["libomp.so.5", "libc.so.6"], None),
])
def test_runtime_from_needed_names(needed, want):
    assert runtime_of(needed) == want


def _cubin_header(abi: int, machine: int = 190) -> bytes:
    return b"\x7fELF\x02\x01\x01\x41" + bytes([abi]) + bytes(9) + machine.to_bytes(2, "little") + bytes(44)


@pytest.mark.parametrize("runtime, producer, triple, data, refused", [
    (Runtime("libomptarget.so.19.1", 19), "openmp", "nvptx64-nvidia-cuda", _cubin_header(8), True),
    (Runtime("libomptarget.so.20.1", 20), "openmp", "nvptx64-nvidia-cuda", _cubin_header(8), True),
    (Runtime("libomptarget.so.21.1", 21), "openmp", "nvptx64-nvidia-cuda", _cubin_header(8), False),
    (Runtime("libomptarget.so.19.1", 19), "openmp", "nvptx64-nvidia-cuda", _cubin_header(7), False),
    (None, "openmp", "nvptx64-nvidia-cuda", _cubin_header(8), False),            # runtime not known
    (Runtime("libomptarget.so.19.1", 19), "cuda", "nvptx64-nvidia-cuda", _cubin_header(8), False),  # CUDA's own runtime
    (Runtime("libomptarget.so.19.1", 19), "openmp", "amdgcn-amd-amdhsa", _cubin_header(8, 224), False),
    (Runtime("libomptarget.so.19.1", 19), "openmp", "nvptx64-nvidia-cuda", b"BC\xc0\xde" + bytes(60), False),  # IR
    (Runtime("libomptarget.so.19.1", 19), "openmp", "nvptx64-nvidia-cuda", b"\x7fELF", False),   # too short to tell
])
def test_runtime_refusal_rule(runtime, producer, triple, data, refused):
    assert (refusal(runtime, producer=producer, triple=triple, data=data) is not None) is refused


def test_openmp_program_and_the_runtime_it_loads():
    """clang 19 links its programs to LLVM 19's OpenMP runtime, which reads the SM of a cubin from
    the low byte of e_flags: a cubin in NVIDIA's new ELF ABI (CUDA 13's ptxas and nvlink write it
    for every SM) is refused, 'No images found compatible with the installed hardware', as an
    H100 showed. The same program with the header of the old ABI, or naming LLVM 21's runtime,
    runs; the object, whose runtime is chosen at its link, is not judged by one."""
    samples = offload_samples.need(offload_samples.openmp(), "omp19_nv.exe", "omp19_nv.so", "omp19_nv.o")
    for path in samples[:2]:
        buf = path.read_bytes()
        assert runtime_of(needed_libraries(buf)) == Runtime("libomptarget.so.19.1", 19)
        (image,) = [i for i in inspect_buffer(buf, str(path)) if (i.triple or "").startswith("nvptx")]
        abi = cuda_elf_abi(image.data)
        assert abi in (CUDA_ELF_ABI_V1, CUDA_ELF_ABI_V2), abi
        at = buf.find(bytes(image.data[:256]))
        assert at > 0
        code, lines = _verify(path, "sm_80")
        if abi == CUDA_ELF_ABI_V2:   # the CUDA here is 13 or newer
            assert code == 1 and len(lines) == 1, lines
            assert lines[0].startswith(f"{path}: sm_80: no: SASS sm_80: the OpenMP runtime it loads "
                                       "(libomptarget.so.19.1, LLVM 19) refuses this cubin: its ELF ABI is "
                                       "NVIDIA's new one (EI_ABIVERSION 8"), lines
            assert "OFFLOAD_CUDA_PATH" in lines[0]
        else:
            assert code == 0, lines
        old_abi = bytearray(buf)
        old_abi[at + 8] = CUDA_ELF_ABI_V1
        assert verify_buffer(bytes(old_abi), "old", runs_on=["sm_80"]).ok
        new_abi = bytearray(buf)
        new_abi[at + 8] = CUDA_ELF_ABI_V2
        assert not verify_buffer(bytes(new_abi), "new", runs_on=["sm_80"]).ok
        runtime21 = bytes(new_abi).replace(b"libomptarget.so.19.1\0", b"libomptarget.so.21.1\0")
        assert runtime21 != bytes(new_abi)
        assert verify_buffer(runtime21, "21", runs_on=["sm_80"]).ok
    assert _verify(samples[2], "sm_80")[0] == 0


def test_refused_images_beside_another_vendors_say_the_refusal():
    """A program with NVIDIA and AMD OpenMP images (one unit, its `.llvm.offloading`): for an
    NVIDIA GPU, the runtime's refusal of every NVIDIA image is the reason, not 'no NVIDIA GPU
    code'; for the AMD GPU it runs."""
    def image(triple, arch, data):
        return DeviceImage(path="app:.llvm.offloading[0]", container="offload-binary", producer="openmp",
                           triple=triple, arch=arch, image_kind="elf", size=len(data), compressed=False, sha256=None,
                           file="app", data=data)
    images = [image("nvptx64-nvidia-cuda", "sm_80", _cubin_header(8)), image("nvptx64-nvidia-cuda", "sm_90", _cubin_header(8)),
              image("amdgcn-amd-amdhsa", "gfx90a", _cubin_header(4, 224))]
    runtime = Runtime("libomptarget.so.19.1", 19)
    verdict = runs_on(images, "app", parse_gpu("sm_90"), runtime)
    assert not verdict.ok and verdict.line.startswith(
        "no: SASS sm_80, SASS sm_90: the OpenMP runtime it loads (libomptarget.so.19.1, LLVM 19) refuses this cubin"), \
        verdict.line
    assert runs_on(images, "app", parse_gpu("gfx90a"), runtime).ok
    assert runs_on(images, "app", parse_gpu("sm_90"), Runtime("libomptarget.so.22.1", 22)).ok
    assert runs_on(images, "app", parse_gpu("sm_90")).ok   # no runtime known: the SASS rule alone
