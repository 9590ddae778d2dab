"""Build insight on real builds (clang 19): progress lines under -j2, the cost report (JSON
records, Chrome trace, HTML page checked in headless Chromium), CacheDir hits, the cost estimate
of an added arch against really adding it, and OffloadManifest size budgets."""

from __future__ import annotations

import html
import html.parser
import json
import re
import shlex
import shutil
import struct
import subprocess
import sys
import zlib

import pytest

from conftest import need_tool, run_cli
from scons_samples import KERN_CPP, MAIN_C
from scons_helpers import Project

pytestmark = pytest.mark.slow

SCONSTRUCT = """
env = Environment(tools=['default', 'offload'], OFFLOAD_CLANG='clang-19',
                  OFFLOAD_ARCHS=ARGUMENTS.get('archs', 'sm_75').split(','))
if ARGUMENTS.get('cache'):
    CacheDir(ARGUMENTS['cache'])
app = env.OffloadProgram('app', ['src/main.c', 'src/kern.cpp'])
if ARGUMENTS.get('budget'):
    env.OffloadManifest('manifest.json', app, OFFLOAD_MAX_BYTES=ARGUMENTS['budget'])
"""

PROGRESS_RE = re.compile(r"^\[\s*(\d+)/(\d+)\] (\S+)")


def _project(tmp_path, name="proj") -> Project:
    need_tool("clang-19")
    p = Project(tmp_path / name)
    p.write("SConstruct", SCONSTRUCT)
    p.write("src/main.c", MAIN_C)
    p.write("src/kern.cpp", KERN_CPP)
    return p


def _scons(p: Project, *args, progress: str | None = None, check=True):
    return p.scons(*args, check=check, unset=("OFFLOAD_PROGRESS",),
                   env={} if progress is None else {"OFFLOAD_PROGRESS": progress})


def _progress(cp) -> list[tuple[int, int, str]]:
    return [(int(m.group(1)), int(m.group(2)), m.group(3)) for m in map(PROGRESS_RE.match, cp.stdout.splitlines()) if m]


# --------------------------------------------------------------------------------------------
# Progress

def test_progress_counts_what_runs(tmp_path):
    p = _project(tmp_path)
    cp = _scons(p, "-j2", progress="on")
    lines = _progress(cp)
    # sm_75 only: 2 host IR + 2 host + 2 device compiles, the program's package+embed, 1 link.
    assert len(lines) == 8, cp.stdout
    assert [pos for pos, _, _ in lines] == list(range(1, 9))  # in order, under -j2 too
    assert {total for _, total, _ in lines} == {8}
    assert cp.stdout.splitlines()[0].startswith("[1/8] ")
    # Null build: no action, no line.
    assert _scons(p, "-j2", progress="on").stdout.strip() == "scons: `.' is up to date."
    # One source changed: only its actions are counted (host IR, host, device, package+embed, link).
    p.write("src/kern.cpp", KERN_CPP.replace("s += i", "s += 2 * i"))
    lines = _progress(_scons(p, "-j2", progress="on"))
    assert [(pos, total) for pos, total, _ in sorted(lines)] == [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]
    assert sorted(kind for *_, kind in lines) == ["DEVICE", "HOST", "HOSTIR", "LINK", "PACKAGE+EMBED"]


def test_progress_off_when_not_a_terminal_and_bad_values(tmp_path):
    p = _project(tmp_path)
    cp = _scons(p)  # output captured: not a terminal, the default is off
    assert not _progress(cp) and "HOSTIR src/main.c" in cp.stdout.splitlines()
    p.write("src/kern.cpp", KERN_CPP.replace("s += i", "s += 3 * i"))
    assert not _progress(_scons(p, progress="off"))
    bad = _scons(p, progress="sometimes", check=False)
    assert bad.returncode == 2 and "OFFLOAD_PROGRESS='sometimes': expected auto, on or off" in bad.stderr


# --------------------------------------------------------------------------------------------
# The report, under -j2 and with CacheDir

