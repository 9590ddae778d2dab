"""Finding and identifying the toolchains the offload tool drives (clang, nvcc, hipcc).

Everything here is cheap at SConscript-read time: finding a program is a directory listing, and
the `--version` probe that identifies a toolchain runs lazily (only when a signature is computed)
and is memoised by (real path, mtime), so each binary runs once per SCons process."""

from __future__ import annotations

import os
import re
import subprocess

import SCons.Errors

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


def search_path(env) -> list[str]:
    """Directories searched for tools: the build's ENV PATH first, then the caller's PATH."""
    dirs: list[str] = []
    for p in (env["ENV"].get("PATH", ""), os.environ.get("PATH", ""), "/usr/local/cuda/bin"):
        for d in str(p).split(os.pathsep):
            if d and d not in dirs:
                dirs.append(d)
    return dirs


_LIB_DIRS: dict[str, str | None] = {}


def llvm_lib_dir(clang: str) -> str | None:
    """The `lib` directory of the LLVM installation a clang binary belongs to (Debian layout
    `/usr/lib/llvm-N/bin/clang`), where the OpenMP device runtime lives."""
    if clang not in _LIB_DIRS:
        _LIB_DIRS[clang] = _llvm_lib_dir(clang)
    return _LIB_DIRS[clang]


def _llvm_lib_dir(clang: str) -> str | None:
    real = os.path.realpath(clang)
    lib = os.path.join(os.path.dirname(os.path.dirname(real)), "lib")
    return lib if os.path.isdir(lib) else None


def has_openmp_device_runtime(clang: str) -> bool:
    lib = llvm_lib_dir(clang)
    if not lib:
        return False
    try:
        names = os.listdir(lib)
    except OSError:
        return False
    return any(n.startswith("libomptarget") for n in names)


def find_clang(env) -> str | None:
    """The newest `clang-N` (N >= 19) on the search path that has an OpenMP device runtime
    installed; failing that, the newest `clang-N` (N >= 19) at all.

    The issue asks for "the newest clang-N found, 19 or later"; the runtime check is added
    because Debian's clang-22 here ships without libomptarget, so OpenMP offload cannot work
    with it (`no library 'libomptarget-nvptx.bc' found`)."""
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
    for major in sorted(found, reverse=True):
        if has_openmp_device_runtime(found[major]):
            return os.path.basename(found[major]) if _on_env_path(env, found[major]) else found[major]
    best = found[max(found)]
    return os.path.basename(best) if _on_env_path(env, best) else best


def _on_env_path(env, path: str) -> bool:
    """True when `path` is what the build's own ENV PATH finds for its basename, so the bare
    name can go into commands (keeps absolute paths out of signatures)."""
    found = env.WhereIs(os.path.basename(path))
    return bool(found) and os.path.realpath(found) == os.path.realpath(path)


def find_program(env, names: list[str]) -> str | None:
    """First of `names` found; the bare name when the build's ENV PATH finds it, else the path."""
    path = search_path(env)
    for n in names:
        p = env.WhereIs(n, path=path)
        if p:
            return n if _on_env_path(env, p) else p
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


_ID_CACHE: dict[tuple[str, float], str] = {}


def tool_identity(path: str | None) -> str:
    """`<program> --version` output (the toolchain identity in signatures), memoised by
    (real path, mtime). The path itself is left out so clones and caches on other machines
    with the same toolchain agree."""
    if not path:
        return "none"
    if path in _BY_PATH:          # one stat per binary per SCons run is enough
        return _BY_PATH[path]
    _BY_PATH[path] = _probe(path)
    return _BY_PATH[path]


_BY_PATH: dict[str, str] = {}


def _probe(path: str) -> str:
    real = os.path.realpath(path)
    try:
        key = (real, os.stat(real).st_mtime)
    except OSError:
        return "missing"
    if key not in _ID_CACHE:
        try:
            cp = subprocess.run([real, "--version"], capture_output=True, text=True, timeout=60,
                                env=dict(os.environ, HIP_PLATFORM=os.environ.get("HIP_PLATFORM", "amd")))
            out = cp.stdout
        except (OSError, subprocess.SubprocessError) as exc:
            out = f"unrunnable: {exc}"
        # Drop lines naming the install directory (clang's "InstalledDir: ..."), machine-specific.
        lines = [ln.strip() for ln in out.splitlines() if ln.strip() and not ln.startswith("InstalledDir")]
        _ID_CACHE[key] = " | ".join(lines)
    return _ID_CACHE[key]


def clang_major(identity: str) -> int | None:
    m = re.search(r"clang version (\d+)", identity)
    return int(m.group(1)) if m else None


def clang_companion(clang: str, name: str) -> str:
    """`clang++-19` for `clang-19`, or `/x/clang++` for `/x/clang`."""
    d, b = os.path.split(clang)
    return os.path.join(d, b.replace("clang", name, 1)) if d else b.replace("clang", name, 1)
