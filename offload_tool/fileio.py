"""Input mapping and atomic output: shared by every format module and CLI.

Inputs are memory-mapped (no copy into Python bytes); outputs go to a temporary file in the
destination directory and are renamed into place only when complete, so a failed run never
leaves a partial or stale output behind."""

from __future__ import annotations

import contextlib
import mmap
import os
import sys
import threading
from typing import BinaryIO, Iterator

from .errors import OffloadError, OutputPathError

__all__ = ["byte_view", "open_input", "atomic_output", "safe_join", "sanitize_name"]


def byte_view(buf) -> memoryview:
    """A flat unsigned-byte memoryview of any bytes-like object, without copying."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


@contextlib.contextmanager
def open_input(path: str | os.PathLike) -> Iterator[memoryview]:
    """Yield the whole file as a read-only memoryview (mmap-backed; `-` reads stdin)."""
    if str(path) == "-":
        yield memoryview(sys.stdin.buffer.read())
        return
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise OffloadError(f"'{os.fspath(path)}': {exc.strerror or exc}") from None
    with f:
        try:
            size = os.fstat(f.fileno()).st_size
            if size == 0 or not os.path.isfile(path):
                data = f.read()
                yield memoryview(data)
                return
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as exc:
            raise OffloadError(f"'{os.fspath(path)}': {exc.strerror or exc}") from None
        view = memoryview(m)
        try:
            yield view
        finally:
            view.release()
            try:
                m.close()
            except BufferError:
                # A caller kept a slice alive; the map is freed when the last view goes.
                pass


_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process umask, read without changing it where the kernel says it (Linux
    /proc/self/status): callers may run in threads of a build tool (SCons runs package + embed in
    its own process), and setting the umask to 0 even briefly would leak into files and processes
    other threads create meanwhile."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        umask = os.umask(0o077)  # the safe side while it is briefly changed
        os.umask(umask)
    return umask


def _create_temp(directory: str, base: str, path: str) -> tuple[int, str]:
    """`tempfile.mkstemp` (O_EXCL, mode 0600, random name), without importing `tempfile` and its
    dependencies on every CLI start."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(directory, f".{base}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileExistsError:
            continue
        except OSError as exc:
            raise OffloadError(f"'{path}': {exc.strerror or exc}") from None
    raise OffloadError(f"'{path}': cannot create a temporary file in {directory}")


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, mode: int | None = None) -> Iterator[BinaryIO]:
    """Open a temporary file beside `path`; rename it over `path` only if the block succeeds.

    `-` writes to stdout (not atomic, as there is nothing to rename)."""
    path = os.fspath(path)
    if path == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = _create_temp(directory, os.path.basename(path), path)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
        if mode is None:
            mode = 0o666 & ~current_umask()
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise OffloadError(f"'{path}': {exc.strerror or exc}") from None
        raise


_BAD_NAME_CHARS = {"/", "\\", "\0"}


def sanitize_name(name: str) -> str:
    """Make a name taken from inside a file safe as one path component.

    Path separators and NUL become `_`; a name that is empty, `.` or `..` gets a leading `_`."""
    cleaned = "".join("_" if (c in _BAD_NAME_CHARS or ord(c) < 0x20) else c for c in name)
    if cleaned in ("", ".", ".."):
        cleaned = "_" + cleaned
    return cleaned


def safe_join(directory: str | os.PathLike, name: str) -> str:
    """Join `name` (from untrusted data) under `directory`, refusing anything that escapes it."""
    if not name or "\0" in name or os.path.isabs(name):
        raise OutputPathError(f"refusing unsafe output name {name!r}")
    base = os.path.abspath(directory)
    full = os.path.abspath(os.path.join(base, name))
    if os.path.commonpath([base, full]) != base or full == base:
        raise OutputPathError(f"refusing output name {name!r}: it leaves the output directory")
    return full
