"""The link builders in the shapes real projects give them, each built for real (the programs run,
on the host without a GPU):

- an `OffloadStaticLibrary` edited after its consumers were built: a plain `env.Program`, an
  `OffloadProgram` and a program of another SConscript relink and print the new value;
- libraries and programs named with a folder (`shlib/bar` -> `shlib/libbar.so`, as SCons names
  them), linked by `LIBS=['bar'], LIBPATH=['shlib']`;
- the split AMD device link (`DEVICELINK`) gives the image clang-linker-wrapper gives in the final
  link, byte for byte, also for code where a second code generation from the wrapper's saved
  module gave another instruction order (`-ffast-math`, `-O2`, `-O3`).

After each build, re-created files (same bytes, new inode) that are not OpenMP sources leave the
build up to date (an OpenMP source's inode is in its compiles' signatures: see the docs' "Host/device
identity"), and `scons -c` leaves no file the tool wrote."""

from __future__ import annotations

import os

import pytest

from conftest import need_tool
from scons_helpers import Project, counts, run_built

pytestmark = pytest.mark.slow


def _files(root) -> set[str]:
    out = set()
    for d, _, names in os.walk(root):
        for n in names:
            rel = os.path.relpath(os.path.join(d, n), root)
            if not rel.startswith(".sconsign"):
                out.add(rel)
    return out


def _output(program, *library_dirs) -> str:
    out = run_built(program, *library_dirs)
    assert out.returncode == 0, (program, out.stdout + out.stderr)
    return out.stdout


def _images(path) -> list[tuple[str, bytes]]:
    from offload_tool.ops.extract import find_offload_images
    data = path.read_bytes()
    return [(f.image.strings["arch"], bytes(f.image.image)) for f in find_offload_images(data, str(path))]


def _clean_leaves_sources(p: Project, sources: set[str], *args) -> None:
    p.scons("-c", *args)
    assert _files(p.root) == sources, sorted(_files(p.root) - sources)


# --------------------------------------------------------------------------------------------
# 1. An edited OffloadStaticLibrary reaches every consumer

LIB_SCONSTRUCT = """
env = Environment(tools=['default', 'offload'], OFFLOAD_ARCHS=['sm_80', 'gfx90a'], OFFLOAD_CLANG='clang-19')
env.OffloadStaticLibrary('lib/foo', ['lib/k.cpp'])
env.Program('bin/plain', ['app/main.cpp'], LIBS=['foo'], LIBPATH=['lib'])
env.OffloadProgram('bin/off', ['app/off.cpp'], LIBS=['foo'], LIBPATH=['lib'])
SConscript('other/SConscript', exports='env')
"""

OTHER_SCONSCRIPT = """
Import('env')
env.Program('plain2', ['main.cpp'], LIBS=['foo'], LIBPATH=['#lib'])
"""

LIB_K = """
extern "C" int k(void) {
  int d = 0;
#pragma omp target map(tofrom: d)
  d = 7;
  return 100 + d;
}
"""

CONSUMER = """
#include <cstdio>
extern "C" int k(void);
int main() { std::printf("k %d\\n", k()); }
"""

OFF_CONSUMER = """
#include <cstdio>
extern "C" int k(void);
int main() {
  int e = 0;
#pragma omp target map(tofrom: e)
  e = 1;
  std::printf("k %d e %d\\n", k(), e);
}
"""


def test_edited_static_library_relinks_its_consumers(tmp_path):
    need_tool("clang-19")
    files = {"SConstruct": LIB_SCONSTRUCT, "other/SConscript": OTHER_SCONSCRIPT, "lib/k.cpp": LIB_K,
             "app/main.cpp": CONSUMER, "app/off.cpp": OFF_CONSUMER, "other/main.cpp": CONSUMER}
    p = Project(tmp_path / "p", files)
    p.scons()
    programs = {"bin/plain": "k 107\n", "bin/off": "k 107 e 1\n", "other/plain2": "k 107\n"}
    for prog, expected in programs.items():
        assert _output(p.root / prog) == expected, prog
    assert p.up_to_date()
    before = {prog: (p.root / prog).read_bytes() for prog in programs}
    # The OffloadProgram holds its own device images and, registered apart, the library's.
    lib_images = _images(p.root / "lib/foo-offload.o")
    assert sorted(a for a, _ in lib_images) == ["gfx90a", "sm_80"]
    assert all(i in _images(p.root / "bin/off") for i in lib_images)

    # The constant changes on the host and inside the target region.
    p.write("lib/k.cpp", LIB_K.replace("d = 7", "d = 8").replace("100 +", "200 +"))
    cp = p.scons()
    assert counts(cp)["LDSCRIPT"] == 1
    for prog, expected in programs.items():
        assert _output(p.root / prog) == expected.replace("107", "208"), prog
        assert (p.root / prog).read_bytes() != before[prog], prog
    # The library's new device images are in the OffloadProgram, and none of the old ones.
    off_images, new_lib_images = _images(p.root / "bin/off"), _images(p.root / "lib/foo-offload.o")
    assert all(i in off_images for i in new_lib_images)
    assert not any(i in off_images for i in lib_images), "device code of the library not relinked"
    assert p.up_to_date()

    # Re-created files that are not OpenMP sources: nothing to do. A re-created OpenMP source
    # rebuilds its compiles (by design), and then the build is up to date again.
    for f in ("SConstruct", "other/SConscript", "app/main.cpp", "other/main.cpp"):
        p.recreate(f)
    assert p.up_to_date()
    p.recreate("lib/k.cpp")
    p.scons()
    assert p.up_to_date()
    for prog, expected in programs.items():
        assert _output(p.root / prog) == expected.replace("107", "208"), prog
    _clean_leaves_sources(p, set(files))


