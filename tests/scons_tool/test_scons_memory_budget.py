"""The memory budget of the links (`graph.memory_budget`, `OFFLOAD_LINK_MEMORY`): a step waits
until its estimate fits beside those running, one always runs alone, waiting steps start in the
order they asked, estimates come from the build report's records of peak memory or from the
inputs' bytes; and in a real build at -j4 with four AMD archs, a budget for one device link at a
time never lets two `DEVICELINK` commands overlap (each logs when it starts and ends)."""

from __future__ import annotations

import json
import sys
import threading
import time

import pytest

from conftest import REPO, need_tool
from scons_helpers import Project, counts
from scons_samples import KERN_CPP, MAIN_C

sys.path.insert(0, str(REPO / "site_scons" / "site_tools"))

from offload.graph import memory_budget as mb  # noqa: E402
from offload.insight import report as _report  # noqa: E402

GIB = 1 << 30

# --------------------------------------------------------------------------------------------
# The budget


def _start(budget, need, limit, events, name, waits=None):
    """A thread that takes `need` of `budget`, logs `name` in `events`, and holds it until its
    returned event is set."""
    go = threading.Event()

    def run():
        budget.acquire(need, limit, (lambda free: waits.append((name, free))) if waits is not None else None)
        events.append(name)
        go.wait(30)
        budget.release(need)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, go


def _wait_for(predicate, budget):
    """Until `predicate()` holds (at most 30 s: a bound on a hang, not a timing)."""
    end = time.monotonic() + 30
    while True:
        with budget.cond:
            if predicate():
                return
        assert time.monotonic() < end, "never happened"
        time.sleep(0.01)


def test_a_step_waits_until_its_estimate_fits():
    budget, events, waits = mb.Budget(), [], []
    a, go_a = _start(budget, 3 * GIB, 4 * GIB, events, "a")
    _wait_for(lambda: budget.running == 1, budget)
    b, go_b = _start(budget, 2 * GIB, 4 * GIB, events, "b", waits)
    _wait_for(lambda: len(budget.queue) == 1, budget)  # b waits: 3 + 2 > 4
    assert events == ["a"] and waits == [("b", 1 * GIB)]
    go_a.set()
    a.join(30)
    _wait_for(lambda: events == ["a", "b"], budget)
    go_b.set()
    b.join(30)
    assert waits == [("b", 1 * GIB)]  # said once
    assert budget.running == 0 and budget.held == 0


def test_steps_that_fit_run_together():
    budget, events = mb.Budget(), []
    started = [_start(budget, 1 * GIB, 4 * GIB, events, n) for n in "abc"]
    _wait_for(lambda: budget.running == 3, budget)
    assert sorted(events) == ["a", "b", "c"] and not budget.queue
    for t, go in started:
        go.set()
        t.join(30)


def test_one_step_always_runs_alone():
    budget, events = mb.Budget(), []
    budget.acquire(64 * GIB, 1, None)  # more than the whole budget: runs, nothing else does
    assert budget.running == 1
    t, go = _start(budget, 1, 1, events, "small")
    _wait_for(lambda: len(budget.queue) == 1, budget)
    assert events == []
    budget.release(64 * GIB)
    _wait_for(lambda: events == ["small"], budget)
    go.set()
    t.join(30)


def test_waiting_steps_start_in_order():
    budget, events = mb.Budget(), []
    big, go_big = _start(budget, 3 * GIB, 4 * GIB, events, "big")
    _wait_for(lambda: budget.running == 1, budget)
    first, go_first = _start(budget, 3 * GIB, 4 * GIB, events, "first")
    _wait_for(lambda: len(budget.queue) == 1, budget)
    small, go_small = _start(budget, 1, 4 * GIB, events, "small")  # would fit, but comes after
    _wait_for(lambda: len(budget.queue) == 2, budget)
    assert events == ["big"]
    go_big.set()
    big.join(30)
    _wait_for(lambda: events[:2] == ["big", "first"], budget)
    _wait_for(lambda: events == ["big", "first", "small"], budget)  # 3 + 1 <= 4: together
    for t, go in ((first, go_first), (small, go_small)):
        go.set()
        t.join(30)


