"""LLVM's own lit tests of clang-offload-bundler and clang-offload-packager, run against our
drop-in CLIs and, side by side, against LLVM's tools.

Why: the CLIs claim to be drop-in replacements; LLVM's tests of its tools are the most complete
statement of what "drop-in" means (messages, exit statuses, files written), and running them
against LLVM's own tools of the same release shows which tests this machine can run at all (a
missing target, a newer test than the installed release), so our count is read against theirs,
not against the total.

    python bench/llvm_lit.py FOLDER [--llvm-bin /usr/lib/llvm-19/bin] [-v]

FOLDER holds LLVM test files (`clang/test/Driver/clang-offload-bundler*.c`,
`clang/test/Driver/offload-packager.c`, ...), which this repository does not carry. Each file's
`RUN:` lines (continuations joined) are run in order by `bash -o pipefail` in a fresh folder,
with lit's substitutions (`%s`, `%t`, `%T`, `%S`, `%clang`, `%clangxx`, `%itanium_abi_triple`,
`%errc_ENOENT`) and, first on `PATH`, a folder of wrappers naming the tools under test:
`clang-offload-bundler`, `clang-offload-packager` and `llvm-offload-binary` (the packager's name
in later releases) run ours (Python scripts by those names calling `offload_tool.cli.bundler` /
`.packager`'s `main`, as the installed entry points do, so messages carry the tool's name) or
LLVM's; every
other tool (`FileCheck`, `not`, `clang`, `llvm-ar`, `obj2yaml`, ...) is LLVM's from `--llvm-bin`.
A file passes as lit passes it: every RUN line exits 0. Printed: per file, the first failing line
of each side; then passed/total files and RUN lines for both sides and our ratio to LLVM's (the
lines of a file are all run even after one fails, so a line count says how far each side got)."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOOLS = {"clang-offload-bundler": ("bundler", "clang-offload-bundler"),
         "clang-offload-packager": ("packager", "clang-offload-packager"),
         "llvm-offload-binary": ("packager", "clang-offload-packager")}
TEST_SUFFIXES = (".c", ".cpp", ".ll", ".test", ".s", ".hip", ".cu")


def run_lines(path: Path) -> list[str]:
    """The file's RUN commands, continuation lines (ending in a backslash) joined."""
    lines, cur = [], ""
    for text in path.read_text(errors="replace").splitlines():
        m = re.search(r"\bRUN:(.*)$", text)
        if not m:
            continue
        part = m.group(1).rstrip()
        if part.endswith("\\"):
            cur += part[:-1] + " "
            continue
        lines.append((cur + part).strip())
        cur = ""
    if cur.strip():
        lines.append(cur.strip())
    return lines


def substitute(cmd: str, path: Path, work: Path, llvm_bin: Path) -> str:
    tmp = work / (path.name + ".tmp")
    subs = [("%clangxx", str(llvm_bin / "clang++")), ("%clang_cc1", str(llvm_bin / "clang") + " -cc1"),
            ("%clang", str(llvm_bin / "clang")), ("%itanium_abi_triple", "x86_64-unknown-linux-gnu"),
            ("%errc_ENOENT", "'No such file or directory'"), ("%s", str(path)), ("%S", str(path.parent)),
            ("%t", str(tmp)), ("%T", str(work)), ("%%", "%")]
    pattern = re.compile("|".join(re.escape(k) for k, _ in subs))
    table = dict(subs)
    return pattern.sub(lambda m: table[m.group(0)], cmd)


def wrappers(folder: Path, side: str, llvm_bin: Path) -> None:
    """Scripts named as the tools under test, running ours or LLVM's."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, (module, llvm_name) in TOOLS.items():
        w = folder / name
        if side == "ours":
            # A Python script by the tool's name, as the installed entry point is: the CLI names
            # itself after argv[0] in its messages, as LLVM's tools do.
            w.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(REPO)!r})\n"
                         f"from offload_tool.cli.{module} import main\nsys.exit(main())\n")
        else:
            w.write_text(f"#!/bin/sh\nexec {shlex.quote(str(llvm_bin / llvm_name))} \"$@\"\n")
        w.chmod(0o755)


def run_file(path: Path, side: str, llvm_bin: Path, verbose: bool) -> tuple[int, int, str | None]:
    """(RUN lines passed, RUN lines, the first failing line and its output or None)."""
    lines = run_lines(path)
    passed, first = 0, None
    with tempfile.TemporaryDirectory(prefix="llvm-lit-") as d:
        work = Path(d) / "out"
        work.mkdir()
        wrappers(Path(d) / "bin", side, llvm_bin)
        env = dict(os.environ, PATH=os.pathsep.join([str(Path(d) / "bin"), str(llvm_bin), os.environ["PATH"]]))
        for line in lines:
            cmd = substitute(line, path, work, llvm_bin)
            cp = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=work, env=env, capture_output=True,
                                text=True, errors="replace", timeout=300)
            if cp.returncode == 0:
                passed += 1
            elif first is None:
                first = f"{line}\n      -> exit {cp.returncode}: {(cp.stdout + cp.stderr).strip()[-600:]}"
            if verbose and cp.returncode:
                print(f"  [{side}] FAIL {line}\n    {(cp.stdout + cp.stderr).strip()[-600:]}")
    return passed, len(lines), first


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="a folder of LLVM test files")
    ap.add_argument("--llvm-bin", type=Path, default=Path("/usr/lib/llvm-19/bin"),
                    help="LLVM's tools: the side-by-side run, FileCheck, not, clang (default: %(default)s)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every failing RUN line")
    args = ap.parse_args(argv)
    for tool in ("FileCheck", "not", "clang-offload-bundler", "clang-offload-packager"):
        if not (args.llvm_bin / tool).exists():
            print(f"llvm_lit: {args.llvm_bin / tool} not found (Debian: llvm-19-tools for FileCheck and not, "
                  "clang-tools-19 for the offload tools)", file=sys.stderr)
            return 2
    files = sorted(p for p in args.folder.iterdir() if p.suffix in TEST_SUFFIXES and run_lines(p))
    if not files:
        print(f"llvm_lit: no test file with RUN lines in {args.folder}", file=sys.stderr)
        return 2
    totals = {side: [0, 0, 0] for side in ("ours", "llvm")}  # files passed, lines passed, lines
    for path in files:
        row = []
        for side in ("ours", "llvm"):
            passed, n, first = run_file(path, side, args.llvm_bin, args.verbose)
            t = totals[side]
            t[0] += first is None
            t[1] += passed
            t[2] += n
            row.append((side, passed, n, first))
        print(f"{path.name}: " + ", ".join(f"{s} {'PASS' if f is None else 'FAIL'} ({p}/{n} RUN lines)"
                                           for s, p, n, f in row))
        for s, _p, _n, f in row:
            if f:
                print(f"  {s}: first failing line: {f}")
    n_files = len(files)
    (of, ol, n), (lf, ll, _) = totals["ours"], totals["llvm"]
    print(f"\nfiles:     ours {of}/{n_files}, LLVM {lf}/{n_files}, ratio {of / lf if lf else float('nan'):.2f}")
    print(f"RUN lines: ours {ol}/{n}, LLVM {ll}/{n}, ratio {ol / ll if ll else float('nan'):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
