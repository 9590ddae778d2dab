"""OpenMP device compiles that read the host IR made once per source, instead of each making it.

An OpenMP device compile needs the host's LLVM IR: the device side takes the order and names of
the offload entries from its `omp_offload.info` metadata (`-fopenmp-host-ir-file-path`). Inside one
`clang -fopenmp --offload-arch=a,b -c`, the driver runs the host front end once and hands its IR to
every device job; a device-only compile (`--offload-device-only`), one per arch here, runs the
host front end again itself, for nothing but that metadata: with heavy headers about half of each
device compile. So the graph of an OpenMP source is

    x.cpp --HOSTIR--> x.host.bc       (the host front end, what the driver's host job makes:
                                       `-emit-llvm-bc -disable-llvm-passes`, the tool's fixed
                                       `-fopenmp-targets`, so adding an arch does not rerun it)
    x.host.bc --HOST--> x.host.o      (the driver's host backend job; the same bytes as
                                       `--offload-host-only -c x.cpp`)
    x.cpp [+ x.host.bc] --DEVICE <arch>--> x.<arch>.o / .bc

and each device node runs the device jobs of its driver command with the host-IR job dropped
and `-fopenmp-host-ir-file-path` naming `x.host.bc` (a dependency of the node: a host flag that
changes the host IR reruns the device compiles, as it would inside one driver compile).

The jobs are not hard-coded: they are read from the driver's `-###` of the node's own command,
once per command-line shape (the command with its source, output and source id set aside; the
compiles of one arch and language share one), and instantiated per node. The node's signature
stays its driver command (`OFFLOAD_DEVICECOM`), which determines those jobs for a given clang,
whose identity is in the signature too. A plan of another shape (more or other jobs) falls back to
the driver command with a one-line note, once per shape. Where a launcher (ccache, sccache) or a
wrapper runs the compiler, the graph keeps one driver compile per node (`wanted`): those cache
whole compiles, and a compile of IR is not one they cache.

Checked by experiment (clang 19 and 22): a device object compiled this way is byte-identical to
the driver's device-only compile, also when the host IR was made with other host flags (`-O1`,
`-fPIC`) and both offload triples; the host object from the IR is byte-identical to the host-only
compile and to the host part of the driver's fat object."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from dataclasses import dataclass

from ..scons import signatures as _signatures
from ..toolchain import discovery as _toolchain
from ..toolchain import jobs as _jobs
from .common import settings

#: The define that carries a source's file identity (`offload_ids.h`), different per source.
SOURCE_ID = "OFFLOAD_TOOL_SOURCE_ID="

# Stand-ins for what differs between the nodes that share a plan.
_SRC, _NAME, _OUT, _HOSTIR, _TMP, _ID = (f"\0{w}\0" for w in ("src", "name", "out", "hostir", "tmp", "id"))


@dataclass(frozen=True)
class Plan:
    """The device jobs of one command-line shape, with stand-ins for the per-node values."""
    jobs: tuple[tuple[str, ...], ...]
    temp_suffix: str          # suffix of the file between the device job and ptxas ('' if none)


class _Shape(Exception):
    """The driver's plan is not one host-IR job followed by the device jobs this module knows."""


_plans: dict[tuple, Plan | str] = {}
_noted: set[str] = set()
_lock = threading.Lock()


_wanted: dict[tuple, tuple[bool, object]] = {}


def wanted(env, kw: dict, lang) -> bool:
    """Whether the compiles of `lang` in `env` with the caller's overrides `kw` take the host-IR
    graph: only for a language that has one (OpenMP), where the compiler is clang itself and no
    launcher runs it. ccache, sccache or a
    site wrapper cache or ship whole driver compiles (ccache does not cache a compile of IR;
    sccache refuses `-Xclang`), so there each node stays the driver compile it was, cached as
    before. Decided while the graph is made, from the compiler and launcher the compiles would
    run; once per (environment, overrides, language): every node of a source asks."""
    if not lang.host_ir:
        return False
    try:
        key = (id(env), _signatures.frozen(dict(kw)), lang.name)
    except TypeError:
        key = None
    if key in _wanted:
        return _wanted[key][0]
    senv = settings(env, kw)
    launcher = senv.subst("$OFFLOAD_LOCAL_LAUNCHER" if lang.file_identity else "$OFFLOAD_LAUNCHER").strip()
    # (a wrapper may also add what `-###` would not show)
    answer = not launcher and _toolchain.clang_executable(
        _toolchain.resolve(senv, senv.subst("$OFFLOAD_CLANG").strip())) is not None
    if key is not None:
        _wanted[key] = (answer, env)  # (holds `env`: its id stays its own)
    return answer


def _out_of(job: list[str]) -> str:
    try:
        return job[job.index("-o") + 1]
    except (ValueError, IndexError):
        raise _Shape("a job without -o") from None


