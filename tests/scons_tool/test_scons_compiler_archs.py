"""Whether an offload arch exists is the compiler's to say, not the newest LLVM's tables: LLVM 20
dropped gfx940 and gfx941, which clang 19 builds with Debian's device libraries, so a project on
clang 19 for an MI300 prototype must build; the same arch under clang 22, or a name no compiler
knows, is refused before the build, naming the compiler and its release. The compiler's list is
asked once and kept with the other probes' answers, so a null build starts no process for it."""

from __future__ import annotations

import subprocess

import pytest

from conftest import need_tool, run_cli
from scons_helpers import actions, Project, refused, run_built

pytestmark = pytest.mark.slow

SCONSTRUCT = """
import os
env = Environment(tools=['default', 'offload'], ENV={'PATH': os.environ['PATH']},
                  OFFLOAD_ARCHS=ARGUMENTS.get('archs', 'gfx90a,gfx940'),
                  OFFLOAD_CUDA_COMPILER=ARGUMENTS.get('cc', 'clang'),
                  OFFLOAD_CLANG=ARGUMENTS.get('clang', 'clang-19'))
env.OffloadProgram(ARGUMENTS.get('app', 'app'), [ARGUMENTS['src']])
"""

SOURCES = {
    "k.hip": "#include <hip/hip_runtime.h>\n#include <cstdio>\n"
             "__global__ void k(float *x) { x[threadIdx.x] = 1; }\n"
             "int main() { std::printf(\"hip\\n\"); return 0; }\n",
    "m.cpp": "#include <cstdio>\nint main() { int r = 1;\n#pragma omp target map(tofrom: r)\n r = 0;\n"
             " std::printf(\"%d\\n\", r); return r; }\n",
    "k.cu": "__global__ void k(float *x) { x[0] = 1; }\nint main() { return 0; }\n",
}

# Counts the processes the tool starts to ask a compiler for its archs (the SConstruct is run by
# the SCons process, so the tool's `subprocess.Popen` is this one).
COUNTING = """
import subprocess, sys
_Popen = subprocess.Popen
class _Counting(_Popen):
    def __init__(self, argv, *a, **kw):
        if any(w in argv for w in ('--print-supported-cpus', '--list-gpu-code', '--list-gpu-arch')):
            sys.stderr.write('ARCH PROBE %s\\n' % ' '.join(argv))
        super().__init__(argv, *a, **kw)
subprocess.Popen = _Counting
"""


@pytest.fixture(scope="module")
def proj(tmp_path_factory):
    need_tool("clang-19")
    return Project(tmp_path_factory.mktemp("compiler-archs"), {"SConstruct": SCONSTRUCT, **SOURCES})


def _refused(proj, *args) -> str:
    return refused(proj, *args, line=7)


def _verify(program, *args) -> subprocess.CompletedProcess:
    return run_cli("tool", "verify", *args, str(program), text=True)


@pytest.mark.parametrize("src", ["k.hip", "m.cpp"])
def test_gfx940_builds_with_clang_19(proj, src):
    """clang 19 knows gfx940 (LLVM 20 dropped it): HIP and OpenMP programs build for it, and the
    program carries a gfx940 image that `verify --require` finds."""
    app = f"app_{src.replace('.', '_')}"
    cp = proj.scons(f"src={src}", f"app={app}")
    assert ("DEVICE", f"gfx940 {src}") in actions(cp), cp.stdout
    done = _verify(proj.root / app, "--require", "gfx940,gfx90a")
    assert done.returncode == 0, done.stdout + done.stderr
    said = run_built(proj.root / app)
    assert said.returncode == 0 and said.stdout == ("hip\n" if src == "k.hip" else "0\n"), said


@pytest.mark.parametrize("src", ["k.hip", "m.cpp"])
def test_an_arch_clang_22_dropped_is_refused_naming_clang_22(proj, src):
    need_tool("clang-22")
    line = _refused(proj, f"src={src}", "clang=clang-22")
    assert "offload: OFFLOAD_ARCHS: 'gfx940' is not an offload arch clang-22 (LLVM 22) knows (it knows gfx600, " \
        in line, line
    assert "gfx942" in line and f"which compiles '{src}'" in line
    assert "a clang of LLVM 19 to 20 knows it (OFFLOAD_CLANG)" in line
    assert "neither an NVIDIA" not in line


@pytest.mark.parametrize("clang", ["clang-19", "clang-22"])
def test_a_made_up_arch_is_refused_naming_the_compiler(proj, clang):
    need_tool(clang)
    major = clang.split("-")[1]
    line = _refused(proj, "src=k.hip", "archs=gfx90a,gfx9999", f"clang={clang}")
    assert f"offload: OFFLOAD_ARCHS: 'gfx9999' is not an offload arch {clang} (LLVM {major}) knows (it knows " \
        in line, line
    assert "gfx90a" in line and "generic-hsa" not in line


def test_an_arch_nvcc_does_not_know_is_refused_naming_nvcc(proj):
    """nvcc is asked too (`--list-gpu-code`): CUDA 13 dropped sm_70."""
    need_tool("nvcc")
    listed = subprocess.run(["nvcc", "--list-gpu-code"], capture_output=True, text=True).stdout.split()
    release = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout
    release = release.split("release ", 1)[1].split(",")[0]
    for arch in ("sm_70", "sm_80"):
        if arch in listed:
            proj.scons("-n", "src=k.cu", f"archs={arch}", "cc=nvcc")
        else:
            line = _refused(proj, "src=k.cu", f"archs={arch}", "cc=nvcc")
            assert f"'{arch}' is not an offload arch nvcc (CUDA {release}) knows (it knows {listed[0]}" in line, line
    line = _refused(proj, "src=k.cu", "archs=sm_9999", "cc=nvcc")
    assert "'sm_9999' is not an offload arch nvcc (CUDA" in line


def test_the_archs_are_asked_once_and_kept(tmp_path):
    """A second run asks the compiler nothing about its archs: the answers are kept beside
    `.sconsign` (with clang's identity and runtimes)."""
    need_tool("clang-19")
    p = Project(tmp_path, {"SConstruct": COUNTING + SCONSTRUCT, **SOURCES})
    first = p.scons("-n", "src=k.hip").stderr
    assert first.count("ARCH PROBE") == 2, first   # AMD's and NVIDIA's lists, once each
    again = p.scons("-n", "src=k.hip").stderr
    assert "ARCH PROBE" not in again, again
    with_more = p.scons("-n", "src=m.cpp", "archs=gfx90a,gfx940,gfx1030,sm_80").stderr
    assert "ARCH PROBE" not in with_more, with_more


def test_cleaning_takes_the_files_of_an_arch_another_clang_knows(tmp_path):
    """Files of gfx940 built by clang 19 are an arch's files under clang 22 too: `scons -c` after
    dropping it from OFFLOAD_ARCHS removes them."""
    need_tool("clang-19")
    p = Project(tmp_path, {"SConstruct": SCONSTRUCT, **SOURCES})
    p.scons("src=m.cpp")
    assert (p.root / "m.gfx940.bc").is_file()
    p.scons("-c", "src=m.cpp", "archs=gfx90a")
    assert not (p.root / "m.gfx940.bc").exists()
