"""Bundle entry IDs `<kind>-<arch>-<vendor>-<os>-<env>-<target id>` of clang offload bundles.

Two readings are provided:

* `standardize(raw)` is LLVM 19's `OffloadTargetInfo` constructor followed by `str()`, byte for byte and
  quirks included; the bundler writes these strings into bundles and `-list` prints them.
* `parse_bundle_entry_id(raw)` is the tolerant reading used for *matching* IDs found in files written by
  clang 15 (hipcc: `host-x86_64-unknown-linux`, 3-field device triples), 19 (`...-linux-gnu-`, `amdhsa--gfx`)
  and 22 (`nvptx64-nvidia-cuda-unknown-sm_90a`, `amdhsa-unknown-gfx`).  Where LLVM 19's own re-parse is
  inconsistent (it reads a standardized host ID's trailing empty field as a target ID equal to the whole
  string, so it cannot match pre-standardization entries like `host-x86_64-unknown-linux-gnu`), this reading
  gives the intended fields instead; for every ID that LLVM 19 matches consistently the results agree.

`is_code_object_compatible` is the unbundler's `isCodeObjectCompatible` (with `as_llvm19`, or
`llvm19_compatible`, exactly as LLVM 19 answers it, quirks included).
"""

from __future__ import annotations

from functools import lru_cache
from collections.abc import Iterable

from ..errors import BundleError, TargetIDError, UsageError
from .target_id import TargetID, _amdgcn_names, _string_to_offload_arch, conflicting_target_ids, parse_target_id
from .triple import is_compatible_with, is_valid_arch, normalize, parse_triple, split_triple4
from ..records import FrozenRecord

__all__ = [
    "OFFLOAD_KINDS", "BundleEntryID", "entry_id", "standard_entry_id", "standardize", "standardize_llvm22", "parse_bundle_entry_id",
    "validate_bundler_targets", "is_code_object_compatible", "llvm19_compatible", "is_offload_kind_compatible",
    "archive_conflict",
]

#: The offload kinds the bundler accepts (`cuda` is not one).
OFFLOAD_KINDS = ("host", "openmp", "hip", "hipv4")


class BundleEntryID(FrozenRecord):
    """One bundle entry ID: offload kind, the 4 raw triple fields joined with '-', and the target ID."""

    __slots__ = ("kind", "triple", "target_id")

    def __init__(self, kind: str, triple: str, target_id: str = "") -> None:
        self._set("kind", kind)
        self._set("triple", triple)  # e.g. "amdgcn-amd-amdhsa-" (environment empty) or "x86_64-unknown-linux-gnu"
        self._set("target_id", target_id)  # "" when none, e.g. "gfx90a:xnack+" (as written, features not reordered)

    def __str__(self) -> str:
        """LLVM 19's standardized spelling."""
        return f"{self.kind}-{self.triple}-{self.target_id}"

    @property
    def is_host(self) -> bool:
        return self.kind == "host"

    @property
    def kind_is_valid(self) -> bool:
        return self.kind in OFFLOAD_KINDS

    @property
    def triple_is_valid(self) -> bool:
        """`isTripleValid`: a non-empty triple whose arch `Triple::parseArch` knows."""
        return self.triple != "" and is_valid_arch(split_triple4(self.triple)[0])

    @property
    def processor(self) -> str:
        """The target ID's text before its first ':' ("" when there is no target ID)."""
        return self.target_id.partition(":")[0]


def _four(triple: str) -> str:
    """`Triple(Arch, Vendor, OS, Env).str()` of the raw fields of `Triple(triple)`: always 4 fields."""
    return "-".join(split_triple4(triple))


def entry_id(kind: str, triple: str, target_id: str = "") -> str:
    """A new entry's ID as clang's driver spells a bundler target: `<kind>-<triple>` (the triple as
    given) without a target ID, `host-x86_64-unknown-linux`; with one, the triple's four fields
    and the target ID, `hipv4-amdgcn-amd-amdhsa--gfx90a` (the bundler standardizes either)."""
    if not target_id:
        return f"{kind}-{triple}"
    return standard_entry_id(kind, triple, target_id)


