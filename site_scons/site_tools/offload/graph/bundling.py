"""The bundler's and inspector's actions as targets.

    OffloadBundle, OffloadUnbundle, OffloadUnbundleArchive, OffloadConvertArchive, OffloadManifest

Each runs one of the library's CLIs as a command (`$OFFLOAD_PYTHON -m offload_tool.cli.<cli>`), so it
signs, caches and parallelises like any other command."""

from __future__ import annotations

import os

import SCons.Errors
import SCons.Util

from ..scons import nodes as _nodes
from ..toolchain import discovery as _toolchain
from ..settings.archs import file_safe
from .common import LIBRARY_VARS, PY, action, builder, canonical, node, nodes, path_word, settings

COMMANDS = {
    "OFFLOAD_BUNDLECOM": f"{PY} -m offload_tool.cli.bundler -type=$_OFFLOAD_BUNDLETYPE $_OFFLOAD_COMPRESSFLAG "
                         '-targets=$_OFFLOAD_BUNDLETARGETS $_OFFLOAD_INPUTFLAGS '
                         "$_OFFLOAD_OUTPUTFLAG $OFFLOAD_BUNDLERFLAGS",
    "OFFLOAD_UNBUNDLECOM": f"{PY} -m offload_tool.cli.bundler -unbundle -type=$_OFFLOAD_BUNDLETYPE "
                           '-targets=$_OFFLOAD_BUNDLETARGETS $_OFFLOAD_INPUTFLAG '
                           '$_OFFLOAD_OUTPUTFLAGS $OFFLOAD_BUNDLERFLAGS',
    "OFFLOAD_UNBUNDLEARCHIVECOM": f"{PY} -m offload_tool.cli.bundler -unbundle -type=a -allow-missing-bundles "
                                  '-targets=$_OFFLOAD_BUNDLETARGETS $_OFFLOAD_INPUTFLAG '
                                  '$_OFFLOAD_OUTPUTFLAGS $OFFLOAD_BUNDLERFLAGS',
    "OFFLOAD_CONVERTCOM": f"{PY} -m offload_tool.cli.tool convert --to=$OFFLOAD_CONVERT_TO "
                          "$_OFFLOAD_LLVMVERSIONFLAG $SOURCE -o $TARGET",
    "OFFLOAD_MANIFESTCOM": f"$_OFFLOAD_VERIFY_CMDS {PY} -m offload_tool.cli.tool inspect --json --hash "
                           "$_OFFLOAD_LLVMVERSIONFLAG $SOURCES > $_OFFLOAD_TARGET_TMP && mv $_OFFLOAD_TARGET_TMP $TARGET",
}

COMSTRS = {
    "OFFLOAD_BUNDLECOMSTR": "BUNDLE ${TARGET}",
    "OFFLOAD_UNBUNDLECOMSTR": "UNBUNDLE ${SOURCE}",
    "OFFLOAD_UNBUNDLEARCHIVECOMSTR": "UNBUNDLE ${SOURCE}",
    "OFFLOAD_CONVERTCOMSTR": "CONVERT ${OFFLOAD_CONVERT_TO} ${TARGET}",
    "OFFLOAD_MANIFESTCOMSTR": "MANIFEST ${TARGET}",
}


# --------------------------------------------------------------------------------------------
# The words of these commands (construction variables: `_variables.CALLABLES`)

def llvm_version_flag(target, source, env, for_signature):
    """`--llvm-version=N` for the library CLIs: how the clang in use encodes OffloadBinary kinds."""
    return f"--llvm-version={_toolchain.library_llvm_version(env)}"


def output_flags(target, source, env, for_signature):
    """`$_OFFLOAD_OUTPUTFLAGS`: one `-output=` word per target, whatever its name (`path_word`)."""
    return [path_word("-output=" + _nodes.path(t)) for t in target]


def input_flag(target, source, env, for_signature):
    """`-input=$SOURCE` as one word whatever the file's name (`path_word`)."""
    return path_word("-input=" + _nodes.path(source[0]))


def target_tmp(target, source, env, for_signature):
    """`${TARGET}.tmp` as one word whatever the file's name (`path_word`)."""
    return path_word(_nodes.path(target[0]) + ".tmp")


def bundle_targets(target, source, env, for_signature):
    """`$_OFFLOAD_BUNDLETARGETS`: `OFFLOAD_TARGETS` (bundle entry IDs) as `-targets=` takes them."""
    return ",".join(str(t) for t in SCons.Util.flatten(env.get("OFFLOAD_TARGETS") or []))


