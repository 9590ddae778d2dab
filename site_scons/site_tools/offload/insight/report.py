"""The build cost report: `scons --offload-report=report.html`, or `env.OffloadBuildReport('report.html')`.

While the build runs, every action is recorded with its arch, language, sources, wall and CPU
time, output bytes, peak memory and worker lane; at the end the tool writes, beside the page:

* `report.json`: the records (schema `offload-build-report/1`, docs/scons-tool.md), plus the
  device bytes each arch takes in each final binary (read back with `offload_tool`'s inspector);
* `trace.json`: a Chrome trace of the actions on their worker lanes (Perfetto, chrome://tracing);
* the page itself (`_report_page`): inline SVG, no script, no network;
* and prints a per-arch summary.

How it measures: SCons runs each action inside a build task, in the worker thread of its `-j`
lane. With a report asked for, the tool has SCons use a subclass of its task that times
`execute()` (`_scons_hooks.time_build_tasks`; a `CacheDir` hit is an action too: recorded as
`cached`, with zero compile time) and counts the CPU of the thread (in-process steps) and of the
commands it spawns (`SPAWN` of the tool's environments, where it is SCons's POSIX default, waits
for each command with `os.wait4`, which returns that command's CPU and peak resident size). Without a report nothing of
this is installed; where this SCons's task cannot be timed the report is off, said once (the
build goes on).

Actions that did not run this time (up to date) keep the record of the build that last ran them,
read from the previous `report.json`, as long as their target is still part of the build; the
report then shows what the whole program costs to build, and `status` says which were measured
now. Actions up to date since a build that wrote no report there have no record: the report
counts them (`untimed_actions`), says so where times are shown, and gives the commands that
record them (`record_timings`: a clean build with the report on). Cost estimates for another
arch (`offload-tool cost`) read the same file."""

from __future__ import annotations

import atexit
import json
import os
import shlex
import sys
import threading
import time

import SCons.Script

from ..scons import nodes as _nodes
from ..graph.nvcc import builders as _nvcc
from . import report_page as _report_page
from ..scons import hooks as _scons_hooks
from ..settings.archs import file_safe
from .report_page import HOST_GROUP, fmt_bytes

SCHEMA = "offload-build-report/1"

#: SCons's own builders whose targets are final binaries (the tool's say so themselves:
#: `graph.common.reported`): their device bytes per arch are measured.
FINAL_BUILDERS = {"Program", "SharedLibrary", "LoadableModule", "StaticLibrary", "Library"}
#: Kind -> the word the action's line starts with (its COMSTR), for labels.
WORDS = {"host-ir": "HOSTIR", "host-compile": "HOST", "device-compile": "DEVICE", "nvcc-compile": "NVCC", "fat-compile": "FAT", "device-link": "DEVICELINK",
         "relocatable-link": "RELOCATABLE", "archive": "AR"}
_COMPILES = ("host-ir", "host-compile", "device-compile", "nvcc-compile", "fat-compile")

def _spawn(sh, escape, cmd, args, env):
    """SCons's POSIX spawn (`sh -c '<command>'`), but waited for with `os.wait4`, which gives the
    command's CPU time (its own and that of the processes it waited for: clang's cc1, ...)."""
    import subprocess
    proc = subprocess.Popen([sh, "-c", " ".join(args)], env=env, close_fds=True)
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except ChildProcessError:  # reaped elsewhere: the status is Popen's
        return proc.wait()
    proc.returncode = os.waitstatus_to_exitcode(status)
    state = _scons_hooks.thread_state
    state.children_cpu = getattr(state, "children_cpu", 0.0) + usage.ru_utime + usage.ru_stime
    # the largest resident size of the command or a process it waited for (KiB on Linux)
    state.children_peak = max(getattr(state, "children_peak", 0), usage.ru_maxrss * 1024)
    return proc.returncode


