"""Configuration mistakes are said when the SConscript is read, naming the setting and the fix, at
the SConstruct line that made the request: no archs, archs of no vendor a source's language is
built for, a host compiler as OFFLOAD_CLANG, a clang without the OpenMP offload runtime, clang
against a CUDA newer than it knows."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from conftest import need_tool
from scons_helpers import Project, refused

pytestmark = pytest.mark.slow

SCONSTRUCT = """
import os
env = Environment(tools=['default', 'offload'], ENV={'PATH': os.environ['PATH']},
                  OFFLOAD_ARCHS=[a for a in ARGUMENTS.get('archs', '').split(',') if a],
                  OFFLOAD_CUDA_COMPILER=ARGUMENTS.get('cc', 'clang'),
                  OFFLOAD_CLANG=ARGUMENTS.get('clang', 'clang-19'), OFFLOAD_DEVICEFLAGS=ARGUMENTS.get('dev', '').split())
env.OffloadProgram('app', [ARGUMENTS['src']])
if 'src2' in ARGUMENTS:   # a second program, its device flags its own ('-' for none)
    env.Clone(OFFLOAD_DEVICEFLAGS=[w for w in ARGUMENTS['dev2'].split() if w != '-']).OffloadProgram(
        'app2', [ARGUMENTS['src2']])
"""

SOURCES = {
    "m.cpp": "int main() { int r = 1;\n#pragma omp target map(tofrom: r)\n r = 0;\n return r; }\n",
    "k.cu": "__global__ void k(float *x) { x[0] = 1; }\nint main() { return 0; }\n",
    "v.hip": "#include <hip/hip_runtime.h>\n__global__ void v(float *x) { x[0] = 1; }\nint main() { return 0; }\n",
    "w.hip": "#include <hip/hip_runtime.h>\n__global__ void w(float *x) { x[0] = 2; }\nint main() { return 0; }\n",
}


@pytest.fixture(scope="module")
def proj(tmp_path_factory):
    need_tool("clang-19")
    return Project(tmp_path_factory.mktemp("config"), {"SConstruct": SCONSTRUCT, **SOURCES})


def _refused(proj, *args) -> str:
    return refused(proj, *args, line=7)


def test_no_archs_names_offload_archs(proj):
    line = _refused(proj, "src=m.cpp")
    assert "OFFLOAD_ARCHS is empty: 'm.cpp' (openmp) needs the offload archs" in line
    assert "OFFLOAD_LANG='host'" in line


@pytest.mark.parametrize("src, archs, cc, want", [
    ("v.hip", "sm_80", "clang", "'v.hip' (hip) is built for AMD (gfx*) archs, and OFFLOAD_ARCHS (sm_80) has none"),
    ("k.cu", "gfx90a", "nvcc", "'k.cu' (cuda) is built for NVIDIA (sm_*) archs, and OFFLOAD_ARCHS (gfx90a) has none"),
])
def test_archs_of_no_vendor_the_language_builds_for(proj, src, archs, cc, want):
    if cc == "nvcc":
        need_tool("nvcc")
    assert want in _refused(proj, f"src={src}", f"archs={archs}", f"cc={cc}")


def test_a_host_compiler_as_offload_clang_is_named(proj):
    line = _refused(proj, "src=v.hip", "archs=gfx90a", "clang=gcc")
    assert "OFFLOAD_CLANG='gcc' is not clang (its --version says 'gcc" in line
    assert "OFFLOAD_HIP_DRIVER" not in line


def test_a_clang_without_the_openmp_offload_runtime_is_said_before_the_build(proj):
    """Debian's clang 22 has no OpenMP offload runtime (the probe asks `-print-file-name=`)."""
    need_tool("clang-22")
    cp = proj.scons("-n", "src=m.cpp", "archs=gfx90a", "clang=clang-22")
    warnings = [line for line in cp.stderr.splitlines() if line.startswith("offload: warning: clang-22 has no OpenMP")]
    assert len(warnings) == 1, cp.stderr
    cp = proj.scons("-n", "src=m.cpp", "archs=gfx90a", "clang=clang-19")
    assert "has no OpenMP offload runtime" not in cp.stderr


def test_clang_against_a_newer_cuda_says_what_builds_it(proj):
    """clang 19 and CUDA 13 (newer than the 12.5 it knows): a warning naming nvcc and the variables."""
    need_tool("nvcc")
    said = subprocess.run(["clang-19", "-x", "cuda", "--cuda-path=/usr/local/cuda", "--offload-arch=sm_80",
                           "-nocudalib", "-E", "-o", "/dev/null", "/dev/null"], capture_output=True, text=True).stderr
    newer = "CUDA version is newer than the latest" in said   # CUDA 13 here; an older CUDA: no warning
    cp = proj.scons("-n", "src=k.cu", "archs=sm_80")
    assert cp.stderr.count("offload: warning: clang-19 knows CUDA up to") == int(newer), cp.stderr
    assert ("OFFLOAD_CUDA_COMPILER='nvcc'" in cp.stderr) == newer
    cp = proj.scons("-n", "src=k.cu", "archs=sm_80", "cc=nvcc")
    assert "knows CUDA up to" not in cp.stderr


