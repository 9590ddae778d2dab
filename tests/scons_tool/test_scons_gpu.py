"""The offload SCons tool on CUDA and HIP sources: clang (per-arch device nodes, HIP fat binary
or CUDA package), hipcc (same graph), nvcc (one compile per source); the archs in the outputs;
links where the runtime exists here; a second clone sharing a CacheDir takes every CUDA/HIP node
from the cache (pinned -cuid)."""

from __future__ import annotations

import re

import pytest

from conftest import inspect_json, need_tool, run
from scons_samples import CUDA_DECLS
from scons_helpers import Project, counts, device_archs, run_built

pytestmark = pytest.mark.slow

HIP_SRC = """
#include <hip/hip_runtime.h>
#include <cstdio>
static __device__ int bias;
__global__ void vadd(float *a) { a[threadIdx.x] += bias; }
int main() {
  float *d;
  if (hipMalloc(&d, 64) != hipSuccess) { std::printf("no device\\n"); return 0; }
  hipLaunchKernelGGL(vadd, dim3(1), dim3(16), 0, 0, d);
  std::printf("ok\\n");
  return 0;
}
"""

# clang cannot use CUDA 13's headers (see docs/scons-tool.md): a header-less CUDA source.
CUDA_SRC = CUDA_DECLS + """static __attribute__((device)) int bias;
__attribute__((global)) void saxpy(float a, float *x) { x[0] = a * x[0] + bias; }
void *bias_address() { return (void *)&bias; }
"""

NVCC_SRC = """
#include <cstdio>
__global__ void saxpy(float a, float *x) { x[threadIdx.x] *= a; }
int main() { float *d; if (cudaMalloc(&d, 64) != cudaSuccess) { std::printf("no device\\n"); return 0; }
  saxpy<<<1, 16>>>(2.0f, d); std::printf("ok\\n"); return 0; }
"""

SCONSTRUCT = """
env = Environment(tools=['default', 'offload'], OFFLOAD_CLANG='clang-19',
                  OFFLOAD_ARCHS=ARGUMENTS.get('archs', 'sm_80,gfx90a').split(','),
                  OFFLOAD_HIP_COMPILER=ARGUMENTS.get('hip', 'clang'),
                  OFFLOAD_CUDA_COMPILER=ARGUMENTS.get('cuda', 'clang'))
if ARGUMENTS.get('cache'):
    CacheDir(ARGUMENTS['cache'])
if 'hip' in ARGUMENTS.get('what', 'hip'):
    env.OffloadProgram('vadd', ['src/vadd.hip'])
if 'cudaclang' in ARGUMENTS.get('what', ''):
    env.Clone(OFFLOAD_HOSTFLAGS=['-nocudainc', '-nocudalib'],
              OFFLOAD_DEVICEFLAGS=['-nocudainc', '-nocudalib']).OffloadObject('src/saxpy.cu')
if 'nvcc' in ARGUMENTS.get('what', ''):
    env.OffloadProgram('saxpy_nvcc', ['src/saxpy_nvcc.cu'], OFFLOAD_CUDA_COMPILER='nvcc', OFFLOAD_NVCC_SPLIT=False)
"""


def _project(root) -> Project:
    return Project(root, {"SConstruct": SCONSTRUCT, "src/vadd.hip": HIP_SRC, "src/saxpy.cu": CUDA_SRC,
                          "src/saxpy_nvcc.cu": NVCC_SRC})


def _inspect_archs(path) -> list[str]:
    """Archs of the device images in a file, per `offload-tool inspect --json`."""
    return sorted(d["arch"] for d in inspect_json(path))


def _bundle_ids(path) -> list[str]:
    """Entry IDs as LLVM 19's own bundler lists them (standardised: `host-x86_64-unknown-linux--`)."""
    cp = run([need_tool("clang-offload-bundler-19"), "-list", "-type=o", f"-input={path}"])
    assert cp.returncode == 0, cp.stderr
    return sorted(cp.stdout.decode().split())


@pytest.mark.parametrize("hip", ["clang", "hipcc"])
def test_hip_per_arch_graph_and_link(tmp_path, hip):
    need_tool("clang-19")
    if hip == "hipcc":
        need_tool("hipcc")
    p = _project(tmp_path / "p")
    cp = p.scons("archs=sm_80,gfx90a,gfx1030", f"hip={hip}")
    c = counts(cp)
    assert device_archs(cp) == {"gfx90a": 1, "gfx1030": 1}, cp.stdout   # sm_80 is not a HIP arch
    assert (c["BUNDLE"], c["HOST"], c["LINK"]) == (1, 1, 1)
    assert _bundle_ids(p.root / "src/vadd.hipfb") == [
        "hipv4-amdgcn-amd-amdhsa--gfx1030", "hipv4-amdgcn-amd-amdhsa--gfx90a", "host-x86_64-unknown-linux--"]
    out = run_built(p.root / "vadd")
    assert out.returncode == 0 and out.stdout in ("ok\n", "no device\n")
    assert p.up_to_date("archs=sm_80,gfx90a,gfx1030", f"hip={hip}")
    # Adding an arch: one device compile; the host object embeds the fat binary, so it re-runs.
    cp = p.scons("archs=sm_80,gfx90a,gfx1030,gfx908", f"hip={hip}")
    assert device_archs(cp) == {"gfx908": 1}, cp.stdout
    assert counts(cp)["HOST"] == 1


