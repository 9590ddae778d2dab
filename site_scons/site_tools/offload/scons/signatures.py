"""Action signatures: computed once per (environment, overrides) rather than once per node, and
in time linear in the command's length.

A SCons command action's signature is its command line substituted for signatures (`$( $)`
parts dropped) with the node's own targets and sources. Every compile node of this tool has an
override environment of its own, so SCons substitutes each command line in full for each node,
callables included: at 100 sources x 4 archs that was ~45% of a null build.

Nodes that share an environment differ only in their targets and sources, and the tool gives
compiles with equal overrides one environment (`graph.common.group_env`). So the command is substituted once for such a group with stand-in strings for
the targets and sources (`@offload:t0@`, `@offload:s0@`, ...), and each node's signature is that text
with the stand-ins replaced by what SCons itself writes for a node in a signature (its name,
`for_signature()`). The result is byte-identical to SCons's own `get_presig`, so it changes exactly
when SCons's would. Whatever cannot be substituted with stand-ins (a callable or expression that
asks a target or source more than its name: `${SOURCE.dir}`, `source[1].get_abspath()`) raises,
and that group falls back to SCons's per-node substitution. Nothing is memoised while SConscripts
are read (environments may still change then; `_scons_hooks.reading_sconscripts`, which answers
"yes", said once, where this SCons cannot tell: every node is then signed by SCons itself).

The texts follow SCons's own `CommandAction.get_presig` and `ActionBase.get_contents` (presig,
then each `varlist` value); tests/scons_tool/test_scons_tool.py compares them with SCons's for every
language, with the SCons installed, so a release that changes that layout fails there.

A link, device link or carrier lists every object of a program: at 1,000 sources x 4 archs their
command lines are 13-160 KB. SCons's string substitution for signatures collapses whitespace
with a regular expression (`[\t ]+(?![^{]*})`) whose look-ahead scans to the end of the line
from every space, so its time grows with the square of the line's length: ~0.4 s of every null
build there. `command_presig` substitutes the same command as a list of words (linear) and joins
them with the single spaces the string form leaves: the same text (tested against SCons's), except
that a carriage return, form feed or vertical tab inside an argument reads as a blank."""

from __future__ import annotations

import collections
import functools
import re
import threading

import SCons.Action
import SCons.Subst
import SCons.Util

from . import hooks as _scons_hooks

_UNMEMOISABLE = object()


def frozen(value):
    """A hashable form of an override value, or raise TypeError for one whose identity could be
    reused (a plain object that may be collected)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple, collections.UserList)):
        return (type(value).__name__,) + tuple(frozen(v) for v in value)
    if isinstance(value, dict):
        return ("dict",) + tuple(sorted((str(k), frozen(v)) for k, v in value.items()))
    if callable(value) or hasattr(value, "for_signature"):
        # A function or a node: itself (hashed by identity; the key keeps it alive, so its
        # identity is never another object's).
        hash(value)
        return ("object", value)
    raise TypeError(type(value).__name__)


def _standins(prefix: str, nodes) -> tuple[str, ...]:
    return _standin_names(prefix, len(nodes))


@functools.lru_cache(maxsize=None)
def _standin_names(prefix: str, count: int) -> tuple[str, ...]:
    return tuple(f"@offload:{prefix}{i}@" for i in range(count))


_BLANKS = re.compile(r"[\t ]+")


def command_presig(action, target, source, env) -> str:
    """`CommandAction.get_presig` (the command substituted for signatures: `$( $)` parts dropped,
    runs of blanks made one space), computed word by word (see the module docstring). SCons keeps
    the blanks before a `}` that no `{` precedes; a command with a `}` or several lines is left to
    SCons's own substitution."""
    cmd = action.cmd_list
    cmd = " ".join(map(str, cmd)) if SCons.Util.is_List(cmd) else str(cmd)
    lines = env.subst_list(cmd, SCons.Subst.SUBST_SIG, target, source)
    if len(lines) <= 1:
        text = " ".join(map(str, lines[0])) if lines else ""
        if "}" not in text:
            return _BLANKS.sub(" ", text).strip()
    return SCons.Action.CommandAction.get_presig(action, target, source, env)


