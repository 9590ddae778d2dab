"""Outputs that appear whole or not at all, and names from inside files made safe as paths.

A regular output is written to a temporary file in its directory and renamed over its path only
when the run succeeds.  Several outputs of one run form one `output_transaction`: none is renamed
until all are complete, and if a rename fails the ones already renamed are taken back (the
previous file restored from a hard link where there was one).  Temporary files are removed
however a run ends: an error, an interrupt, or SIGTERM / SIGHUP in a CLI (`removing_temp_files`
turns those into `Terminated`, and removes any temporary file still registered).

A character device (`/dev/null`, `/dev/full`), a FIFO, `-` (standard output) or a path under
`/dev` or `/proc` (`/dev/stdout`) is written directly, as LLVM's tools do: a rename would replace
the device node with a regular file (or fail on a read-only file system where writing into the
device works).  What is written there cannot be taken back; regular outputs still follow the
transaction.  Inputs are read by `inputs.py` (`open_input` is re-exported here)."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import stat
import sys
import threading
from collections.abc import Iterator

from .errors import OffloadError, OutputPathError
from .inputs import InputChangedError, byte_view, changed_inputs, open_input, open_input_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO

__all__ = ["byte_view", "open_input", "open_input_file", "atomic_output", "output_transaction", "OutputTransaction",
           "Terminated", "removing_temp_files", "remove_temp_files", "safe_join", "sanitize_name"]


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived (a CLI only; see `removing_temp_files`). Not an `OffloadError`: like
    `KeyboardInterrupt`, nothing may catch it on the way out except to clean up."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(f"terminated by {signal.Signals(signum).name}")


# Signals whose arrival ends a run (SIGIO: an input is being changed; see inputs.py).
_RUN_ENDING = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP", "SIGIO") if hasattr(signal, n))
_TERMINATING = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))

# Every temporary file this process has created and not yet renamed or removed, with the thread
# that created it (a build tool runs several library operations at once, one per thread).
_LIVE_TEMPS: dict[str, int] = {}
_LIVE_LOCK = threading.Lock()


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold back the run-ending signals for a few system calls (creating and registering a
    temporary file, the renames of a commit); they are delivered when the block ends."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _RUN_ENDING)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _pending_end() -> bool:
    """A signal that ends the run is waiting (while `_signals_held`), or an input is being changed."""
    if hasattr(signal, "sigpending") and set(signal.sigpending()) & set(_TERMINATING + (signal.SIGINT,)):
        return True
    return bool(changed_inputs())


def remove_temp_files() -> None:
    """Remove the temporary output files this thread created and still has registered (called
    when a CLI run ends; other threads' runs are left alone)."""
    me = threading.get_ident()
    with _LIVE_LOCK:
        paths = [tmp for tmp, owner in _LIVE_TEMPS.items() if owner == me]
        for tmp in paths:
            del _LIVE_TEMPS[tmp]
    for tmp in paths:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _forget(tmp: str) -> None:
    with _LIVE_LOCK:
        _LIVE_TEMPS.pop(tmp, None)


def _terminate(signum, frame) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def removing_temp_files() -> Iterator[None]:
    """For a CLI run: SIGTERM and SIGHUP raise `Terminated` (so every output in progress is
    discarded as on an error or SIGINT), and whatever temporary file is left when the block ends
    is removed.  Handlers are installed only in the main thread, over the default action."""
    installed = {}
    if threading.current_thread() is threading.main_thread():
        for signum in _TERMINATING:
            if signal.getsignal(signum) == signal.SIG_DFL:
                installed[signum] = signal.signal(signum, _terminate)
    try:
        yield
    finally:
        remove_temp_files()
        for signum, previous in installed.items():
            signal.signal(signum, previous)


# --- temporary and direct outputs ----------------------------------------------------------------

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


def _strerror(exc: OSError) -> str:
    return exc.strerror or os.strerror(exc.errno or 0) or str(exc)


def _create_temp(directory: str, base: str, path: str) -> tuple[int, str]:
    """`tempfile.mkstemp` (O_EXCL, mode 0600, random name), without importing `tempfile` and its
    dependencies on every CLI start; registered for removal before any signal can intervene."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(directory, f".{base}.{os.urandom(6).hex()}.tmp")
        try:
            with _signals_held():
                fd = os.open(tmp, flags, 0o600)
                with _LIVE_LOCK:
                    _LIVE_TEMPS[tmp] = threading.get_ident()
            return fd, tmp
        except FileExistsError:
            continue
        except OSError as exc:
            raise OffloadError(f"'{path}': {_strerror(exc)}") from None
    raise OffloadError(f"'{path}': cannot create a temporary file in {directory}")


class _NamedFileIO(io.FileIO):
    """A raw output file whose write errors name the output, not the temporary file."""

    output_name = ""

    def write(self, b):
        try:
            return super().write(b)
        except OSError as exc:
            raise OffloadError(f"'{self.output_name}': {_strerror(exc)}") from None


def _open_file(fd_or_path, output_name: str, mode: str = "wb") -> BinaryIO:
    raw = _NamedFileIO(fd_or_path, mode)
    raw.output_name = output_name
    return io.BufferedWriter(raw)


def is_special_output(path: str) -> bool:
    """True when `path` is written directly (see the module docstring), False for temp + rename.
    Raises for a directory: no output can be made there."""
    if path == "-":
        return True
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise OffloadError(f"'{path}': {_strerror(exc)}") from None
    if stat.S_ISDIR(st.st_mode):
        raise OffloadError(f"'{path}': Is a directory")
    if not stat.S_ISREG(st.st_mode):
        return True
    real = os.path.abspath(path)
    return real.startswith(("/dev/", "/proc/"))


class _Output:
    __slots__ = ("path", "file", "tmp", "mode")

    def __init__(self, path: str, file: BinaryIO, tmp: str | None, mode: int | None):
        self.path, self.file, self.tmp, self.mode = path, file, tmp, mode


class OutputTransaction:
    """The outputs of one run: `open` each, write them, then `commit` (all appear) or `discard`
    (none does).  Use through `output_transaction()`."""

    def __init__(self) -> None:
        self._outputs: list[_Output] = []

    def open(self, path: str | os.PathLike, mode: int | None = None) -> BinaryIO:
        """A file to write `path`'s content into. `mode` defaults to 0666 less the umask."""
        path = os.fspath(path)
        if path == "-":
            if sys.stdout is None:
                raise OffloadError("standard output is closed")
            out = _Output(path, sys.stdout.buffer, None, mode)
        elif is_special_output(path):
            try:
                out = _Output(path, _open_file(path, path), None, mode)
            except OSError as exc:
                raise OffloadError(f"'{path}': {_strerror(exc)}") from None
        else:
            directory = os.path.dirname(os.path.abspath(path))
            fd, tmp = _create_temp(directory, os.path.basename(path), path)
            out = _Output(path, _open_file(fd, path), tmp, mode)
        self._outputs.append(out)
        return out.file

    def _finish_writing(self) -> None:
        """Flush and close every file: write errors (a full disk, `/dev/full`) come out here,
        before anything is renamed."""
        for out in self._outputs:
            try:
                out.file.flush()
                if out.path != "-":
                    out.file.close()
            except OSError as exc:
                raise OffloadError(f"'{out.path}': {_strerror(exc)}") from None

    def commit(self) -> None:
        self._finish_writing()
        regular = [o for o in self._outputs if o.tmp is not None]
        for out in regular:
            if os.path.isdir(out.path):
                raise OffloadError(f"'{out.path}': Is a directory")
        default_mode = 0o666 & ~current_umask() if any(o.mode is None for o in regular) else 0
        with _signals_held():
            ended = _pending_end()
            if ended:
                self.discard()  # the held signal is delivered (and raised) when the block ends
            else:
                self._rename_all(regular, default_mode)
        if ended:
            broken = changed_inputs()
            if broken:
                raise InputChangedError(f"'{broken[0]}': another process is truncating or rewriting the file "
                                        f"while it is read; no output was written")
            raise OffloadError("the run was interrupted before its outputs were written")

    def _rename_all(self, regular: list[_Output], default_mode: int) -> None:
        done: list[tuple[str, str | None]] = []  # (path, hard link to the file it replaced)
        try:
            for out in regular:
                backup = self._backup(out.path) if len(regular) > 1 else None
                os.chmod(out.tmp, default_mode if out.mode is None else out.mode)
                done.append((out.path, backup))
                try:
                    os.replace(out.tmp, out.path)
                except OSError:
                    done.pop()
                    if backup is not None:
                        _remove(backup)
                    raise
                _forget(out.tmp)
                out.tmp = None
        except BaseException as exc:
            for path, backup in reversed(done):
                with contextlib.suppress(OSError):
                    if backup is not None:
                        os.replace(backup, path)
                        _forget(backup)
                    else:
                        os.unlink(path)
            if isinstance(exc, OSError):
                raise OffloadError(f"'{out.path}': {_strerror(exc)}") from None
            raise
        for _, backup in done:
            if backup is not None:
                _remove(backup)

    @staticmethod
    def _backup(path: str) -> str | None:
        """A hard link to the file `path` names now, so a rolled-back commit can put it back."""
        if not os.path.lexists(path):
            return None
        directory = os.path.dirname(os.path.abspath(path))
        for _ in range(100):
            backup = os.path.join(directory, f".{os.path.basename(path)}.{os.urandom(6).hex()}.old")
            try:
                with _signals_held():
                    os.link(path, backup, follow_symlinks=False)
                    with _LIVE_LOCK:
                        _LIVE_TEMPS[backup] = threading.get_ident()
                return backup
            except FileExistsError:
                continue
            except OSError:
                return None  # no hard links here: this output cannot be restored on a rollback
        return None

    def discard(self) -> None:
        """Remove every temporary file (what was written directly into a device stays written)."""
        for out in self._outputs:
            if out.path != "-":
                with contextlib.suppress(Exception):
                    out.file.close()
            if out.tmp is not None:
                _remove(out.tmp)
                out.tmp = None


def _remove(tmp: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(tmp)
    _forget(tmp)


@contextlib.contextmanager
def output_transaction() -> Iterator[OutputTransaction]:
    """All outputs opened in the block appear together when it ends without an exception, or
    none does."""
    txn = OutputTransaction()
    try:
        yield txn
        txn.commit()
    except BaseException as exc:
        txn.discard()
        if isinstance(exc, OSError):
            name = exc.filename if exc.filename is not None else (
                txn._outputs[0].path if len(txn._outputs) == 1 else "")
            raise OffloadError(f"'{name}': {_strerror(exc)}" if name else _strerror(exc)) from None
        raise


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, mode: int | None = None) -> Iterator[BinaryIO]:
    """One output: a temporary file beside `path` renamed over it if the block succeeds (a device,
    FIFO or `-` is written directly; see the module docstring)."""
    with output_transaction() as txn:
        yield txn.open(path, mode)


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
