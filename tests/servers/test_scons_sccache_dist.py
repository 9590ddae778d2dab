"""The offload SCons tool under sccache-dist, with the real engine: a scheduler and two overlay
build servers on 127.0.0.1 (tests/sccache_dist_cluster.py), `OFFLOAD_LAUNCHER` set to sccache and
the cluster's client configuration in the build's `SCCACHE_CONF`.

A mixed project (OpenMP `.c`/`.cpp` for sm_80 + gfx90a, HIP with clang for gfx90a + gfx1030, CUDA
with nvcc for sm_80 + sm_90) builds through it; the tool runs its compiles through an sccache
server of its own (`_dist`) whose configuration carries the toolchain of the HIP device compiles.
Counted per kind from that server's `--show-stats` (sccache counts distributed compiles per build
server only, so each kind is built on its own): every HIP device compile and nvcc's per-arch
cicc/ptxas steps go to the build servers, and every OpenMP source for sm_80 + gfx90a goes whole,
math functions included (the tool's AMD math header), while the one with complex arithmetic is
compiled again here, said once (NVIDIA-only OpenMP projects, shapes and the entry table:
tests/servers/test_scons_openmp_sccache_dist.py); the programs are
byte-identical to a local build (HIP; OpenMP's NVPTX objects vary between local builds already) and `offload-tool verify` accepts them; a build
server killed while it compiles costs the build nothing.

What these tests count is the table in docs/caches-and-distributed-builds.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import console_script, need_tool
from scons_helpers import REPO, Project, actions, scons_env
from scons_samples import KERN_CPP, SAXPY_CU
from sccache_dist_cluster import SCONSTRUCT_SCCACHE_ENV, SccacheDistCluster, stop_tool_servers, tool_sccache, tool_servers, unavailable_reason

pytestmark = pytest.mark.slow

CLUSTER_LIFETIME = 600     # s; the bound on every process of the cluster
SCONS_TIMEOUT = 400

SCONSTRUCT = SCONSTRUCT_SCCACHE_ENV + """env = Environment(tools=['default', 'offload'], ENV=penv, OFFLOAD_CLANG='clang-19',
                  OFFLOAD_ARCHS=['sm_80', 'sm_90', 'gfx90a', 'gfx1030'],
                  OFFLOAD_LAUNCHER=ARGUMENTS.get('launcher', ''))
