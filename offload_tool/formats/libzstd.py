"""Streaming zstd compression with the system's libzstd (`libzstd.so.1`, through ctypes).

LLVM's tools link the system libzstd, so compressing with the same library gives the parameters
LLVM's output has (long-distance matching included) and its speed: the libzstd that Python's
`zstandard` bundles is a different release, ~15-20% slower on one core for these inputs (LDM). Where
no usable system library exists, `open_compressor` returns None and callers use `zstandard`.
ctypes releases the GIL during each call, so another thread can hash meanwhile."""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import lru_cache

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO

__all__ = ["open_compressor", "Compressor"]

# ZSTD_cParameter and ZSTD_EndDirective values (zstd.h, stable API since 1.4.0).
_C_COMPRESSION_LEVEL = 100
_C_ENABLE_LDM = 160
_C_LDM_BUCKET_SIZE_LOG = 163
_C_CONTENT_SIZE_FLAG = 200
_C_STABLE_IN_BUFFER = 1006  # ZSTD_c_experimentalParam9 (zstd 1.4.6+; older libraries refuse it)
_E_CONTINUE, _E_END = 0, 2


class _InBuffer(ctypes.Structure):
    _fields_ = [("src", ctypes.c_void_p), ("size", ctypes.c_size_t), ("pos", ctypes.c_size_t)]


class _OutBuffer(ctypes.Structure):
    _fields_ = [("dst", ctypes.c_void_p), ("size", ctypes.c_size_t), ("pos", ctypes.c_size_t)]


@lru_cache(maxsize=1)
def _library():
    name = ctypes.util.find_library("zstd") or "libzstd.so.1"
    try:
        lib = ctypes.CDLL(name)
        if lib.ZSTD_versionNumber() < 10400:  # ZSTD_compressStream2 and the parameter API
            return None
    except (OSError, AttributeError):
        return None
    lib.ZSTD_createCCtx.restype = ctypes.c_void_p
    lib.ZSTD_freeCCtx.argtypes = [ctypes.c_void_p]
    lib.ZSTD_CCtx_setParameter.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    lib.ZSTD_CCtx_setParameter.restype = ctypes.c_size_t
    lib.ZSTD_CCtx_setPledgedSrcSize.argtypes = [ctypes.c_void_p, ctypes.c_ulonglong]
    lib.ZSTD_CCtx_setPledgedSrcSize.restype = ctypes.c_size_t
    lib.ZSTD_compressStream2.argtypes = [ctypes.c_void_p, ctypes.POINTER(_OutBuffer), ctypes.POINTER(_InBuffer),
                                         ctypes.c_int]
    lib.ZSTD_compressStream2.restype = ctypes.c_size_t
    lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
    lib.ZSTD_isError.restype = ctypes.c_uint
    lib.ZSTD_getErrorName.argtypes = [ctypes.c_size_t]
    lib.ZSTD_getErrorName.restype = ctypes.c_char_p
    lib.ZSTD_CStreamOutSize.restype = ctypes.c_size_t
    return lib


class Compressor:
    """One zstd frame written to `out`: `write` the input in order, then `finish`."""

    def __init__(self, lib, level: int, size: int, out: BinaryIO, ldm_bucket_size_log: int) -> None:
        self._lib = lib
        self._out = out
        self._cctx = lib.ZSTD_createCCtx()
        if not self._cctx:
            raise MemoryError("ZSTD_createCCtx failed")
        for param, value in ((_C_COMPRESSION_LEVEL, level), (_C_ENABLE_LDM, 1),
                             (_C_LDM_BUCKET_SIZE_LOG, ldm_bucket_size_log), (_C_CONTENT_SIZE_FLAG, 1)):
            self._check(lib.ZSTD_CCtx_setParameter(self._cctx, param, value))
        self._check(lib.ZSTD_CCtx_setPledgedSrcSize(self._cctx, size))
        self._buffer = ctypes.create_string_buffer(max(lib.ZSTD_CStreamOutSize(), 1 << 20))
        self._view = memoryview(self._buffer).cast("B")
        self._outbuf = _OutBuffer(ctypes.addressof(self._buffer), len(self._buffer), 0)

    def _check(self, code: int) -> int:
        if self._lib.ZSTD_isError(code):
            raise ValueError(f"zstd compress error: {self._lib.ZSTD_getErrorName(code).decode(errors='replace')}")
        return code

    def _drain(self) -> None:
        if self._outbuf.pos:
            self._out.write(self._view[:self._outbuf.pos])
            self._outbuf.pos = 0

    def write(self, chunk) -> None:
        data = chunk if isinstance(chunk, bytes) else bytes(chunk)
        inbuf = _InBuffer(ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p), len(data), 0)
        while inbuf.pos < inbuf.size:
            self._check(self._lib.ZSTD_compressStream2(self._cctx, ctypes.byref(self._outbuf), ctypes.byref(inbuf),
                                                       _E_CONTINUE))
            self._drain()

    def compress_whole(self, buffer) -> bool:
        """The whole frame from `buffer`, which zstd reads in place (ZSTD_c_stableInBuffer) as a
        one-shot ZSTD_compress2 does; the output still leaves in pieces. Streaming copies its input
        into a window buffer and compresses that: ~20% more time, and for inputs past the 128 MiB
        window a wrap that costs ~0.4% in size. False, with nothing written, where the library
        refuses the mode (then `write` and `finish`). `buffer` is writable (ctypes takes its
        address) and stays unchanged until this returns."""
        if self._lib.ZSTD_isError(self._lib.ZSTD_CCtx_setParameter(self._cctx, _C_STABLE_IN_BUFFER, 1)):
            return False
        size = len(buffer)
        pinned = (ctypes.c_char * size).from_buffer(buffer) if size else None
        try:
            self._end(_InBuffer(ctypes.addressof(pinned) if size else None, size, 0))
            return True
        finally:
            del pinned  # releases `buffer`'s export, so its owner can close it

    def finish(self) -> None:
        self._end(_InBuffer(None, 0, 0))

    def _end(self, inbuf) -> None:
        """Compress what `inbuf` holds and end the frame, draining the output as it fills."""
        while True:
            left = self._check(self._lib.ZSTD_compressStream2(self._cctx, ctypes.byref(self._outbuf),
                                                              ctypes.byref(inbuf), _E_END))
            self._drain()
            if left == 0:
                return

    def close(self) -> None:
        if self._cctx:
            self._lib.ZSTD_freeCCtx(self._cctx)
            self._cctx = None


def open_compressor(level: int, size: int, out: BinaryIO, ldm_bucket_size_log: int) -> Compressor | None:
    """A `Compressor` on the system libzstd with LLVM's settings (level, long-distance matching,
    content size in the frame) and this LDM bucket size, or None if the system has no usable
    libzstd."""
    lib = _library()
    return None if lib is None else Compressor(lib, level, size, out, ldm_bucket_size_log)
