"""nvcc with NVIDIA's arch-specific (`sm_90a`, `sm_100a`) and family (`sm_100f`, `sm_120f`) archs:
built as nvcc builds them (`-gencode arch=compute_90a,code=sm_90a`) in every nvcc mode (split
steps, one `nvcc -c` per source, relocatable device code with its device link), alone or beside
plain archs, even a plain and a suffixed one of the same number (`sm_90`, `sm_90a`); the program
carries the suffixed SASS (`verify --require sm_90a`), which runs on sm_90 only (`--runs-on`);
adding such an arch runs only its own steps; and a variant the nvcc in use does not build
(`sm_89a`, `sm_90f`) is one `scons: *** offload: ...` line naming it, in every mode.

nvcc's device preprocess knows an arch by its number only (`-D__CUDA_ARCH__=900` for compute_90,
compute_90a and compute_90f alike): the split graph names each preprocess after the cicc step
that reads it, so these tests also hold the graph to the names nvcc's own steps use."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from conftest import need_tool, run_cli
from scons_helpers import REPO, Project, assert_clean_failure, run_built
from scons_samples import cuda_scale_main
from test_scons_nvcc_split import _device_work, _inspect, _steps

pytestmark = pytest.mark.slow

# `mode=`: `split` (the default graph), `whole` (OFFLOAD_NVCC_SPLIT=False: one nvcc -c per
# source), `rdc` (-rdc=true: main.cu's kernel calls twice.cu's device function; split steps and
# the device link as nodes).
SCONSTRUCT = """
import os
mode = ARGUMENTS.get('mode', 'split')
env = Environment(tools=['default', 'offload'], ENV={'PATH': os.environ['PATH']},
                  OFFLOAD_ARCHS=ARGUMENTS.get('archs', 'sm_90a').split(','),
                  OFFLOAD_CUDA_COMPILER='nvcc', OFFLOAD_NVCC_SPLIT=mode != 'whole')
if mode == 'rdc':
    env.Append(OFFLOAD_NVCCFLAGS=['-rdc=true'], CPPDEFINES=['RDC'])
env.OffloadProgram('app', ['src/main.cu', 'src/twice.cu'])
"""

# Plain code: nothing in it needs the arch-specific features, as in a program an H100 user
# builds for sm_90a because some other kernel uses wgmma.
MAIN = cuda_scale_main("#ifdef RDC\n__device__ float twice(float x);      // twice.cu's: the device link resolves it\n"
                       "#else\n__device__ float twice(float x) { return 2 * x; }\n#endif")

TWICE = """
#ifdef RDC
__device__ float twice(float x) { return 2 * x; }
#endif
__global__ void halve(float *x) { x[threadIdx.x] /= 2; }
"""


def _project(root) -> Project:
    need_tool("nvcc")
    need_tool("clang-19")      # the tool validates archs with clang's table
    return Project(root, {"SConstruct": SCONSTRUCT, "src/main.cu": MAIN, "src/twice.cu": TWICE})


def _run(p) -> str:
    out = run_built(p.root / "app")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout in ("host PASS\n", "gpu PASS\n"), out.stdout
    return out.stdout


def _verify(path, *args) -> subprocess.CompletedProcess:
    return run_cli("tool", "verify", *args, str(path), text=True)


def _expected_steps(mode: str, archs: list[str]) -> dict:
    """The steps a full build of the project runs (two sources)."""
    if mode == "whole":
        return {"NVCC": 2, "LINK": 1}
    c = {"NVCC-FE": 2, "NVCC-FATBIN": 2, "NVCC-HOST": 2, "LINK": 1}
    for a in archs:
        c[f"NVCC-PP compute_{a[3:]}"] = c[f"NVCC-DEVICE compute_{a[3:]}"] = 2
    if mode == "rdc":
        c.update({f"NVCC-NVLINK {a}": 1 for a in archs})
        c["NVCC-DLINK"] = 1
    return c


@pytest.mark.parametrize("archs", ["sm_90a", "sm_80,sm_90a"])
@pytest.mark.parametrize("mode", ["split", "whole", "rdc"])
def test_arch_specific_build_verifies_and_is_up_to_date(tmp_path, mode, archs):
    p = _project(tmp_path / "p")
    args = [f"mode={mode}", f"archs={archs}"]
    c = _steps(p.scons("-j2", *args))
    assert c == _expected_steps(mode, archs.split(",")), c
    for obj in ("src/main.o", "src/twice.o"):
        assert [(a, k) for a, k, _ in _inspect(p.root / obj)] == [(a, "cubin") for a in archs.split(",")]
    _run(p)
    ok = _verify(p.root / "app", "--require", "sm_90a")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # SASS for sm_90a runs on an sm_90 GPU (an H100), and on no other: not on sm_100.
    on_90 = _verify(p.root / "app", "--runs-on", "sm_90")
    assert on_90.returncode == 0 and "yes (SASS sm_90a)" in on_90.stdout, on_90.stdout + on_90.stderr
    on_100 = _verify(p.root / "app", "--runs-on", "sm_100")
    assert on_100.returncode == 1 and "SASS sm_90a runs on sm_90 only" in on_100.stdout, on_100.stdout
    assert p.up_to_date(*args)


def test_split_object_equals_one_nvcc_compile(tmp_path):
    """The split steps give the objects the SASS one `nvcc -c` with the same `-gencode` list
    gives, sm_90a's included."""
    p = _project(tmp_path / "p")
    p.scons("archs=sm_80,sm_90a")
    split = {o: _inspect(p.root / f"src/{o}.o") for o in ("main", "twice")}
    c = _steps(p.scons("archs=sm_80,sm_90a", "mode=whole"))
    assert c["NVCC"] == 2 and c["NVCC-HOST"] == 0, c
    assert {o: _inspect(p.root / f"src/{o}.o") for o in ("main", "twice")} == split


