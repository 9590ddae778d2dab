"""Amplification and fuzzing: work and memory stay proportional to the input, whatever it claims.

Each crafted input (tests/hostile_inputs.py, generated here, never stored) is run through a CLI
in a child process capped at 512 MiB of address space and 20 s of CPU, so a regression fails the
test instead of exhausting the machine.  A case passes when the child finishes within those caps
and peaks under 256 MiB, and either succeeds or prints exactly one `<prog>: error: ...` line and
exits 1.  Hypothesis then mutates the crafted inputs and checks the library raises nothing but
`OffloadError`."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import hostile_inputs as H
from offload_tool import budget
from offload_tool.errors import BudgetError, OffloadError
from offload_tool.ops.extract import find_offload_images
from offload_tool.ops.inspector import inspect_buffer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository
ADDRESS_SPACE = 512 << 20
CPU_SECONDS = 20
PEAK_RSS = 256 << 20
MODULES = {"offload-tool": "offload_tool.cli.tool", "offload-packager": "offload_tool.cli.packager",
           "offload-bundler": "offload_tool.cli.bundler"}


def _caps() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))


def run_capped(tmp_path, data: bytes, prog: str, *args: str, env: dict | None = None):
    """Run `prog args... FILE` on `data` in a capped child: (exit status, stdout, stderr, peak RSS)."""
    path = tmp_path / "input"
    path.write_bytes(data)
    argv = [sys.executable, "-c", f"import sys; from {MODULES[prog]} import main; sys.exit(main(sys.argv[1:]))",
            *args, str(path)]
    child_env = dict(os.environ, PYTHONPATH=ROOT, **(env or {}))
    if not env or budget.ENV_VAR not in env:
        child_env.pop(budget.ENV_VAR, None)
    with open(tmp_path / "out", "wb") as out, open(tmp_path / "err", "wb") as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, preexec_fn=_caps, env=child_env, cwd=tmp_path)
        _, status, usage = os.wait4(proc.pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    return rc, (tmp_path / "out").read_bytes(), (tmp_path / "err").read_text(errors="replace"), usage.ru_maxrss * 1024


def assert_bounded(result, prog: str, *, error: str | None = None) -> str:
    """The child finished within its caps and under 256 MiB; with `error`, it failed with exactly
    one line containing it (exit 1), else it succeeded."""
    rc, _out, err, peak = result
    assert rc in (0, 1), f"killed or crashed (status {rc}): {err[-500:]}"
    assert peak < PEAK_RSS, f"peak memory {peak >> 20} MiB"
    if error is None:
        # (a file holding no images gets one note saying so)
        assert rc == 0 and (err == "" or (len(err.splitlines()) == 1 and "no device images" in err)), err
    else:
        lines = err.splitlines()
        assert rc == 1 and len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), err
        assert error in lines[0], lines[0]
    return err


# --- crafted cases: each was minutes or gigabytes before ------------------------------------

def test_nested_bundles_pointing_at_one_payload(tmp_path):
    data = H.nested_shared_bundle(fanout=16, depth=7)  # 16**7 references in 6 KiB
    result = run_capped(tmp_path, data, "offload-tool", "inspect", "--json", "--hash")
    assert_bounded(result, "offload-tool")
    rows = json.loads(result[1])
    # Each nested bundle is listed once, the 15 other entries pointing at it refer to that listing;
    # the 16 innermost entries are images (one shared payload, hashed once).
    assert sum("same_as" in r for r in rows) == 6 * 15
    assert len(rows) == 6 * 15 + 16 and len({r["sha256"] for r in rows if "same_as" not in r}) == 1


def test_nesting_deeper_than_the_depth_budget(tmp_path):
    data = H.nested_shared_bundle(fanout=2, depth=12)
    err = assert_bounded(run_capped(tmp_path, data, "offload-tool", "inspect"), "offload-tool",
                         error="over the depth budget of 8")
    assert "--budget=depth=N" in err
    assert_bounded(run_capped(tmp_path, data, "offload-tool", "inspect", "--budget=depth=20"), "offload-tool")


def test_entries_sharing_one_ccob(tmp_path):
    data = H.shared_ccob_bundle(entries=50, expands_to=16 << 20)
    rc, out, _err, _peak = result = run_capped(tmp_path, data, "offload-tool", "inspect")
    assert_bounded(result, "offload-tool")
    assert out.count(b"\n") == 51


def test_section_headers_sharing_one_offloading_section(tmp_path):
    data = H.elf_shared_offloading(headers=4000, binaries=64)
    assert_bounded(run_capped(tmp_path, data, "offload-tool", "inspect"), "offload-tool")
    # Extraction lists every header's images, as LLVM does, within the entries budget.
    assert_bounded(run_capped(tmp_path, data, "offload-packager", "--image=arch=none"), "offload-packager")
    assert_bounded(run_capped(tmp_path, data, "offload-packager", "--image=arch=none", "--budget=entries=1000"),
                   "offload-packager", error="over the entries budget of 1000")


@pytest.mark.parametrize("make, error", [
    (lambda: H.elf_shared_names(2 << 20), None),
    (lambda: H.elf_overlapping_names(2 << 20), "section names overlap"),
    (lambda: H.archive_long_names(1 << 20), "long names overlap"),
    (lambda: H.overlapping_strings_package(8 << 20), "string table references are implausibly large"),
], ids=["elf-shared-names", "elf-overlapping-names", "archive-long-names", "package-strings"])
def test_names_are_not_copied_per_reference(tmp_path, make, error):
    assert_bounded(run_capped(tmp_path, make(), "offload-tool", "inspect"), "offload-tool", error=error)


def test_hip_fatbin_split_is_linear(tmp_path):
    data = H.elf_hip_fatbin(4 << 20, 512)  # 8184 bundles; quadratic splitting took minutes
    rc, out, _err, _peak = result = run_capped(tmp_path, data, "offload-tool", "inspect")
    assert_bounded(result, "offload-tool")
    assert out.count(b"\n") == 1 + ((4 << 20) - 4096) // 512  # the header line, one per device entry


def test_bitcode_literal_abbreviations(tmp_path):
    assert_bounded(run_capped(tmp_path, H.bitcode_literal_abbrev(2 << 20), "offload-tool", "inspect"),
                   "offload-tool", error="more literal operands than the data holds")


def test_fatbin_zstd_bomb_stops_at_the_budget(tmp_path):
    data = H.fatbin_zstd_bomb(entries=4, each=1 << 30)  # 4 GiB in 128 KiB
    # --hash: listed without hashes, compressed cubins are not decompressed at all.
    err = assert_bounded(run_capped(tmp_path, data, "offload-tool", "inspect", "--hash", "--budget=decompressed=256M"),
                         "offload-tool", error="over the decompressed budget of 256 MiB")
    assert "fat binary entry at offset" in err and "sm_80" in err


def test_fatbin_zstd_entries_are_hashed_as_they_stream(tmp_path):
    data = H.fatbin_zstd_bomb(entries=2, each=384 << 20)  # more than the child may hold at once
    rc, out, _err, _peak = result = run_capped(tmp_path, data, "offload-tool", "inspect", "--hash")
    assert_bounded(result, "offload-tool")
    assert str(384 << 20).encode() in out


def test_budget_from_the_environment(tmp_path):
    data = H.nested_shared_bundle(fanout=2, depth=4)
    assert_bounded(run_capped(tmp_path, data, "offload-tool", "inspect", env={budget.ENV_VAR: "entries=3"}),
                   "offload-tool", error="over the entries budget of 3 (raise it with --budget=entries=N")


def test_bad_budget_option_is_one_line(tmp_path):
    for prog, args in (("offload-bundler", ["-list", "-type=o", "-budget=depth=x", "-input"]),
                       ("offload-packager", ["--budget=bogus=1"]), ("offload-tool", ["inspect", "--budget=depth=0"])):
        assert_bounded(run_capped(tmp_path, b"x", prog, *args), prog, error="--budget")


# --- in-process: the library answers with OffloadError only ---------------------------------

def test_library_raises_budget_error():
    with pytest.raises(BudgetError, match="depth budget of 3"):
        with budget.run(budget.Limits(depth=3)):
            inspect_buffer(H.nested_shared_bundle(fanout=2, depth=5), "x")
    with pytest.raises(BudgetError, match="entries budget of 100"):
        with budget.run(budget.Limits(entries=100)):
            find_offload_images(H.elf_shared_offloading(headers=10, binaries=20), "x")


_SEEDS = [H.nested_shared_bundle(3, 3), H.elf_shared_offloading(8, 3), H.archive_long_names(4096),
          H.overlapping_strings_package(8192, 1024, 128), H.elf_hip_fatbin(16384, 512),
          H.bitcode_literal_abbrev(4096, 16), H.fatbin_zstd_bomb(2, 1 << 20), H.elf_overlapping_names(8192)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.sampled_from(range(len(_SEEDS))),
       edits=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=8),
       cut=st.one_of(st.none(), st.integers(0, 1 << 16)))
def test_mutated_crafted_inputs_raise_only_offload_errors(seed, edits, cut):
    data = bytearray(_SEEDS[seed])
    for pos, value in edits:
        data[pos % len(data)] = value
    if cut is not None:
        del data[cut % len(data):]
    with budget.run(budget.Limits(decompressed=64 << 20)):
        for op in (lambda: inspect_buffer(bytes(data), "fuzz", keep_data=False),
                   lambda: find_offload_images(bytes(data), "fuzz")):
            try:
                op()
            except OffloadError:
                pass
