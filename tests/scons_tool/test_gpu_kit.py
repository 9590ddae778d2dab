"""The GPU kit (`make gpu-kit`, scripts/gpu_kit.py), built for sm_90 on this machine without a GPU
and run as a compute node would run it: unpacked from its archive into a fresh folder, `run.sh`
under a bare environment (PATH=/usr/bin:/bin, no LLVM or CUDA library folder). Every program
passes on the host, and every file of the kit finds each library it links in the kit's lib/ or
among the system libraries a node has (gpu_kit.SYSTEM_LIBRARIES).

The build folder is the kit's default (build/gpu-kit-sm_90), so a second run rebuilds nothing;
the kit itself goes to a temporary folder."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from conftest import need_tool
from scons_helpers import REPO

sys.path.insert(0, str(REPO / "scripts"))
import gpu_kit  # noqa: E402
from offload_tool.ops.inspector import inspect_file  # noqa: E402
from offload_tool.rules.openmp_runtime import CUDA_ELF_ABI_V2, REFUSES, cuda_elf_abi  # noqa: E402

pytestmark = pytest.mark.slow

GPU = "sm_90"
PROGRAMS = {"zaxpy", "app", "saxpy_cuda", "omp-corpus", "omp-usm", "cuda-nvcc-corpus", "cuda-clang22-corpus",
            "cuda-nvcc-rdc"}
LEFT_OUT = {"vadd_hip", "hip-clang19-corpus", "hip-hipcc-corpus", "hip-clang19-rdc"}
BARE = {"PATH": "/usr/bin:/bin", "LANG": "C"}


def _ldd(path: Path, lib: Path) -> dict[str, str]:
    cp = subprocess.run(["ldd", str(path)], capture_output=True, text=True,
                        env={**BARE, "LD_LIBRARY_PATH": str(lib)})
    assert cp.returncode == 0, f"ldd {path}: {cp.stdout}{cp.stderr}"
    return dict(m.groups() for m in re.finditer(r"^\s*(\S+) => (.*?)(?: \(0x[0-9a-f]+\))?$", cp.stdout, re.M))


def test_gpu_kit_sm_90_runs_on_a_bare_node(tmp_path):
    for tool in ("clang-19", "clang-22", "nvcc", "ldd"):
        need_tool(tool)
    if not gpu_kit.curand_include():
        pytest.skip("cuRAND headers not found (install PyPI's nvidia-curand: scripts/install-deps.sh)")

    dist = tmp_path / "dist"
    cp = subprocess.run([sys.executable, str(REPO / "scripts" / "gpu_kit.py"), "--gpu", GPU, "--jobs", "2",
                         "--dist-dir", str(dist)], capture_output=True, text=True, timeout=1800)
    assert cp.returncode == 0, f"gpu_kit.py failed:\n{cp.stdout[-4000:]}\n{cp.stderr[-4000:]}"
    archive = dist / f"gpu-kit-{GPU}.tar.xz"
    assert archive.stat().st_size < 64 * 1024 * 1024, f"{archive}: {archive.stat().st_size} bytes"

    # The node: a fresh folder holding what the archive unpacks to, nothing else.
    node = tmp_path / "node"
    node.mkdir()
    with tarfile.open(archive) as tar:
        tar.extractall(node, filter="data")
    kit = node / f"gpu-kit-{GPU}"
    manifest = json.loads((kit / "manifest.json").read_text())
    assert {p["name"] for p in manifest["programs"]} == PROGRAMS
    assert {p["name"] for p in manifest["left_out"]} == LEFT_OUT
    assert all(p["why"] for p in manifest["left_out"])
    assert {p.name for p in (kit / "bin").iterdir()} == PROGRAMS
    packed = {Path(lib["file"]).name: lib for lib in manifest["packed"]}
    assert {"libomptarget.so.19.1", "libomp.so.5", "libLLVM.so.19.1", "libcudart.so.13"} <= set(packed)
    assert not [n for n in packed if gpu_kit.system_kind(n)], "a system library was packed"
    assert all(lib["why"] for lib in packed.values())
    assert {p.name for p in (kit / "lib").iterdir()} == set(packed)
    not_packed = {lib["library"] for lib in manifest["not_packed"]}
    assert {"libc.so.6", "libstdc++.so.6", "libcuda.so"} <= not_packed

    run = subprocess.run(["sh", str(kit / "run.sh")], cwd=node, env=BARE, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, f"run.sh:\n{run.stdout}\n{run.stderr}"
    verdicts = {line.split()[1]: line for line in run.stdout.splitlines()
                if line.split(" ", 1)[0] in ("PASS", "FAIL", "SKIP")}
    assert set(verdicts) == PROGRAMS, run.stdout
    for name, line in verdicts.items():
        if name in gpu_kit.NEEDS_GPU:   # stops without a GPU by design: SKIP, with the reason
            assert line.startswith(f"SKIP {name} (no GPU on this node: "), line
        else:
            assert line.startswith(f"PASS {name} (host fallback"), line
    assert re.search(rf"^gpu-kit {GPU}: 8 programs: 7 PASS, 0 FAIL, 1 SKIP", run.stdout, re.M), run.stdout

    # Host-only programs: an OpenMP program whose cubins its runtime (clang 19's) refuses, which
    # is every one here when the CUDA is 13 or newer (its cubins are in NVIDIA's new ELF ABI), runs
    # on the host (above) and is skipped, with the reason, where a GPU is found: a stand-in
    # nvidia-smi makes one (the CUDA programs then find no device and fail, as they should).
    host_only = {}
    for p in manifest["programs"]:
        cubins = [i for i in inspect_file(str(kit / "bin" / p["name"]), hashes=False)
                  if (i.triple or "").startswith("nvptx")]
        refused = p["language"] == "openmp" and all(cuda_elf_abi(i.data) == CUDA_ELF_ABI_V2 for i in cubins)
        assert bool(p.get("host_only")) == refused, p
        if refused:
            host_only[p["name"]] = p["host_only"]
            assert REFUSES in p["host_only"] and "libomptarget.so.19.1" in p["host_only"], p
    smi = tmp_path / "smi"
    smi.mkdir()
    (smi / "nvidia-smi").write_text("#!/bin/sh\ncase \"$1\" in -L) echo 'GPU 0: Stand-in H100 (UUID: GPU-0)';;"
                                    " *) echo 580.00;; esac\n")
    (smi / "nvidia-smi").chmod(0o755)
    gpu_run = subprocess.run(["sh", str(kit / "run.sh")], cwd=node, env={**BARE, "PATH": f"{smi}:{BARE['PATH']}"},
                             capture_output=True, text=True, timeout=600)
    skipped = {line.split()[1]: line for line in gpu_run.stdout.splitlines() if line.startswith("SKIP ")}
    assert set(skipped) == set(host_only), gpu_run.stdout
    for name, why in host_only.items():
        assert skipped[name] == f"SKIP {name} (GPU 0: Stand-in H100 cannot run its device code: {why})", skipped[name]

    # Every program and library of the kit: everything resolves, and each library it links itself
    # is in the kit or a system library (what a system library links is the system's).
    lib = kit / "lib"
    for path in sorted((kit / "bin").iterdir()) + sorted(lib.iterdir()):
        found = _ldd(path, lib)
        assert "not found" not in found.values(), f"{path.relative_to(kit)}: {found}"
        for name in gpu_kit.elf_info(path)["needed"]:
            if not gpu_kit.system_kind(name):
                assert Path(found[name]).parent == lib, \
                    f"{path.relative_to(kit)}: {name} -> {found[name]}, outside the kit"
