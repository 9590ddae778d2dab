"""Project shapes of real code bases on clang's graphs: an OpenMP kernel in a header that is
re-created with the same bytes, defines with quotes, commas, blanks and `$`, file and folder
names with blanks, quotes and `$`, plain C++ beside CUDA/HIP sources, and settings put in a
variable that no step of the build reads."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import inspect_json, need_tool
from scons_helpers import Project, actions, device_archs, run_built, scons_env

pytestmark = pytest.mark.slow


def _verify(*programs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "offload_tool.cli.tool", "verify", *map(str, programs)],
                          capture_output=True, text=True, env=scons_env(), timeout=120)


KERN_H = """
inline void scale(float *x, int n) {
#pragma omp target teams distribute parallel for map(tofrom: x[0:n])
  for (int i = 0; i < n; ++i) x[i] *= 2;
}
"""

HEADER_MAIN = """
#include <cstdio>
#include "kern.h"
int main() { float x[4] = {1, 2, 3, 4}; scale(x, 4); std::printf("%g\\n", x[3]); return 0; }
"""


@pytest.mark.parametrize("launcher", ["", "ccache"])
def test_openmp_kernel_in_a_recreated_header_never_gives_an_inconsistent_program(tmp_path, launcher):
    """clang names an offload entry after the (device, inode) of the file holding the target
    region: a header re-created with the same bytes must rebuild every compile reading it, so an
    arch added afterwards is compiled from the same file as the host object."""
    need_tool("clang-19")
    if launcher:
        need_tool("ccache")
    p = Project(tmp_path, {
        "SConstruct": f"""
            import os
            env = Environment(tools=['default', 'offload'], OFFLOAD_CLANG='clang-19',
                              OFFLOAD_ARCHS=ARGUMENTS.get('archs', 'sm_80').split(','),
                              OFFLOAD_LAUNCHER='{launcher}',
                              ENV={{'PATH': os.environ['PATH'], 'CCACHE_DIR': '{tmp_path / "ccache"}'}},
                              CPPPATH=['inc'])
            env.OffloadProgram('app', ['main.cpp'])
            """,
        "inc/kern.h": KERN_H, "main.cpp": HEADER_MAIN})
    p.scons()
    assert p.up_to_date()
    p.recreate("inc/kern.h")
    assert not p.up_to_date(), "a re-created header must rebuild what reads it"
    cp = p.scons("archs=sm_80,sm_90")
    assert device_archs(cp) == {"sm_80": 1, "sm_90": 1}
    v = _verify(p.root / "app")
    assert v.returncode == 0, v.stdout + v.stderr
    assert p.up_to_date("archs=sm_80,sm_90")
    assert run_built(p.root / "app").stdout == "8\n"


DEFINES_MAIN = """
#include <cstdio>
#define STR2(...) #__VA_ARGS__
#define STR(...) STR2(__VA_ARGS__)
int main() {
  float x[4] = {1, 2, 3, 4};
#pragma omp target teams distribute parallel for map(tofrom: x[0:4])
  for (int i = 0; i < 4; ++i) x[i] *= 2;
  std::printf("%s|%s|%s|%s|%g\\n", VERSION, STR(NAME), STR(PPWI), STR(DOLLAR), x[3]);
  return 0;
}
"""

DEFINES = "[('VERSION', '\\\\\"1.0\\\\\"'), ('NAME', 'a b'), ('PPWI', '1,2,4'), ('DOLLAR', 'x$$y')]"


def test_defines_and_file_names_that_plain_scons_takes_reach_every_openmp_step(tmp_path):
    """String macros, commas, blanks and `$` in CPPDEFINES reach the device jobs taken from the
    driver's `-###` as they reach g++; a blank, a quote and a `$` in file and folder names reach
    the packager, the device link and the bundler as one argument each."""
    need_tool("clang-19")
    p = Project(tmp_path, {
        "SConstruct": f"""
            env = Environment(tools=['default', 'offload'], OFFLOAD_CLANG='clang-19',
                              OFFLOAD_ARCHS=['sm_80', 'gfx90a'], CPPDEFINES={DEFINES})
            env.OffloadProgram("bin dir/it's app", ["src dir/m$$ain.cpp"])
            lib = env.OffloadStaticLibrary("lib dir/ke rn", ["src dir/k'ern.cpp"])
            use = env.Program('use', ['use.cpp'], LIBS=['ke rn'], LIBPATH=['lib dir'])
            env.Depends(use, lib)  # (SCons's LIBS scanner does not find a library whose name has a blank)
            env.OffloadObject("src dir/v add.hip")
            env.OffloadManifest("bin dir/m a.json", ["bin dir/it's app"], OFFLOAD_REQUIRE=True)
            env.Program('plain', ['plain.cpp'])
            """,
        "src dir/m$ain.cpp": DEFINES_MAIN, "plain.cpp": DEFINES_MAIN,
        "src dir/k'ern.cpp": KERN_H + "void use(float *x) { scale(x, 4); }\n",
        "use.cpp": "#include <cstdio>\nvoid use(float *x);\n"
                   "int main() { float x[4] = {1, 2, 3, 4}; use(x); std::printf(\"%g\\n\", x[3]); return 0; }\n",
        "src dir/v add.hip": """
            #include <hip/hip_runtime.h>
            __global__ void vadd(float *x) { x[threadIdx.x] += 1; }
            """})
    p.scons()
    want = "1.0|a b|1,2,4|x|8\n"
    assert run_built(p.root / "plain").stdout == want
    assert run_built(p.root / "bin dir/it's app").stdout == want
    assert {i["arch"] for i in inspect_json(p.root / "lib dir/ke rn-offload.o")} == {"sm_80", "gfx90a"}
    assert (p.root / "src dir/v add.hipfb").is_file()
    assert run_built(p.root / "use").stdout == "8\n"   # the ld script names 'libke rn-offload.a' quoted
    assert p.up_to_date()
    p.scons("-c")
    left = {str(f.relative_to(p.root)) for f in p.root.rglob("*") if f.is_file()}
    assert left == {"SConstruct", "plain.cpp", "use.cpp", "src dir/m$ain.cpp", "src dir/k'ern.cpp", "src dir/v add.hip",
                    ".sconsign.dblite", ".sconsign.offload-probes.json"} - ({".sconsign.offload-probes.json"}
                                                                            - left)


CU = """
#include <cstdio>
__global__ void twice(float *x) { x[threadIdx.x] *= 2; }
void run() {
  float *d;
  if (cudaMalloc(&d, 64) != cudaSuccess) { std::printf("host\\n"); return; }
  twice<<<1, 4>>>(d);
  std::printf("gpu\\n");
}
"""

# An environment compiling `.cu` with nvcc (`{}`: one more setting).
NVCC_ENV = """
import os
env = Environment(tools=['default', 'offload'], ENV={{'PATH': os.environ['PATH']}},
                  OFFLOAD_CLANG='clang-19', OFFLOAD_CUDA_COMPILER='nvcc',
                  OFFLOAD_ARCHS=ARGUMENTS.get('archs', 'sm_80').split(','), {})
