"""Reading inputs: each file opened and read once, its size bounded, safe against truncation.

How an input is held depends on what it is:

* a regular file is memory-mapped (no copy: a bundle of gigabytes costs the pages touched), but
  only under a read lease (`fcntl(F_SETLEASE, F_RDLCK)`).  A mapped file truncated by another
  process would kill this one with SIGBUS at the next touch of a vanished page, and Python cannot
  turn a SIGBUS inside C code into an exception.  The lease stops that from happening: the kernel
  holds back whoever opens the file for writing or truncates it, and tells this process with
  SIGIO, whose handler raises `InputChangedError` naming the input; the work in progress is
  abandoned (its outputs discarded), the file is closed and the other process goes on.  The
  bytes read under the lease are the file's bytes throughout, so nothing wrong is ever written.
* a regular file that cannot be leased (a file of another user, one being written right now, a
  file system without leases, a thread other than the main one, where no signal handler can be
  installed) is read into memory in full, and a file that ends before its size said is an error;
* anything else (standard input `-`, a FIFO, a character device such as `/dev/zero`) is read
  once, into memory, up to a limit (`STREAM_LIMIT_ENV`, default 256 MiB): reading twice would
  find a drained FIFO or block for a writer that left, and an endless device must end in an
  error, not in exhausted memory.

A caller that reads only headers and tables scattered over a large file (`inspect` without
hashes, `verify`) opens it `sparse`: the map is advised random access (`MADV_RANDOM`), so the
kernel reads the pages touched instead of reading ahead around each.  On Linux 6.18, whose page
cache holds files in large folios, readahead around the headers of a 1.3 GB ROCm library read
1.15 GB of it from disk for a listing that touches 3 MiB."""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import signal
import stat
import sys
import threading
from collections.abc import Iterator

from .errors import InputChangedError, OffloadError, UsageError
from .records import Record

__all__ = ["Input", "InputChangedError", "open_input", "open_input_file", "byte_view", "stream_limit",
           "STREAM_LIMIT_ENV", "DEFAULT_STREAM_LIMIT", "changed_inputs", "read_slices", "read_slice_into"]

STREAM_LIMIT_ENV = "OFFLOAD_TOOL_STREAM_LIMIT"
DEFAULT_STREAM_LIMIT = 256 << 20
_CHUNK = 1 << 20


class Input(Record):
    """An opened input: `view` holds its bytes; `fd` is an open descriptor of the same regular
    file (for kernel copies of payloads, never a second open), None for streams and devices."""

    __slots__ = ("path", "view", "fd")

    def __init__(self, path: str, view: memoryview, fd: int | None = None) -> None:
        self.path = path
        self.view = view
        self.fd = fd


