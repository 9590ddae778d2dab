"""Finding and identifying the toolchains the offload tool drives (clang, nvcc, hipcc).

A compiler's layout is never guessed from where its executable lives: `/usr/lib/ccache/clang-19`
is a symlink to ccache, a Spack or site wrapper is a script in a folder of its own, and neither has
LLVM's `lib` beside it. So the compiler is asked, through the same command and with the
same environment the build will run it with:

- `--version`: its identity (part of every signature of what it builds) and major version;
- `-print-file-name=libomptarget.so` and the OpenMP device runtime's name: where LLVM's OpenMP
  runtime lives (rpath, `-L`, and the NVIDIA device bitcode that clang 19 must be told about).

The queries run in parallel, once per (command, resolved path, PATH) per SCons process."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import subprocess

import SCons.Errors

from offload_tool.rules.target_id import DEVICE_TRIPLES

from ..scons import actions as _actions
from ..scons import nodes as _nodes
from . import probe_cache as _probe_cache
from .probe_cache import clang_executable  # noqa: F401  (the tool's other modules ask it here)

# The Debian package that provides each tool, for "not found" messages.
DEBIAN_PACKAGES = {
    "clang": "clang-19 (or clang-22)",
    "clang-linker-wrapper": "clang-tools-19",
    "nvcc": "the CUDA toolkit (nvidia-cuda-toolkit, or NVIDIA's cuda-toolkit in /usr/local/cuda)",
    "hipcc": "hipcc",
    "llvm-ar": "llvm-19",
}

CLANG_MIN_MAJOR = 19
_CLANG_RE = re.compile(r"^clang-(\d+)$")

# Names of the OpenMP device runtime archive: LLVM 19 ships `libomptarget.devicertl.a`, later
# releases `libompdevice.a`.
DEVICE_RUNTIME_NAMES = ("libomptarget.devicertl.a", "libompdevice.a")


@dataclasses.dataclass(frozen=True)
class Compiler:
    """What a compiler command says about itself (see the module docstring)."""

    command: str                  # as the build runs it (a name on the build's PATH, or a path)
    path: str | None              # the command resolved on the build's PATH
    identity: str                 # `--version`, minus the machine-specific InstalledDir line
    major: int | None             # clang major version, when it is a clang
    openmp_lib_dir: str | None    # folder of libomptarget.so (the host OpenMP offload runtime)
    device_runtime: str | None    # path of the OpenMP device runtime archive
    # Folder of `libomptarget-nvptx*.bc`, which clang 19 must be told (looked up once, with the
    # probe; the flag is `installations.CudaInstallation.bitcode_flag`), or None.
    nvptx_bitcode_dir: str | None = None

    @property
    def has_openmp_offload(self) -> bool:
        """OpenMP offload can build and run with this clang: host and device runtimes found."""
        return bool(self.openmp_lib_dir and self.device_runtime)


def _nvptx_bitcode_dir(*folders: str | None) -> str | None:
    """The first of `folders` holding `libomptarget-nvptx*.bc`."""
    for d in filter(None, folders):
        try:
            if any(n.startswith("libomptarget-nvptx") and n.endswith(".bc") for n in os.listdir(d)):
                return d
        except OSError:
            continue
    return None


def build_env(env) -> dict:
    """The process environment the build runs commands with (SCons's `env['ENV']`), as strings:
    a list is a path list, joined with `os.pathsep` as SCons joins it for the commands it runs."""
    out = {str(k): os.pathsep.join(map(str, _nodes.flatten_sequence(v))) if _nodes.is_list(v) else str(v)
           for k, v in env["ENV"].items()}
    out.setdefault("HIP_PLATFORM", "amd")
    return out


def search_path(env) -> list[str]:
    """Directories searched for tools: the build's ENV PATH first, then the caller's PATH."""
    dirs: list[str] = []
    for p in (env["ENV"].get("PATH", ""), os.environ.get("PATH", ""), "/usr/local/cuda/bin"):
        for d in str(p).split(os.pathsep):
            if d and d not in dirs:
                dirs.append(d)
    return dirs


def _run_all(argvs: list[list[str]], penv: dict, stderr: bool = False) -> list[str | None]:
    """Run the commands in parallel; each one's stdout (with its stderr after it when `stderr`:
    clang prints some answers there), or None when it could not run or failed."""
    procs = []
    for argv in argvs:
        try:
            procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT if stderr else subprocess.DEVNULL,
                                          stdin=subprocess.DEVNULL, env=penv, text=True, errors="replace"))
        except OSError:
            procs.append(None)
    out: list[str | None] = []
    for p in procs:
        if p is None:
            out.append(None)
            continue
        try:
            stdout, _ = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            out.append(None)
            continue
        out.append(stdout if p.returncode == 0 else None)
    return out


def run_quietly(env, argv: list[str]) -> str | None:
    """What `argv` prints (standard output and error together), run as the build runs commands,
    or None when it cannot run; for the configuration checks that read a compiler's warnings."""
    try:
        cp = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=build_env(env), text=True, errors="replace", timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return cp.stdout


