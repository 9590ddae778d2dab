"""SCons's actions, command-line words and scanners as the tool needs them beyond what SCons's
manual documents, one name each.

Why a door: the manual documents `Action()`, `Builder()` and `Scanner()` and what they are called
with. The tool needs more of an action: to add to its signature (a source file's identity), to
leave its signature alone (a check run before a step), to sign it by a text computed once (nvcc's
steps), to run other command lines than its own (OpenMP's device jobs from the host IR), to run a
command in-process, and to know when it ended. Those are methods of SCons's action classes
(`process`, `execute`, `get_contents`, `get_presig`) that SCons may change without notice: here
each is overridden once, and the tool's modules pass plain functions (`CompileAction`'s hooks).
The words of a command line (`CmdStringHolder`), the substitution modes and the C scanner are
SCons's internals too. tests/scons_tool/test_scons_hooks.py fails on such a name anywhere else."""

from __future__ import annotations

import sys

import SCons.Action
import SCons.Errors
import SCons.Scanner
import SCons.Subst
import SCons.Tool

from . import signatures as _signatures

# --------------------------------------------------------------------------------------------
# Actions


def sequence(actions: list):
    """One action that runs `actions` in order (a step's pre-check, then the step); its signature
    is theirs, joined, as `Action([a, b])` makes it."""
    return SCons.Action.ListAction(list(actions))


class _UnsignedFunctionAction(SCons.Action.FunctionAction):
    """A function action that adds nothing to its step's signature and no implicit dependency."""

    def get_presig(self, target, source, env, executor=None):
        return b""

    def get_contents(self, target, source, env):
        return b""

    def get_implicit_deps(self, target, source, env, executor=None):
        return []


def unsigned(function, cmdstr=None):
    """An action that calls `function(target, source, env)` (shown as `cmdstr`; None: silent) and
    is no part of the signature of the step it runs in: a check of a step's inputs, which must not
    rebuild the step when the check itself changes."""
    return _UnsignedFunctionAction(function, {"cmdstr": cmdstr})


class VariableSignedAction(SCons.Action.CommandAction):
    """The command `$<com_variable>`, signed by the text of one construction variable of its
    node (`signature_variable`), computed once when the node is made, rather than by its command
    substituted per node on every run (nvcc's steps: a source has several per arch, and a null
    build signs them all). When the user gives `com_variable` another value than the tool's
    (a wrapper around the step), that value is signed too."""

    def __init__(self, com_variable: str, signature_variable: str, **kw):
        super().__init__("$" + com_variable, **kw)
        self.com_variable, self.signature_variable = com_variable, signature_variable

    def get_contents(self, target, source, env):
        text = env[self.signature_variable]
        com = env.get(self.com_variable)
        if com != DEFAULTS.get(self.com_variable):
            text += "\n" + str(com)
        return text.encode()


#: The tool's own values of the construction variables (`settings.variables.set_defaults` fills it):
#: a step signed by a variable's text also signs a command the user changed.
DEFAULTS: dict[str, str] = {}


class CompileAction(_signatures.GroupSignatureAction):
    """A command action signed once per group of nodes with equal overrides (`signatures`), with
    what the tool adds as plain functions of the action's targets and sources (all of them, for a
    multi-target action):

    - `contents(target, source, env) -> bytes`: added to the signature (b'': nothing);
    - `rewrite(cmd_list, target, source, env)`: the command lines to run (and show) instead of
      the command's own (`cmd_list`: lines of words, as SCons substituted them), or None for those;
    - `after(target, source, env, status)`: called once the command returned (`status` 0 when it
      succeeded), not when it raised;
    - `cleanup(target, source, env)`: called however the command ended."""

    def __init__(self, cmd, contents=None, rewrite=None, after=None, cleanup=None, **kw):
        super().__init__(cmd, **kw)
        self._contents, self._rewrite, self._after, self._cleanup = contents, rewrite, after, cleanup

    def get_contents(self, target, source, env):
        contents = super().get_contents(target, source, env)
        return contents + self._contents(target, source, env) if self._contents else contents

    def process(self, target, source, env, executor=None, *args, **kw):
        cmd_list, ignore, silent = super().process(target, source, env, executor, *args, **kw)
        if self._rewrite is None:
            return cmd_list, ignore, silent
        if executor:
            target, source = executor.get_all_targets(), executor.get_all_sources()
        lines = self._rewrite(cmd_list, target, source, env)
        return (cmd_list if lines is None else lines), ignore, silent

    def execute(self, target, source, env, executor=None):
        try:
            status = super().execute(target, source, env, executor)
            if self._after:
                self._after(*_all(target, source, executor), env, status)
            return status
        finally:
            if self._cleanup:
                self._cleanup(*_all(target, source, executor), env)


