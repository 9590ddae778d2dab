"""`llvm::hash_value(StringRef)` and `llvm::DenseMap<StringRef, ...>` iteration order.

clang-offload-packager keeps the `--image` arguments in a `DenseMap<StringRef, StringRef>` and
writes the OffloadBinary string entries in that map's iteration (bucket) order, so byte-exact
packages need LLVM's hash and LLVM's table layout.  The hash is
`llvm/ADT/Hashing.h` `hash_combine_range` over the bytes, with the fixed execution seed of
release builds; `DenseMapInfo<StringRef>::getHashValue` truncates it to 32 bits."""

from __future__ import annotations

import struct
from collections.abc import Iterable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeVar

__all__ = ["EXECUTION_SEED", "hash_value", "dense_map_hash", "DenseMap", "dense_map_order"]

# `get_execution_seed()` in release builds (no LLVM_ENABLE_ABI_BREAKING_CHECKS).
EXECUTION_SEED = 0xFF51AFD7ED558CCD

_M64 = 0xFFFFFFFFFFFFFFFF
_K0 = 0xC3A5C85C97CB3127
_K1 = 0xB492B66FBE98F273
_K2 = 0x9AE16A3B2F90404F
_K3 = 0xC949D7C7509E6557
_KMUL = 0x9DDFEA08EB382D69

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


def _fetch32(s: bytes, i: int) -> int:
    return _U32.unpack_from(s, i)[0]


def _fetch64(s: bytes, i: int) -> int:
    return _U64.unpack_from(s, i)[0]


def _rotr(v: int, shift: int) -> int:
    shift &= 63
    return v if shift == 0 else ((v >> shift) | (v << (64 - shift))) & _M64


def _shift_mix(v: int) -> int:
    return v ^ (v >> 47)


def _hash_16_bytes(low: int, high: int) -> int:
    a = ((low ^ high) * _KMUL) & _M64
    a ^= a >> 47
    b = ((high ^ a) * _KMUL) & _M64
    b ^= b >> 47
    return (b * _KMUL) & _M64


def _hash_1to3(s: bytes, n: int, seed: int) -> int:
    a, b, c = s[0], s[n >> 1], s[n - 1]
    y = a + (b << 8)
    z = n + (c << 2)
    return (_shift_mix(((y * _K2) ^ (z * _K3) ^ seed) & _M64) * _K2) & _M64


def _hash_4to8(s: bytes, n: int, seed: int) -> int:
    a = _fetch32(s, 0)
    return _hash_16_bytes((n + (a << 3)) & _M64, seed ^ _fetch32(s, n - 4))


def _hash_9to16(s: bytes, n: int, seed: int) -> int:
    a = _fetch64(s, 0)
    b = _fetch64(s, n - 8)
    return _hash_16_bytes(seed ^ a, _rotr((b + n) & _M64, n)) ^ b


def _hash_17to32(s: bytes, n: int, seed: int) -> int:
    a = (_fetch64(s, 0) * _K1) & _M64
    b = _fetch64(s, 8)
    c = (_fetch64(s, n - 8) * _K2) & _M64
    d = (_fetch64(s, n - 16) * _K0) & _M64
    return _hash_16_bytes(
        (_rotr((a - b) & _M64, 43) + _rotr(c ^ seed, 30) + d) & _M64,
        (a + _rotr(b ^ _K3, 20) - c + n + seed) & _M64,
    )


def _hash_33to64(s: bytes, n: int, seed: int) -> int:
    z = _fetch64(s, 24)
    a = (_fetch64(s, 0) + (n + _fetch64(s, n - 16)) * _K0) & _M64
    b = _rotr((a + z) & _M64, 52)
    c = _rotr(a, 37)
    a = (a + _fetch64(s, 8)) & _M64
    c = (c + _rotr(a, 7)) & _M64
    a = (a + _fetch64(s, 16)) & _M64
    vf = (a + z) & _M64
    vs = (b + _rotr(a, 31) + c) & _M64
    a = (_fetch64(s, 16) + _fetch64(s, n - 32)) & _M64
    z = _fetch64(s, n - 8)
    b = _rotr((a + z) & _M64, 52)
    c = _rotr(a, 37)
    a = (a + _fetch64(s, n - 24)) & _M64
    c = (c + _rotr(a, 7)) & _M64
    a = (a + _fetch64(s, n - 16)) & _M64
    wf = (a + z) & _M64
    ws = (b + _rotr(a, 31) + c) & _M64
    r = _shift_mix(((vf + ws) * _K2 + (wf + vs) * _K0) & _M64)
    return (_shift_mix(((seed ^ ((r * _K0) & _M64)) + vs) & _M64) * _K2) & _M64


def _hash_short(s: bytes, n: int, seed: int) -> int:
    if 4 <= n <= 8:
        return _hash_4to8(s, n, seed)
    if 8 < n <= 16:
        return _hash_9to16(s, n, seed)
    if 16 < n <= 32:
        return _hash_17to32(s, n, seed)
    if n > 32:
        return _hash_33to64(s, n, seed)
    if n != 0:
        return _hash_1to3(s, n, seed)
    return _K2 ^ seed


