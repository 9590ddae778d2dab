"""What every builder module shares: actions, the hidden-builder factory, node helpers, and the
registry of nodes already made.

Public builders are pseudo-builders (`env.AddMethod`) that fan out into hidden real builders
(`_Offload*` in `env['BUILDERS']`) with per-call overrides, so each (source, arch) is its own node:
its own `-j` task, its own incremental decision and its own cache entry. Each builder module
(`graph.compile`, `graph.link`, `graph.bundling`, ...) declares its own commands (`COMMANDS`), messages (`COMSTRS`),
hidden builders (`builders()`) and public pseudo-builders (`PSEUDO_BUILDERS`): adding a builder
touches that one module."""

from __future__ import annotations

import os

import SCons.Action
import SCons.Builder
import SCons.Errors
import SCons.Util

import offload_tool

from ..settings import archs as _archs
from . import consume as _consume
from .protocol import BUILDER_PREFIX
from ..scons import actions as _actions
from ..scons import nodes as _nodes
from ..scons import signatures as _signatures
from ..toolchain import discovery as _toolchain

LAUNCH = "$( $_OFFLOAD_LAUNCH $)"
PY = "$( $OFFLOAD_PYTHON $)"
COMPILER_VARS = ["_OFFLOAD_CLANG_ID"]
LIBRARY_VARS = ["_OFFLOAD_LIBRARY_ID"]


def action(com: str, varlist: list[str]) -> SCons.Action.Action:
    """`$<com>` shown as `$<com>STR`; `varlist` names what else its output depends on. Signed in
    time linear in the command's length (`_signatures.LazyCommandAction`): a link lists every
    object."""
    return _signatures.LazyCommandAction(com, {"cmdstr": "$" + com + "STR", "varlist": varlist})


#: The programs the tool's actions run are tracked by identity in `varlist` (compiler `--version`,
#: offload_tool version), so SCons need not look each one up on the PATH and hash it per node (a
#: fifth of a null build's time at 100 sources x 4 archs).
NO_COMMAND_DEPENDENCIES = {"IMPLICIT_COMMAND_DEPENDENCIES": 0}


def reported(b: SCons.Builder.Builder, report_kind: str = "", final_binary: bool = False) -> SCons.Builder.Builder:
    """`b`, saying what its actions are in the build report (`_report` reads it from the node's
    builder): their kind (`host-compile`, `device-link`, ...; a builder that says none is reported
    under its own name, lower case, as a user's builder is), and whether its targets are final
    binaries, whose device bytes per arch the report measures. Said where the builder is made, so
    a new builder is one module."""
    b.offload_report_kind = report_kind
    b.offload_final_binary = final_binary
    return b


def builder(report_kind: str = "", final_binary: bool = False, **kw) -> SCons.Builder.Builder:
    """A hidden builder (`NO_COMMAND_DEPENDENCIES` applied to every call) whose targets the steps
    that read them judge by timestamp, then content (`scons.nodes.judged_by_timestamp`);
    `report_kind` and `final_binary`: what the build report makes of its actions (`reported`)."""
    return reported(_nodes.judged_by_timestamp(SCons.Builder.Builder(**NO_COMMAND_DEPENDENCIES, **kw)),
                    report_kind, final_binary)


def group_builder(report_kind: str = "", **kw) -> SCons.Builder.Builder:
    """A hidden builder called only on a `group_env`, which carries `NO_COMMAND_DEPENDENCIES`
    itself: no per-call overrides, so its nodes keep the group's environment (and share one
    signature text, `_signatures`); its targets are judged as `builder`'s are."""
    return reported(_nodes.judged_by_timestamp(SCons.Builder.Builder(**kw)), report_kind)


#: The tool's top folder: the scripts its commands run by path (`_package_embed.py`,
#: `_device_link.py`) and the header its compiles include (`offload_ids.h`) live there.
TOOL_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE_EMBED = os.path.join(TOOL_DIR, "_package_embed.py")


def _run_package_embed(argv):
    from .. import _package_embed
    return _package_embed.main(argv)


def package_embed_builder(com: str, **kw) -> SCons.Builder.Builder:
    """A builder of `$<com>`, a `_package_embed.py` command (package + embed, run in-process);
    `kw` are the builder's naming (suffix, emitter)."""
    # The device objects it packages are checked first (`_consume.with_device_check`).
    return builder(report_kind="package+embed", action=_consume.with_device_check(
        _actions.InProcessAction("$" + com, PACKAGE_EMBED, _run_package_embed, cmdstr="$" + com + "STR",
                                 varlist=LIBRARY_VARS + ["_OFFLOAD_PACKAGERFLAGS"])), **kw)


# --------------------------------------------------------------------------------------------
# The library steps' command lines (`$OFFLOAD_PYTHON -m offload_tool.cli.<cli>`, package + embed):
# the words the builder modules share, as construction variables (`_variables.CALLABLES`)

