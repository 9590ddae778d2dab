"""The toolchain archive a build server of sccache-dist runs a clang device compile in.

sccache packs a clang toolchain by itself, but only the compiler, its shared libraries, `as`,
`objcopy` and clang's own headers. A HIP device compile needs more on the server: `lld` to link
the code object, the ROCm device libraries, and (the includes rewritten, as the tool's sccache
configuration asks) the headers clang includes by itself (`__clang_hip_runtime_wrapper.h` and
what it includes). Handed preprocessed input instead, clang would also run
`clang-offload-bundler` (which runs `llvm-objcopy`). Without them the server's compile fails,
and sccache does not fall back to a local compile: the build stops.

What goes in is asked of the compiler, never guessed from where it lives:
- the programs: the first word of every job `clang -###` prints for the compile;
- the device libraries: the folders of the files its jobs link (`-mlink-builtin-bitcode`), whole
  (the driver checks a device-library folder's contents, not just the files one arch links);
- the programs those programs run themselves: `clang-offload-bundler` runs `llvm-objcopy`, found
  with `-print-prog-name=`;
- the headers: the dependency list (`-M`) of the compile of an empty source, i.e. what the
  compiler includes before any line of the user's;
- every program's shared libraries, as the dynamic loader resolves them (`ldd`).

The archive is deterministic (sorted members, no times or owners), so one toolchain packed twice
is the same archive and sccache's servers keep one copy."""

from __future__ import annotations

import gzip
import os
import re
import shlex
import subprocess
import tarfile
import tempfile

from ..toolchain import jobs as _jobs

#: Programs that run another program of the toolchain themselves, and which.
_RUNS = {"clang-offload-bundler": ("llvm-objcopy",)}
#: Driver job flags whose value is a file the job reads from the device-library folder.
_LIBRARY_FLAGS = ("-mlink-builtin-bitcode", "-mlink-bitcode-file")
_LDD_LINE = re.compile(r"(/\S+) \(0x[0-9a-f]+\)")


class PackError(Exception):
    """The toolchain could not be packed (a probe failed); the message says which."""


def _run(argv: list[str], penv: dict) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, errors="replace", env=penv,
                              stdin=subprocess.DEVNULL, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PackError(f"'{argv[0]}' could not run: {exc}") from None


def _why(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    return next((ln.strip() for ln in lines if "error:" in ln), lines[-1].strip() if lines else "no message")


def driver_jobs(argv: list[str], penv: dict) -> list[list[str]]:
    """The jobs the clang driver runs for `argv` (its `-###` listing, `toolchain.jobs`)."""
    cp = _run(argv + ["-###"], penv)
    if cp.returncode:
        raise PackError(f"'{shlex.join(argv)} -###' failed: {_why(cp.stderr)}")
    return _jobs.parse_jobs(cp.stderr)


def _device_library_dirs(job: list[str]) -> set[str]:
    return {os.path.dirname(job[i + 1]) for i, a in enumerate(job[:-1]) if a in _LIBRARY_FLAGS}


def _headers(argv: list[str], empty: str, penv: dict) -> set[str]:
    """What the compile reads before the first line of its source: `-M` of an empty source."""
    deps = empty + ".d"
    cp = _run(argv + ["-M", "-MF", deps, empty], penv)
    if cp.returncode:
        raise PackError(f"'{shlex.join(argv)} -M' failed: {_why(cp.stderr)}")
    with open(deps) as f:
        words = f.read().replace("\\\n", " ").split()
    return {w for w in words if os.path.isabs(w) and w != empty}


def _shared_libraries(program: str, penv: dict) -> set[str]:
    cp = _run(["ldd", program], penv)
    return {m.group(1) for m in map(_LDD_LINE.search, cp.stdout.splitlines()) if m}


def contents(compiler: str, compiles: list[tuple[list[str], str]], penv: dict) -> list[str]:
    """Every file the archive holds, for `compiler` (the path the build runs) and `compiles`:
    (argv of a representative compile without source, output or `-c`; its source suffix)."""
    programs = {compiler}
    folders: set[str] = set()
    files: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="offload-dist-") as tmp:
        for argv, suffix in compiles:
            empty = os.path.join(tmp, "empty" + suffix)
            open(empty, "w").close()
            for job in driver_jobs(argv + ["-c", "-o", empty + ".o", empty], penv):
                programs.add(job[0])
                folders |= _device_library_dirs(job)
            files |= _headers(argv, empty, penv)
    for program in sorted(programs):
        for name in _RUNS.get(os.path.basename(program), ()):
            cp = _run([compiler, f"-print-prog-name={name}"], penv)
            found = cp.stdout.strip()
            if cp.returncode == 0 and os.path.isabs(found) and os.path.exists(found):
                programs.add(found)
    for program in sorted(programs):
        files.add(program)
        files |= _shared_libraries(program, penv)
    for folder in folders:
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                files.add(path)
    return sorted(files)


def _members(paths: list[str]):
    """(archive name, real path or None, link target or None) for every path and every symbolic
    link on the way to its file, so the path resolves in the archive as it does here."""
    seen: set[str] = set()
    for path in paths:
        p = os.path.normpath(path)
        for _ in range(40):  # a link loop ends here
            if p in seen:
                break
            seen.add(p)
            if os.path.islink(p):
                target = os.readlink(p)
                yield p, None, target
                p = os.path.normpath(os.path.join(os.path.dirname(p), target))
            else:
                yield p, p, None
                break


def write(out: str, paths: list[str]) -> int:
    """Write the gzip'd tar of `paths` (with `/tmp`) to `out` (whole, then renamed into place);
    its size in bytes."""
    part = f"{out}.part{os.getpid()}"
    try:
        _write(part, paths)
    except BaseException:
        if os.path.exists(part):
            os.remove(part)
        raise
    os.replace(part, out)
    return os.path.getsize(out)


def _write(part: str, paths: list[str]) -> None:
    with open(part, "wb") as f, gzip.GzipFile(filename="", fileobj=f, mode="wb", compresslevel=1, mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar:
        tmp = tarfile.TarInfo("tmp")
        tmp.type, tmp.mode = tarfile.DIRTYPE, 0o1777
        tar.addfile(tmp)
        for name, real, link in sorted(_members(paths)):
            info = tarfile.TarInfo(name.lstrip("/"))
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if link is not None:
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, link, 0o777
                tar.addfile(info)
                continue
            st = os.stat(real)
            info.size, info.mode = st.st_size, st.st_mode & 0o7777
            with open(real, "rb") as src:
                tar.addfile(info, src)
