"""nvcc with relocatable device code (`-rdc=true`): the device link as nodes (nvlink per SASS arch,
then the fat binary and nvcc's link stub), the steps SCons runs when an arch is added or a source
edited, the program (a kernel calling a `__device__` function of another source) linking and
running, the linked images equal to `nvcc -dlink`'s, static libraries of such code (the device link
deferred to the program, or done inside the library for a plain g++ link), and the one
`nvcc -dlink` when the plan is not split."""

from __future__ import annotations

import subprocess

import pytest

from conftest import need_tool
from scons_helpers import Project, run_built, scons_env
from scons_samples import cuda_scale_main
from test_scons_nvcc_split import _device_work, _inspect, _steps

pytestmark = pytest.mark.slow

# OFFLOAD_NVCC_SPLIT is left at its default (the split graph) unless `split=` says otherwise.
SCONSTRUCT = """
import os
env = Environment(tools=['default', 'offload'], ENV={'PATH': os.environ['PATH']},
                  OFFLOAD_ARCHS=ARGUMENTS.get('archs', 'sm_80').split(','),
                  OFFLOAD_CUDA_COMPILER='nvcc', OFFLOAD_NVCCFLAGS=['-rdc=true'])
if 'split' in ARGUMENTS:
    env['OFFLOAD_NVCC_SPLIT'] = ARGUMENTS['split'] == '1'
env.OffloadProgram('scale', ['src/main.cu', 'src/twice.cu'])
if ARGUMENTS.get('libs'):
    # The device link deferred to the program: its kernel calls the archive's __device__ function.
    libtwice = env.OffloadArchive('lib/twice', ['lib/twice.cu'])
    env.OffloadProgram('uselib', ['src/main.cu', libtwice])
    # Device-linked inside the library: a plain g++ program links it with no CUDA flag.
    env.OffloadStaticLibrary('lib/quad', ['lib/quad.cu', 'lib/twice.cu'])
    env.Program('bin/app', ['app/app.cpp'], LIBS=['quad'], LIBPATH=['lib'])
"""

# A kernel calling `twice`, defined in another translation unit: nothing links without the
# device link (nvlink resolves the call; the host side registers the linked image).
MAIN = cuda_scale_main("__device__ float twice(float x);")

TWICE = "__device__ float twice(float x) { return 2 * x; }\n"

QUAD = """
__device__ float twice(float x);
__global__ void quad(float *x) { x[threadIdx.x] = twice(twice(x[threadIdx.x])); }
int quad_on_gpu(float *h, int n) {
  float *d;
  if (cudaMalloc(&d, n * sizeof(float)) != cudaSuccess) return 0;
  cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
  quad<<<1, n>>>(d);
  return cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess;
}
"""

APP = """
#include <cstdio>
int quad_on_gpu(float *h, int n);
int main() {
  float h[2] = {1, 2};
  int gpu = quad_on_gpu(h, 2);
  if (!gpu) for (float &v : h) v *= 4;
  std::printf("%s %s\\n", gpu ? "gpu" : "host", h[1] == 8 ? "PASS" : "FAIL");
  return h[1] == 8 ? 0 : 1;
}
"""


def _project(root) -> Project:
    need_tool("nvcc")
    need_tool("clang-19")      # the tool validates archs with clang's table
    return Project(root, {"SConstruct": SCONSTRUCT, "src/main.cu": MAIN, "src/twice.cu": TWICE, "lib/twice.cu": TWICE,
                          "lib/quad.cu": QUAD, "app/app.cpp": APP})


def _run(path) -> str:
    out = run_built(path, "/usr/local/cuda/lib64")   # app: libquad.a names libcudart.so
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout in ("host PASS\n", "gpu PASS\n"), out.stdout
    return out.stdout


def test_rdc_program_device_links_per_arch_and_runs(tmp_path):
    p = _project(tmp_path / "p")
    c = _steps(p.scons("-j2", "archs=sm_80,sm_90"))
    assert c == {"NVCC-FE": 2, "NVCC-PP compute_80": 2, "NVCC-PP compute_90": 2,
                 "NVCC-DEVICE compute_80": 2, "NVCC-DEVICE compute_90": 2, "NVCC-FATBIN": 2, "NVCC-HOST": 2,
                 "NVCC-NVLINK sm_80": 1, "NVCC-NVLINK sm_90": 1, "NVCC-DLINK": 1, "LINK": 1}, c
    _run(p.root / "scale")
    assert p.up_to_date("archs=sm_80,sm_90")
    # The linked images are those nvcc's own device link makes of the same objects.
    nvcc = need_tool("nvcc")
    subprocess.run([nvcc, "-dlink", "-rdc=true", "-gencode", "arch=compute_80,code=sm_80", "-gencode",
                    "arch=compute_90,code=sm_90", "src/main.o", "src/twice.o", "-o", "ref.dlink.o"],
                   cwd=p.root, check=True, capture_output=True, env=scons_env())
    ours = _inspect(p.root / "scale.dlink.o")
    assert [(a, k) for a, k, _ in ours] == [("sm_80", "cubin"), ("sm_90", "cubin")]
    assert ours == _inspect(p.root / "ref.dlink.o")


def test_adding_an_arch_runs_its_device_work_and_the_device_link(tmp_path):
    p = _project(tmp_path / "p")
    p.scons("archs=sm_80,sm_90")
    c = _steps(p.scons("archs=sm_80,sm_90,sm_86"))
    # The new arch's device work per source; fat binaries and host objects that embed it; the
    # device link of every arch (nvlink reads the objects, which changed); no other device compile.
    assert c == {"NVCC-PP compute_86": 2, "NVCC-DEVICE compute_86": 2, "NVCC-FATBIN": 2, "NVCC-HOST": 2,
                 "NVCC-NVLINK sm_80": 1, "NVCC-NVLINK sm_90": 1, "NVCC-NVLINK sm_86": 1, "NVCC-DLINK": 1,
                 "LINK": 1}, c
    _run(p.root / "scale")
    assert [a for a, _, _ in _inspect(p.root / "scale.dlink.o")] == ["sm_80", "sm_86", "sm_90"]


