"""The SCons tool's one reader of a clang driver's `-###` listing (`toolchain.jobs`), which the
host-IR device jobs and sccache-dist's toolchain archive both use: arguments unquoted and
unescaped as `llvm::sys::printArg` wrote them, non-job lines left out, and a real driver's
listing read back into the arguments it would run."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO, need_tool

sys.path.insert(0, str(REPO / "site_scons" / "site_tools"))
from offload.toolchain import jobs as _jobs  # noqa: E402
from offload.graph import host_ir as _host_ir  # noqa: E402
from offload.dist import toolchain_archive as _dist_toolchain  # noqa: E402


def test_jobs_are_the_quoted_lines_unescaped():
    text = ('clang version 19.1.7\nTarget: x86_64-pc-linux-gnu\nThread model: posix\nInstalledDir: /usr/bin\n'
            ' "/usr/bin/clang" "-cc1" "-D" "A=\\"x y\\"" "-D" "B=\\$HOME" "-I" "C:\\\\dir" "-o" "a b.o"\n'
            ' "/usr/bin/ld.lld" "-o" "a.out" "a b.o"\n'
            'clang: warning: argument unused during compilation\n')
    assert _jobs.parse_jobs(text) == [
        ["/usr/bin/clang", "-cc1", "-D", 'A="x y"', "-D", "B=$HOME", "-I", "C:\\dir", "-o", "a b.o"],
        ["/usr/bin/ld.lld", "-o", "a.out", "a b.o"],
    ]
    assert _jobs.parse_jobs("") == []


def test_both_users_read_through_it():
    assert not hasattr(_host_ir, "_jobs_of")
    assert _host_ir._jobs is _jobs and _dist_toolchain._jobs is _jobs


def test_a_real_drivers_listing(tmp_path):
    clang = need_tool("clang-19")
    src = tmp_path / "a $b.c"
    src.write_text("int main(void) { return 0; }\n")
    out = subprocess.run([clang, "-###", "-c", "-DQ=\"1 2\"", str(src), "-o", str(tmp_path / "a.o")],
                         capture_output=True, text=True, check=True).stderr
    (job,) = _jobs.parse_jobs(out)
    assert job[1] == "-cc1" and str(src) in job and 'Q="1 2"' in job and str(tmp_path / "a.o") in job