def standard_entry_id(kind: str, triple: str, target_id: str = "") -> str:
    """An entry's ID in LLVM 19's standardized spelling, as the bundler writes and lists it: the
    triple's four fields and the target ID, empty or not (`host-x86_64-unknown-linux-gnu-`)."""
    return str(BundleEntryID(kind, _four(triple), target_id))


def standardize(raw: str, llvm_version: int = 19) -> BundleEntryID:
    """LLVM 19's `OffloadTargetInfo(raw)`; `str()` of the result is what 19 stores and lists.

    The last '-' field of the part before the first ':' is the target ID's processor when
    `StringToOffloadArch` knows it -- and "" (UNUSED) counts as known, so a standardized host ID such as
    `host-x86_64-unknown-linux-gnu-` standardizes again to `host-x86_64-unknown-linux-gnu-host-x86_64-...`
    (LLVM's quirk, kept).  Otherwise there is no target ID and anything after ':' is dropped.

    `llvm_version >= 21` gives LLVM 22's reading instead (see `standardize_llvm22`; 20 = 19; 21 unverified)."""
    if llvm_version >= 21:
        return standardize_llvm22(raw)
    head = raw.split(":", 1)[0]
    left, sep, last = head.rpartition("-")
    if not sep:  # StringRef::rsplit: no '-' -> (head, "")
        left, last = head, ""
    if _string_to_offload_arch(last, "19") is not None:
        kind, _, triple = left.partition("-")
        target_id = raw[raw.find(last):]
    else:
        kind, _, triple = head.partition("-")
        target_id = ""
    return BundleEntryID(kind, _four(triple), target_id)


LLVM22_FORMAT_MSG = ("Targets need to follow the format '<offload kind>-<target triple>', where '<target triple>' "
                     "follows the format '<kind>-<arch>-<vendor>-<os>-<env>[-<target id>[:target features]]'.")


def standardize_llvm22(raw: str) -> BundleEntryID:
    """LLVM 22's `OffloadTargetInfo(raw)` + `str()` (verified with clang-offload-bundler-22).

    Exactly kind + 4 triple fields [+ target ID] at the first five '-'; a target ID whose processor is not a
    22 OffloadArch name is dropped; the triple is written `normalize(THREE_IDENT) + "-"` for amdhsa (the
    environment is always empty) and `normalize(FOUR_IDENT)` otherwise (`nvptx64-nvidia-cuda-unknown`).
    Fewer than five fields raise UsageError with 22's message.  The returned `triple` is that normalized
    4-field spelling, so `str()` is what 22 stores."""
    comps = raw.split("-", 5)
    if len(comps) < 5:
        raise UsageError(LLVM22_FORMAT_MSG)
    tid = comps[5] if len(comps) == 6 else ""
    if tid and _string_to_offload_arch(tid.split(":")[0], "22") is None:
        tid = ""
    four = "-".join(comps[1:5])
    if parse_triple(four).os == "AMDHSA":
        norm = normalize(four, 3) + "-"
    else:
        norm = normalize(four, 4)
    return BundleEntryID(comps[0], norm, tid)


def _is_processor_name(name: str) -> bool:
    """A GPU name in any supported release: an OffloadArch name (19 or 22) or an AMDGPU alias."""
    if name == "" or name == "generic":
        return False
    return (_string_to_offload_arch(name, "19") is not None or _string_to_offload_arch(name, "22") is not None
            or name in _amdgcn_names("19") or name in _amdgcn_names("22"))


@lru_cache(maxsize=4096)  # archives repeat the same few IDs thousands of times
def parse_bundle_entry_id(raw: str) -> BundleEntryID:
    """Read an entry ID as stored by clang 15, 19 or 22 (see the module docstring).

    The target ID starts at the first '-' field (after the kind and arch) from which the rest of the text
    before ':' is a known GPU name (so `gfx10-3-generic` stays whole); the fields between are the triple.
    Without one, a trailing empty field is the (empty) target ID and the rest is the triple."""
    head, colon, _ = raw.partition(":")
    fields = head.split("-")
    kind = fields[0]
    for j in range(2, len(fields)):
        if _is_processor_name("-".join(fields[j:])):
            target_id = raw[len("-".join(fields[:j])) + 1:]
            return BundleEntryID(kind, _four("-".join(fields[1:j])), target_id)
    if len(fields) >= 6 and fields[-1] == "":
        fields = fields[:-1]  # standardized: "<kind>-<a>-<v>-<o>-<e>-" with an empty target ID
    return BundleEntryID(kind, _four("-".join(fields[1:])), "")