def test_editing_a_source_reruns_its_nodes_and_the_device_link(tmp_path):
    p = _project(tmp_path / "p")
    p.scons("archs=sm_80,sm_90")
    p.write("src/twice.cu", TWICE + "__device__ float thrice(float x) { return 3 * x; }\n")   # new device code
    c = _steps(p.scons("archs=sm_80,sm_90"))
    assert c == {"NVCC-FE": 1, "NVCC-PP compute_80": 1, "NVCC-PP compute_90": 1,
                 "NVCC-DEVICE compute_80": 1, "NVCC-DEVICE compute_90": 1, "NVCC-FATBIN": 1, "NVCC-HOST": 1,
                 "NVCC-NVLINK sm_80": 1, "NVCC-NVLINK sm_90": 1, "NVCC-DLINK": 1, "LINK": 1}, c
    _run(p.root / "scale")


def test_removing_an_arch_runs_no_device_compile(tmp_path):
    p = _project(tmp_path / "p")
    p.scons("archs=sm_80,sm_90")
    c = _steps(p.scons("archs=sm_80"))
    assert _device_work(c) == {} and c["NVCC-NVLINK sm_80"] == 1 and c["NVCC-NVLINK sm_90"] == 0, c
    _run(p.root / "scale")


def test_split_off_is_one_nvcc_compile_per_source_and_one_nvcc_dlink(tmp_path):
    p = _project(tmp_path / "p")
    c = _steps(p.scons("archs=sm_80,sm_90", "split=0"))
    assert c == {"NVCC": 2, "NVCC-DLINK": 1, "LINK": 1}, c
    _run(p.root / "scale")
    one = _inspect(p.root / "scale.dlink.o")
    p.scons("archs=sm_80,sm_90", "split=1")
    assert _inspect(p.root / "scale.dlink.o") == one


def test_static_libraries_of_rdc_code_link_and_run(tmp_path):
    p = _project(tmp_path / "p")
    cp = p.scons("-j2", "archs=sm_80,sm_90", "libs=1")
    c = _steps(cp)
    # scale, uselib (the archive's device code linked with the program's) and libquad (inside).
    assert (c["NVCC-NVLINK sm_80"], c["NVCC-NVLINK sm_90"], c["NVCC-DLINK"]) == (3, 3, 3), c
    assert (c["AR"], c["RELOCATABLE"], c["LDSCRIPT"]) == (2, 1, 1), c
    for program in ("scale", "uselib", "bin/app"):
        _run(p.root / program)
    assert "libcudart.so" in (p.root / "lib/libquad.a").read_text()
    assert p.up_to_date("archs=sm_80,sm_90", "libs=1")


def test_unrecognised_device_link_plan_falls_back_with_one_note(tmp_path):
    """An nvcc whose `--dryrun -dlink` has a step the parser does not know: one note, and one
    `nvcc -dlink`. (The fake is a script around nvcc, so the compiles go through it whole too:
    tests/scons_tool/test_scons_nvcc_shapes.py.)"""
    real = need_tool("nvcc")
    p = _project(tmp_path / "p")
    fake = tmp_path / "nvcc"
    fake.write_text("#!/bin/sh\n"
                    'case " $* " in *" --dryrun -dlink "*) echo "#$ mystery-linker --frobnicate" >&2; exit 0;; esac\n'
                    f'exec {real} "$@"\n')
    fake.chmod(0o755)
    p.write("SConstruct", SCONSTRUCT.replace("env.OffloadProgram('scale'",
                                             f"env['OFFLOAD_NVCC'] = '{fake}'\nenv.OffloadProgram('scale'"))
    cp = p.scons("archs=sm_80")
    assert cp.stderr.count("offload: note: nvcc's device link is not split per arch "
                           "(an unknown step 'mystery-linker'): one nvcc -dlink instead") == 1, cp.stderr
    c = _steps(cp)
    assert (c["NVCC-DLINK"], c["NVCC-NVLINK sm_80"], c["NVCC"]) == (1, 0, 2), c
    _run(p.root / "scale")


def test_parse_recognises_cuda_13_device_link_plan():
    nvcc = need_tool("nvcc")
    import sys
    sys.path.insert(0, str(__import__("scons_helpers").REPO / "site_scons"))
    from site_tools.offload import _nvcc_link
    from site_tools.offload.graph.nvcc import plan as _nvcc
    cp = subprocess.run([nvcc, "--dryrun", "-dlink", "-o", _nvcc_link._OUT, "-gencode", "arch=compute_80,code=sm_80",
                         "-gencode", "arch=compute_90,code=[sm_90,compute_90]", *_nvcc_link._INS],
                        capture_output=True, text=True, timeout=60)
    plan = _nvcc_link.parse(cp.stdout + cp.stderr)
    assert [s.real for s in plan.nvlinks] == ["sm_80", "sm_90"]    # no nvlink for PTX, as nvcc
    assert plan.fatbin.inputs == [s.outputs[0] for s in plan.nvlinks]
    with pytest.raises(_nvcc.PlanShape, match="unknown step 'nvprune'"):
        _nvcc_link.parse(cp.stdout + cp.stderr + "\n#$ nvprune x.o\n")
    with pytest.raises(_nvcc.PlanShape, match="not nvlink per arch"):
        _nvcc_link.parse("\n".join(ln for ln in (cp.stdout + cp.stderr).splitlines() if "fatbinary" not in ln))
