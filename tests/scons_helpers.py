"""Helpers for the SCons tool tests: small real projects in a temporary folder, run with
`python -m SCons` (the same interpreter), and counting the actions a run performed from the
tool's one-line COMSTRs (`HOST src`, `DEVICE sm_80 src`, `PACKAGE ...`)."""

from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SITE_TOOLS = REPO / "site_scons" / "site_tools"
LLVM19_LIB = "/usr/lib/llvm-19/lib"

# One line per action, as the tool prints them by default.
_ACTION_RE = re.compile(r"^(HOSTIR|HOST|CONVERT|DEVICELINK|DEVICE|NVCC|FAT|BUNDLE|PACKAGE\+EMBED|PACKAGE|EMBED|LINK|RELOCATABLE|AR|LDSCRIPT|"
                        r"UNBUNDLE|MANIFEST)\b(.*)$")


# `[ 37/505] ` before an action line when progress is on (OFFLOAD_PROGRESS).
_PROGRESS_PREFIX = re.compile(r"^\[\s*\d+/\d+\] ")


def scons_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["PATH"] = env.get("PATH", "") + os.pathsep + "/usr/local/cuda/bin"
    env.pop("OFFLOAD_VERBOSE", None)
    return env


#: How long one SCons run of a test may take (a mode of the shape matrix builds dozens of programs).
SCONS_TIMEOUT = 900


def run_scons(root, *args, check: bool = True, env: dict | None = None, unset=(), jobs: int | None = None,
              timeout: float = SCONS_TIMEOUT) -> subprocess.CompletedProcess:
    """The one way the tests run SCons: `python -m SCons -Q [-jN] ARGS` in `root` with this
    repository's tool (`scons_env`), `env` added to the process environment and the variables
    in `unset` removed, bounded by `timeout`. A failure raises (with both outputs) when `check`."""
    penv = scons_env()
    for name in unset:
        penv.pop(name, None)
    penv.update(env or {})
    cmd = [sys.executable, "-m", "SCons", "-Q", *([f"-j{jobs}"] if jobs else []), f"--site-dir={REPO / 'site_scons'}",
           *args]
    cp = subprocess.run(cmd, cwd=root, capture_output=True, text=True, env=penv, timeout=timeout)
    if check and cp.returncode:
        raise AssertionError(f"scons {' '.join(args)} failed ({cp.returncode}):\n{cp.stdout}\n{cp.stderr}")
    return cp


class Project:
    """A throw-away SCons project whose SConstruct loads the tool from this repository."""

    def __init__(self, root: Path, files: dict[str, str] | None = None):
        """`files`: relative path -> text, written at once (`write`)."""
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        for rel, text in (files or {}).items():
            self.write(rel, text)

    def write(self, rel: str, text: str) -> Path:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
        return p

    def recreate(self, rel: str) -> None:
        """Replace a file by a new one with the same content (a new inode, as editors and
        `git checkout` do)."""
        p = self.root / rel
        data = p.read_bytes()
        st = os.stat(p)
        tmp = p.with_name(p.name + ".new")
        tmp.write_bytes(data)
        os.replace(tmp, p)
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert os.stat(p).st_ino != st.st_ino

    def scons(self, *args, check: bool = True, env: dict | None = None, unset=(), jobs: int | None = None,
              timeout: float = SCONS_TIMEOUT) -> subprocess.CompletedProcess:
        """`scons -Q ARGS` in the project (`run_scons`); a failure raises when `check`."""
        return run_scons(self.root, *args, check=check, env=env, unset=unset, jobs=jobs, timeout=timeout)

    def up_to_date(self, *args) -> bool:
        return self.scons("-q", *args, check=False).returncode == 0


def assert_clean_failure(cp: subprocess.CompletedProcess) -> str:
    """A failed SCons run that ended as SCons ends a failed build: exit status 2, no Python
    traceback, no exception reported by the collector, no fatal error or signal. Its output."""
    out = cp.stdout + cp.stderr
    assert cp.returncode == 2, f"exit status {cp.returncode} (2 expected):\n{out}"
    for sign in ("Traceback (most recent call last)", "Exception ignored", "Fatal Python error", "BufferError"):
        assert sign not in out, out
    return out


def refused(project: "Project", *args: str, line: int) -> str:
    """The one `scons: *** offload: ...` line of a `scons -n ARGS` that the tool refuses when the
    SConscripts are read: exit status 2, the error at the SConstruct's `line` (the user's line
    that asked, not one of the tool's)."""
    cp = project.scons("-n", *args, check=False)
    assert cp.returncode == 2, cp.stdout + cp.stderr
    lines = [x for x in cp.stderr.splitlines() if x.startswith("scons: *** offload: ")]
    assert len(lines) == 1, cp.stderr
    assert f'SConstruct", line {line}' in cp.stderr and "site_tools" not in cp.stderr, cp.stderr
    return lines[0]


def actions(cp: subprocess.CompletedProcess) -> list[tuple[str, str]]:
    """The (kind, rest) of each action line a run printed."""
    out = []
    for line in cp.stdout.splitlines():
        m = _ACTION_RE.match(_PROGRESS_PREFIX.sub("", line.strip()))
        if m:
            out.append((m.group(1), m.group(2).strip()))
    return out


def counts(cp: subprocess.CompletedProcess) -> collections.Counter:
    """Actions per kind; OffloadObject's one `PACKAGE+EMBED` action counts as a PACKAGE and an EMBED
    (it writes both targets)."""
    c = collections.Counter()
    for kind, _ in actions(cp):
        for k in kind.split("+"):
            c[k] += 1
    return c


def device_archs(cp: subprocess.CompletedProcess) -> collections.Counter:
    """DEVICE actions per arch."""
    return collections.Counter(rest.split()[0] for kind, rest in actions(cp) if kind == "DEVICE")


def run_env() -> dict:
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = LLVM19_LIB + os.pathsep + env.get("LD_LIBRARY_PATH", "")
    return env


def run_built(program, *library_dirs: str) -> subprocess.CompletedProcess:
    """Run a program a test built (LLVM 19's offload runtime, then `library_dirs`, on the library
    path; output as text; a minute at most). The caller checks what it printed and returned."""
    env = run_env()
    if library_dirs:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(library_dirs) + os.pathsep + env["LD_LIBRARY_PATH"]
    return subprocess.run([str(program)], capture_output=True, text=True, env=env, timeout=60)


def hook_warnings(stderr: str) -> list[str]:
    """The tool's `offload: warning:` lines but the one about this machine's toolchain (clang 19's
    OpenMP runtime and a CUDA 13 ptxas: `settings.checks.openmp_nvidia_cubins`), which a test of
    the tool's SCons hooks does not ask about."""
    return [ln for ln in stderr.splitlines()
            if ln.startswith("offload: warning:") and "OpenMP offload programs built for" not in ln]
