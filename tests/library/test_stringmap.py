"""XXH3-64 and llvm::StringMap order, checked against libxxhash / libLLVM and clang-offload-bundler's -list."""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import random

import pytest
from hypothesis import given, settings, strategies as st

from conftest import need_tool, run
from offload_tool.rules.stringmap import StringMap, stringmap_hash, stringmap_order, xxh3_64

# XXH3_64bits(seed 0) of bytes((i*31+7) & 255 for i in range(n)), from libxxhash 0.8.1: one length
# per code path (0, 1-3, 4-8, 9-16, 17-128, 129-240, long with partial and full 1 KiB blocks).
KNOWN = {
    0: 0x2D06800538D394C2, 1: 0x4C5CCA45D0F4811F, 2: 0xA7E250C97710FF27, 3: 0x15F7093B173D005C,
    4: 0xDCA012F95811B6B9, 8: 0xDEC6A9A43575982E, 9: 0xCBE393399F17FFBD, 16: 0x7E484C18D74895D0,
    17: 0x208BDE5EE2BED407, 64: 0xDD30702AB46B3745, 128: 0xF92B70EAA21A6288, 129: 0xF8F76713F2BB60FA,
    240: 0xCCC7375172C41F03, 241: 0x0B3B630948CE4A00, 1024: 0x23BC880EBF0D29C6, 1025: 0xC09FDFBC398C7D82,
    3000: 0x6EB4B5BFE14D9786,
}


def _pattern(n: int) -> bytes:
    return bytes((i * 31 + 7) & 255 for i in range(n))


@pytest.mark.parametrize("n", sorted(KNOWN))
def test_known_vectors(n):
    assert xxh3_64(_pattern(n)) == KNOWN[n]


def _reference_hashers():
    found = []
    name = ctypes.util.find_library("xxhash")
    if name:
        lib = ctypes.CDLL(name)
        lib.XXH3_64bits.restype = ctypes.c_uint64
        lib.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        found.append(("libxxhash", lib.XXH3_64bits))
    for path in sorted(glob.glob("/usr/lib/llvm-19/lib/libLLVM.so.19*")) + sorted(glob.glob("/usr/lib/llvm-19/lib/libLLVM-19.so")):
        try:
            llvm = ctypes.CDLL(path)
            fn = llvm._ZN4llvm11xxh3_64bitsENS_8ArrayRefIhEE  # llvm::xxh3_64bits(ArrayRef<uint8_t>)
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_uint64
        fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t]  # ArrayRef is passed as (pointer, length)
        found.append(("libLLVM-19", fn))
        break
    return found


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=2500))
def test_matches_reference_libraries(data):
    hashers = _reference_hashers()
    if not hashers:
        pytest.skip("neither libxxhash nor libLLVM-19 is installed")
    for name, fn in hashers:
        assert xxh3_64(data) == fn(data, len(data)), name


def test_stringmap_hash_is_low_32_bits():
    assert stringmap_hash("abc") == xxh3_64(b"abc") & 0xFFFFFFFF
    assert stringmap_hash(b"abc") == stringmap_hash("abc")


def test_stringmap_semantics():
    m: StringMap[int] = StringMap()
    assert len(m) == 0 and list(m.items()) == [] and "x" not in m and m.get("x", 5) == 5
    keys = [f"k{i}" for i in range(40)]  # forces growth 16 -> 32 -> 64
    for i, k in enumerate(keys):
        m[k] = i
    order = list(m.keys())
    assert sorted(order) == sorted(keys) and len(m) == 40
    m["k3"] = 99  # assignment keeps the position
    assert list(m.keys()) == order and m.get("k3") == 99
    del m["k5"]
    assert "k5" not in m and list(m.keys()) == [k for k in order if k != "k5"]
    with pytest.raises(KeyError):
        del m["k5"]
    m["k5"] = 1  # reuses the tombstone it probes first
    assert len(m) == 40 and "k5" in m


def test_bucket_order_small():
    # With 16 buckets and no collisions, iteration order is the order of hash & 15.
    keys = ["host-x86_64-unknown-linux-gnu-", "openmp-nvptx64-nvidia-cuda--sm_70", "hip-amdgcn-amd-amdhsa--gfx906"]
    buckets = [stringmap_hash(k) & 15 for k in keys]
    if len(set(buckets)) == 3:
        assert stringmap_order(keys) == [k for _, k in sorted(zip(buckets, keys))]
    # LLVM 19 lists this bundle as gfx906, sm_70, host.
    assert stringmap_order(keys) == [keys[2], keys[1], keys[0]]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=40), unique=True, max_size=80))
def test_order_is_a_permutation(keys):
    assert sorted(stringmap_order(keys)) == sorted(keys)


_ARCHS = ["gfx900", "gfx906", "gfx908", "gfx90a", "gfx1030", "gfx1100", "gfx803", "gfx940", "gfx1010", "gfx1101"]


def _random_targets(rng: random.Random, n: int) -> list[str]:
    out = {"host-x86_64-unknown-linux-gnu"}
    while len(out) < n:
        kind = rng.choice(["openmp", "hip", "hipv4"])
        if rng.random() < 0.3:
            out.add(f"openmp-nvptx64-nvidia-cuda-sm_{rng.choice([50, 60, 70, 75, 80, 86, 89, 90])}")
        else:
            out.add(f"{kind}-amdgcn-amd-amdhsa-{rng.choice(['', 'unknown', 'foo'])}-{rng.choice(_ARCHS)}")
    return sorted(out)


def test_list_order_matches_llvm(tmp_path):
    """Binary bundles with 3..40 entries (16, 32, 64 buckets): LLVM 19's -list order is our StringMap order."""
    exe = need_tool("clang-offload-bundler-19")
    from offload_tool.rules.bundle_id import standardize

    rng = random.Random(19)
    (tmp_path / "p").write_bytes(b"x")
    for n in (3, 12, 13, 17, 25, 40):
        targets = _random_targets(rng, n)
        # Drop targets that would conflict (gfx... with and without features never occur here).
        res = run([exe, "-type=bc", "-targets=" + ",".join(targets), *["-input=p"] * len(targets), "-output=b"],
                  cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        listed = run([exe, "-list", "-type=bc", "-input=b"], cwd=tmp_path).stdout.decode().split()
        assert listed == stringmap_order([str(standardize(t)) for t in targets]), n
