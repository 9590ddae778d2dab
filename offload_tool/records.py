"""Record classes: the library's plain data, cheap to import.

Every CLI call is a Python process of its own (a build runs hundreds: the bundler, the packager,
the tool's helpers), so what the library imports at start-up is paid on every call.
`dataclasses` imports `inspect` (and with it `ast`, `dis` and `tokenize`): on the development VM
about 20 ms of a 0.1 s start, plus ~0.4 ms to process each decorated class, more than the whole
work of a small `-list` or `offload-packager` run.  A record class instead names its fields in
`__slots__` and writes its own `__init__` (explicit, with the defaults in its signature); this
base gives it what `@dataclass` would: a `repr` of every field and field-wise equality between
instances of the same class (`_uncompared` names fields left out, as `field(compare=False)`
does, and `_unrepresented` those `repr` leaves out, as `field(repr=False)`), with `__hash__` unset.  `FrozenRecord` is `@dataclass(frozen=True)`: fields set once in
`__init__` through `_set`, then read-only (`FrozenRecordError`, an `AttributeError`), hashable
by the compared fields, and copied or pickled by its fields.
"""

from __future__ import annotations

__all__ = ["Record", "FrozenRecord", "FrozenRecordError"]


class FrozenRecordError(AttributeError):
    """An assignment to a field of a `FrozenRecord` (as `dataclasses.FrozenInstanceError`)."""


class Record:
    """Base of a mutable record: subclasses declare their fields in `__slots__`."""

    __slots__ = ()
    #: Fields equality ignores, and fields `repr` leaves out (bulky bytes).
    _uncompared: frozenset[str] = frozenset()
    _unrepresented: frozenset[str] = frozenset()
    #: All fields in declaration order (bases first), and the compared ones: set per subclass.
    _record_fields: tuple[str, ...] = ()
    _compared_fields: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        fields: list[str] = []
        for klass in reversed(cls.__mro__):
            for name in klass.__dict__.get("__slots__", ()):
                if name not in fields:
                    fields.append(name)
        cls._record_fields = tuple(fields)
        cls._compared_fields = tuple(f for f in fields if f not in cls._uncompared)

    def _values(self) -> tuple:
        return tuple(getattr(self, name) for name in self._compared_fields)

    def _asdict(self) -> dict:
        """Every field by name, in declaration order (`dataclasses.asdict` without the recursion)."""
        return {name: getattr(self, name) for name in self._record_fields}

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._record_fields
                          if name not in self._unrepresented)
        return f"{type(self).__qualname__}({inner})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]


class FrozenRecord(Record):
    """Base of an immutable, hashable record: `__init__` sets each field with `self._set`."""

    __slots__ = ()

    def _set(self, name: str, value: object) -> None:
        object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenRecordError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenRecordError(f"cannot delete field {name!r}")

    def __hash__(self) -> int:
        return hash(self._values())

    def __getstate__(self) -> dict:
        return self._asdict()

    def __setstate__(self, state: dict) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)
