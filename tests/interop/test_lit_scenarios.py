"""LLVM's own driver tests for the bundler and packager (clang-offload-bundler*.c, offload-packager.c
in clang/test/Driver), as a table of command lines run against both LLVM 19's tools and ours.

Each row runs the same arguments through `clang-offload-bundler-19` (or `clang-offload-packager-19`)
and through our CLI started by a link named like LLVM's program, then compares exit status,
stdout, stderr (with each program's own path replaced by PROG and LLVM's random temporary names
masked) and every output file byte for byte.  Where LLVM 19 does something a drop-in deliberately
does not (it writes an empty output under `-###`), the row states the expected answer itself."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from conftest import REPO, need_tool, run

TRIPLE = "x86_64-unknown-linux-gnu"
HOST = f"host-{TRIPLE}"

# (name, arguments, output files, expected difference)
BUNDLER_ROWS = [
    ("o-bundle-host-first", ["-type=o", f"-targets={HOST},openmp-powerpc64le-ibm-linux-gnu,hip-amdgcn-amd-amdhsa--gfx906",
                             "-input=host.o", "-input=dev1", "-input=dev2", "-output=out.o"], ["out.o"], None),
    ("o-bundle-host-last", ["-type=o", f"-targets=hip-amdgcn-amd-amdhsa--gfx900,openmp-x86_64-pc-linux-gnu,{HOST}",
                            "-input=dev1", "-input=dev2", "-input=host.o", "-output=out.o"], ["out.o"], None),
    ("o-bundle-gcc-host", ["-type=o", f"-targets={HOST},hip-amdgcn-amd-amdhsa--gfx906", "-input=gcc.o", "-input=dev1",
                           "-output=out.o"], ["out.o"], None),
    ("o-list", ["-type=o", "-list", "-input=fat.o"], [], None),
    ("o-unbundle-devices", ["-type=o", "-unbundle", "-targets=openmp-powerpc64le-ibm-linux-gnu,hip-amdgcn-amd-amdhsa--gfx906",
                            "-input=fat.o", "-output=u1", "-output=u2"], ["u1", "u2"], None),
    ("o-dry-run-bundle", ["-###", "-type=o", f"-targets={HOST},openmp-powerpc64le-ibm-linux-gnu", "-input=host.o",
                          "-input=dev1", "-output=dry.o"], ["dry.o"], "no-output"),
    ("o-dry-run-unbundle", ["-###", "-type=o", "-unbundle", f"-targets={HOST}", "-input=fat.o", "-output=dry.o"],
     ["dry.o"], "no-output"),
    ("bc-bundle", ["-type=bc", f"-targets={HOST},openmp-powerpc64le-ibm-linux-gnu", "-input=dev1", "-input=dev2",
                   "-output=out.bc"], ["out.bc"], None),
    ("i-bundle", ["-type=i", f"-targets={HOST},openmp-powerpc64le-ibm-linux-gnu", "-input=dev1", "-input=dev2",
                  "-output=out.i"], ["out.i"], None),
    ("no-output", ["-type=o", f"-targets={HOST}", "-input=host.o"], [], None),
    ("missing-input", ["-type=o", f"-targets={HOST}", "-input=absent.o", "-output=x.o"], ["x.o"], None),
    ("help", ["--help"], [], None),
    ("help-list", ["--help-list"], [], None),
    ("help-list-hidden", ["--help-list-hidden"], [], "print-options"),
    ("help-hidden", ["--help-hidden"], [], "print-options"),
]

# LLVM's `cl` lists two hidden debugging options this tool does not have.
_PRINT_OPTIONS = re.compile(rb"  --print-(all-)?options +- [^\n]*\n")
_TEMP = re.compile(rb"clang-offload-bundler-[0-9a-f]{6}\.tmp")


def _inputs(d: Path) -> None:
    clang = need_tool("clang-19")
    (d / "a.c").write_text("int f(void) { return 13; }\nint g = 7;\n")
    assert run([clang, "-c", d / "a.c", "-o", d / "host.o"]).returncode == 0
    if need_tool("gcc"):
        assert run(["gcc", "-c", d / "a.c", "-o", d / "gcc.o"]).returncode == 0
    (d / "dev1").write_bytes(b"Content of device file 1\n")
    (d / "dev2").write_bytes(b"Content of device file 2\n")
    llvm = need_tool("clang-offload-bundler-19")
    assert run([llvm, "-type=o", f"-targets={HOST},openmp-powerpc64le-ibm-linux-gnu,hip-amdgcn-amd-amdhsa--gfx906",
                "-input=host.o", "-input=dev1", "-input=dev2", "-output=fat.o"], cwd=d).returncode == 0


def _launcher(d: Path, name: str, module: str) -> Path:
    """An executable named like LLVM's program that starts our CLI (what a symlink to the console
    script does), so argv[0] is that name."""
    path = d / name
    path.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(REPO)!r})\n"
                    f"from offload_tool.cli.{module} import main\nsys.exit(main())\n")
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def tools(tmp_path_factory):
    llvm = os.path.realpath(need_tool("clang-offload-bundler-19"))
    ours = _launcher(tmp_path_factory.mktemp("bin"), "clang-offload-bundler", "bundler")
    # LLVM finds llvm-objcopy beside itself; ours, beside the launcher, finds none and takes PATH's.
    env = dict(os.environ, PATH=os.path.dirname(llvm) + os.pathsep + os.environ.get("PATH", ""))
    return llvm, str(ours), env


def _run_in(d: Path, prog: str, args, env):
    r = run([prog, *args], cwd=d, env=env)
    norm = lambda b: _TEMP.sub(b"TMP", b).replace(prog.encode(), b"PROG").replace(
        os.path.basename(prog).encode(), b"PROG")
    return r.returncode, norm(r.stdout), norm(r.stderr)


@pytest.mark.parametrize("name,args,outputs,difference", BUNDLER_ROWS, ids=[r[0] for r in BUNDLER_ROWS])
def test_bundler_scenario(tools, tmp_path, name, args, outputs, difference):
    llvm, ours, env = tools
    results = {}
    for who, prog in (("llvm", llvm), ("ours", ours)):
        d = tmp_path / who
        d.mkdir()
        _inputs(d)
        code, out, err = _run_in(d, prog, args, env)
        files = {o: (d / o).read_bytes() if (d / o).exists() else None for o in outputs}
        results[who] = (code, out, err, files)
    (lcode, lout, lerr, lfiles), (code, out, err, files) = results["llvm"], results["ours"]
    assert code == lcode, (name, err, lerr)
    if difference == "print-options":
        lout = _PRINT_OPTIONS.sub(b"", lout)
    assert out == lout
    if lcode == 0:
        assert err == lerr
    else:  # one line, `PROG: error: ...` as LLVM's reportError prints it, for errors LLVM reports so
        assert err.count(b"\n") == 1 and err.startswith(b"PROG: error: ")
    if difference == "no-output":
        # -### is a dry run: LLVM 19 still leaves an empty (or host-less) output; ours writes nothing.
        assert all(v is None for v in files.values())
        assert b'"/' in err and b"llvm-objcopy" in err
    else:
        assert files == lfiles


PACKAGER_ROWS = [
    ("two-images", ["-o", "out.bin", "--image=file=dev1,triple=amdgcn-amd-amdhsa,arch=gfx908,kind=openmp",
                    "--image=file=dev2,triple=nvptx64-nvidia-cuda,arch=sm_70,kind=openmp"]),
    ("extra-keys", ["-o", "out.bin", "--image=file=dev1,triple=amdgcn-amd-amdhsa,arch=gfx90a:xnack+,kind=hip,feature=+x"]),
]


@pytest.mark.parametrize("name,args", PACKAGER_ROWS, ids=[r[0] for r in PACKAGER_ROWS])
def test_packager_scenario(tmp_path, name, args):
    llvm = os.path.realpath(need_tool("clang-offload-packager-19"))
    ours = str(_launcher(tmp_path, "clang-offload-packager", "packager"))
    outs = {}
    for who, prog in (("llvm", llvm), ("ours", ours)):
        d = tmp_path / who
        d.mkdir()
        (d / "dev1").write_bytes(b"\x7fELF device image 1")
        (d / "dev2").write_bytes(b"\x7fELF device image 2")
        r = run([prog, *args], cwd=d)
        assert r.returncode == 0, r.stderr
        outs[who] = (d / "out.bin").read_bytes()
    assert outs["ours"] == outs["llvm"]


# How LLVM 19 names itself in a message: the option parser's mistakes are `<base name>: <message>`
# (no `error:`), every other error `<argv[0]>: error: <message>` with argv[0] as typed (the bare
# name when found on PATH, the path when run by path).  Each row: program, arguments; LLVM prints
# exactly one line for each.
PREFIX_ROWS = [
    ("bundler", "bad-uint", ["-type=o", "-bundle-align=x"]),
    ("bundler", "bad-bool", ["-type=o", "-list=x"]),
    ("bundler", "missing-type", [f"-targets={HOST}", "-input=a", "-output=b"]),
    ("bundler", "missing-value", ["-type=o", "-input"]),
    ("bundler", "missing-input", ["-type=o", f"-targets={HOST}", "-input=absent.o", "-output=x.o"]),
    ("bundler", "bad-type", ["-type=zz", f"-targets={HOST}", "-input=present", "-output=x.o"]),
    ("bundler", "list-unbundle", ["-type=o", "-list", "-unbundle", "-input=a"]),
    ("packager", "bad-bool", ["--archive=zz"]),
    ("packager", "missing-value", ["-o"]),
    ("packager", "missing-input", ["absent.bin", "--image=kind=openmp"]),
    ("packager", "exclusive", ["-o", "x.bin", "present"]),
    ("packager", "image-keys", ["-o", "x.bin", "--image=triple=x"]),
]


@pytest.mark.parametrize("how", ["by-name", "by-path"])
@pytest.mark.parametrize("module,name,args", PREFIX_ROWS, ids=[f"{r[0]}-{r[1]}" for r in PREFIX_ROWS])
def test_message_prefix_as_llvm(tmp_path, how, module, name, args):
    program = {"bundler": "clang-offload-bundler", "packager": "clang-offload-packager"}[module]
    llvm_dir = os.path.dirname(os.path.realpath(need_tool(f"{program}-19")))
    assert os.path.exists(os.path.join(llvm_dir, program))
    ours_dir = tmp_path / "bin"
    ours_dir.mkdir()
    _launcher(ours_dir, program, module)
    errs = {}
    for who, bindir in (("llvm", llvm_dir), ("ours", str(ours_dir))):
        d = tmp_path / who
        d.mkdir()
        (d / "present").write_bytes(b"x")
        # By path, the folder is not on PATH: a console script cannot tell the full path typed
        # from a PATH search finding that same file (`command_line.invoked_as`).
        env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", "")) if how == "by-name" else None
        prog = program if how == "by-name" else os.path.join(bindir, program)
        r = run([prog, *args], cwd=d, env=env)
        assert r.returncode == 1, r.stderr
        errs[who] = r.stderr.decode().replace(bindir + "/", "DIR/")
    assert errs["ours"] == errs["llvm"]
    assert errs["ours"].count("\n") == 1
