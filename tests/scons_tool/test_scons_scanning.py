"""The `#include` scan of the tool's compiles (`scons.actions.c_scanner`): each file is scanned
once per search path, not once per arch's environment, and a header still reaches every compile
that reads it."""

from __future__ import annotations

import pytest

from conftest import need_tool
from scons_helpers import Project, counts

# Counts the files SCons's classic C scanner reads (`Classic.scan`), printed when SCons exits.
COUNTING = """
import atexit, sys, SCons.Scanner
_scans = []
_scan = SCons.Scanner.Classic.scan
def _counted(self, node, path=()):
    _scans.append(str(node))
    return _scan(self, node, path)
SCons.Scanner.Classic.scan = _counted
atexit.register(lambda: print('scans', len(_scans), len(set(_scans))))
"""

SCONSTRUCT = COUNTING + """
env = Environment(tools=['default', 'offload'], OFFLOAD_CLANG='clang-19', CPPPATH=['inc'],
                  OFFLOAD_ARCHS=ARGUMENTS.get('archs', 'sm_80').split(','))
env.OffloadProgram('app', ['src/main.c', 'src/kern.c'])
"""

FILES = {
    "src/main.c": '#include "common.h"\ndouble kern(double *x, int n);\n'
                  'int main(void) { double x[4] = {1, 2, 3, 4}; return kern(x, 4) == 20.0 * SCALE ? 0 : 1; }\n',
    "src/kern.c": '#include "common.h"\n#include "kern.h"\n'
                  'double kern(double *x, int n) {\n  double s = 0;\n'
                  '#pragma omp target teams distribute parallel for reduction(+:s) map(to: x[0:n])\n'
                  '  for (int i = 0; i < n; i++) s += x[i] * SCALE * FACTOR;\n  return s;\n}\n',
    "inc/common.h": '#define SCALE 2.0\n#include "more.h"\n',
    "inc/more.h": "/* nothing */\n",
    "inc/kern.h": "#define FACTOR 2.0\n",
}


def _scans(cp) -> tuple[int, int]:
    line = next(ln for ln in cp.stdout.splitlines() if ln.startswith("scans "))
    return int(line.split()[1]), int(line.split()[2])


def test_scans_do_not_grow_with_the_archs(tmp_path):
    """One arch or four: the same scans. Each device compile has an environment of its own (its
    arch's overrides), and SCons memoises a file's includes per environment: before, every file
    was scanned once more per arch."""
    need_tool("clang-19")
    p = Project(tmp_path / "p", {"SConstruct": SCONSTRUCT, **FILES})
    one = _scans(p.scons("-n", "archs=sm_80"))
    four = _scans(p.scons("-n", "archs=sm_80,sm_90,gfx90a,gfx1030"))
    assert four == one, (one, four)
    total, files = four
    assert files == 5, four  # 2 sources, 3 headers
    # SCons clears a source's memo once when it visits the source itself: at most twice each.
    assert total <= 2 * files, four


@pytest.mark.slow
def test_a_header_edit_rebuilds_every_arch(tmp_path):
    """A header only the kernel's file includes, edited: the kernel's host IR and every arch's
    device compile run again (they share one scan of it), the other source's compiles do not."""
    need_tool("clang-19")
    p = Project(tmp_path / "p", {"SConstruct": SCONSTRUCT, **FILES})
    archs = "archs=sm_80,gfx90a"
    p.scons(archs)
    p.write("inc/kern.h", "#define FACTOR 3.0\n")
    c = counts(p.scons(archs))
    assert c["HOSTIR"] == 1 and c["DEVICE"] == 2, c
    p.write("inc/more.h", "/* something */\n")  # included by both sources, through common.h
    c = counts(p.scons(archs))
    assert c["HOSTIR"] == 2 and c["DEVICE"] == 4, c
    assert not counts(p.scons(archs)), "a null build after the edits"