# --------------------------------------------------------------------------------------------
# 2. Libraries and programs named with a folder

SHAPES_SCONSTRUCT = """
env = Environment(tools=['default', 'offload'], OFFLOAD_ARCHS=['gfx90a'], OFFLOAD_CLANG='clang-19')
use = env.Object('app/use.cpp')
env.OffloadSharedLibrary('shlib/bar', ['src/k.cpp'])
env.Program('bin/usebar', use, LIBS=['bar'], LIBPATH=['shlib'])
env.OffloadStaticLibrary('stlib/qux', ['src/k.cpp'])
env.Program('bin/usequx', use, LIBS=['qux'], LIBPATH=['stlib'])
env.OffloadArchive('arch/baz', ['src/k.cpp'])
env.OffloadProgram('bin/usebaz', ['app/use_off.cpp'], LIBS=['baz'], LIBPATH=['arch'], PROGPREFIX='my')
"""


def test_libraries_and_programs_in_folders(tmp_path):
    """The prefix goes on the file name, as SCons's SharedLibrary, Library and Program put it:
    `shlib/libbar.so`, `stlib/libqux.a` (+ `libqux-offload.a`, `qux-offload.o`), `arch/libbaz.a`,
    `bin/myusebaz`; each is found by its consumer's `LIBS`/`LIBPATH` and the programs run."""
    need_tool("clang-19")
    files = {"SConstruct": SHAPES_SCONSTRUCT, "src/k.cpp": LIB_K, "app/use.cpp": CONSUMER,
             "app/use_off.cpp": OFF_CONSUMER}
    p = Project(tmp_path / "p", files)
    cp = p.scons()
    made = _files(p.root)
    for f in ("shlib/libbar.so", "stlib/libqux.a", "stlib/libqux-offload.a", "stlib/qux-offload.o",
              "arch/libbaz.a", "bin/usebar", "bin/usequx", "bin/myusebaz"):
        assert f in made, (f, sorted(made))
    assert {f.split("/")[0] for f in made} == {"SConstruct", "src", "app", "shlib", "stlib", "arch", "bin"}, sorted(made)
    assert "DEVICELINK gfx90a shlib/libbar.so.gfx90a.devlink.o" in cp.stdout
    assert _output(p.root / "bin/usebar", str(p.root / "shlib")) == "k 107\n"
    assert _output(p.root / "bin/usequx") == "k 107\n"
    assert _output(p.root / "bin/myusebaz") == "k 107 e 1\n"
    assert [a for a, _ in _images(p.root / "arch/libbaz.a")] == ["gfx90a"]
    assert p.up_to_date()
    for f in ("SConstruct", "app/use.cpp"):
        p.recreate(f)
    assert p.up_to_date()
    _clean_leaves_sources(p, set(files))


# --------------------------------------------------------------------------------------------
# 3. The split AMD device link is the wrapper's, byte for byte

DEVLINK_SCONSTRUCT = """
env = Environment(tools=['default', 'offload'], OFFLOAD_ARCHS=['sm_80', 'gfx90a'], OFFLOAD_CLANG='clang-19',
                  CCFLAGS=ARGUMENTS.get('ccflags', '').split(), LINKFLAGS=ARGUMENTS.get('linkflags', '').split())
env.OffloadProgram('app', ['src/k.cpp', 'src/main.cpp'])
env.OffloadProgram('app_std', ['src/k.cpp', 'src/main.cpp'], OFFLOAD_SPLIT_DEVICE_LINK=False)
"""