class _Budgeted:
    """Mixin of `budgeted`: the action's run (its command shown, then executed) inside
    `self._offload_hold(targets, sources, env)`; `scons -n` shows it without waiting."""

    __slots__ = ()
    _offload_hold = None

    def __call__(self, target, source, env, *args, **kw):
        execute = kw.get("execute", args[3] if len(args) > 3 else SCons.Action._null)
        if execute is SCons.Action._null:
            execute = SCons.Action.execute_actions
        if not execute or self._offload_hold is None:
            return super().__call__(target, source, env, *args, **kw)
        executor = kw.get("executor", args[5] if len(args) > 5 else None)
        with self._offload_hold(*_all(target, source, executor), env):
            return super().__call__(target, source, env, *args, **kw)


_budgeted_classes: dict[type, type] = {}


def budgeted(act, hold):
    """`act` (any action: a command, a `sequence`, `$VAR`) run inside `hold(target, source, env)`,
    a context manager entered before its command line is shown and run, and left when it ended (a
    memory budget makes it wait there: `graph.memory_budget`). The same action otherwise: its
    signature, command lines and class's methods are `act`'s (a subclass of its class)."""
    cls = type(act)
    sub = _budgeted_classes.get(cls)
    if sub is None:
        sub = _budgeted_classes[cls] = type("Budgeted" + cls.__name__, (_Budgeted, cls), {})
    made = object.__new__(sub)  # `act`'s state in an instance of the subclass
    made.__dict__.update(vars(act))
    made._offload_hold = hold
    return made


def _all(target, source, executor):
    """The action's targets and sources: the executor's (all of a multi-target action's) when
    SCons passes one."""
    return (executor.get_all_targets(), executor.get_all_sources()) if executor else (target, source)


class InProcessAction(_signatures.LinearSignature, SCons.Action.CommandAction):
    """A command action whose command, when it is the tool's own helper script `script` run by the
    Python running SCons, runs inside the SCons process (`entry(arguments)`, its exit status).

    The command line stays what SCons shows (`scons -n`, verbose output), signs and caches; only
    the execution skips a Python start-up per node (~0.15 s of CPU, a tenth of what a source
    costs at 4 archs). A command the user replaced is spawned as usual."""

    def __init__(self, com: str, script: str, entry, **kw):
        super().__init__(com, **kw)
        self.script = script
        self.entry = entry

    def execute(self, target, source, env, executor=None):
        if executor:
            target, source = executor.get_all_targets(), executor.get_all_sources()
        cmd_list, ignore, _ = self.process(target, list(map(SCons.Action.rfile, source)), env, executor)
        python = env.subst("$OFFLOAD_PYTHON")
        argvs = [[str(a) for a in cmd] for cmd in filter(len, cmd_list)]
        # Another interpreter may carry another offload_tool: only ours runs in-process.
        if not (len(argvs) == 1 and argvs[0][:2] == [python, self.script] and python == sys.executable):
            return super().execute(target, source, env, executor)
        try:
            status = self.entry(argvs[0][2:])
        except Exception as exc:  # never a traceback from a library step: one line, as the CLI
            sys.stderr.write(f"offload: error: internal error: {type(exc).__name__}: {exc}\n")
            status = 1
        if status and not ignore:
            return SCons.Errors.BuildError(errstr=f"Error {status}", status=status, action=self,
                                           command=argvs[0])
        return 0


# --------------------------------------------------------------------------------------------
# Command lines


