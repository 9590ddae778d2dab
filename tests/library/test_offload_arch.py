"""offload_tool.rules.offload_arch: the arch facts that span LLVM releases (which vendor owns an
arch, the newest release known, PTX and SASS names, whether an image meets a requested arch),
and that they are decided there only: the library's operations and the SCons tool ask it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from offload_tool.ops import cost, verify
from offload_tool.rules import bundle_id, offload_arch
from offload_tool.rules.target_id import TargetIDError

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("arch, vendor", [
    ("sm_80", "nvidia"), ("sm_120a", "nvidia"),      # new in LLVM 20: known although 19 lacks it
    ("gfx90a:xnack+", "amd"), ("gfx940", "amd"),     # gone in LLVM 21: known, by 19's and 20's tables
    ("fiji", "amd"), ("amdgcnspirv", "amd"),
    ("gfx9999", None), ("sm_999", None), ("compute_80", None), ("", None), ("x86_64", None),
])
def test_vendor_from_any_release_newest_first(arch, vendor):
    assert offload_arch.vendor(arch) == vendor
    assert cost.vendor_of(arch) == vendor


@pytest.mark.parametrize("arch, vendor", [
    ("gfx9999", "amd"), ("sm_130f", "nvidia"), ("gfx12-generic", "amd"), ("fiji:xnack-", "amd"), ("foo", None),
])
def test_vendor_by_name_takes_the_form_of_newer_archs(arch, vendor):
    assert offload_arch.vendor_by_name(arch) == vendor


def test_newest_release_and_releases_knowing():
    assert offload_arch.NEWEST_LLVM == max(offload_arch.LLVM_RELEASES) == offload_arch.LLVM_RELEASES[0]
    assert offload_arch.releases_knowing("gfx940") == [19, 20]
    assert offload_arch.releases_knowing("sm_120") == [20, 21, 22]
    assert offload_arch.releases_knowing("gfx9999") == []


def test_ptx_and_sass_names():
    assert offload_arch.sass_of_ptx("compute_90a") == "sm_90a"
    assert offload_arch.sass_of_ptx("sm_90") is None
    assert offload_arch.ptx_of_sass("sm_100f") == "compute_100f"
    assert offload_arch.is_ptx("compute_75") and not offload_arch.is_ptx("sm_75")


def test_triple_and_amd_names():
    assert offload_arch.triple("sm_90") == "nvptx64-nvidia-cuda"
    assert offload_arch.triple("gfx9999") == "amdgcn-amd-amdhsa"
    assert offload_arch.triple("amdgcnspirv") == "spirv64-amd-amdhsa"
    assert offload_arch.canonical_processor("fiji") == "gfx803"
    assert offload_arch.canonical_amd("carrizo:xnack+") == "gfx801:xnack+"
    assert offload_arch.canonical_amd("gfx940:xnack+") == "gfx940:xnack+"   # 20's table
    with pytest.raises(TargetIDError):
        offload_arch.canonical_amd("gfx90a:foo+")
    assert offload_arch.amd_row("gfx940")["name"] == "gfx940"
    assert offload_arch.parse_target_id("gfx90a:xnack-").canonical == "gfx90a:xnack-"
    assert offload_arch.parse_target_id("sm_80") is None


def test_arch_matching_is_the_rules_one():
    assert verify.arch_satisfied is offload_arch.arch_satisfied
    assert offload_arch.arch_satisfied("gfx90a", "gfx90a:xnack+")
    assert not offload_arch.arch_satisfied("gfx90a:xnack+", "gfx90a:xnack-")
    assert offload_arch.arch_satisfied("sm_90", "compute_90", "ptx")
    assert not offload_arch.arch_satisfied("sm_90", "compute_90", "cubin")


def test_entry_ids_as_the_driver_and_the_bundler_spell_them():
    assert bundle_id.entry_id("host", "x86_64-unknown-linux") == "host-x86_64-unknown-linux"
    assert bundle_id.entry_id("hipv4", "amdgcn-amd-amdhsa", "gfx90a:xnack+") == "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+"
    assert bundle_id.standard_entry_id("host", "x86_64-unknown-linux-gnu") == "host-x86_64-unknown-linux-gnu-"
    assert bundle_id.standard_entry_id("openmp", "nvptx64-nvidia-cuda", "sm_80") == "openmp-nvptx64-nvidia-cuda--sm_80"
    for raw in ("host-x86_64-unknown-linux", "hipv4-amdgcn-amd-amdhsa--gfx90a"):
        assert str(bundle_id.standardize(raw)) == bundle_id.standard_entry_id(*_fields(raw))


def _fields(raw: str) -> tuple[str, str, str]:
    parsed = bundle_id.standardize(raw)
    return parsed.kind, parsed.triple, parsed.target_id


# ---- facts once: the decisions above are made in rules/ only ----------------------------------------------

def _sources():
    for root in ("offload_tool", "site_scons/site_tools/offload"):
        for path in sorted((REPO / root).rglob("*.py")):
            yield path.relative_to(REPO).as_posix(), path.read_text(encoding="utf-8")


@pytest.mark.parametrize("what, pattern, home", [
    # which vendor owns an arch, release by release
    ("a vendor asked of one release", r"offload_arch_vendor\(", ("offload_tool/rules/",)),
    # the releases whose tables the library holds
    ("a list of LLVM releases", r"\(22, ?(?:21, ?20, ?)?19\)|\(\"22\", ?\"19\"\)", ("offload_tool/rules/",)),
    # compute_NN <-> sm_NN
    ("a PTX or SASS name built by hand", r"\"compute_\" \+|\"sm_\" \+|f\"sm_\{m\.group", ("offload_tool/rules/",)),
    # entry IDs
    ("a bundle entry ID built by hand", r"f\"(?:host|hipv4|hip|openmp)-", ("offload_tool/rules/",)),
])
def test_facts_are_decided_once(what, pattern, home):
    found = [f"{name}:{n}" for name, text in _sources() if not name.startswith(home)
             for n, line in enumerate(text.splitlines(), 1) if re.search(pattern, line)]
    assert not found, f"{what} outside {home}: {found}"
