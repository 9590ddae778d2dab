"""Compiles through sccache-dist: what goes to the build servers, what stays here and why.

When `OFFLOAD_LAUNCHER` is sccache and the sccache client configuration the build's commands see
(`SCCACHE_CONF` in `env['ENV']`, else `$XDG_CONFIG_HOME/sccache/config` or
`$HOME/.config/sccache/config` from `env['ENV']`) names a scheduler (`[dist] scheduler_url`),
sccache sends compiles to build servers. Left alone, a HIP device compile fails there (the
toolchain sccache packs holds clang but not lld, clang-offload-bundler or the ROCm device
libraries) and sccache does not fall back: the build stops. And sccache compiles what it
preprocessed here as `-x hip-cpp-output`, which clang unbundles; a device-only preprocessed file
holds no bundle, so the code object would come back empty.

So for each environment that compiles through sccache-dist, the tool runs its compiles through an
sccache server of its own, on a socket of its own (`SCCACHE_SERVER_UDS`, in the abstract
namespace), whose configuration is the user's plus:
- `rewrite_includes_only = true`: the server gets the source with its includes inlined and
  compiles it as the language it is (`-x hip`), exactly as here;
- a toolchain (`[[dist.toolchains]]`, `path_override`) for the clang of its HIP device compiles,
  packed from the compiler's own answers (`_dist_toolchain`) into the build's `.offload-dist`
  folder as a node of the build: made once per compiler identity, flags and configuration.

What cannot go is kept here, said once per flavour with the reason (its `Policy`): OpenMP compiles (their
offload entry names come from the source file's device and inode on the machine that compiles,
so a server's copy would name them differently from the host object made here), and what sccache
itself keeps local (clang CUDA; compiles that pass `-Xclang`). nvcc compiles go through sccache
whole; sccache sends their steps (cudafe++, the host compiler's, cicc and ptxas per arch) to the
servers."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shlex
import subprocess
import sys
import typing

import SCons.Action
import SCons.Errors
import SCons.Script

from ..scons import actions as _actions
from ..scons import nodes as _nodes
from . import toolchain_archive as _dist_toolchain
from ..graph.protocol import Parts
from ..toolchain import discovery as _toolchain


@dataclasses.dataclass(frozen=True)
class Policy:
    """What a flavour's compiles do when the build distributes: each flavour says its own
    (`Flavour.dist`), this module asks it. By default (`SENT`) its compiles go through the tool's
    server, which sends what sccache can send."""

    #: What of its compiles stays here ('' for nothing), said once per run with `why`.
    stays: str = ""
    why: str = ""
    #: Its per-arch device compiles go to the servers with a toolchain archive the tool packs
    #: (`toolchain_archive`): sccache's own lacks what they need.
    packed: bool = False
    #: Its compiles run without any launcher while the build distributes.
    unlaunched: bool = False
    #: For a flavour whose compiles all stay here with some compilers only: a function of the
    #: environment saying whether they do with the one in use (then `stays` is said and nothing is
    #: packed for them); None: `stays` always holds.
    stays_if: typing.Callable | None = None
    #: Its sources compile as one job each while the build distributes (host and every device
    #: image: `graph.compile.fat_object`), sent with a toolchain packed for that job, through a
    #: server of their own; where `stays_if` holds they run here without a launcher instead.
    whole: bool = False

    def all_stay(self, env) -> bool:
        """Whether every compile of the flavour stays here with `env`'s compiler (`stays_if`)."""
        return self.stays_if is not None and bool(self.stays_if(env))


SENT = Policy()


@dataclasses.dataclass(frozen=True)
class Client:
    """The sccache client configuration the build's commands read, when it names a scheduler."""

    sccache: str            # the launcher's program, as the build runs it
    path: str | None        # the configuration file, or None (none found: no distribution)
    text: str               # its contents
    settings: dict          # parsed
    scheduler: str


