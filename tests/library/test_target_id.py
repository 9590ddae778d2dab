"""offload_tool.rules.target_id against tables verified with the real clang 19/22 drivers, and those drivers."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings, strategies as st

from conftest import need_tool, run
from offload_tool.errors import OffloadError, TargetIDError
from offload_tool.rules.target_id import (BAD_ARCH_COMBO_MSG, BAD_TARGET_ID_MSG, TargetID, allowed_features,
                                    canonical_offload_arch, canonical_processor, conflicting_target_ids,
                                    is_compatible_target_id, is_offload_arch_name, is_target_compatible_for_link,
                                    offload_arch_vendor, offload_triple, parse_target_id, parse_target_id_format)

# ---- parseTargetID: (triple, input, version) -> canonical ID or None (invalid) --------------------------
AMD = "amdgcn-amd-amdhsa"
PARSE = [
    (AMD, "gfx906", 19, "gfx906"),
    (AMD, "gfx906:xnack-:sramecc+", 19, "gfx906:sramecc+:xnack-"),
    (AMD, "gfx906:xnack+:xnack-", 19, None),
    (AMD, "gfx906:xnack+:xnack+", 19, None),
    (AMD, "gfx906:xnack", 19, None),
    (AMD, "gfx906:xnack*", 19, None),
    (AMD, "gfx906:foo+", 19, None),
    (AMD, "gfx906::xnack+", 19, None),
    (AMD, ":xnack+", 19, None),
    (AMD, "", 19, None),
    (AMD, "GFX906", 19, None),
    (AMD, "gfx9999", 19, None),
    (AMD, "generic", 19, None),
    (AMD, "gfx908:+", 19, None),
    (AMD, "gfx906:", 19, "gfx906"),
    (AMD, "gfx908:xnack+:", 19, "gfx908:xnack+"),
    (AMD, "carrizo:xnack+", 19, "gfx801:xnack+"),
    (AMD, "fiji", 19, "gfx803"),
    (AMD, "gfx1030:xnack+", 19, None),
    (AMD, "gfx1100:sramecc-", 19, None),
    (AMD, "gfx9-generic:sramecc+", 19, None),
    (AMD, "gfx1250:xnack+", 22, None),
    (AMD, "gfx9-generic:xnack-", 19, "gfx9-generic:xnack-"),
    (AMD, "gfx10-1-generic:xnack+", 19, "gfx10-1-generic:xnack+"),
    (AMD, "gfx950:xnack+", 19, None),
    (AMD, "gfx950:xnack+", 22, "gfx950:xnack+"),
    (AMD, "gfx9-4-generic:sramecc+:xnack+", 19, None),
    (AMD, "gfx9-4-generic:sramecc+:xnack+", 22, "gfx9-4-generic:sramecc+:xnack+"),
    (AMD, "gfx940:sramecc+", 19, "gfx940:sramecc+"),
    (AMD, "gfx940", 22, None),
    ("nvptx64-nvidia-cuda", "sm_90a", 19, "sm_90a"),
    ("nvptx64-nvidia-cuda", "sm_90a:foo+", 19, None),
    ("x86_64-unknown-linux-gnu", "znver4", 19, "znver4"),
    ("spirv64-amd-amdhsa", "amdgcnspirv", 19, "amdgcnspirv"),
    ("spirv64-amd-amdhsa", "amdgcnspirv:xnack+", 19, None),
    ("r600-unknown-unknown", "palm", 19, "cedar"),
]


@pytest.mark.parametrize("triple,tid,version,expected", PARSE)
def test_parse_target_id(triple, tid, version, expected):
    if expected is None:
        with pytest.raises(TargetIDError) as exc:
            parse_target_id(tid, triple, version)
        assert str(exc.value) == BAD_TARGET_ID_MSG % tid
    else:
        parsed = parse_target_id(tid, triple, version)
        assert parsed.canonical == expected == str(parsed)
        assert list(parsed.features) == sorted(parsed.features)


def test_target_id_feature_lookup():
    t = parse_target_id("gfx90a:xnack-:sramecc+")
    assert t == TargetID("gfx90a", (("sramecc", True), ("xnack", False)))
    assert t.feature("xnack") is False and t.feature("sramecc") is True and t.feature("foo") is None
    assert parse_target_id("gfx90a").feature("xnack") is None


def test_format_only_parse():
    assert parse_target_id_format("") == ("", {})
    assert parse_target_id_format("gfx908:+") == ("gfx908", {"": True})
    assert parse_target_id_format("fiji:xnack-") == ("fiji", {"xnack": False})
    assert parse_target_id_format("gfx906::xnack+") is None


# ---- which features each processor allows, and release membership ---------------------------------
BOTH = ["gfx906", "gfx908", "gfx90a", "gfx942"]
XNACK_ONLY = ["gfx801", "carrizo", "gfx810", "stoney", "gfx900", "gfx902", "gfx904", "gfx909", "gfx90c", "gfx1010",
              "gfx1011", "gfx1012", "gfx1013", "gfx9-generic", "gfx10-1-generic"]
NEITHER = ["gfx600", "tahiti", "gfx700", "gfx803", "fiji", "gfx1030", "gfx1036", "gfx1100", "gfx1151", "gfx1200",
           "gfx1201", "gfx10-3-generic", "gfx11-generic", "gfx12-generic"]


@pytest.mark.parametrize("version", [19, 22])
def test_allowed_features_summary(version):
    for p in BOTH:
        assert allowed_features(p, AMD, version) == ("sramecc", "xnack"), p
    for p in XNACK_ONLY:
        assert allowed_features(p, AMD, version) == ("xnack",), p
    for p in NEITHER:
        assert allowed_features(p, AMD, version) == (), p
    assert allowed_features("gfx906", "nvptx64-nvidia-cuda", version) == ()
    assert allowed_features("cedar", "r600", version) == ()


def test_version_membership():
    for p in ("gfx940", "gfx941"):
        assert canonical_processor(p, AMD, 19) == p and canonical_processor(p, AMD, 22) is None
    for p in ("gfx950", "gfx1153", "gfx9-4-generic", "gfx1250", "gfx1251"):
        assert canonical_processor(p, AMD, 19) is None and canonical_processor(p, AMD, 22) == p
    assert allowed_features("gfx950", AMD, 22) == ("sramecc", "xnack")
    assert allowed_features("gfx1250", AMD, 22) == ()
    for v in (19, 22):
        assert canonical_processor("gfx1154", AMD, v) is None  # main only
        assert canonical_processor("polaris11", AMD, v) == "gfx803"
        assert canonical_processor("GFX906", AMD, v) is None
        assert canonical_processor("", AMD, v) is None
        assert canonical_processor("znver4", "x86_64-unknown-linux-gnu", v) == "znver4"


# ---- isCompatibleTargetID ---------------------------------------------------------------------------------
COMPAT = [
    ("gfx906", "gfx906:xnack+", True),
    ("gfx906:xnack+", "gfx906", False),
    ("gfx906:xnack+", "gfx906:xnack-", False),
    ("gfx906:xnack+", "gfx906:sramecc+:xnack+", True),
    ("gfx906:sramecc+:xnack+", "gfx906:xnack+", False),
    ("gfx906", "gfx906:sramecc-:xnack-", True),
    ("gfx906:sramecc-", "gfx906:xnack+:sramecc-", True),
    ("fiji", "gfx803", False),
    ("", "", True),
    ("gfx906", "", False),
]


@pytest.mark.parametrize("provided,requested,expected", COMPAT)
def test_is_compatible_target_id(provided, requested, expected):
    assert is_compatible_target_id(provided, requested) is expected


# ---- getConflictTargetIDCombination ---------------------------------------------------------------------
CONFLICT = [
    ({"gfx906", "gfx906:xnack+"}, ("gfx906", "gfx906:xnack+")),
    ({"gfx906:sramecc+", "gfx906:xnack+"}, ("gfx906:sramecc+", "gfx906:xnack+")),
    ({"gfx906:sramecc-", "gfx906:sramecc-:xnack+"}, ("gfx906:sramecc-", "gfx906:sramecc-:xnack+")),
    ({"gfx906:xnack+", "gfx906:xnack-"}, None),
    ({"gfx906:sramecc+:xnack+", "gfx906:xnack+"}, None),  # clang's one-way gap
    ({"gfx906", "gfx908:xnack+"}, None),
    ({"gfx803", "fiji:xnack+"}, None),
    # malformed IDs are passed over (verified with clang-offload-bundler-19: no conflict reported)
    ({"gfx906:xnack", "gfx906:xnack+"}, None),
    ({"gfx906", "gfx906::xnack+"}, None),
]


@pytest.mark.parametrize("ids,expected", CONFLICT)
def test_conflicting_target_ids(ids, expected):
    assert conflicting_target_ids(ids) == expected
    assert conflicting_target_ids(list(reversed(sorted(ids)))) == expected


# ---- offload-arch names, vendors, triples, driver canonicalisation ----------------------------------------
def test_offload_arch_names():
    for v in (19, 22):
        for name in ("sm_20", "sm_90a", "gfx600", "gfx1201", "gfx9-generic", "amdgcnspirv", "generic", ""):
            assert is_offload_arch_name(name, v), (name, v)
        for name in ("carrizo", "gfx906:xnack+", "SM_90", "compute_90", "native", "unknown", "gfx1154"):
            assert not is_offload_arch_name(name, v), (name, v)
    for name in ("gfx940", "gfx941"):
        assert is_offload_arch_name(name, 19) and not is_offload_arch_name(name, 22)
    for name in ("gfx9-4-generic", "gfx950", "gfx1153", "gfx1250", "gfx1251", "sm_100a", "sm_88", "sm_121a",
                 "graniterapids", "bmg_g21"):
        assert is_offload_arch_name(name, 22) and not is_offload_arch_name(name, 19), name


VENDOR = [("sm_80", "nvidia"), ("sm_90a:foo+", "nvidia"), ("gfx90a:xnack+", "amd"), ("carrizo", "amd"),
          ("amdgcnspirv", "amd"), ("generic", None), ("x86_64", None), ("", None), ("GFX906", None),
          ("gfx950", None)]


@pytest.mark.parametrize("arch,vendor", VENDOR)
def test_offload_arch_vendor(arch, vendor):
    assert offload_arch_vendor(arch, 19) == vendor


def test_offload_triple():
    assert offload_triple("sm_80") == "nvptx64-nvidia-cuda"
    assert offload_triple("gfx90a:xnack+") == "amdgcn-amd-amdhsa"
    assert offload_triple("fiji") == "amdgcn-amd-amdhsa"
    assert offload_triple("amdgcnspirv") == "spirv64-amd-amdhsa"
    assert offload_triple("gfx950", 22) == "amdgcn-amd-amdhsa"
    with pytest.raises(TargetIDError, match=r"^failed to deduce triple for target architecture 'bogus'; "):
        offload_triple("bogus")


CANONICAL_ARCH = [
    ("carrizo:xnack+", 19, "gfx801:xnack+"),
    ("sm_80", 19, "sm_80"),
    ("sm_90:foo+", 19, "sm_90"),
    ("gfx906:xnack-:sramecc+", 19, "gfx906:sramecc+:xnack-"),
    ("fiji", 22, "gfx803"),
    ("amdgcnspirv", 19, "amdgcnspirv"),
    ("gfx950:xnack+", 22, "gfx950:xnack+"),
]


@pytest.mark.parametrize("arch,version,expected", CANONICAL_ARCH)
def test_canonical_offload_arch(arch, version, expected):
    assert canonical_offload_arch(arch, version) == expected


CANONICAL_ARCH_ERRORS = [
    ("gfx9999", 19, None, "unsupported HIP gpu architecture: gfx9999"),
    ("sm_999", 19, None, "unsupported CUDA gpu architecture: sm_999"),
    ("gfx906", 19, "cuda", "unsupported CUDA gpu architecture: gfx906"),
    ("sm_90:foo+", 22, None, "unsupported CUDA gpu architecture: sm_90:foo+"),
    ("gfx1030:xnack+", 19, None, BAD_TARGET_ID_MSG % "gfx1030:xnack+"),
    ("gfx950", 19, None, "unsupported HIP gpu architecture: gfx950"),
    ("GFX906", 22, None, "unsupported HIP gpu architecture: GFX906"),
    # `clang-19 -fopenmp --offload-arch=gfx9999 -x c`
    ("gfx9999", 19, "openmp", "failed to deduce triple for target architecture 'gfx9999'; specify the triple using "
                              "'-fopenmp-targets' and '-Xopenmp-target' instead"),
]


@pytest.mark.parametrize("arch,version,kind,message", CANONICAL_ARCH_ERRORS)
def test_canonical_offload_arch_errors(arch, version, kind, message):
    with pytest.raises(TargetIDError) as exc:
        canonical_offload_arch(arch, version, offload_kind=kind)
    assert str(exc.value) == message


# ---- areTargetsCompatible -------------------------------------------------------------------------------
LINK = [
    ((AMD, "gfx906"), (AMD, "gfx906:xnack+"), True),
    ((AMD, "gfx906:xnack+"), (AMD, "gfx906"), True),
    ((AMD, "gfx906:xnack+"), (AMD, "gfx906:xnack-"), False),
    ((AMD, "generic"), (AMD, "gfx908"), True),
    (("nvptx64-nvidia-cuda", "sm_80"), ("nvptx64-nvidia-cuda", "sm_90"), False),
    (("nvptx64-nvidia-cuda", "sm_80"), ("nvptx64-nvidia-cuda", "generic"), True),
    ((AMD, "gfx906"), (AMD, "gfx906"), False),
    ((AMD, "gfx906"), (AMD + "-", "gfx906:xnack+"), False),
    ((AMD, "gfx906"), (AMD, "gfx908"), False),
    ((AMD, "gfx90a:sramecc+"), (AMD, "gfx90a:sramecc-:xnack+"), False),
]


@pytest.mark.parametrize("lhs,rhs,expected", LINK)
def test_is_target_compatible_for_link(lhs, rhs, expected):
    assert is_target_compatible_for_link(lhs, rhs) is expected
    assert is_target_compatible_for_link(rhs, lhs) is expected


# ---- properties ----------------------------------------------------------------------------------------------
_PROCS = ["gfx906", "gfx908", "gfx90a", "gfx900", "carrizo", "gfx1030", "fiji", "gfx942", "gfx9-generic"]
_feature_items = st.lists(st.tuples(st.sampled_from(["xnack", "sramecc"]), st.booleans()), max_size=2,
                          unique_by=lambda t: t[0])
target_ids = st.builds(lambda p, fs: p + "".join(f":{n}{'+' if on else '-'}" for n, on in fs),
                       st.sampled_from(_PROCS), _feature_items)


@settings(max_examples=200, deadline=None)
@given(target_ids)
def test_canonical_idempotent_and_reflexive(tid):
    try:
        canon = parse_target_id(tid).canonical
    except TargetIDError:
        return
    assert parse_target_id(canon).canonical == canon
    assert is_compatible_target_id(canon, canon)
    # a canonical ID with features dropped (Any) serves the full one, not the other way round
    bare = parse_target_id(canon).processor
    assert is_compatible_target_id(bare, canon)
    assert is_compatible_target_id(canon, bare) == (bare == canon)


@settings(max_examples=200, deadline=None)
@given(st.lists(target_ids, min_size=1, max_size=5))
def test_conflict_rules(ids):
    result = conflicting_target_ids(ids)
    # order of the input never matters (clang uses a std::set)
    assert conflicting_target_ids(list(reversed(ids))) == result
    by_proc: dict[str, set[frozenset]] = {}
    for t in set(ids):
        proc, feats = parse_target_id_format(t)
        by_proc.setdefault(proc, set()).add(frozenset(feats))
    if all(len(sets) == 1 for sets in by_proc.values()):
        assert result is None  # same feature names everywhere: never a conflict
    if result is not None:
        a, b = result
        assert a < b and a.split(":")[0] == b.split(":")[0]
    # symmetric cases: a bare processor next to any pinned ID of it always conflicts, whichever comes first
    for proc, sets in by_proc.items():
        if frozenset() in sets and len(sets) > 1:
            assert result is not None


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="gfx90a:+-xnacksrme*1 ", max_size=24))
def test_parse_only_raises_target_id_error(text):
    for fn in (parse_target_id, canonical_offload_arch):
        try:
            fn(text)
        except OffloadError as exc:
            assert isinstance(exc, TargetIDError)
    is_compatible_target_id(text, text)
    conflicting_target_ids([text, "gfx906"])


# ---- interop: the real drivers -------------------------------------------------------------------------------
def _hip_targets(clang: str, archs: list[str], tmp_path, *extra: str) -> tuple[list[str] | None, str]:
    src = tmp_path / "e.hip"
    src.write_text("")
    cmd = [clang, "-###", "-x", "hip", *extra, *[f"--offload-arch={a}" for a in archs], "-nogpulib", "-nogpuinc",
           "-c", str(src), "-o", str(tmp_path / "e.o")]
    proc = run(cmd, cwd=tmp_path)
    err = proc.stderr.decode()
    e = re.search(r"error: (.*)", err)
    if e:  # 22 reports the error and still prints the jobs under -###
        return None, e.group(1)
    m = re.search(r'"-targets=([^"]*)"', err)
    return (m.group(1).split(",")[1:], "") if m else (None, err)


DRIVER_CASES = [
    ["carrizo:xnack+", "gfx906:xnack-:sramecc+"],
    ["fiji", "gfx803", "fiji"],
    ["gfx906:sramecc+:xnack+", "gfx906:xnack+"],
    ["gfx906", "gfx906:xnack+"],
    ["gfx900:xnack-", "gfx900:xnack+", "gfx906", "gfx908:sramecc+", "gfx908:sramecc-"],
    ["gfx1030:xnack+"],
    ["gfx90a:xnack+:xnack-"],
    ["gfx940:sramecc+"],
]


@pytest.mark.parametrize("version", [19, 22])
@pytest.mark.parametrize("archs", DRIVER_CASES, ids=lambda a: ",".join(a))
def test_hip_driver_agrees(version, archs, tmp_path):
    """`clang -### -x hip --offload-arch=...`: the bundler -targets list (sorted set of canonical archs), or the
    driver's error, equals what canonical_offload_arch + conflicting_target_ids give."""
    clang = need_tool(f"clang-{version}")
    theirs, err = _hip_targets(clang, archs, tmp_path)
    try:
        canon = sorted({canonical_offload_arch(a, version) for a in archs})
        pair = conflicting_target_ids(canon)
        if pair:
            raise TargetIDError(BAD_ARCH_COMBO_MSG % pair)
    except TargetIDError as exc:
        assert theirs is None and err == str(exc), (err, str(exc))
        return
    assert theirs == [f"hipv4-amdgcn-amd-amdhsa--{c}" for c in canon], err


def test_hip_new_driver_unknown_processor(tmp_path):
    clang = need_tool("clang-19")
    _, err = _hip_targets(clang, ["gfx9999"], tmp_path, "--offload-new-driver")
    with pytest.raises(TargetIDError) as exc:
        canonical_offload_arch("gfx9999", 19)
    assert err == str(exc.value)