"""

OMP_IN_HEADER = '#include "kern.h"\nvoid use(float *x) { scale(x, 4); }\n'


def test_plain_cpp_beside_cuda_is_a_host_source_unless_it_holds_a_target_construct(tmp_path):
    """`main.cpp` beside `.cu` kernels compiles once, for the host (CUDA link, no OpenMP image,
    adding an arch leaves it alone); a C++ source whose header holds a target region stays OpenMP
    offload; `OFFLOAD_LANG='openmp'` on the call keeps the suffix's meaning."""
    need_tool("nvcc")
    need_tool("clang-19")
    p = Project(tmp_path, {
        "SConstruct": NVCC_ENV.format("OFFLOAD_HOSTFLAGS=['-DFROM_HOSTFLAGS=1']") + """
env.OffloadProgram('bin/app', ['kern.cu', 'main.cpp'])
env.OffloadProgram('bin/mixed', ['kern.cu', 'main.cpp', 'omp.cpp'])
env.OffloadProgram('bin/asked', ['kern.cu', env.OffloadObject('asked.cpp', OFFLOAD_LANG='openmp')])
""",
        "kern.cu": CU,
        "main.cpp": """
            #include <cstdio>
            void run();
            int main() { run(); std::printf("%d\\n", FROM_HOSTFLAGS); return 0; }
            """,
        "asked.cpp": "void run();\nint main() { run(); return 0; }\n",
        "omp.cpp": OMP_IN_HEADER, "kern.h": KERN_H})
    cp = p.scons("bin/app", "bin/mixed")
    compiled = [rest for kind, rest in actions(cp) if kind in ("HOST", "HOSTIR", "DEVICE")]
    assert not [r for r in compiled if "main" in r], compiled
    assert {r for r in compiled if "omp" in r} == {"omp.cpp", "omp.host.bc", "sm_80 omp.cpp"}
    assert "g++ -o main.o -c -DFROM_HOSTFLAGS=1 main.cpp" in cp.stdout
    assert run_built(p.root / "bin/app").stdout == "host\n1\n"
    assert {i["producer"] for i in inspect_json(p.root / "bin/app")} == {"cuda"}
    assert "openmp" in {i["producer"] for i in inspect_json(p.root / "bin/mixed")}
    cp = p.scons("archs=sm_80,sm_90", "bin/app")
    assert not [rest for kind, rest in actions(cp) if "main" in rest], cp.stdout
    cp = p.scons("bin/asked")
    assert device_archs(cp) == {"sm_80": 1}
    assert "asked.cpp' is compiled as OpenMP offload (from its suffix) but holds no OpenMP target construct" \
        not in cp.stderr


def test_openmp_source_without_a_target_construct_is_noted_once(tmp_path):
    need_tool("clang-19")
    p = Project(tmp_path, {
        "SConstruct": """
            env = Environment(tools=['default', 'offload'], OFFLOAD_CLANG='clang-19', OFFLOAD_ARCHS=['sm_80'])
            env.OffloadProgram('app', ['main.cpp', 'omp.cpp'])
            """,
        "main.cpp": "void use(float *x);\nint main() { float x[4] = {1}; use(x); return 0; }\n",
        "omp.cpp": OMP_IN_HEADER, "kern.h": KERN_H})
    cp = p.scons()
    assert cp.stderr.count("offload: note: 'main.cpp' is compiled as OpenMP offload (from its suffix) but holds "
                           "no OpenMP target construct") == 1, cp.stderr
    assert "omp.cpp' is compiled" not in cp.stderr


