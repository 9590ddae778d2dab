"""nvcc's split graph in the shapes real projects have, each built for real (the programs run,
on the host without a GPU), split, unsplit (`OFFLOAD_NVCC_SPLIT=False`) and with relocatable
device code (`-rdc=true`):

- include paths of a SConscript below the top folder, read in place and into variant
  directories (`duplicate` 0 and 1), as `CPPPATH=['inc']` and `['#sub/inc2']`;
- defines whose values hold commas, quotes, blanks and `$`: the same macro on the host and the
  device side as g++ gets from the same `CPPDEFINES`;
- `scons -c` after an arch was dropped, and that nothing the tool wrote is left;
- an `OFFLOAD_NVCC` that is a wrapper script (its compiles go through it);
- file and folder names with a blank, a quote and a `$`.

After each build a re-created file (same bytes, new inode) leaves the build up to date."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from conftest import need_tool
from scons_helpers import Project, run_built
from test_scons_nvcc_split import _steps

pytestmark = pytest.mark.slow

# The three ways a `.cu` source is built with nvcc: split (the default), unsplit, and split with
# relocatable device code (`RDC` defined for the sources).
MODES = """
def modes(env):
    for mode in ('split', 'unsplit', 'rdc'):
        e = env.Clone()
        if mode == 'unsplit':
            e['OFFLOAD_NVCC_SPLIT'] = False
        if mode == 'rdc':
            e.Append(OFFLOAD_NVCCFLAGS=['-rdc=true'], CPPDEFINES=['RDC'])
        yield mode, e
"""


def _tools():
    need_tool("nvcc")
    need_tool("clang-19")      # the tool validates archs with clang's table


def _runs(program, expected: str) -> None:
    out = run_built(program, "/usr/local/cuda/lib64")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout == expected, (program, out.stdout)


# --------------------------------------------------------------------------------------------
# 1. Include paths of a SConscript below the top folder

INC_SCONSTRUCT = """
SConscript('sub/SConscript', exports={'tag': 'plain'})
SConscript('sub/SConscript', variant_dir='out0/sub', duplicate=0, exports={'tag': 'dup0'})
VariantDir('out1/sub', 'sub', duplicate=1)
SConscript('out1/sub/SConscript', exports={'tag': 'dup1'})
"""

INC_SCONSCRIPT = """
import os
Import('tag')
env = Environment(tools=['default', 'offload'], ENV={'PATH': os.environ['PATH']}, OFFLOAD_ARCHS=['sm_80'],
                  OFFLOAD_CUDA_COMPILER='nvcc', CPPPATH=['inc', '#sub/inc2'])
""" + MODES + """
for mode, e in modes(env):
    e.OffloadProgram(f'{tag}_{mode}', e.OffloadObject('src/k.cu', target=f'src/k_{mode}.o'))
