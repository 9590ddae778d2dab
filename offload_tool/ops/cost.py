"""What adding an offload arch would cost, estimated from a build report.

A build report (`scons --offload-report=report.html` writes `report.json`, schema
`offload-build-report/1`, see docs/scons-tool.md) records every action with its arch, wall and
CPU time, and the device bytes each arch takes in each final binary. An arch of a vendor already
built costs what the archs of that vendor cost: the same actions (one device compile per source,
one device link per program, ...), taking about as long, and about as many bytes in the same
binaries. So:

* the actions: every per-arch action "slot" (its kind and its first target with the arch in the
  name replaced by `{arch}`) that a reference arch (an arch of the same vendor in the report) has;
* each action's time: the mean of that slot's recorded wall and CPU times over the reference
  archs that built it (cache hits and actions not measured do not count); the range is the
  cheapest and the dearest reference arch's total;
* a one-compile-for-all-archs action (nvcc's, one `-gencode` per arch) grows by its time divided
  by its number of archs;
* bytes: in each binary that holds a reference arch, the mean of those archs' device bytes there.

Wall time of the whole build at `-jN` is not the sum: the new actions run beside each other, so
the sum divided by N is given as what the build takes longer when the arch's actions can overlap."""

from __future__ import annotations

import json
import math

from ..errors import OffloadError, ReportError, UsageError
from ..rules import offload_arch
from ..records import Record

__all__ = ["SCHEMA", "Estimate", "SlotEstimate", "load_report", "validate_report", "estimate_added_arch",
           "estimate_for_vendor", "vendor_of"]

SCHEMA = "offload-build-report/1"
_VENDOR_WORDS = {"amd": "AMD", "nvidia": "NVIDIA"}


class SlotEstimate(Record):
    """One action the new arch adds (or one that grows)."""

    __slots__ = ("kind", "slot", "wall_s", "cpu_s", "based_on", "grows")

    def __init__(self, kind: str, slot: str, wall_s: float, cpu_s: float | None, based_on: list[str],
                 grows: bool = False) -> None:
        self.kind = kind
        self.slot = slot
        self.wall_s = wall_s
        self.cpu_s = cpu_s
        self.based_on = based_on
        self.grows = grows  # an existing multi-arch action that takes one more arch


class Estimate(Record):
    __slots__ = ("arch", "vendor", "reference_archs", "actions", "wall_s", "cpu_s", "wall_range", "jobs", "binaries",
                 "unmeasured", "method")

    def __init__(self, arch: str, vendor: str, reference_archs: list[str], actions: list[SlotEstimate],
                 wall_s: float, cpu_s: float | None, wall_range: tuple[float, float], jobs: int,
                 binaries: dict[str, dict] | None = None, unmeasured: int = 0, method: str = "") -> None:
        self.arch = arch
        self.vendor = vendor
        self.reference_archs = reference_archs
        self.actions = actions
        self.wall_s = wall_s
        self.cpu_s = cpu_s
        self.wall_range = wall_range
        self.jobs = jobs
        self.binaries = {} if binaries is None else binaries  # path -> {bytes, file_bytes, based_on}
        self.unmeasured = unmeasured  # slots whose every recording was a cache hit
        self.method = method

    def to_dict(self) -> dict:
        return {"arch": self.arch, "vendor": self.vendor, "reference_archs": self.reference_archs,
                "actions": [a._asdict() for a in self.actions], "wall_s": self.wall_s, "cpu_s": self.cpu_s,
                "wall_range_s": list(self.wall_range), "jobs": self.jobs,
                "wall_at_jobs_s": self.wall_s / max(1, self.jobs), "binaries": self.binaries,
                "unmeasured_actions": self.unmeasured, "method": self.method}


def vendor_of(arch: str) -> str | None:
    """'nvidia' or 'amd' for an arch some LLVM release knows (`rules.offload_arch.vendor`)."""
    return offload_arch.vendor(arch)


def _fail(what: str) -> None:
    raise ReportError(f"not an {SCHEMA} build report: {what}")