@pytest.mark.parametrize("mode", ["split", "rdc"])
def test_adding_sm_90a_runs_only_its_steps(tmp_path, mode):
    p = _project(tmp_path / "p")
    p.scons(f"mode={mode}", "archs=sm_80")
    c = _steps(p.scons(f"mode={mode}", "archs=sm_80,sm_90a"))
    expected = {"NVCC-PP compute_90a": 2, "NVCC-DEVICE compute_90a": 2, "NVCC-FATBIN": 2, "NVCC-HOST": 2, "LINK": 1}
    if mode == "rdc":   # the objects changed: every arch's nvlink reruns, no other arch's compile
        expected.update({"NVCC-NVLINK sm_80": 1, "NVCC-NVLINK sm_90a": 1, "NVCC-DLINK": 1})
    assert c == expected, c
    assert _device_work(c) == {"NVCC-DEVICE compute_90a": 2}
    _run(p)
    assert _verify(p.root / "app", "--require", "sm_80,sm_90a").returncode == 0
    assert p.up_to_date(f"mode={mode}", "archs=sm_80,sm_90a")


def test_plain_and_arch_specific_of_one_number_are_apart(tmp_path):
    """`sm_90` and `sm_90a` together: each its own preprocess, device node and files."""
    p = _project(tmp_path / "p")
    c = _steps(p.scons("-j2", "archs=sm_90,sm_90a"))
    assert c == _expected_steps("split", ["sm_90", "sm_90a"]), c
    for name in ("main.compute_90.cpp1.ii", "main.compute_90a.cpp1.ii", "main.sm_90.cubin", "main.sm_90a.cubin"):
        assert (p.root / "src" / name).is_file(), name
    assert [(a, k) for a, k, _ in _inspect(p.root / "src/main.o")] == [("sm_90", "cubin"), ("sm_90a", "cubin")]
    _run(p)
    assert p.up_to_date("archs=sm_90,sm_90a")