"""

INC_KERNEL = """
#include <cstdio>
#include "kdef.h"
#include "kdef2.h"
__global__ void k(int *x) { x[0] = KVAL * KVAL2; }
int main() { std::printf("k %d\\n", KVAL * KVAL2); return 0; }
"""


def test_include_paths_of_a_sconscript_below_the_top(tmp_path):
    """`CPPPATH=['inc', '#sub/inc2']` in `sub/SConscript`: every step of nvcc's split graph gets the
    folders as SCons expands them for that SConscript (relative to it, `#` and variant
    directories resolved), as the one `nvcc -c` does."""
    _tools()
    p = Project(tmp_path / "p", {"SConstruct": INC_SCONSTRUCT, "sub/SConscript": INC_SCONSCRIPT,
                                 "sub/src/k.cu": INC_KERNEL, "sub/inc/kdef.h": "#define KVAL 3\n",
                                 "sub/inc2/kdef2.h": "#define KVAL2 4\n"})
    c = _steps(p.scons("-j2"))
    assert (c["NVCC-FE"], c["NVCC"], c["NVCC-DLINK"], c["LINK"]) == (6, 3, 3, 9), c
    programs = [f"{d}/{tag}_{mode}" for d, tag in (("sub", "plain"), ("out0/sub", "dup0"), ("out1/sub", "dup1"))
                for mode in ("split", "unsplit", "rdc")]
    for program in programs:
        _runs(p.root / program, "k 12\n")
    assert p.up_to_date()
    for f in ("sub/src/k.cu", "sub/inc/kdef.h", "sub/inc2/kdef2.h"):
        p.recreate(f)
    assert p.up_to_date()
    # The headers are dependencies of the split steps too (found along the same folders).
    p.write("sub/inc/kdef.h", "#define KVAL 5\n")
    c = _steps(p.scons("-j2"))
    assert (c["NVCC-FE"], c["NVCC"]) == (6, 3), c
    for program in programs:
        _runs(p.root / program, "k 20\n")
    assert p.up_to_date()


# --------------------------------------------------------------------------------------------
# 2. Defines with commas, quotes, blanks and `$`

DEF_SCONSTRUCT = """
import os
DEFINES = [('USE_PPWI', '1,2,4,8'), ('VERSION', '\\\\"1.0\\\\"'), ('NAME', '\\\\"a b\\\\"'), ('PRICE', '\\\\$$5'),
           ('COST', '\\\\"\\\\$$5, each\\\\"'), ('QUOTED', "\\\\'x\\\\'")]
# A host compiler flag with a blank and a comma in it (nvcc takes it as -Xcompiler=...).
CCFLAGS = ['-DHOSTFLAG=\\\\"p q,r\\\\"']
Environment(CPPDEFINES=DEFINES, CCFLAGS=CCFLAGS).Program('ref', 'ref.cpp')
env = Environment(tools=['default', 'offload'], ENV={'PATH': os.environ['PATH']}, OFFLOAD_ARCHS=['sm_80'],
                  OFFLOAD_CUDA_COMPILER='nvcc', CPPDEFINES=DEFINES, CCFLAGS=CCFLAGS)
""" + MODES + """
if ARGUMENTS.get('cuda'):
    for mode, e in modes(env):
        e.OffloadProgram(mode, e.OffloadObject('k.cu', target=f'k_{mode}.o'))
