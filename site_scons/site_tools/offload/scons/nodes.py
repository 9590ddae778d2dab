"""What the tool asks of SCons's nodes, its file system and construction environments that SCons's
manual does not document, one function each.

Why a door: SCons documents a node's `path`, `abspath`, `srcnode()`, `dir`, `name` and
`get_contents()`, and the environment methods (`File`, `Dir`, `subst`, `Depends`, ...)
(`scons.public_api`). The tool needs more: where a node lies relative to a folder, whether a
builder makes it, the environment it is built in, the headers SCons found in it, a place to mark
it (`attributes`), environments with overrides (`Override`), and, for nvcc's intermediate files, a
decider of its own. SCons's own tools use these names, and they have not changed from 4.5 to 4.11,
but SCons may change them without notice: here they are written once, so a change of SCons is
mended in one module, and tests/scons_tool/test_scons_hooks.py fails on such a name anywhere else."""

from __future__ import annotations

import os
import time

import SCons.Builder
import SCons.Node
import SCons.Node.FS
import SCons.Node.Python
import SCons.Util

from . import hooks as _hooks

# --------------------------------------------------------------------------------------------
# What a thing is


def is_node(x) -> bool:
    """`x` is a SCons node (a builder's target or source, a file, a folder, a value, an alias)."""
    return isinstance(x, SCons.Node.Node)


def is_file(x) -> bool:
    """`x` is a file node (not a folder, nor an entry SCons has not yet decided is either)."""
    return isinstance(x, SCons.Node.FS.File)


def is_dir(x) -> bool:
    """`x` is a folder node."""
    return isinstance(x, SCons.Node.FS.Dir)


def is_fs_entry(x) -> bool:
    """`x` is a node of the file system: a file, a folder, or an entry still undecided."""
    return isinstance(x, SCons.Node.FS.Base)


def node_list(items):
    """`items` as the `NodeList` a builder returns (the manual's 'Builder Methods')."""
    return SCons.Util.NodeList(items)


def value_node(value):
    """A `Value` node of `value` (as `env.Value()`, without its memo: one node per call)."""
    return SCons.Node.Python.Value(value)


def is_string(x) -> bool:
    """`x` is a string as SCons takes one in a construction variable (`str` or `UserString`)."""
    return SCons.Util.is_String(x)


def is_list(x) -> bool:
    """`x` is a list as SCons takes one in a construction variable (`list`, `UserList`, ...)."""
    return SCons.Util.is_List(x)


def flatten_sequence(x) -> list:
    """`x`'s items, nested lists flattened (strings are not split), as SCons reads `ENV` values."""
    return SCons.Util.flatten_sequence(x)


# --------------------------------------------------------------------------------------------
# A node's names


def abspath(n) -> str:
    """`n`'s absolute path (the `abspath` the manual documents, asked as SCons asks it)."""
    return n.get_abspath()


def path(n, folder=None) -> str:
    """`n`'s path relative to `folder` (a folder node), by default to the folder SCons is in:
    the SConscript's while it is read, the top one while commands run."""
    return n.get_path(folder)


def shown_path(n) -> str:
    """`n`'s path (`path`) where it is a file or folder, else its name as SCons prints it (an
    alias, a value)."""
    get_path = getattr(n, "get_path", None)
    return get_path() if get_path is not None else str(n)


def repository_file(n):
    """`n`'s copy in a `Repository` where the file is only there (what `$SOURCE` names: SCons
    substitutes a source's `rfile()`), else `n`; a node that is no file is itself."""
    rfile = getattr(n, "rfile", None)
    return rfile() if rfile is not None else n


def read_path(n) -> str:
    """The file a compiler opens for `n`: the node's own file where it exists (a variant
    directory's copy), else its source-tree file (a variant directory with `duplicate=0`), else
    that file's copy in a `Repository` (SCons hands the compiler the repository's path, so its
    identity and text are that file's)."""
    own = n.get_abspath()
    if os.path.exists(own):
        return own
    return repository_file(n.srcnode()).get_abspath()


def command_path(n) -> str:
    """`n` as `$SOURCE` names it in a command line: its `Repository` copy where the file is only
    there, else the node itself."""
    return str(repository_file(n))


# --------------------------------------------------------------------------------------------
# How a node is built


def has_builder(n) -> bool:
    """A builder of this build makes `n` (it is no source file)."""
    return n.has_builder()


def build_env(n):
    """The construction environment `n` is built with (its builder call's overrides applied)."""
    return n.get_build_env()


def sources(n) -> list:
    """The sources given to the builder call that made `n`."""
    return list(n.sources)


def inputs(n) -> list:
    """What the step that makes `n` reads by the build's word: its sources, then what
    `Depends()` added (not what a scanner found)."""
    return list(n.sources) + list(n.depends)


def scanned_files(target) -> list:
    """The files besides its sources that a compile of `target` (a list, its first node) reads,
    as SCons's scanner found them (the headers it includes), in path order."""
    deps = getattr(target[0], "implicit", None) if target else None
    return sorted((n for n in deps or () if is_file(n)), key=lambda n: n.get_path())