def _num(value, what: str, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        _fail(f"{what} is not a non-negative number")


def validate_report(report) -> dict:
    """`report` itself when it has the fields this module reads, with the types it expects."""
    if not isinstance(report, dict) or report.get("schema") != SCHEMA:
        _fail("'schema' is missing or another one")
    actions, binaries = report.get("actions"), report.get("binaries")
    if not isinstance(actions, list) or not isinstance(binaries, list):
        _fail("'actions' and 'binaries' must be lists")
    for i, a in enumerate(actions):
        if not isinstance(a, dict):
            _fail(f"actions[{i}] is not an object")
        for key in ("kind", "slot", "status"):
            if not isinstance(a.get(key), str):
                _fail(f"actions[{i}].{key} is not a string")
        if a.get("arch") is not None and not isinstance(a.get("arch"), str):
            _fail(f"actions[{i}].arch is not a string")
        if not isinstance(a.get("archs"), list) or not all(isinstance(x, str) for x in a["archs"]):
            _fail(f"actions[{i}].archs is not a list of strings")
        _num(a.get("wall_s"), f"actions[{i}].wall_s")
        _num(a.get("cpu_s"), f"actions[{i}].cpu_s", allow_none=True)
    for i, b in enumerate(binaries):
        if not isinstance(b, dict) or not isinstance(b.get("path"), str) or not isinstance(b.get("archs"), dict):
            _fail(f"binaries[{i}] needs a string 'path' and an object 'archs'")
        _num(b.get("file_bytes"), f"binaries[{i}].file_bytes")
        for arch, row in b["archs"].items():
            if not isinstance(row, dict):
                _fail(f"binaries[{i}].archs[{arch!r}] is not an object")
            _num(row.get("bytes"), f"binaries[{i}].archs[{arch!r}].bytes")
    jobs = report.get("jobs", 1)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        _fail("'jobs' is not a positive integer")
    return report


def load_report(path: str) -> dict:
    try:
        with open(path, "rb") as f:
            data = f.read(256 << 20)
    except OSError as exc:
        raise OffloadError(f"cannot read '{path}': {exc.strerror or exc}") from None
    try:
        report = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise ReportError(f"'{path}' is not JSON: {exc}") from None
    try:
        return validate_report(report)
    except ReportError as exc:
        raise ReportError(f"{path}: {exc}") from None


def _measured(a: dict) -> bool:
    """Built (now, or by the build that last ran it), not a cache hit."""
    return a["status"] == "built" or (a["status"] == "up-to-date" and a.get("last_status", "built") == "built")


def estimate_for_vendor(report: dict, vendor: str, arch: str = "") -> Estimate:
    """What one more arch of `vendor` would cost (`arch`: its name, for the wording only)."""
    validate_report(report)
    refs = sorted({x for a in report["actions"] for x in ([a["arch"]] if a.get("arch") else a["archs"])
                   if vendor_of(x) == vendor and x != arch})
    if not refs:
        raise OffloadError(f"the report has no {_VENDOR_WORDS.get(vendor, vendor)} arch to estimate "
                           f"{arch or 'another one'} from")
    slots: dict[tuple[str, str], dict[str, list[dict]]] = {}
    for a in report["actions"]:
        if a.get("arch") in refs:
            slots.setdefault((a["kind"], a["slot"]), {}).setdefault(a["arch"], []).append(a)
    out: list[SlotEstimate] = []
    per_ref_total = {r: 0.0 for r in refs}
    unmeasured = 0
    for (kind, slot), by_arch in sorted(slots.items()):
        measured = {r: [a for a in recs if _measured(a)] for r, recs in by_arch.items()}
        measured = {r: recs for r, recs in measured.items() if recs}
        if not measured:
            unmeasured += 1
            continue
        walls = {r: sum(a["wall_s"] for a in recs) for r, recs in measured.items()}
        cpus = [sum(a["cpu_s"] for a in recs) for recs in measured.values()
                if all(a.get("cpu_s") is not None for a in recs)]
        for r, w in walls.items():
            per_ref_total[r] += w
        out.append(SlotEstimate(kind, slot, sum(walls.values()) / len(walls),
                                sum(cpus) / len(cpus) if cpus else None, sorted(measured)))
    # One action for all archs of the vendor (nvcc): it grows by one arch's share.
    for a in report["actions"]:
        archs = [x for x in a["archs"] if vendor_of(x) == vendor]
        if a.get("arch") is None and len(archs) > 1 and _measured(a) and a["archs"] == archs:
            n = len(archs)
            out.append(SlotEstimate(a["kind"], a["slot"], a["wall_s"] / n,
                                    a["cpu_s"] / n if a.get("cpu_s") is not None else None, archs, grows=True))
            for r in per_ref_total:
                per_ref_total[r] += a["wall_s"] / n
    wall = sum(s.wall_s for s in out)
    cpu = None if any(s.cpu_s is None for s in out) else sum(s.cpu_s for s in out)
    binaries = {}
    for b in report["binaries"]:
        have = [r for r in refs if r in b["archs"]]
        if have:
            binaries[b["path"]] = {"bytes": round(sum(b["archs"][r]["bytes"] for r in have) / len(have)),
                                   "file_bytes": b["file_bytes"], "based_on": have}
    name = arch or f"another {_VENDOR_WORDS.get(vendor, vendor)} arch"
    method = (f"{name} is assumed to cost what the {_VENDOR_WORDS.get(vendor, vendor)} archs already built cost "
              f"({', '.join(refs)}): each per-arch action they have (by kind and target, arch left out of the "
              f"name) is added with the mean of its recorded wall and CPU times"
              + (", cache hits left out" if unmeasured else "")
              + "; one-compile-for-all-archs actions grow by their time divided by their number of archs; "
              "bytes in each binary are the mean of those archs' device bytes in it. The range is the "
              "cheapest and the dearest of those archs.")
    totals = list(per_ref_total.values())
    return Estimate(arch=arch, vendor=vendor, reference_archs=refs, actions=out, wall_s=wall, cpu_s=cpu,
                    wall_range=(min(totals), max(totals)), jobs=report.get("jobs", 1), binaries=binaries,
                    unmeasured=unmeasured, method=method)


def estimate_added_arch(report: dict, arch: str) -> Estimate:
    """`estimate_for_vendor` for a named arch, which must be a known offload arch not built yet."""
    vendor = vendor_of(arch)
    if vendor is None:
        raise UsageError(f"'{arch}' is not an offload arch LLVM knows")
    validate_report(report)
    built = {a.get("arch") for a in report["actions"]} | {x for a in report["actions"] for x in a["archs"]}
    if arch in built:
        raise UsageError(f"'{arch}' is built already; its recorded cost is in the report")
    return estimate_for_vendor(report, vendor, arch)
