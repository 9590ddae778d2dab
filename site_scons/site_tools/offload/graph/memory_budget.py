"""How many memory-heavy steps run at once: `OFFLOAD_LINK_MEMORY`.

A device link is an LTO of every device object of a program for one arch: at 1,000 sources one AMD
arch's `DEVICELINK` holds ~5 GB for minutes, and `scons -j16` would start all of a program's
archs (and nvcc's device links, and LTO final links) together, past the machine's memory. SCons's
scheduler knows nothing of memory; its actions run in worker threads of one process, so the steps
named here wait inside their action (`scons.actions.budgeted`) until their estimate fits in what
the budget has left: the sum of the estimates of those running plus this one's stays within the
budget, except that a step always runs when no other budgeted step does (one that needs more
than the whole budget runs alone). Waiting steps start in the order they asked; a step that waits
says so once. Other steps (compiles) are not counted: they hold a job slot as usual.

The budget (`OFFLOAD_LINK_MEMORY`): `'auto'` (the default) is the memory available when the first
budgeted step asks (`MemAvailable` of /proc/meminfo, else the free pages `os.sysconf` counts);
a number of bytes or a size (`'8G'`, `'512M'`) sets it; `0`, `False` or `'off'` turns it off.

A step's estimate: the peak memory the build report recorded for its target the last time it
ran (`insight.report.recorded_peak`: the largest resident size of the commands it waited for,
kept in the report's records while the report is on); else, before a reported build, a guess
from its inputs: `BASE_BYTES`, plus `BITCODE_FACTOR` times the bytes of its inputs that are LLVM
bitcode (an LTO links them: an AMD device link, a link of `-flto` objects) and `INPUT_FACTOR`
times the bytes of the others (objects a linker or nvlink reads).

Why two factors: an LTO holds far more than its inputs' bytes, and more per input the more
inputs it links. Measured on the 4-arch OpenMP project of `bench/scons_scale.py` (one small
kernel per source, ~15 KB of device bitcode each, clang 19): an AMD device link of 100 sources
(1.5 MB of bitcode) peaked at 393 MB; one of 1,000 sources (15.5 MB) at 7.7 GB, and ran more
than 43 CPU minutes. With one factor of 4 the guess there was 320 MB, so a first build ran
every AMD device link at once, past the memory of the machine the estimate was meant to protect.
`BITCODE_FACTOR` (600) guesses 9.6 GB there and 1.2 GB at 100 sources: a guess too high only
makes links wait for each other until a reported build records what they really took; too low,
they run together past memory."""

from __future__ import annotations

import collections
import contextlib
import os
import re
import sys
import threading

import SCons.Errors

from ..insight import report as _report
from ..scons import nodes as _nodes

#: The guess of a step's peak memory before any record of it: LTO holds several times its
#: inputs' bitcode in memory, the linker and the code generator one module at a time.
INPUT_FACTOR = 4
BITCODE_FACTOR = 600
BASE_BYTES = 256 << 20