def marks(n):
    """The object on which the tool records what `n` is (`graph.protocol.NODE_ATTRIBUTES`): the
    node's `attributes`, where SCons's own tools record theirs (None for what is no node)."""
    return getattr(n, "attributes", None)


def builder_name(n) -> str:
    """The name of the builder that makes `n` in its environment's `BUILDERS`, or ''."""
    b = getattr(n, "builder", None)
    if b is None:
        return ""
    try:
        return b.get_name(n.env) or ""
    except Exception:
        return ""


def builder_says(n, what: str):
    """What the builder that makes `n` records of itself (`graph.protocol.BUILDER_ATTRIBUTES`), or
    None."""
    return getattr(getattr(n, "builder", None), what, None)


# --------------------------------------------------------------------------------------------
# Environments


def override(env, overrides: dict):
    """`env` with `overrides` (construction variables) in front: a builder call's environment,
    made as SCons makes one for `env.Builder(..., VAR=value)`."""
    return env.Override(overrides)


# --------------------------------------------------------------------------------------------
# The folder names are relative to while SConscripts are read


class from_top:
    """While SConscripts are read, a node's name is relative to the SConscript being read; within
    this, relative to the top directory, where SCons runs commands (as when it substitutes them).
    `targets` get the SConscript's folder as theirs first, as a builder gives its targets: SCons
    finds `CPPPATH`'s folders from there (`TARGET.RDirs`)."""

    def __init__(self, env, targets=()):
        self.fs, self.targets = env.fs, targets or ()

    def __enter__(self):
        self.cwd = self.fs.getcwd()
        for t in self.targets:
            if getattr(t, "cwd", None) is None:
                t.cwd = self.cwd
        self.fs.chdir(self.fs.Top, change_os_dir=False)
        return self

    def __exit__(self, *exc):
        self.fs.chdir(self.cwd, change_os_dir=False)


# --------------------------------------------------------------------------------------------
# Deciding whether a file that a step of the build wrote changed

# The second this SCons run began (SCons keeps timestamps in whole seconds).
_RUN_START = int(time.time())


def _timestamp_then_content(node, target, prev_ni, repo_node=None) -> bool:
    """Whether `node` changed for `target`: its timestamp first, its content only when the
    timestamp moved (SCons's 'content-timestamp'). With the default 'content' decider SCons hashes
    every file younger than `max_drift` (two days) on each run: a null build would read every
    device object, host object and package again (and nvcc's megabytes of preprocessed text).

    SCons's timestamps are whole seconds, so a file rewritten within the second its recorded
    timestamp names would look unchanged. The content is therefore compared whenever the
    timestamp cannot be trusted: the file was rewritten by this run (`hooks.built_this_run`: a
    quick second run, or a file system whose clock lags the machine's), its recorded timestamp is
    from the second this run began or later, or its size changed."""
    recorded = getattr(prev_ni, "timestamp", None)
    size = getattr(prev_ni, "size", None)
    # A file whose size changed changed, whatever its timestamp says (one truncated with its
    # timestamp kept): the step reading it runs, and checks it (`graph.consume`).
    if recorded is None or recorded >= _RUN_START or (size is not None and size != node.get_size()) \
            or _hooks.built_this_run(node):
        return node.changed_content(target, prev_ni)
    return node.changed_timestamp_then_content(target, prev_ni, repo_node)


def decide_by_timestamp_then_content(nodes) -> None:
    """Have SCons decide whether each of `nodes` (files a step of the build writes and another
    reads: nvcc's intermediates, host IR, host and device objects, device links, packages)
    changed by its timestamp, then its content (`_timestamp_then_content`), rather than by the
    environment's decider. The user's own files (sources, headers, the project's objects) keep
    the project's decider. SCons sets a node's decider back when a builder is attached to it or
    it turns from an entry into a file, so this is done after the builder call, on files."""
    for n in nodes:
        if type(n) is SCons.Node.FS.Entry:   # a target not yet known to be a file: it is one
            n = n.dir.File(n.name)           # (the same node, turned into a file)
        n.Decider(_timestamp_then_content)


class _JudgedByTimestamp(SCons.Builder.BuilderBase):
    """A builder whose targets are judged by timestamp, then content, by the steps that read
    them (`decide_by_timestamp_then_content`, applied to what each call makes)."""

    def __call__(self, env, target=None, source=None, *args, **kw):
        made = super().__call__(env, target, source, *args, **kw)
        decide_by_timestamp_then_content(made)
        return made


def judged_by_timestamp(builder):
    """`builder` (made by `SCons.Builder.Builder`), its targets judged by timestamp, then content
    (`_JudgedByTimestamp`): every file the tool's builders write is read by its next steps, and
    with SCons's default decider every null build would hash each of them again (SCons trusts no
    timestamp younger than `max_drift`, two days). A builder of another class is left as it is."""
    if type(builder) is SCons.Builder.BuilderBase:
        builder.__class__ = _JudgedByTimestamp
    return builder
