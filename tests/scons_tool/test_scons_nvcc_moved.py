"""nvcc's steps do not depend on where the tree is: a project moved to another folder is up to
date, and a second clone at another path that shares a `CacheDir` takes every nvcc step from it
(no nvcc action runs), for the split graph, the one `nvcc -c` per source and relocatable device
code (`-rdc=true`, with its device link). The programs run and `offload-tool verify` finds both
archs.

nvcc hands cudafe++ and cicc the source's absolute path, and the module ID they write is a hash
of it: the steps run with it as nvcc would, while their signatures name the source relative to
the top, as every other file in them; what is fetched or kept keeps the module ID of the place it
was built, as the one `nvcc -c`'s object does under SCons."""

from __future__ import annotations

import re
import shutil

import pytest

from conftest import need_tool, run_cli
from scons_helpers import Project, run_built

pytestmark = pytest.mark.slow

SCONSTRUCT = """
import os
env = Environment(tools=['default', 'offload'], ENV={'PATH': os.environ['PATH']},
                  OFFLOAD_ARCHS=['sm_80', 'sm_90'], OFFLOAD_CUDA_COMPILER='nvcc',
                  OFFLOAD_NVCC_SPLIT=ARGUMENTS.get('split', '1') == '1')
if ARGUMENTS.get('rdc'):
    env.Append(OFFLOAD_NVCCFLAGS=['-rdc=true'])
if ARGUMENTS.get('cache'):
    CacheDir(ARGUMENTS['cache'])
env.OffloadProgram('k', ['k.cu', 'sub/scale.cu'])
"""

# With relocatable device code the kernel calls a device function of the other object (nvcc
# defines __CUDACC_RDC__ then), so the device link must have registered and linked both.
K = """
#include <cstdio>
void scale_on_host(float *x, int n);
#ifdef __CUDACC_RDC__
extern __device__ float times_two(float v);
#else
static __device__ float times_two(float v) { return 2 * v; }
#endif
__global__ void twice(float *x) { x[threadIdx.x] = times_two(x[threadIdx.x]); }
int main() {
  float h[4] = {1, 2, 3, 4};
  float *d;
  if (cudaMalloc(&d, sizeof h) != cudaSuccess) {
    scale_on_host(h, 4);
    std::printf("host %g\\n", h[3]);
    return 0;
  }
  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
  twice<<<1, 4>>>(d);
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  std::printf("gpu %g\\n", h[3]);
  return 0;
}
"""

SCALE = """
__device__ float times_two(float v) { return 2 * v; }
void scale_on_host(float *x, int n) { for (int i = 0; i < n; ++i) x[i] *= 2; }
"""

MODES = {"split": ("split=1",), "no-split": ("split=0",), "rdc": ("split=1", "rdc=1")}

# Any of nvcc's actions: its split steps (NVCC-FE, NVCC-PP, ..., NVCC-DLINK) or one nvcc -c.
_NVCC_ACTION = re.compile(r"^NVCC(?:-[A-Z]+)?\s", re.M)


def _project(root) -> Project:
    need_tool("nvcc")
    need_tool("clang-19")      # the tool validates archs with clang's table
    return Project(root, {"SConstruct": SCONSTRUCT, "k.cu": K, "sub/scale.cu": SCALE})


def _check_program(p: Project) -> None:
    out = run_built(p.root / "k")
    assert out.returncode == 0, out.stderr
    assert out.stdout in ("host 8\n", "gpu 8\n"), out.stdout
    cp = run_cli("tool", "verify", str(p.root / "k"), "--require", "sm_80,sm_90")
    assert cp.returncode == 0, cp.stdout + cp.stderr


@pytest.mark.parametrize("mode", MODES)
def test_moved_tree_is_up_to_date(tmp_path, mode):
    args = MODES[mode]
    p = _project(tmp_path / "proj")
    assert _NVCC_ACTION.search(p.scons(*args).stdout)
    moved = Project(shutil.move(str(p.root), str(tmp_path / "elsewhere")))
    assert moved.up_to_date(*args), moved.scons(*args, "-n", "--debug=explain", check=False).stdout
    _check_program(moved)


@pytest.mark.parametrize("mode", MODES)
def test_second_clone_takes_every_nvcc_step_from_a_shared_cachedir(tmp_path, mode):
    args = MODES[mode] + (f"cache={tmp_path / 'cache'}",)
    first = _project(tmp_path / "first")
    assert _NVCC_ACTION.search(first.scons(*args).stdout)
    second = _project(tmp_path / "clones" / "second")
    out = second.scons(*args).stdout
    assert not _NVCC_ACTION.search(out), out
    assert "Retrieved `k' from cache" in out, out
    assert second.up_to_date(*args)
    _check_program(second)
