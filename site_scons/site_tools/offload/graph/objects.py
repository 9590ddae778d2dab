"""The object a source becomes: `OffloadObject`, and the sources of a link or library compiled.

    OffloadObject

A source's language (`_languages`; a C/C++ source beside CUDA/HIP sources: `_openmp_sources`)
and the compiler the environment asks for pick its flavour (`_flavours`), which makes the nodes.
The object is named here for every flavour (`<stem>.o`, `.os` position-independent): the
flavour's last builder takes it as its target."""

from __future__ import annotations


from ..scons import nodes as _nodes
from ..scons import signatures as _signatures
from ..dist import sccache as _dist
from ..flavours import registry as _flavours
from ..settings import languages as _languages
from . import openmp_sources as _openmp_sources
from ..settings import checks as _settings_check
from ..settings.archs import archs_for
from .common import canonical, node, nodes, registry, settings, stem, wants
from .compile import object_suffix


def OffloadObject(env, source, target=None, **kw):
    """The workhorse: host compile once + one device compile per arch + package + embed.

    Returns the object to link (one per source). The parts are on the node as
    `node.attributes.offload_parts` (`protocol.Parts`: host, devices {arch: node}, package)."""
    out = []
    for s in nodes(env, source):
        out.extend(offload_object(env, s, target, kw))
    return _nodes.node_list(out)


def offload_object(env, s, target, kw, pic=False):
    """The object of source `s` (made once per object: a second request with other settings is
    an error naming it, see `graph.common.Registry`)."""
    senv = settings(env, kw)
    lang = _languages.language_of(s, senv)
    if lang.offload_kind is None:
        return _flavours.plain_host_object(env, s, target, kw, pic)
    archs = archs_for(lang, canonical(senv))
    fat = node(env, target) if target else s.dir.File(stem(s) + senv.subst(object_suffix({"_OFFLOAD_PIC": pic}, [s])))
    flavour = _checked_flavour(env, senv, s, lang, archs, kw)

    def make():
        made = flavour.compile(env, senv, s, fat, lang, archs, kw, pic)
        flavour.mark(made, lang.name)
        _dist.attach(senv, made, flavour)
        return made

    return registry.get(env, _nodes.abspath(fat), "object",
                        wants(senv, lang.name, flavour.name, lang.driver, ",".join(archs), kw=kw), make)


_CHECKED: set = set()


def _checked_flavour(env, senv, s, lang, archs, kw):
    """The flavour of source `s`, once the settings it is built with are checked (archs for its
    language, archs its compiler knows, flags in the right variables, the compiler's runtime).
    The checks of the settings alone run once per pseudo-builder call and settings (a link of a
    thousand sources asks a thousand times; nothing can change them in between)."""
    flavour = _flavours.flavour_for(senv, lang)
    hip = _openmp_sources.includes_hip_runtime(senv, s) if not archs and lang.may_be_hip_code else None
    _settings_check.archs_of_source(senv, s, lang, archs, hip_code=hip)
    try:
        key = (_settings_check.CALL[0], id(env), _signatures.frozen(dict(kw)), lang.name, tuple(archs), flavour.name)
    except TypeError:
        key = None   # overrides that cannot be compared: checked every time
    if key is None or key not in _CHECKED:
        flavour.check_archs(senv, archs, lang, s)
        _settings_check.check(env, kw, senv)
        flavour.check(senv)
        if key is not None:
            _CHECKED.add(key)
    _dist.say(senv, flavour)
    return flavour


def source_flavour(env, s, kw):
    """(flavour, language, archs) of source `s` with the caller's overrides `kw`."""
    senv = settings(env, kw)
    lang = _languages.language_of(s, senv)
    if lang.offload_kind is None:
        return _flavours.flavour_for(senv, lang), lang, []
    archs = archs_for(lang, canonical(senv))
    return _checked_flavour(env, senv, s, lang, archs, kw), lang, archs


def source_overrides(env, sources, kw) -> dict:
    """{source: the overrides it is compiled with} for the sources of one link or library (a C/C++
    source beside CUDA/HIP sources may be a plain host source, `_openmp_sources`)."""
    beside_gpu = _openmp_sources.gpu_language_sources(env, sources, kw)
    return {n: _openmp_sources.source_kw(env, n, kw, beside_gpu) for n in sources}


def objects(env, sources, kw, pic=False) -> list:
    """Sources compiled with OffloadObject; objects (anything else) passed through."""
    srcs = nodes(env, sources)
    kws = source_overrides(env, srcs, kw)
    out = []
    for n in srcs:
        out.extend(offload_object(env, n, None, kws[n], pic=pic) if _languages.is_offload_source(n) else [n])
    return out


COMMANDS: dict = {}
COMSTRS: dict = {}


def builders() -> dict:
    return {}   # the flavours' builders are their modules' (`graph.compile`, `graph.nvcc`)


PSEUDO_BUILDERS = [OffloadObject]