def test_no_budget_no_wait():
    budget = mb.Budget()
    with budget.hold(64 * GIB, None):
        assert budget.running == 0


@pytest.mark.parametrize("value, limit", [
    ("auto", "auto"), (None, None), (True, "auto"), ("", "auto"), (0, None), (False, None), ("off", None), ("0", None),
    (1 << 30, 1 << 30), ("8G", 8 << 30), ("512M", 512 << 20), ("1.5GiB", 3 << 29), ("100", 100), ("2 kb", 2048),
])
def test_setting(value, limit):
    assert mb.parse_limit(value) == limit


@pytest.mark.parametrize("value", ["lots", "8X", "-1G"])
def test_bad_setting(value):
    with pytest.raises(mb.SettingError, match="OFFLOAD_LINK_MEMORY"):
        mb.parse_limit(value)


def test_available_memory_is_known_here():
    assert (mb.available_memory() or 0) > 0


class _Node:
    """What the estimate asks of a target or source: a path, marks."""

    def __init__(self, path):
        self.path = str(path)
        self.attributes = type("A", (), {})()

    def get_abspath(self):
        return self.path

    def __str__(self):
        return self.path


def test_estimate_from_the_inputs_then_from_the_reports_records(tmp_path, monkeypatch):
    ins = []
    for i, size in enumerate((1000, 3000)):
        f = tmp_path / f"k{i}.o"
        f.write_bytes(b"\x7fELF" + b"\0" * (size - 4))
        ins.append(_Node(f))
    target = _Node(tmp_path / "app.gfx90a.devlink.o")
    monkeypatch.setattr(_report.RECORDER, "path", None)
    assert mb.estimate([target], ins) == mb.INPUT_FACTOR * 4000 + mb.BASE_BYTES
    # LLVM bitcode, raw or wrapped, is what an LTO reads: its own, larger factor.
    for i, magic in enumerate((b"BC\xc0\xde", b"\xde\xc0\x17\x0b")):
        f = tmp_path / f"k{i}.gfx90a.bc"
        f.write_bytes(magic + b"\0" * 996)
        ins.append(_Node(f))
    ins.append(_Node(tmp_path / "gone.bc"))  # not there (yet): counts nothing
    assert mb.estimate([target], ins) == mb.BITCODE_FACTOR * 2000 + mb.INPUT_FACTOR * 4000 + mb.BASE_BYTES
    # A report of an earlier build that measured the step.
    html = tmp_path / "out" / "report.html"
    html.parent.mkdir()
    shown = _report._path(target)
    record = {"targets": [shown], "status": "built", "wall_s": 1.0, "peak_rss_bytes": 5 * GIB}
    (tmp_path / "out" / "report.json").write_text(json.dumps({"schema": _report.SCHEMA, "actions": [record]}))
    monkeypatch.setattr(_report.RECORDER, "path", str(html))
    monkeypatch.setattr(_report, "_peaks", {})
    assert mb.estimate([target], ins) == 5 * GIB
    other = _Node(tmp_path / "app.gfx1030.devlink.o")
    assert mb.estimate([other], ins) == mb.BITCODE_FACTOR * 2000 + mb.INPUT_FACTOR * 4000 + mb.BASE_BYTES


def test_the_guess_of_an_amd_device_link_holds_what_one_took(tmp_path, monkeypatch):
    """An AMD device link of 1,000 OpenMP sources (~15.5 KB of device bitcode each, clang 19:
    `bench/scons_scale.py`'s project) peaked at 7.7 GB: before any record, the guess is
    above that, so a first build does not start several of them together in a machine that holds
    one."""
    monkeypatch.setattr(_report.RECORDER, "path", None)
    f = tmp_path / "k.gfx90a.bc"
    f.write_bytes(b"BC\xc0\xde" + b"\0" * (15_500 - 4))
    one = mb.estimate([_Node(tmp_path / "app.gfx90a.devlink.o")], [_Node(f)] * 1000)
    assert one >= 7.7e9, mb.gib(one)


# --------------------------------------------------------------------------------------------
# A real build: four AMD device links at -j4

