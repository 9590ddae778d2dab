"""`offload-tool cost --add ARCH REPORT.json`: what adding an arch would cost, from a build report
(`offload_tool.ops.cost` does the estimate and says how)."""

from __future__ import annotations

import json
import sys

from ..errors import UsageError
from ..ops.cost import estimate_added_arch, load_report
from .command_line import ArgumentParser, Option

USAGE = """\
USAGE: {prog} --add ARCH[,ARCH...] [--json] REPORT.json

Estimate the build time and the binary bytes that adding ARCH would cost, from the build report
REPORT.json (written beside the page by `scons --offload-report=report.html`). ARCH must be of a
vendor the report has archs of: its actions and bytes are estimated from theirs.

OPTIONS:
  --add=ARCH[,ARCH...]  The arch(s) to estimate, each on its own (may be repeated)
  --json                Print a JSON array, one estimate per arch, with the method used
  -h, --help            Show this help
"""

_OPTIONS = [Option("add", value=True, comma_list=True), Option("json"), Option("h"), Option("help")]


def _bytes(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def format_estimate(e, report_path: str) -> str:
    lines = [f"Adding {e.arch} ({e.vendor}), estimated from {', '.join(e.reference_archs)} in {report_path}:"]
    kinds: dict[str, int] = {}
    for a in e.actions:
        if not a.grows:
            kinds[a.kind] = kinds.get(a.kind, 0) + 1
    grown = sum(1 for a in e.actions if a.grows)
    what = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "none"
    lines.append(f"  new actions: {sum(kinds.values())} ({what})" + (f"; {grown} multi-arch action(s) grow" if grown else ""))
    cpu = f", {e.cpu_s:.1f} s of CPU" if e.cpu_s is not None else ""
    lines.append(f"  build time: +{e.wall_s:.1f} s of action time (range {e.wall_range[0]:.1f}-{e.wall_range[1]:.1f} s)"
                 f"{cpu}; about +{e.wall_s / max(1, e.jobs):.1f} s of wall time at -j{e.jobs}")
    if e.unmeasured:
        lines.append(f"  ({e.unmeasured} action(s) were only ever cache hits and are not counted)")
    if e.binaries:
        lines.append("  bytes:")
        for path, b in e.binaries.items():
            share = f", +{100.0 * b['bytes'] / b['file_bytes']:.1f}% of its {_bytes(b['file_bytes'])}" if b["file_bytes"] else ""
            lines.append(f"    {path}: +{_bytes(b['bytes'])} ({b['bytes']} bytes{share})")
    else:
        lines.append("  bytes: no final binary of the report holds an arch of this vendor")
    lines.append(f"  how: {e.method}")
    return "\n".join(lines) + "\n"


def run(argv: list[str], prog: str) -> int:
    opts = ArgumentParser(prog, _OPTIONS).parse(argv)
    if opts.flag("h", "help"):
        sys.stdout.write(USAGE.format(prog=prog))
        return 0
    archs = [a.strip() for a in opts.values["add"]]
    if not archs or any(not a for a in archs):
        raise UsageError("--add=ARCH is required (and no arch may be empty)")
    if len(opts.positionals) != 1:
        raise UsageError("expected one build report (REPORT.json)")
    path = opts.positionals[0]
    report = load_report(path)
    estimates = [estimate_added_arch(report, a) for a in archs]
    if opts.flag("json"):
        sys.stdout.write(json.dumps([e.to_dict() for e in estimates], indent=2) + "\n")
    else:
        sys.stdout.write("\n".join(format_estimate(e, path) for e in estimates))
    return 0
