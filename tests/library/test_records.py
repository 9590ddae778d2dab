"""offload_tool.records: the data classes' base (what `@dataclass` gave them), and the CLIs'
start-up without `dataclasses`, `inspect` and `typing` (each CLI call is a process of its own)."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from offload_tool.formats.bundle import BundleEntry, write_binary_bundle
from offload_tool.formats.offload_binary_common import OffloadImage
from offload_tool.records import FrozenRecord, FrozenRecordError, Record
from offload_tool.rules.bundle_id import BundleEntryID

REPO = Path(__file__).resolve().parents[2]


class Point(Record):
    __slots__ = ("x", "y", "note", "blob")
    _uncompared = frozenset({"note"})
    _unrepresented = frozenset({"blob"})

    def __init__(self, x: int, y: int = 0, note: str = "", blob: bytes = b"") -> None:
        self.x = x
        self.y = y
        self.note = note
        self.blob = blob


class Key(FrozenRecord):
    __slots__ = ("name", "size")

    def __init__(self, name: str, size: int = 1) -> None:
        self._set("name", name)
        self._set("size", size)


class Key3(Key):
    __slots__ = ("extra",)

    def __init__(self, name: str, size: int = 1, extra: str = "") -> None:
        super().__init__(name, size)
        self._set("extra", extra)


def test_record_repr_eq_and_uncompared_fields():
    p = Point(1, 2, "a", b"big")
    assert repr(p) == "Point(x=1, y=2, note='a')"  # `blob` is not shown
    assert p == Point(1, 2, "b", b"big")  # `note` is not compared
    assert p != Point(1, 3, "a", b"big") and p != Point(1, 2, "a")
    assert p != (1, 2)  # another class never equals
    assert p._asdict() == {"x": 1, "y": 2, "note": "a", "blob": b"big"}
    with pytest.raises(TypeError):
        hash(p)  # mutable records are unhashable, as eq=True dataclasses
    p.y = 5
    assert p.y == 5
    with pytest.raises(AttributeError):
        p.z = 1  # fields are the slots only


def test_frozen_record_read_only_hashable_copied_and_pickled():
    k = Key("a", 2)
    with pytest.raises(FrozenRecordError):
        k.size = 3
    with pytest.raises(AttributeError):
        del k.name
    assert k == Key("a", 2) and hash(k) == hash(Key("a", 2)) and len({k, Key("a", 2), Key("b")}) == 2
    assert pickle.loads(pickle.dumps(k)) == k
    assert copy.copy(k) == k and copy.deepcopy(k) == k
    k3 = Key3("a", 2, "x")
    assert k3._record_fields == ("name", "size", "extra")
    assert repr(k3) == "Key3(name='a', size=2, extra='x')" and k3 != Key("a", 2)
    assert pickle.loads(pickle.dumps(k3)) == k3


def test_library_records_keep_their_dataclass_behaviour():
    assert BundleEntryID("hip", "amdgcn-amd-amdhsa-", "gfx90a") == BundleEntryID("hip", "amdgcn-amd-amdhsa-", "gfx90a")
    assert len({BundleEntryID("hip", "t"), BundleEntryID("hip", "t")}) == 1
    a = OffloadImage(1, 2, 0, {"triple": "x"}, b"img", offset=8, size=100)
    assert a == OffloadImage(1, 2, 0, {"triple": "x"}, b"img")  # offset, size, version, index not compared
    assert BundleEntry("host-x86_64-unknown-linux-gnu", b"") == BundleEntry("host-x86_64-unknown-linux-gnu", b"")


_CHECK = """
import sys
{setup}
rc = main({argv!r})
heavy = sorted({{"dataclasses", "inspect", "typing", "ast"}} & set(sys.modules))
print(rc, heavy)
"""


@pytest.mark.parametrize("module, argv", [
    ("offload_tool.cli.bundler", ["-list", "-type=o", "-input={bundle}"]),
    ("offload_tool.cli.packager", ["-o", "{out}", "--image=file={image},triple=amdgcn-amd-amdhsa,arch=gfx90a,kind=hip"]),
    ("offload_tool.cli.tool", ["inspect", "{bundle}"]),
    ("offload_tool.cli.tool", ["verify", "{bundle}"]),
])
def test_clis_start_without_dataclasses_inspect_or_typing(tmp_path, module, argv):
    """A CLI run imports none of them (together ~30 ms of every call's start on the development VM)."""
    image = tmp_path / "image.o"
    image.write_bytes(b"\x7fELF" + bytes(60))
    bundle = tmp_path / "b.o"
    with open(bundle, "wb") as f:
        write_binary_bundle([BundleEntry("host-x86_64-unknown-linux-gnu", b"host"),
                             BundleEntry("hip-amdgcn-amd-amdhsa--gfx90a", b"device")], f)
    args = [a.format(bundle=bundle, image=image, out=tmp_path / "out.pkg") for a in argv]
    code = _CHECK.format(setup=f"from {module} import main", argv=args)
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    last = res.stdout.strip().splitlines()[-1]
    assert last == "0 []", (res.stdout, res.stderr)
