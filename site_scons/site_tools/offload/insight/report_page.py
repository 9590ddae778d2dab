"""The build report page: one self-contained HTML file (inline SVG and CSS, no script, nothing
fetched) drawn from the report's JSON (`_report`, which imports this module; nothing here imports it).

Every bar is an SVG `rect` with `class="bar"` and `data-chart` (`time`, `bytes`, `share`),
`data-arch`, `data-value` (the number from the JSON it stands for) and, for byte charts,
`data-binary`; its width is proportional to `data-value` within its chart. Tests read these back
from the DOM a browser built."""

from __future__ import annotations

import os

#: The group of actions tied to no one arch (host compiles, packaging, links).
HOST_GROUP = "host"
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f")
HOST_COLOUR = "#9a9a9a"
BAR_WIDTH = 420
ROW = 22
LABEL_WIDTH = 170

_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; max-width: 1100px; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; } td, th { padding: 2px 10px; text-align: left; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
tr:nth-child(even) td { background: #f6f6f6; }
svg text { font: 12px system-ui, sans-serif; fill: #222; }
.note { color: #555; } code { background: #f2f2f2; padding: 0 3px; }
"""


def _e(x) -> str:
    import html  # here: the page is written once per build; every null build imports this module

    return html.escape(str(x), quote=True)


def colours(groups) -> dict[str, str]:
    out, i = {}, 0
    for g in groups:
        if g == HOST_GROUP:
            out[g] = HOST_COLOUR
        else:
            out[g] = PALETTE[i % len(PALETTE)]
            i += 1
    return out


def fmt_s(x) -> str:
    return "-" if x is None else f"{x:.2f} s"


def bar_chart(chart: str, rows: list[tuple[str, float, str]], colour: dict[str, str], binary: str = "") -> str:
    """Horizontal bars: rows of (arch, value, text shown after the bar)."""
    top = max([v for _, v, _ in rows] + [0])
    height = ROW * len(rows) + 6
    width = LABEL_WIDTH + BAR_WIDTH + 300
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="{_e(chart)}" width="{width}" '
           f'height="{height}" role="img">']
    for i, (arch, value, text) in enumerate(rows):
        y = 3 + i * ROW
        w = 0.0 if top <= 0 else BAR_WIDTH * value / top
        out.append(f'<text x="0" y="{y + 14}">{_e(arch)}</text>')
        extra = f' data-binary="{_e(binary)}"' if binary else ""
        out.append(f'<rect class="bar" data-chart="{_e(chart)}" data-arch="{_e(arch)}" data-value="{value!r}"{extra} '
                   f'x="{LABEL_WIDTH}" y="{y}" width="{w:.3f}" height="{ROW - 6}" fill="{colour.get(arch, HOST_COLOUR)}">'
                   f'<title>{_e(arch)}: {_e(text)}</title></rect>')
        out.append(f'<text x="{LABEL_WIDTH + w + 6:.1f}" y="{y + 14}">{_e(text)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def share_bar(binary: dict, colour: dict[str, str]) -> str:
    """One stacked bar: the binary's file, split into each arch's device bytes and the rest."""
    total = binary["file_bytes"] or 1
    parts = [(a, r["bytes"]) for a, r in binary["archs"].items()]
    parts.append(("host and other", binary["host_bytes"]))
    scale = BAR_WIDTH / max(total, sum(n for _, n in parts))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="share" width="{LABEL_WIDTH + BAR_WIDTH + 10}" '
           f'height="{ROW + 24}" role="img">']
    x = float(LABEL_WIDTH)
    out.append(f'<text x="0" y="15">{_e(os.path.basename(binary["path"]))}</text>')
    legend = []
    for arch, n in parts:
        w = n * scale
        fill = colour.get(arch, HOST_COLOUR if arch == "host and other" else "#cccccc")
        share = n / total
        out.append(f'<rect class="bar" data-chart="share" data-binary="{_e(binary["path"])}" data-arch="{_e(arch)}" '
                   f'data-value="{share!r}" x="{x:.3f}" y="2" width="{w:.3f}" height="{ROW - 6}" fill="{fill}">'
                   f'<title>{_e(arch)}: {n} bytes, {100 * share:.1f}% of the file</title></rect>')
        legend.append(f"{arch} {100 * share:.1f}%")
        x += w
    out.append(f'<text x="{LABEL_WIDTH}" y="{ROW + 16}">{_e(", ".join(legend))}</text>')
    out.append("</svg>")
    return "\n".join(out)


def fmt_bytes(n: int) -> str:
    """`n` bytes for people: 8.8 KiB, 1.2 MiB."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _bytes(n) -> str:
    return fmt_bytes(int(n))


def _estimates(report: dict) -> list[str]:
    """What one more arch of each vendor built would cost (`offload_tool.ops.cost`)."""
    from offload_tool.errors import OffloadError
    from offload_tool.ops import cost
    vendors = sorted({cost.vendor_of(a["arch"]) for a in report["actions"] if a.get("arch")} - {None})
    out = []
    for v in vendors:
        try:
            e = cost.estimate_for_vendor(report, v)
        except OffloadError as exc:
            out.append(f"<li>{_e(v)}: {_e(exc)}</li>")
            continue
        new = sum(1 for a in e.actions if not a.grows)
        sizes = "; ".join(f"{_e(os.path.basename(p))} +{_bytes(b['bytes'])}" for p, b in e.binaries.items()) or "no binary"
        out.append(f'<li data-vendor="{_e(v)}" data-wall="{e.wall_s!r}"><b>one more {_e(cost._VENDOR_WORDS.get(v, v))} '
                   f'arch</b>: {new} new actions, +{e.wall_s:.1f} s of action time (range {e.wall_range[0]:.1f}-'
                   f'{e.wall_range[1]:.1f} s), about +{e.wall_s / max(1, e.jobs):.1f} s at -j{e.jobs}; {sizes}. '
                   f'<span class="note">{_e(e.method)}</span></li>')
    return out


def timings_missing(report: dict) -> tuple[str, str | None] | None:
    """What is said wherever the report shows times while some actions of the build have none, and
    the commands that record them (`record_timings`), or None when every action has its time.
    An action up to date since a build that wrote no report at this path has no record: without
    a word, empty or partial sums would read as a build that cost nothing."""
    missing = report.get("untimed_actions") or 0
    if not missing:
        return None
    timed = len(report.get("actions") or [])
    if timed:
        what = (f"{missing} of {missing + timed} actions of this build have no recorded time and are left out: "
                "they were up to date, last built by a build that wrote no report here")
    else:
        what = (f"No timings were recorded in this build: its {missing} action(s) were up to date, last built by a "
                "build that wrote no report here")
    return what, report.get("record_timings")


def timings_note(report: dict) -> str | None:
    """`timings_missing` as one line of text (the JSON's `timings_note`, the printed summary, the
    trace's metadata)."""
    missing = timings_missing(report)
    if missing is None:
        return None
    what, how = missing
    return f"{what}. To record them: {how}" if how else f"{what}."


def _timings_note_html(report: dict) -> str:
    """`timings_missing` as a paragraph of the page (empty when every action has its time)."""
    missing = timings_missing(report)
    if missing is None:
        return ""
    what, how = missing
    return (f'<p class="note untimed">{_e(what)}.' + (f" To record them: <code>{_e(how)}</code>" if how else "")
            + "</p>")


def render(report: dict) -> str:
    groups = list(report["per_arch"])
    colour = colours(groups)
    untimed = _timings_note_html(report)
    ran = [a for a in report["actions"] if a["status"] != "up-to-date"]
    cached = sum(1 for a in report["actions"] if a["status"] == "cached")
    body = ["<h1>Offload build report</h1>",
            f'<p id="summary">{len(ran)} action(s) ran in this build ({cached} from the cache), '
            f'{report["build_wall_s"]:.2f} s at -j{report["jobs"]}; {len(report["actions"])} action(s) in all '
            f'(those up to date with the times of the build that last ran them). Written {_e(report["created"])}.'
            + (" <b>The build failed.</b>" if report.get("failed") else "") + "</p>"]

    body.append("<h2>Build time per arch</h2>")
    body.append('<p class="note">Sum of the wall time of each arch\'s actions (device compiles, device links); '
                "<code>host</code> is everything not tied to one arch (host compiles, packaging, links); "
                "an nvcc compile for several archs at once counts under those archs joined by +. "
                "Cache hits count zero.</p>")
    if untimed:
        body.append(untimed)
    rows = [(g, v["wall_s"], f'{v["wall_s"]:.2f} s, CPU {fmt_s(v["cpu_s"])}, {v["actions"]} actions'
             + (f', {v["cached"]} cached' if v["cached"] else "")) for g, v in report["per_arch"].items()]
    body.append(bar_chart("time", rows, colour))

    body.append("<h2>Bytes per arch in each final binary</h2>")
    for b in report["binaries"]:
        if not b["archs"]:
            continue
        body.append(f'<h3>{_e(b["path"])} <span class="note">({_bytes(b["file_bytes"])}, '
                    f'{_bytes(b["device_bytes"])} of device code)</span></h3>')
        rows = [(a, r["bytes"], f'{_bytes(r["bytes"])} ({r["images"]} image{"s" if r["images"] != 1 else ""})')
                for a, r in b["archs"].items()]
        body.append(bar_chart("bytes", rows, colour, binary=b["path"]))
    if not any(b["archs"] for b in report["binaries"]):
        body.append('<p class="note">No final binary with device code.</p>')

    body.append("<h2>Share of each binary per arch</h2>")
    for b in report["binaries"]:
        if b["archs"]:
            body.append(share_bar(b, colour))
    if any(b.get("compressed_images") for b in report["binaries"]):
        body.append('<p class="note">Compressed images count their decompressed bytes.</p>')

    body.append("<h2>Slowest sources per arch</h2>")
    if untimed:
        body.append(untimed)
    for g, v in report["per_arch"].items():
        body.append(f'<h3>{_e(g)}</h3><table class="slowest" data-arch="{_e(g)}"><tr><th class="n">time</th>'
                    "<th>action</th><th>source</th><th>status</th></tr>")
        for s in v["slowest"]:
            body.append(f'<tr><td class="n">{s["wall_s"]:.2f} s</td><td>{_e(s["kind"])}</td><td>{_e(s["source"])}</td>'
                        f'<td>{_e(s["status"])}</td></tr>')
        body.append("</table>")

    estimates = _estimates(report)
    if estimates:
        body.append("<h2>What another arch would cost</h2><ul>" + "\n".join(estimates) + "</ul>")
        body.append('<p class="note">For a named arch: <code>offload-tool cost --add ARCH report.json</code>.</p>')

    body.append("<h2>Timeline</h2><p>The actions on their worker lanes are in <code>trace.json</code> beside this "
                "page (Chrome trace format): open it in <code>https://ui.perfetto.dev</code> or "
                "<code>chrome://tracing</code>.</p>")
    if untimed:
        body.append(untimed)
    body.append("<details><summary>All actions</summary><table><tr><th>action</th><th>arch</th><th>status</th>"
                '<th class="n">time</th><th class="n">CPU</th><th class="n">bytes</th><th>lane</th></tr>')
    for a in sorted(report["actions"], key=lambda a: (a["start_s"] is None, a["start_s"] or 0)):
        cpu = "" if a["cpu_s"] is None else f'{a["cpu_s"]:.2f}'
        lane = "" if a["lane"] is None else a["lane"]
        body.append(f'<tr><td>{_e(a["label"])}</td><td>{_e(a["arch"] or "")}</td><td>{_e(a["status"])}</td>'
                    f'<td class="n">{a["wall_s"]:.2f}</td><td class="n">{cpu}</td>'
                    f'<td class="n">{a["bytes"]}</td><td>{lane}</td></tr>')
    body.append("</table></details>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Offload build report</title>"
            f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