class Recorder:
    """The records of one build (one per SCons process)."""

    def __init__(self):
        self.path: str | None = None
        self.given: str | None = None  # the path as `--offload-report` named it (None: OffloadBuildReport)
        self.lock = threading.Lock()
        self.records: list[dict] = []
        self.lanes: dict[int, int] = {}
        self.t0: float | None = None
        self.seen: list = []  # first target of every task SCons considered (built or up to date)
        self.building = False
        self.timing = False  # the build tasks are timed (the report was asked for and SCons allows it)
        self.envs: list = []

    def activate(self, path: str, given: str | None = None) -> None:
        if self.path is not None:
            return
        self.path = os.path.abspath(path)
        self.given = given
        self.timing = _scons_hooks.time_build_tasks(self.prepared, self.done)
        if not self.timing:
            return  # said once by the hook: no report, the build goes on
        atexit.register(self.finish)
        for env in self.envs:
            _measure_spawn(env)

    # -- from the build tasks

    def prepared(self, targets) -> None:
        self.building = True
        self.seen.append(targets[0])

    def done(self, targets, start: float, end: float, cpu: float, status: str) -> None:
        measured = all(_nodes.build_env(t).get("SPAWN") is _spawn for t in targets[:1])
        state = _scons_hooks.thread_state  # this worker thread's: the task's commands ran in it
        peak, state.children_peak = getattr(state, "children_peak", 0), 0
        self.add(targets, start, end, cpu if measured else None, status, peak if measured else None)

    def lane(self) -> int:
        ident = threading.get_ident()
        with self.lock:
            return self.lanes.setdefault(ident, len(self.lanes))

    def add(self, targets, start: float, end: float, cpu: float | None, status: str,
            peak: int | None = None) -> None:
        try:
            record = describe(targets)
        except Exception as exc:  # never break the build over its report
            record = {"kind": "unknown", "label": str(targets[0]), "error": str(exc), "targets": [str(targets[0])],
                      "sources": [], "arch": None, "archs": [], "lang": None, "slot": str(targets[0]),
                      "builder": "", "bytes": 0}
        cached = status == "cached"
        record.update(status=status, start_s=start, end_s=end, wall_s=0.0 if cached else end - start,
                      retrieve_s=end - start if cached else 0.0, cpu_s=0.0 if cached else cpu, lane=self.lane(),
                      peak_rss_bytes=None if cached or not peak else peak)
        with self.lock:
            self.records.append(record)

    # -- at exit

    def finish(self) -> None:
        if not self.building or SCons.Script.GetOption("no_exec"):
            return
        try:
            report = self.report()
            write_report(report, self.path)
            sys.stdout.write(summary_text(report, self.path))
            sys.stdout.flush()
        except Exception as exc:  # a report that cannot be written is said, once, and not a traceback
            sys.stderr.write(f"offload: warning: build report not written: {type(exc).__name__}: {exc}\n")

    def report(self) -> dict:
        t0 = min((r["start_s"] for r in self.records), default=0.0)
        current = []
        for r in self.records:
            r = dict(r, start_s=round(r["start_s"] - t0, 6), end_s=round(r["end_s"] - t0, 6))
            for k in ("wall_s", "cpu_s", "retrieve_s"):
                if r.get(k) is not None:
                    r[k] = round(r[k], 6)
            current.append(r)
        in_build = {_path(n) for n in self.seen}
        done = {r["targets"][0] for r in current}
        earlier = [dict(r, status="up-to-date", last_status=r.get("last_status") or r["status"], start_s=None,
                        end_s=None, lane=None)
                   for r in _previous_records(os.path.splitext(self.path)[0] + ".json")
                   if r["targets"][0] in in_build and r["targets"][0] not in done]
        actions = current + earlier
        recorded = {t for r in actions for t in r["targets"]}
        untimed = {p for p in (_path(n) for n in self.seen if _is_action(n)) if p not in recorded}
        finals = sorted({_path(n) for n in self.seen if _final_binary(n)})
        binaries = [measure_binary(p) for p in finals if os.path.isfile(p)]
        report = {
            "schema": SCHEMA,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "jobs": int(SCons.Script.GetOption("num_jobs") or 1),
            "build_wall_s": round(max((r["end_s"] for r in current), default=0.0), 6),
            "failed": bool(SCons.Script.GetBuildFailures()),
            "actions": actions,
            "binaries": binaries,
            "per_arch": per_arch(actions, binaries),
            "untimed_actions": len(untimed),
            "record_timings": self.record_command() if untimed else None,
        }
        report["timings_note"] = _report_page.timings_note(report)
        return report

    def record_command(self) -> str:
        """The commands that record the time of every action of this build: a clean, then this
        build again with the report on. An up-to-date action runs (and is timed) only when its
        target is gone, and a `CacheDir` would hand the targets back untimed, hence
        `--cache-disable` where one is set. This build's own arguments (targets, `-j`,
        `name=value`) are kept, so that the clean and the build cover the same targets."""
        args = _without_report_option(sys.argv[1:])
        build = list(args)
        if self.given is not None:
            build.append(f"--offload-report={self.given}")
        in_use = _scons_hooks.cache_dir_in_use(n for n in self.seen if _is_action(n))
        if in_use is not False and "--cache-disable" not in build:  # unknown: turned off all the same
            build.append("--cache-disable")
        return f"{shlex.join(['scons', '-c', *args])} && {shlex.join(['scons', *build])}"


