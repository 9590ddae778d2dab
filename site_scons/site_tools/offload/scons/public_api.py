"""The SCons names the tool's modules outside `scons/` may use: SCons's public API, as SCons's
reference manual (the man page, `scons.xml`; its environment functions are written in the
`SCons/*.xml` files it is built from) and its user guide document it for SConscripts and tools,
each with where it is documented.

Why: SCons says that what its manual documents is its public API, with long-term consistency
guarantees, and that the rest (its "internal API", however much of it its own tools use) may
change in any release. So the tool uses the rest only in `scons/`, where each use is written
once, checked against the SCons versions supported and given a fallback where it may fail
(`hooks`), and everywhere else only the names below. tests/scons_tool/test_scons_hooks.py reads every SCons
name the tool's other modules use (module attributes, attributes and methods of the nodes,
environments and builders SCons hands them, classes derived from SCons's) and fails on one that is
not here; it also checks that each alias below is the documented object.

Not here on purpose: a node's `get_abspath()`, `get_path()`, `has_builder()`, `get_build_env()`,
`attributes`, `sources`, `rfile()`; `env.Override()`, `env.subst_list()`; `CmdStringHolder`, the
substitution modes, `CScanner`, `NodeList`, the node classes; every action method (`process`,
`execute`, `get_contents`, `get_presig`). `scons.nodes` and `scons.actions` give the tool those."""

from __future__ import annotations

#: Module attributes, by the dotted name the tool writes.
MODULE_NAMES = {
    "SCons.Script.GetOption": "man page, GetOption() (SConscript functions)",
    "SCons.Script.AddOption": "man page, AddOption()",
    "SCons.Script.Progress": "man page, Progress()",
    "SCons.Script.GetBuildFailures": "man page, GetBuildFailures()",
    "SCons.Script.GetLaunchDir": "man page, GetLaunchDir()",
    "SCons.Script.Scanner": "man page, 'Scanner Objects': Scanner()",
    "SCons.Action.Action": "man page, 'Action Objects': Action() (the object SCons.Script.Action is)",
    "SCons.Builder.Builder": "man page, 'Builder Objects': Builder() (the object SCons.Script.Builder is)",
    "SCons.Errors.UserError": "man page, 'Builder Methods': the exception a builder called wrongly raises",
    "SCons.Errors.BuildError": "man page, GetBuildFailures(): the objects it lists",
    "SCons.Util.CLVar": "man page, 'Tools': a tool's flags default to SCons.Util.CLVar()",
    "SCons.Util.flatten": "man page, Flatten() / env.Flatten(): the function they apply",
}

#: Documented names that are the same object as a SConscript function (checked by the test).
ALIASES = {
    "SCons.Action.Action": "Action",
    "SCons.Builder.Builder": "Builder",
}

#: Attributes and methods of the objects SCons hands the tool: construction environments (their
#: methods are the SConscript functions of the same name), nodes, and what a decider is given.
MEMBER_NAMES = {
    # construction environments ('Construction Environment Functions': SCons/Environment.xml)
    "AddMethod": "man page, AddMethod() / env.AddMethod()",
    "AddPreAction": "man page, AddPreAction() / env.AddPreAction()",
    "AlwaysBuild": "man page, AlwaysBuild() / env.AlwaysBuild()",
    "Clean": "man page, Clean() / env.Clean()",
    "Command": "man page, Command() / env.Command()",
    "Depends": "man page, Depends() / env.Depends()",
    "Dir": "man page, Dir() / env.Dir(); node.Dir() ('Filesystem Nodes')",
    "Entry": "man page, 'Filesystem Nodes': node.Entry()",
    "File": "man page, File() / env.File(); node.File() ('Filesystem Nodes')",
    "NoCache": "man page, NoCache() / env.NoCache()",
    "Requires": "man page, Requires() / env.Requires()",
    "WhereIs": "man page, WhereIs() / env.WhereIs()",
    "subst": "man page, env.subst()",
    # nodes ('Filesystem Nodes'; a scanner function's node; the substitution attributes)
    "abspath": "man page, 'Filesystem Nodes': node.abspath",
    "path": "man page, 'Filesystem Nodes': node.path",
    "srcnode": "man page, 'Filesystem Nodes': node.srcnode()",
    "dir": "man page, 'Scanner Objects': node.dir (the folder the file is in)",
    "name": "man page, 'Builder Objects' (an emitter's example reads target[0].dir.name)",
    "get_contents": "man page, 'Scanner Objects': node.get_contents()",
    "get_text_contents": "man page, 'Scanner Objects': node.get_text_contents()",
    # what a Decider function is given (SCons/Environment.xml, Decider())
    "timestamp": "man page, Decider(): prev_ni's timestamp",
    "size": "man page, Decider(): prev_ni's size",
}