class _HashState:
    """`hash_state` of Hashing.h: the mixer for inputs longer than 64 bytes."""

    __slots__ = ("h0", "h1", "h2", "h3", "h4", "h5", "h6")

    def __init__(self, s: bytes, seed: int) -> None:
        self.h0 = 0
        self.h1 = seed
        self.h2 = _hash_16_bytes(seed, _K1)
        self.h3 = _rotr(seed ^ _K1, 49)
        self.h4 = (seed * _K1) & _M64
        self.h5 = _shift_mix(seed)
        self.h6 = _hash_16_bytes(self.h4, self.h5)
        self.mix(s, 0)

    @staticmethod
    def _mix_32_bytes(s: bytes, i: int, a: int, b: int) -> tuple[int, int]:
        a = (a + _fetch64(s, i)) & _M64
        c = _fetch64(s, i + 24)
        b = _rotr((b + a + c) & _M64, 21)
        d = a
        a = (a + _fetch64(s, i + 8) + _fetch64(s, i + 16)) & _M64
        b = (b + _rotr(a, 44) + d) & _M64
        a = (a + c) & _M64
        return a, b

    def mix(self, s: bytes, i: int) -> None:
        self.h0 = (_rotr((self.h0 + self.h1 + self.h3 + _fetch64(s, i + 8)) & _M64, 37) * _K1) & _M64
        self.h1 = (_rotr((self.h1 + self.h4 + _fetch64(s, i + 48)) & _M64, 42) * _K1) & _M64
        self.h0 ^= self.h6
        self.h1 = (self.h1 + self.h3 + _fetch64(s, i + 40)) & _M64
        self.h2 = (_rotr((self.h2 + self.h5) & _M64, 33) * _K1) & _M64
        self.h3 = (self.h4 * _K1) & _M64
        self.h4 = (self.h0 + self.h5) & _M64
        self.h3, self.h4 = self._mix_32_bytes(s, i, self.h3, self.h4)
        self.h5 = (self.h2 + self.h6) & _M64
        self.h6 = (self.h1 + _fetch64(s, i + 16)) & _M64
        self.h5, self.h6 = self._mix_32_bytes(s, i + 32, self.h5, self.h6)
        self.h0, self.h2 = self.h2, self.h0

    def finalize(self, length: int) -> int:
        return _hash_16_bytes(
            (_hash_16_bytes(self.h3, self.h5) + _shift_mix(self.h1) * _K1 + self.h2) & _M64,
            (_hash_16_bytes(self.h4, self.h6) + _shift_mix(length) * _K1 + self.h0) & _M64,
        )


def hash_value(data: bytes | str, seed: int = EXECUTION_SEED) -> int:
    """64-bit `llvm::hash_value(StringRef)` (`hash_combine_range` over the bytes)."""
    s = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else bytes(data)
    n = len(s)
    if n <= 64:
        return _hash_short(s, n, seed)
    state = _HashState(s, seed)
    aligned_end = n & ~63
    i = 64
    while i != aligned_end:
        state.mix(s, i)
        i += 64
    if n & 63:
        state.mix(s, n - 64)
    return state.finalize(n)


def dense_map_hash(key: bytes | str) -> int:
    """`DenseMapInfo<StringRef>::getHashValue`: the hash truncated to `unsigned`."""
    return hash_value(key) & 0xFFFFFFFF


if TYPE_CHECKING:
    K = TypeVar("K")


def _next_power_of_2(a: int) -> int:
    """`llvm::NextPowerOf2` (strictly greater than `a`) on 64-bit values."""
    a &= _M64
    a |= a >> 1
    a |= a >> 2
    a |= a >> 4
    a |= a >> 8
    a |= a >> 16
    a |= a >> 32
    return (a + 1) & _M64


class DenseMap:
    """Insertion-only model of `llvm::DenseMap<StringRef, V>`: buckets, growth and probing.

    Only what decides iteration order is modelled; there is no erase (the packager never erases),
    hence no tombstones."""

    def __init__(self) -> None:
        self._buckets: list[object | None] = []
        self._hashes: dict[object, int] = {}
        self._values: dict[object, object] = {}

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __getitem__(self, key):
        return self._values[key]

    def _key_bytes(self, key) -> bytes:
        return key.encode("utf-8", "surrogateescape") if isinstance(key, str) else bytes(key)

    def _lookup(self, key, h: int) -> int:
        n = len(self._buckets)
        mask = n - 1
        bucket = h & mask
        probe = 1
        while True:
            occupant = self._buckets[bucket]
            if occupant is None or occupant == key:
                return bucket
            bucket = (bucket + probe) & mask
            probe += 1

    def _grow(self, at_least: int) -> None:
        old = self._buckets
        new_size = max(64, _next_power_of_2(at_least - 1) & 0xFFFFFFFF)
        self._buckets = [None] * new_size
        for key in old:
            if key is not None:
                self._buckets[self._lookup(key, self._hashes[key])] = key

    def __setitem__(self, key, value) -> None:
        if key in self._values:
            self._values[key] = value
            return
        h = dense_map_hash(self._key_bytes(key))
        self._hashes[key] = h
        n = len(self._buckets)
        new_entries = len(self._values) + 1
        # InsertIntoBucketImpl: grow at 3/4 load (or when empty buckets run out, which without
        # tombstones is implied by the first test).
        if new_entries * 4 >= n * 3:
            self._grow(n * 2)
        elif n - new_entries <= n // 8:
            self._grow(n)
        self._buckets[self._lookup(key, h)] = key
        self._values[key] = value

    def keys(self) -> list:
        """Keys in DenseMap iteration (bucket) order."""
        return [k for k in self._buckets if k is not None]

    def items(self) -> list[tuple]:
        return [(k, self._values[k]) for k in self.keys()]

    def __iter__(self):
        return iter(self.keys())


def dense_map_order(keys: Iterable[K]) -> list[K]:
    """The iteration order of a `DenseMap<StringRef, ...>` after inserting `keys` in turn."""
    m = DenseMap()
    for k in keys:
        m[k] = None
    return m.keys()