def byte_view(buf) -> memoryview:
    """A flat unsigned-byte memoryview of any bytes-like object, without copying."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


_SIZE = re.compile(r"^\s*([0-9]+)\s*([KMGT]?)(?:i?B)?\s*$", re.I)
_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def stream_limit() -> int:
    """How many bytes a non-regular input may hold (`OFFLOAD_TOOL_STREAM_LIMIT`, e.g. `1G`)."""
    text = os.environ.get(STREAM_LIMIT_ENV, "").strip()
    if not text:
        return DEFAULT_STREAM_LIMIT
    m = _SIZE.match(text)
    if not m or int(m.group(1)) == 0:
        raise UsageError(f"{STREAM_LIMIT_ENV}: expected a size N[K|M|G|T], got {text!r}")
    return int(m.group(1)) * _SUFFIX[m.group(2).upper()]


def _format_size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} bytes"


def _open_error(name: str, exc: OSError, quote_path: bool) -> OffloadError:
    text = exc.strerror or os.strerror(exc.errno or 0) or str(exc)
    return OffloadError(f"'{name}': {text}" if quote_path else text)


def _read_stream(read, name: str) -> memoryview:
    """Everything `read(n)` yields until end of file, refusing more than `stream_limit()` bytes."""
    limit = stream_limit()
    data = bytearray()
    while True:
        chunk = read(min(_CHUNK, limit + 1 - len(data)))
        if not chunk:
            return memoryview(bytes(data)) if len(data) < _CHUNK else memoryview(data).toreadonly()
        data += chunk
        if len(data) > limit:
            what = "standard input" if name == "-" else f"'{name}'"
            raise OffloadError(f"{what}: more than {_format_size(limit)} from a stream or device (not a regular "
                               f"file); set {STREAM_LIMIT_ENV}=N[K|M|G] to allow more")


def _read_regular(fd: int, size: int, name: str) -> memoryview:
    """The `size` bytes of a regular file, read (not mapped); a file that ends early changed."""
    data = bytearray(size)
    with memoryview(data) as view:
        done = _fill(fd, 0, view)
    if done < size:
        raise InputChangedError(f"'{name}': the file shrank from {size} to {done} bytes while it was read")
    return memoryview(data).toreadonly()


def _fill(fd: int, offset: int, view: memoryview) -> int:
    """Read `fd` from `offset` into `view` until it is full or the file ends; the bytes read."""
    done, size = 0, view.nbytes
    while done < size:
        n = (os.preadv(fd, [view[done:]], offset + done) if hasattr(os, "preadv")
             else _pread_into(fd, view[done:], offset + done))
        if n == 0:
            break
        done += n
    return done


def read_slices(chunks, file_slices, piece: int = 8 << 20):
    """`chunks`, with those listed in `file_slices` (by `id`, as `(fd, offset)`) read from their file
    in pieces of at most `piece` bytes instead of through their view: bounded memory, and no page
    faults on a mapping of the input."""
    for chunk in chunks:
        src = file_slices.get(id(chunk))
        if src is None:
            yield chunk
            continue
        fd, pos = src
        remaining = memoryview(chunk).nbytes
        while remaining:
            data = os.pread(fd, min(piece, remaining), pos)
            if not data:
                raise InputChangedError(f"input ended {remaining} bytes early at offset {pos}")
            yield data
            pos += len(data)
            remaining -= len(data)


def read_slice_into(fd: int, offset: int, view: memoryview) -> None:
    """Fill `view` from `fd` at `offset` (one slice of `read_slices`, read straight into place)."""
    done = _fill(fd, offset, view)
    if done < view.nbytes:
        raise InputChangedError(f"input ended {view.nbytes - done} bytes early at offset {offset + done}")


def _pread_into(fd: int, view: memoryview, offset: int) -> int:
    chunk = os.pread(fd, min(len(view), 64 << 20), offset)
    view[:len(chunk)] = chunk
    return len(chunk)


# --- read leases ---------------------------------------------------------------------------------

_LEASED: dict[int, str] = {}  # descriptor -> input name, for every mapped input under a lease
_previous_sigio = None


def changed_inputs() -> list[str]:
    """The leased inputs another process is now waiting to change (their lease is being broken)."""
    import fcntl

    broken = []
    for fd, name in list(_LEASED.items()):
        try:
            if fcntl.fcntl(fd, fcntl.F_GETLEASE) != fcntl.F_RDLCK:
                broken.append(name)
        except OSError:
            broken.append(name)
    return broken


def _on_sigio(signum, frame) -> None:
    broken = changed_inputs()
    if broken:
        raise InputChangedError(f"'{broken[0]}': another process is truncating or rewriting the file while it is "
                                f"read; the run is abandoned (run it again once the file is complete)")
    if callable(_previous_sigio):
        _previous_sigio(signum, frame)


def _lease(fd: int, name: str) -> bool:
    """Take a read lease on `fd` (see the module docstring); False where that is not possible."""
    global _previous_sigio
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGIO"):
        return False
    try:
        import fcntl
    except ImportError:
        return False
    if not hasattr(fcntl, "F_SETLEASE"):
        return False
    current = signal.getsignal(signal.SIGIO)
    if current is not _on_sigio:
        if current not in (signal.SIG_DFL, signal.SIG_IGN, None):
            return False  # the program handles SIGIO itself: do not take it over
        _previous_sigio = current
        signal.signal(signal.SIGIO, _on_sigio)
    try:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
    except OSError:
        return False
    _LEASED[fd] = name
    return True


def _release(fd: int) -> None:
    """Give the lease back (the file is no longer mapped) and close `fd`."""
    if _LEASED.pop(fd, None) is not None:
        import fcntl

        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
    os.close(fd)


# --- opening -------------------------------------------------------------------------------------


@contextlib.contextmanager
def open_input_file(path: str | os.PathLike, *, quote_path: bool = True, sparse: bool = False) -> Iterator[Input]:
    """Open `path` once and hold its bytes for the block (see the module docstring).

    `quote_path=False` words an open failure as the error text alone (where LLVM does so);
    `sparse=True` says the caller reads scattered headers only (no readahead on the map)."""
    name = os.fspath(path)
    if name == "-":
        stdin = sys.stdin
        if stdin is None:
            raise OffloadError("standard input is closed")
        yield Input(name, _read_stream(stdin.buffer.read, name))
        return
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _open_error(name, exc, quote_path) from None
    mapped = None
    keep_fd = False
    try:
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(21, os.strerror(21))
            regular = stat.S_ISREG(st.st_mode)
            if not regular:
                view = _read_stream(lambda n: os.read(fd, n), name)
            elif st.st_size == 0:
                view = memoryview(b"")
            elif _lease(fd, name):
                mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
                if sparse:
                    _advise_random(mapped)
                view = memoryview(mapped)
            else:
                view = _read_regular(fd, st.st_size, name)
        except OSError as exc:
            raise _open_error(name, exc, quote_path) from None
        try:
            yield Input(name, view, fd if regular else None)
        finally:
            view.release()
            if mapped is not None:
                try:
                    mapped.close()
                except BufferError:
                    # A caller kept a slice alive: the map lives on, and so does its lease (with
                    # the descriptor holding it) until the last slice goes.
                    import weakref

                    weakref.finalize(mapped, _release, fd)
                    keep_fd = True
    finally:
        if not keep_fd:
            _release(fd)


def _advise_random(mapped: mmap.mmap) -> None:
    """No readahead on `mapped` (where the platform has the advice; it is only a hint)."""
    advice = getattr(mmap, "MADV_RANDOM", None)
    if advice is not None:
        with contextlib.suppress(OSError, ValueError):
            mapped.madvise(advice)


@contextlib.contextmanager
def open_input(path: str | os.PathLike, *, sparse: bool = False) -> Iterator[memoryview]:
    """Yield the whole input as a read-only memoryview (`-` reads stdin); see `open_input_file`."""
    with open_input_file(path, sparse=sparse) as source:
        yield source.view