# Bump when the meaning of the tool's own actions changes (part of every library-backed signature).
TOOL_SCHEMA = "offload-scons/2"


def library_id(target, source, env, for_signature):
    """`$_OFFLOAD_LIBRARY_ID` (in `LIBRARY_VARS`): the library's version and the tool's schema,
    so a new library or a changed action rebuilds what the library made."""
    return f"offload_tool {offload_tool.__version__} {TOOL_SCHEMA}"


def packager_flags(target, source, env, for_signature):
    """`$_OFFLOAD_PACKAGERFLAGS`: the packager's `--llvm-version=22` when the clang in use
    encodes OffloadBinary kinds as LLVM 20 and later do, else nothing (LLVM 19's is the default)."""
    return "--llvm-version=22" if _toolchain.library_llvm_version(env) == 22 else ""


def path_word(text: str):
    """One word of a command line that holds a file name: quoted for the shell as SCons quotes a
    node (`$SOURCE`), so blanks, quotes and `$` in a name reach the program as they are."""
    return _actions.word(text, True)


def images(source) -> list[str]:
    """One `--image=file=...,triple=...,arch=...,kind=...` per device object, each one word of the
    command line whatever its file name holds (`path_word`)."""
    out = []
    for s in source:
        info = getattr(_nodes.marks(s), "offload_image", None)
        if info is None:
            raise SCons.Errors.UserError(f"offload: '{s}' is not an OffloadDeviceObject (no arch/kind known)")
        out.append(path_word(f"--image=file={_nodes.path(s)},triple={info['triple']},arch={info['arch']},"
                             f"kind={info['kind']}"))
    return out


def image_flags(target, source, env, for_signature):
    """`$_OFFLOAD_IMAGES`: the `--image=` of every source (`images`)."""
    return images(source)


def input_flags(target, source, env, for_signature):
    """`$_OFFLOAD_INPUTFLAGS`: one `-input=` word per source, whatever its name (`path_word`)."""
    return [path_word("-input=" + _nodes.path(s)) for s in source]


def output_flag(target, source, env, for_signature):
    """`-output=$TARGET` as one word whatever the file's name (`path_word`)."""
    return path_word("-output=" + _nodes.path(target[0]))


def compress_flag(target, source, env, for_signature):
    """`$_OFFLOAD_COMPRESSFLAG`: the bundler's `-compress` when `OFFLOAD_COMPRESS` asks."""
    return "-compress" if env.get("OFFLOAD_COMPRESS") else ""


# --------------------------------------------------------------------------------------------
# Node helpers

def node(env, x):
    if _nodes.is_node(x):
        return x
    return env.File(x)


def nodes(env, xs) -> list:
    return [node(env, x) for x in SCons.Util.flatten([xs]) if x is not None]


def settings(env, kw):
    """The environment the pseudo-builder reads settings from (caller's overrides applied)."""
    return _nodes.override(env, kw) if kw else env


def cleaning() -> bool:
    """Whether this run cleans (`scons -c`): the cleaners of files no node names any more (an arch
    no longer configured, the other way of a device link) add them only then."""
    import SCons.Script
    return bool(SCons.Script.GetOption("clean"))


def names_when_cleaning(folder) -> list[str]:
    """The file names in `folder` when this run cleans, else none."""
    if not cleaning():
        return []
    try:
        return os.listdir(_nodes.abspath(folder))
    except OSError:
        return []


#: Where a compiler reads a node, how `$SOURCE` names it, the headers SCons found in it.
read_path, command_path, scanned_files = _nodes.read_path, _nodes.command_path, _nodes.scanned_files


def pic_overrides(senv, o: dict) -> None:
    """Add to overrides `o` what makes a compile position-independent (a shared library's)."""
    o["_OFFLOAD_PIC"] = 1
    o["OFFLOAD_HOSTFLAGS"] = SCons.Util.CLVar(senv.get("OFFLOAD_HOSTFLAGS", [])) + ["-fPIC"]


_GROUP_ENVS: dict[tuple, object] = {}


def group_env(env, overrides: dict):
    """`env.Override(overrides)`, one environment for every call with equal overrides on `env`:
    the compiles of one language and arch share it (and with it their signature text, see
    `_signatures`) instead of each node making its own. Overrides that cannot be compared (an
    arbitrary object a caller passed) get an environment of their own, as before."""
    overrides = dict(overrides, **NO_COMMAND_DEPENDENCIES)
    try:
        key = (id(env), _signatures.frozen(overrides))
    except TypeError:
        return _nodes.override(env, overrides)
    made = _GROUP_ENVS.get(key)
    if made is None:
        made = _GROUP_ENVS[key] = _nodes.override(env, overrides)  # (holds `env`: its id stays its own)
    return made