def word(text: str, escaped: bool | None):
    """One word of a command line as SCons writes it: escaped for the shell by the environment's
    `ESCAPE` when `escaped` (as `$SOURCE`'s file name: any name reaches the program as it is),
    else quoted only when it holds a blank (`&&` stays an operator)."""
    return SCons.Subst.CmdStringHolder(text, escaped)


def literal(text: str):
    """`text` as `Literal()` gives it: put on a command line as it is, quoted by SCons where it
    holds a blank, never substituted."""
    return SCons.Subst.Literal(text)


def command_lines(env, template: str, target=None, source=None, for_signature: bool = False) -> list:
    """`template` substituted as SCons substitutes a command for `target` and `source` (for its
    signature: `$( $)` parts dropped): a list of lines, each a list of words."""
    mode = SCons.Subst.SUBST_SIG if for_signature else SCons.Subst.SUBST_CMD
    return env.subst_list(template, mode, target=target, source=source)


def step_text(n, env) -> str:
    """The command of the step that makes `n` as SCons runs it in `env`, every word substituted
    (`$( $)` parts kept: an include folder changes what is compiled); for a Python step, its
    signature contents. The registry's notion of two requests for one target being the same
    (`graph.common.Wants`)."""
    executor = n.get_executor()
    target, source = executor.get_all_targets(), executor.get_all_sources()
    texts = []
    for action in executor.get_action_list():
        for a in getattr(action, "list", None) or [action]:
            if isinstance(a, SCons.Action.CommandAction):
                texts.append(env.subst(a.cmd_list, SCons.Subst.SUBST_RAW, target=target, source=source))
            else:
                texts.append(a.get_contents(target, source, env).decode("utf-8", "replace"))
    return "\n".join(texts)


def escaped(words, env) -> list:
    """`words` (a line of `command_lines`) escaped for the shell as SCons escapes a line it runs."""
    return SCons.Subst.escape_list(words, env["ESCAPE"])


# --------------------------------------------------------------------------------------------
# Scanners


def _shared_call(self, node, env, path=()):
    """`ScannerBase.__call__`, answered once per search path rather than once per environment:
    the first environment that asks for a path scans; another asks the node for that one's
    answer (`get_found_includes`, which SCons memoises per environment, scanner and path)."""
    canon = self._offload_envs.setdefault(path, env)
    if canon is env:
        return self._offload_scan(node, env, path)
    return node.get_found_includes(canon, self, path)


_SHARED_C_SCANNER = None


def c_scanner():
    """SCons's scanner of C and C++ `#include`s, the one its `Object` builders use (the manual
    names no scanner object of SCons's own but `DirScanner` and `SourceFileScanner`), made to
    scan each file once per search path (`CPPPATH`).

    Why: SCons memoises a file's `#include`s per environment, and every compile of a source here
    has an environment of its own (its arch's overrides): the host IR and each arch's device
    compile scanned the source and every header it includes again, five times at 4 archs, in
    every build, null builds included. SCons's classic scanner reads only the file and the
    search path (the environment makes nodes, the same for all of one build), so compiles with
    one `CPPPATH` share one answer. A scanner of another kind (a project that replaced
    `SCons.Tool.CScanner`) is used as it is."""
    global _SHARED_C_SCANNER
    base = SCons.Tool.CScanner
    if not isinstance(base, SCons.Scanner.Classic):
        return base
    if _SHARED_C_SCANNER is None or _SHARED_C_SCANNER.__dict__.get("_offload_base") is not base:
        cls = type("OffloadSharedPathScanner", (type(base),),
                   {"__call__": _shared_call, "_offload_scan": type(base).__call__})
        made = object.__new__(cls)
        made.__dict__.update(vars(base))
        made._offload_base = base
        made._offload_envs = {}  # search path -> the environment whose answer is shared (kept alive)
        _SHARED_C_SCANNER = made
    return _SHARED_C_SCANNER


def c_include_dirs(env, folder) -> tuple:
    """The folders the C scanner searches for `#include`s of a file in `folder` (`CPPPATH`)."""
    return SCons.Tool.CScanner.path(env, folder)


def program_scanner():
    """A scanner of a program's `LIBS` (each library file found on `LIBPATH` a dependency), as
    SCons's `Program` builder has."""
    import SCons.Scanner.Prog
    return SCons.Scanner.Prog.ProgramScanner()
