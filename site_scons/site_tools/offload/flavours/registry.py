"""The flavours the tool knows, registered here and nowhere else: each built-in flavour's module
declares its flavours (`FLAVOURS`), and adding a way of building is one more module named in
`MODULES` (a SConstruct adds one with `env.OffloadAddFlavour`).

    flavour               module        language  compiler     device code of a source                 runtime
    openmp-clang          openmp_clang  openmp    clang        per-arch objects / bitcode, packaged    OpenMP's (-fopenmp)
    cuda-clang            cuda_clang    cuda      clang        per-arch objects, packaged (RDC)        libcudart
    cuda-nvcc             cuda_nvcc     cuda      nvcc         nvcc's steps, a fat binary inside       libcudart
    hip-bundled(-hipcc)   hip           hip       clang|hipcc  per-arch code objects in a .hipfb       libamdhip64
    hip-packaged(-hipcc)  hip           hip       clang|hipcc  per-arch bitcode, packaged (new driver) libamdhip64
    host                  host          host      $CC/$CXX     none                                    -
    clang                 clang         (any)     clang        clang's per-arch graph, packaged        -

A `Language` record names its flavours by compiler (`Language.flavours`; HIP's new-driver fields
name the packaged ones), and the compiler the environment asks for picks one (`flavour_for`).
Archs of a vendor of their own (`amdgcnspirv`) are one arch rule (`settings.archs.add_rule`,
`env.OffloadAddArchs`)."""

from __future__ import annotations

from . import clang, cuda_clang, cuda_nvcc, hip, host, openmp_clang
from .base import FLAVOURS, UNKNOWN, Flavour, flavour_for, of_node, register
from .clang import OffloadAddFlavour
from .host import plain_host_object

#: What the tool's other modules ask of the flavours (they import this module only).
__all__ = ["FLAVOURS", "UNKNOWN", "Flavour", "flavour_for", "of_node", "register", "OffloadAddFlavour",
           "plain_host_object", "MODULES", "SPLIT_DEVICE_LINK", "NVCC_DEVICE_LINK"]

#: The built-in flavours' modules, in the order their flavours are registered.
MODULES = (clang, openmp_clang, cuda_clang, cuda_nvcc, hip, host)

for _module in MODULES:
    for _flavour in _module.FLAVOURS:
        register(_flavour)

#: The flavour whose device link the split AMD device link runs (`clang -fopenmp --offload-arch`,
#: `graph.link`): the program's carrier of the images it links is this flavour's object, and the
#: images are of its language's kind.
SPLIT_DEVICE_LINK: Flavour = openmp_clang.FLAVOUR
#: The flavour whose relocatable device code nvcc's device link links (`graph.nvcc.device_link`):
#: the link's `.dlink.o` is this flavour's object (its runtime, no OpenMP's).
NVCC_DEVICE_LINK: Flavour = cuda_nvcc.FLAVOUR