def canonical(env) -> list[str]:
    return _archs.canonical_archs(env, _toolchain.clang_major(env))


def stem(node) -> str:
    return os.path.splitext(node.name)[0]


class Registry:
    """Nodes already made, per (environment, target path, kind): calling OffloadObject on a source
    from OffloadProgram and by hand reuses the nodes. A second request for the same target that
    wants something else (other archs, flags, language or compiler) is an error naming the target,
    never a silent reuse of the first. (Across environments, SCons itself refuses two builders of
    one target.)"""

    def __init__(self):
        self.nodes: dict[tuple, tuple[object, object]] = {}

    def get(self, env, path: str, kind: str, wants, make):
        """The nodes of `path`, made by `make()` on the first request. `wants` describes a
        request; its commands are only compared when a second, different one arrives
        (substitution is not free at thousands of nodes)."""
        # `path` is absolute (`get_abspath()`): `get_path()` is relative to the folder of the
        # SConscript being read, and two SConscripts' `k.cpp` are two requests.
        key = (id(env), path, kind)
        if key in self.nodes:
            first_wants, made = self.nodes[key]
            if first_wants.same_as(wants):
                return made  # the same overrides: the same request, nothing to substitute
            changes = first_wants.differences(wants, made)
            if changes:
                raise SCons.Errors.UserError(
                    f"offload: '{path}' is already built with other settings; this call changes "
                    f"{'; '.join(changes)}: give it another target (target=...) or the same settings")
            return made
        made = make()
        self.nodes[key] = (wants, made)
        return made


    def made_of(self, env, kind: str):
        """Every node list made so far for `env` of `kind` (for checks that ask what else an
        environment builds)."""
        return (made for (env_id, _, k), (_, made) in self.nodes.items() if env_id == id(env) and k == kind)


registry = Registry()


class Wants:
    """A request for a target, as the registry compares two of them: its facts (`parts`: language,
    flavour, archs) and the caller's overrides (`kw`) on the environment it was made in.

    Two requests with equal parts and equal overrides are the same without asking. Otherwise they
    are the same when every step the first one made (the target's and those below it that the tool
    made for it) has the same command under the second's overrides: the commands themselves are
    compared, so any variable that reaches a step is in the comparison by construction, and one
    that reaches none (a variable of the caller's own) makes no difference."""

    __slots__ = ("senv", "parts", "caller", "key")

    def __init__(self, senv, parts: tuple, kw: dict | None):
        self.senv, self.parts, self.caller = senv, parts, dict(kw or {})
        try:
            self.key = (parts, _signatures.frozen(self.caller))
        except TypeError:
            self.key = None  # overrides that cannot be compared: compare what they substitute to

    def same_as(self, other: "Wants") -> bool:
        return self.key is not None and self.key == other.key

    def differences(self, other: "Wants", made) -> list[str]:
        """What `other`, a second request for the nodes `made` by this one, changes: its facts
        that differ, then each overridden variable whose change reaches a step's command, as
        `NAME: 'first' -> 'other'`. Empty: the same request."""
        out = [f"{a} -> {b}" for a, b in zip(self.parts, other.parts) if a != b]
        changed = {}
        for name in sorted(set(self.caller) | set(other.caller)):
            first, this = self.senv.subst(f"${name}"), other.senv.subst(f"${name}")
            if first != this:
                changed[name] = (first, this, other.senv.get(name))
        if changed:
            reaching = _reaching(made, {k: v[2] for k, v in changed.items()})
            out += [f"{k}: '{changed[k][0]}' -> '{changed[k][1]}'" for k in changed if k in reaching]
        return out


def _reaching(made, overrides: dict) -> set[str]:
    """The names in `overrides` whose values change the command of a step in `made` or below it
    (steps of the tool's builders only: a user's generator of a source is the user's)."""
    steps, seen, todo = [], set(), list(_nodes.flatten_sequence([made]))
    while todo:
        n = todo.pop()
        if id(n) in seen or not _nodes.is_node(n) or not _nodes.has_builder(n):
            continue
        seen.add(id(n))
        if steps and not _nodes.builder_name(n).startswith(BUILDER_PREFIX):
            continue
        steps.append(n)
        todo.extend(_nodes.inputs(n))
    reaching = set()
    for n in steps:
        env = _nodes.build_env(n)
        text = _actions.step_text(n, env)
        for name, value in overrides.items():
            if name not in reaching and _actions.step_text(n, _nodes.override(env, {name: value})) != text:
                reaching.add(name)
    return reaching


def wants(senv, *parts, kw: dict | None = None) -> Wants:
    """`Wants` of a request made with the caller's overrides `kw` (`senv` = `settings(env, kw)`)."""
    return Wants(senv, parts, kw)
