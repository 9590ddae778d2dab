"""OpenMP objects a build server made whole (`graph.compile.fat_object`): no two sources' offload
entries share a name.

clang names an OpenMP target region's entry `__omp_offloading_<dev>_<ino>_<function>_l<line>`
after the device and inode of the file that holds it on the machine that compiles. Here, two
files never share an identity. A build server of sccache-dist compiles each job in a sandbox of
its own, whose files can get the device and inode another job's file had (the sandbox's file
system hands them out again), so two sources with a function of one name and a target region
at one line can get entries of one name. Their region IDs are weak symbols: the link would keep
one, and both call sites would launch one kernel, silently.

So once a fat object is made, its entry names go into the project's table
(`.offload-dist/openmp-entries.json`, under a lock: parallel compiles end in any order). When
a name is already another source's, the object is compiled again here, without the launcher:
here the source's own identity names its entries (it meets a server's only by chance; then the
step stops with one line naming both sources). Only time is lost, said in one line. A source's
names are replaced when it is compiled again; names of sources since removed stay, and can only
cost a compile here."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys

import SCons.Errors

from offload_tool.errors import OffloadError

from ..scons import nodes as _nodes
from ..toolchain import discovery as _toolchain
from . import openmp_wrappers as _wrappers

# `offload_tool.ops.verify` (every format module) and `dist.sccache` are imported where a fat
# object is read or compiled again: every SConstruct that loads the tool imports this module, and
# a null build, which makes no fat object, would pay ~50 ms for them.

#: The prefix of the entries named after a file's identity (target regions); other entries
#: (`declare target` variables) carry the variable's own name, which the host link checks.
REGION_PREFIX = "__omp_offloading_"
TABLE = "openmp-entries.json"


def _names(path: str) -> set[str]:
    from offload_tool.ops import verify as _verify

    with open(path, "rb") as f:
        data = f.read()
    return {e.name for e in _verify.host_offload_entries(data) if e.name.startswith(REGION_PREFIX)}


def _table_path(env) -> str:
    return os.path.join(_nodes.abspath(env.Dir("#")), ".offload-dist", TABLE)


def _record(table_path: str, source: str, names: set[str]) -> str | None:
    """Record `names` as `source`'s (its earlier ones replaced), unless one is another source's:
    then that source, and nothing recorded."""
    os.makedirs(os.path.dirname(table_path), exist_ok=True)
    with open(table_path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(table_path, encoding="utf-8") as f:
                table = json.load(f)
            if not isinstance(table, dict):
                table = {}
        except (OSError, ValueError):
            table = {}
        for name in names:
            other = table.get(name)
            if other is not None and other != source:
                return other
        table = {n: s for n, s in table.items() if s != source}
        table.update({n: source for n in names})
        part = f"{table_path}.part{os.getpid()}"
        with open(part, "w", encoding="utf-8") as f:
            json.dump(table, f, indent=0, sort_keys=True)
        os.replace(part, table_path)
    return None


def _compile_here(target, source, env) -> None:
    """Run the node's compile again without its launcher (here, from the source's own file)."""
    from . import sccache as _dist

    argv = _dist.unlaunched_argv(env, "$OFFLOAD_FATCOM", target, [source])
    cp = subprocess.run(argv, cwd=_nodes.abspath(env.Dir("#")), env=_toolchain.build_env(env),
                        stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace")
    if cp.returncode:
        sys.stderr.write(cp.stderr)
        raise SCons.Errors.BuildError(node=target, errstr=f"offload: compiling '{source}' here failed",
                                      status=cp.returncode, exitstatus=cp.returncode)


def check_made(target, source, env, sent: bool = True) -> None:
    """After `target`, the fat object of `source`, was made: record its entry names, or, when one
    is another source's, compile it here and record those. An object a build server made (`sent`)
    whose device code may call what the inlined text left out (`openmp_wrappers.needs_files`) is
    compiled here first."""
    table = _table_path(env)
    src = _nodes.abspath(source)
    missing = _wrappers.needs_files(_nodes.abspath(target)) if sent else set()
    if missing:
        sys.stderr.write(f"offload: note: '{source}': its code calls {', '.join(sorted(missing))} (complex "
                         "arithmetic), which clang's OpenMP wrappers give device code only in a compile made from "
                         "the files; compiled here\n")
        _compile_here(target, source, env)
    try:
        names = _names(_nodes.abspath(target))
    except (OSError, OffloadError) as exc:
        raise SCons.Errors.BuildError(node=target, errstr=f"offload: '{target}': its offload entries cannot be read: {exc}")
    other = _record(table, src, names)
    if other is None:
        return
    sys.stderr.write(f"offload: note: '{source}': its offload entry names meet those of '{other}' (the build "
                     "server's file identity); compiled here\n")
    _compile_here(target, source, env)
    names = _names(_nodes.abspath(target))
    again = _record(table, src, names)
    if again is not None:
        os.remove(_nodes.abspath(target))
        raise SCons.Errors.BuildError(node=target, errstr=f"offload: '{source}' and '{again}' name offload entries "
                                                         "alike even compiled here; rename one's function or move its "
                                                         "target region")
