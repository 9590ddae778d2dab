"""The kernel-feature corpus: small programs whose kernels use what real kernels use, as one SCons
project per toolchain mode.

Features (one check each, printed `<feature> ok|FAIL` by the program):

- OpenMP (`openmp/`): team-local (shared) memory, dynamic shared memory (`ompx_dyn_cgroup_mem`),
  16 KiB `declare target` globals (zero-initialised and initialised), read-only device data,
  templates for two types, `printf`, the math library (`expf`, `sqrt`, `sin`), atomics, a
  `declare target` function defined in another file, a target region in a header included by
  two sources; and a program of its own with `requires unified_shared_memory`.
- CUDA and HIP (`gpu/`, one text: `gpu_api.h` maps the runtime calls; `.cu` is CUDA, the same
  file as `.hip` is HIP): static and dynamic shared memory, `__constant__` memory set with
  `cudaMemcpyToSymbol` / `hipMemcpyToSymbol`, 16 KiB `__device__` arrays (zero-initialised and
  initialised), a kernel template for two types, `printf`, the math library, atomics, a kernel
  template in a header included by two sources; and a relocatable-device-code program whose
  kernel calls a device function and reads a device global of another file.

A program prints `devices: N`, one line per check and `PASS` or `FAIL` (exit 0 or 1). OpenMP
programs run their regions on the host when there is no GPU; CUDA and HIP programs say
`no <vendor> device: kernels not run` and pass.

`write_project(root, family, settings, archs, rdc)` lays out a project: `src/` holds the
sources, `SConstruct` builds `bin/corpus` (and `bin/usm` or `bin/rdc`) with the settings given
(construction variables), for the archs given on the command line (`archs=a,b`).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent

FEATURES = {
    "openmp": ("team_shared", "dynamic_shared", "globals", "templates", "printf", "math", "atomics",
               "cross_file", "header_kernel_a", "header_kernel_b", "usm"),
    "cuda": ("static_shared", "dynamic_shared", "constant", "globals", "templates", "printf", "math",
             "atomics", "header_kernel_a", "header_kernel_b", "cross_file"),
}
FEATURES["hip"] = FEATURES["cuda"]


@dataclasses.dataclass(frozen=True)
class Program:
    name: str                  # bin/<name>
    sources: tuple[str, ...]   # under src/
    features: tuple[str, ...]  # the checks it prints
    rdc: bool = False          # needs relocatable device code (a device function across files)


def programs(family: str, rdc: bool) -> list[Program]:
    """The programs of `family`; the relocatable-device-code one only when the mode builds it."""
    if family == "openmp":
        return [Program("corpus", ("corpus_main.cpp", "corpus_kernels.cpp", "corpus_devfunc.cpp"),
                        FEATURES["openmp"][:-1]),
                Program("usm", ("usm.cpp",), ("usm",))]
    ext = ".cu" if family == "cuda" else ".hip"
    progs = [Program("corpus", (f"corpus_main{ext}", f"corpus_kernels{ext}"), FEATURES[family][:-1])]
    if rdc:
        progs.append(Program("rdc", (f"rdc_main{ext}", f"rdc_dev{ext}"), ("cross_file",), rdc=True))
    return progs


def source_files(family: str) -> dict[str, Path]:
    """Name under src/ -> the corpus file it is a copy of (HIP's `.hip` files are the `.cu` texts)."""
    if family == "openmp":
        return {p.name: p for p in sorted((HERE / "openmp").iterdir()) if p.suffix in (".cpp", ".h")}
    out = {}
    for p in sorted((HERE / "gpu").iterdir()):
        if p.suffix == ".cu":
            out[p.stem + (".cu" if family == "cuda" else ".hip")] = p
        elif p.suffix in (".h", ".cuh"):
            out[p.name] = p
    return out


SCONSTRUCT = """\
import json
import os

settings = json.load(open(File('#corpus_settings.json').abspath))
rdc_settings = settings.pop('rdc_settings', {{}})
penv = {{'PATH': os.environ['PATH']}}
for k in ('SCCACHE_CONF', 'SCCACHE_DIR', 'SCCACHE_IDLE_TIMEOUT', 'SCCACHE_ERROR_LOG'):  # a build cluster's client
    if k in os.environ:
        penv[k] = os.environ[k]
env = Environment(tools=['default', 'offload'], ENV=penv,
                  OFFLOAD_ARCHS=ARGUMENTS.get('archs', {archs!r}).split(','), **settings)
env.Append(CPPPATH=['#src'])
for name, sources, rdc in {programs!r}:
    e = env.Clone(**rdc_settings) if rdc else env
    e.OffloadProgram('bin/' + name, ['src/' + s for s in sources])
"""


def write_project(root: Path, family: str, settings: dict, archs, rdc: bool = False,
                  rdc_settings: dict | None = None) -> list[Program]:
    """Lay out the corpus project of `family` at `root` (see the module doc); its programs."""
    root = Path(root)
    (root / "src").mkdir(parents=True, exist_ok=True)
    for name, path in source_files(family).items():
        shutil.copyfile(path, root / "src" / name)
    progs = programs(family, rdc)
    (root / "corpus_settings.json").write_text(json.dumps({**settings, "rdc_settings": rdc_settings or {}},
                                                          indent=1))
    (root / "SConstruct").write_text(SCONSTRUCT.format(
        archs=",".join(archs), programs=[(p.name, p.sources, p.rdc) for p in progs]))
    return progs


def results(stdout: str) -> dict[str, str]:
    """`feature -> ok|FAIL` from a corpus program's output; `devices` and the verdict too."""
    out = {}
    for line in stdout.splitlines():
        word, _, rest = line.partition(" ")
        if rest in ("ok", "FAIL"):
            out[word] = rest
        elif word == "devices:":
            out["devices"] = rest
        elif line in ("PASS", "FAIL"):
            out["verdict"] = line
    return out