def run_quietly_kept(env, command: str, path: str, argv: list[str], folder: str | None) -> str | None:
    """`run_quietly(env, [path, *argv])`, its answer kept in the probe cache while the compiler's
    installation and `folder` (what the question is about: a CUDA or ROCm device-library folder)
    are unchanged, so a configuration check costs no compiler run on a null build. Without a
    folder (the compiler's default one, which it finds itself) it is asked every time."""
    if not folder:
        return run_quietly(env, [path, *argv])
    return _kept_quietly(env, command, path, [path, *argv], ["quiet", argv, folder, _probe_cache.folder_state(folder)])


def run_tool_kept(env, command: str, tool: str, argv: list[str]) -> str | None:
    """`tool argv`, where `tool` is a program the clang `command` runs (the ptxas its -### names),
    its answer kept in the probe cache while that clang's installation and the tool's file are
    unchanged: a configuration check that asks it costs no process on a null build."""
    path = resolve(env, command)
    if not path:
        return run_quietly(env, [tool, *argv])
    return _kept_quietly(env, command, path, [tool, *argv], ["tool", tool, argv, _probe_cache.folder_state(tool)])


def _kept_quietly(env, command: str, path: str, run: list[str], probe: list) -> str | None:
    """`run_quietly(env, run)`, kept in the probe cache under the clang `command` (at `path`) and
    `probe` (what the question is about) while an answer came back."""
    return _kept(env, command, path, build_env(env), True, 1, lambda: [run_quietly(env, run)],
                 probe=json.dumps(probe), keep=lambda said: said[0] is not None)[0]


def _identity_text(version_output: str | None) -> str:
    if version_output is None:
        return "unrunnable"
    # Drop the line naming the install folder (clang's "InstalledDir: ..."): machine-specific, and
    # clones or caches on other machines with the same toolchain must agree.
    lines = [ln.strip() for ln in version_output.splitlines() if ln.strip() and not ln.startswith("InstalledDir")]
    return " | ".join(lines)


def _found_file(answer: str | None) -> str | None:
    """A `-print-file-name=`/`-print-prog-name=` answer: an existing absolute path, or None (the
    compiler echoes the bare name back when it finds nothing)."""
    if not answer:
        return None
    path = answer.strip()
    return os.path.normpath(path) if os.path.isabs(path) and os.path.exists(path) else None


_COMPILERS: dict[tuple, Compiler] = {}


def probe_compiler(env, command: str, clang: bool = True) -> Compiler:
    """The `Compiler` record of `command` as the build would run it (memoised). For non-clang
    compilers (nvcc, hipcc) only the identity is asked."""
    path = resolve(env, command)
    key = (command, path, str(env["ENV"].get("PATH", "")), clang)
    if key in _COMPILERS:  # asked per node: the look-up stays a dictionary hit
        return _COMPILERS[key]
    penv = build_env(env)
    if path is None:
        info = Compiler(command, None, "missing", None, None, None)
    else:
        queries = [[path, "--version"]]
        if clang:
            queries += [[path, "-print-file-name=libomptarget.so"]]
            queries += [[path, f"-print-file-name={n}"] for n in DEVICE_RUNTIME_NAMES]
        answers = _asked(env, command, path, penv, clang, queries)
        identity = _identity_text(answers[0])
        m = re.search(r"clang version (\d+)", identity)
        if clang:
            omp = _found_file(answers[1])
            runtimes = [_found_file(a) for a in answers[2:2 + len(DEVICE_RUNTIME_NAMES)]]
            lib_dir = os.path.dirname(omp) if omp else None
            runtime = next(filter(None, runtimes), None)
            info = Compiler(command, path, identity, int(m.group(1)) if m else None, lib_dir, runtime,
                            _nvptx_bitcode_dir(lib_dir, os.path.dirname(runtime or "")))
        else:
            info = Compiler(command, path, identity, int(m.group(1)) if m else None, None, None)
    _COMPILERS[key] = info
    return info


