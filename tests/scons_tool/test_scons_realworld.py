"""The SCons tool on set-ups and code patterns of real projects: compilers behind wrappers (a site
script, Debian's ccache masquerade folder) found and asked for their layout; several HIP sources
in one program; HIP code in `.cpp`; plain host sources; CUDA/HIP-only links without the OpenMP
runtime; nvcc in a mixed environment; `LIBS`; `scons -c` after shrinking the arch set; arch
mistakes; conflicting requests for one target; a language added as one record."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from conftest import inspect_json, need_tool, run, run_cli
from scons_samples import CUDA_DECLS
from scons_helpers import Project, actions, assert_clean_failure, counts, device_archs, run_built

pytestmark = pytest.mark.slow

OMP_SRC = r"""
#include <stdio.h>
int main(void) {
  int n = 1000; double s = 0, x[1000];
  for (int i = 0; i < n; i++) x[i] = i;
#pragma omp target teams distribute parallel for reduction(+:s) map(to: x[0:n])
  for (int i = 0; i < n; i++) s += x[i];
  printf("%s\n", s == 499500.0 ? "PASS" : "FAIL");
  return s != 499500.0;
}
"""

HIP_KERNEL = r"""
#include <hip/hip_runtime.h>
static __device__ int bias_{n};
__global__ void k{n}(float *a) {{ a[threadIdx.x] += bias_{n}; }}
int launch{n}(float *d) {{ hipLaunchKernelGGL(k{n}, dim3(1), dim3(16), 0, 0, d); return 0; }}
"""

HIP_MAIN = r"""
#include <hip/hip_runtime.h>
#include <cstdio>
int launch1(float *); int launch2(float *);
int main() {
  float *d;
  if (hipMalloc(&d, 64) != hipSuccess) { std::printf("no device\n"); return 0; }
  launch1(d); launch2(d); std::printf("ok\n"); return 0;
}
"""

PLAIN_MAIN = r"""
#include <cstdio>
int launch1(float *); int launch2(float *);
int main() { std::printf("plain main\n"); return 0; }
"""

# clang cannot use CUDA 13's headers here: a header-less CUDA source (device code + a host function).
CUDA_SRC = CUDA_DECLS + """static __attribute__((device)) int bias;
__attribute__((global)) void saxpy(float a, float *x) { x[0] = a * x[0] + bias; }
int cuda_main() { return 0; }
"""
CUDA_MAIN = """
int cuda_main();
int main() { return cuda_main(); }
"""

NVCC_SRC = r"""
#include <cstdio>
template <typename F> __global__ void apply(F f, float *x) { x[0] = f(x[0]); }
__global__ void scale(float a, float *x) { auto f = [=] __device__ (float v) { return a * v; }; x[0] = f(x[0]); }
void scale_with_lambda(float a, float *x) { apply<<<1, 1>>>([=] __device__ (float v) { return a * v; }, x); }
extern "C" int cuda_part() { float *d; if (cudaMalloc(&d, 64) != cudaSuccess) { std::printf("no device\n"); return 0; }
  scale<<<1, 1>>>(2.0f, d); return 0; }
"""
MIXED_MAIN = r"""
#include <stdio.h>
int cuda_part();
int main() { int s = 0;
#pragma omp target map(tofrom: s)
  s = 42;
  cuda_part(); printf("%s\n", s == 42 ? "PASS" : "FAIL"); return s != 42; }
