"""A tree moved to another folder, or cloned elsewhere, is up to date for the clang graphs too:
the per-source `-cuid` of CUDA and HIP compiles is named from the top directory, in SConscripts
of subfolders and in variant directories alike (nvcc's steps: tests/scons_tool/test_scons_nvcc_moved.py)."""

from __future__ import annotations

import re
import shutil

import pytest

from conftest import need_tool, run_cli
from scons_helpers import Project

pytestmark = pytest.mark.slow

KERNEL = """
#include <hip/hip_runtime.h>
static __device__ int bias = 1;
__global__ void k_{name}(int *x) {{ x[threadIdx.x] += bias; }}
int launch_{name}(int *d) {{ hipLaunchKernelGGL(k_{name}, dim3(1), dim3(1), 0, 0, d); return 0; }}
"""

MAIN = """
#include <cstdio>
int launch_a(int *); int launch_b(int *);
int main() { std::printf("ok\\n"); return 0; }
"""

# Two folders with a `k.hip` of their own, each read by its SConscript (the same file name, read
# from its own folder), one of them through a variant directory.
FILES = {
    "SConstruct": "env = Environment(tools=['default', 'offload'], OFFLOAD_CLANG='clang-19', "
                  "OFFLOAD_HIP_DRIVER='new', OFFLOAD_ARCHS=['gfx90a'])\n"
                  "a = SConscript('a/SConscript', exports='env')\n"
                  "b = SConscript('b/src/SConscript', variant_dir='b/build', duplicate=0, exports='env')\n"
                  "env.OffloadProgram('app', ['main.cpp', a, b])\n",
    "a/SConscript": "Import('env')\nobj = env.OffloadObject('k.hip')\nReturn('obj')\n",
    "a/k.hip": KERNEL.format(name="a"),
    "b/src/SConscript": "Import('env')\nobj = env.OffloadObject('k.hip')\nReturn('obj')\n",
    "b/src/k.hip": KERNEL.format(name="b"),
    "main.cpp": MAIN,
}


def _cuids(p: Project) -> dict[str, str]:
    """Source -> the `-cuid` of its host compile, from `scons -n` with full command lines."""
    cp = p.scons("-n", env={"OFFLOAD_VERBOSE": "1"})
    out = {}
    for line in cp.stdout.splitlines():
        m = re.search(r"-cuid=([0-9a-f]+).*--offload-host-only.* (\S+\.hip)$", line)
        if m:
            out[m.group(2)] = m.group(1)
    return out


def test_same_named_sources_get_their_own_cuid_and_a_moved_tree_is_up_to_date(tmp_path):
    need_tool("clang-19")
    p = Project(tmp_path / "p", FILES)
    cuids = _cuids(p)
    assert set(cuids) == {"a/k.hip", "b/src/k.hip"}, cuids
    assert cuids["a/k.hip"] != cuids["b/src/k.hip"], cuids   # both were the hash of 'k.hip'
    p.scons()
    assert run_cli("tool", "verify", str(p.root / "app"), "--require", "gfx90a").returncode == 0

    (tmp_path / "elsewhere").mkdir()
    shutil.move(str(p.root), str(tmp_path / "elsewhere" / "p2"))
    moved = Project(tmp_path / "elsewhere" / "p2")
    assert moved.up_to_date(), moved.scons("-n", "--debug=explain", check=False).stdout
    moved.scons("-c")
    assert _cuids(moved) == cuids   # what a fresh build there would pass
