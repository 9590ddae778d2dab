"""Sources outside the SConstruct's folder (`../other/kern.cpp`), built as docs/scons-tool.md
("Sources outside the project's folder") says: every object the tool makes lands in the build
folder, none beside the other folder's sources, the program runs and verifies, and `scons -c`
removes what was built. Through a `Repository`, the source is the repository's file for
everything the tool reads from it (its identity in OpenMP entry names, its text, the path in the
driver's plan), so the host IR is made once and a null build stays null."""

from __future__ import annotations

import os

import pytest

from conftest import need_tool, run_cli
from scons_helpers import Project, actions, counts, run_built
from scons_samples import KERN_CPP, MAIN_C

pytestmark = pytest.mark.slow

HEAD = """
env = Environment(tools=['default', 'offload'], OFFLOAD_CLANG='clang-19',
                  OFFLOAD_ARCHS=ARGUMENTS.get('archs', 'sm_80,gfx90a').split(','))
"""

# The SConstruct of docs/scons-tool.md: one variant folder for this project's sources, one for
# the other folder's.
VARIANT_DIRS = HEAD + """
VariantDir('build', '.', duplicate=0)
VariantDir('build/other', '../other', duplicate=0)
env.OffloadProgram('build/app', ['build/main.c', 'build/other/kern.cpp'])
"""

# The same through a SConscript read in the variant folder of the other folder.
SCONSCRIPT = HEAD + """
VariantDir('build', '.', duplicate=0)
kern = SConscript('other.scons', variant_dir='build/other', src_dir='../other', duplicate=0, exports='env')
env.OffloadProgram('build/app', ['build/main.c', kern])
"""
OTHER_SCONS = """
Import('env')
objs = env.OffloadObject('kern.cpp')
Return('objs')
"""

# The other folder as a repository: its files stand where this project's would.
REPOSITORY = HEAD + """
Repository('../other')
VariantDir('build', '.', duplicate=0)
env.OffloadProgram('build/app', ['build/main.c', 'build/kern.cpp'])
"""

KEPT = {".sconsign.dblite", ".sconsign.offload-probes.json"}


def _files(root) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs}


def _setup(tmp_path, sconstruct: str) -> tuple[Project, Project]:
    need_tool("clang-19")
    other = Project(tmp_path / "other", {"kern.cpp": KERN_CPP})
    proj = Project(tmp_path / "proj", {"SConstruct": sconstruct, "main.c": MAIN_C, "other.scons": OTHER_SCONS})
    return proj, other


def _runs_and_verifies(proj: Project) -> None:
    run = run_built(proj.root / "build/app")
    assert run.returncode == 0 and run.stdout.strip() == "main 1.5 kern 4950", run.stdout + run.stderr
    v = run_cli("tool", "verify", "--require=sm_80,gfx90a", proj.root / "build/app")
    assert v.returncode == 0, v.stdout + v.stderr


@pytest.mark.parametrize("shape", ["variant_dirs", "sconscript"])
def test_objects_of_another_folder_land_in_the_build_folder(tmp_path, shape):
    proj, other = _setup(tmp_path, {"variant_dirs": VARIANT_DIRS, "sconscript": SCONSCRIPT}[shape])
    sources = _files(proj.root)
    proj.scons()
    assert _files(other.root) == {"kern.cpp"}  # nothing beside the other folder's source
    made = _files(proj.root) - sources
    assert {f for f in made if not f.startswith("build/")} == KEPT
    assert made >= {f"build/other/kern.{x}" for x in ("host.bc", "host.o", "sm_80.o", "gfx90a.bc")} \
        | {f"build/main.{x}" for x in ("host.bc", "host.o", "sm_80.o", "gfx90a.bc")} \
        | {"build/app", "build/app.gfx90a.devlink.o"}
    _runs_and_verifies(proj)
    assert proj.up_to_date()
    proj.scons("-c")
    assert _files(proj.root) - sources == KEPT and _files(other.root) == {"kern.cpp"}


def test_sources_of_a_repository(tmp_path):
    proj, other = _setup(tmp_path, REPOSITORY)
    sources = _files(proj.root)
    built = proj.scons()
    # The repository's file is what the tool reads: its text holds a target construct, and the
    # driver's plan names it, so the device compiles read the host IR (no fallback note).
    assert "note" not in built.stderr, built.stderr
    assert counts(built)["HOSTIR"] == 2 and counts(built)["DEVICE"] == 4
    assert _files(other.root) == {"kern.cpp"}
    assert {f for f in _files(proj.root) - sources if not f.startswith("build/")} == KEPT
    _runs_and_verifies(proj)
    assert proj.up_to_date()
    # The repository's file re-created (same bytes, a new inode, as `git checkout` does): every
    # compile of it runs again, together, so host and device entry names agree when an arch is
    # added afterwards.
    other.recreate("kern.cpp")
    again = proj.scons()
    assert sorted(r for k, r in actions(again) if k in ("HOSTIR", "DEVICE")) == \
        sorted(["gfx90a " + str(other.root / "kern.cpp"), "sm_80 " + str(other.root / "kern.cpp"),
                str(other.root / "kern.cpp")])
    added = proj.scons("archs=sm_80,gfx90a,sm_90")
    assert counts(added)["DEVICE"] == 2 and counts(added)["HOSTIR"] == 0
    _runs_and_verifies(proj)
    proj.scons("-c", "archs=sm_80,gfx90a,sm_90")
    assert _files(proj.root) - sources == KEPT