"""


def _sconstruct(body: str, env_args: str = "") -> str:
    return ("import os\n"
            f"env = Environment(tools=['default', 'offload'], OFFLOAD_VERBOSE=bool(ARGUMENTS.get('OFFLOAD_VERBOSE')), "
            f"{env_args})\n" + body)


def _omp_project(root, body: str, env_args: str) -> Project:
    """A project of one OpenMP source, `src/a.c`, built with clang 19."""
    need_tool("clang-19")
    p = Project(root)
    p.write("SConstruct", _sconstruct(body, "OFFLOAD_CLANG='clang-19', " + env_args))
    p.write("src/a.c", OMP_SRC)
    return p


def _needed_libs(path) -> list[str]:
    out = run(["readelf", "-d", str(path)]).stdout.decode()
    return [line.split("[")[1].split("]")[0] for line in out.splitlines() if "(NEEDED)" in line]


def _verify(path) -> None:
    cp = run_cli("tool", "verify", str(path))
    assert cp.returncode == 0, (cp.stdout, cp.stderr)


# --------------------------------------------------------------------------------------------
# Compilers behind wrappers

def _wrapper(folder, name: str, real: str, log) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    w = folder / name
    w.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\nexec {real} \"$@\"\n")
    w.chmod(0o755)
    return str(w)


def test_wrapper_script_as_offload_clang(tmp_path):
    """A site wrapper in a folder of its own (no LLVM beside it): the tool asks it where the
    OpenMP runtimes are, and the program builds, carries both archs, runs and verifies."""
    need_tool("clang-19")
    log = tmp_path / "wrapper.log"
    wrapper = _wrapper(tmp_path / "site-bin", "cc-offload", shutil.which("clang-19"), log)
    p = Project(tmp_path / "proj")
    p.write("SConstruct", _sconstruct("env.OffloadProgram('app', ['src/a.c'])",
                                      f"OFFLOAD_CLANG={wrapper!r}, OFFLOAD_ARCHS=['sm_80', 'gfx90a']"))
    p.write("src/a.c", OMP_SRC)
    cp = p.scons()
    assert counts(cp)["DEVICELINK"] == 1  # the split device link is on behind the wrapper
    assert "--libomptarget-nvptx-bc-path=" in log.read_text() or device_archs(cp)["sm_80"] == 1
    out = run_built(p.root / "app")
    assert out.returncode == 0 and "PASS" in out.stdout, out.stdout + out.stderr
    _verify(p.root / "app")
    assert "--offload-device-only" in log.read_text()


def _masquerade(tmp_path) -> str:
    """Debian's ccache masquerade folder if installed, else an equivalent one of symlinks to ccache."""
    if os.path.isfile("/usr/lib/ccache/clang-19"):
        return "/usr/lib/ccache"
    ccache = need_tool("ccache")
    d = tmp_path / "ccache-bin"
    d.mkdir()
    for n in ("clang-19", "clang++-19", "clang-22", "clang++-22"):
        (d / n).symlink_to(ccache)
    return str(d)


def test_ccache_masquerade_first_on_path_auto_detects_clang19(tmp_path):
    """With the ccache masquerade folder first on the build's PATH, auto-detection asks each
    `clang-N` through ccache and picks the one with an OpenMP offload runtime (clang-19 here, not
    Debian's clang-22), and every OpenMP compile goes through ccache."""
    need_tool("clang-19")
    need_tool("ccache")
    masq = _masquerade(tmp_path)
    cache = tmp_path / "ccache"
    p = Project(tmp_path / "proj")
    p.write("SConstruct", _sconstruct(
        "print('CLANG=' + env['OFFLOAD_CLANG'])\nenv.OffloadProgram('app', ['src/a.c'])",
        f"ENV={{'PATH': {masq!r} + os.pathsep + os.environ['PATH'], 'CCACHE_DIR': {str(cache)!r}}}, "
        "OFFLOAD_ARCHS=['sm_80', 'gfx90a']"))
    p.write("src/a.c", OMP_SRC)
    cp = p.scons()
    assert "CLANG=clang-19" in cp.stdout
    out = run_built(p.root / "app")
    assert out.returncode == 0 and "PASS" in out.stdout
    stats = subprocess.run(["ccache", "--print-stats"], capture_output=True, text=True,
                           env=dict(os.environ, CCACHE_DIR=str(cache)), timeout=60).stdout
    misses = {k: int(v) for k, v in (line.split("\t") for line in stats.splitlines() if "\t" in line)}
    assert misses.get("cache_miss", misses.get("direct_cache_miss", 0)) >= 3, stats  # host + 2 device