@pytest.mark.parametrize("var, flag", [("OFFLOAD_DEVICEFLAGS", "--extended-lambda"),
                                       ("OFFLOAD_HOSTFLAGS", "-Xcompiler")])
def test_nvcc_options_in_a_clang_or_host_flag_variable_name_offload_nvccflags(tmp_path, var, flag):
    need_tool("nvcc")
    need_tool("clang-19")
    p = Project(tmp_path, {
        "SConstruct": f"""
            env = Environment(tools=['default', 'offload'], OFFLOAD_CLANG='clang-19', OFFLOAD_CUDA_COMPILER='nvcc',
                              OFFLOAD_ARCHS=['sm_80'], {var}=['{flag}', '-Wall'])
            env.OffloadProgram('app', ['kern.cu'])
            """,
        "kern.cu": CU})
    cp = p.scons(check=False)
    assert cp.returncode == 2
    assert f"offload: {var} holds nvcc's option '{flag}'" in cp.stderr
    assert "put nvcc's options in OFFLOAD_NVCCFLAGS" in cp.stderr


def test_a_flag_variable_no_step_reads_is_noted(tmp_path):
    need_tool("nvcc")
    need_tool("clang-19")
    p = Project(tmp_path, {
        "SConstruct": NVCC_ENV.format("OFFLOAD_DEVICEFLAGS=['-O3']")
        + "if ARGUMENTS.get('omp'):\n    env.OffloadProgram('omp', ['omp.cpp', 'omain.cpp'])\n"
        + "env.OffloadProgram('app', ['kern.cu', 'main.cpp'])\n",
        "kern.cu": CU, "main.cpp": "void run();\nint main() { run(); return 0; }\n",
        "omp.cpp": OMP_IN_HEADER, "kern.h": KERN_H, "omain.cpp": "void use(float *x);\nint main() { return 0; }\n"})
    cp = p.scons("-n")
    assert cp.stderr.count("offload: note: OFFLOAD_DEVICEFLAGS reaches no step of 'app': nvcc compiles its device "
                           "code") == 1, cp.stderr
    # An OpenMP program of the same environment reads it (the example's shape): no note.
    cp = p.scons("-n", "omp=1")
    assert "reaches no step" not in cp.stderr, cp.stderr


def test_the_documented_toolpath_finds_the_tool_in_the_install_the_project_makes(tmp_path):
    """`toolpath=[PyPackageDir('offload_scons')]` with the interpreter running the tests (the
    project's `.venv`, installed by scripts/install-deps.sh), nothing added to its path."""
    need_tool("clang-19")
    p = Project(tmp_path, {
        "SConstruct": """
            env = Environment(tools=['default', 'offload'], toolpath=[PyPackageDir('offload_scons')],
                              OFFLOAD_CLANG='clang-19', OFFLOAD_ARCHS=['sm_80'])
            env.OffloadProgram('app', ['main.cpp'])
            """,
        "main.cpp": HEADER_MAIN, "kern.h": KERN_H})
    env = scons_env()
    env.pop("PYTHONPATH")
    cp = subprocess.run([sys.executable, "-m", "SCons", "-Q"], cwd=p.root, capture_output=True, text=True, env=env,
                        timeout=300)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert run_built(p.root / "app").stdout == "8\n"


def test_cuda_archs_newer_than_the_clang_build_with_nvcc_and_are_refused_for_clang(tmp_path):
    """`sm_120` (Blackwell) is an arch although clang 19 does not know it: nvcc builds it; a
    source clang 19 would compile for it is refused before the build, naming what builds it."""
    need_tool("nvcc")
    need_tool("clang-19")
    p = Project(tmp_path, {
        "SConstruct": NVCC_ENV.format("") + "env.OffloadProgram('app', ['kern.cu', 'main.cpp'])\n"
                                            "if ARGUMENTS.get('omp'):\n"
                                            "    env.OffloadProgram('omp', ['omp.cpp'])\n",
        "kern.cu": CU, "main.cpp": "void run();\nint main() { run(); return 0; }\n",
        "omp.cpp": OMP_IN_HEADER + "int main() { float x[4] = {1}; use(x); return 0; }\n", "kern.h": KERN_H})
    p.scons("archs=sm_80,sm_120")
    assert {i["arch"] for i in inspect_json(p.root / "app")} == {"sm_80", "sm_120"}
    cp = p.scons("archs=sm_80,sm_120", "omp=1", check=False)
    assert cp.returncode == 2
    assert "offload: OFFLOAD_ARCHS: 'sm_120' is not an offload arch clang-19 (LLVM 19) knows (it knows sm_20, " \
        in cp.stderr and "which compiles 'omp.cpp' (openmp): a clang of LLVM 20 to 22 knows it" in cp.stderr
