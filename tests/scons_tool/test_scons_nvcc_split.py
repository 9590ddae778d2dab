"""nvcc on the per-arch graph: the steps SCons runs for a `.cu` source built with nvcc when an arch
is added or removed, the source edited or a host-only flag changed; the object carries the same
SASS and PTX per arch as one `nvcc -c` with the same `-gencode` list; the program links and runs;
a plan of unknown shape falls back to the one compile with a note."""

from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import sys
import time

import pytest

from conftest import inspect_json, need_tool
from scons_helpers import SITE_TOOLS, Project, run_built

pytestmark = pytest.mark.slow

SCONSTRUCT = """
import os
env = Environment(tools=['default', 'offload'], ENV={'PATH': os.environ['PATH']},
                  OFFLOAD_ARCHS=ARGUMENTS.get('archs', 'sm_80').split(','),
                  OFFLOAD_CUDA_COMPILER='nvcc', OFFLOAD_CUDA_PTX=bool(ARGUMENTS.get('ptx')),
                  OFFLOAD_NVCC_SPLIT=ARGUMENTS.get('split', '1') == '1',
                  CXXFLAGS=ARGUMENTS.get('cxx', '-O2').split())
if ARGUMENTS.get('nvccflags'):
    env.Append(OFFLOAD_NVCCFLAGS=ARGUMENTS['nvccflags'].split())
env.OffloadProgram('saxpy', ['src/saxpy.cu', 'src/scale.cu'])
"""

SAXPY = """
#include <cstdio>
void scale_on_host(float *x, int n);
__global__ void saxpy(float a, float *x) { x[threadIdx.x] *= a; }
int main() {
  float h[4] = {1, 2, 3, 4};
  scale_on_host(h, 4);
  float *d;
  if (cudaMalloc(&d, 64) != cudaSuccess) { std::printf("saxpy host %g\\n", h[3]); return 0; }
  saxpy<<<1, 16>>>(2.0f, d);
  std::printf("saxpy gpu %g\\n", h[3]);
  return 0;
}
"""

SCALE = """
__global__ void twice(float *x) { x[threadIdx.x] *= 2; }
void scale_on_host(float *x, int n) { for (int i = 0; i < n; ++i) x[i] *= 2; }
"""

_STEP_RE = re.compile(r"^(NVCC-FE|NVCC-PP|NVCC-DEVICE|NVCC-FATBIN|NVCC-HOST|NVCC-NVLINK|NVCC-DLINK|NVCC|LINK|"
                      r"RELOCATABLE|AR|LDSCRIPT)\s+(.*)$")
# NVCC-FE: host preprocess + cudafe++; NVCC-PP compute_NN: the device preprocess of one virtual
# arch; NVCC-DEVICE compute_NN: its cicc and ptxas; NVCC-NVLINK sm_NN: one arch's device link
# (-rdc=true); NVCC-DLINK: the device link's fat binary and host object (or one nvcc -dlink).


def _steps(cp) -> collections.Counter:
    """Steps a run printed, as `KIND` or `KIND arch` (per-arch steps)."""
    c = collections.Counter()
    for line in cp.stdout.splitlines():
        m = _STEP_RE.match(line.strip())
        if m:
            kind, rest = m.groups()
            arch = rest.split()[0] if kind in ("NVCC-PP", "NVCC-DEVICE", "NVCC-NVLINK") else ""
            c[f"{kind} {arch}".strip()] += 1
    return c


def _device_work(c) -> collections.Counter:
    """cicc + ptxas (one node per source and virtual arch)."""
    return collections.Counter({k: v for k, v in c.items() if k.startswith("NVCC-DEVICE")})


def _project(root) -> Project:
    need_tool("nvcc")
    need_tool("clang-19")      # the tool validates archs with clang's table
    return Project(root, {"SConstruct": SCONSTRUCT, "src/saxpy.cu": SAXPY, "src/scale.cu": SCALE})


def _inspect(path) -> list[tuple[str, str, str]]:
    return sorted((e["arch"], e["image_kind"], e["sha256"]) for e in inspect_json(path))


def _run(p) -> str:
    out = run_built(p.root / "saxpy")
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_full_build_runs_each_step_once_per_source_and_arch(tmp_path):
    p = _project(tmp_path / "p")
    c = _steps(p.scons("-j4", "archs=sm_80,sm_90"))
    assert c == {"NVCC-FE": 2, "NVCC-PP compute_80": 2, "NVCC-PP compute_90": 2,
                 "NVCC-DEVICE compute_80": 2, "NVCC-DEVICE compute_90": 2, "NVCC-FATBIN": 2, "NVCC-HOST": 2,
                 "LINK": 1}, c
    assert _run(p) in ("saxpy host 8\n", "saxpy gpu 8\n")
    assert p.up_to_date("archs=sm_80,sm_90")