def _kept(env, command: str, path: str, penv: dict, clang: bool, count: int, ask, probe: str = "",
          keep=lambda answers: True, paths=lambda answers: []) -> list:
    """The `count` answers of a probe of the compiler `command` (at `path`): kept from an earlier
    run of this build when its installation (and what `probe` names) is unchanged
    (`_probe_cache`), else `ask()`ed now and kept when `keep(answers)`, with the files they name
    (`paths(answers)`: an answer naming a file that is gone is asked again)."""
    top = _nodes.abspath(env.Dir("#"))
    k = _probe_cache.key(command, path, penv, clang, probe=probe)
    entry = _probe_cache.load(top, k) if k else None
    if entry is not None and len(entry["answers"]) == count:
        return entry["answers"]
    answers = ask()
    if k and keep(answers):
        _probe_cache.store(top, k, answers, paths(answers))
    return answers


def _asked(env, command: str, path: str, penv: dict, clang: bool, queries: list[list[str]]) -> list[str | None]:
    """The answers to `queries`: kept from an earlier run of this build when the compiler's
    installation is unchanged (`_probe_cache`), else asked now (and kept)."""
    return _kept(env, command, path, penv, clang, len(queries), lambda: _run_all(queries, penv),
                 keep=lambda answers: answers[0] is not None,
                 paths=lambda answers: [p for p in map(_found_file, answers[1:]) if p])


#: The device target whose processors a clang lists for each vendor (`--print-supported-cpus`).
_CPU_TARGETS = tuple(DEVICE_TRIPLES.items())   # (vendor, device triple): AMD's, then NVIDIA's
_OFFLOAD_ARCHS: dict[tuple, dict[str, frozenset[str]] | None] = {}


def offload_archs(env, command: str, nvcc: bool = False) -> dict[str, frozenset[str]] | None:
    """{vendor: the processor names `command` knows} (memoised; kept between runs with the other
    probes' answers, `_probe_cache`), or None when it cannot say. Which archs exist changes with
    the compiler, not only with the newest LLVM this tool knows of (LLVM 20 dropped gfx940 and
    gfx941, which clang 19 builds; CUDA 13 dropped sm_70), so the compiler in use is asked:

    - clang: `--target=<vendor's device triple> -nogpulib --print-supported-cpus`, for AMD and
      NVIDIA (its backend's processors, aliases such as `fiji` included);
    - nvcc: `--list-gpu-code` (`sm_NN`) and `--list-gpu-arch` (`compute_NN`), its NVIDIA archs.
      nvcc lists no accelerated or family variants (`sm_90a`, `sm_100f`); each listed `sm_NN`
      stands for those too, and nvcc itself refuses one its GPU lacks (`sm_80a`)."""
    path = resolve(env, command)
    if path is None:
        return None
    key = (command, path, str(env["ENV"].get("PATH", "")), nvcc)
    if key in _OFFLOAD_ARCHS:
        return _OFFLOAD_ARCHS[key]
    if nvcc:
        queries = [[path, "--list-gpu-code"], [path, "--list-gpu-arch"]]
    else:
        queries = [[path, f"--target={triple}", "-nogpulib", "--print-supported-cpus"] for _, triple in _CPU_TARGETS]
    penv = build_env(env)

    def ask() -> list:
        said = _run_all(queries, penv, stderr=not nvcc)
        return [_nvcc_archs(text) for text in said] if nvcc else [_listed_cpus(text) for text in said]

    names = _kept(env, command, path, penv, not nvcc, len(queries), ask, probe="offload-archs",
                  keep=lambda names: all(n is not None for n in names))
    if any(n is None for n in names):
        found = None
    elif nvcc:
        sm = frozenset(names[0])
        found = {"nvidia": sm | {a + v for a in sm for v in "af"} | frozenset(names[1])}
    else:
        found = {vendor: frozenset(n) for (vendor, _), n in zip(_CPU_TARGETS, names)}
    _OFFLOAD_ARCHS[key] = found
    return found


def _listed_cpus(text: str | None) -> list[str] | None:
    """The names under clang's `Available CPUs for this target:` (one per indented line), sorted;
    None when it printed no such list."""
    if not text or "Available CPUs for this target:" not in text:
        return None
    names = []
    for line in text.split("Available CPUs for this target:", 1)[1].splitlines()[1:]:
        if line.strip() and not line[:1].isspace():
            break
        names.extend(line.split())
    return sorted(names) or None


