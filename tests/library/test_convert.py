"""`offload-tool convert`: old-format heterogeneous archives (bundles) to new-driver fat objects
and back. Members are built by clang 19 and clang-offload-bundler-19; the converted archives are
linked by clang 19 (new driver: the program runs on the host fallback and carries every arch; old
driver: `--hip-link` of the back-converted archive) and listed by LLVM's own bundler."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import need_tool, run, run_cli

pytestmark = pytest.mark.slow

DEVLIB = "--rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"
OMP = "int launch(void) { int x = 0;\n#pragma omp target map(tofrom: x)\n  x = 42;\n  return x == 42 ? 0 : 1; }\n"
MAIN = '#include <stdio.h>\nint launch(void);\nint main(void) { printf(launch() ? "bad\\n" : "ok\\n"); return 0; }\n'
HIP = """#include <hip/hip_runtime.h>
__global__ void vadd(float *a) { a[threadIdx.x] += 1; }
int launch() { float *d; if (hipMalloc(&d, 64) != hipSuccess) return 1;
  hipLaunchKernelGGL(vadd, dim3(1), dim3(16), 0, 0, d); return 0; }
"""


def _ok(cp):
    assert cp.returncode == 0, (cp.stdout, cp.stderr)
    return cp


def _archs(path) -> list[str]:
    return sorted(i["arch"] for i in json.loads(_ok(run_cli("tool", "inspect", "--json", str(path))).stdout.decode()))


def test_openmp_bundle_archive_converts_links_and_runs(tmp_path):
    clang = need_tool("clang-19")
    bundler = need_tool("clang-offload-bundler-19")
    (tmp_path / "k.c").write_text(OMP)
    (tmp_path / "m.c").write_text(MAIN)
    d = str(tmp_path)
    _ok(run([clang, "-fopenmp", "--offload-arch=gfx90a", "--offload-host-only", "-c", f"{d}/k.c", "-o", f"{d}/k.host.o"]))
    for arch in ("gfx90a", "gfx1030"):
        _ok(run([clang, "-fopenmp", DEVLIB, f"--offload-arch={arch}", "--offload-device-only", "-c", f"{d}/k.c",
                 "-o", f"{d}/k.{arch}.bc"]))
    # The old driver's fat object: host object + one bundle section per device entry.
    _ok(run([bundler, "-type=o", "-targets=host-x86_64-unknown-linux-gnu,openmp-amdgcn-amd-amdhsa--gfx90a,"
             "openmp-amdgcn-amd-amdhsa--gfx1030", f"-input={d}/k.host.o", f"-input={d}/k.gfx90a.bc",
             f"-input={d}/k.gfx1030.bc", f"-output={d}/k.o"]))
    _ok(run(["ar", "rcs", f"{d}/libold.a", f"{d}/k.o"]))
    cp = _ok(run_cli("tool", "convert", "--to=new", f"{d}/libold.a", "-o", f"{d}/libnew.a"))
    assert cp.stdout.decode() == "k.o: openmp amdgcn-amd-amdhsa gfx90a, openmp amdgcn-amd-amdhsa gfx1030\n"
    assert _archs(tmp_path / "libnew.a") == ["gfx1030", "gfx90a"]
    _ok(run([clang, "-c", f"{d}/m.c", "-o", f"{d}/m.o"]))
    # LLVM 19's wrapper takes an archive member's device code when the device link needs it, or
    # with --whole-archive (the host-only reference from main does not count).
    _ok(run([clang, "-fopenmp", DEVLIB, "--offload-arch=gfx90a,gfx1030", "-o", f"{d}/prog", f"{d}/m.o",
             "-Wl,--whole-archive", f"{d}/libnew.a", "-Wl,--no-whole-archive"]))
    assert _archs(tmp_path / "prog") == ["gfx1030", "gfx90a"]
    out = subprocess.run([f"{d}/prog"], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, LD_LIBRARY_PATH="/usr/lib/llvm-19/lib"))
    assert (out.returncode, out.stdout) == (0, "ok\n")
    # And back: LLVM's bundler reads the same entries, payloads byte for byte.
    _ok(run_cli("tool", "convert", "--to=old", f"{d}/libnew.a", "-o", f"{d}/libback.a"))
    _ok(run([bundler, "-unbundle", "-type=a", "-targets=openmp-amdgcn-amd-amdhsa--gfx90a", f"-input={d}/libback.a",
             f"-output={d}/lib90a.a"]))
    _ok(run(["ar", "x", "--output", d, f"{d}/lib90a.a"]))
    members = [p for p in tmp_path.iterdir() if p.name.startswith("k-openmp")]
    assert len(members) == 1 and members[0].read_bytes() == (tmp_path / "k.gfx90a.bc").read_bytes()


def test_hip_rdc_archive_keeps_target_ids_and_round_trips(tmp_path):
    clang = need_tool("clang-19")
    need_tool("clang-offload-bundler-19")
    (tmp_path / "k.hip").write_text(HIP)
    (tmp_path / "m.cpp").write_text(MAIN)
    d = str(tmp_path)
    env = dict(os.environ, HIP_PLATFORM="amd")
    cp = subprocess.run([clang, "-x", "hip", "-fgpu-rdc", "--rocm-path=/usr", DEVLIB, "--offload-arch=gfx90a:xnack+",
                         "--offload-arch=gfx1030", "-c", f"{d}/k.hip", "-o", f"{d}/k.o"], capture_output=True, env=env)
    _ok(cp)
    _ok(run(["ar", "rcs", f"{d}/libold.a", f"{d}/k.o"]))
    cp = _ok(run_cli("tool", "convert", "--to=new", f"{d}/libold.a", "-o", f"{d}/libnew.a"))
    assert cp.stdout.decode() == "k.o: hip amdgcn-amd-amdhsa gfx1030, hip amdgcn-amd-amdhsa gfx90a:xnack+\n"
    assert _archs(tmp_path / "libnew.a") == ["gfx1030", "gfx90a:xnack+"]
    _ok(run_cli("tool", "convert", "--to=old", f"{d}/libnew.a", "-o", f"{d}/libback.a"))
    _ok(run([clang, "-x", "c++", "-c", f"{d}/m.cpp", "-o", f"{d}/m.o"]))
    # The old driver links the back-converted archive (it unbundles -type=a itself).
    _ok(subprocess.run([need_tool("clang++-19"), "-fgpu-rdc", "--hip-link", "--rocm-path=/usr", DEVLIB,
                        "--offload-arch=gfx90a:xnack+", "--offload-arch=gfx1030", "-o", f"{d}/prog", f"{d}/m.o",
                        f"{d}/libback.a", "-lamdhip64"], capture_output=True, env=env))
    out = subprocess.run([f"{d}/prog"], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0 and out.stdout in ("ok\n", "bad\n")


def test_bad_input_is_one_line(tmp_path):
    (tmp_path / "x.a").write_bytes(b"not an archive")
    cp = run_cli("tool", "convert", "--to=new", str(tmp_path / "x.a"), "-o", str(tmp_path / "y.a"))
    assert cp.returncode == 1 and cp.stderr.count(b"\n") == 1 and "not a static archive" in cp.stderr.decode()
    assert not (tmp_path / "y.a").exists()
    cp = run_cli("tool", "convert", "--to=sideways", str(tmp_path / "x.a"), "-o", str(tmp_path / "y.a"))
    assert cp.returncode == 1 and "expected 'new' or 'old'" in cp.stderr.decode()


def test_scons_convert_archive_builder(tmp_path):
    """`env.OffloadConvertArchive`: one CONVERT action per archive, named `<stem>-<to>.a` unless a
    target is given; up to date on the second run; both directions keep every arch."""
    from scons_helpers import Project, counts

    clang = need_tool("clang-19")
    bundler = need_tool("clang-offload-bundler-19")
    proj = Project(tmp_path)
    proj.write("k.c", OMP)
    d = str(tmp_path)
    _ok(run([clang, "-fopenmp", "--offload-arch=gfx90a", "--offload-host-only", "-c", f"{d}/k.c", "-o", f"{d}/k.host.o"]))
    _ok(run([clang, "-fopenmp", DEVLIB, "--offload-arch=gfx90a", "--offload-device-only", "-c", f"{d}/k.c",
             "-o", f"{d}/k.gfx90a.bc"]))
    _ok(run([bundler, "-type=o", "-targets=host-x86_64-unknown-linux-gnu,openmp-amdgcn-amd-amdhsa--gfx90a",
             f"-input={d}/k.host.o", f"-input={d}/k.gfx90a.bc", f"-output={d}/k.o"]))
    _ok(run(["ar", "rcs", f"{d}/libold.a", f"{d}/k.o"]))
    proj.write("SConstruct", "env = Environment(tools=['default', 'offload'], OFFLOAD_CLANG='clang-19')\n"
                             "new = env.OffloadConvertArchive('libold.a')\n"
                             "env.OffloadConvertArchive(new, target='libback.a', to='old')\n")
    first = proj.scons()
    assert counts(first)["CONVERT"] == 2
    assert _archs(tmp_path / "libold-new.a") == ["gfx90a"] == _archs(tmp_path / "libback.a")
    assert proj.up_to_date()
    proj.write("SConstruct", "env = Environment(tools=['default', 'offload'], OFFLOAD_CLANG='clang-19')\n"
                             "env.OffloadConvertArchive('libold.a', to='sideways')\n")
    bad = proj.scons(check=False)
    assert bad.returncode != 0 and "to='sideways'" in bad.stderr


def _archives_both_ways(tmp_path):
    """libold.a (one object bundle built by our bundler from a clang-19 host object) and the same
    library converted with an explicit --to=new (libnew.a)."""
    from offload_tool.ops import bundler_api
    clang = need_tool("clang-19")
    d = str(tmp_path)
    (tmp_path / "k.c").write_text("int k(void) { return 1; }\n")
    (tmp_path / "plain.c").write_text("int plain(void) { return 2; }\n")
    _ok(run([clang, "-c", f"{d}/k.c", "-o", f"{d}/k.host.o"]))
    _ok(run([clang, "-c", f"{d}/plain.c", "-o", f"{d}/plain.o"]))
    (tmp_path / "dev.bin").write_bytes(b"\x7fELF device code")
    bundler_api.bundle("o", ["host-x86_64-unknown-linux-gnu", "hip-amdgcn-amd-amdhsa--gfx90a:xnack+"],
                       [f"{d}/k.host.o", f"{d}/dev.bin"], f"{d}/k.o")
    _ok(run(["ar", "rcs", f"{d}/libold.a", f"{d}/plain.o", f"{d}/k.o"]))
    _ok(run_cli("tool", "convert", "--to=new", f"{d}/libold.a", "-o", f"{d}/libnew.a"))
    return d


@pytest.mark.parametrize("source, expected_to, explicit", [("libold.a", "new", "libnew.a"),
                                                           ("libnew.a", "old", None)])
def test_direction_is_inferred_from_the_input(tmp_path, source, expected_to, explicit):
    d = _archives_both_ways(tmp_path)
    cp = _ok(run_cli("tool", "convert", f"{d}/{source}", "-o", f"{d}/inferred.a"))
    err = cp.stderr.decode()
    assert err.count("\n") == 1 and err.startswith("offload-tool convert: ") and f"(--to={expected_to})" in err
    assert "k.o" in err  # names the member that decided it
    if explicit is None:  # the same as asking for it
        _ok(run_cli("tool", "convert", f"--to={expected_to}", f"{d}/{source}", "-o", f"{d}/explicit.a"))
        explicit = "explicit.a"
    assert (tmp_path / "inferred.a").read_bytes() == (tmp_path / explicit).read_bytes()
    # An explicit --to says nothing about the direction.
    cp = _ok(run_cli("tool", "convert", f"--to={expected_to}", f"{d}/{source}", "-o", f"{d}/again.a"))
    assert cp.stderr == b""


def test_direction_not_inferable_asks_for_to(tmp_path):
    d = _archives_both_ways(tmp_path)
    _ok(run(["ar", "x", "--output", d, f"{d}/libnew.a", "k.o"]))
    os.rename(f"{d}/k.o", f"{d}/knew.o")
    _ok(run(["ar", "x", "--output", d, f"{d}/libold.a", "k.o"]))
    _ok(run(["ar", "rcs", f"{d}/libmixed.a", f"{d}/k.o", f"{d}/knew.o"]))
    _ok(run(["ar", "rcs", f"{d}/libplain.a", f"{d}/plain.o"]))
    for lib, why in (("libmixed.a", "holds both"), ("libplain.a", "holds no device code")):
        cp = run_cli("tool", "convert", f"{d}/{lib}", "-o", f"{d}/out.a")
        err = cp.stderr.decode()
        assert cp.returncode == 1 and err.count("\n") == 1 and why in err and "--to=new or --to=old" in err, err
        assert not (tmp_path / "out.a").exists()