def test_cuda_clang_package_and_pinned_cuid(tmp_path):
    need_tool("clang-19")
    p = _project(tmp_path / "p")
    cp = p.scons("what=cudaclang", "archs=sm_75,sm_80,gfx90a")
    assert device_archs(cp) == {"sm_75": 1, "sm_80": 1}, cp.stdout
    out = run([need_tool("llvm-objdump-19"), "--offloading", p.root / "src/saxpy.o"]).stdout.decode()
    assert sorted(re.findall(r"arch\s+(\S+)", out)) == ["sm_75", "sm_80"]
    assert set(re.findall(r"producer\s+(\S+)", out)) == {"cuda"}
    # The externalised static is named after the pinned CUID in host and device objects alike.
    host = run([need_tool("llvm-readelf-19"), "-sW", p.root / "src/saxpy.host.o"]).stdout.decode()
    dev = run([need_tool("llvm-readelf-19"), "-sW", p.root / "src/saxpy.sm_80.o"]).stdout.decode()
    names = set(re.findall(r"_ZL4bias__static__\w+", host))
    assert names and names <= set(re.findall(r"_ZL4bias__static__\w+", dev))


def test_nvcc_one_compile_per_source(tmp_path):
    need_tool("nvcc")
    need_tool("clang-19")
    p = _project(tmp_path / "p")
    cp = p.scons("what=nvcc", "archs=sm_80,sm_90,gfx90a")
    c = counts(cp)
    assert (c["NVCC"], c["DEVICE"], c["LINK"]) == (1, 0, 1), cp.stdout
    assert _inspect_archs(p.root / "src/saxpy_nvcc.o") == ["sm_80", "sm_90"]
    out = run_built(p.root / "saxpy_nvcc")
    assert out.stdout in ("ok\n", "no device\n")


def test_cachedir_second_clone_takes_every_hip_node(tmp_path):
    need_tool("clang-19")
    cache = tmp_path / "cache"
    a = _project(tmp_path / "a")
    a.scons(f"cache={cache}", "archs=gfx90a,gfx1030")
    b = _project(tmp_path / "clone")
    cp = b.scons(f"cache={cache}", "archs=gfx90a,gfx1030")
    # Every node (2 device objects, fat binary, host object, program) comes from the cache.
    assert not counts(cp), cp.stdout
    assert cp.stdout.count("Retrieved") == 5, cp.stdout
    assert (b.root / "vadd").read_bytes() == (a.root / "vadd").read_bytes()


BUNDLE_SCONSTRUCT = """
env = Environment(tools=['default', 'offload'], OFFLOAD_CLANG='clang-19', OFFLOAD_ARCHS=['gfx90a'])
dev = env.OffloadDeviceObject('src/vadd.hip', OFFLOAD_ARCH='gfx90a')
host = env.OffloadHostObject('src/vadd.hip')
targets = ['host-x86_64-unknown-linux-gnu', 'hipv4-amdgcn-amd-amdhsa--gfx90a']
b = env.OffloadBundle('out/vadd.bundle.o', [host, dev], OFFLOAD_TARGETS=targets)
env.OffloadUnbundle(b, OFFLOAD_TARGETS=targets)
lib = env.OffloadArchive('out/vadd', b)
env.OffloadUnbundleArchive(lib, OFFLOAD_TARGETS=['hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+'])
"""


def test_bundle_unbundle_and_archive_targets(tmp_path):
    need_tool("clang-19")
    p = Project(tmp_path / "b")
    p.write("SConstruct", BUNDLE_SCONSTRUCT)
    p.write("src/vadd.hip", HIP_SRC)
    cp = p.scons()
    c = counts(cp)
    assert (c["BUNDLE"], c["UNBUNDLE"], c["AR"]) == (1, 2, 1), cp.stdout
    # The bundle is what LLVM's bundler lists; unbundling gives back the inputs.
    assert _bundle_ids(p.root / "out/vadd.bundle.o") == ["hipv4-amdgcn-amd-amdhsa--gfx90a",
                                                         "host-x86_64-unknown-linux-gnu-"]
    dev = (p.root / "src/vadd.gfx90a.co").read_bytes()
    assert (p.root / "out/vadd.bundle-hipv4-amdgcn-amd-amdhsa--gfx90a.o").read_bytes() == dev
    assert (p.root / "out/vadd.bundle-host-x86_64-unknown-linux-gnu.o").exists()
    # One device-specific archive per requested target ID (gfx90a serves gfx90a:xnack+).
    out = p.root / "out/libvadd-hipv4-amdgcn-amd-amdhsa--gfx90a_xnack+.a"
    members = run([need_tool("llvm-ar-19"), "t", out]).stdout.decode().split()
    assert len(members) == 1
    assert p.up_to_date()
    p.scons("-c")
    assert not (p.root / "out").exists() or not any((p.root / "out").iterdir())
