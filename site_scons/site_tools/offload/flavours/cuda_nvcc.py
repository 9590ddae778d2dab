"""`cuda-nvcc`: CUDA with nvcc: the steps of its `--dryrun` as nodes per arch (`graph.nvcc.steps`),
else one compile per source with a `-gencode` per arch; objects of relocatable device code are
marked for nvcc's device link (`graph.nvcc.device_link`), whose object is this flavour's too. Its
objects need libcudart."""

from __future__ import annotations

import types

from ..scons import nodes as _nodes
from ..dist.sccache import Policy
from ..graph.common import pic_overrides, stem
from ..graph.nvcc import cleaning as _nvcc_cleaning
from ..graph.nvcc import plan as _nvcc_plan
from ..graph.nvcc import rdc as _nvcc_rdc
from ..graph.nvcc import steps as _nvcc_steps
from ..graph.protocol import Parts
from ..insight import compdb as _compdb
from ..toolchain import discovery as _toolchain
from .base import Flavour, refuse_unknown
from .runtimes import CUDA_RUNTIME


class Nvcc(Flavour):
    name = "cuda-nvcc"
    language = "cuda"
    compiler = ("OFFLOAD_NVCC", "nvcc")
    runtime = CUDA_RUNTIME
    flag_vars = frozenset({"OFFLOAD_HOSTFLAGS", "OFFLOAD_NVCCFLAGS"})
    misplaced_flags = types.MappingProxyType({
        "OFFLOAD_DEVICEFLAGS": "nvcc compiles its device code: nvcc's options go in OFFLOAD_NVCCFLAGS"})
    dist = Policy(stays="nvcc runs here",
                  why="sccache sends its steps to the build servers: cudafe++, the host compiler, and cicc and ptxas "
                      "per arch")

    def compile(self, env, senv, s, fat, lang, archs, kw, pic):
        _toolchain.require(senv, *self.compiler)
        o = dict(kw, _OFFLOAD_NVCC_ARCHS=list(archs), _OFFLOAD_LANG=self.language)
        if pic:
            pic_overrides(senv, o)
        plan = _nvcc_plan.plan_for(senv, o, [fat], [s])
        made = _nvcc_steps.split_object(env, senv, s, fat, o, plan) if plan else env._OffloadNvccCompile(fat, s, **o)
        for n in made if not plan else ():
            _nodes.marks(n).offload_parts = Parts(host=n)
        _nvcc_cleaning.clean_leftovers(env, made, fat.dir, stem(fat) + ".")
        _nvcc_rdc.mark(made, senv, o, plan)
        _compdb.record(_nodes.override(senv, o), made, [s], "OFFLOAD_NVCCDBCOM")
        return made

    def check_archs(self, senv, archs, lang, source) -> None:
        """An arch the `$OFFLOAD_NVCC` in use does not list (`--list-gpu-code`: sm_70 with CUDA
        13) is refused here, naming nvcc, its release and the archs it knows."""
        nvcc = senv.subst("$OFFLOAD_NVCC").strip() if senv.get("OFFLOAD_NVCC") else ""
        if nvcc:
            refuse_unknown(senv, archs, lang, source, nvcc, _toolchain.offload_archs(senv, nvcc, nvcc=True), None)


FLAVOUR = Nvcc()
FLAVOURS = (FLAVOUR,)
