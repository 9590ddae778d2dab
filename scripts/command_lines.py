"""Print what `scons -n` would run for every toolchain mode of the shape matrix (every shape in one
project per mode) and for the example project, with full command lines (`OFFLOAD_VERBOSE=1`).

Why: a change that should leave the SCons tool's behaviour as it was (a refactoring) is proved by
the same output before and after, byte for byte:

    .venv/bin/python scripts/command_lines.py > before.txt
    ... change ...
    .venv/bin/python scripts/command_lines.py > after.txt && cmp before.txt after.txt

Paths of the temporary projects are replaced by `<PROJECT>`, the (device, inode) words of
OpenMP sources' identities by `<ID>`, the sccache-dist server's key (from the project's path) by
`<KEY>` and the random part of temporaries' names by `<RANDOM>`, so
that two runs compare. Modes whose
tools are missing are listed with why, in place of their lines. The sccache-dist modes get a
client configuration naming a scheduler on a closed port (no cluster is started): their command
lines are those of a build whose scheduler does not answer.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "scons_tool")]

from scons_helpers import run_scons  # noqa: E402
import test_scons_shape_matrix as matrix  # noqa: E402


def _scons_n(root: Path, args: list[str], env: dict) -> str:
    cp = run_scons(root, "-n", *args, check=False, env={**env, "OFFLOAD_VERBOSE": "1"}, timeout=600)
    out = cp.stdout + cp.stderr + f"[exit {cp.returncode}]\n"
    out = out.replace(str(root), "<PROJECT>")
    # A source's identity is its file's device and inode in hex (`fe00_20c3e8`, then a hash of
    # the header identities): new files, new numbers.
    dev = f"{os.stat(root).st_dev:x}"
    out = re.sub(rf"\b{dev}_[0-9a-f]+(_[0-9a-f]{{16}})?\b", "<ID>", out)
    # The tool's sccache-dist server is keyed by the project's path and its configuration file.
    for key in set(re.findall(r"\.offload-dist/([0-9a-f]{16})\b", out)):
        out = out.replace(key, "<KEY>")
    # Temporaries between a device job and ptxas have a random part (never a predictable name).
    return re.sub(r"\.[0-9a-f]{12}\.device\.s\b", ".<RANDOM>.device.s", out)


def _mode_lines(name: str, tmp: Path) -> str:
    mode = matrix.MODES[name]
    for need in mode.needs:
        if need == "sccache-dist":
            continue
        why = matrix._missing(need)
        if why:
            return f"(not run: {why})\n"
    shapes = {s: matrix.build_shape(s, mode.family) for s in matrix.SHAPES if (s, name) not in matrix.NOT_APPLICABLE}
    root = tmp / name
    matrix._write_project(root, mode, shapes)
    env = {}
    if mode.settings.get("OFFLOAD_LAUNCHER") == "ccache":
        env["CCACHE_DIR"] = str(tmp / "ccache")
    if "sccache-dist" in mode.needs:
        conf = tmp / f"{name}-sccache.conf"
        conf.write_text('[dist]\nscheduler_url = "http://127.0.0.1:9"\ntoolchains = []\n'
                        '[dist.auth]\ntype = "token"\ntoken = "x"\n')
        env["SCCACHE_CONF"] = str(conf)
    archs = "archs=" + ",".join((*mode.archs, mode.added))
    return _scons_n(root, ["-k", archs], env)


def _example_lines(tmp: Path) -> str:
    root = tmp / "example"
    shutil.copytree(REPO / "example_project", root, ignore=shutil.ignore_patterns("build", ".sconsign*"))
    # The example's SConstruct names the tool by a path relative to the repository.
    text = (root / "SConstruct").read_text().replace("'../site_scons/site_tools'", repr(str(REPO / "site_scons" / "site_tools")))
    (root / "SConstruct").write_text(text)
    return _scons_n(root, [], {})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("modes", nargs="*", help="modes to print (default: all, then the example)")
    args = ap.parse_args()
    names = args.modes or [*matrix.MODES, "example"]
    with tempfile.TemporaryDirectory(prefix="offload-command-lines-") as t:
        tmp = Path(t)
        for name in names:
            sys.stdout.write(f"===== {name}\n")
            sys.stdout.write(_example_lines(tmp) if name == "example" else _mode_lines(name, tmp))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