_UNITS = {"": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
          "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}
_OFF = ("off", "false", "no", "none", "0")


class SettingError(ValueError):
    """`OFFLOAD_LINK_MEMORY` is neither 'auto', a size nor off."""


def parse_limit(value) -> int | str | None:
    """`OFFLOAD_LINK_MEMORY`'s value: 'auto', a number of bytes, or None (off)."""
    if value is None or value is False or (isinstance(value, (int, float)) and not isinstance(value, bool)
                                           and value <= 0):
        return None
    if value is True:
        return "auto"
    if isinstance(value, (int, float)):
        return int(value)
    text = str(value).strip().lower()
    if text in ("", "auto"):
        return "auto"
    if text in _OFF:
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([a-z]*)", text)
    if not m or m.group(2) not in _UNITS:
        raise SettingError(f"OFFLOAD_LINK_MEMORY: {value!r} is not 'auto', a size ('8G', '512M', bytes) "
                           "nor off (0, False, 'off')")
    size = int(float(m.group(1)) * _UNITS[m.group(2)])
    return size if size > 0 else None


def check(env) -> None:
    """Refuse a bad `OFFLOAD_LINK_MEMORY` when the SConscript asks for a link (a `UserError`)."""
    try:
        parse_limit(env.get("OFFLOAD_LINK_MEMORY", "auto"))
    except SettingError as exc:
        raise SCons.Errors.UserError(f"offload: {exc}") from None


def available_memory() -> int | None:
    """The memory available now: `MemAvailable` (Linux), else free pages times the page size."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


def gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB"


def _wake_all(cond) -> None:
    """`cond.notify_all()`, named through its class: SCons's tasks have a member of that name too."""
    threading.Condition.notify_all(cond)


class Budget:
    """Bytes held by running steps, and the steps waiting for them, first come first served."""

    def __init__(self):
        self.cond = threading.Condition()
        self.held = 0
        self.running = 0
        self.queue: collections.deque = collections.deque()
        self._auto: int | None = None

    def auto_limit(self) -> int | None:
        with self.cond:
            if self._auto is None:
                self._auto = available_memory() or 0
            return self._auto or None

    def acquire(self, need: int, limit: int, on_wait=None) -> None:
        """Wait until `need` fits: nothing else runs, or the running steps' bytes plus `need` are
        within `limit`, and no earlier step waits. `on_wait(free)` is called once if it waits."""
        ticket = object()
        with self.cond:
            self.queue.append(ticket)
            said = False
            while not (self.queue[0] is ticket and (self.running == 0 or self.held + need <= limit)):
                if not said and on_wait is not None:
                    said = True
                    on_wait(max(0, limit - self.held))
                self.cond.wait()
            self.queue.popleft()
            self.held += need
            self.running += 1
            _wake_all(self.cond)  # the next in line may fit too

    def release(self, need: int) -> None:
        with self.cond:
            self.held -= need
            self.running -= 1
            _wake_all(self.cond)

    @contextlib.contextmanager
    def hold(self, need: int, limit: int | None, on_wait=None):
        if limit is None:
            yield
            return
        self.acquire(need, limit, on_wait)
        try:
            yield
        finally:
            self.release(need)


BUDGET = Budget()


def estimate(target, source) -> int:
    """A step's peak memory: recorded by the build report, else guessed from its inputs' bytes."""
    peak = _report.recorded_peak(target[0])
    if peak:
        return peak
    # (here: a guess is made only for a step no report measured, not by every SConstruct)
    from offload_tool.formats.kinds import BC_MAGIC, BC_WRAPPER_MAGIC

    bitcode = other = 0
    for n in source:
        try:
            with open(_nodes.abspath(n), "rb") as f:
                head, size = f.read(4), os.fstat(f.fileno()).st_size
        except OSError:
            continue
        if head in (BC_MAGIC, BC_WRAPPER_MAGIC):
            bitcode += size
        else:
            other += size
    return BITCODE_FACTOR * bitcode + INPUT_FACTOR * other + BASE_BYTES


def _label(word: str, target) -> str:
    image = getattr(_nodes.marks(target[0]), "offload_image", None)
    arch = image.get("arch") if isinstance(image, dict) else None
    return " ".join(x for x in (word, arch, str(target[0])) if x)


def hold(word: str):
    """The hook of a memory-heavy step's action (`scons.actions.budgeted`): a function of its
    targets, sources and environment giving the context its command runs in. `word`: how the
    step's line starts (`DEVICELINK`), for the note when it waits."""

    def held(target, source, env):
        limit = parse_limit(env.get("OFFLOAD_LINK_MEMORY", "auto"))
        if limit == "auto":
            limit = BUDGET.auto_limit()
        if limit is None:
            return contextlib.nullcontext()
        need = estimate(target, source)

        def on_wait(free: int) -> None:
            sys.stderr.write(f"offload: note: {_label(word, target)} waits for memory (needs ~{gib(need)}, "
                             f"{gib(free)} free of the budget)\n")
            sys.stderr.flush()

        return BUDGET.hold(need, limit, on_wait)

    return held