def test_adding_an_arch_runs_only_its_device_work(tmp_path):
    p = _project(tmp_path / "p")
    p.scons("archs=sm_80,sm_90")
    c = _steps(p.scons("archs=sm_80,sm_90,sm_86"))
    # Neither source names __CUDA_ARCH_LIST__: nothing of the other archs reruns, not even their
    # preprocess, nor the front end.
    assert c == {"NVCC-PP compute_86": 2, "NVCC-DEVICE compute_86": 2, "NVCC-FATBIN": 2, "NVCC-HOST": 2,
                 "LINK": 1}, c
    assert _run(p) in ("saxpy host 8\n", "saxpy gpu 8\n")


# A kernel whose text depends on the arch list (as CUB's and Thrust's namespace names do).
SCALE_USING_LIST = """
__global__ void twice(float *x) { const int archs[] = {__CUDA_ARCH_LIST__}; x[threadIdx.x] *= archs[0] / 400; }
void scale_on_host(float *x, int n) { for (int i = 0; i < n; ++i) x[i] *= 2; }
"""


def test_a_source_naming_the_arch_list_reruns_its_archs_when_the_list_changes(tmp_path):
    p = _project(tmp_path / "p")
    p.write("src/scale.cu", SCALE_USING_LIST)
    p.scons("archs=sm_80,sm_90")
    assert (p.root / "src/scale.compute_80.archlist").read_text() == "800,900\n"
    assert (p.root / "src/saxpy.compute_80.archlist").read_text() == ""
    c = _steps(p.scons("archs=sm_80,sm_90,sm_86"))
    # scale.cu: every preprocess, and the device work its changed text needs; saxpy.cu: the new arch.
    assert _device_work(c) == {"NVCC-DEVICE compute_80": 1, "NVCC-DEVICE compute_90": 1,
                               "NVCC-DEVICE compute_86": 2}, c
    assert (c["NVCC-PP compute_80"], c["NVCC-FE"]) == (1, 1), c
    assert p.up_to_date("archs=sm_80,sm_90,sm_86")
    split = _inspect(p.root / "src/scale.o")
    p.scons("archs=sm_80,sm_90,sm_86", "split=0")
    assert _inspect(p.root / "src/scale.o") == split


def test_removing_an_arch_runs_no_device_work(tmp_path):
    p = _project(tmp_path / "p")
    p.scons("archs=sm_80,sm_90")
    c = _steps(p.scons("archs=sm_80"))
    assert _device_work(c) == {}, c
    assert (c["NVCC-FATBIN"], c["NVCC-HOST"]) == (2, 2), c
    assert [a for a, _, _ in _inspect(p.root / "src/saxpy.o")] == ["sm_80"]


def test_editing_a_source_reruns_its_nodes_only(tmp_path):
    p = _project(tmp_path / "p")
    p.scons("archs=sm_80,sm_90")
    p.write("src/scale.cu", SCALE.replace("*= 2; }\nvoid", "*= 3; }\nvoid"))
    c = _steps(p.scons("archs=sm_80,sm_90"))
    assert c == {"NVCC-FE": 1, "NVCC-PP compute_80": 1, "NVCC-PP compute_90": 1,
                 "NVCC-DEVICE compute_80": 1, "NVCC-DEVICE compute_90": 1, "NVCC-FATBIN": 1, "NVCC-HOST": 1,
                 "LINK": 1}, c


def test_host_only_flag_change_reruns_no_device_work(tmp_path):
    p = _project(tmp_path / "p")
    p.scons("archs=sm_80,sm_90")
    c = _steps(p.scons("archs=sm_80,sm_90", "cxx=-O1"))
    assert _device_work(c) == {} and c["NVCC-FATBIN"] == 0, c
    assert c["NVCC-HOST"] == 2, c
    # A device flag (nvcc's own) reruns the device work.
    c = _steps(p.scons("archs=sm_80,sm_90", "cxx=-O1", "nvccflags=-ftz=true"))
    assert c["NVCC-DEVICE compute_80"] == 2 and c["NVCC-DEVICE compute_90"] == 2, c