def test_auto_detection_through_a_wrapper_folder(tmp_path):
    """A folder of wrappers named clang-19 and clang-22 first on PATH: the one whose compiler has
    the OpenMP runtimes is picked, and used through the wrapper."""
    need_tool("clang-19")
    need_tool("clang-22")
    log = tmp_path / "wrapper.log"
    folder = tmp_path / "wrappers"
    for n in ("clang-19", "clang-22"):
        _wrapper(folder, n, shutil.which(n), log)
    p = Project(tmp_path / "proj")
    p.write("SConstruct", _sconstruct(
        "print('CLANG=' + env['OFFLOAD_CLANG'])\nenv.OffloadProgram('app', ['src/a.c'])",
        f"ENV={{'PATH': {str(folder)!r} + os.pathsep + os.environ['PATH']}}, OFFLOAD_ARCHS=['gfx90a']"))
    p.write("src/a.c", OMP_SRC)
    cp = p.scons()
    assert "CLANG=clang-19" in cp.stdout
    assert "--offload-host-only" in log.read_text()
    out = run_built(p.root / "app")
    assert out.returncode == 0 and "PASS" in out.stdout


# --------------------------------------------------------------------------------------------
# HIP

def test_several_hip_sources_and_a_plain_main_in_one_program(tmp_path):
    """Two `.hip` sources link into one program (each host object defines its own
    `__hip_cuid_<hash>`, matching its device code), and a plain `main.cpp` marked
    OFFLOAD_LANG='host' gets no device compile."""
    need_tool("clang-19")
    p = Project(tmp_path)
    p.write("SConstruct", _sconstruct(
        "env.OffloadProgram('app', ['src/k1.hip', 'src/k2.hip', env.OffloadObject('src/main.cpp', OFFLOAD_LANG='host')])",
        "OFFLOAD_CLANG='clang-19', OFFLOAD_ARCHS=['sm_80', 'gfx90a']"))
    p.write("src/k1.hip", HIP_KERNEL.format(n=1))
    p.write("src/k2.hip", HIP_KERNEL.format(n=2))
    p.write("src/main.cpp", PLAIN_MAIN)
    cp = p.scons()
    assert device_archs(cp) == {"gfx90a": 2}
    assert not any("main.cpp" in rest for kind, rest in actions(cp) if kind in ("HOST", "DEVICE"))
    syms = run(["nm", str(p.root / "app")]).stdout.decode()
    cuids = sorted(line.split()[-1] for line in syms.splitlines() if "__hip_cuid_" in line)
    assert len(cuids) == 2 and all(c != "__hip_cuid_" for c in cuids), cuids
    out = run_built(p.root / "app")
    assert "plain main" in out.stdout
    assert not {"libomp.so", "libomptarget.so"} & {n.split(".so")[0] + ".so" for n in _needed_libs(p.root / "app")}


def test_hip_code_in_cpp_files(tmp_path):
    """Real HIP code in `.cpp`: compiled as OpenMP (from the suffix) it fails with a note naming
    OFFLOAD_LANG; with OFFLOAD_LANG='hip' on the environment the program builds and runs."""
    need_tool("clang-19")
    p = Project(tmp_path)
    p.write("SConstruct", _sconstruct(
        "if ARGUMENTS.get('lang'): env['OFFLOAD_LANG'] = ARGUMENTS['lang']\n"
        "env.OffloadProgram('app', ['src/k1.cpp', 'src/k2.cpp', 'src/main.cpp'])",
        "OFFLOAD_CLANG='clang-19', OFFLOAD_ARCHS=['gfx90a']"))
    p.write("src/k1.cpp", HIP_KERNEL.format(n=1))
    p.write("src/k2.cpp", HIP_KERNEL.format(n=2))
    p.write("src/main.cpp", HIP_MAIN)
    cp = p.scons(check=False)
    assert cp.returncode != 0
    assert "looks like HIP code; set OFFLOAD_LANG='hip'" in cp.stderr, cp.stderr
    cp = p.scons("lang=hip")
    assert device_archs(cp) == {"gfx90a": 3}
    out = run_built(p.root / "app")
    assert out.returncode == 0 and ("ok" in out.stdout or "no device" in out.stdout)


# --------------------------------------------------------------------------------------------
# CUDA