def bundle_type(target, source, env, for_signature):
    """`$_OFFLOAD_BUNDLETYPE`: `OFFLOAD_BUNDLE_TYPE`, else the `-type` the bundle file's suffix
    means (`o` for the object-like ones: `.hipfb`, `.cubin`, `.co`, none)."""
    t = env.get("OFFLOAD_BUNDLE_TYPE")
    if t:
        return str(t)
    ext = os.path.splitext(str(env.get("_OFFLOAD_BUNDLE_FILE", "x.o")))[1].lstrip(".")
    return {"hipfb": "o", "": "o", "cubin": "o", "co": "o"}.get(ext, ext)


def verify_cmds(target, source, env, for_signature):
    """`offload-tool verify` of the inputs (host/device entry consistency; plus the required
    archs), run before the manifest is written so a failing check leaves no manifest."""
    require = env.get("OFFLOAD_REQUIRE")
    if require is True:
        require = env.get("_OFFLOAD_CANONICAL_ARCHS") or []
    req = ",".join(SCons.Util.flatten(require)) if require else ""
    budgets = max_bytes(env)
    gpus = runs_on(env)
    if not env.get("OFFLOAD_VERIFY", True) and not req and not budgets and not gpus:
        return ""
    c = "$( $OFFLOAD_PYTHON $) -m offload_tool.cli.tool verify -q $SOURCES"
    if req:
        c += " --require=" + req
    if gpus:
        c += " --runs-on=" + gpus
    if budgets:
        c += " --max-bytes=" + budgets
    return c + " &&"


def runs_on(env) -> str:
    """OFFLOAD_RUNS_ON as `verify --runs-on` takes it: 'sm_86,gfx90a:xnack-' or a list of GPUs;
    checked here so a typo fails when the SConscript is read."""
    value = env.get("OFFLOAD_RUNS_ON")
    if not value:
        return ""
    gpus = [g.strip() for g in (value.split(",") if isinstance(value, str) else SCons.Util.flatten(value))]
    from offload_tool.errors import UsageError
    from offload_tool.ops.runs_on import parse_gpu
    try:
        for g in gpus:
            parse_gpu(str(g))
    except UsageError as exc:
        raise SCons.Errors.UserError(f"offload: OFFLOAD_RUNS_ON: {exc}") from None
    return ",".join(str(g) for g in gpus)


def max_bytes(env) -> str:
    """OFFLOAD_MAX_BYTES as `verify --max-bytes` takes it: 'gfx90a:1M,total:10M', or a dict
    {'gfx90a': 1 << 20, 'total': '10M'}; checked here so a typo fails when the SConscript is read."""
    value = env.get("OFFLOAD_MAX_BYTES")
    if not value:
        return ""
    if isinstance(value, dict):
        value = ",".join(f"{k}:{v}" for k, v in value.items())
    from offload_tool.errors import UsageError
    from offload_tool.ops.verify import parse_max_bytes
    try:
        return ",".join(f"{k}:{n}" for k, n in parse_max_bytes(str(value)).items())
    except UsageError as exc:
        raise SCons.Errors.UserError(f"offload: OFFLOAD_MAX_BYTES: {exc}") from None


def _entry_name(stem: str, entry: str, ext: str) -> str:
    return f"{stem}-{file_safe(entry)}{ext}"


def _targets_list(env) -> list[str]:
    targets = [str(t) for t in SCons.Util.flatten([env.get("OFFLOAD_TARGETS") or []])]
    if not targets:
        raise SCons.Errors.UserError("offload: OFFLOAD_TARGETS=[...] (bundle entry IDs) is required")
    return targets


def _unbundle_emitter(default_ext: str):
    """Name one target per OFFLOAD_TARGETS entry: `<stem>-<entry><ext>` beside the input."""
    def emit(target, source, env):
        s = source[0]
        stem, ext = os.path.splitext(s.name)
        return [s.dir.File(_entry_name(stem, e, ext or default_ext)) for e in _targets_list(env)], source
    return emit


def _convert_emitter(target, source, env):
    """Without a target: `<stem>-<direction>.a` beside the input (`libfoo.a` -> `libfoo-new.a`)."""
    if env.get("_OFFLOAD_CONVERT_NAMED"):
        return target, source
    s = source[0]
    stem, ext = os.path.splitext(s.name)
    return [s.dir.File(f"{stem}-{env.subst('$OFFLOAD_CONVERT_TO')}{ext or '.a'}")], source