def test_a_steps_command_variable_wraps_it_and_rebuilds_it(tmp_path):
    """`OFFLOAD_NVCCDEVICECOM` is the device step's command (nvcc's own line by default): a
    wrapper set there runs around every device step, and the change rebuilds those steps only."""
    p = _project(tmp_path / "p")
    p.write("SConstruct", SCONSTRUCT.replace(
        "env.OffloadProgram(", "if ARGUMENTS.get('wrap'):\n"
        "    env['OFFLOAD_NVCCDEVICECOM'] = 'echo $_OFFLOAD_NVCC_VARCH >> wrapped.log && $_OFFLOAD_NVCCSTEPCOM'\n"
        "env.OffloadProgram("))
    p.scons("archs=sm_80,sm_90")
    c = _steps(p.scons("archs=sm_80,sm_90", "wrap=1"))
    assert c == {"NVCC-DEVICE compute_80": 2, "NVCC-DEVICE compute_90": 2}, c  # the same cubins: no more
    assert sorted((p.root / "wrapped.log").read_text().split()) == ["compute_80"] * 2 + ["compute_90"] * 2
    assert p.up_to_date("archs=sm_80,sm_90", "wrap=1")
    assert _run(p) in ("saxpy host 8\n", "saxpy gpu 8\n")

@pytest.mark.parametrize("ptx", ["", "1"])
def test_object_equals_one_nvcc_compile(tmp_path, ptx):
    """Same SASS and PTX per arch as one `nvcc -c` with the same `-gencode` list."""
    p = _project(tmp_path / "p")
    args = ["archs=sm_80,sm_90", f"ptx={ptx}"]
    p.scons(*args)
    split = {n: _inspect(p.root / f"src/{n}.o") for n in ("saxpy", "scale")}
    split_run = _run(p)
    c = _steps(p.scons(*args, "split=0"))
    assert c["NVCC"] == 2 and c["NVCC-HOST"] == 0, c
    one = {n: _inspect(p.root / f"src/{n}.o") for n in ("saxpy", "scale")}
    assert split == one
    kinds = {(a, k) for a, k, _ in split["saxpy"]}
    assert ("sm_80", "cubin") in kinds and ("sm_90", "cubin") in kinds
    assert (("sm_90", "ptx") in kinds) == bool(ptx)
    assert split_run == _run(p)


def test_parse_recognises_cuda_13_plan_and_refuses_other_shapes():
    nvcc = need_tool("nvcc")
    sys.path.insert(0, str(__import__("scons_helpers").REPO / "site_scons"))
    from site_tools.offload.graph.nvcc import plan as _nvcc
    cp = subprocess.run([nvcc, "--dryrun", "-c", "-o", _nvcc.PLAN_OUT, "-gencode", "arch=compute_80,code=sm_80",
                         "-gencode", "arch=compute_90,code=[sm_90,compute_90]", _nvcc.PLAN_SRC],
                        capture_output=True, text=True, timeout=60)
    plan = _nvcc.parse(cp.stdout + cp.stderr)
    kinds = [(s.kind, s.virtual, s.real) for s in plan.steps]
    assert kinds == [("host_pp", "", ""), ("fe", "", ""), ("pp", "compute_80", ""), ("cicc", "compute_80", ""),
                     ("ptxas", "compute_80", "sm_80"), ("pp", "compute_90", ""), ("cicc", "compute_90", ""),
                     ("ptxas", "compute_90", "sm_90"), ("fatbin", "", ""), ("host", "", "")]
    assert plan.host_stub_arch == "compute_90"
    with pytest.raises(_nvcc.PlanShape, match="unknown step 'nvlink'"):
        _nvcc.parse(cp.stdout + cp.stderr + '\n#$ nvlink -o x.o y.o\n')
    with pytest.raises(_nvcc.PlanShape, match="no earlier step wrote"):
        _nvcc.parse("#$ ptxas -arch=sm_80 /tmp/tmpxft_0000_00000000-9_offload_nvcc_plan_src.ptx "
                    "-o /tmp/tmpxft_0000_00000000-10_offload_nvcc_plan_src.cubin\n")


def test_unrecognised_plan_falls_back_with_one_note(tmp_path):
    """An nvcc whose `--dryrun` plan has a step the parser does not know: one note, and one nvcc
    compile per source as before."""
    real = need_tool("nvcc")
    p = _project(tmp_path / "p")
    fake = tmp_path / "nvcc"
    fake.write_text("#!/bin/sh\n"
                    'for a in "$@"; do [ "$a" = --dryrun ] && { echo "#$ mystery-step --frobnicate" >&2; exit 0; }; done\n'
                    f'exec {real} "$@"\n')
    fake.chmod(0o755)
    p.write("SConstruct", SCONSTRUCT.replace("env.OffloadProgram", f"env['OFFLOAD_NVCC'] = '{fake}'\nenv.OffloadProgram"))
    cp = p.scons("archs=sm_80")
    assert cp.stderr.count("offload: note: nvcc's plan is not split per arch (an unknown step 'mystery-step')") == 1
    c = _steps(cp)
    assert c["NVCC"] == 2 and c["NVCC-HOST"] == 0, c
    assert _run(p) in ("saxpy host 8\n", "saxpy gpu 8\n")