def parse(text: str, src: str, out: str, source_id: str) -> Plan:
    """The plan of a device-only compile's `-###` output (`text`) for the node compiling `src`
    into `out` (`source_id`: its `OFFLOAD_TOOL_SOURCE_ID` value, or ''), or `_Shape`."""
    jobs = _jobs.parse_jobs(text)
    if len(jobs) not in (2, 3):
        raise _Shape(f"{len(jobs)} jobs, not a host-IR job and one or two device jobs")
    host, device = jobs[0], jobs[1]
    if host[1:2] != ["-cc1"] or "-emit-llvm-bc" not in host or "-disable-llvm-passes" not in host \
            or "-fopenmp-is-target-device" in host:
        raise _Shape("the first job is not the host front end writing IR")
    host_ir = _out_of(host)
    if device[1:2] != ["-cc1"] or "-fopenmp-is-target-device" not in device:
        raise _Shape("the second job is not the device compile")
    try:
        if device[device.index("-fopenmp-host-ir-file-path") + 1] != host_ir:
            raise _Shape("the device job reads another host IR")
    except (ValueError, IndexError):
        raise _Shape("the device job reads no host IR") from None
    middle = _out_of(device)
    if len(jobs) == 2:
        if middle != out:
            raise _Shape("the device job does not write the output")
        rest, temp_suffix = [device], ""
    else:
        ptxas = jobs[2]
        if not os.path.basename(ptxas[0]).startswith("ptxas") or middle not in ptxas or out not in ptxas \
                or middle == out:
            raise _Shape(f"an unknown job '{os.path.basename(ptxas[0])}' after the device compile")
        rest, temp_suffix = [device, ptxas], os.path.splitext(middle)[1]
    name = os.path.basename(src)
    made = []
    for job in rest:
        args, prev = [], ""
        for a in job:
            if a == host_ir:
                a = _HOSTIR
            elif a == middle and middle != out:
                a = _TMP
            elif a == src:
                a = _SRC
            elif a == out:
                a = _OUT
            elif prev == "-main-file-name" and a == name:
                a = _NAME
            elif source_id and a.startswith(("-D" + SOURCE_ID, SOURCE_ID)) and a.endswith("=" + source_id):
                a = a[:-len(source_id)] + _ID
            args.append(a)
            prev = a
        made.append(tuple(args))
    for a in (a for job in made for a in job):
        if name in a or os.path.basename(out) in a or (source_id and source_id in a):
            raise _Shape(f"a job names the source or the output where the tool does not expect it ('{a}')")
        if a == host_ir:
            raise _Shape("the host IR is read by another job too")
    if not any(_SRC in job for job in made[:1]):
        raise _Shape("the device job does not compile the source")
    return Plan(jobs=tuple(made), temp_suffix=temp_suffix)


def _shape(argv: list[str], src: str, out: str, penv: dict) -> tuple[tuple, str]:
    """The key of a node's plan: its command with the source, output and source id set aside
    (their suffixes kept: they decide the language and the output kind), the folder it runs in
    and its process environment; and the node's source id."""
    source_id, key = "", []
    for a in argv:
        if a == src:
            a = "\0src" + os.path.splitext(src)[1]
        elif a == out:
            a = "\0out" + os.path.splitext(out)[1]
        elif a.startswith("-D" + SOURCE_ID):
            source_id, a = a[len("-D" + SOURCE_ID):], "\0id"
        key.append(a)
    return (tuple(key), os.getcwd(), tuple(sorted(penv.items()))), source_id


def _note(why: str) -> None:
    if why not in _noted:
        _noted.add(why)
        sys.stderr.write(f"offload: note: OpenMP device compiles run the host front end themselves ({why}): "
                         "one driver compile per source and arch instead\n")


#: A random part of this run's temporary names, so that no one can predict (and pre-create or
#: link) them; beside the output, in the build tree, where only who may write the output may write.
_RUN_TOKEN = os.urandom(6).hex()


def temp_path(out: str, suffix: str) -> str:
    """The file between a node's device job and ptxas: beside the output, in the build tree (not
    in the shared temporary folder, where another user could pre-create a predictable name),
    named after the output and this run's random token (one per node and run, so parallel
    compiles never share one); removed after the jobs, whether they succeeded or not."""
    folder, name = os.path.split(os.path.abspath(out))
    return os.path.join(folder, f".{name}.{_RUN_TOKEN}.device{suffix}")


def remove_temp(out: str) -> None:
    """Remove the file between a node's jobs (whether they succeeded or not)."""
    for suffix in _temp_suffixes:
        try:
            os.remove(temp_path(out, suffix))
        except OSError:
            pass


_temp_suffixes: set[str] = set()


def device_jobs(argv: list[str], src: str, out: str, host_ir: str, penv: dict) -> list[list[str]] | None:
    """The commands that compile `src` into `out` as the driver command `argv` would, reading
    `host_ir` instead of making the host IR; None (after a note, once per shape) where the plan
    is not recognised, and the driver command is to run as it is. Only nodes of the host-IR
    graph ask (`wanted`: clang itself, no launcher)."""
    key, source_id = _shape(argv, src, out, penv)
    with _lock:
        plan = _plans.get(key)
        if plan is None:
            try:
                run = subprocess.run(list(argv) + ["-###"], capture_output=True, text=True, timeout=120, env=penv)
                plan = parse(run.stdout + run.stderr, src, out, source_id) if run.returncode == 0 \
                    else f"'{os.path.basename(argv[0])} -###' failed"
            except (OSError, subprocess.SubprocessError, ValueError) as exc:
                plan = f"'{os.path.basename(argv[0])} -###' did not run: {exc}"
            except _Shape as exc:
                plan = f"the driver's plan is not recognised: {exc}"
            _plans[key] = plan
            if isinstance(plan, Plan) and plan.temp_suffix:
                _temp_suffixes.add(plan.temp_suffix)
    if isinstance(plan, str):
        _note(plan)
        return None
    values = {_SRC: src, _NAME: os.path.basename(src), _OUT: out, _HOSTIR: host_ir, _ID: source_id,
              _TMP: temp_path(out, plan.temp_suffix)}
    jobs = []
    for job in plan.jobs:
        args = []
        for a in job:
            if "\0" in a:
                for standin, value in values.items():
                    a = a.replace(standin, value)
            args.append(a)
        jobs.append(args)
    return jobs