@pytest.mark.parametrize("clang", ["clang-19", "clang-22"])
def test_cuda_only_program_links_without_openmp(tmp_path, clang):
    """A CUDA-only program (clang) is linked as clang links CUDA: no -fopenmp, no OpenMP runtime
    needed at run time (clang 22 here has no libomp/libompdevice, which an OpenMP link needs).
    clang 19's linker wrapper cannot drive CUDA 13's fatbinary (`Unknown option '-image'`), so
    with clang 19 the link command is checked, with clang 22 the program is linked too."""
    need_tool(clang)
    p = Project(tmp_path)
    p.write("SConstruct", _sconstruct(
        "env.OffloadProgram('app', ['src/k.cu', env.OffloadObject('src/main.cpp', OFFLOAD_LANG='host', "
        "OFFLOAD_HOSTFLAGS=[])])",
        f"OFFLOAD_CLANG={clang!r}, OFFLOAD_ARCHS=['sm_80', 'gfx90a'], "
        "OFFLOAD_HOSTFLAGS=['-nocudainc', '-nocudalib'], OFFLOAD_DEVICEFLAGS=['-nocudainc', '-nocudalib']"))
    p.write("src/k.cu", CUDA_SRC)
    p.write("src/main.cpp", CUDA_MAIN)
    cp = p.scons("-n", "OFFLOAD_VERBOSE=1")
    link = [line for line in cp.stdout.splitlines() if " -o app " in line]
    assert link and "-fopenmp" not in link[0] and "--offload-link" in link[0], link
    if clang == "clang-19":
        return
    cp = p.scons("OFFLOAD_VERBOSE=1")
    needed = _needed_libs(p.root / "app")
    assert not any(n.startswith(("libomp", "libomptarget")) for n in needed), needed
    assert cp.stdout.count("--offload-device-only") == 1 and "--offload-arch=sm_80" in cp.stdout


def test_nvcc_in_a_mixed_environment(tmp_path):
    """nvcc gets its own flags (OFFLOAD_NVCCFLAGS: --extended-lambda) and the host compiler's
    through -Xcompiler (-march=native in CXXFLAGS); neither reaches clang wrongly. PTX beside SASS
    with OFFLOAD_CUDA_PTX."""
    need_tool("clang-19")
    need_tool("nvcc")
    p = Project(tmp_path)
    p.write("SConstruct", _sconstruct(
        "env.OffloadProgram('app', ['src/main.c', 'src/k.cu'])",
        "OFFLOAD_CLANG='clang-19', OFFLOAD_ARCHS=['sm_80', 'gfx90a'], OFFLOAD_CUDA_COMPILER='nvcc', "
        "CXXFLAGS=['-march=native', '-std=c++14'], OFFLOAD_NVCCFLAGS=['--extended-lambda'], OFFLOAD_CUDA_PTX=True, "
        "OFFLOAD_NVCC_SPLIT=False"))   # the one nvcc -c command line is what is checked
    p.write("src/k.cu", NVCC_SRC)
    p.write("src/main.c", MIXED_MAIN)
    cp = p.scons("OFFLOAD_VERBOSE=1")
    nvcc = [line for line in cp.stdout.splitlines()  # the program, not a path that contains "nvcc"
            if line.split() and line.split()[0].endswith("nvcc") and " -c " in line]
    assert nvcc and "-Xcompiler=-march=native" in nvcc[0] and "code=[sm_80,compute_80]" in nvcc[0], nvcc
    assert " -std=c++14 " in nvcc[0] and "-Xcompiler=-std" not in nvcc[0], nvcc  # the dialect is nvcc's own
    assert not any("--extended-lambda" in line for line in cp.stdout.splitlines() if "clang" in line)
    out = run_built(p.root / "app")
    assert out.returncode == 0 and "PASS" in out.stdout, out.stdout + out.stderr
    cp = run_cli("tool", "inspect", "--json", str(p.root / "src" / "k.o"))
    images = __import__("json").loads(cp.stdout)
    assert sorted((i["arch"], i["image_kind"]) for i in images) == [("sm_80", "cubin"), ("sm_80", "ptx")], images


# --------------------------------------------------------------------------------------------
# Links, cleaning, mistakes