@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    """A -j2 build with CacheDir and a report, then the same build again from the cache."""
    root = tmp_path_factory.mktemp("report")
    p = _project(root)
    cache = root / "cache"
    built = _scons(p, "-j2", "archs=sm_75,gfx90a", f"cache={cache}", "--offload-report=out/report.html")
    first = json.loads((p.root / "out/report.json").read_text())
    trace = json.loads((p.root / "out/trace.json").read_text())
    shutil.copy(p.root / "out/report.html", root / "first.html")
    _scons(p, "-c", "archs=sm_75,gfx90a")
    cached = _scons(p, "-j2", "archs=sm_75,gfx90a", f"cache={cache}", "--offload-report=out/report.html")
    second = json.loads((p.root / "out/report.json").read_text())
    return {"project": p, "built": built, "first": first, "trace": trace, "cached": cached, "second": second,
            "html": root / "first.html"}


def test_report_records(reported):
    r = reported["first"]
    assert r["schema"] == "offload-build-report/1" and r["jobs"] == 2 and not r["failed"]
    acts = r["actions"]
    for a in acts:
        assert set(a) >= {"kind", "builder", "label", "targets", "sources", "source", "arch", "archs", "lang", "slot",
                          "bytes", "status", "start_s", "end_s", "wall_s", "cpu_s", "lane"}
        assert a["status"] == "built" and a["wall_s"] > 0 and a["cpu_s"] is not None and a["bytes"] > 0
        assert a["lane"] in (0, 1)
    devices = sorted((a["arch"], a["source"]) for a in acts if a["kind"] == "device-compile")
    assert devices == [("gfx90a", "src/kern.cpp"), ("gfx90a", "src/main.c"), ("sm_75", "src/kern.cpp"),
                       ("sm_75", "src/main.c")]
    assert {a["lang"] for a in acts if a["kind"].endswith("compile")} == {"openmp"}
    assert [a["arch"] for a in acts if a["kind"] == "device-link"] == ["gfx90a"]
    assert {a["slot"] for a in acts if a["arch"]} == {"src/main.{arch}.bc", "src/kern.{arch}.bc", "src/main.{arch}.o",
                                                     "src/kern.{arch}.o", "app.{arch}.devlink.o"}
    # Per arch: the sums of the records.
    for group, g in r["per_arch"].items():
        mine = [a for a in acts if (a["arch"] or "host") == group]
        assert g["actions"] == len(mine) and g["wall_s"] == pytest.approx(sum(a["wall_s"] for a in mine), abs=1e-5)
    # Bytes per arch in the program, as `offload-tool inspect --sizes` counts them.
    (app,) = [b for b in r["binaries"] if b["path"] == "app"]
    sizes = json.loads(run_cli("tool", "inspect", "--sizes", "--json", reported["project"].root / "app").stdout)[0]
    assert app["archs"] == sizes["archs"] and set(app["archs"]) == {"gfx90a", "sm_75"}
    assert r["per_arch"]["gfx90a"]["binary_bytes"] == {"app": app["archs"]["gfx90a"]["bytes"]}
    # The summary at the end of the build.
    out = reported["built"].stdout
    assert "offload: build report: 11 action(s) this build" in out
    # Every action ran and has its time: nothing is said about missing ones.
    assert r["untimed_actions"] == 0 and r["record_timings"] is None and r["timings_note"] is None
    assert re.search(r"^  gfx90a\s+3\s+0\s", out, re.M) and re.search(r"^  sm_75\s+2\s+0\s", out, re.M)


def test_trace_is_chrome_trace_on_lanes(reported):
    events = reported["trace"]["traceEvents"]
    xs = [e for e in events if e["ph"] == "X"]
    assert len(xs) == len(reported["first"]["actions"])
    assert {e["tid"] for e in xs} <= {0, 1}
    assert {e["args"]["name"] for e in events if e["name"] == "thread_name"} == {f"worker {e['tid']}" for e in xs}
    for e in xs:
        assert e["dur"] >= 1 and e["ts"] >= 0 and e["pid"] == 1
    # -j2: at some moment two actions run at once, on different lanes.
    spans = sorted((e["ts"], e["ts"] + e["dur"], e["tid"]) for e in xs)
    assert any(b[0] < a[1] and a[2] != b[2] for a, b in zip(spans, spans[1:]))


