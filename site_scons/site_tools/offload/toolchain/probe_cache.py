"""The compiler probes' answers kept between SCons runs, so a null build starts no process.

Asking clang who it is and where its runtimes and helpers are takes seven short processes (~0.12 s
of CPU, a fifth of a null build at 100 sources x 4 archs). Their answers change only when that
clang's installation does, so they are kept in `.sconsign.offload-probes.json` beside SCons's own
`.sconsign` at the top of the project, keyed by everything they can depend on:

- the command, the path it resolved to and the build's process environment (`env['ENV']`);
- what is asked (`probe`: the offload archs a compiler knows are one probe, its identity and
  runtimes another);
- the real file behind that path, which must be the compiler executable itself (ELF, named
  `clang*`, or `nvcc` for the questions nvcc is asked): a wrapper (ccache, a site script, hipcc's
  Perl script) answers for a compiler the key cannot see, so it is asked every run, as before;
- that file's size, inode and modification time, and the modification times of its folder (the
  helper programs beside it) and of `<prefix>/lib` (the OpenMP runtimes): installing, removing or
  upgrading any of them changes the key.

An entry is used only while every path it names still exists; anything unreadable is ignored and
rewritten (written whole, then renamed into place). `_toolchain` imports this module, never the
other way round."""

from __future__ import annotations

import hashlib
import json
import os

_FILE = ".sconsign.offload-probes.json"
_SCHEMA = 1


def clang_executable(path: str | None) -> str | None:
    """The real file behind `path` when it is a clang executable itself (ELF, named `clang*`),
    else None: a wrapper (ccache, a site script) answers for a compiler nothing here can see, and
    wants whole compiles."""
    return _elf_named(path, lambda name: name.startswith("clang"))


def _elf_named(path: str | None, named) -> str | None:
    """The real file behind `path` when its name passes `named` and it is an ELF executable (not
    a script or a wrapper), else None."""
    if not path:
        return None
    real = os.path.realpath(path)
    if not named(os.path.basename(real)):
        return None
    try:
        with open(real, "rb") as f:
            return real if f.read(4) == b"\x7fELF" else None
    except OSError:
        return None


def folder_state(path: str | None) -> list | None:
    """What says a folder (or file) a probe read has changed: its size, inode and modification
    time (a package installed into it or removed from it changes the folder's time)."""
    return _stat_part(path) if path else None


def _stat_part(path: str) -> list | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_ino, st.st_mtime_ns]


def _nvcc_executable(path: str | None) -> str | None:
    """The real file behind `path` when it is nvcc itself (ELF, named `nvcc`): its answers depend on
    that file alone, as a clang's do on its installation."""
    return _elf_named(path, lambda name: name == "nvcc")


def key(command: str, path: str, penv: dict, clang: bool, probe: str = "") -> str | None:
    """The cache key of a probe of `command` (resolved to `path`), or None when its answers are
    not to be kept (see the module docstring). `probe` names what is asked when it is not the
    compiler's identity and runtimes (whose keys stay as they were)."""
    real = clang_executable(path) if clang else (clang_executable(path) or _nvcc_executable(path))
    if real is None:
        return None
    bindir = os.path.dirname(real)
    parts = [_SCHEMA, command, path, real, sorted(penv.items()), clang, _stat_part(real), _stat_part(bindir),
             _stat_part(os.path.join(os.path.dirname(bindir), "lib"))]
    if probe:
        parts.append(probe)
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def _file(top: str) -> str:
    return os.path.join(top, _FILE)


def _read(top: str) -> dict:
    try:
        with open(_file(top), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load(top: str, k: str) -> dict | None:
    """The answers kept under `k`, or None (none kept, or a path they name is gone)."""
    entry = _read(top).get(k)
    if not isinstance(entry, dict) or not isinstance(entry.get("answers"), list):
        return None
    if not all(isinstance(p, str) and os.path.exists(p) for p in entry.get("paths", [None])):
        return None
    return entry


def store(top: str, k: str, answers: list, paths: list[str]) -> None:
    """Keep `answers` (the probe's outputs) under `k`; `paths` are the files they name."""
    data = _read(top)
    data[k] = {"answers": answers, "paths": paths}
    tmp = f"{_file(top)}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, _file(top))
    except OSError:  # a read-only tree: ask again next time
        try:
            os.unlink(tmp)
        except OSError:
            pass
