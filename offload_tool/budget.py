"""Resource budgets: how much work one run may do, whatever its input claims.

A small crafted file can claim huge sizes, point many entries at the same bytes, nest containers
inside containers or expand 10,000-fold when decompressed.  LLVM's tools answer such files in
milliseconds because they do bounded work per byte of input; every parser here charges the work it
does against one budget so it does too.  The limits are far above what any legitimate file needs
and can be raised for a run:

    OFFLOAD_TOOL_BUDGET="decompressed=16G,entries=4M"  offload-bundler ...
    offload-bundler --budget=decompressed=16G ...        (every CLI takes --budget)

Kinds (sizes take K/M/G/T suffixes, powers of 1024):

- `decompressed`: bytes produced by decompression (CCOB payloads, zstd fatbin entries), all
  decompressions of the run together.
- `entries`: containers, entries, archive members, sections and images visited, together.
- `depth`: how deeply containers may nest (an archive in a bundle in an ELF section...).
- `names`: bytes of names and strings made into Python strings (section names, member names,
  OffloadBinary string tables, entry IDs).

A run is `with budget.run(): ...` (the CLIs and operations open one); parsers call
`budget.charge(kind, amount, what)`, which raises `BudgetError` naming `what`, the kind and the
limit when the run's total would pass it.  Outside a run each charge is checked on its own."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import re
from .errors import BudgetError
from .records import FrozenRecord, Record

__all__ = ["Limits", "DEFAULT_LIMITS", "ENV_VAR", "parse_limits", "from_option", "limits", "run", "metered",
           "charge", "nested", "remaining", "format_size", "BudgetError"]

ENV_VAR = "OFFLOAD_TOOL_BUDGET"
KINDS = ("decompressed", "entries", "depth", "names")


class Limits(FrozenRecord):
    """The most one run may decompress (bytes), read as entries, nest, and hold as names (bytes)."""

    __slots__ = KINDS

    def __init__(self, decompressed: int = 4 << 30, entries: int = 1 << 20, depth: int = 8,
                 names: int = 256 << 20) -> None:
        self._set("decompressed", decompressed)
        self._set("entries", entries)
        self._set("depth", depth)
        self._set("names", names)

    def replace(self, **changes) -> "Limits":
        values = {k: getattr(self, k) for k in KINDS}
        values.update(changes)
        return Limits(**values)


DEFAULT_LIMITS = Limits()

_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_ITEM = re.compile(r"^\s*([a-z]+)\s*=\s*([0-9]+)\s*([KMGT]?)(?:i?B)?\s*$", re.I)


def parse_limits(text: str, base: Limits = DEFAULT_LIMITS, *, source: str = "--budget") -> Limits:
    """`kind=N[K|M|G|T],...` over `base`; a `UsageError` naming `source` on anything else."""
    from .errors import UsageError

    changes: dict[str, int] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        m = _ITEM.match(item)
        if not m or m.group(1).lower() not in KINDS:
            raise UsageError(f"{source}: expected kind=N[K|M|G|T] with kind one of {', '.join(KINDS)}, got "
                             f"{item.strip()!r}")
        value = int(m.group(2)) * _SUFFIX[m.group(3).upper()]
        if value <= 0 or value >= 1 << 63:
            raise UsageError(f"{source}: {m.group(1).lower()} must be between 1 and 2^63-1, got {item.strip()!r}")
        changes[m.group(1).lower()] = value
    return base.replace(**changes)


def _from_environment() -> Limits:
    text = os.environ.get(ENV_VAR, "")
    return parse_limits(text, source=ENV_VAR) if text.strip() else DEFAULT_LIMITS


def from_option(values: list[str]) -> Limits:
    """The limits of a CLI run: the environment's, with every `--budget=...` value given over them
    (later ones win)."""
    return parse_limits(",".join(values), _from_environment())


class _Meter(Record):
    __slots__ = ("limits", "used")

    def __init__(self, limits: Limits, used: dict[str, int] | None = None) -> None:
        self.limits = limits
        self.used = dict.fromkeys(KINDS, 0) if used is None else used


_current: contextvars.ContextVar[_Meter | None] = contextvars.ContextVar("offload_tool_budget", default=None)


def limits() -> Limits:
    """The limits in force: the current run's, else the environment's, else the defaults."""
    meter = _current.get()
    return meter.limits if meter is not None else _from_environment()


@contextlib.contextmanager
def run(limits_: Limits | None = None):
    """One run's budget.  Nested `run()`s without limits join the enclosing run (an operation
    called by a CLI charges the CLI's run); given limits start a fresh meter."""
    outer = _current.get()
    if outer is not None and limits_ is None:
        yield outer.limits
        return
    meter = _Meter(limits_ if limits_ is not None else _from_environment())
    token = _current.set(meter)
    try:
        yield meter.limits
    finally:
        _current.reset(token)


def metered(func):
    """Decorator for operations: `func` runs in a budget run (the caller's, if it opened one)."""
    @functools.wraps(func)
    def in_run(*args, **kwargs):
        with run():
            return func(*args, **kwargs)
    return in_run


def format_size(n: int) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} bytes" if n != 1 else "1 byte"


def _describe(kind: str, n: int) -> str:
    return format_size(n) if kind in ("decompressed", "names") else str(n)


def charge(kind: str, amount: int, what: str) -> None:
    """Count `amount` of `kind` against the run's budget; `BudgetError` if that passes the limit.
    `what` names the entry or structure being read (it goes into the message)."""
    meter = _current.get()
    lim = getattr(meter.limits if meter is not None else _from_environment(), kind)
    total = amount + (meter.used[kind] if meter is not None else 0)
    if total > lim:
        raise BudgetError(f"{what}: over the {kind} budget of {_describe(kind, lim)} "
                          f"(raise it with --budget={kind}=N or {ENV_VAR}={kind}=N)")
    if meter is not None:
        meter.used[kind] = total


@contextlib.contextmanager
def nested(what: str):
    """One level deeper into nested containers, for as long as the block runs."""
    meter = _current.get()
    if meter is None:
        with run():
            with nested(what):
                yield
        return
    charge("depth", 1, what)
    try:
        yield
    finally:
        meter.used["depth"] -= 1


def remaining(kind: str) -> int:
    """What is left of `kind` in the current run (the whole limit outside a run): a decompressor
    uses it as its output cap."""
    meter = _current.get()
    if meter is None:
        return getattr(_from_environment(), kind)
    return getattr(meter.limits, kind) - meter.used[kind]