def test_cache_hits_are_reported_as_such(reported):
    r = reported["second"]
    assert len(r["actions"]) == len(reported["first"]["actions"])
    for a in r["actions"]:
        assert a["status"] == "cached" and a["wall_s"] == 0 and a["cpu_s"] == 0, a
    assert r["per_arch"]["gfx90a"]["cached"] == 3 and r["per_arch"]["gfx90a"]["wall_s"] == 0
    assert r["untimed_actions"] == 0 and r["timings_note"] is None  # a cache hit is recorded, as such
    assert "Retrieved `app' from cache" in reported["cached"].stdout
    assert re.search(r"^  gfx90a\s+3\s+3\s+0\.0\s+0\.0", reported["cached"].stdout, re.M)


# --------------------------------------------------------------------------------------------
# The report asked for after the build it would describe

NO_TIMINGS = "No timings were recorded in this build"
TIMED_SECTIONS = ("Build time per arch", "Slowest sources per arch", "Timeline")


def _sections(page: str) -> dict[str, str]:
    """The page's text under each <h2>, by title."""
    parts = re.split(r"<h2>(.*?)</h2>", page)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def _run_as_said(p: Project, command: str):
    """Run the commands the report says record the timings (`scons ... && scons ...`) as written,
    with this interpreter's SCons for `scons`."""
    from scons_helpers import scons_env
    env = scons_env()
    env.pop("OFFLOAD_PROGRESS", None)
    last = None
    for part in command.split(" && "):
        argv = shlex.split(part)
        assert argv[0] == "scons", command
        last = subprocess.run([sys.executable, "-m", "SCons", *argv[1:]], cwd=p.root, capture_output=True, text=True,
                              env=env)
        assert last.returncode == 0, f"{part}:\n{last.stdout}\n{last.stderr}"
    return last


def test_report_on_a_tree_built_without_it_says_no_timings_were_recorded(tmp_path):
    """With a CacheDir: it holds every target, so the commands the report gives must keep it from
    answering for the actions they are to time."""
    p = _project(tmp_path)
    cache = f"cache={tmp_path / 'cache'}"
    _scons(p, cache)  # built without the report
    cp = _scons(p, cache, "--offload-report=out/report.html")  # nothing to build: no action is timed
    r = json.loads((p.root / "out/report.json").read_text())
    assert r["actions"] == [] and r["per_arch"] == {} and r["untimed_actions"] == 8
    command = r["record_timings"]
    clean, build = command.split(" && ")
    assert shlex.split(clean)[:2] == ["scons", "-c"] and cache in shlex.split(clean)
    assert "--offload-report" not in clean and "--cache-disable" not in clean
    assert shlex.split(build)[0] == "scons" and cache in shlex.split(build)
    assert build.endswith(" --offload-report=out/report.html --cache-disable")
    note = r["timings_note"]
    assert note.startswith(NO_TIMINGS) and note.endswith(command)
    # The page says so in every section that shows times, with the command.
    sections = _sections((p.root / "out/report.html").read_text())
    for title in TIMED_SECTIONS:
        assert NO_TIMINGS in sections[title] and f"<code>{html.escape(command)}</code>" in sections[title], title
    assert NO_TIMINGS not in sections["Bytes per arch in each final binary"]
    # So do the summary printed at the end and the trace's metadata.
    assert f"  {note}\n" in cp.stdout
    assert json.loads((p.root / "out/trace.json").read_text())["otherData"] == {"note": note}

    # One source edited, then built with the report: its actions are timed, the other's are said
    # to be missing from the sums.
    p.write("src/kern.cpp", KERN_CPP.replace("s += i", "s += 2 * i"))
    _scons(p, cache, "--offload-report=out/report.html")
    r = json.loads((p.root / "out/report.json").read_text())
    assert len(r["actions"]) == 5 and r["untimed_actions"] == 3
    assert r["timings_note"].startswith("3 of 8 actions of this build have no recorded time")
    sections = _sections((p.root / "out/report.html").read_text())
    assert all("3 of 8 actions" in sections[title] for title in TIMED_SECTIONS)

    # The commands the report gives record every action's time (run, not taken from the cache);
    # then nothing is said.
    built = _run_as_said(p, r["record_timings"])
    r = json.loads((p.root / "out/report.json").read_text())
    assert len(r["actions"]) == 8 and r["untimed_actions"] == 0 and r["timings_note"] is None
    assert all(a["status"] == "built" and a["wall_s"] > 0 for a in r["actions"])
    assert sum(g["wall_s"] for g in r["per_arch"].values()) > 0
    page = (p.root / "out/report.html").read_text()
    assert "untimed" not in page and "no recorded time" not in page and NO_TIMINGS not in page
    assert NO_TIMINGS not in built.stdout and "otherData" not in json.loads((p.root / "out/trace.json").read_text())