RECORDER = Recorder()

_peaks: dict[str, dict[str, int]] = {}


def recorded_peak(node) -> int | None:
    """The peak memory (`peak_rss_bytes`) the last report recorded for the action that makes
    `node`, or None: no report on in this build, none written before, or no such record. Read
    from the previous report once per build (`graph.memory_budget`'s estimates)."""
    if RECORDER.path is None:
        return None
    js = os.path.splitext(RECORDER.path)[0] + ".json"
    with RECORDER.lock:
        peaks = _peaks.get(js)
        if peaks is None:
            peaks = _peaks[js] = {t: r["peak_rss_bytes"] for r in _previous_records(js)
                                  if isinstance(r.get("peak_rss_bytes"), int) and r["peak_rss_bytes"] > 0
                                  for t in r["targets"]}
    return peaks.get(_path(node))


def _is_action(node) -> bool:
    """Whether a node SCons considered is built by an action the report would time (as the
    build task times them: anything with a builder but SCons making a folder)."""
    try:
        return _nodes.has_builder(node) and not _nodes.is_dir(node)
    except Exception:
        return False


def _without_report_option(args: list[str]) -> list[str]:
    """`args` without `--offload-report` and its value (as optparse reads it: `=FILE` or the next
    argument, the option name possibly abbreviated)."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        name = a.split("=", 1)[0]
        if len(name) > len("--off") and "--offload-report".startswith(name):
            skip = "=" not in a
            continue
        out.append(a)
    return out


def _measure_spawn(env) -> None:
    default = _scons_hooks.default_spawn()
    if default is not None and env.get("SPAWN") is default:
        env["SPAWN"] = _spawn


# --------------------------------------------------------------------------------------------
# What an action is

#: A node's path as the report shows it, the name of the builder that makes it, and what that
#: builder says of itself for the report (`graph.common.reported`).
_path, _builder_name, _builder_says = _nodes.shown_path, _nodes.builder_name, _nodes.builder_says


def _final_binary(node) -> bool:
    return bool(_builder_says(node, "offload_final_binary")) or _builder_name(node) in FINAL_BUILDERS


def _image_arch(node) -> str | None:
    image = getattr(_nodes.marks(node), "offload_image", None)
    return image.get("arch") if image else None


def file_bytes(nodes) -> int:
    """The bytes of the files of `nodes` that exist (an action's targets; a link's inputs:
    `graph.memory_budget`)."""
    size = 0
    for x in nodes:
        try:
            size += os.path.getsize(_nodes.abspath(x))
        except OSError:
            pass
    return size


def describe(targets) -> dict:
    """The report fields of an action that do not depend on its timing."""
    t = targets[0]
    name = _builder_name(t)
    # The kind its builder declares; a builder that declares none (a user's) is its name, lower case.
    kind = _builder_says(t, "offload_report_kind") or name.lower() or "action"
    sources = _scons_hooks.action_sources(t)
    arch = _image_arch(t) or (_nvcc.step_arch(_nodes.build_env(t)) if name.startswith("_OffloadNvcc") else None)
    if arch:
        archs = [arch]
    elif kind == "nvcc-compile":
        archs = [str(a) for a in _nodes.build_env(t).get("_OFFLOAD_NVCC_ARCHS") or []]
    else:  # a container of per-arch images (bundle, package) holds those archs
        archs = sorted({a for a in (_image_arch(s) for s in sources) if a})
    target = _path(t)
    # What the action is about: a compile's source, else its (last: the fat object of a
    # package+embed) target.
    source = _nodes.path(sources[0].srcnode()) if kind in _COMPILES and sources else _path(targets[-1])
    slot = target.replace(file_safe(arch), "{arch}") if arch else target
    label = " ".join(x for x in (WORDS.get(kind, kind.upper()), arch, source) if x)
    size = file_bytes(targets)
    return {"kind": kind, "builder": name, "label": label, "targets": [_path(x) for x in targets],
            "sources": [_nodes.path(s) for s in sources], "source": source, "arch": arch, "archs": archs,
            "lang": getattr(_nodes.marks(t), "offload_lang", None), "slot": slot, "bytes": size}


def group_of(record: dict) -> str:
    """The per-arch bar an action counts in: its arch; an action for several archs at once (nvcc's
    one compile with a -gencode each) under those archs joined by '+'; anything else (host
    compiles, packaging, links) under `host`."""
    if record.get("arch"):
        return record["arch"]
    if record.get("kind") == "nvcc-compile" and record.get("archs"):
        return "+".join(record["archs"])
    return HOST_GROUP


def _previous_records(path: str) -> list[dict]:
    """The actions of the last report at `path` (none if it is absent or not a report)."""
    try:
        with open(path, encoding="utf-8") as f:
            old = json.load(f)
    except (OSError, ValueError):
        return []
    if not isinstance(old, dict) or old.get("schema") != SCHEMA or not isinstance(old.get("actions"), list):
        return []
    return [r for r in old["actions"] if isinstance(r, dict) and isinstance(r.get("targets"), list) and r["targets"]
            and r.get("status") in ("built", "cached", "up-to-date") and isinstance(r.get("wall_s"), (int, float))]


def measure_binary(path: str) -> dict:
    """Device bytes per arch and per container in one final binary (`inspect --sizes`)."""
    from offload_tool.errors import OffloadError
    from offload_tool.ops.inspector import inspect_file, size_summary
    try:
        images = inspect_file(path, keep_data=False, hashes=False)
        error = None
    except OffloadError as exc:
        images, error = [], str(exc)
    summary = size_summary(images, path, os.path.getsize(path))
    if error:
        summary["error"] = error
    return summary


def per_arch(actions: list[dict], binaries: list[dict]) -> dict:
    """Per group (`group_of`): actions, cache hits, wall and CPU seconds, the slowest sources, and
    the device bytes of the arch in each final binary."""
    groups: dict[str, dict] = {}
    for a in actions:
        g = groups.setdefault(group_of(a), {"actions": 0, "cached": 0, "wall_s": 0.0, "cpu_s": 0.0,
                                            "cpu_known": True, "slowest": [], "binary_bytes": {}})
        g["actions"] += 1
        g["cached"] += a["status"] == "cached"
        g["wall_s"] += a["wall_s"] or 0.0
        if a.get("cpu_s") is None:
            g["cpu_known"] = False
        else:
            g["cpu_s"] += a["cpu_s"]
        g["slowest"].append((a["wall_s"] or 0.0, a.get("source") or a["targets"][0], a["kind"], a["status"]))
    for b in binaries:
        for arch, row in b["archs"].items():
            g = groups.get(arch)
            if g is not None:
                g["binary_bytes"][b["path"]] = row["bytes"]
    for g in groups.values():
        g["slowest"] = [{"wall_s": round(w, 6), "source": s, "kind": k, "status": st}
                        for w, s, k, st in sorted(g["slowest"], key=lambda x: -x[0])[:5]]
        g["wall_s"] = round(g["wall_s"], 6)
        g["cpu_s"] = round(g["cpu_s"], 6) if g.pop("cpu_known") else None
    return dict(sorted(groups.items(), key=lambda kv: (kv[0] == HOST_GROUP, kv[0])))


# --------------------------------------------------------------------------------------------
# Files

def trace_events(report: dict) -> dict:
    """Chrome trace-event JSON: one complete event ("X") per action of this build on its lane."""
    events = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "scons"}}]
    lanes = sorted({a["lane"] for a in report["actions"] if a.get("lane") is not None})
    for lane in lanes:
        events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": lane, "args": {"name": f"worker {lane}"}})
    for a in report["actions"]:
        if a.get("start_s") is None:
            continue
        events.append({"name": a["label"], "cat": a["kind"] + (",cached" if a["status"] == "cached" else ""),
                       "ph": "X", "pid": 1, "tid": a["lane"], "ts": round(a["start_s"] * 1e6),
                       "dur": max(1, round((a["end_s"] - a["start_s"]) * 1e6)),
                       "args": {"arch": a["arch"], "lang": a["lang"], "status": a["status"], "cpu_s": a["cpu_s"],
                                "bytes": a["bytes"], "targets": a["targets"]}})
    trace = {"traceEvents": events, "displayTimeUnit": "ms"}
    if report.get("timings_note"):  # shown as the trace's metadata
        trace["otherData"] = {"note": report["timings_note"]}
    return trace


def report_paths(html_path: str) -> tuple[str, str, str]:
    folder = os.path.dirname(html_path)
    return html_path, os.path.splitext(html_path)[0] + ".json", os.path.join(folder, "trace.json")


def _write(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def write_report(report: dict, html_path: str) -> None:
    html, js, trace = report_paths(html_path)
    os.makedirs(os.path.dirname(html) or ".", exist_ok=True)
    _write(js, json.dumps(report, indent=1) + "\n")
    _write(trace, json.dumps(trace_events(report)) + "\n")
    _write(html, _report_page.render(report))


def summary_text(report: dict, html_path: str) -> str:
    """The per-arch summary printed at the end of the build."""
    html, js, trace = report_paths(html_path)
    ran = [a for a in report["actions"] if a["status"] != "up-to-date"]
    lines = ["", f"offload: build report: {len(ran)} action(s) this build, {report['build_wall_s']:.1f} s at "
                 f"-j{report['jobs']}; cost per arch (latest run of every action):",
             f"  {'arch':<22} {'actions':>7} {'cached':>6} {'time s':>8} {'cpu s':>8}  device bytes in binaries"]
    for group, g in report["per_arch"].items():
        cpu = f"{g['cpu_s']:8.1f}" if g["cpu_s"] is not None else f"{'-':>8}"
        inb = ", ".join(f"{os.path.basename(p)} {fmt_bytes(n)}" for p, n in g["binary_bytes"].items()) or "-"
        lines.append(f"  {group:<22} {g['actions']:>7} {g['cached']:>6} {g['wall_s']:8.1f} {cpu}  {inb}")
    for b in report["binaries"]:
        if b["archs"]:
            shares = ", ".join(f"{a} {100.0 * r['bytes'] / b['file_bytes']:.0f}%" for a, r in b["archs"].items()
                               if b["file_bytes"])
            lines.append(f"  {b['path']}: {fmt_bytes(b['file_bytes'])}; device code per arch: {shares}")
    if report.get("timings_note"):
        lines.append(f"  {report['timings_note']}")
    lines.append(f"  report: {os.path.relpath(html)} (records {os.path.relpath(js)}, trace {os.path.relpath(trace)})")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Hooks

_option_added = False


def _add_option() -> None:
    global _option_added
    if _option_added:
        return
    _option_added = True
    try:
        SCons.Script.AddOption("--offload-report", dest="offload_report", type="string", action="store",
                               metavar="FILE", help="write a build cost report (FILE.html, FILE.json, trace.json)")
    except Exception:  # added already by another copy of the tool
        pass


def OffloadBuildReport(env, target, **kw):
    """Write the build cost report to `target` (an .html path; the .json and trace.json go beside
    it) at the end of this build. `scons --offload-report=FILE` wins over this."""
    node = env.File(target) if isinstance(target, str) else target
    if not (SCons.Script.GetOption("clean") or SCons.Script.GetOption("question")):
        RECORDER.activate(str(_nodes.abspath(node)))
    return node


def install(env) -> None:
    """The `--offload-report` option and `OffloadBuildReport`; recording when a report is asked for."""
    _add_option()
    env.AddMethod(OffloadBuildReport, "OffloadBuildReport")
    RECORDER.envs.append(env)
    if RECORDER.path is not None:
        if RECORDER.timing:
            _measure_spawn(env)
        return
    path = SCons.Script.GetOption("offload_report")
    if path and not (SCons.Script.GetOption("clean") or SCons.Script.GetOption("question")):
        # Relative to the directory SCons was started in, as other command-line paths are.
        RECORDER.activate(os.path.join(SCons.Script.GetLaunchDir(), path), given=path)
