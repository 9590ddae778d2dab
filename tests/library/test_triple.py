"""offload_tool.rules.triple against tables verified with LLVM 19 and 22, and the real LLVM 19 tools."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from conftest import oracle_crashed, need_tool, run
from offload_tool.rules.triple import (KNOWN_ARCHS, is_compatible_with, is_valid_arch, normalize, parse_triple,
                                 split_triple4)

# input -> normalize() (19 = 22)
NORMALIZE = [
    ("nvptx64", "nvptx64"),
    ("nvptx64-nvidia-cuda", "nvptx64-nvidia-cuda"),
    ("nvptx64-nvidia", "nvptx64-nvidia"),
    ("nvptx64--", "nvptx64-unknown-unknown"),
    ("nvptx64-nvidia-cuda-", "nvptx64-nvidia-cuda-unknown"),
    ("nvptx64-cuda", "nvptx64-unknown-cuda"),
    ("nvptx64-cuda-nvidia", "nvptx64-nvidia-cuda"),
    ("amdgcn", "amdgcn"),
    ("amdgcn-amd-amdhsa", "amdgcn-amd-amdhsa"),
    ("amdgcn-amd-amdhsa-", "amdgcn-amd-amdhsa-unknown"),
    ("amdgcn-amd-amdhsa-unknown", "amdgcn-amd-amdhsa-unknown"),
    ("amdgcn--amdhsa", "amdgcn-unknown-amdhsa"),
    ("amdgcn-amdhsa", "amdgcn-unknown-amdhsa"),
    ("amdgcn-amdhsa-amd", "amdgcn-amd-amdhsa"),
    ("amdgcn-amd-amdhsa-gfx906", "amdgcn-amd-amdhsa-gfx906"),
    ("amdgcn-amd-amdhsa-unknown-gfx906", "amdgcn-amd-amdhsa-unknown-gfx906"),
    ("amdgcn-amd-amdpal", "amdgcn-amd-amdpal"),
    ("amdgcn-amd-mesa3d", "amdgcn-amd-mesa3d"),
    ("AMDGCN-amd-amdhsa", "AMDGCN-amd-amdhsa"),
    ("x86_64-unknown-linux-gnu", "x86_64-unknown-linux-gnu"),
    ("x86_64-linux-gnu", "x86_64-unknown-linux-gnu"),
    ("x86_64-gnu-linux", "x86_64-unknown-linux-gnu"),
    ("x86_64-pc-linux-gnu", "x86_64-pc-linux-gnu"),
    ("x86_64-unknown-linux", "x86_64-unknown-linux"),
    ("x86_64", "x86_64"),
    ("x86_64-w64-mingw32", "x86_64-w64-windows-gnu"),
    ("aarch64-linux-android", "aarch64-unknown-linux-android"),
    ("spirv64", "spirv64"),
    ("spirv64-amd-amdhsa", "spirv64-amd-amdhsa"),
    ("spirv64-unknown-unknown", "spirv64-unknown-unknown"),
    ("spirv64-intel", "spirv64-intel"),
    ("", "unknown"),
    # checked with clang-19 -print-target-triple
    ("gnu-x86_64", "x86_64-unknown-unknown-gnu"),
    ("linux-amd-x86_64-gnu", "x86_64-amd-linux-gnu"),
    ("amdgcn--amdhsa-", "amdgcn-unknown-amdhsa-unknown"),
    ("cuda-nvptx64", "nvptx64-unknown-cuda"),
]


@pytest.mark.parametrize("raw,expected", NORMALIZE)
def test_normalize_table(raw, expected):
    assert normalize(raw) == expected


# 22's normalize(FOUR_IDENT)
FOUR_IDENT = [
    ("nvptx64", "nvptx64-unknown-unknown-unknown"),
    ("nvptx64-nvidia-cuda", "nvptx64-nvidia-cuda-unknown"),
    ("nvptx64-nvidia", "nvptx64-nvidia-unknown-unknown"),
    ("nvptx64-cuda-nvidia", "nvptx64-nvidia-cuda-unknown"),
    ("amdgcn-amd-amdhsa-", "amdgcn-amd-amdhsa-unknown"),
    ("amdgcn-amdhsa", "amdgcn-unknown-amdhsa-unknown"),
    ("amdgcn-amd-amdhsa-unknown-gfx906", "amdgcn-amd-amdhsa-unknown"),
    ("AMDGCN-amd-amdhsa", "AMDGCN-amd-amdhsa-unknown"),
    ("x86_64-linux-gnu", "x86_64-unknown-linux-gnu"),
    ("x86_64-unknown-linux", "x86_64-unknown-linux-unknown"),
    ("x86_64-w64-mingw32", "x86_64-w64-windows-gnu"),
    ("spirv64-intel", "spirv64-intel-unknown-unknown"),
    ("", "unknown-unknown-unknown-unknown"),
    ("a-b-c-d-e", "a-b-c-d"),
]


@pytest.mark.parametrize("raw,expected", FOUR_IDENT)
def test_normalize_four_ident(raw, expected):
    assert normalize(raw, 4) == expected
    assert normalize(raw, 3) == "-".join(expected.split("-")[:3])


# the raw 4 fields as Triple(str) keeps them
RAW4 = [
    ("nvptx64", "nvptx64---"),
    ("nvptx64-nvidia-cuda", "nvptx64-nvidia-cuda-"),
    ("nvptx64-nvidia", "nvptx64-nvidia--"),
    ("nvptx64--", "nvptx64---"),
    ("nvptx64-nvidia-cuda-", "nvptx64-nvidia-cuda-"),
    ("amdgcn", "amdgcn---"),
    ("amdgcn-amd-amdhsa", "amdgcn-amd-amdhsa-"),
    ("amdgcn-amd-amdhsa-", "amdgcn-amd-amdhsa-"),
    ("amdgcn-amd-amdhsa-unknown", "amdgcn-amd-amdhsa-unknown"),
    ("amdgcn--amdhsa", "amdgcn--amdhsa-"),
    ("amdgcn-amdhsa", "amdgcn-amdhsa--"),
    ("x86_64-unknown-linux-gnu", "x86_64-unknown-linux-gnu"),
    ("x86_64-linux-gnu", "x86_64-linux-gnu-"),
    ("x86_64", "x86_64---"),
    ("spirv64", "spirv64---"),
    ("spirv64-amd-amdhsa", "spirv64-amd-amdhsa-"),
    ("spirv64-unknown-unknown", "spirv64-unknown-unknown-"),
    ("x86_64-pc-linux-gnu-foo-bar", "x86_64-pc-linux-gnu-foo-bar"),
]


@pytest.mark.parametrize("raw,expected", RAW4)
def test_split_triple4(raw, expected):
    assert "-".join(split_triple4(raw)) == expected
    assert str(parse_triple(raw)) == expected


# Verified by bundling with clang-offload-bundler-19 (valid arch <=> no "unknown target triple" error).
VALID_ARCHS = ["x86_64", "amdgcn", "nvptx64", "nvptx", "spirv64", "spirv", "aarch64", "le32", "le64", "kalimba3",
               "bpf", "bpfeb", "arm64_32", "arm64e", "aarch64_be", "armebv7", "thumbv6m", "thumbv7em", "armv8.2a",
               "armv8.10a", "aarch64v8a", "spirv64v1.3", "dxilv1.3", "armv7-a", "armv5", "armv3", "armv2",
               "i986", "x86_64h", "sparc64", "amdil64", "hsail", "spirv1.6", "dxilv1.8", "xtensa", "riscv32",
               "renderscript32", "ve", "csky", "loongarch64", "m68k", "arc", "avr", "shave", "tce", "tcele",
               "lanai", "msp430", "i386", "powerpcspe", "ppu", "mipsallegrex", "mipsisa64r6el", "mipsn32r6",
               "wasm64", "r600", "armv8m.main", "armv9.5a", "xscale"]
INVALID_ARCHS = ["AMDGCN", "unknown", "", "aarch64eb", "armfoo", "thumbv3", "bpf_foo", "spirv1.4", "dxilv1.9",
                 "x86-64", "gfx906", "sm_70", "cuda", "amd64x"]


@pytest.mark.parametrize("arch", VALID_ARCHS)
def test_valid_arch(arch):
    assert is_valid_arch(arch)


@pytest.mark.parametrize("arch", INVALID_ARCHS)
def test_invalid_arch(arch):
    assert not is_valid_arch(arch)


def test_known_archs_has_offload_archs():
    assert {"x86_64", "amdgcn", "nvptx64", "spirv64", "aarch64", "amd64"} <= KNOWN_ARCHS
    assert "unknown" not in KNOWN_ARCHS


COMPATIBLE = [
    ("amdgcn-amd-amdhsa-", "amdgcn-amd-amdhsa-unknown", True),   # empty env == unknown env
    ("amdgcn-amd-amdhsa-", "amdgcn-amd-amdhsa", True),
    ("amdgcn-amd-amdhsa-gnu", "amdgcn-amd-amdhsa-", False),       # 19 does not extract ...-gnu-gfx906
    ("nvptx64-nvidia-cuda-", "nvptx64-nvidia-cuda-unknown", True),
    ("x86_64-unknown-linux-gnu", "x86_64-pc-linux-gnu", False),
    ("x86_64-unknown-linux-gnu", "x86_64-foo-linux-gnu", True),     # unrecognised vendors are all Unknown
    ("x86_64-unknown-linux-gnu", "x86_64-unknown-linux-", False),
    ("x86_64-unknown-linux-gnu", "amd64-unknown-linux-gnu", True),  # same ArchType
    ("x86_64-apple-macosx10.15", "x86_64-apple-macosx11", True),    # Apple ignores versions/env
    ("thumbv7-unknown-linux-gnueabi", "armv7-unknown-linux-gnueabi", True),
    ("amdgcn-amd-amdhsa-", "spirv64-amd-amdhsa-", False),
    ("x86_64-unknown-linux-gnu-host-x86_64-unknown-linux-gnu", "x86_64-unknown-linux-gnu", True),
]


@pytest.mark.parametrize("a,b,expected", COMPATIBLE)
def test_is_compatible_with(a, b, expected):
    assert is_compatible_with(a, b) is expected
    assert is_compatible_with(b, a) is expected


_COMPONENTS = ["x86_64", "amdgcn", "nvptx64", "aarch64", "spirv64", "amd", "nvidia", "pc", "unknown", "linux",
               "cuda", "amdhsa", "gnu", "musl", "android", "elf", "", "foo", "none", "mingw32", "windows"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(_COMPONENTS), min_size=0, max_size=6))
def test_normalize_total(parts):
    """Never raises; keeps every non-empty component (Windows forms aside) and gives at least as many fields."""
    raw = "-".join(parts)
    out = normalize(raw)
    assert isinstance(out, str) and out
    if not any(p in ("mingw32", "windows") for p in parts):
        kept = sorted(p for p in parts if p not in ("", "unknown"))
        assert sorted(p for p in out.split("-") if p != "unknown") == kept


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from([c for c in _COMPONENTS if c not in ("mingw32", "windows")]), min_size=1,
                max_size=4))
def test_normalize_matches_clang19(parts):
    """`clang-19 -print-target-triple --target=T` prints Triple::normalize(T) for these components."""
    clang = need_tool("clang-19")
    raw = "-".join(parts)
    if not raw or raw.startswith("-"):
        return  # the driver would read it as an option
    proc = run([clang, "-print-target-triple", f"--target={raw}"])
    if proc.returncode != 0:
        return  # e.g. an OS version the driver rejects; normalize itself never fails
    expected = normalize(raw)
    if "-unknown-gnu" in raw or "-pc-gnu" in raw:
        # The driver, not Triple::normalize, reads these historical GNU/Hurd spellings as OS hurd.
        fields = expected.split("-")
        expected = "-".join(fields[:2] + ["hurd"] + fields[3:])
    assert proc.stdout.decode().strip() == expected, raw


def test_valid_arch_matches_bundler19(tmp_path):
    """The bundler's 'unknown target triple' check agrees with is_valid_arch on a sample of names."""
    bundler = need_tool("clang-offload-bundler-19")
    (tmp_path / "h").write_bytes(b"H")
    (tmp_path / "d").write_bytes(b"D")
    valid = {"le32": True, "aarch64eb": False, "armv8.10a": True, "thumbv3": False, "kalimba3": True,
             "AMDGCN": False, "spirv64v1.3": True, "bpf_foo": False}
    for arch, expected in valid.items():
        assert is_valid_arch(arch) == expected, arch
        proc = run([bundler, "-type=bc", f"-targets=host-x86_64-unknown-linux-gnu,openmp-{arch}",
                    f"-input={tmp_path / 'h'}", f"-input={tmp_path / 'd'}", f"-output={tmp_path / 'o'}"])
        if oracle_crashed(proc):
            continue
        assert (proc.returncode == 0) == expected, (arch, proc.stderr)
        if proc.returncode:
            assert b"unknown target triple" in proc.stderr
