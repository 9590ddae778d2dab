"""XXH3-64 and `llvm::StringMap` iteration order.

clang-offload-bundler 19 keeps bundle entries and the unbundling worklist in `llvm::StringMap`s,
so the order in which it lists entries and hands them to targets is the map's bucket order
. Reproducing it needs LLVM's string hash, `xxh3_64bits` with seed 0
truncated to 32 bits, written here in pure Python (no third-party xxhash allowed)."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Generic, TypeVar

__all__ = ["xxh3_64", "stringmap_hash", "StringMap", "stringmap_order"]

_M64 = (1 << 64) - 1

_PRIME32_1 = 0x9E3779B1
_PRIME32_2 = 0x85EBCA77
_PRIME32_3 = 0xC2B2AE3D
_PRIME64_1 = 0x9E3779B185EBCA87
_PRIME64_2 = 0xC2B2AE3D27D4EB4F
_PRIME64_3 = 0x165667B19E3779F9
_PRIME64_4 = 0x85EBCA77C2B2AE63
_PRIME64_5 = 0x27D4EB2F165667C5
_PRIME_MX1 = 0x165667919E3779F9
_PRIME_MX2 = 0x9FB21C651E98DF25

# XXH3's default 192-byte secret (kSecret).
_SECRET = bytes.fromhex(
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671f"
    "cb79e64eccc0e578825ad07dccff7221b8084674f743248ee03590e6813a264c"
    "3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
    "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364"
    "eac5ac8334d3ebc3c581a0fffa1363eb170ddd51b7f0da49d316552629d4689e"
    "2b16be587d47a1fc8ff8b8d17ad031ce45cb3a8f95160428afd7fbcabb4b407e"
)
_SECRET_SIZE = len(_SECRET)
_STRIPE_LEN = 64
_SECRET_CONSUME_RATE = 8
_ACC_NB = 8

_u32 = struct.Struct("<I").unpack_from
_u64 = struct.Struct("<Q").unpack_from
_u64x8 = struct.Struct("<8Q").unpack_from


def _rotl64(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _swap64(x: int) -> int:
    return int.from_bytes(x.to_bytes(8, "little"), "big")


def _mul128_fold64(a: int, b: int) -> int:
    p = a * b
    return (p ^ (p >> 64)) & _M64


def _xxh64_avalanche(h: int) -> int:
    h ^= h >> 33
    h = (h * _PRIME64_2) & _M64
    h ^= h >> 29
    h = (h * _PRIME64_3) & _M64
    return h ^ (h >> 32)


def _xxh3_avalanche(h: int) -> int:
    h ^= h >> 37
    h = (h * _PRIME_MX1) & _M64
    return h ^ (h >> 32)


def _rrmxmx(h: int, length: int) -> int:
    h ^= _rotl64(h, 49) ^ _rotl64(h, 24)
    h = (h * _PRIME_MX2) & _M64
    h ^= (h >> 35) + length
    h = (h * _PRIME_MX2) & _M64
    return h ^ (h >> 28)


def _mix16(data, off: int, soff: int) -> int:
    lo, hi = _u64(data, off)[0], _u64(data, off + 8)[0]
    return _mul128_fold64(lo ^ _u64(_SECRET, soff)[0], hi ^ _u64(_SECRET, soff + 8)[0])


def _accumulate_512(acc: list[int], data, off: int, soff: int) -> None:
    vals = _u64x8(data, off)
    keys = _u64x8(_SECRET, soff)
    for i in range(_ACC_NB):
        v = vals[i]
        k = v ^ keys[i]
        acc[i ^ 1] = (acc[i ^ 1] + v) & _M64
        acc[i] = (acc[i] + (k & 0xFFFFFFFF) * (k >> 32)) & _M64


def _scramble(acc: list[int]) -> None:
    keys = _u64x8(_SECRET, _SECRET_SIZE - _STRIPE_LEN)
    for i in range(_ACC_NB):
        a = acc[i]
        a ^= a >> 47
        a ^= keys[i]
        acc[i] = (a * _PRIME32_1) & _M64


def _hash_long(data, length: int) -> int:
    acc = [_PRIME32_3, _PRIME64_1, _PRIME64_2, _PRIME64_3, _PRIME64_4, _PRIME32_2, _PRIME64_5, _PRIME32_1]
    stripes_per_block = (_SECRET_SIZE - _STRIPE_LEN) // _SECRET_CONSUME_RATE
    block_len = _STRIPE_LEN * stripes_per_block
    nb_blocks = (length - 1) // block_len
    for n in range(nb_blocks):
        base = n * block_len
        for s in range(stripes_per_block):
            _accumulate_512(acc, data, base + s * _STRIPE_LEN, s * _SECRET_CONSUME_RATE)
        _scramble(acc)
    base = nb_blocks * block_len
    nb_stripes = ((length - 1) - base) // _STRIPE_LEN
    for s in range(nb_stripes):
        _accumulate_512(acc, data, base + s * _STRIPE_LEN, s * _SECRET_CONSUME_RATE)
    _accumulate_512(acc, data, length - _STRIPE_LEN, _SECRET_SIZE - _STRIPE_LEN - 7)
    result = (length * _PRIME64_1) & _M64
    for i in range(4):
        result += _mul128_fold64(acc[2 * i] ^ _u64(_SECRET, 11 + 16 * i)[0],
                                 acc[2 * i + 1] ^ _u64(_SECRET, 11 + 16 * i + 8)[0])
    return _xxh3_avalanche(result & _M64)


def xxh3_64(data: bytes | bytearray | memoryview) -> int:
    """XXH3-64 of `data` with seed 0 and the default secret (LLVM's `xxh3_64bits`)."""
    data = bytes(data) if not isinstance(data, bytes) else data
    n = len(data)
    if n == 0:
        return _xxh64_avalanche(_u64(_SECRET, 56)[0] ^ _u64(_SECRET, 64)[0])
    if n <= 3:
        combined = (data[0] << 16) | (data[n >> 1] << 24) | data[n - 1] | (n << 8)
        bitflip = _u32(_SECRET, 0)[0] ^ _u32(_SECRET, 4)[0]
        return _xxh64_avalanche(combined ^ bitflip)
    if n <= 8:
        in1, in2 = _u32(data, 0)[0], _u32(data, n - 4)[0]
        bitflip = _u64(_SECRET, 8)[0] ^ _u64(_SECRET, 16)[0]
        return _rrmxmx((in2 + (in1 << 32)) ^ bitflip, n)
    if n <= 16:
        bitflip1 = _u64(_SECRET, 24)[0] ^ _u64(_SECRET, 32)[0]
        bitflip2 = _u64(_SECRET, 40)[0] ^ _u64(_SECRET, 48)[0]
        lo = _u64(data, 0)[0] ^ bitflip1
        hi = _u64(data, n - 8)[0] ^ bitflip2
        acc = n + _swap64(lo) + hi + _mul128_fold64(lo, hi)
        return _xxh3_avalanche(acc & _M64)
    if n <= 128:
        acc = n * _PRIME64_1
        if n > 32:
            if n > 64:
                if n > 96:
                    acc += _mix16(data, 48, 96) + _mix16(data, n - 64, 112)
                acc += _mix16(data, 32, 64) + _mix16(data, n - 48, 80)
            acc += _mix16(data, 16, 32) + _mix16(data, n - 32, 48)
        acc += _mix16(data, 0, 0) + _mix16(data, n - 16, 16)
        return _xxh3_avalanche(acc & _M64)
    if n <= 240:
        acc = n * _PRIME64_1
        for i in range(8):
            acc += _mix16(data, 16 * i, 16 * i)
        acc = _xxh3_avalanche(acc & _M64)
        for i in range(8, n // 16):
            acc += _mix16(data, 16 * i, 16 * (i - 8) + 3)
        acc += _mix16(data, n - 16, 136 - 17)
        return _xxh3_avalanche(acc & _M64)
    return _hash_long(data, n)


def _key_bytes(key: str | bytes) -> bytes:
    # IDs read from files are decoded with surrogateescape; this gives back the exact bytes.
    return key if isinstance(key, bytes) else key.encode("utf-8", "surrogateescape")


def stringmap_hash(key: str | bytes) -> int:
    """`StringMapImpl::hash` in LLVM 19: xxh3_64bits truncated to 32 bits."""
    return xxh3_64(_key_bytes(key)) & 0xFFFFFFFF


if TYPE_CHECKING:
    V = TypeVar("V")
    _Values = Generic[V]
else:  # typing is not imported at run time (start-up cost of every CLI call)
    _Values = object


class StringMap(_Values):
    """An insertion model of `llvm::StringMap`: same bucket layout, so the same iteration order.

    Supports what the bundler needs: insert-or-assign, lookup, erase (tombstone) and iteration."""

    _TOMBSTONE = object()

    def __init__(self) -> None:
        self._buckets: list = []  # None | _TOMBSTONE | (hash, key, value)
        self._items = 0
        self._tombstones = 0

    def _lookup(self, key: str, full_hash: int) -> tuple[int, bool]:
        """Bucket for `key`: (index, found). Mirrors `StringMapImpl::LookupBucketFor`."""
        if not self._buckets:
            self._buckets = [None] * 16
        size = len(self._buckets)
        bucket = full_hash & (size - 1)
        probe = 1
        first_tombstone = -1
        while True:
            entry = self._buckets[bucket]
            if entry is None:
                return (first_tombstone if first_tombstone != -1 else bucket), False
            if entry is self._TOMBSTONE:
                if first_tombstone == -1:
                    first_tombstone = bucket
            elif entry[0] == full_hash and entry[1] == key:
                return bucket, True
            bucket = (bucket + probe) & (size - 1)
            probe += 1

    def __setitem__(self, key: str, value: V) -> None:
        h = stringmap_hash(key)
        bucket, found = self._lookup(key, h)
        if found:
            self._buckets[bucket] = (h, key, value)
            return
        if self._buckets[bucket] is self._TOMBSTONE:
            self._tombstones -= 1
        self._buckets[bucket] = (h, key, value)
        self._items += 1
        self._rehash()

    def _rehash(self) -> None:
        size = len(self._buckets)
        if self._items * 4 > size * 3:
            new_size = size * 2
        elif size - (self._items + self._tombstones) <= size // 8:
            new_size = size
        else:
            return
        new = [None] * new_size
        for entry in self._buckets:
            if entry is None or entry is self._TOMBSTONE:
                continue
            b = entry[0] & (new_size - 1)
            probe = 1
            while new[b] is not None:
                b = (b + probe) & (new_size - 1)
                probe += 1
            new[b] = entry
        self._buckets = new
        self._tombstones = 0

    def get(self, key: str, default=None):
        if not self._buckets:
            return default
        bucket, found = self._lookup(key, stringmap_hash(key))
        return self._buckets[bucket][2] if found else default

    def __contains__(self, key: str) -> bool:
        if not self._buckets:
            return False
        return self._lookup(key, stringmap_hash(key))[1]

    def __delitem__(self, key: str) -> None:
        bucket, found = self._lookup(key, stringmap_hash(key)) if self._buckets else (0, False)
        if not found:
            raise KeyError(key)
        self._buckets[bucket] = self._TOMBSTONE
        self._items -= 1
        self._tombstones += 1

    def __len__(self) -> int:
        return self._items

    def items(self) -> Iterator[tuple[str, V]]:
        """Entries in bucket order (LLVM's iteration order)."""
        for entry in list(self._buckets):
            if entry is not None and entry is not self._TOMBSTONE:
                yield entry[1], entry[2]

    def keys(self) -> Iterator[str]:
        return (k for k, _ in self.items())

    def __iter__(self) -> Iterator[str]:
        return self.keys()


def stringmap_order(keys: Iterable[str]) -> list[str]:
    """The distinct `keys`, inserted in the given order, as a StringMap iterates them."""
    m: StringMap[None] = StringMap()
    for k in keys:
        m[k] = None
    return list(m.keys())