"""

MACROS = ("USE_PPWI", "VERSION", "NAME", "PRICE", "COST", "QUOTED", "HOSTFLAG")

# g++'s view: each macro's spelling as a C string literal (`expected.h`).
DEF_REF = """
#include <cstdio>
#define S(...) #__VA_ARGS__
#define XS(...) S(__VA_ARGS__)
static void put(const char *name, const char *value) {
  std::printf("#define EXP_%s \\"", name);
  for (const char *c = value; *c; ++c) std::printf(*c == '"' || *c == '\\\\' ? "\\\\%c" : "%c", *c);
  std::printf("\\"\\n");
}
int main() {
""" + "".join(f'  put("{m}", XS({m}));\n' for m in MACROS) + "}\n"

# nvcc's view: the host side and each device side must spell every macro as g++ does (checked
# while compiling: each pass evaluates the static_asserts), and the program prints them.
DEF_KERNEL = """
#include <cstdio>
#include "expected.h"
#define S(...) #__VA_ARGS__
#define XS(...) S(__VA_ARGS__)
__host__ __device__ constexpr bool same(const char *a, const char *b) { return *a == *b && (!*a || same(a + 1, b + 1)); }
#define CHECK(m) static_assert(same(XS(m), EXP_##m), #m " is not g++'s")
#ifdef __CUDA_ARCH__
CHECK(USE_PPWI); CHECK(VERSION); CHECK(NAME); CHECK(PRICE); CHECK(COST); CHECK(QUOTED);
#else
CHECK(USE_PPWI); CHECK(VERSION); CHECK(NAME); CHECK(PRICE); CHECK(COST); CHECK(QUOTED); CHECK(HOSTFLAG);
#endif
__global__ void k(char *x) { x[0] = XS(USE_PPWI)[0]; }
int main() {
""" + "".join(f'  std::printf("%s\\n", XS({m}));\n' for m in MACROS) + "}\n"


def test_defines_reach_both_sides_as_gxx_gets_them(tmp_path):
    _tools()
    p = Project(tmp_path / "p", {"SConstruct": DEF_SCONSTRUCT, "ref.cpp": DEF_REF, "k.cu": DEF_KERNEL})
    p.scons("ref")
    ref = run_built(p.root / "ref")
    assert ref.returncode == 0, ref.stderr
    expected = ref.stdout
    assert '#define EXP_USE_PPWI "1,2,4,8"' in expected and '#define EXP_COST "\\"$5, each\\""' in expected, expected
    p.write("expected.h", expected)
    values = "".join(re.sub(r"\\(.)", r"\1", line.split(" ", 2)[2][1:-1]) + "\n" for line in expected.splitlines())
    c = _steps(p.scons("-j2", "cuda=1"))
    assert (c["NVCC-FE"], c["NVCC"]) == (2, 1), c
    for mode in ("split", "unsplit", "rdc"):
        _runs(p.root / mode, values)
    assert p.up_to_date("cuda=1")
    p.recreate("k.cu")
    assert p.up_to_date("cuda=1")


# --------------------------------------------------------------------------------------------
# 3. `scons -c`: a dropped arch's files, and nothing left

CLEAN_SCONSTRUCT = """
import os
env = Environment(tools=['default', 'offload'], ENV={'PATH': os.environ['PATH']},
                  OFFLOAD_ARCHS=ARGUMENTS.get('archs', 'sm_80').split(','), OFFLOAD_CUDA_COMPILER='nvcc',
                  OFFLOAD_NVCC_SPLIT=ARGUMENTS.get('split', '1') == '1')
env.OffloadProgram('app', ['src/app.cu'])
rdc = env.Clone(OFFLOAD_NVCCFLAGS=['-rdc=true'])
rdc.OffloadProgram('rdcapp', [rdc.OffloadObject('src/app.cu', target='src/rdcapp.o')])
"""

CLEAN_KERNEL = """
#include <cstdio>
__global__ void k(int *x) { x[0] = 1; }
int main() { std::printf("app\\n"); return 0; }
"""


def _tree(root) -> list[str]:
    """Every file and folder under `root` but SCons's own databases (`.sconsign*`)."""
    out = []
    for folder, dirs, files in os.walk(root):
        rel = os.path.relpath(folder, root)
        out.extend(os.path.normpath(os.path.join(rel, n)) for n in dirs + files if not n.startswith(".sconsign"))
    return sorted(out)


def test_clean_removes_a_dropped_archs_files_and_leaves_nothing(tmp_path):
    _tools()
    p = Project(tmp_path / "p", {"SConstruct": CLEAN_SCONSTRUCT, "src/app.cu": CLEAN_KERNEL})
    before = _tree(p.root)
    p.scons("-j2", "archs=sm_80,sm_89")
    built = _tree(p.root)
    for name in ("src/app.compute_89.cpp1.ii", "src/app.compute_89.ptx", "src/app.sm_89.cubin",
                 "src/app.compute_89.cudafe1.stub.c", "src/app.compute_89.archlist", "rdcapp.sm_89.dlink.cubin"):
        assert name in built, built
    _runs(p.root / "app", "app\n")
    # Cleaned with sm_89 no longer configured: its files go too, and nothing else is left.
    p.scons("-c", "archs=sm_80")
    assert _tree(p.root) == before, _tree(p.root)
    # Cleaned with every arch configured; and after a split build cleaned unsplit.
    p.scons("-j2", "archs=sm_80,sm_89")
    p.scons("-c", "archs=sm_80,sm_89")
    assert _tree(p.root) == before, _tree(p.root)
    p.scons("-j2", "archs=sm_80,sm_89")
    p.scons("-c", "archs=sm_80,sm_89", "split=0")
    assert _tree(p.root) == before, _tree(p.root)


# --------------------------------------------------------------------------------------------
# 4. OFFLOAD_NVCC a wrapper script

WRAP_SCONSTRUCT = """
import os
env = Environment(tools=['default', 'offload'], ENV={'PATH': os.environ['PATH']}, OFFLOAD_ARCHS=['sm_80'],
                  OFFLOAD_CUDA_COMPILER='nvcc', OFFLOAD_NVCC=ARGUMENTS['nvcc'])
""" + MODES + """
for mode, e in modes(env):
    e.OffloadProgram(mode, [e.OffloadObject(s, target=f'o_{mode}/{s[:-3]}.o') for s in ('main.cu', 'twice.cu')])
"""

WRAP_MAIN = """
#include <cstdio>
#ifdef RDC
__device__ float twice(float x);
#else
static __device__ float twice(float x) { return 2 * x; }
#endif
float twice_on_host(float x);
__global__ void scale(float *x) { x[0] = twice(x[0]); }
int main() { std::printf("%g\\n", twice_on_host(4)); return 0; }
"""

WRAP_TWICE = """
__device__ float twice(float x) { return 2 * x; }
float twice_on_host(float x) { return 2 * x; }
"""


def test_a_wrapper_nvcc_takes_every_compile_and_device_link(tmp_path):
    """A site script as `OFFLOAD_NVCC` (here: one that logs its arguments, then runs nvcc): nvcc's
    split steps would run nvcc's programs from its own folder, around the script, so the tool
    says so once and builds with one `nvcc -c` per source and one `nvcc -dlink` through it. A
    script that only execs nvcc is nvcc: split."""
    _tools()
    real = need_tool("nvcc")
    p = Project(tmp_path / "p", {"SConstruct": WRAP_SCONSTRUCT, "main.cu": WRAP_MAIN, "twice.cu": WRAP_TWICE})
    log = tmp_path / "nvcc.log"
    wrapper = tmp_path / "bin" / "mynvcc"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    cp = p.scons("-j2", f"nvcc={wrapper}")
    notes = [ln for ln in cp.stderr.splitlines() if ln.startswith("offload: note:")]
    assert len(notes) == 1 and "is not nvcc itself" in notes[0] and str(wrapper) in notes[0], cp.stderr
    c = _steps(cp)
    assert (c["NVCC"], c["NVCC-DLINK"], c["NVCC-FE"], c["NVCC-NVLINK sm_80"]) == (6, 1, 0, 0), c
    runs = [ln for ln in log.read_text().splitlines() if "--dryrun" not in ln]
    for mode in ("split", "unsplit", "rdc"):
        for s in ("main", "twice"):
            assert [ln for ln in runs if ln.startswith(f"-c -o o_{mode}/{s}.o ")], (mode, s, runs)
        _runs(p.root / mode, "8\n")
    assert [ln for ln in runs if "-dlink" in ln and "rdc.dlink.o" in ln], runs
    assert p.up_to_date(f"nvcc={wrapper}")
    # A script whose one command is `exec <nvcc> "$@"` (what /usr/local/bin/nvcc is on some
    # machines) is nvcc itself. (A symbolic link to nvcc's binary from another folder is not
    # tried: nvcc finds its own files from the folder it was invoked from, and fails there.)
    dry = subprocess.run([real, "--dryrun", "-c", "-o", os.devnull, "-x", "cu", os.devnull], capture_output=True,
                         text=True)
    here = re.search(r"^#\$ _HERE_=(.*)$", dry.stdout + dry.stderr, re.M).group(1).strip()
    link = tmp_path / "bin" / "nvcc"
    link.write_text(f'#!/bin/sh\nexec {here}/nvcc "$@"\n')
    link.chmod(0o755)
    c = _steps(p.scons("-j2", f"nvcc={link}"))
    assert (c["NVCC-FE"], c["NVCC-NVLINK sm_80"], c["NVCC"]) == (4, 1, 2), c
    _runs(p.root / "rdc", "8\n")


# --------------------------------------------------------------------------------------------
# 5. File and folder names with a blank, a quote and a `$`

NAMES_SCONSTRUCT = """
import os
env = Environment(tools=['default', 'offload'], ENV={'PATH': os.environ['PATH']}, OFFLOAD_ARCHS=['sm_80'],
                  OFFLOAD_CUDA_COMPILER='nvcc')
""" + MODES + """
SOURCES = ['src dir/my kern.cu', "it's/k'q.cu", 'd$$x/k$$y.cu']
for mode, e in modes(env):
    objs = [e.OffloadObject(s, target=f'{mode} o$$t/' + s.replace('.cu', '.o')) for s in SOURCES]
    e.OffloadProgram(f"{mode} it's", objs)
"""

NAMES_MAIN = """
#include <cstdio>
float twice_on_host(float x);
float thrice_on_host(float x);
#ifdef RDC
__device__ float twice(float x);
#else
static __device__ float twice(float x) { return 2 * x; }
#endif
__global__ void scale(float *x) { x[0] = twice(x[0]); }
int main() { std::printf("%g\\n", twice_on_host(thrice_on_host(1))); return 0; }
"""


def test_file_and_folder_names_with_blanks_quotes_and_dollars(tmp_path):
    _tools()
    p = Project(tmp_path / "p", {"SConstruct": NAMES_SCONSTRUCT, "src dir/my kern.cu": NAMES_MAIN,
                                 "it's/k'q.cu": "float thrice_on_host(float x) { return 3 * x; }\n"
                                                "__global__ void k(float *x) { x[0] = 3; }\n",
                                 "d$x/k$y.cu": WRAP_TWICE})
    c = _steps(p.scons("-j2"))
    assert (c["NVCC-FE"], c["NVCC"], c["NVCC-NVLINK sm_80"], c["LINK"]) == (6, 3, 1, 3), c
    for mode in ("split", "unsplit", "rdc"):
        _runs(p.root / f"{mode} it's", "6\n")
    assert (p.root / "split o$t" / "d$x" / "k$y.sm_80.cubin").is_file()
    assert p.up_to_date()
    for f in ("src dir/my kern.cu", "it's/k'q.cu", "d$x/k$y.cu"):
        p.recreate(f)
    assert p.up_to_date()


# --------------------------------------------------------------------------------------------
# The shell's reading of a line (nvcc's --dryrun lines, SCons's command lines)

def test_sh_words_reads_a_line_as_the_shell_does():
    import subprocess
    import sys
    sys.path.insert(0, str(__import__("scons_helpers").REPO / "site_scons"))
    from site_tools.offload.graph.nvcc import shell_words as _nvcc
    variables = {"X": "1 2", "E": "", "CICC_PATH": "/c p"}
    lines = ['a b', '"a b" c', "'x y'z", 'a\\ b', '"q\\"r"', '"$X"', '$X', 'a$X b', '"$CICC_PATH/cicc" -arch x',
             'x$E y', '"-DV=\\"1,2\\""', '-D "A=\\"b $X\\""', 'a\\$b', '"a\\$b"', '"a\\b"', "a'b c'd", '$ x', '"$"',
             '${X}y', 'a # b', 'a#b', '"" x', "-D 'COST=\"$5, each\"'"]
    for line in lines:
        shell = subprocess.run(["/bin/sh", "-c", 'X="1 2"; E=; CICC_PATH="/c p"; printf "%s\\0" ' + line],
                               capture_output=True, check=True).stdout.decode().split("\0")[:-1]
        assert _nvcc.sh_words(line, variables) == shell, line
    for line in ('a `b`', 'a $(b)', 'a; b', 'a "b'):
        with pytest.raises(_nvcc._NotSimple):
            _nvcc.sh_words(line, variables)