def _config_path(penv: dict) -> str | None:
    """Where sccache looks for its client configuration with this process environment."""
    if penv.get("SCCACHE_CONF"):
        return penv["SCCACHE_CONF"]
    base = penv.get("XDG_CONFIG_HOME") or (os.path.join(penv["HOME"], ".config") if penv.get("HOME") else None)
    return os.path.join(base, "sccache", "config") if base else None


_CLIENTS: dict[tuple, Client | None] = {}


def client(env) -> Client | None:
    """The sccache-dist client of `env`'s launched compiles, or None when they do not distribute
    (no sccache launcher, no configuration, no scheduler in it)."""
    words = shlex.split(env.subst("$OFFLOAD_LAUNCHER"))
    if not words or os.path.basename(words[0]) != "sccache":
        return None
    penv = _toolchain.build_env(env)
    path = _config_path(penv)
    key = (words[0], path, _mtime(path))
    if key not in _CLIENTS:
        _CLIENTS[key] = _read_client(words[0], path)
    return _CLIENTS[key]


def _mtime(path: str | None) -> int | None:
    try:
        return os.stat(path).st_mtime_ns if path else None
    except OSError:
        return None


def _read_client(sccache: str, path: str | None) -> Client | None:
    if not path or not os.path.isfile(path):
        return None
    import tomllib  # here: read only where a client configuration exists, not by every null build

    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    try:
        settings = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SCons.Errors.UserError(f"offload: the sccache configuration '{path}' is not TOML: {exc}") from None
    dist = settings.get("dist")
    scheduler = dist.get("scheduler_url") if isinstance(dist, dict) else None
    if not scheduler:
        return None
    return Client(sccache, path, text, settings, scheduler)


@dataclasses.dataclass(frozen=True)
class Server:
    """The tool's sccache server for one environment's compiles: its configuration, socket and,
    when HIP device compiles go, the toolchain archive they run in."""

    folder: str
    config: str
    socket: str
    archive: str | None
    compiler: str | None     # the clang the archive is for, as sccache resolves it
    suffixes: tuple = (".hip",)   # the source suffixes of the compiles the archive is packed for
    what: str = "HIP device compiles"   # what is sent with it, as the notes say