# Each device link logs its start and end around the real command; with `wait=1` it first waits
# (up to 3 s) for another link to start, so links that may overlap do.
WRAP = r"""
import os, subprocess, sys, time
log, wait, cmd = sys.argv[1], sys.argv[2] == '1', sys.argv[3:]
name = os.path.basename([a for a in cmd if a.endswith('.devlink.o')][0])
def entries():
    with open(log) as f:
        return [l.split() for l in f]
with open(log, 'a') as f:
    f.write(f'start {name} {time.time()!r}\n')
if wait:
    end = time.time() + 3
    while time.time() < end and not any(e[0] == 'start' and e[1] != name for e in entries()):
        time.sleep(0.05)
rc = subprocess.call(cmd)
with open(log, 'a') as f:
    f.write(f'end {name} {time.time()!r}\n')
sys.exit(rc)
"""

SCONSTRUCT = """
import sys
env = Environment(tools=['default', 'offload'], OFFLOAD_CLANG='clang-19',
                  OFFLOAD_ARCHS=['gfx90a', 'gfx1030', 'gfx906', 'gfx908'],
                  OFFLOAD_LINK_MEMORY=ARGUMENTS.get('budget', 'auto'))
env['OFFLOAD_DEVICELINKCOM'] = (sys.executable + ' wrap.py ' + File('links.log').abspath + ' '
                                + ARGUMENTS.get('wait', '0') + ' ' + env['OFFLOAD_DEVICELINKCOM'])
env.OffloadProgram('app', ['src/main.c', 'src/kern.cpp'])
"""


def _intervals(log) -> dict[str, tuple[float, float]]:
    spans: dict[str, list[float]] = {}
    for line in log.read_text().splitlines():
        what, name, t = line.split()
        spans.setdefault(name, [0.0, 0.0])[what == "end"] = float(t)
    return {n: (s, e) for n, (s, e) in spans.items()}


def _overlap(spans) -> bool:
    ordered = sorted(spans.values())
    return any(b[0] < a[1] for a, b in zip(ordered, ordered[1:]))


@pytest.mark.slow
def test_device_links_never_overlap_within_a_budget_for_one(tmp_path):
    need_tool("clang-19")
    p = Project(tmp_path / "proj", {"SConstruct": SCONSTRUCT, "wrap.py": WRAP, "src/main.c": MAIN_C,
                                    "src/kern.cpp": KERN_CPP})
    # One byte: each device link needs more, so one runs at a time; each waits for a partner.
    cp = p.scons("budget=1", "wait=1", jobs=4)
    assert counts(cp)["DEVICELINK"] == 4
    spans = _intervals(p.root / "links.log")
    assert len(spans) == 4 and all(e >= s > 0 for s, e in spans.values()), spans
    assert not _overlap(spans), spans
    waits = [x for x in cp.stderr.splitlines() if "waits for memory" in x]
    assert waits and all(x.startswith("offload: note: DEVICELINK gfx") and "free of the budget" in x
                          for x in waits), cp.stderr
    assert len(waits) == len(set(waits)) <= 3, waits  # once per step that waited
    # The budget off: the same links rebuilt (the budget is no part of their signature), and
    # they overlap (each waits for another to start).
    (p.root / "links.log").unlink()
    p.scons("-c", "app")
    cp = p.scons("budget=off", "wait=1", jobs=4)
    assert counts(cp)["DEVICELINK"] == 4
    assert _overlap(_intervals(p.root / "links.log"))
    assert "waits for memory" not in cp.stderr
    assert p.up_to_date("budget=1", "wait=1")  # nor of any step's


@pytest.mark.slow
def test_the_report_records_each_links_peak_memory(tmp_path):
    need_tool("clang-19")
    p = Project(tmp_path / "proj", {"SConstruct": SCONSTRUCT, "wrap.py": WRAP, "src/main.c": MAIN_C,
                                    "src/kern.cpp": KERN_CPP})
    p.scons("--offload-report=out/report.html", jobs=2)
    records = json.loads((p.root / "out" / "report.json").read_text())["actions"]
    links = [r for r in records if r["kind"] in ("device-link", "link")]
    assert len(links) == 5 and all(r["peak_rss_bytes"] > (1 << 20) for r in links), links
