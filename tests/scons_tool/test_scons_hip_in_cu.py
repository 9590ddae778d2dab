"""HIP code in `.cu` files (hipified CUDA; HeCBench's `*-hip` programs keep the `.cu` suffix) is
CUDA by its suffix. With AMD archs only, the error must name the language, OFFLOAD_LANG='hip', not
send the user to add an NVIDIA arch (with which the HIP headers then fail to compile as CUDA). A
source is HIP code when it, or a header it includes that SCons finds, includes
`hip/hip_runtime.h`. With OFFLOAD_LANG='hip' the program builds (clang or hipcc) and verifies."""

from __future__ import annotations

import pytest

from conftest import need_tool, run_cli
from scons_helpers import actions, Project, refused, run_built

pytestmark = pytest.mark.slow

SCONSTRUCT = """
import os
env = Environment(tools=['default', 'offload'], ENV={'PATH': os.environ['PATH']}, CPPPATH=['inc'],
                  OFFLOAD_ARCHS=[a for a in ARGUMENTS.get('archs', 'gfx90a').split(',') if a],
                  OFFLOAD_CLANG='clang-19', OFFLOAD_HIP_COMPILER=ARGUMENTS.get('hc', 'clang'))
srcs = [env.OffloadObject(s, OFFLOAD_LANG='hip') if ARGUMENTS.get('fix') and s.endswith('.cu') else s
        for s in ARGUMENTS['src'].split(',')]
env.OffloadProgram(ARGUMENTS.get('app', 'app'), srcs)
"""

KERNEL = """
#include <cstdio>
__global__ void twice(float *x) { x[threadIdx.x] *= 2; }
void run() {
  float *d;
  if (hipMalloc(&d, 64) != hipSuccess) { std::printf("host\\n"); return; }
  hipLaunchKernelGGL(twice, dim3(1), dim3(4), 0, 0, d);
  std::printf("gpu\\n");
}
"""

SOURCES = {
    "k.cu": "#include <hip/hip_runtime.h>\n" + KERNEL,
    "h.cu": '#include "common.h"\n' + KERNEL,
    "inc/common.h": "#pragma once\n#include <hip/hip_runtime.h>\n",
    "c.cu": "__global__ void k(float *x) { x[0] = 1; }\n",
    "main.cpp": "void run();\nint main() { run(); return 0; }\n",
}


@pytest.fixture(scope="module")
def proj(tmp_path_factory):
    need_tool("clang-19")
    return Project(tmp_path_factory.mktemp("hip-in-cu"), {"SConstruct": SCONSTRUCT, **SOURCES})


def _refused(proj, *args) -> str:
    return refused(proj, *args, line=8)


@pytest.mark.parametrize("src, via", [("k.cu", ""), ("h.cu", " (through 'inc/common.h')")])
def test_hip_code_in_a_cu_file_names_offload_lang_hip(proj, src, via):
    line = _refused(proj, f"src={src},main.cpp")
    assert f"'{src}' (cuda, from its suffix) includes hip/hip_runtime.h{via}: it is HIP code; set " \
           f"OFFLOAD_LANG='hip' for it (env.OffloadObject('{src}', OFFLOAD_LANG='hip')" in line, line
    assert "OFFLOAD_ARCHS (gfx90a) has none" in line and "add one" not in line


def test_with_no_archs_at_all_too(proj):
    line = _refused(proj, "src=k.cu,main.cpp", "archs=")
    assert "it is HIP code; set OFFLOAD_LANG='hip'" in line and "OFFLOAD_ARCHS is empty" in line, line


def test_cuda_code_keeps_its_message(proj):
    line = _refused(proj, "src=c.cu,main.cpp")
    assert "'c.cu' (cuda) is built for NVIDIA (sm_*) archs, and OFFLOAD_ARCHS (gfx90a) has none: add one" in line
    assert "OFFLOAD_LANG='hip'" not in line


@pytest.mark.parametrize("src, hc", [("k.cu", "clang"), ("h.cu", "hipcc")])
def test_the_named_fix_builds_and_verifies(proj, src, hc):
    need_tool(hc if hc == "hipcc" else "clang-19")
    app = f"app_{src[0]}_{hc}"
    cp = proj.scons(f"src={src},main.cpp", "fix=1", f"hc={hc}", f"app={app}")
    assert ("DEVICE", f"gfx90a {src}") in actions(cp) and ("BUNDLE", f"{src[0]}.hipfb") in actions(cp), cp.stdout
    assert not [a for a in actions(cp) if "main.cpp" in a[1] and a[0] != "HOST"]   # main.cpp: host only
    done = run_cli("tool", "verify", "--require", "gfx90a", str(proj.root / app), text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    ran = run_built(proj.root / app)
    assert ran.returncode == 0 and ran.stdout in ("host\n", "gpu\n"), ran
    proj.scons("-c", f"src={src},main.cpp", "fix=1", f"hc={hc}", f"app={app}")