def _nvcc_archs(text: str | None) -> list[str] | None:
    """The `sm_NN` / `compute_NN` names nvcc listed, sorted; None when it listed none."""
    names = sorted(set(re.findall(r"\b(?:sm|compute)_\w+", text or "")))
    return names or None


def compiler_words(env, command: str, nvcc: bool = False) -> str:
    """`command` with its release, for messages: `clang-22 (LLVM 22)`, `nvcc (CUDA 13.0)`."""
    info = probe_compiler(env, command, clang=not nvcc)
    if nvcc:
        m = re.search(r"release (\d+\.\d+)", info.identity)
        return f"{command} (CUDA {m.group(1)})" if m else command
    return f"{command} (LLVM {info.major})" if info.major else command


def find_clang(env) -> str | None:
    """The newest `clang-N` (N >= 19) on the search path that can build OpenMP offload (the
    compiler says where its host and device runtimes are); failing that, the newest `clang-N` at
    all. Each candidate is asked through the command found, so a ccache masquerade folder first on
    PATH is used as it is (and answers for the compiler behind it)."""
    found: dict[int, str] = {}
    for d in search_path(env):
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for n in names:
            m = _CLANG_RE.match(n)
            if m and int(m.group(1)) >= CLANG_MIN_MAJOR and int(m.group(1)) not in found:
                path = os.path.join(d, n)
                if os.access(path, os.X_OK):
                    found[int(m.group(1))] = path
    if not found:
        return None
    majors = sorted(found, reverse=True)
    best = next((found[m] for m in majors if probe_compiler(env, _command_for(env, found[m])).has_openmp_offload),
                found[majors[0]])
    return _command_for(env, best)


def _command_for(env, path: str) -> str:
    """The bare name when the build's own ENV PATH finds this very file for it (keeps absolute
    paths out of command lines and signatures), else the path."""
    found = env.WhereIs(os.path.basename(path))
    return os.path.basename(path) if found and os.path.abspath(found) == os.path.abspath(path) else path


def find_program(env, names: list[str]) -> str | None:
    """First of `names` found; the bare name when the build's ENV PATH finds it, else the path."""
    path = search_path(env)
    for n in names:
        p = env.WhereIs(n, path=path)
        if p:
            return _command_for(env, p)
    return None


_resolved: dict[tuple[str, str], str | None] = {}


def resolve(env, program: str) -> str | None:
    """Absolute path of a program name or path as the build would run it (memoised per
    (program, PATH): signatures ask for it once per node)."""
    if os.sep in program:
        return program if os.access(program, os.X_OK) else None
    key = (program, str(env["ENV"].get("PATH", "")))
    if key not in _resolved:
        _resolved[key] = env.WhereIs(program, path=search_path(env))
    return _resolved[key]


def require(env, var: str, tool: str) -> str:
    """The program in construction variable `var`, resolved; a UserError naming the tool and its
    Debian package when it is missing."""
    value = env.subst("$" + var) if env.get(var) else ""
    if not value:
        raise SCons.Errors.UserError(
            f"offload: {tool} not found (set {var}); install the Debian package {DEBIAN_PACKAGES[tool]}")
    path = resolve(env, value)
    if path is None:
        raise SCons.Errors.UserError(
            f"offload: {tool} '{value}' ({var}) not found; install the Debian package {DEBIAN_PACKAGES[tool]}")
    return path


def clang_companion(env, clang: str, name: str) -> str | None:
    """`clang++-19` for `clang-19`, or `/x/clang++` for `/x/clang` (also in a ccache masquerade
    folder), when the build finds that program; None otherwise (a wrapper script has none)."""
    d, b = os.path.split(clang)
    if "clang" not in b:
        return None
    other = os.path.join(d, b.replace("clang", name, 1)) if d else b.replace("clang", name, 1)
    return other if resolve(env, other) else None


_FILE_NAMES: dict[tuple, str | None] = {}


def print_file_name(env, command: str, name: str) -> str | None:
    """Where the compiler finds library file `name` (`-print-file-name=`), or None (memoised)."""
    path = resolve(env, command)
    if path is None:
        return None
    key = (path, str(env["ENV"].get("PATH", "")), name)
    if key not in _FILE_NAMES:
        _FILE_NAMES[key] = _found_file(_run_all([[path, f"-print-file-name={name}"]], build_env(env))[0])
    return _FILE_NAMES[key]


_HIP_DRIVERS: dict[tuple, str | None] = {}