@pytest.mark.parametrize("mode", ["split", "whole"])
def test_family_archs_build(tmp_path, mode):
    """Family archs (`sm_100f`: SASS for 10.0 and 10.3; `sm_120f`: 12.0 and 12.1) and an
    arch-specific Blackwell one (`sm_100a`)."""
    p = _project(tmp_path / "p")
    args = [f"mode={mode}", "archs=sm_100f,sm_120f,sm_100a"]
    c = _steps(p.scons("-j2", *args))
    assert c == _expected_steps(mode, ["sm_100f", "sm_120f", "sm_100a"]), c
    assert [(a, k) for a, k, _ in _inspect(p.root / "src/main.o")] == \
        [("sm_100a", "cubin"), ("sm_100f", "cubin"), ("sm_120f", "cubin")]
    _run(p)
    assert _verify(p.root / "app", "--require", "sm_100f,sm_120f,sm_100a").returncode == 0
    assert _verify(p.root / "app", "--runs-on", "sm_103").returncode == 0
    assert _verify(p.root / "app", "--runs-on", "sm_90").returncode == 1
    assert p.up_to_date(*args)


@pytest.mark.parametrize("archs, bad", [("sm_80,sm_89a", "sm_89a"), ("sm_90f", "sm_90f")])
@pytest.mark.parametrize("mode", ["split", "whole", "rdc"])
def test_variant_nvcc_does_not_build_is_one_clear_error(tmp_path, mode, archs, bad):
    """CUDA 13's nvcc lists `sm_89` and `sm_90` but builds no `sm_89a` nor `sm_90f`: refused
    before anything runs, naming the arch, the nvcc and the source, whatever the mode."""
    p = _project(tmp_path / "p")
    cp = p.scons(f"mode={mode}", f"archs={archs}", check=False)
    out = assert_clean_failure(cp)
    assert not _steps(cp), "nothing is built"
    errors = [ln for ln in out.splitlines() if ln.startswith("scons: ***")]
    assert len(errors) == 1, out
    assert re.match(rf"scons: \*\*\* offload: OFFLOAD_ARCHS: '{bad}' is not an arch nvcc \(CUDA [\d.]+\) builds "
                    rf"\(nvcc fatal *: Unsupported gpu architecture 'compute_{bad[3:]}'\), which compiles "
                    rf"'src/main.cu' \(cuda\): sm_{bad[3:-1]}, or a CUDA whose nvcc builds {bad} \(OFFLOAD_NVCC\)$",
                    errors[0]), errors[0]


def test_parse_names_each_device_preprocess_after_its_cicc_arch():
    nvcc = need_tool("nvcc")
    sys.path.insert(0, str(REPO / "site_scons"))
    from site_tools.offload.graph.nvcc import plan as _nvcc

    def plan_text(*gencode):
        cp = subprocess.run([nvcc, "--dryrun", "-c", "-o", _nvcc.PLAN_OUT,
                             *[w for g in gencode for w in ("-gencode", g)], _nvcc.PLAN_SRC],
                            capture_output=True, text=True, timeout=60)
        assert cp.returncode == 0, cp.stderr
        return cp.stdout + cp.stderr

    plan = _nvcc.parse(plan_text("arch=compute_90,code=sm_90", "arch=compute_90a,code=sm_90a",
                                 "arch=compute_100f,code=sm_100f"))
    assert [(s.kind, s.virtual, s.real) for s in plan.steps if s.kind in ("pp", "cicc", "ptxas")] == [
        ("pp", "compute_90", ""), ("cicc", "compute_90", ""), ("ptxas", "compute_90", "sm_90"),
        ("pp", "compute_90a", ""), ("cicc", "compute_90a", ""), ("ptxas", "compute_90a", "sm_90a"),
        ("pp", "compute_100f", ""), ("cicc", "compute_100f", ""), ("ptxas", "compute_100f", "sm_100f")]
    assert [s.outputs for s in plan.steps if s.kind == "pp"] == [["ii.compute_90"], ["ii.compute_90a"],
                                                                 ["ii.compute_100f"]]
    # A cicc step for another arch than the text it reads was preprocessed for: not this shape.
    text = plan_text("arch=compute_90a,code=sm_90a")
    with pytest.raises(_nvcc.PlanShape, match="cicc -arch compute_100a reads the text preprocessed for compute_90"):
        _nvcc.parse(text.replace("-arch compute_90a", "-arch compute_100a"))