def _as_id(value: "str | BundleEntryID") -> BundleEntryID:
    """The matching reading of an entry ID or a standardized target.  A `BundleEntryID` is re-read from its
    string (as LLVM 19 re-reads its worklist keys), which turns 19's host quirk (`standardize("host-...-gnu-")`
    has the whole string as its target ID) back into an empty target ID and keeps `gfx10-3-generic` whole."""
    return parse_bundle_entry_id(value if isinstance(value, str) else str(value))


def is_offload_kind_compatible(code_object_kind: str, target_kind: str, *,
                               hip_openmp_compatible: bool = False) -> bool:
    """`isOffloadKindCompatible`: equal, `hip`~`hipv4`, and with -hip-openmp-compatible hip*~openmp."""
    if code_object_kind == target_kind or {code_object_kind, target_kind} == {"hip", "hipv4"}:
        return True
    if hip_openmp_compatible:
        return ((code_object_kind.lower().startswith("hip") and target_kind == "openmp")
                or (code_object_kind == "openmp" and target_kind.lower().startswith("hip")))
    return False


def _plain_fields(triple: str) -> tuple[str, ...]:
    return tuple("" if f == "unknown" else f for f in split_triple4(triple))


def is_code_object_compatible(code_object: "str | BundleEntryID", target: "str | BundleEntryID", *,
                              hip_openmp_compatible: bool = False, llvm_version: int = 19,
                              as_llvm19: bool = False) -> bool:
    """`isCodeObjectCompatible(CodeObject, Target)` (LLVM 19): may the entry `code_object` be extracted for
    the requested `target`?

    IDs without a target ID (hosts) match only the same kind and triple fields.  For the others, an exact
    match (same kind, `isCompatibleWith` triples, same target-ID text) is compatible.  Otherwise
    kinds and triples must be compatible, both target IDs must parse with `clang::parseTargetID` (aliases
    canonicalised, features checked against the `llvm_version` table) to the same processor, and every
    feature the code object pins must be pinned to the same value by the target (a feature it leaves out is
    Any).  Both sides are read with `parse_bundle_entry_id`.

    Deliberate difference from LLVM 19, which re-parses both IDs with its `OffloadTargetInfo` constructor:
    entries written without the trailing empty field (hipcc's `host-x86_64-unknown-linux`, older
    `host-x86_64-unknown-linux-gnu`) or with `unknown` for an empty field (22) match the target they name,
    where 19 reports "Can't find bundles".  `as_llvm19=True` drops that difference (`llvm19_compatible`):
    the bundler's unbundling answers as LLVM 19 does, exit status and messages included."""
    if as_llvm19:
        return llvm19_compatible(code_object, target, hip_openmp_compatible=hip_openmp_compatible)
    co, tg = _as_id(code_object), _as_id(target)
    if co.target_id == "" or tg.target_id == "":
        # LLVM 19 re-reads an ID without a target ID with the *whole string* as its target ID, so such an
        # ID matches nothing but its own standardized spelling.  Same here, field by field, with "" and
        # "unknown" alike so that clang 15 / 22 spellings of that ID match too.
        return (co.kind == tg.kind and co.target_id == tg.target_id
                and _plain_fields(co.triple) == _plain_fields(tg.triple))
    return _compatible_readings(co, tg, hip_openmp_compatible, llvm_version)


def llvm19_compatible(code_object: "str | BundleEntryID", target: "str | BundleEntryID", *,
                      hip_openmp_compatible: bool = False) -> bool:
    """`isCodeObjectCompatible` exactly as LLVM 19 answers it: both IDs read by its `OffloadTargetInfo`
    constructor (`standardize`), quirks included.  An ID whose last '-' field is empty (every
    standardized ID without a GPU, `host-x86_64-unknown-linux-gnu-`) is read with the whole string as
    its target ID, and one whose last field is no GPU name (clang 15's `host-x86_64-unknown-linux`,
    `host-x86_64-pc-linux-gnu`) with none; so such an entry matches a requested target only when it
    is spelled exactly as the target standardizes, and an entry written without the trailing empty
    field matches no standardized target at all.  IDs with a GPU target ID agree with
    `is_code_object_compatible`'s reading."""
    co = standardize(code_object if isinstance(code_object, str) else str(code_object))
    tg = standardize(target if isinstance(target, str) else str(target))
    return _compatible_readings(co, tg, hip_openmp_compatible, 19)