# A kernel on which llc, compiling the wrapper's saved module again, scheduled the instructions of
# `.text` in another order than the wrapper's own code generator (at -O2, -O3, -ffast-math).
DEVLINK_K = """
#include <math.h>
extern "C" double kern(int n, int m, const double *a, double *b, double t) {
  double s = 0;
#pragma omp target teams distribute parallel for map(to: a[0:m]) map(tofrom: b[0:n]) reduction(+:s)
  for (int i = 0; i < n; i++) {
    double v1 = b[i] * 2.0, v2 = b[i] * 3.0;
    for (int j = 0; j < m; j++) {
      v2 += s - (v1 < s + t ? a[j] : t + 2.2) / ((t < v1 ? t : 2.9) - v1);
      v2 -= exp(b[i] * (v2 < v1 ? v1 : a[j]));
      v2 -= sin(v2 - s < 1 - log(v1) ? b[i] : v2);
    }
    b[i] = 2 * v1 + v2;
    s += b[i] * t;
  }
  return s;
}
"""

DEVLINK_MAIN = """
#include <cstdio>
extern "C" double kern(int n, int m, const double *a, double *b, double t);
int main() {
  double a[4] = {1, 2, 3, 4}, b[2] = {1, 2};
  std::printf("%.6g\\n", kern(2, 4, a, b, 0.0));
}
"""


@pytest.mark.parametrize("ccflags, linkflags", [("-O2 -ffast-math", ""), ("-O3 -ffast-math", "-O3"), ("-O2", "")])
def test_split_device_link_is_the_wrappers_own(tmp_path, ccflags, linkflags):
    need_tool("clang-19")
    files = {"SConstruct": DEVLINK_SCONSTRUCT, "src/k.cpp": DEVLINK_K, "src/main.cpp": DEVLINK_MAIN}
    p = Project(tmp_path / "p", files)
    args = (f"ccflags={ccflags}", f"linkflags={linkflags}")
    cp = p.scons(*args)
    assert counts(cp)["DEVICELINK"] == 1, cp.stdout
    split, std = _images(p.root / "app"), _images(p.root / "app_std")
    assert [a for a, _ in split] == ["sm_80", "gfx90a"]
    assert split == std
    assert _output(p.root / "app") == _output(p.root / "app_std")
    assert p.up_to_date(*args)
    # Nothing of the device link's work is left beside its output.
    assert not [f for f in os.listdir(p.root) if f.startswith(".app.")]
    p.recreate("SConstruct")
    assert p.up_to_date(*args)
    _clean_leaves_sources(p, set(files), *args)


def test_device_link_helper_forwards_for_either_wrapper(tmp_path):
    """The helper tells ld.lld to copy its inputs with `-Wl,--reproduce=` (LLVM 19's wrapper gives
    device-linker options to its clang as they are) or `--reproduce=` (later wrappers put `-Xlinker`
    first); told the wrong version, it tries the other form and gives the same object."""
    import subprocess
    import sys

    from scons_helpers import LLVM19_LIB, SITE_TOOLS, scons_env

    clang = need_tool("clang-19")
    (tmp_path / "k.cpp").write_text(LIB_K)
    for cmd in ([clang, "-fopenmp", "--offload-arch=gfx90a", "--offload-device-only", "-nogpulib", "-c", "-o", "k.bc",
                 "k.cpp"],
                [clang, "-c", "-x", "c", "-", "-o", "ref.o"]):
        cp = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, input="int x;\n")
        assert cp.returncode == 0, cp.stderr
    outs = []
    for llvm in (19, 22):
        out = tmp_path / f"out{llvm}.o"
        cp = subprocess.run([sys.executable, str(SITE_TOOLS / "offload" / "_device_link.py"), f"--llvm={llvm}",
                             str(out), "ref.o", "clang++-19", "-fopenmp", "--offload-arch=gfx90a", f"-L{LLVM19_LIB}",
                             "-lomptarget.devicertl", "--",
                             "--image=file=k.bc,triple=amdgcn-amd-amdhsa,arch=gfx90a,kind=openmp"],
                            cwd=tmp_path, capture_output=True, text=True, env=scons_env())
        assert cp.returncode == 0 and not cp.stderr, cp.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] and outs[0][:4] == b"\x7fELF"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.bc", "k.cpp", "out19.o", "out22.o", "ref.o"]


SWITCH_SCONSTRUCT = """
env = Environment(tools=['default', 'offload'], OFFLOAD_ARCHS=ARGUMENTS['archs'].split(','), OFFLOAD_CLANG='clang-19',
                  OFFLOAD_SPLIT_DEVICE_LINK=ARGUMENTS.get('split', '1') == '1')
env.OffloadProgram('bin/app', ['app/off.cpp', 'src/k.cpp'])
env.OffloadSharedLibrary('shlib/bar', ['src/k.cpp'])
"""


@pytest.mark.parametrize("steps", [("archs=sm_80 split=0", "archs=sm_80,gfx90a"),
                                   ("archs=gfx90a", "archs=gfx90a split=0")])