def hip_default_driver(env, command: str) -> str | None:
    """'new' or 'old': the offload driver `command` uses for HIP when not told which, or None
    when it cannot say (memoised per command, resolved path and PATH).

    The compiler is asked, never judged by its version (ROCm's clang and upstream clang of one
    version number differ): `-###` of an RDC HIP compile prints the commands it would run. The
    new driver packages device code into an OffloadBinary (`clang-offload-packager`, or since
    LLVM 22 `-fembed-offload-object` alone); the old one bundles it (`clang-offload-bundler`)."""
    path = resolve(env, command)
    if path is None:
        return None
    key = (command, path, str(env["ENV"].get("PATH", "")))
    if key not in _HIP_DRIVERS:
        argv = [path, "-x", "hip", "-fgpu-rdc", "--offload-arch=gfx90a", "-nogpulib", "-nogpuinc",
                "-###", "-c", "-o", os.devnull, os.devnull]
        try:
            cp = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=build_env(env), text=True, errors="replace", timeout=120)
            text = cp.stdout if cp.returncode == 0 else ""
        except (OSError, subprocess.TimeoutExpired):
            text = ""
        if "-fembed-offload-object" in text or "clang-offload-packager" in text:
            _HIP_DRIVERS[key] = "new"
        elif "clang-offload-bundler" in text:
            _HIP_DRIVERS[key] = "old"
        else:
            _HIP_DRIVERS[key] = None
    return _HIP_DRIVERS[key]


def argv_as_run(cmd, env, penv: dict) -> list[str]:
    """The arguments the compiler gets when SCons runs the command line `cmd` (a substituted
    list): SCons escapes each word and hands the line to the shell, which removes the quoting
    (`CPPDEFINES=[('VERSION', '\\\\"1.0\\\\"')]` reaches the compiler as `-DVERSION="1.0"`). The
    shell itself splits a line that expands something (`$`, a backquote); `shlex` the others."""
    line = " ".join(map(str, _actions.escaped(cmd, env)))
    if "$" not in line and "`" not in line:
        return shlex.split(line)
    run = subprocess.run(["/bin/sh", "-c", 'printf "%s\\0" ' + line], capture_output=True, env=penv, timeout=60)
    return run.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1]


# --------------------------------------------------------------------------------------------
# The compiler in use: its answers as the builders and commands need them (the callables among
# them are construction variables, `_variables.CALLABLES`; each answers from the memoised probe,
# so substituting a command per node costs a dictionary look-up, not a process)

def clang_info(env) -> Compiler | None:
    """What the clang in use (`$OFFLOAD_CLANG`, maybe a wrapper or ccache) says about itself."""
    clang = env.subst("$OFFLOAD_CLANG") if env.get("OFFLOAD_CLANG") else ""
    return probe_compiler(env, clang) if clang else None


def clang_major(env) -> int:
    """Major version of the clang in use: from its name (`clang-22`) when it says, else asked."""
    clang = env.subst("$OFFLOAD_CLANG") if env.get("OFFLOAD_CLANG") else ""
    m = re.search(r"clang(?:\+\+)?-(\d+)$", os.path.basename(clang))
    if m:
        return int(m.group(1))
    info = clang_info(env)
    return (info.major if info else None) or 19


def library_llvm_version(env) -> int:
    """The `--llvm-version` the library CLIs take for the clang in use: how its OffloadBinary
    kinds are encoded. The library knows two encodings: LLVM 19's, and the one from 20 on."""
    return 19 if clang_major(env) < 20 else 22


def llvm_libdir(env) -> str:
    """Where the clang in use has LLVM's OpenMP offload runtime (libomptarget.so), as it says."""
    info = clang_info(env)
    return (info.openmp_lib_dir or "") if info else ""


def clang_id(target, source, env, for_signature):
    """Identity of the clang in use (`--version`), for the varlist of actions it drives."""
    info = clang_info(env)
    return info.identity if info else "none"


def nvcc_id(target, source, env, for_signature):
    """Identity of `$OFFLOAD_NVCC` (`--version`), for the varlist of actions it drives."""
    nvcc = env.subst("$OFFLOAD_NVCC") if env.get("OFFLOAD_NVCC") else ""
    return probe_compiler(env, nvcc, clang=False).identity if nvcc else "none"


def clangxx(target, source, env, for_signature):
    """The C++ driver of the clang in use: its `clang++` companion when the build finds one, else
    the same command in g++ mode (a wrapper script has no companion)."""
    clang = env.subst("$OFFLOAD_CLANG")
    if not clang:
        return "clang++"
    return clang_companion(env, clang, "clang++") or f"{clang} --driver-mode=g++"