def test_system_libs_keep_the_split_device_link_and_our_archives_turn_it_off(tmp_path):
    """`LIBS=['m']` (a shared system library) keeps the AMD device link a node of its own; an
    OffloadArchive in LIBS (it carries device code) turns it off, and the build says so once."""
    need_tool("clang-19")
    p = Project(tmp_path)
    p.write("SConstruct", _sconstruct(
        "lib = env.OffloadArchive('lib/kern', ['lib/kern.c'])\n"
        "env.OffloadProgram('app', ['src/a.c'], LIBS=['m'])\n"
        "env.OffloadProgram('app2', ['src/b.c'], LIBS=['kern', 'm'], LIBPATH=['lib'])",
        "OFFLOAD_CLANG='clang-19', OFFLOAD_ARCHS=['gfx90a']"))
    p.write("src/a.c", OMP_SRC)
    p.write("src/b.c", "int kern(void);\nint main(void) { return kern(); }\n")
    p.write("lib/kern.c", "int kern(void) { int r = 1;\n#pragma omp target map(tofrom: r)\n r = 0;\n return r; }\n")
    cp = p.scons()
    devlinks = [rest for kind, rest in actions(cp) if kind == "DEVICELINK"]
    assert devlinks == ["gfx90a app.gfx90a.devlink.o"], devlinks
    notes = [line for line in cp.stderr.splitlines() if line.startswith("offload: note:") and "device code" in line]
    assert len(notes) == 1 and "app2" in notes[0] and "'kern'" in notes[0], cp.stderr
    for prog in ("app", "app2"):
        out = run_built(p.root / prog)
        assert out.returncode == 0, (prog, out.stdout, out.stderr)


def test_clean_removes_files_of_archs_no_longer_configured(tmp_path):
    """Build for three archs, drop one, `scons -c`: nothing the build wrote is left, including
    the dropped arch's device objects and device link."""
    p = _omp_project(tmp_path, "env.OffloadProgram('app', ['src/a.c'])",
                     "OFFLOAD_ARCHS=ARGUMENTS.get('archs', 'sm_80,gfx90a,gfx1030').split(',')")
    p.write("src/notes.gfx1030.txt", "a user file that looks like an arch file but is not ours\n")
    p.scons()
    assert (p.root / "src" / "a.gfx1030.bc").exists() and (p.root / "app.gfx1030.devlink.o").exists()
    p.scons("archs=sm_80,gfx90a")
    p.scons("-c", "archs=sm_80,gfx90a")
    left = sorted(str(f.relative_to(p.root)) for f in p.root.rglob("*") if f.is_file())
    # (the build's state stays, as SCons's own: its signatures and the compiler probes' answers)
    assert left == [".sconsign.dblite", ".sconsign.offload-probes.json", "SConstruct", "src/a.c",
                    "src/notes.gfx1030.txt"], left


@pytest.mark.parametrize("archs, message", [
    ("sm_80:xnack+", "NVIDIA offload archs take no target features"),
    ("gfx90a,sm_90:sramecc-", "NVIDIA offload archs take no target features"),
])
def test_arch_mistakes_are_errors(tmp_path, archs, message):
    p = _omp_project(tmp_path, "env.OffloadProgram('app', ['src/a.c'])", f"OFFLOAD_ARCHS={archs!r}")
    cp = p.scons(check=False)
    assert cp.returncode != 0 and message in cp.stderr and "Traceback" not in cp.stderr, cp.stderr


def test_two_requests_for_one_target_that_want_different_things(tmp_path):
    p = _omp_project(tmp_path, "env.OffloadObject('src/a.c')\nenv.OffloadObject('src/a.c', OFFLOAD_ARCHS=['gfx90a'])",
                     "OFFLOAD_ARCHS=['sm_80', 'gfx90a']")
    cp = p.scons(check=False)
    assert cp.returncode != 0 and "already built with other settings" in cp.stderr and "src/a.o" in cp.stderr
    p.write("SConstruct", _sconstruct(
        "env.OffloadObject('src/a.c')\nenv.OffloadObject('src/a.c')\n"
        "env.OffloadObject('src/a.c', target='src/a-amd.o', OFFLOAD_ARCHS=['gfx90a'])",
        "OFFLOAD_CLANG='clang-19', OFFLOAD_ARCHS=['sm_80', 'gfx90a']"))
    p.scons("-n")