def test_compile_commands_has_one_clang_cuda_entry_per_source(tmp_path):
    p = _project(tmp_path / "p")
    p.write("SConstruct", SCONSTRUCT.replace("tools=['default', 'offload']", "tools=['default', 'offload', 'compilation_db']")
            + "env.CompilationDatabase()\n")
    p.scons("archs=sm_80,sm_90", "compile_commands.json",
            "nvccflags=-Xcompiler=-Wall,-Wextra --expt-relaxed-constexpr -rdc=true -DFOO=1 "
            "-gencode arch=compute_75,code=sm_75")
    entries = json.loads((p.root / "compile_commands.json").read_text())
    assert sorted(e["file"] for e in entries) == ["src/saxpy.cu", "src/scale.cu"]
    cmd = next(e["command"] for e in entries if e["file"] == "src/saxpy.cu").split()
    assert cmd[:3] == ["clang++", "-x", "cuda"] and cmd[3].startswith("--cuda-path=/")
    assert cmd[4:6] == ["--cuda-gpu-arch=sm_80", "--cuda-gpu-arch=sm_90"]
    assert {"-Wall", "-Wextra", "-DFOO=1", "-O2"} <= set(cmd)
    assert not [f for f in cmd if f.startswith(("-gencode", "arch=", "-rdc", "--expt", "-Xcompiler"))], cmd


def test_ptx_only_entry_embeds_ptx_and_no_sass(tmp_path):
    """`compute_90` in OFFLOAD_ARCHS: `-gencode arch=compute_90,code=compute_90`, PTX for JIT and no
    SASS for that arch, the same as one `nvcc -c`; one device node (cicc, no ptxas) for it."""
    p = _project(tmp_path / "p")
    c = _steps(p.scons("archs=sm_80,compute_90"))
    assert _device_work(c) == {"NVCC-DEVICE compute_80": 2, "NVCC-DEVICE compute_90": 2}, c
    assert not list(p.root.glob("src/*sm_90*.cubin"))
    split = _inspect(p.root / "src/saxpy.o")
    assert {(a, k) for a, k, _ in split} == {("sm_80", "cubin"), ("sm_90", "ptx")}, split
    assert _run(p) in ("saxpy host 8\n", "saxpy gpu 8\n")
    p.scons("archs=sm_80,compute_90", "split=0")
    assert _inspect(p.root / "src/saxpy.o") == split


def test_ptx_only_entry_is_refused_for_clang(tmp_path):
    need_tool("clang-19")
    p = Project(tmp_path / "p")
    p.write("SConstruct", SCONSTRUCT.replace("OFFLOAD_CUDA_COMPILER='nvcc'", "OFFLOAD_CUDA_COMPILER='clang'"))
    p.write("src/saxpy.cu", SAXPY)
    p.write("src/scale.cu", SCALE)
    cp = p.scons("archs=sm_80,compute_90", check=False)
    assert cp.returncode != 0
    assert "'compute_90' (PTX only) is for CUDA built with nvcc" in cp.stdout + cp.stderr


def test_arch_list_use_follows_the_files_the_preprocess_read(tmp_path):
    """The record of a preprocess: the list it used when a file named in its line markers, or
    another option, names __CUDA_ARCH_LIST__; otherwise none."""
    sys.path.insert(0, str(__import__("scons_helpers").REPO / "site_scons"))
    from site_tools.offload.graph.nvcc import arch_list as _nvcc
    plain, naming = tmp_path / "plain.h", tmp_path / "ns.h"
    plain.write_text("int f(void);\n")
    naming.write_text("#define NS_NAME SM_ ## __CUDA_ARCH_LIST__\n")
    ii = tmp_path / "x.ii"
    ii.write_text(f'# 1 "{plain}"\n# 1 "<built-in>"\nint f(void);\n')
    cmd = "gcc -D__CUDA_ARCH_LIST__=800,900 -E x.cu"
    assert not _nvcc._arch_list_use(str(ii), cmd)
    assert _nvcc._arch_list_use(str(ii), cmd + " -DMY=__CUDA_ARCH_LIST__")
    ii.write_text(f'# 1 "{plain}"\n# 3 "{naming}" 1\nint f(void);\n')
    assert _nvcc._arch_list_use(str(ii), cmd)
    ii.write_text(f'# 1 "{tmp_path / "gone.h"}"\n')
    assert _nvcc._arch_list_use(str(ii), cmd)          # a file it cannot read: assume it does


