"""clang's per-arch graph (`Clang`), which every flavour on clang builds on, and the generic
flavour of a language record that names none (`clang`); `OffloadAddFlavour` makes one more."""

from __future__ import annotations

from ..scons import nodes as _nodes
from ..graph import compile as _compile
from ..graph import host_ir as _host_ir
from ..graph.protocol import Parts
from ..toolchain import discovery as _toolchain
from .base import Flavour, Runtime, register


class Clang(Flavour):
    """clang's per-arch graph: a host compile (OpenMP: host IR + object), one device compile per
    arch, then the device code packaged and embedded beside the host object, or, for a language
    whose device code is bundled (HIP's old driver), bundled into a `.hipfb` the host compile
    includes. With `program_var`, another clang-based driver (hipcc) runs every node.

    A flavour on this graph is a subclass that sets its facts as class fields (the built-in ones'
    modules), or an instance given them (`OffloadAddFlavour`)."""

    split_device_link = True
    #: The variable naming another clang-based driver that runs every node (hipcc), if any.
    program_var: str | None = None

    def __init__(self, name: str | None = None, program_var: str | None = None, program: str = "",
                 runtime: Runtime | None = None, split_device_link: bool | None = None, checks=None):
        if name is not None:
            self.name = name
        if checks is not None:
            self.checks = tuple(checks)
        if program_var:
            self.program_var = program_var
            self.compiler = (program_var, program)
        if runtime is not None:
            self.runtime = runtime
        if split_device_link is not None:
            self.split_device_link = split_device_link

    def compile(self, env, senv, s, fat, lang, archs, kw, pic):
        kw2 = kw
        if self.program_var:
            _toolchain.require(senv, *self.compiler)
            # its path replaces OFFLOAD_CLANG in these nodes (and its identity goes into their varlist)
            kw2 = dict(kw, OFFLOAD_CLANG="$" + self.program_var)
        # OpenMP: the host IR of this object's host compile, read by every device compile.
        ir = _compile.host_ir(env, s, None, kw, pic)[0] if _host_ir.wanted(env, kw, lang) else None
        devices = {a: made[0] for a, made in _compile.device_objects(env, s, archs, None, kw2, ir).items()}
        parts = Parts(devices=devices)
        if lang.bundled_device_code:
            extra = []
            if devices:
                hipfb = env._OffloadHipfb(fat, list(devices.values()), **kw)
                parts.package = hipfb[0]
                extra = [hipfb[0]]
            kw2 = dict(kw2, _OFFLOAD_HOST_ARCHFLAGS=" ".join(f"--offload-arch={a}" for a in archs))
            made = _compile.host_object(env, s, fat, kw2, extra_sources=extra, pic=pic)
            parts.host = made[0]
        else:
            host = _compile.host_object(env, s, None, kw, pic=pic)
            parts.host = host[0]
            if devices:
                # Package and fat object: two targets of one action (run inside SCons).
                both = env._OffloadPackageEmbed(fat, [host[0]] + list(devices.values()), _OFFLOAD_PIC=pic,
                                                _OFFLOAD_LANG=lang.name, **kw)
                parts.package = both[0]
                made = both[1:]
            else:
                made = host
        for n in made:
            _nodes.marks(n).offload_parts = parts
        _nodes.marks(parts.host).offload_flavour = self.name  # (linked alone by a split device link)
        return made

    def split_parts(self, env, s, lang, archs, kw, pic):
        """(host object, {arch: device object}) of source `s` for the split device link."""
        host = _compile.host_object(env, s, None, kw, pic=pic)[0]
        _nodes.marks(host).offload_flavour = self.name
        # OpenMP: the host IR every device compile reads, found once for the source, not per arch
        # (the one the host object is made from, unless that one is position-independent).
        ir = None
        if _host_ir.wanted(env, kw, lang):
            ir = _nodes.sources(host)[0] if not pic else _compile.host_ir(env, s, None, kw)[0]
        return host, {a: made[0] for a, made in _compile.device_objects(env, s, archs, None, kw, ir).items()}


#: The flavour of a language record that names none (`Language.flavours`' default).
CLANG = Clang("clang")

FLAVOURS = (CLANG,)


def OffloadAddFlavour(env, flavour, link_flags=(), library_inputs=(), split_device_link: bool = False,
                      program_var: str | None = None, program: str = "") -> Flavour:
    """One more way of building, named by a language record's `flavours`: a `Flavour` instance,
    or the name of a flavour on clang's per-arch graph with its runtime, e.g.
    `env.OffloadAddFlavour('sycl-clang', link_flags=['-lsycl'], library_inputs=['-lsycl'])`
    (`program_var`/`program`: another clang-based driver that runs every node, as hipcc does)."""
    if isinstance(flavour, Flavour):
        return register(flavour)
    runtime = Runtime(lambda env: list(link_flags), lambda senv: list(library_inputs))
    return register(Clang(str(flavour), program_var, program, runtime, split_device_link))