# --------------------------------------------------------------------------------------------
# The page, rendered by a real browser

def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium not found (install chromium)")
    return exe


class _Bars(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.bars: list[dict] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "rect" and "bar" in (a.get("class") or "").split():
            self.bars.append(a)


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit RGB/RGBA PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    width, height, depth, colour = ihdr[:4]
    assert depth == 8 and colour in (2, 6)
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    rows, prev, stride = [], bytearray(width * bpp), width * bpp
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, bpp, rows


def test_page_renders_in_chromium_and_bars_match_the_json(reported, tmp_path):
    exe = _chromium()
    page = reported["html"]
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([exe, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0 and "<svg" in dom.stdout, dom.stderr[-2000:]
    assert "<script" not in page.read_text() and "http://" not in page.read_text().replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    parser = _Bars()
    parser.feed(dom.stdout)
    r = reported["first"]
    time_bars = {b["data-arch"]: b for b in parser.bars if b["data-chart"] == "time"}
    assert set(time_bars) == set(r["per_arch"])
    top = max(g["wall_s"] for g in r["per_arch"].values())
    for group, g in r["per_arch"].items():
        bar = time_bars[group]
        assert float(bar["data-value"]) == g["wall_s"]
        assert float(bar["width"]) == pytest.approx(420 * g["wall_s"] / top, abs=0.01)
    (app,) = [b for b in r["binaries"] if b["path"] == "app"]
    byte_bars = {b["data-arch"]: float(b["data-value"]) for b in parser.bars
                 if b["data-chart"] == "bytes" and b["data-binary"] == "app"}
    assert byte_bars == {a: row["bytes"] for a, row in app["archs"].items()}
    shares = {b["data-arch"]: float(b["data-value"]) for b in parser.bars if b["data-chart"] == "share"}
    assert shares["sm_75"] == pytest.approx(app["archs"]["sm_75"]["bytes"] / app["file_bytes"])
    assert sum(shares.values()) == pytest.approx(1.0)
    # The screenshot shows the bars: each arch's colour is painted, the widest bar the most.
    shot = tmp_path / "shot.png"
    res = subprocess.run([exe, *flags, f"--screenshot={shot}", "--window-size=1200,900", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and shot.exists(), res.stderr[-2000:]
    width, bpp, rows = _png_pixels(shot.read_bytes())
    painted = {}
    for group, bar in time_bars.items():
        rgb = bytes.fromhex(bar["fill"][1:])
        painted[group] = max(sum(1 for x in range(width) if row[x * bpp:x * bpp + 3] == rgb) for row in rows)
    assert all(n > 0 for n in painted.values()), painted
    widest = max(r["per_arch"], key=lambda g: r["per_arch"][g]["wall_s"])
    assert painted[widest] == max(painted.values())


# --------------------------------------------------------------------------------------------
# The estimate of an added arch, against adding it

BYTES_TOLERANCE = 0.25  # an AMD arch's code object is within a quarter of another's here


def test_cost_estimate_matches_adding_the_arch(tmp_path):
    p = _project(tmp_path)
    _scons(p, "-j2", "archs=gfx90a,gfx908", "--offload-report=report.html")
    res = run_cli("tool", "cost", "--add=gfx1030", "--json", p.root / "report.json")
    assert res.returncode == 0, res.stderr
    (est,) = json.loads(res.stdout)
    assert est["reference_archs"] == ["gfx908", "gfx90a"] and "mean" in est["method"]
    _scons(p, "-j2", "archs=gfx90a,gfx908,gfx1030", "--offload-report=report.html")
    after = json.loads((p.root / "report.json").read_text())
    added = [a for a in after["actions"] if a["arch"] == "gfx1030"]
    assert all(a["status"] == "built" for a in added)
    # The actions: exactly the ones predicted.
    assert sorted((a["kind"], a["slot"]) for a in added) == sorted(
        (a["kind"], a["slot"]) for a in est["actions"] if not a["grows"])
    # The bytes: within the stated tolerance. (Times are compared in bench/cost_prediction.py.)
    (app,) = [b for b in after["binaries"] if b["path"] == "app"]
    actual = app["archs"]["gfx1030"]["bytes"]
    assert abs(est["binaries"]["app"]["bytes"] - actual) <= BYTES_TOLERANCE * actual
    # Up-to-date actions keep the record of the build that ran them.
    kept = [a for a in after["actions"] if a["arch"] == "gfx908" and a["kind"] == "device-compile"]
    assert len(kept) == 2 and all(a["status"] == "up-to-date" and a["wall_s"] > 0 for a in kept)


# --------------------------------------------------------------------------------------------
# Size budgets in the build

def test_manifest_size_budget(tmp_path):
    p = _project(tmp_path)
    over = _scons(p, "budget=sm_75:1K", check=False)
    assert over.returncode != 0
    assert "app: sm_75 device images take" in over.stdout + over.stderr
    assert not (p.root / "manifest.json").exists()
    _scons(p, "budget=sm_75:10M,total:100M")
    assert (p.root / "manifest.json").exists()
    bad = _scons(p, "budget=sm_75:lots", check=False)
    assert bad.returncode == 2 and "OFFLOAD_MAX_BYTES: --max-bytes: 'sm_75:lots'" in bad.stderr


def test_a_new_builder_says_its_report_kind_where_it_is_made(tmp_path):
    """A toy hidden builder made with the builder modules' factory declares its report kind and
    that its target is a final binary, in that one call: the report records its action under that
    kind (the label starts with the kind's word) and measures its target; a user's builder that
    declares nothing is reported under its own name, lower case."""
    p = Project(tmp_path)
    p.write("SConstruct", """
        env = Environment(tools=['default', 'offload'], OFFLOAD_CLANG='clang-19')
        from offload.graph import common as _builders
        env['BUILDERS']['_OffloadToyStep'] = _builders.builder(action='cp $SOURCE $TARGET', report_kind='toy-step',
                                                               final_binary=True)
        env['BUILDERS']['Shout'] = Builder(action='tr a-z A-Z < $SOURCE > $TARGET')
        env._OffloadToyStep('toy.out', 'toy.in')
        env.Shout('loud.txt', 'toy.in')
        """)
    p.write("toy.in", "a toy\n")
    _scons(p, "--offload-report=out/report.html")
    r = json.loads((p.root / "out/report.json").read_text())
    by_target = {a["targets"][0]: a for a in r["actions"]}
    toy, shout = by_target["toy.out"], by_target["loud.txt"]
    assert (toy["kind"], toy["builder"], toy["label"]) == ("toy-step", "_OffloadToyStep", "TOY-STEP toy.out")
    assert (shout["kind"], shout["label"]) == ("shout", "SHOUT loud.txt")
    assert [b["path"] for b in r["binaries"]] == ["toy.out"]