env.OffloadProgram('app', ['src/main.c', 'src/kern.cpp', 'src/phys.cpp', 'src/cplx.c'], OFFLOAD_ARCHS=['sm_80', 'gfx90a'])
env.OffloadProgram('vadd', ['src/vadd.hip', 'src/scale.hip'])
env.OffloadProgram('saxpy', ['src/saxpy.cu'], OFFLOAD_CUDA_COMPILER='nvcc')
"""

VADD_HIP = """
#include <hip/hip_runtime.h>
#include <cstdio>
float scale_host(float);
__global__ void vadd(float *a) { a[threadIdx.x] += 1.0f; }
int main() {
  float *d;
  if (hipMalloc(&d, 64) != hipSuccess) { std::printf("vadd host %g\\n", scale_host(2.0f)); return 0; }
  hipLaunchKernelGGL(vadd, dim3(1), dim3(16), 0, 0, d);
  std::printf("vadd gpu\\n");
  return 0;
}
"""

SCALE_HIP = """
#include <hip/hip_runtime.h>
__global__ void scale(float *a, float s) { a[threadIdx.x] *= s; }
float scale_host(float s) { return s * 3.0f; }
"""

OMP_MAIN_C = """
#include <stdio.h>
double kern(int n);
double phys(int n);
double cplx(void);
int main(void) {
  double s = 0;
#pragma omp target map(tofrom: s)
  s = 1.5;
  printf("main %g kern %g phys %.4f cplx %.4f\\n", s, kern(100), phys(8), cplx());
  return 0;
}
"""

# Math in a target region: for gfx90a its functions come from clang's AMD math wrappers.
PHYS_CPP = """
#include <cmath>
extern "C" double phys(int n) {
  double s = 0;
#pragma omp target teams distribute parallel for reduction(+:s) map(tofrom:s)
  for (int i = 0; i < n; i++) s += std::exp(-0.5 * i) * std::sin(0.25 * i) + std::pow(float(i), 0.5f);
  return s;
}
"""

# Complex arithmetic in a target region: its runtime functions reach device code only in a
# compile made from the files.
CPLX_C = """
#include <complex.h>
double cplx(void) {
  double _Complex a = 1 + 2 * I, b = 3 + 4 * I, r = 0;
#pragma omp target map(tofrom: r)
  { r = a * b / (a + b); }
  return creal(r) + cimag(r);
}
"""

EXPECT = {"app": "main 1.5 kern 4950 phys 14.2273 cplx 2.1154\n", "vadd": "vadd host 6\n", "saxpy": "saxpy host\n"}


def _sccache() -> str:
    return str(Path(sys.executable).parent / "sccache")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    need_tool("clang-19")
    need_tool("nvcc")
    with SccacheDistCluster(tmp_path_factory.mktemp("cluster"), servers=2, lifetime=CLUSTER_LIFETIME) as c:
        yield c


def _project(root: Path) -> Project:
    return Project(root, {"SConstruct": SCONSTRUCT, "src/main.c": OMP_MAIN_C, "src/kern.cpp": KERN_CPP,
                          "src/phys.cpp": PHYS_CPP, "src/cplx.c": CPLX_C,
                          "src/vadd.hip": VADD_HIP, "src/scale.hip": SCALE_HIP, "src/saxpy.cu": SAXPY_CU})


def _build_env(cluster: SccacheDistCluster, cache: Path) -> dict:
    return dict(scons_env(), **cluster.tool_env(cache))


def _scons(p: Project, *args, env: dict, check: bool = True) -> subprocess.CompletedProcess:
    return p.scons(*args, check=check, env=env, jobs=2, timeout=SCONS_TIMEOUT)


def _servers(p: Project) -> list[dict]:
    """What the tool wrote of its sccache servers (socket, configuration, scheduler's answer): one
    per set of the tool's settings (here the OpenMP program's and the HIP and CUDA programs')."""
    found = tool_servers(p.root)
    assert found, "the tool started no sccache server"
    return found


def _tool_sccache(p: Project, env: dict, *args) -> None:
    for server in _servers(p):
        tool_sccache(server, *args, env=env)


def _stats(p: Project, env: dict) -> dict:
    """The tool's servers' statistics, summed (the counters these tests read)."""
    total: dict = {"dist_compiles": {}, "dist_errors": 0, "compile_fails": 0, "cache_misses": {"adv_counts": {}}}
    for server in _servers(p):
        st = json.loads(tool_sccache(server, "--show-stats", "--stats-format", "json", env=env).stdout)["stats"]
        for addr, n in (st.get("dist_compiles") or {}).items():
            total["dist_compiles"][addr] = total["dist_compiles"].get(addr, 0) + n
        total["dist_errors"] += st["dist_errors"]
        total["compile_fails"] += st["compile_fails"]
        for kind, n in st["cache_misses"]["adv_counts"].items():
            total["cache_misses"]["adv_counts"][kind] = total["cache_misses"]["adv_counts"].get(kind, 0) + n
    return total


def _distributed(stats: dict) -> int:
    return sum((stats.get("dist_compiles") or {}).values())


def _stop_tool_server(p: Project, env: dict) -> None:
    stop_tool_servers(p.root, env)


def _run_and_verify(p: Project) -> None:
    for prog, out in EXPECT.items():
        cp = subprocess.run([str(p.root / prog)], capture_output=True, text=True, timeout=60)
        assert cp.stdout == out, (prog, cp.stdout, cp.stderr)
    tool = console_script("offload-tool")
    cp = subprocess.run([tool, "verify", *(str(p.root / x) for x in EXPECT)], capture_output=True, text=True,
                        timeout=120)
    assert cp.returncode == 0, cp.stdout + cp.stderr


def _device_compiles(cp, suffix: str) -> int:
    return sum(1 for kind, rest in actions(cp) if kind == "DEVICE" and rest.strip().endswith(suffix))


def test_mixed_project_distributes_hip_nvcc_and_amd_openmp_device_compiles(cluster, tmp_path):
    p = _project(tmp_path / "proj")
    env = _build_env(cluster, tmp_path / "cache")
    # The local build, for comparison (no launcher).
    _scons(p, env=env)
    _run_and_verify(p)
    # HIP only: two clean local builds of the OpenMP program already differ (the order of symbols
    # in its NVPTX device objects varies from run to run).
    local = {x: (p.root / x).read_bytes() for x in ("vadd",)}
    _scons(p, "-c", env=env)

    launcher = f"launcher={_sccache()}"
    try:
        # OpenMP with an AMD arch: each source one job, sent whole (math included); the source
        # with complex arithmetic is compiled again here, said with why.
        cp = _scons(p, launcher, "app", env=env)
        out = cp.stdout + cp.stderr
        assert "OpenMP compiles run here" not in out, out
        assert [k for k, _ in actions(cp)].count("FAT") == 4 and _device_compiles(cp, ".c") == 0, cp.stdout
        st = _stats(p, env)
        assert _distributed(st) == 4 and st["dist_errors"] == 0 and st["compile_fails"] == 0, st
        assert out.count("compiled here") == 1 and "'src/cplx.c': its code calls __divdc3, __muldc3" in out, out
        _tool_sccache(p, env, "-z")

        # HIP: every per-arch device compile (2 sources x 2 archs) goes to the build servers; the
        # host compiles stay here (said once, why).
        cp = _scons(p, launcher, "vadd", env=env)
        out = cp.stdout + cp.stderr
        assert _device_compiles(cp, ".hip") == 4
        assert out.count("HIP host compiles run here, uncached") == 1, out
        assert "packed" in out and "for its HIP device compiles" in out
        st = _stats(p, env)
        assert _distributed(st) == 4, st
        assert st["dist_errors"] == 0 and st["compile_fails"] == 0, st
        assert st["cache_misses"]["adv_counts"].get("hip [clang]") == 4, st

        # nvcc: one compile here; its steps distributed: cicc and ptxas per arch, cudafe++, the host compile.
        _tool_sccache(p, env, "-z")
        cp = _scons(p, launcher, "saxpy", env=env)
        st = _stats(p, env)
        misses = st["cache_misses"]["adv_counts"]
        assert misses.get("ptx [cicc]") == 2 and misses.get("cubin [ptxas]") == 2, st
        assert _distributed(st) == 6 and st["dist_errors"] == 0, st   # + cudafe++ and the host compile
        assert set(st["dist_compiles"]) <= set(cluster.server_addrs())

        _run_and_verify(p)
        for x, data in local.items():
            assert (p.root / x).read_bytes() == data, f"{x} differs from the local build"
    finally:
        _stop_tool_server(p, env)


def test_a_build_server_killed_mid_build_costs_no_compile(cluster, tmp_path):
    """Server 0 is killed while it runs one of the HIP device compiles: sccache compiles that one
    here (`dist_errors`), the rest go to server 1, and the program is the local build's."""
    p = _project(tmp_path / "proj")
    env = _build_env(cluster, tmp_path / "cache")
    _scons(p, "vadd", env=env)
    local = (p.root / "vadd").read_bytes()
    _scons(p, "-c", env=env)
    cmd = [sys.executable, "-m", "SCons", "-Q", "-j2", f"--site-dir={REPO / 'site_scons'}", f"launcher={_sccache()}",
           "vadd"]
    try:
        rc, out, killed = cluster.run_killing_server(cmd, p.root, env, SCONS_TIMEOUT)
        assert rc == 0, out
        assert killed is not None, "no compile ran on server 0:\n" + out
        st = _stats(p, env)
        assert st["dist_errors"] >= 1 and st["compile_fails"] == 0, st
        assert (p.root / "vadd").read_bytes() == local
    finally:
        _stop_tool_server(p, env)