@pytest.mark.parametrize("second, names", [
    # reaches the host and device compiles only through $_CPPINCFLAGS, which no list named
    ("'CPPPATH': ['inc2']", "CPPPATH: 'inc1' -> 'inc2'"),
    # a variable of the user's own, read by a flag variable
    ("'MY_OPT': '-O1'", "MY_OPT: '-O2' -> '-O1'"),
    ("'OFFLOAD_DEVICEFLAGS': ['-DX=2']", "OFFLOAD_DEVICEFLAGS: '-DX=1' -> '-DX=2'"),
])
def test_a_second_request_is_compared_by_its_commands(tmp_path, second, names):
    """Whatever reaches a step's command makes two requests for one target differ, without a list
    of variables to keep: the registry compares the commands themselves. A variable that reaches no
    step makes no difference."""
    first = "'CPPPATH': ['inc1'], 'MY_OPT': '-O2', 'OFFLOAD_DEVICEFLAGS': ['-DX=1']"
    p = _omp_project(tmp_path, f"env.OffloadObject('src/a.c', **{{{first}}})\n"
                     f"env.OffloadObject('src/a.c', **{{{first}, {second}}})",
                     "OFFLOAD_ARCHS=['sm_80', 'gfx90a'], CCFLAGS=['$MY_OPT']")
    cp = p.scons("-n", check=False)
    out = assert_clean_failure(cp)
    assert "already built with other settings" in out and "src/a.o" in out and names in out, out
    p.write("SConstruct", _sconstruct(
        f"env.OffloadObject('src/a.c', **{{{first}}})\n"
        f"env.OffloadObject('src/a.c', **{{{first}, 'UNUSED_BY_ANY_STEP': 1}})",
        "OFFLOAD_CLANG='clang-19', OFFLOAD_ARCHS=['sm_80', 'gfx90a'], CCFLAGS=['$MY_OPT']"))
    p.scons("-n")

def test_a_way_of_building_is_one_flavour_and_one_record(tmp_path):
    """A toy flavour (clang's per-arch graph with a runtime of its own, here an rpath its link
    adds) and a toy language naming it, from the SConstruct: its sources get per-arch device
    nodes, its programs link with the flavour's runtime flags, and a static library's ld script
    names the flavour's library inputs."""
    need_tool("clang-19")
    p = Project(tmp_path)
    p.write("SConstruct", _sconstruct(
        "env.OffloadAddFlavour('toy-clang', link_flags=['-Wl,-rpath,/toy/flavour/lib'], library_inputs=['-lm'])\n"
        "env.OffloadAddLanguage('toy', suffixes=['.omp'], offload_kind='openmp', vendors=['amd'],\n"
        "    host_flags='-x c -fopenmp -fopenmp-targets=amdgcn-amd-amdhsa $_OFFLOAD_SOURCE_ID',\n"
        "    device_flags='-x c -fopenmp $_OFFLOAD_SOURCE_ID', file_identity=True,\n"
        "    flavours=[('clang', 'toy-clang')])\n"
        "env.OffloadProgram('app', ['src/a.omp'])\n"
        "env.OffloadStaticLibrary('lib/toy', ['src/b.omp'])",
        "OFFLOAD_CLANG='clang-19', OFFLOAD_ARCHS=['sm_80', 'gfx90a']"))
    p.write("src/a.omp", OMP_SRC)
    p.write("src/b.omp", "int b(void) { int r = 1;\n#pragma omp target map(tofrom: r)\n r = 0;\n return r; }\n")
    cp = p.scons()
    assert device_archs(cp) == {"gfx90a": 2}
    out = run_built(p.root / "app")
    assert out.returncode == 0 and "PASS" in out.stdout
    dynamic = subprocess.run(["readelf", "-d", str(p.root / "app")], capture_output=True, text=True).stdout
    assert "/toy/flavour/lib" in dynamic
    assert "-lm" in (p.root / "lib/libtoy.a").read_text()