def _compatible_readings(co: BundleEntryID, tg: BundleEntryID, hip_openmp_compatible: bool,
                         llvm_version: int) -> bool:
    """`isCodeObjectCompatible` over two readings of the IDs: exact match, else compatible kinds
    and triples, the same processor, and every feature the code object pins pinned alike by the target."""
    triples_ok = is_compatible_with(co.triple, tg.triple)
    if co.kind == tg.kind and triples_ok and co.target_id == tg.target_id:
        return True
    if not triples_ok or not is_offload_kind_compatible(co.kind, tg.kind,
                                                        hip_openmp_compatible=hip_openmp_compatible):
        return False
    co_tid = _target_id_or_none(co.target_id, co.triple, llvm_version)
    tg_tid = _target_id_or_none(tg.target_id, tg.triple, llvm_version)
    if co_tid is None or tg_tid is None or co_tid.processor != tg_tid.processor:
        return False
    target_features = dict(tg_tid.features)
    if len(co_tid.features) > len(target_features):
        return False
    return all(target_features.get(name) == on for name, on in co_tid.features)


@lru_cache(maxsize=4096)
def _target_id_or_none(target_id: str, triple: str, llvm_version: int) -> TargetID | None:
    try:
        return parse_target_id(target_id, triple, llvm_version)
    except TargetIDError:
        return None


def validate_bundler_targets(raw_targets: list[str], *, bundling: bool) -> list[BundleEntryID]:
    """The `-targets` checks of clang-offload-bundler 19, in its order and with its messages; returns the
    standardized IDs.

    Per target in order: `Duplicate targets are not allowed` (raw strings), then `invalid target '<T>'[,
    unknown offloading kind '<k>'][, unknown target triple '<a-v-o-e>']` (UsageError).  Then per
    `<kind>-<triple>` group in sorted order, the target-ID conflict rule: `Cannot bundle inputs with
    conflicting targets: 'A' and 'B'` (BundleError).  Last the host count: bundling needs exactly one host
    unless every target is hip/hipv4, unbundling allows at most one: `expecting exactly one host target but
    got <n>` (UsageError)."""
    seen: set[str] = set()
    ids: list[BundleEntryID] = []
    groups: dict[str, set[str]] = {}
    hosts = 0
    hip_only = True
    for raw in raw_targets:
        if raw in seen:
            raise UsageError("Duplicate targets are not allowed")
        seen.add(raw)
        tid = standardize(raw)
        if not tid.kind_is_valid or not tid.triple_is_valid:
            msg = f"invalid target '{raw}'"
            if not tid.kind_is_valid:
                msg += f", unknown offloading kind '{tid.kind}'"
            if not tid.triple_is_valid:
                msg += f", unknown target triple '{tid.triple}'"
            raise UsageError(msg)
        ids.append(tid)
        groups.setdefault(f"{tid.kind}-{tid.triple}", set()).add(tid.target_id)
        if tid.is_host:
            hosts += 1
        if tid.kind not in ("hip", "hipv4"):
            hip_only = False
    for key in sorted(groups, key=lambda s: s.encode("utf-8", "surrogateescape")):
        pair = conflicting_target_ids(groups[key])
        if pair:
            raise BundleError(f"Cannot bundle inputs with conflicting targets: '{key}-{pair[0]}' and "
                              f"'{key}-{pair[1]}'")
    if (not bundling and hosts > 1) or (bundling and hosts != 1 and not hip_only):
        raise UsageError(f"expecting exactly one host target but got {hosts}")
    return ids


def archive_conflict(ids: Iterable[str]) -> tuple[str, str] | None:
    """`CheckHeterogeneousArchive`'s rule (-check-input-archive): the target-ID conflict rule applied to a
    member's *full* bundle entry IDs, whose "processor" is everything before the first ':'."""
    return conflicting_target_ids(str(i) for i in ids)