def test_clean_after_the_split_turns_on_or_off(tmp_path, steps):
    """A link built from fat objects and then split (the split turned on, an AMD arch added), or
    split and then not: `scons -c` with the last settings removes the files of both ways."""
    need_tool("clang-19")
    files = {"SConstruct": SWITCH_SCONSTRUCT, "app/off.cpp": OFF_CONSUMER, "src/k.cpp": LIB_K}
    p = Project(tmp_path / "p", files)
    for step in steps:
        p.scons(*step.split())
        assert _output(p.root / "bin/app") == "k 107 e 1\n"
    made = _files(p.root)
    assert {"bin/app.offload.o", "app/off.o", "shlib/libbar.so.offload.o", "src/k.os"} <= made, sorted(made)
    _clean_leaves_sources(p, set(files), *steps[-1].split())


TWO_FOLDERS_SCONSTRUCT = """
env = Environment(tools=['default', 'offload'], OFFLOAD_ARCHS=['sm_80', 'gfx90a'], OFFLOAD_CLANG='clang-19')
Export('env')
SConscript('one/SConscript')
SConscript('two/SConscript')
env.Program('bin/useone', ['app/use.cpp'], LIBS=['kern'], LIBPATH=['one'])
env.OffloadProgram('bin/usetwo', ['app/use_off.cpp'], LIBS=['kern'], LIBPATH=['two'])
"""


def test_same_names_in_two_sconscripts(tmp_path):
    """Two SConscripts of one environment, each a library `kern` of its own `k.cpp` (the same names
    relative to their folders): each library is made of its own source's host and device objects."""
    need_tool("clang-19")
    files = {"SConstruct": TWO_FOLDERS_SCONSTRUCT,
             "one/SConscript": "Import('env')\nenv.OffloadStaticLibrary('kern', ['k.cpp'])\n",
             "two/SConscript": "Import('env')\nenv.OffloadSharedLibrary('kern', ['k.cpp'])\n",
             "one/k.cpp": LIB_K, "two/k.cpp": LIB_K.replace("d = 7", "d = 2").replace("100 +", "200 +"),
             "app/use.cpp": CONSUMER, "app/use_off.cpp": OFF_CONSUMER}
    p = Project(tmp_path / "p", files)
    cp = p.scons()
    assert "DEVICELINK gfx90a two/libkern.so.gfx90a.devlink.o" in cp.stdout
    made = _files(p.root)
    for folder in ("one", "two"):
        assert {f"{folder}/k.sm_80.o", f"{folder}/k.gfx90a.bc"} <= made, sorted(made)
    assert _output(p.root / "bin/useone") == "k 107\n"
    assert _output(p.root / "bin/usetwo", str(p.root / "two")) == "k 202 e 1\n"
    # The shared library's device images are its own source's (checked by entries: offload-tool verify).
    from conftest import run_cli
    for lib in ("two/libkern.so", "bin/usetwo"):
        v = run_cli("tool", "verify", str(p.root / lib))
        assert v.returncode == 0, (lib, v.stdout.decode() + v.stderr.decode())
    assert p.up_to_date()
    _clean_leaves_sources(p, set(files))


def test_a_renamed_message_variable_is_read_with_a_warning_naming_the_new_one(tmp_path):
    """`OFFLOAD_LDSCRIPTCOMSTR` became `OFFLOAD_LDSCRIPTSTR` (the ld script is the tool's Python
    step, no command): an SConstruct that still sets the old name sees its message and is told
    the new name once."""
    need_tool("clang-19")
    p = Project(tmp_path / "p", {"SConstruct": LIB_SCONSTRUCT.replace(
        "OFFLOAD_CLANG='clang-19')", "OFFLOAD_CLANG='clang-19', OFFLOAD_LDSCRIPTCOMSTR='MY-LDSCRIPT $TARGET')"),
        "other/SConscript": OTHER_SCONSCRIPT, "lib/k.cpp": LIB_K, "app/main.cpp": CONSUMER,
        "app/off.cpp": OFF_CONSUMER, "other/main.cpp": CONSUMER})
    cp = p.scons("-n")
    assert "MY-LDSCRIPT lib/libfoo.a" in cp.stdout.splitlines(), cp.stdout
    warnings = [line for line in cp.stderr.splitlines() if "OFFLOAD_LDSCRIPTCOMSTR" in line]
    assert warnings == ["offload: warning: OFFLOAD_LDSCRIPTCOMSTR is now OFFLOAD_LDSCRIPTSTR (the ld script is "
                        "written by the tool, not by a command, and SCons names such a step's message *STR, as "
                        "INSTALLSTR): its value is used; rename it"], cp.stderr
