"""OpenMP host IR made once per source (`<stem>.host.bc`) and read by every device compile of it:
the driver's plan read from `-###`, objects equal to the driver's, the graph's incremental
behaviour, and the fallback to the driver command."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from conftest import need_tool, run
from scons_helpers import SITE_TOOLS, Project, actions, counts, run_built
from scons_samples import KERN_CPP, MAIN_C

pytestmark = pytest.mark.slow

sys.path.insert(0, str(SITE_TOOLS))
from offload.graph import host_ir as _host_ir  # noqa: E402

SCONSTRUCT = """
env = Environment(tools=['default', 'offload'],
                  OFFLOAD_ARCHS=ARGUMENTS.get('archs', 'sm_75,gfx90a').split(','),
                  OFFLOAD_CLANG=ARGUMENTS.get('clang', 'clang-19'),
                  OFFLOAD_LAUNCHER=ARGUMENTS.get('launcher', ''),
                  OFFLOAD_HOSTFLAGS=ARGUMENTS.get('hostflags', '-O1').split())
env.OffloadProgram('app', ['src/main.c', 'src/kern.cpp'])
"""

AMD_LIBS = "--rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"


@pytest.fixture
def proj(tmp_path):
    need_tool("clang-19")
    return Project(tmp_path / "proj", {"SConstruct": SCONSTRUCT, "src/main.c": MAIN_C, "src/kern.cpp": KERN_CPP})


@pytest.mark.parametrize("clang", ["clang-19", "clang-22"])
@pytest.mark.parametrize("arch", ["sm_80", "gfx90a"])
def test_plan_of_the_driver(tmp_path, clang, arch):
    """The driver's device-only plan is a host-IR job then the device job (and ptxas for NVIDIA);
    the plan keeps the per-node values as stand-ins, and a plan of another shape is refused."""
    need_tool(clang)
    src = tmp_path / "k.cpp"
    src.write_text(KERN_CPP)
    out = str(tmp_path / f"k.{arch}.o")
    argv = [clang, "-fopenmp", "-DOFFLOAD_TOOL_SOURCE_ID=ab_cd", "--offload-device-only", f"--offload-arch={arch}",
            "-nogpulib", "-c", "-o", out, str(src)]
    text = subprocess.run(argv + ["-###"], capture_output=True, text=True).stderr
    plan = _host_ir.parse(text, str(src), out, "ab_cd")
    assert len(plan.jobs) == (2 if arch.startswith("sm_") else 1)
    device = plan.jobs[0]
    assert device[1] == "-cc1" and "-fopenmp-is-target-device" in device
    assert device[device.index("-fopenmp-host-ir-file-path") + 1] == _host_ir._HOSTIR
    assert device[device.index("-main-file-name") + 1] == _host_ir._NAME
    assert "OFFLOAD_TOOL_SOURCE_ID=" + _host_ir._ID in device
    assert plan.temp_suffix == (".s" if arch.startswith("sm_") else "")
    # -save-temps adds jobs: not a shape the tool knows.
    text = subprocess.run(argv + ["-save-temps", "-###"], capture_output=True, text=True, cwd=tmp_path).stderr
    with pytest.raises(_host_ir._Shape):
        _host_ir.parse(text, str(src), out, "ab_cd")


def _entry_names(path) -> set[str]:
    out = run([need_tool("llvm-readelf-19"), "-sW", path]).stdout.decode()
    return set(re.findall(r"(__omp_offloading_[0-9a-f]+_[0-9a-f]+_\w+?_l\d+)\b", out))


def _driver(args, cwd) -> None:
    cp = subprocess.run(["clang-19", *args], cwd=cwd, capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr


def test_objects_equal_the_drivers_and_the_program_runs(proj):
    """Host objects from the host IR are the bytes of the driver's host-only compile; AMD device
    bitcode read with the host IR is the bytes of the driver's device-only compile (NVIDIA's
    ptxas output is not reproducible, so there: the same offload entries); the program runs."""
    cp = proj.scons()
    c = counts(cp)
    assert (c["HOSTIR"], c["HOST"], c["DEVICE"]) == (2, 2, 4), cp.stdout
    assert "note:" not in cp.stderr, cp.stderr
    ids = ["-include", str(SITE_TOOLS / "offload" / "offload_ids.h")]
    for src, stem in (("src/main.c", "main"), ("src/kern.cpp", "kern")):
        st = (proj.root / src).stat()
        sid = [f"-DOFFLOAD_TOOL_SOURCE_ID={st.st_dev:x}_{st.st_ino:x}"] + ids
        _driver(["-fopenmp", "-fopenmp-targets=nvptx64-nvidia-cuda,amdgcn-amd-amdhsa", *sid, "--offload-host-only",
                 "-c", "-o", f"drv.{stem}.host.o", "-O1", src], proj.root)
        assert (proj.root / f"drv.{stem}.host.o").read_bytes() == (proj.root / f"src/{stem}.host.o").read_bytes()
        _driver(["-fopenmp", *sid, "--offload-device-only", "--offload-arch=gfx90a", AMD_LIBS, "-c",
                 "-o", f"drv.{stem}.gfx90a.bc", src], proj.root)
        assert (proj.root / f"drv.{stem}.gfx90a.bc").read_bytes() == (proj.root / f"src/{stem}.gfx90a.bc").read_bytes()
        host = _entry_names(proj.root / f"src/{stem}.host.o")
        assert host and _entry_names(proj.root / f"src/{stem}.sm_75.o") == host
    out = run_built(proj.root / "app")
    assert out.returncode == 0 and out.stdout == "main 1.5 kern 4950\n", out.stderr
    from conftest import run_cli
    cp = run_cli("tool", "verify", str(proj.root / "app"), "--require", "sm_75,gfx90a")
    assert cp.returncode == 0, cp.stderr


def test_host_flags_reach_device_compiles_through_the_host_ir(proj):
    """A host flag that leaves the host IR as it was reruns the host IR and the host object (whose
    command has the host flags) but no device compile, and the unchanged objects link nothing;
    one that changes the IR reruns every device compile of the source too (they read it); adding
    an arch runs one device compile per source and no host work."""
    proj.scons()
    cp = proj.scons("hostflags=-O1 -Wall")
    c = counts(cp)
    assert (c["HOSTIR"], c["HOST"], c["DEVICE"], c["LINK"]) == (2, 2, 0, 0), cp.stdout
    cp = proj.scons("hostflags=-O0 -Wall")
    c = counts(cp)
    assert (c["HOSTIR"], c["HOST"], c["DEVICE"]) == (2, 2, 4), cp.stdout
    cp = proj.scons("hostflags=-O0 -Wall", "archs=sm_75,gfx90a,sm_80")
    c = counts(cp)
    assert (c["HOSTIR"], c["HOST"]) == (0, 0) and \
        sorted(r for k, r in actions(cp) if k == "DEVICE") == ["sm_80 src/kern.cpp", "sm_80 src/main.c"], cp.stdout
    assert proj.up_to_date("hostflags=-O0 -Wall", "archs=sm_75,gfx90a,sm_80")


def test_a_launcher_keeps_one_driver_compile_per_node(proj):
    """With a compiler launcher (here `env`, which runs the rest; ccache and sccache cache whole
    driver compiles, not a compile of IR), there is no host-IR node: the host and device
    compiles are the driver's own, as a cache wants them, and nothing needs a note."""
    cp = proj.scons("launcher=env")
    c = counts(cp)
    assert (c["HOSTIR"], c["HOST"], c["DEVICE"]) == (0, 2, 4), cp.stdout
    assert not [ln for ln in cp.stderr.splitlines() if "note:" in ln], cp.stderr
    assert not list(proj.root.glob("**/*.host.bc"))
    out = run_built(proj.root / "app")
    assert out.stdout == "main 1.5 kern 4950\n"