class LinearSignature:
    """Mixin for a `CommandAction` whose command line can be long (it lists a program's objects):
    its presig is `command_presig`."""

    def get_presig(self, target, source, env, executor=None):
        if executor:
            target, source = executor.get_all_targets(), executor.get_all_sources()
        return command_presig(self, target, source, env)


class LazyCommandAction(LinearSignature, SCons.Action.LazyAction):
    """`Action("$VAR")` (the command is the environment's `$VAR` when the node is built) whose
    presig is `command_presig` while `$VAR` is one command line; a list of commands or a function
    in `$VAR` is signed as SCons signs it."""

    def get_presig(self, target, source, env, executor=None):
        if self.get_parent_class(env) is not SCons.Action.CommandAction:
            return SCons.Action.LazyAction.get_presig(self, target, source, env)
        return super().get_presig(target, source, env, executor)


class GroupSignatureAction(SCons.Action.CommandAction):
    """A command action whose signature text is substituted once per group of nodes that share
    overrides and base environment (see the module docstring); executing it is SCons's own."""

    def __init__(self, cmd, **kw):
        super().__init__(cmd, **kw)
        self._templates: dict = {}
        self._lock = threading.Lock()

    def get_presig(self, target, source, env, executor=None):
        if executor:
            target, source = executor.get_all_targets(), executor.get_all_sources()
        text = self._group_text(0, target, source, env)
        return super().get_presig(target, source, env) if text is None else text

    def get_contents(self, target, source, env):
        """The signature (command line and `varlist` values), as SCons's `get_contents`."""
        text = self._group_text(1, target, source, env)
        return super().get_contents(target, source, env) if text is None else bytearray(text, "utf-8")

    def _group_text(self, which: int, target, source, env) -> str | None:
        """The presig (`which` 0) or contents (1) of these nodes from their group's template, or
        None where SCons's own per-node computation must answer."""
        if _scons_hooks.reading_sconscripts():
            return None
        # Compiles with equal overrides share one environment (`graph.common.group_env`; their
        # builders add no per-call overrides), so the environment itself names the group.
        key = (id(env), len(target), len(source))
        memo = self._templates.get(key)
        if memo is None:
            memo = (self._template(target, source, env), env)  # (holds `env`: its id stays its own)
            with self._lock:
                self._templates[key] = memo
        if memo[0] is _UNMEMOISABLE:
            return None
        text = memo[0][which]
        for standin, n in zip(_standins("t", target), target):
            text = text.replace(standin, n.for_signature())
        for standin, n in zip(_standins("s", source), source):
            text = text.replace(standin, n.for_signature())
        return text

    def _template(self, target, source, env):
        """(presig, contents) with stand-ins, or _UNMEMOISABLE where stand-ins do not substitute
        as the nodes would (see the module docstring). Substituted twice, with two sets of
        stand-ins: the texts must differ only where the stand-ins were pasted, so nothing in the
        command computes with a target's or source's text, and no text of its own looks like one."""
        if not all(hasattr(n, "for_signature") for n in list(target) + list(source)):
            return _UNMEMOISABLE
        cmd = self.cmd_list
        cmd = " ".join(map(str, cmd)) if SCons.Util.is_List(cmd) else str(cmd)
        varlist = self.get_varlist(target, source, env)
        varlist = (varlist,) if SCons.Util.is_String(varlist) else varlist
        texts = []
        try:
            for t, s in (("t", "s"), ("T", "S")):
                tgt, src = _standins(t, target), _standins(s, source)
                presig = env.subst_target_source(cmd, SCons.Subst.SUBST_SIG, tgt, src)
                # As ActionBase.get_contents: the presig, then each varlist value (`$( $)` dropped).
                values = "".join(SCons.Util.to_str(SCons.Util.to_bytes(
                    env.subst_target_source("${" + v + "}", SCons.Subst.SUBST_SIG, tgt, src))) for v in varlist)
                texts.append((presig, presig + values))
        except Exception:  # a stand-in was asked for more than its name: this group is per node
            return _UNMEMOISABLE
        first, second = texts
        for prefix, other, nodes in (("t", "T", target), ("s", "S", source)):
            for a, b in zip(_standins(prefix, nodes), _standins(other, nodes)):
                if any(x.count(a) != y.count(b) for x, y in zip(first, second)):
                    return _UNMEMOISABLE
                second = tuple(y.replace(b, a) for y in second)
        return first if first == second else _UNMEMOISABLE
