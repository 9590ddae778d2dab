"""llvm::hash_value(StringRef) and DenseMap order, checked against the real packagers' string-entry order."""

from __future__ import annotations

import random
import string

import pytest
from hypothesis import given, settings, strategies as st

from conftest import need_tool, run
from offload_tool.rules.densemap import EXECUTION_SEED, DenseMap, dense_map_hash, dense_map_order, hash_value
from offload_tool.formats.offload_binary import read_offload_binaries


def test_known_buckets_and_orders():
    # Verified against clang-offload-packager-19.
    assert [dense_map_hash(k) & 63 for k in ("file", "triple", "arch", "kind")] == [19, 24, 9, 37]
    assert dense_map_order(["file", "triple", "arch", "kind"]) == ["arch", "file", "triple", "kind"]
    assert dense_map_order(["file", "triple", "arch", "kind", "foo", "zzz", "a"]) == \
        ["zzz", "arch", "file", "triple", "kind", "foo", "a"]


def test_empty_string_hash_is_k2_xor_seed():
    assert hash_value(b"") == 0x9AE16A3B2F90404F ^ EXECUTION_SEED
    assert hash_value("abc") == hash_value(b"abc")


def test_seed_matters():
    assert hash_value(b"triple") != hash_value(b"triple", seed=0)


def test_dense_map_update_keeps_position():
    m = DenseMap()
    for k in ("file", "triple", "arch", "kind"):
        m[k] = k
    m["file"] = "x"
    assert m.keys() == ["arch", "file", "triple", "kind"]
    assert m["file"] == "x" and "arch" in m and "nope" not in m and len(m) == 4


@settings(max_examples=50, deadline=None)
@given(st.lists(st.binary(max_size=200), unique=True, max_size=120))
def test_order_is_a_permutation(keys):
    order = dense_map_order(keys)
    assert sorted(order) == sorted(keys)


def _random_keys(rng: random.Random, n: int) -> list[str]:
    alphabet = string.ascii_letters + string.digits + "_.-+:"
    lengths = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 200]
    keys = {"".join(rng.choice(alphabet) for _ in range(rng.choice(lengths))) for _ in range(n)}
    return sorted(keys - {"file", "kind", "triple"})


@pytest.mark.parametrize("tool", ["clang-offload-packager-19", "llvm-offload-binary-22"])
def test_string_entry_order_matches_llvm(tool, tmp_path):
    """Random key sets (every hash_short branch, the >64-byte hash_state path, table growth past
    64 buckets) packaged by LLVM: the string entries come out in our DenseMap order."""
    exe = need_tool(tool)
    (tmp_path / "dev.o").write_bytes(b"device")
    rng = random.Random(1234 if "19" in tool else 4321)
    for trial in range(12):
        keys = _random_keys(rng, rng.choice([3, 10, 30, 60, 100]))
        args = ["file=dev.o", "triple=x86_64-unknown-linux-gnu"] + [f"{k}=v{i}" for i, k in enumerate(keys)]
        rng.shuffle(args)
        res = run([exe, "-o", "out", "--image=" + ",".join(args)], cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        (img,) = read_offload_binaries((tmp_path / "out").read_bytes())
        expected = [k for k in dense_map_order([a.partition("=")[0] for a in args]) if k != "file"]
        assert list(img.strings) == expected, (trial, args)