def test_sources_in_a_variant_directory_without_copies(tmp_path):
    """A SConscript in a subdirectory built into a variant directory with `duplicate=0` (as
    example projects and most SCons builds do): nvcc's steps read the source from the source
    tree, by a path that holds where SCons runs commands (the top directory), and write nothing
    beside the sources; an `-rdc=true` program's device link too."""
    need_tool("nvcc")
    need_tool("clang-19")
    sub = SCONSTRUCT.replace("import os\n", "import os\nImport('rdc')\n").replace(
        "env.OffloadProgram(", "env.Append(OFFLOAD_NVCCFLAGS=['-rdc=true'] if rdc else [])\nenv.OffloadProgram(")
    p = Project(tmp_path / "p", {
        "SConstruct": "for rdc in (0, 1):\n"
                      "    SConscript('proj/SConscript', variant_dir=f'out{rdc}/proj', duplicate=False, "
                      "exports='rdc')\n",
        "proj/SConscript": sub, "proj/src/saxpy.cu": SAXPY, "proj/src/scale.cu": SCALE})
    c = _steps(p.scons("-j2", "archs=sm_80,sm_90"))
    assert c["NVCC-FE"] == 4 and c["NVCC-HOST"] == 4 and c["NVCC-DLINK"] == 1 and c["LINK"] == 2, c
    assert sorted(f.name for f in (p.root / "proj" / "src").iterdir()) == ["saxpy.cu", "scale.cu"]
    for rdc in (0, 1):
        out = run_built(p.root / f"out{rdc}" / "proj" / "saxpy")
        assert out.returncode == 0 and out.stdout in ("saxpy host 8\n", "saxpy gpu 8\n"), out
    assert p.up_to_date("archs=sm_80,sm_90")


RACE_SCONSTRUCT = """
import os, sys
sys.path.insert(0, {site_tools!r})
from offload.scons.nodes import decide_by_timestamp_then_content
env = Environment(tools=[])
stamp = int(ARGUMENTS['stamp'])
def write(target, source, env):
    with open(str(target[0]), 'w') as f:
        f.write(env['MIDTEXT'])
    os.utime(str(target[0]), (stamp, stamp))
mid = env.Command(env.File('mid.ii'), 'src.txt', Action(write, varlist=['MIDTEXT']), MIDTEXT=ARGUMENTS['text'])
decide_by_timestamp_then_content(mid)
env.Command('out.txt', mid, Copy('$TARGET', '$SOURCE'))
"""


def test_intermediate_rewritten_within_its_recorded_second_is_compared(tmp_path):
    """The tool's files (nvcc's intermediates, OpenMP's host IR and objects) are judged by
    timestamp, then content; SCons's timestamps are whole seconds. A timestamp is not trusted for
    a file this run rewrote (a quick second run, or a file system whose clock lags the machine's),
    nor one recorded in the second the run began or later: the step reading the file re-runs when
    its bytes changed. A file this run did not rewrite, with the timestamp recorded before the run
    began, is judged by its timestamp (what saves a null build from reading every such file)."""
    p = Project(tmp_path / "race", {"SConstruct": RACE_SCONSTRUCT.format(site_tools=str(SITE_TOOLS)),
                                    "src.txt": "x\n"})
    later = str(int(time.time()) + 1000)  # every run below begins before this second
    p.scons(f"stamp={later}", "text=A")
    p.scons(f"stamp={later}", "text=B")  # rewritten, the same timestamp
    assert (p.root / "out.txt").read_text() == "B"
    past = str(int(time.time()) - 1000)
    p.scons(f"stamp={past}", "text=C")
    assert (p.root / "out.txt").read_text() == "C"
    p.scons(f"stamp={past}", "text=D")  # rewritten by this run with the recorded (past) timestamp
    assert (p.root / "mid.ii").read_text() == "D" and (p.root / "out.txt").read_text() == "D"
    # Changed behind SCons's back, size and timestamp kept: not rewritten by this run, so the
    # timestamp is trusted and the file is not read.
    mid = p.root / "mid.ii"
    mid.write_text("E")
    os.utime(mid, (int(past), int(past)))
    p.scons(f"stamp={past}", "text=D")
    assert (p.root / "out.txt").read_text() == "D"
