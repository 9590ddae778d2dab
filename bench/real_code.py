#!/usr/bin/env python3
"""Real code bases built with the offload SCons tool and with their own build system, side by side.

For each code base (BabelStream: CMake; XSBench and RSBench: one Makefile per model) and each
programming model it has among OpenMP offload (clang-19), CUDA (nvcc) and HIP (the tool: clang-19,
old offload driver; the code's own build: hipcc, as its build system asks), this

1. clones the code from a local git repository (by default the mirror under /work/.mirror) into a
   fresh tree per build, so every build starts clean;
2. builds it with the code's own build system (CMake configure + build, or make), -j2;
3. builds it with a generated SConstruct (`OffloadProgram` of the same sources, defines, include
   paths, optimisation level and archs), -j2;
4. appends a comment line to one source file in each tree and rebuilds both;
5. checks each program: OpenMP programs run (no GPU here: libomptarget falls back to the host);
   CUDA and HIP programs must exist and pass `offload-tool verify`.

Wall time and CPU time (user + sys of the build and every process it waited for, from `os.wait4`)
are printed per build, with the ratio tool / own. Targets: full build <= 1.0x, one-file edit
< 1.0x (wall time).

    .venv/bin/python bench/real_code.py                       # everything (~29 min on 2 busy cores)
    .venv/bin/python bench/real_code.py --codes xsbench --models omp,cuda
    .venv/bin/python bench/real_code.py --keep /tmp/rc        # keep the trees for inspection

The sources are never committed; a code base that is not mirrored, a missing compiler or a build
that fails is a row saying why, not an exception.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITE_DIR = ROOT / 'site_scons'
MIRROR = Path('/work/.mirror')
JOBS = 2

CLANG = 'clang-19'
CLANGXX = 'clang++-19'
LLVM_LIB = '/usr/lib/llvm-19/lib'
CUDA = '/usr/local/cuda'
NVCC = CUDA + '/bin/nvcc'
ROCM_DEVICE_LIBS = '/usr/lib/x86_64-linux-gnu/amdgcn/bitcode'
HIPCC = 'hipcc'

# the same archs in both builds
ARCHS = {
    'omp': ['sm_80', 'gfx90a'],
    'cuda': ['sm_80', 'sm_90'],  # own: -arch=sm_80 (SASS + PTX) -gencode sm_90; tool: + compute_80
    'hip': ['gfx90a', 'gfx1030'],
}
# hip: the tool compiles with clang-19 (old offload driver); hip-hipcc: the tool runs hipcc, the
# compiler of the code's own HIP build (Debian's ROCm 5.2 hipcc drives clang-15)
MODELS = ('omp', 'cuda', 'hip', 'hip-hipcc')

# what clang-19 needs to find the device libraries here (the tool finds them by itself; the own
# build gets them on its command line)
OMP_PATH_FLAGS = [f'--libomptarget-nvptx-bc-path={LLVM_LIB}', f'--cuda-path={CUDA}',
                  f'--rocm-device-lib-path={ROCM_DEVICE_LIBS}']
OMP_RPATH = f'-Wl,-rpath,{LLVM_LIB}'

NVML_STUB = r'''/* link-only NVML stub: the program is only built and verified here, never run */
typedef int nvmlReturn_t; typedef void *nvmlDevice_t;
nvmlReturn_t nvmlInit_v2(void){return 1;} nvmlReturn_t nvmlShutdown(void){return 0;}
const char *nvmlErrorString(nvmlReturn_t r){(void)r; return "stub";}
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char*p, nvmlDevice_t*d){(void)p;(void)d;return 1;}
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int t, unsigned*c){(void)d;(void)t;(void)c;return 1;}
'''


CUDA17_NOTE = 'CUDA 13 (CCCL) needs C++17: both builds'


class Skip(Exception):
    """This code base / model cannot be built here; the message says why."""


# ---------------------------------------------------------------------------------------------
# running and timing


@dataclass
class Timing:
    wall: float = 0.0
    cpu: float = 0.0
    ok: bool = True
    what: str = ''

    def add(self, other: 'Timing') -> None:
        self.wall += other.wall
        self.cpu += other.cpu
        self.ok = self.ok and other.ok
        self.what = self.what or other.what


def run_timed(cmd, cwd, env, log: Path, timeout: float) -> Timing:
    """Run cmd; wall time and user+sys CPU of it and every descendant it waited for."""
    with open(log, 'a') as out:
        out.write(f'\n$ (cd {cwd} && {shlex.join(cmd)})\n')
        out.flush()
        start = time.monotonic()
        try:
            proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as e:
            return Timing(ok=False, what=f'cannot start {cmd[0]}: {e}')
        killed = []

        def kill():
            killed.append(True)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)  # Popen must not wait again
        wall = time.monotonic() - start
        cpu = usage.ru_utime + usage.ru_stime
        out.write(f'# rc={proc.returncode} wall={wall:.2f}s cpu={cpu:.2f}s\n')
    if killed:
        return Timing(wall, cpu, False, f'timed out after {timeout:.0f} s: {shlex.join(cmd)[:80]}')
    if proc.returncode != 0:
        return Timing(wall, cpu, False, f'{Path(cmd[0]).name} failed (rc {proc.returncode}), see {log}')
    return Timing(wall, cpu, True)


def run_steps(steps, env, log, timeout) -> Timing:
    total = Timing()
    for cmd, cwd in steps:
        t = run_timed(cmd, cwd, env, log, timeout)
        total.add(t)
        if not t.ok:
            break
    return total


def tail(log: Path, n=6) -> str:
    try:
        lines = log.read_text(errors='replace').splitlines()
    except OSError:
        return ''
    return '\n'.join('    ' + line[:200] for line in lines[-n:])


# ---------------------------------------------------------------------------------------------
# the code bases


@dataclass
class Case:
    """One (code base, model): how its own build and the tool build it."""
    code: str
    model: str
    own_system: str                       # 'cmake' or 'make'
    own_full: list                        # [(cmd, cwd relative to tree)]
    own_rebuild: list
    own_binary: str                       # relative to the tree
    sconstruct: str
    tool_binary: str
    edit: str                             # the source file the one-file edit appends to
    run_args: list = field(default_factory=list)
    env: dict = field(default_factory=dict)
    note: str = ''


def scons_env_header(model: str, archs: list, extra: str) -> str:
    return (
        "import os\n"
        f"env = Environment(tools=['default', 'offload'],\n"
        f"                  ENV={{'PATH': {CUDA + '/bin'!r} + ':' + os.environ['PATH'],"
        f" 'HIP_PLATFORM': 'amd'}},\n"
        f"                  OFFLOAD_CLANG={CLANG!r}, OFFLOAD_ARCHS={archs!r},\n"
        f"                  {extra})\n")


def hip_tool(model: str) -> tuple:
    """The tool's HIP settings and the row's note for 'hip' / 'hip-hipcc'."""
    if model == 'hip-hipcc':
        return ("OFFLOAD_HIP_COMPILER='hipcc', ", 'own and tool: hipcc = ROCm 5.2 (clang-15)')
    return ('', 'own: hipcc = ROCm 5.2 (clang-15); tool: clang-19')


def babelstream(model: str, ctx) -> Case:
    variant, model = model, model.split('-')[0]
    src = {'omp': ['src/omp/OMPStream.cpp'], 'cuda': ['src/cuda/CUDAStream.cu'],
           'hip': ['src/hip/HIPStream.cpp']}[model]
    exe = {'omp': 'omp-stream', 'cuda': 'cuda-stream', 'hip': 'hip-stream'}[model]
    common = ['-DCMAKE_BUILD_TYPE=Release', '-DBUILD_NATIVE=OFF', f'-DMODEL={model}']
    env, note = {}, ''
    incs = ['src', f'src/{model}']
    if model == 'omp':
        flags = ['-fopenmp', '--offload-arch=' + ','.join(ARCHS['omp'])] + OMP_PATH_FLAGS
        cfg = common + [f'-DCMAKE_CXX_COMPILER={CLANGXX}', '-DOFFLOAD=ON',
                        '-DOFFLOAD_FLAGS=' + ';'.join(flags), f'-DCXX_EXTRA_LINK_FLAGS={OMP_RPATH}']
        sc = scons_env_header('omp', ARCHS['omp'],
                              f"CPPPATH={incs!r}, CPPDEFINES=['DEFAULT', 'OMP', 'OMP_TARGET_GPU', 'NDEBUG'],\n"
                              "                  CXXFLAGS=['-O3', '-std=c++14']")
        sc += f"env.OffloadProgram({exe!r}, {src + ['src/main.cpp']!r})\n"
        run_args = ['-s', '1048576', '-n', '3']
    elif model == 'cuda':
        nvml = ctx.nvml_include()
        stub = ctx.nvml_stub()
        cfg = common + [f'-DCMAKE_CUDA_COMPILER={NVCC}', '-DCUDA_ARCH=sm_80',
                        '-DCUDA_EXTRA_FLAGS=-gencode;arch=compute_90,code=sm_90',
                        '-DCMAKE_CUDA_STANDARD=17', f'-DCXX_EXTRA_FLAGS=-I{nvml}']
        if stub:
            cfg.append(f'-DCXX_EXTRA_LINK_FLAGS=-L{stub}')
        sc = scons_env_header('cuda', ['sm_80', 'compute_80', 'sm_90'],
                              "OFFLOAD_CUDA_COMPILER='nvcc',\n"
                              f"                  CPPPATH={incs + [nvml]!r},\n"
                              "                  CPPDEFINES=['CUDA', 'DEFAULT', 'GRID_STRIDE', 'NDEBUG'],\n"
                              "                  CXXFLAGS=['-O3'],\n"
                              "                  OFFLOAD_NVCCFLAGS=['-forward-unknown-to-host-compiler', "
                              "'--extended-lambda', '-DUNROLL_FACTOR=4', '-std=c++17'],\n"
                              f"                  LIBPATH={[stub] if stub else []!r}, LIBS=['nvidia-ml']")
        # as CMake: nvcc -std=c++17 (CMAKE_CUDA_STANDARD), the host compiler -std=c++14 for main.cpp
        sc += ("main = env.Clone(CXXFLAGS=['-O3', '-std=c++14']).OffloadObject('src/main.cpp', OFFLOAD_LANG='host')\n"
               f"env.OffloadProgram({exe!r}, {src!r} + [main])\n")
        run_args = []
        note = CUDA17_NOTE + ' -DCMAKE_CUDA_STANDARD=17'
        if stub:
            note += '; libnvidia-ml: link-only stub'
    else:
        cfg = common + [f'-DCMAKE_CXX_COMPILER={ctx.which(HIPCC)}',
                        '-DCXX_EXTRA_FLAGS=' + ';'.join('--offload-arch=' + a for a in ARCHS['hip'])]
        env = {'HIP_PLATFORM': 'amd'}
        # main.cpp includes HIPStream.h (hip_runtime.h): hipcc compiles it as HIP, as does the tool
        hipcc, note = hip_tool(variant)
        sc = scons_env_header('hip', ARCHS['hip'],
                              hipcc + "OFFLOAD_HIP_DRIVER='old', OFFLOAD_LANG='hip',\n"
                              f"                  CPPPATH={incs!r}, CPPDEFINES=['DEFAULT', 'HIP', 'NDEBUG'],\n"
                              "                  CXXFLAGS=['-O3', '-std=c++14']")
        sc += f"env.OffloadProgram({exe!r}, {src + ['src/main.cpp']!r})\n"
        run_args = []
    return Case('babelstream', variant, 'cmake',
                own_full=[(['cmake', '-S', '.', '-B', 'build'] + cfg, '.'),
                          (['cmake', '--build', 'build', f'-j{JOBS}'], '.')],
                own_rebuild=[(['cmake', '--build', 'build', f'-j{JOBS}'], '.')],
                own_binary=f'build/{exe}', sconstruct=sc, tool_binary=exe, edit=src[0],
                run_args=run_args, env=env, note=note)


def anl_bench(code: str, model: str, ctx) -> Case:
    """XSBench and RSBench (ANL): one folder per model, each with a plain Makefile."""
    xs = code == 'xsbench'
    variant, model = model, model.split('-')[0]
    prog = 'XSBench' if xs else 'rsbench'
    folder = {'omp': 'openmp-offload', 'cuda': 'cuda', 'hip': 'hip'}[model]
    suffix = {'omp': '.c', 'cuda': '.cu', 'hip': '.cpp' if xs else '.hip'}[model]
    tree = ctx.pristine(code) / folder
    if not tree.is_dir():
        raise Skip(f'{code} has no {folder}/')
    sources = sorted(p.name for p in tree.iterdir() if p.suffix == suffix)
    kernel = 'Simulation' if xs else 'simulation'
    env, note = {}, ''
    if model == 'omp':
        # the Makefile's COMPILER=llvm line (-fopenmp -fopenmp-targets=... -march=sm_80) for two archs
        cflags = ['-std=gnu99', '-Wall', '-fopenmp', '--offload-arch=' + ','.join(ARCHS['omp'])] \
            + OMP_PATH_FLAGS + ['-O3']
        make_vars = [f'CC={CLANG}', 'CFLAGS=' + ' '.join(cflags), f'LDFLAGS=-lm {OMP_RPATH}']
        extra = "CFLAGS=['-std=gnu99', '-Wall', '-O3'], LIBS=['m']"
        run_args = ['-m', 'event', '-s', 'small', '-l', '20000']
    elif model == 'cuda':
        # the Makefile's COMPILER=nvidia line with -arch=sm_80 plus sm_90
        cflags = ['-Xcompiler', '-Wall', '-Xcompiler', '-O3', '-arch=sm_80',
                  '-gencode', 'arch=compute_90,code=sm_90', '-std=c++17', '-O3']
        make_vars = [f'CC={NVCC}', 'CFLAGS=' + ' '.join(cflags)]
        extra = ("OFFLOAD_CUDA_COMPILER='nvcc', OFFLOAD_HOSTFLAGS=['-Wall', '-O3'],\n"
                 "                  OFFLOAD_NVCCFLAGS=['-std=c++17', '-O3'], LIBS=['m']")
        run_args = []
        note = CUDA17_NOTE + ' the Makefile\'s -std=c++14 -> c++17'
    else:
        cflags = ['-std=c++14', '-O3'] + ['--offload-arch=' + a for a in ARCHS['hip']]
        make_vars = [f'CC={ctx.which(HIPCC)}', 'CFLAGS=' + ' '.join(cflags)]
        env = {'HIP_PLATFORM': 'amd'}
        hipcc, note = hip_tool(variant)
        extra = (hipcc + "OFFLOAD_HIP_DRIVER='old', OFFLOAD_LANG='hip',\n"
                 "                  CXXFLAGS=['-std=c++14', '-O3'], LIBS=['m']")
        run_args = []
    archs = ['sm_80', 'compute_80', 'sm_90'] if model == 'cuda' else ARCHS[model]
    sc = scons_env_header(model, archs, extra)
    sc += f"env.OffloadProgram({folder + '/' + prog!r}, {[folder + '/' + s for s in sources]!r})\n"
    make = ['make', f'-j{JOBS}'] + make_vars
    return Case(code, variant, 'make', own_full=[(make, folder)], own_rebuild=[(make, folder)],
                own_binary=f'{folder}/{prog}', sconstruct=sc, tool_binary=f'{folder}/{prog}',
                edit=f'{folder}/{kernel}{suffix}', run_args=run_args, env=env, note=note)


CODES = {
    'babelstream': ('UoB-HPC+BabelStream', babelstream),
    'xsbench': ('ANL-CESAR+XSBench', lambda m, ctx: anl_bench('xsbench', m, ctx)),
    'rsbench': ('ANL-CESAR+RSBench', lambda m, ctx: anl_bench('rsbench', m, ctx)),
}


# ---------------------------------------------------------------------------------------------


class Context:
    def __init__(self, work: Path, repos: dict, timeout: float, nvml_include: str | None):
        self.work = work
        self.repos = repos
        self.timeout = timeout
        self._nvml_include = nvml_include
        self._stub = None

    def which(self, tool: str) -> str:
        found = shutil.which(tool)
        if not found:
            raise Skip(f'{tool} not found on PATH')
        return found

    def pristine(self, code: str) -> Path:
        dest = self.work / code / 'pristine'
        if not dest.is_dir():
            repo = self.repos[code]
            if not Path(repo).exists():
                raise Skip(f'no repository at {repo} (not mirrored)')
            dest.parent.mkdir(parents=True, exist_ok=True)
            r = subprocess.run(['git', 'clone', '-q', '--no-checkout', str(repo), str(dest)],
                               capture_output=True, text=True, timeout=300)
            if r.returncode != 0:
                raise Skip(f'git clone {repo} failed: {r.stderr.strip()[:120]}')
            # large data files of some snapshots are absent: check out the sources only
            r = subprocess.run(['git', 'checkout', '-q', 'HEAD', '--', '.'], cwd=dest,
                               capture_output=True, text=True, timeout=300)
            if r.returncode != 0:
                raise Skip(f'git checkout in {dest} failed: {r.stderr.strip()[:120]}')
        return dest

    def fresh_tree(self, code: str, name: str) -> Path:
        pristine = self.pristine(code)
        dest = self.work / code / name
        if dest.exists():
            shutil.rmtree(dest)
        subprocess.run(['git', 'clone', '-q', '--shared', str(pristine), str(dest)],
                       check=True, capture_output=True, timeout=300)
        return dest

    def nvml_include(self) -> str:
        candidates = [self._nvml_include] if self._nvml_include else []
        candidates += [f'{CUDA}/include', '/usr/include', '/tmp/nvml/nvidia/cu13/include']
        candidates += [str(p.parent) for p in ROOT.glob('.venv/lib/python*/site-packages/nvidia/*/include/nvml.h')]
        for c in candidates:
            if c and Path(c, 'nvml.h').is_file():
                return c
        raise Skip('nvml.h not found (BabelStream CUDA needs it; give --nvml-include DIR)')

    def nvml_stub(self) -> str | None:
        """A folder with a link-only libnvidia-ml.so when the machine has none (no driver here)."""
        probe = subprocess.run(['ldconfig', '-p'], capture_output=True, text=True)
        if 'libnvidia-ml.so ' in probe.stdout:
            return None
        if self._stub is None:
            d = self.work / 'nvml-stub'
            d.mkdir(parents=True, exist_ok=True)
            (d / 'nvmlstub.c').write_text(NVML_STUB)
            subprocess.run(['cc', '-shared', '-fPIC', '-o', str(d / 'libnvidia-ml.so'), str(d / 'nvmlstub.c')],
                           check=True, timeout=60)
            self._stub = str(d)
        return self._stub


def tool_requirements(model: str) -> list:
    need = {'omp': [CLANG, CLANGXX], 'cuda': [NVCC, 'c++'], 'hip': [CLANG, CLANGXX, HIPCC],
            'hip-hipcc': [HIPCC]}[model]
    return [t for t in need if not shutil.which(t)]


def append_edit(path: Path) -> None:
    with open(path, 'a') as f:
        f.write(f'\n// real_code.py one-file edit {time.time_ns()}\n')


def check_program(case: Case, tree: Path, binary: str, log: Path) -> tuple:
    """(what happened, the program's result line or ''): OpenMP programs run, others verify."""
    exe = tree / binary
    if not exe.is_file():
        return f'no {binary}', ''
    if case.model == 'omp':
        env = dict(os.environ)
        env.pop('OMP_TARGET_OFFLOAD', None)
        try:
            r = subprocess.run([str(exe)] + case.run_args, cwd=exe.parent, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        except subprocess.TimeoutExpired:
            return 'run timed out (300 s)', ''
        with open(log, 'a') as f:
            f.write(f'\n$ {shlex.join([str(exe)] + case.run_args)}\n{r.stdout}# rc={r.returncode}\n')
        # XSBench / RSBench validate their checksum only at the default problem size (minutes on
        # the host here): at a smaller one they print it and exit 1; the two builds must agree
        result = next((line.strip() for line in r.stdout.splitlines() if 'checksum' in line.lower()), '')
        if r.returncode == 0 or (r.returncode == 1 and result):
            return 'runs (host fallback)', result.split(' (')[0]
        return f'run failed (rc {r.returncode}), see {log}', ''
    verify = ROOT / '.venv' / 'bin' / 'offload-tool'
    cmd = [str(verify)] if verify.exists() else [sys.executable, '-m', 'offload_tool.cli.tool']
    t = run_timed(cmd + ['verify', str(exe)], tree, dict(os.environ), log, 120)
    return ('verify ok' if t.ok else f'verify failed: {t.what}'), ''


@dataclass
class Row:
    code: str
    model: str
    own_system: str = ''
    tool_full: Timing | None = None
    own_full: Timing | None = None
    tool_edit: Timing | None = None
    own_edit: Timing | None = None
    check_tool: str = ''
    check_own: str = ''
    problem: str = ''
    note: str = ''
    configure: float = 0.0
    repeats: int = 1


def bench_case(case: Case, ctx: Context) -> Row:
    row = Row(case.code, case.model, case.own_system, note=case.note)
    env = dict(os.environ)
    env['PATH'] = f'{CUDA}/bin:' + env['PATH']
    env.update(case.env)
    env['OFFLOAD_PROGRESS'] = 'off'
    logdir = ctx.work / 'logs'
    logdir.mkdir(parents=True, exist_ok=True)
    tag = f'{case.code}-{case.model}'
    own_log, tool_log = logdir / f'{tag}-own.log', logdir / f'{tag}-tool.log'
    for f in (own_log, tool_log):
        f.write_text('')

    own_tree = ctx.fresh_tree(case.code, f'{case.model}-own')
    tool_tree = ctx.fresh_tree(case.code, f'{case.model}-tool')
    (tool_tree / 'SConstruct').write_text(case.sconstruct)
    scons = [sys.executable, '-m', 'SCons', '-Q', f'-j{JOBS}', f'--site-dir={SITE_DIR}']

    def own(steps):
        return run_steps([(c, own_tree / d) for c, d in steps], env, own_log, ctx.timeout)

    def tool():
        return run_timed(scons, tool_tree, env, tool_log, ctx.timeout)

    print(f'  {tag}: own full build ...', flush=True)
    row.own_full = own(case.own_full)
    if case.own_system == 'cmake' and row.own_full.ok:
        row.configure = float(_configure_seconds(own_log))
    print(f'  {tag}: tool full build ...', flush=True)
    row.tool_full = tool()
    if not row.own_full.ok:
        print(f'    own build failed:\n{tail(own_log)}', flush=True)
    if not row.tool_full.ok:
        print(f'    tool build failed:\n{tail(tool_log)}', flush=True)
    result_own = result_tool = ''
    if row.own_full.ok:
        row.check_own, result_own = check_program(case, own_tree, case.own_binary, own_log)
    if row.tool_full.ok:
        row.check_tool, result_tool = check_program(case, tool_tree, case.tool_binary, tool_log)
    if result_own and result_tool:
        row.check_tool += ', same result' if result_own == result_tool else \
            f', DIFFERENT result ({result_tool} vs {result_own})'

    print(f'  {tag}: one-file edit of {case.edit} ...', flush=True)
    if row.own_full.ok:
        append_edit(own_tree / case.edit)
        row.own_edit = own(case.own_rebuild)
    if row.tool_full.ok:
        append_edit(tool_tree / case.edit)
        row.tool_edit = tool()
    problems = []
    for name, t in (('own', row.own_full), ('tool', row.tool_full), ('own edit', row.own_edit),
                    ('tool edit', row.tool_edit)):
        if t is not None and not t.ok:
            problems.append(f'{name}: {t.what}')
    row.problem = '; '.join(problems)
    return row


def median_row(rows: list) -> Row:
    """One row from repeats: the median wall and the median CPU of each measurement."""
    first = rows[0]
    if len(rows) == 1:
        return first
    out = Row(first.code, first.model, first.own_system, check_tool=first.check_tool,
              check_own=first.check_own, note=first.note,
              configure=statistics.median(r.configure for r in rows))
    for name in ('tool_full', 'own_full', 'tool_edit', 'own_edit'):
        ts = [getattr(r, name) for r in rows]
        if any(t is None for t in ts):
            continue
        bad = next((t for t in ts if not t.ok), None)
        setattr(out, name, bad or Timing(statistics.median(t.wall for t in ts),
                                         statistics.median(t.cpu for t in ts)))
    out.problem = '; '.join(dict.fromkeys(r.problem for r in rows if r.problem))
    out.repeats = len(rows)
    return out


def _configure_seconds(log: Path) -> str:
    # the first '# rc=' line of the own log is the configure step
    for line in log.read_text(errors='replace').splitlines():
        if line.startswith('# rc='):
            return line.split('wall=')[1].split('s')[0]
    return '0'


# ---------------------------------------------------------------------------------------------
# the table


def fmt(t: Timing | None) -> str:
    if t is None or not t.ok:
        return '—'
    return f'{t.wall:.1f} / {t.cpu:.1f}'


def ratio(a: Timing | None, b: Timing | None) -> tuple:
    if a is None or b is None or not a.ok or not b.ok or b.wall <= 0:
        return None, None
    return a.wall / b.wall, (a.cpu / b.cpu if b.cpu > 0 else None)


def fmt_ratio(r) -> str:
    w, c = r
    if w is None:
        return '—'
    return f'{w:.2f}x' + (f' ({c:.2f}x)' if c is not None else '')


def table(rows: list) -> str:
    head = ('| code | model | own build | runs | full: tool wall / CPU s | full: own wall / CPU s | '
            'full tool/own wall (CPU) | edit: tool wall / CPU s | edit: own wall / CPU s | '
            'edit tool/own wall (CPU) | targets (full <= 1.0x, edit < 1.0x) | programs | notes |')
    lines = [head, '|' + '---|' * 13]
    for r in rows:
        full, edit = ratio(r.tool_full, r.own_full), ratio(r.tool_edit, r.own_edit)
        if full[0] is None or edit[0] is None:
            met = '—'
        else:
            met = ('full ' + ('met' if full[0] <= 1.0 else 'MISSED') + ', edit '
                   + ('met' if edit[0] < 1.0 else 'MISSED'))
        progs = '—'
        if r.check_tool or r.check_own:
            progs = f'tool: {r.check_tool or "—"}; own: {r.check_own or "—"}'
        notes = []
        if r.configure:
            notes.append(f'own full includes cmake configure {r.configure:.1f} s')
        if r.note:
            notes.append(r.note)
        if r.problem:
            notes.append(r.problem)
        lines.append(f'| {r.code} | {r.model} | {r.own_system or "—"} | {r.repeats} | {fmt(r.tool_full)} | '
                     f'{fmt(r.own_full)} | {fmt_ratio(full)} | {fmt(r.tool_edit)} | {fmt(r.own_edit)} | '
                     f'{fmt_ratio(edit)} | {met} | {progs} | {"; ".join(notes) or ""} |')
    return '\n'.join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--codes', default=','.join(CODES), help=f'comma-separated, of {", ".join(CODES)}')
    ap.add_argument('--models', default=','.join(MODELS), help='comma-separated, of omp, cuda, hip (tool: clang-19), hip-hipcc (tool: hipcc)')
    for code, (mirror, _) in CODES.items():
        ap.add_argument(f'--{code}-repo', default=str(MIRROR / mirror / 'repo'),
                        help=f'git repository of {code} (default: the mirror)')
    ap.add_argument('--keep', metavar='DIR', help='build in DIR and keep it (default: a temp dir, removed)')
    ap.add_argument('--timeout', type=float, default=600, help='seconds per build command (default 600)')
    ap.add_argument('--repeat', type=int, default=3,
                    help='build each case this many times from clean trees, report medians (default 3)')
    ap.add_argument('--repeat-max-s', type=float, default=45,
                    help='repeat a case only when its four builds took at most this many seconds '
                         '(default 45: the slow nvcc and HIP builds run once)')
    ap.add_argument('--nvml-include', help='folder with nvml.h (BabelStream CUDA)')
    args = ap.parse_args(argv)

    codes = [c.strip() for c in args.codes.split(',') if c.strip()]
    models = [m.strip() for m in args.models.split(',') if m.strip()]
    bad = [c for c in codes if c not in CODES] + [m for m in models if m not in MODELS]
    if bad:
        ap.error(f'unknown code base or model: {", ".join(bad)}')
    for t in ('git', 'cmake', 'make'):
        if not shutil.which(t):
            print(f'real_code: error: {t} not found on PATH', file=sys.stderr)
            return 2

    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix='real_code.'))
    work.mkdir(parents=True, exist_ok=True)
    repos = {c: getattr(args, f'{c}_repo') for c in CODES}
    ctx = Context(work.resolve(), repos, args.timeout, args.nvml_include)
    started = time.monotonic()
    print(f'real_code: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, '
          f'{os.cpu_count()} cores, -j{JOBS}, work dir {work}', flush=True)
    rows = []
    try:
        for code in codes:
            for model in models:
                missing = tool_requirements(model)
                if missing:
                    print(f'real_code: error: {code} {model}: not found: {", ".join(missing)}', flush=True)
                    rows.append(Row(code, model, problem='not found: ' + ', '.join(missing)))
                    continue
                try:
                    case = CODES[code][1](model, ctx)
                    reps = []
                    for i in range(args.repeat):
                        if args.repeat > 1:
                            print(f'  {code}-{model}: run {i + 1} of {args.repeat}', flush=True)
                        reps.append(bench_case(case, ctx))
                        first = reps[0]
                        spent = sum(t.wall for t in (first.tool_full, first.own_full, first.tool_edit,
                                                     first.own_edit) if t is not None)
                        if reps[-1].problem or spent > args.repeat_max_s:
                            break
                    rows.append(median_row(reps))
                except Skip as e:
                    print(f'real_code: {code} {model}: skipped: {e}', flush=True)
                    rows.append(Row(code, model, problem=f'skipped: {e}'))
                except subprocess.TimeoutExpired as e:
                    rows.append(Row(code, model, problem=f'timed out: {e}'))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print(table(rows))
    print(f'\nwall / CPU in seconds (CPU = user + sys of the build and its children), median of '
          f'the runs column\'s clean runs; -j{JOBS}; total {time.monotonic() - started:.0f} s')
    return 0 if all(not r.problem for r in rows) else 1


if __name__ == '__main__':
    sys.exit(main())