HIP_SPIRV_SRC = """#ifdef __HIP_DEVICE_COMPILE__
#define __global__ __attribute__((global))
#else
#include <hip/hip_runtime.h>
#endif
__global__ void k(int *p) { *p = 1; }
"""


def test_hip_on_spirv_is_one_flavour_one_record_and_its_arch_rule(tmp_path):
    """A toy HIP on SPIR-V from the SConstruct: `amdgcnspirv` as a vendor of its own (one arch
    rule), a flavour on clang's per-arch graph, and a language record built for that vendor. Its
    source gets one device compile, for `amdgcnspirv` only, packaged with the SPIR-V triple; the
    OpenMP source beside it, whose vendors are NVIDIA and AMD, is no longer built for it (the
    rule took it from AMD's archs). clang 19 compiles HIP for `amdgcnspirv` to bitcode (the new
    driver with relocatable device code); it cannot make SPIR-V itself (no `llvm-spirv`), so
    nothing is linked. The device compile names neither the GPU headers nor libraries, which
    clang 19 cannot compile for SPIR-V."""
    need_tool("clang-19")
    p = Project(tmp_path)
    p.write("SConstruct", _sconstruct(
        "env.OffloadAddArchs('amd-spirv', ['amdgcnspirv'], triple='spirv64-amd-amdhsa')\n"
        "env.OffloadAddFlavour('hip-spirv-clang', link_flags=['-lamdhip64'], library_inputs=['-lamdhip64'])\n"
        "env.OffloadAddLanguage('hip-spirv', suffixes=['.hipspv'], offload_kind='hip', vendors=['amd-spirv'],\n"
        "    host_flags='-x hip --offload-new-driver -fgpu-rdc -Xclang -cuid=$_OFFLOAD_CUID $_OFFLOAD_ROCMFLAGS',\n"
        "    device_flags='-x hip --offload-new-driver -fgpu-rdc -Xclang -cuid=$_OFFLOAD_CUID -nogpuinc -nogpulib',\n"
        "    flavours=[('clang', 'hip-spirv-clang')])\n"
        "env.OffloadObject('src/k.hipspv')\n"
        "env.OffloadObject('src/a.c')",
        "OFFLOAD_CLANG='clang-19', OFFLOAD_ARCHS=['sm_80', 'amdgcnspirv']"))
    p.write("src/k.hipspv", HIP_SPIRV_SRC)
    p.write("src/a.c", OMP_SRC)
    cp = p.scons()
    assert sorted((kind, rest.split()[0], rest.split()[-1]) for kind, rest in actions(cp) if kind == "DEVICE") == [
        ("DEVICE", "amdgcnspirv", "src/k.hipspv"), ("DEVICE", "sm_80", "src/a.c")]
    images = [(i["triple"], i["arch"], i["image_kind"]) for i in inspect_json(p.root / "src/k.o")]
    assert images == [("spirv64-amd-amdhsa", "amdgcnspirv", "llvm ir")]


def test_a_language_is_one_record(tmp_path):
    """A toy language (OpenMP offload C in `.omp` files, built for AMD archs only) added as one
    `Language` record, from the SConstruct: its sources get per-arch device nodes and link."""
    need_tool("clang-19")
    p = Project(tmp_path)
    p.write("SConstruct", _sconstruct(
        "env.OffloadAddLanguage('toy', suffixes=['.omp'], offload_kind='openmp', vendors=['amd'],\n"
        "    host_flags='-x c -fopenmp -fopenmp-targets=amdgcn-amd-amdhsa $_OFFLOAD_SOURCE_ID',\n"
        "    device_flags='-x c -fopenmp $_OFFLOAD_SOURCE_ID', file_identity=True)\n"
        "env.OffloadProgram('app', ['src/a.omp'])",
        "OFFLOAD_CLANG='clang-19', OFFLOAD_ARCHS=['sm_80', 'gfx90a']"))
    p.write("src/a.omp", OMP_SRC)
    cp = p.scons()
    assert device_archs(cp) == {"gfx90a": 1}
    out = run_built(p.root / "app")
    assert out.returncode == 0 and "PASS" in out.stdout