def builders() -> dict:
    return {
        "_OffloadBundle": builder(action=action("OFFLOAD_BUNDLECOM", LIBRARY_VARS), report_kind="bundle"),
        "_OffloadUnbundle": builder(action=action("OFFLOAD_UNBUNDLECOM", LIBRARY_VARS),
                                    emitter=_unbundle_emitter(""), report_kind="unbundle"),
        "_OffloadUnbundleArchive": builder(action=action("OFFLOAD_UNBUNDLEARCHIVECOM", LIBRARY_VARS),
                                           emitter=_unbundle_emitter(".a"), report_kind="unbundle"),
        # (it declares no report kind: the report names its actions after it, lower case)
        "_OffloadConvertArchive": builder(action=action("OFFLOAD_CONVERTCOM", LIBRARY_VARS),
                                          emitter=_convert_emitter),
        "_OffloadManifest": builder(action=action("OFFLOAD_MANIFESTCOM", LIBRARY_VARS), report_kind="manifest"),
    }


def OffloadBundle(env, target, source, **kw):
    """Bundle inputs (one per OFFLOAD_TARGETS entry) with the library's bundler."""
    targets = _targets_list(settings(env, kw))
    srcs = nodes(env, source)
    if len(srcs) != len(targets):
        raise SCons.Errors.UserError(
            f"offload: OffloadBundle: {len(srcs)} inputs for {len(targets)} OFFLOAD_TARGETS (need one each)")
    t = node(env, target)
    return env._OffloadBundle(t, srcs, _OFFLOAD_BUNDLE_FILE=t.name, **kw)


def OffloadUnbundle(env, source, target=None, **kw):
    """Unbundle: one named target per OFFLOAD_TARGETS entry (`<stem>-<entry><ext>`), one action."""
    _targets_list(settings(env, kw))
    out = []
    for s in nodes(env, source):
        out.extend(env._OffloadUnbundle(None, s, _OFFLOAD_BUNDLE_FILE=s.name, **kw))
    return _nodes.node_list(out)


def OffloadUnbundleArchive(env, source, target=None, **kw):
    """Heterogeneous archive -> one device-specific archive per OFFLOAD_TARGETS entry."""
    _targets_list(settings(env, kw))
    out = []
    for s in nodes(env, source):
        out.extend(env._OffloadUnbundleArchive(None, s, **kw))
    return _nodes.node_list(out)


def OffloadConvertArchive(env, source, target=None, to="new", **kw):
    """A heterogeneous static library for the other offload driver (`offload-tool convert`):
    `to='new'` turns old-driver bundle members into `.llvm.offloading` fat objects (what clang's new
    driver links), `to='old'` goes back. Without `target`, `<stem>-<to>.a` beside the input."""
    if to not in ("new", "old"):
        raise SCons.Errors.UserError(f"offload: OffloadConvertArchive: to='{to}' (expected 'new' or 'old')")
    srcs = nodes(env, source)
    if len(srcs) != 1:
        raise SCons.Errors.UserError("offload: OffloadConvertArchive converts one archive per call")
    made = env._OffloadConvertArchive(target, srcs, OFFLOAD_CONVERT_TO=to, _OFFLOAD_CONVERT_NAMED=target is not None,
                                      **kw)
    for n in made:
        _nodes.marks(n).offload_device_code = True
    return made


def OffloadManifest(env, target, source, **kw):
    """JSON of `offload-tool inspect` for built outputs; `offload-tool verify` of each first
    (host/device entry consistency; with OFFLOAD_REQUIRE=[archs] or True, the archs too; with
    OFFLOAD_MAX_BYTES='ARCH:N,total:N', the size budgets of `verify --max-bytes`; with
    OFFLOAD_RUNS_ON='sm_86,gfx90a:xnack-', that those GPUs run them, `verify --runs-on`)."""
    senv = settings(env, kw)
    max_bytes(senv)  # a bad budget is an error now, not when the manifest is built
    runs_on(senv)  # so is a bad GPU
    o = dict(kw)
    if senv.get("OFFLOAD_REQUIRE") is True:
        o["_OFFLOAD_CANONICAL_ARCHS"] = canonical(senv)
    made = env._OffloadManifest(target, nodes(env, source), **o)
    env.NoCache(made)
    return made


PSEUDO_BUILDERS = [OffloadBundle, OffloadUnbundle, OffloadUnbundleArchive, OffloadConvertArchive, OffloadManifest]
