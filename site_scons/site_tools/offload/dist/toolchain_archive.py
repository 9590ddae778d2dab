"""The toolchain archive a build server of sccache-dist runs a clang device compile in.

sccache packs a clang toolchain by itself, but only the compiler, its shared libraries, `as`,
`objcopy` and clang's own headers. A HIP device compile needs more on the server: `lld` to link
the code object, the ROCm device libraries, and (the includes rewritten, as the tool's sccache
configuration asks) the headers clang includes by itself (`__clang_hip_runtime_wrapper.h` and
what it includes). Handed preprocessed input instead, clang would also run
`clang-offload-bundler` (which runs `llvm-objcopy`). Without them the server's compile fails,
and sccache does not fall back to a local compile: the build stops.

What goes in is asked of the compiler, never guessed from where it lives:
- the programs: the first word of every job `clang -v -###` prints for the compile;
- the device libraries: the folders of the files its jobs link (`-mlink-builtin-bitcode`), whole
  (the driver checks a device-library folder's contents, not just the files one arch links);
- the programs those programs run themselves: `clang-offload-bundler` runs `llvm-objcopy`, found
  with `-print-prog-name=`;
- the headers: the dependency lists (`-M`, and each -cc1 job's own) of the compile of an empty
  source, i.e. what the compiler includes before any line of the user's, and clang's own header
  folder whole
  (`-print-resource-dir`): `-M` lists one job's headers, and an OpenMP compile's device jobs
  include `__clang_openmp_device_functions.h` and the math wrappers on their own (clang 22 writes
  no list at all for a device-only compile);
- the files by which clang recognises the installations it says it uses (`-v`): the CUDA
  installation's `cuda.h` and version (without them the server's clang finds no libdevice for an
  NVIDIA arch), the GCC installation's `crtbegin.o` (without it no C++ standard headers);
- every program's shared libraries, as the dynamic loader resolves them (`ldd`).

The archive is deterministic (sorted members, no times or owners), so one toolchain packed twice
is the same archive and sccache's servers keep one copy."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import tempfile

from ..toolchain import jobs as _jobs

#: Programs that run another program of the toolchain themselves, and which.
_RUNS = {"clang-offload-bundler": ("llvm-objcopy",)}
#: Driver job flags whose value is a file the job reads from the device-library folder.
_LIBRARY_FLAGS = ("-mlink-builtin-bitcode", "-mlink-bitcode-file")
_LDD_LINE = re.compile(r"(/\S+) \(0x[0-9a-f]+\)")
_CUDA_FOUND = re.compile(r"^Found CUDA installation: (/.*?), version", re.M)
_GCC_SELECTED = re.compile(r"^Selected GCC installation: (/.*)$", re.M)
#: The file by which clang's driver recognises a GCC installation (whose C++ headers it adds).
_GCC_MARKER = "crtbegin.o"
#: The files of a CUDA installation clang's detector reads (beside `bin/`, `nvvm/libdevice/`).
_CUDA_MARKERS = ("include/cuda.h", "version.json", "version.txt")


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


def driver_listing(argv: list[str], penv: dict) -> tuple[list[list[str]], str]:
    """The jobs the clang driver runs for `argv` (its `-###` listing, `toolchain.jobs`), and the
    whole listing, which with `-v` also says which installations the driver found."""
    cp = _run(argv + ["-v", "-###"], penv)
    if cp.returncode:
        raise PackError(f"'{shlex.join(argv)} -###' failed: {_why(cp.stderr)}")
    return _jobs.parse_jobs(cp.stderr), cp.stderr


def _dependencies(path: str, source: str) -> set[str]:
    """The files a dependency list (`-M`'s, a -cc1 job's `-dependency-file`) names, but `source`."""
    with open(path) as f:
        words = f.read().replace("\\\n", " ").split()
    return {w for w in words if os.path.isabs(w) and w != source}


def _device_library_dirs(job: list[str]) -> set[str]:
    return {os.path.dirname(job[i + 1]) for i, a in enumerate(job[:-1]) if a in _LIBRARY_FLAGS}


def _headers(argv: list[str], empty: str, penv: dict) -> set[str]:
    """What the compile reads before the first line of its source: `-M` of an empty source."""
    deps = empty + ".d"
    cp = _run(argv + ["-M", "-MF", deps, empty], penv)
    if cp.returncode:
        raise PackError(f"'{shlex.join(argv)} -M' failed: {_why(cp.stderr)}")
    try:
        return _dependencies(deps, empty)
    except FileNotFoundError:
        return set()   # a device-only compile of clang 22 lists nothing: the resource headers cover it


#: A -cc1 job's flags that name what it writes, dropped to run it as a preprocessor only.
_CC1_OUTPUT_FLAGS = {"-emit-llvm-bc", "-emit-llvm-uselists", "-emit-llvm", "-S", "-emit-obj", "-c"}
_CC1_VALUE_FLAGS = {"-o", "-fopenmp-host-ir-file-path"}


def _job_headers(jobs: list[list[str]], empty: str, tmp: str, penv: dict) -> set[str]:
    """What each -cc1 job of the compile of `empty` reads by itself (its own dependency list, run
    as a preprocessor): a device job includes headers the host job does not (an OpenMP device
    job's `__clang_openmp_device_functions.h`, which includes `<cstdlib>` in C++), and the
    driver's `-M` lists one job's only."""
    files: set[str] = set()
    for i, job in enumerate(jobs):
        if len(job) < 3 or job[1] != "-cc1" or job[-1] != empty:
            continue
        argv, skip = [], False
        for a in job:
            if skip:
                skip = False
            elif a in _CC1_VALUE_FLAGS:
                skip = True
            elif a not in _CC1_OUTPUT_FLAGS:
                argv.append(a)
        deps = os.path.join(tmp, f"job{i}.d")
        cp = _run(argv + ["-Eonly", "-sys-header-deps", "-dependency-file", deps, "-MT", "x"], penv)
        if cp.returncode:
            raise PackError(f"the preprocessor of '{job[0]} -cc1' failed: {_why(cp.stderr)}")
        files |= _dependencies(deps, empty)
    return files


def _resource_headers(compiler: str, penv: dict) -> set[str]:
    """clang's own headers, every one: the folder `include` of its resource directory."""
    cp = _run([compiler, "-print-resource-dir"], penv)
    folder = os.path.join(cp.stdout.strip(), "include")
    if cp.returncode or not os.path.isabs(folder) or not os.path.isdir(folder):
        raise PackError(f"'{compiler} -print-resource-dir' names no header folder: {_why(cp.stderr)}")
    return {os.path.join(d, n) for d, _, names in os.walk(folder) for n in names}


def _installations(listing: str) -> set[str]:
    """The files by which clang recognises the installations its `-v -###` `listing` says it uses:
    the CUDA installation's `cuda.h` and version (without them no libdevice for an NVIDIA arch),
    and the GCC installation's `crtbegin.o` (without it no C++ standard headers, which an OpenMP
    device job includes by itself)."""
    found: list[str] = []
    cuda = _CUDA_FOUND.search(listing)
    if cuda:
        found += [os.path.join(cuda.group(1), m) for m in _CUDA_MARKERS]
    gcc = _GCC_SELECTED.search(listing)
    if gcc:
        found.append(os.path.join(gcc.group(1).strip(), _GCC_MARKER))
    return {p for p in found if os.path.isfile(p)}


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
            jobs, listing = driver_listing(argv + ["-c", "-o", empty + ".o", empty], penv)
            for job in jobs:
                programs.add(job[0])
                folders |= _device_library_dirs(job)
            files |= _headers(argv, empty, penv)
            files |= _job_headers(jobs, empty, tmp, penv)
            files |= _installations(listing)
    files |= _resource_headers(compiler, penv)
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
    # A path the compiler goes up from (`/usr/lib/gcc/x86_64-linux-gnu/12/../../../../include/c++/12`,
    # its C++ headers) resolves on the server only when the folder it goes up from is there too.
    for path in list(files):
        parts = path.split(os.sep)
        if ".." in parts:
            above = os.sep.join(parts[:parts.index("..")])
            if os.path.isdir(above):
                files.add(above)
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
    # gzip and tarfile here: an archive is packed once per compiler, and every SConstruct that
    # loads the tool imports this module.
    import gzip
    import tarfile

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
            if os.path.isdir(real):   # a folder a path goes up from (`contents`): itself, empty
                info.type, info.mode = tarfile.DIRTYPE, st.st_mode & 0o7777
                tar.addfile(info)
                continue
            info.size, info.mode = st.st_size, st.st_mode & 0o7777
            with open(real, "rb") as src:
                tar.addfile(info, src)