def _digest(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _socket_name(key: str) -> str:
    """The server's socket, in Linux's abstract namespace (as sccache writes it: `\\x00` first):
    several compiles that start the server at once meet at the first one (the others' servers
    find the name taken and sccache connects them to it; a socket file would be replaced by each
    in turn, leaving all but the last server unreachable), and it goes with the server."""
    return f"\\x00offload-sccache-{os.getuid()}-{key}"


def server(env, c: Client, compile_argv: list[str] | None = None, suffixes: tuple = (".hip",),
           what: str = "HIP device compiles") -> Server:
    """The tool's server for `env`, a client of `c`. `compile_argv`: a compile of this
    environment that goes to the servers with a toolchain packed for it (a HIP device compile, an
    OpenMP source's one job: `what`), without launcher, source, output or `-c`; `suffixes`: the
    sources' it is packed for."""
    compiler = archive_of = None
    top = _nodes.abspath(env.Dir("#"))
    # The project is part of the key: the socket's name is machine-wide, and a server of
    # another project's would name that project's toolchain archive.
    parts: list = [top, c.path, c.text]
    if compile_argv:
        compiler = _toolchain.resolve(env, compile_argv[0]) or compile_argv[0]
        ident = _toolchain.probe_compiler(env, compile_argv[0]).identity
        parts += [compiler, os.path.realpath(compiler), ident, compile_argv[1:]] + ([list(suffixes)] if suffixes != (".hip",) else [])
    key = _digest(*parts)
    folder = os.path.join(top, ".offload-dist", key)
    if compile_argv:
        archive_of = os.path.join(folder, "toolchain.tar.gz")
    return Server(folder, os.path.join(folder, "config.toml"), _socket_name(key), archive_of, compiler, suffixes, what)


def _server_env(srv: Server) -> dict[str, str]:
    """What points sccache at the tool's server: its configuration and socket."""
    return {"SCCACHE_CONF": srv.config, "SCCACHE_SERVER_UDS": srv.socket}


def _prefix(srv: Server) -> str:
    words = " ".join(f"{k}={shlex.quote(v)}" for k, v in _server_env(srv).items())
    return f"env {words} $OFFLOAD_LAUNCHER"


def launcher(env, target=None) -> str:
    """`$OFFLOAD_LAUNCHER`, or, for a compile node the tool sends through its server (`attach`),
    that launcher run with the server's configuration and socket (outside the signatures like
    every launcher). Read from the node: the compile's own environment may name another compiler
    (hipcc's nodes run `$OFFLOAD_HIPCC`) than the one its server was made for."""
    t = target[0] if target else None
    return getattr(_nodes.marks(t), "offload_dist_launcher", None) or "$OFFLOAD_LAUNCHER"


_SERVERS: dict[tuple, Server] = {}
_NODES: dict[str, list] = {}
_MADE: dict[tuple, list] = {}
_said: set = set()


def _env_key(env) -> tuple:
    return (env.subst("$OFFLOAD_LAUNCHER"), env.subst("$OFFLOAD_CLANG"), str(env["ENV"].get("SCCACHE_CONF", "")),
            str(env["ENV"].get("HOME", "")), str(env["ENV"].get("XDG_CONFIG_HOME", "")))


def say(env, flavour) -> None:
    """Say once per run what of a flavour's compiles stays here and why (its `Policy`), when `env`
    distributes."""
    if client(env) is None:
        return
    policy = flavour.dist
    if policy.stays and flavour.name not in _said and (policy.stays_if is None or policy.stays_if(env)):
        _said.add(flavour.name)
        sys.stderr.write(f"offload: note: sccache-dist: {policy.stays}: {policy.why}\n")


def unlaunched_argv(env, com: str, target, sources) -> list[str]:
    """The compile `com` of `target` from `sources` in `env` (its build environment) as the
    compiler gets it, without any launcher: what a toolchain is packed for, what runs here when a
    compile must not go through the tool's server. A one-line command."""
    cmd = _actions.command_lines(_nodes.override(env, {"_OFFLOAD_LAUNCH": ""}), com, [target], sources)[0]
    return _toolchain.argv_as_run(cmd, env, _toolchain.build_env(env))


def _device_argv(device, com: str = "$OFFLOAD_DEVICECOM") -> list[str]:
    """A compile node's command (`com`: a device compile's, an OpenMP source's one job) as clang
    gets it, less launcher, `-c`, output, source and CUID: what its toolchain is packed for."""
    argv = unlaunched_argv(_nodes.build_env(device), com, device, _nodes.sources(device))
    out, skip = [], False
    sources = {str(s) for s in _nodes.sources(device)}
    for i, a in enumerate(argv):
        if skip:
            skip = False
        elif a == "-o":
            skip = True
        elif a == "-Xclang" and argv[i + 1:i + 2] and argv[i + 1].startswith("-cuid="):
            skip = True   # the CUID straight to -cc1 (a clang whose driver drops `-cuid=`)
        elif a == "-c" or a in sources or a.startswith("-cuid="):
            continue
        else:
            out.append(a)
    return out


def attach(env, made, flavour) -> None:
    """For the compile nodes `made` of one source, built with `flavour`: when `env` distributes,
    make its server's configuration (and toolchain) a prerequisite of the compiles, as the
    flavour's `Policy` says."""
    c = client(env)
    if c is None:
        return
    if SCons.Script.GetOption("clean"):
        # `.offload-dist` goes whatever this run sends: an earlier build's servers (other archs, an
        # OpenMP build sent whole before an AMD arch was added) and the OpenMP entry table.
        env.Clean(list(made), os.path.join(_nodes.abspath(env.Dir("#")), ".offload-dist"))
    if flavour.dist.unlaunched:
        return
    if flavour.dist.whole:
        if flavour.whole(env):   # (else its per-arch compiles run here, without a launcher)
            _attach_whole(env, c, made)
        return
    argv = None
    parts = getattr(_nodes.marks(made[0]), "offload_parts", None) or Parts()
    devices = list(parts.devices.values())
    if flavour.dist.packed and devices and not flavour.dist.all_stay(env):
        argv = _device_argv(devices[0])
    made = list(made) + devices + [n for n in (parts.host,) if n is not None]
    key = _env_key(env)
    earlier = _MADE.setdefault(key, [])
    srv = _SERVERS.get(key)
    targets = list(made)
    if srv is None or (argv and srv.archive is None):
        # The environment's first HIP source: its server gets a toolchain, and every compile of
        # the environment made before goes through that server too.
        srv = _SERVERS[key] = server(env, c, argv)
        if srv.config not in _NODES:
            _NODES[srv.config] = _server_nodes(env, c, srv, argv)
        targets = earlier + targets
    earlier.extend(made)
    env.Requires(targets, _NODES[srv.config])
    for n in targets:
        _nodes.marks(n).offload_dist_launcher = _prefix(srv)


def _attach_whole(env, c: Client, made) -> None:
    """`made`, one source's fat object compiled in one job: through the environment's server for
    such jobs, whose toolchain is packed for the first one (their command lines differ only in
    the source and the object)."""
    key = _env_key(env) + ("whole",)
    srv = _SERVERS.get(key)
    if srv is None:
        fat = made[0]
        argv = _device_argv(fat, "$OFFLOAD_FATCOM")
        # C and C++ alike: a device job includes more headers in C++ (`<cstdlib>`).
        srv = _SERVERS[key] = server(env, c, argv, (".c", ".cpp"), "OpenMP compiles")
        if srv.config not in _NODES:
            _NODES[srv.config] = _server_nodes(env, c, srv, argv)
    env.Requires(made, _NODES[srv.config])
    for n in made:
        _nodes.marks(n).offload_dist_launcher = _prefix(srv)


def _server_nodes(env, c: Client, srv: Server, argv: list[str] | None) -> list:
    """The configuration (and toolchain archive) of `srv` as nodes of the build. What they are
    made from is in the server's key, which names their folder: their source is that key."""
    targets = [srv.config] + ([srv.archive] if srv.archive else [])
    penv = _toolchain.build_env(env)

    def make(target, source, env):
        write_config(c, srv, argv, penv)
        _start(c, srv, penv, os.path.join(srv.folder, "status.json"))
        return 0

    made = env.Command(targets, _nodes.value_node(os.path.basename(srv.folder)), SCons.Action.Action(make, "$OFFLOAD_DISTSERVERSTR", varlist=[]))
    # `scons -c` removes the server's folder; the server is stopped first.
    env.Clean(made, [srv.folder, os.path.dirname(srv.folder)])
    if SCons.Script.GetOption("clean"):
        _stop(c, srv, penv)
    return made


def write_config(c: Client, srv: Server, argv: list[str] | None, penv: dict) -> None:
    """Write the server's configuration: the user's settings, the includes rewritten, and for
    the HIP device compiles' clang a toolchain packed here, unless the user's configuration names
    one for it already. A toolchain that cannot be packed keeps that clang's compiles here
    (`no_dist`): sent with the toolchain sccache packs itself they would fail on the server."""
    os.makedirs(srv.folder, exist_ok=True)
    toolchains = list(c.settings.get("dist", {}).get("toolchains") or [])
    if srv.archive and srv.compiler:
        if any(t.get("compiler_executable") == srv.compiler for t in toolchains):
            sys.stderr.write(f"offload: note: sccache-dist: '{c.path}' names a toolchain for '{srv.compiler}': "
                             f"its {srv.what} take that one\n")
        else:
            try:
                files = _dist_toolchain.contents(srv.compiler, [(argv, sfx) for sfx in srv.suffixes], penv)
                size = _dist_toolchain.write(srv.archive, files)
            except (_dist_toolchain.PackError, OSError) as exc:
                sys.stderr.write(f"offload: note: sccache-dist: the toolchain of '{srv.compiler}' could not be "
                                 f"packed ({exc}): its compiles run here\n")
                toolchains.append({"type": "no_dist", "compiler_executable": srv.compiler})
            else:
                sys.stderr.write(f"offload: note: sccache-dist: packed {len(files)} files of '{srv.compiler}' "
                                 f"({size / 1e6:.0f} MB) for its {srv.what}\n")
                toolchains.append({"type": "path_override", "compiler_executable": srv.compiler,
                                   "archive": srv.archive, "archive_compiler_executable": srv.compiler})
    settings = dict(c.settings)
    dist = dict(settings.get("dist") or {})
    dist["rewrite_includes_only"] = True
    dist["toolchains"] = toolchains
    settings["dist"] = dist
    part = srv.config + ".part"
    with open(part, "w", encoding="utf-8") as f:
        f.write(f"# Written by the offload SCons tool from {c.path}: its settings, the includes rewritten\n"
                "# for the build servers, and the toolchains of this build's device compiles.\n")
        f.write(toml(settings))
    os.replace(part, srv.config)


def _stop(c: Client, srv: Server, penv: dict) -> None:
    try:
        subprocess.run([c.sccache, "--stop-server"], capture_output=True, stdin=subprocess.DEVNULL, timeout=60,
                       env=dict(penv, **_server_env(srv)))
    except (OSError, subprocess.TimeoutExpired):
        pass


def _start(c: Client, srv: Server, penv: dict, out: str) -> None:
    """Start the tool's server with its new configuration and say what the scheduler answers
    (compiles run here when it has no build server); what it answered, with the socket, goes to
    `out` (status.json)."""
    try:
        cp = subprocess.run([c.sccache, "--dist-status"], capture_output=True, text=True, errors="replace",
                            env=dict(penv, **_server_env(srv)), stdin=subprocess.DEVNULL, timeout=120)
        answer = cp.stdout.strip() or cp.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        answer = f"sccache did not answer: {exc}"
    try:
        status = json.loads(answer)
    except ValueError:
        status = None
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"socket": srv.socket, "config": srv.config, "scheduler": c.scheduler,
                   "status": answer if status is None else status}, f, indent=1)
        f.write("\n")
    servers = None
    if isinstance(status, dict) and isinstance(status.get("SchedulerStatus"), list):
        servers = (status["SchedulerStatus"][1:2] or [{}])[0].get("num_servers")
    key = ("status", srv.folder)
    if key not in _said:
        _said.add(key)
        if servers:
            sys.stderr.write(f"offload: note: sccache-dist ({c.scheduler}, {servers} build server(s)): compiles go "
                             f"through the tool's sccache server (`SCCACHE_SERVER_UDS={shlex.quote(srv.socket)} "
                             f"{c.sccache} --show-stats` shows what it sent)\n")
        else:
            sys.stderr.write(f"offload: note: sccache-dist: no build server answers ({answer[:200]}); "
                             "sccache compiles here\n")


COMMANDS: dict = {}
COMSTRS = {"OFFLOAD_DISTSERVERSTR": "SCCACHE-DIST ${TARGETS[0]}"}  # a Python step: no *COM
PSEUDO_BUILDERS: list = []


def builders() -> dict:
    return {}   # the server's nodes are `env.Command`s made when a compile first needs them


def toml(settings: dict) -> str:
    """`settings` (as `tomllib` read them, plus the tool's own) as TOML text: the standard library
    reads TOML but does not write it; `tomli_w` (a dependency of the tool) does, dates included.
    Imported here, so a build that does not distribute never loads it."""
    import tomli_w
    return tomli_w.dumps(settings)