def test_openmp_cubins_the_clangs_own_runtime_refuses_are_said_before_the_build(proj):
    """clang 19's OpenMP runtime refuses cubins in NVIDIA's new ELF ABI, which CUDA 13's ptxas
    writes for every SM (an H100 showed it: 'No images found compatible with the installed
    hardware'): said once per build, with the ways out, for NVIDIA archs only; a CUDA 12 ptxas:
    nothing said. ptxas's answer is kept: the next read goes by it."""
    need_tool("nvcc")
    listing = subprocess.run(["clang-19", "-fopenmp", "--offload-arch=sm_80", "--cuda-path=/usr/local/cuda", "-###",
                              "-c", "-x", "c", "-o", "/dev/null", "/dev/null"], capture_output=True, text=True).stderr
    ptxas = next(w.strip('"') for ln in listing.splitlines() for w in ln.split()[:1] if w.strip('"').endswith("/ptxas"))
    release = re.search(r"release (\d+)\.(\d+)", subprocess.run([ptxas, "--version"], capture_output=True,
                                                                  text=True).stdout)
    refused = int(release.group(1)) >= 13
    for _ in range(2):
        cp = proj.scons("-n", "src=m.cpp", "archs=sm_80,sm_90")
        said = [ln for ln in cp.stderr.splitlines() if "OpenMP offload programs built for" in ln]
        assert len(said) == int(refused), cp.stderr
    if refused:
        assert said[0].startswith(
            f"offload: warning: OpenMP offload programs built for sm_80, sm_90 will not run on those GPUs: clang-19's "
            f"OpenMP runtime (libomptarget.so.19.1) refuses the cubins of CUDA {release.group(1)}.{release.group(2)}'s "
            f"ptxas and nvlink ({ptxas})"), said
        assert "OFFLOAD_CUDA_PATH to a CUDA 12 or older toolkit" in said[0] and "verify --runs-on" in said[0]
    cp = proj.scons("-n", "src=m.cpp", "archs=gfx90a")
    assert "OpenMP offload programs built for" not in cp.stderr
    # The kept answer is what the next read goes by: ptxas told to be CUDA 12.9's, nothing is said.
    probes = proj.root / ".sconsign.offload-probes.json"
    kept = json.loads(probes.read_text())
    versions = [v for v in kept.values() if v["answers"] and str(v["answers"][0]).startswith("ptxas:")]
    assert len(versions) == 1, kept
    versions[0]["answers"] = ["ptxas: NVIDIA (R) Ptx optimizing assembler\nCuda compilation tools, release 12.9, V12.9.86\n"]
    probes.write_text(json.dumps(kept))
    cp = proj.scons("-n", "src=m.cpp", "archs=sm_80,sm_90")
    assert "OpenMP offload programs built for" not in cp.stderr, cp.stderr


def test_a_clang_without_the_rocm_device_libraries_it_needs_is_said_before_the_build(proj):
    """clang 22 wants ROCm 6.3's device libraries; clang 19 takes the ones installed here."""
    need_tool("clang-22")
    said = subprocess.run(["clang-22", "-x", "hip", "--offload-arch=gfx90a", "-nogpuinc", "-###", "-c", "-o",
                           "/dev/null", "/dev/null"], capture_output=True, text=True).stderr
    missing = "cannot find ROCm device library" in said   # no ROCm 6.3 here; with one: no warning
    cp = proj.scons("-n", "src=v.hip", "archs=gfx90a", "clang=clang-22")
    assert cp.stderr.count("offload: warning: clang-22 cannot build AMD device code here: cannot find ROCm "
                           "device library") == int(missing), cp.stderr
    # The answer is kept while clang and the folder are unchanged: a second read runs no clang for
    # it and says what was kept.
    probes = proj.root / ".sconsign.offload-probes.json"
    kept = json.loads(probes.read_text())
    quiet = [v for v in kept.values() if v["answers"] and "cannot find ROCm" in str(v["answers"][0])]
    assert len(quiet) == int(missing), kept
    if missing:
        for v in quiet:
            v["answers"] = ["clang: error: cannot find ROCm device library (KEPT); more\n"]
        probes.write_text(json.dumps(kept))
        cp = proj.scons("-n", "src=v.hip", "archs=gfx90a", "clang=clang-22")
        assert cp.stderr.count("cannot build AMD device code here: cannot find ROCm device library (KEPT)") == 1, \
            cp.stderr
    cp = proj.scons("-n", "src=v.hip", "archs=gfx90a", "clang=clang-19")
    assert "cannot build AMD device code" not in cp.stderr
    # Device compiles that ask for the code-object version of the libraries installed (ROCm 5's)
    # are asked about with it: nothing to say.
    if not os.path.isdir("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"):
        pytest.skip("ROCm device libraries not found (install rocm-device-libs)")
    cp = proj.scons("-n", "src=v.hip", "archs=gfx90a", "clang=clang-22", "dev=-mcode-object-version=5")
    assert "cannot build AMD device code" not in cp.stderr, cp.stderr
    if missing:
        assert "-mcode-object-version=5" in next(ln for ln in proj.scons("-n", "src=v.hip", "archs=gfx1030",
                                                                             "clang=clang-22").stderr.splitlines()
                                                 if "cannot build AMD device code" in ln)
    # Two environments of one build that ask for different code-object versions are each asked
    # about with their own: the one without is said, whichever comes first.
    for first, second in (("-mcode-object-version=5", "-"), ("-", "-mcode-object-version=5")):
        cp = proj.scons("-n", "src=v.hip", "src2=w.hip", "archs=gfx90a", "clang=clang-22", f"dev={first}",
                        f"dev2={second}")
        assert cp.stderr.count("cannot build AMD device code") == int(missing), cp.stderr
