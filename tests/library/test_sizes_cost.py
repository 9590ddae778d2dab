"""Size budgets (`inspect --sizes`, `verify --max-bytes`) and cost estimates (`offload-tool cost`)
on files and reports written here, with the answers stated."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from offload_tool.errors import OffloadError, UsageError
from offload_tool.formats.offload_binary import make_image, write_offload_binary
from offload_tool.ops import cost
from offload_tool.ops.inspector import inspect_buffer, size_summary
from offload_tool.ops.verify import check_max_bytes, parse_max_bytes


def _package(*images: tuple[str, str, int]) -> bytes:
    # each image a minimal valid ELF64 header (verify checks an image's structure), padded to n bytes
    return b"".join(write_offload_binary(make_image(b"\x7fELF\x02\x01\x01" + bytes(n - 7),
                                                    {"triple": triple, "arch": arch},
                                                    image_kind=1, offload_kind=1))
                    for triple, arch, n in images)


PKG = _package(("amdgcn-amd-amdhsa", "gfx90a", 1000), ("amdgcn-amd-amdhsa", "gfx90a:xnack+", 500),
               ("nvptx64-nvidia-cuda", "sm_80", 3000))


def test_size_summary_per_arch_and_container():
    s = size_summary(inspect_buffer(PKG, "p"), "p", len(PKG))
    assert s["archs"] == {"gfx90a": {"bytes": 1000, "images": 1}, "gfx90a:xnack+": {"bytes": 500, "images": 1},
                          "sm_80": {"bytes": 3000, "images": 1}}
    assert s["containers"] == {"offload-binary": {"bytes": 4500, "images": 3}}
    assert s["device_bytes"] == 4500 and s["file_bytes"] == len(PKG) and s["host_bytes"] == len(PKG) - 4500


def test_inspect_sizes_cli(tmp_path):
    f = tmp_path / "p.pkg"
    f.write_bytes(PKG)
    res = run_cli("tool", "inspect", "--sizes", "--json", f)
    assert res.returncode == 0, res.stderr
    (s,) = json.loads(res.stdout)
    assert s["archs"]["sm_80"]["bytes"] == 3000
    text = run_cli("tool", "inspect", "--sizes", f).stdout.decode()
    assert f"{f}: {len(PKG)} bytes, 4500 in device images" in text
    assert "sm_80" in text and "3000" in text


@pytest.mark.parametrize("text,expected", [
    ("gfx90a:1000", {"gfx90a": 1000}),
    ("gfx90a:xnack+:2K, total:1M,device:3", {"gfx90a:xnack+": 2048, "total": 1 << 20, "device": 3}),
    ("sm_80:1GiB", {"sm_80": 1 << 30}),
])
def test_parse_max_bytes(text, expected):
    assert parse_max_bytes(text) == expected


@pytest.mark.parametrize("bad", ["gfx90a", "gfx90a:", ":5", "gfx90a:5X", "gfx90a:-1", "total:1.5M", ""])
def test_parse_max_bytes_rejects(bad):
    with pytest.raises(UsageError):
        parse_max_bytes(bad)


def test_budgets():
    images = inspect_buffer(PKG, "p")
    # gfx90a counts its xnack+ image too (1500); the exact target ID only its own.
    assert check_max_bytes(images, "p", len(PKG), {"gfx90a": 1500, "gfx90a:xnack+": 500, "sm_80": 3000,
                                                   "device": 4500, "total": len(PKG)}) == []
    problems = check_max_bytes(images, "p", len(PKG), {"gfx90a": 1499, "total": 100})
    assert problems == [
        "p: gfx90a device images take 1500 bytes, over the budget of 1499 bytes (--max-bytes=gfx90a:1499, 1 bytes over)",
        f"p: file size take {len(PKG)} bytes, over the budget of 100 bytes (--max-bytes=total:100, "
        f"{len(PKG) - 100} bytes over)"]


def test_verify_max_bytes_cli(tmp_path):
    f = tmp_path / "p.pkg"
    f.write_bytes(PKG)
    ok = run_cli("tool", "verify", f"--max-bytes=sm_80:3000,total:{len(PKG)}", f)
    assert ok.returncode == 0 and b"within --max-bytes" in ok.stdout, ok.stdout + ok.stderr
    over = run_cli("tool", "verify", "--max-bytes=sm_80:2999", "--max-bytes=device:10K", f)
    assert over.returncode == 1
    assert over.stdout.decode().splitlines() == [
        f"{f}: sm_80 device images take 3000 bytes, over the budget of 2999 bytes (--max-bytes=sm_80:2999, 1 bytes over)"]
    bad = run_cli("tool", "verify", "--max-bytes=sm_80", f)
    assert bad.returncode == 1 and bad.stderr.decode().startswith("offload-tool: error: --max-bytes: 'sm_80'")
    assert b"Traceback" not in bad.stderr


# --------------------------------------------------------------------------------------------
# Cost estimates from a report

def _action(kind, slot, arch, wall, cpu=None, status="built", archs=None):
    return {"kind": kind, "slot": slot, "arch": arch, "archs": archs if archs is not None else ([arch] if arch else []),
            "status": status, "wall_s": wall, "cpu_s": cpu, "targets": [slot]}


REPORT = {
    "schema": cost.SCHEMA, "jobs": 2,
    "actions": [
        _action("host-compile", "a.host.o", None, 1.0, 0.5),
        _action("device-compile", "a.{arch}.bc", "gfx90a", 2.0, 1.0),
        _action("device-compile", "a.{arch}.bc", "gfx942", 4.0, 3.0),
        _action("device-compile", "b.{arch}.bc", "gfx90a", 1.0, 1.0),
        _action("device-compile", "b.{arch}.bc", "gfx942", 0.0, 0.0, status="cached"),
        _action("device-link", "app.{arch}.devlink.o", "gfx90a", 5.0, 5.0),
        _action("device-link", "app.{arch}.devlink.o", "gfx942", 7.0, 6.0, status="up-to-date"),
        _action("nvcc-compile", "c.o", None, 6.0, 6.0, archs=["sm_80", "sm_90"]),
    ],
    "binaries": [{"path": "app", "file_bytes": 10000, "archs": {"gfx90a": {"bytes": 1000}, "gfx942": {"bytes": 3000}}},
                 {"path": "cu", "file_bytes": 5000, "archs": {"sm_80": {"bytes": 800}, "sm_90": {"bytes": 1200}}}],
}


def test_estimate_amd():
    e = cost.estimate_added_arch(REPORT, "gfx1201")
    assert e.reference_archs == ["gfx90a", "gfx942"]
    slots = {(a.kind, a.slot): (a.wall_s, a.cpu_s, a.based_on) for a in e.actions}
    assert slots == {("device-compile", "a.{arch}.bc"): (3.0, 2.0, ["gfx90a", "gfx942"]),
                     ("device-compile", "b.{arch}.bc"): (1.0, 1.0, ["gfx90a"]),  # the cache hit does not count
                     ("device-link", "app.{arch}.devlink.o"): (6.0, 5.5, ["gfx90a", "gfx942"])}
    assert e.wall_s == 10.0 and e.cpu_s == 8.5
    assert e.wall_range == (8.0, 11.0)
    assert e.binaries == {"app": {"bytes": 2000, "file_bytes": 10000, "based_on": ["gfx90a", "gfx942"]}}
    assert "gfx90a, gfx942" in e.method


def test_estimate_nvidia_grows_the_multi_arch_compile():
    e = cost.estimate_added_arch(REPORT, "sm_86")
    (grown,) = e.actions
    assert grown.grows and grown.wall_s == 3.0 and grown.slot == "c.o"
    assert e.binaries["cu"]["bytes"] == 1000


@pytest.mark.parametrize("arch,error", [("gfx90a", UsageError), ("banana", UsageError)])
def test_estimate_refuses(arch, error):
    with pytest.raises(error):
        cost.estimate_added_arch(REPORT, arch)


def test_estimate_needs_a_reference_arch():
    only_nv = dict(REPORT, actions=[a for a in REPORT["actions"] if not (a["arch"] or "").startswith("gfx")])
    with pytest.raises(OffloadError, match="no AMD arch"):
        cost.estimate_added_arch(only_nv, "gfx1201")


@pytest.mark.parametrize("bad", [[], {"schema": "x"}, dict(REPORT, actions=[{"kind": 1}]),
                                 dict(REPORT, actions=[dict(_action("k", "s", "gfx90a", 1.0), wall_s=-1)]),
                                 dict(REPORT, actions=[dict(_action("k", "s", "gfx90a", 1.0), wall_s=float("nan"))]),
                                 dict(REPORT, binaries=[{"path": "a", "archs": {"x": 5}, "file_bytes": 1}]),
                                 dict(REPORT, jobs=0)])
def test_bad_reports_are_one_error(bad):
    with pytest.raises(OffloadError):
        cost.validate_report(bad)


def test_cost_cli(tmp_path):
    f = tmp_path / "report.json"
    f.write_text(json.dumps(REPORT))
    res = run_cli("tool", "cost", "--add=gfx1201", f)
    out = res.stdout.decode()
    assert res.returncode == 0, res.stderr
    assert out.startswith(f"Adding gfx1201 (amd), estimated from gfx90a, gfx942 in {f}:")
    assert "new actions: 3 (2 device-compile, 1 device-link)" in out
    assert "+10.0 s of action time (range 8.0-11.0 s), 8.5 s of CPU; about +5.0 s of wall time at -j2" in out
    assert "app: +1.95 KiB".replace("1.95", "2.0") in out and "how:" in out
    js = json.loads(run_cli("tool", "cost", "--add", "gfx1201,sm_89", "--json", f).stdout)
    assert [e["arch"] for e in js] == ["gfx1201", "sm_89"] and js[0]["wall_at_jobs_s"] == 5.0
    (tmp_path / "bad.json").write_text("{")
    bad = run_cli("tool", "cost", "--add=gfx1201", tmp_path / "bad.json")
    assert bad.returncode == 1 and bad.stderr.decode().startswith("offload-tool: error: ")
    assert len(bad.stderr.decode().splitlines()) == 1
    assert run_cli("tool", "cost", f).returncode == 1  # --add is required
