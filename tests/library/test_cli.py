"""The `offload-tool` command line: subcommands, help, version, and the error convention
(`offload-tool: error: <one line>`, status 1, never a traceback)."""

from __future__ import annotations

import json

import pytest

from conftest import console_script, run, run_cli
from offload_tool import __version__
from offload_tool.cli import tool as cli
from offload_tool.formats.offload_binary import make_image, write_offload_binary


def _pkg(tmp_path, *archs: str):
    p = tmp_path / "p.pkg"
    p.write_bytes(b"".join(write_offload_binary(make_image(b"\x7fELF\x02\x01\x01" + bytes(57),
                                                           {"triple": "amdgcn-amd-amdhsa", "arch": a},
                                                           image_kind=1, offload_kind=1)) for a in archs))
    return p


def _one_error(res, *needles: str) -> str:
    err = res.stderr.decode()
    assert res.returncode == 1, (res.stdout, err)
    assert err.count("\n") == 1 and err.startswith("offload-tool: error: "), err
    assert "Traceback" not in err
    for n in needles:
        assert n in err
    return err


def test_help_and_version():
    res = run_cli("tool", "--help")
    assert res.returncode == 0
    for word in (b"inspect", b"verify", b"embed"):
        assert word in res.stdout
    res = run_cli("tool", "--version")
    assert res.returncode == 0 and res.stdout.decode().strip() == f"offload-tool {__version__}"
    for sub in ("inspect", "verify"):
        res = run_cli("tool", sub, "--help")
        assert res.returncode == 0 and f"offload-tool {sub}".encode() in res.stdout
    assert b"--llvm-version" in run_cli("tool", "inspect", "--help").stdout
    assert b"--check-entries" in run_cli("tool", "verify", "--help").stdout


def test_embed_is_delegated():
    res = run_cli("tool", "embed", "--help")
    assert res.returncode == 0 and b"offload-tool embed" in res.stdout


@pytest.mark.parametrize("args,needle", [
    ((), "no command"),
    (("frobnicate",), "unknown command 'frobnicate'"),
    (("inspect",), "no input files"),
    (("verify",), "no input files"),
    (("inspect", "--bogus", "x"), "unknown option '--bogus'"),
    (("inspect", "--llvm-version=7", "x"), "unsupported --llvm-version 7"),
    (("inspect", "--llvm-version=abc", "x"), "invalid --llvm-version 'abc'"),
    (("inspect", "--llvm-version"), "needs a value"),
    (("verify", "--check-entries", "--no-check-entries", "x"), "cannot be used together"),
])
def test_usage_errors(args, needle):
    _one_error(run_cli("tool", *args), needle)


def test_verify_require(tmp_path):
    pkg = _pkg(tmp_path, "gfx90a", "gfx906:xnack+")
    ok = run_cli("tool", "verify", pkg, "--require=gfx90a:xnack+,gfx906:xnack+")
    assert ok.returncode == 0 and ok.stdout.decode().startswith(f"{pkg}: ok")
    assert run_cli("tool", "verify", "-q", pkg, "--require", "gfx90a").stdout == b""
    bad = run_cli("tool", "verify", pkg, "--require=gfx908,gfx906:xnack-", "--require=gfx90a")
    assert bad.returncode == 1
    assert bad.stdout.decode().splitlines() == [f"{pkg}: missing required arch 'gfx908'",
                                                f"{pkg}: missing required arch 'gfx906:xnack-'"]
    _one_error(run_cli("tool", "verify", pkg, "--require=gfx90a,,gfx906"), "empty arch")
    _one_error(run_cli("tool", "verify", pkg, "--require=banana"), "unknown --require arch 'banana'")


def test_inspect_json_and_llvm_version(tmp_path):
    p = tmp_path / "hip.pkg"
    p.write_bytes(write_offload_binary(make_image(b"\x7fELF\x02\x01\x01" + bytes(57), {"triple": "amdgcn-amd-amdhsa",
                                                                           "arch": "gfx90a"},
                                                  image_kind=1, offload_kind=3)))
    (img,) = json.loads(run_cli("tool", "inspect", "--json", p).stdout)
    assert img["producer"] == "hip?" and img["producer_note"]
    (img,) = json.loads(run_cli("tool", "inspect", "--json", "--llvm-version", "19", p).stdout)
    assert img["producer"] == "hip"
    (img,) = json.loads(run_cli("tool", "inspect", "--json", "--llvm-version=22", p).stdout)
    assert img["producer"] == "none"  # LLVM 22 reads value 3 as no single kind


@pytest.mark.parametrize("content", [
    b"\x10\xff\x10\xad" + bytes(60),                     # truncated package
    b"\x50\xed\x55\xba\x01\x00\x10\x00" + bytes(8) + b"x",  # fat binary whose fat_size is wrong
    b"__CLANG_OFFLOAD_BUNDLE__" + (5).to_bytes(8, "little") + bytes(4),  # truncated bundle
    b"CCOB\x02\x00\x01\x00" + bytes(40),                 # compressed bundle, garbage stream
    b"!<arch>\nbroken-member-header",                   # archive
    b"\x7fELF\x02\x01\x01" + bytes(20),                  # ELF
])
@pytest.mark.parametrize("command", ["inspect", "verify"])
def test_corrupt_inputs_give_one_error_line(tmp_path, content, command):
    p = tmp_path / "bad.bin"
    p.write_bytes(content)
    res = run_cli("tool", command, p)
    _one_error(res)
    assert "internal error" not in res.stderr.decode(), res.stderr
    assert res.stdout == b""


def test_in_process_main_returns_status(tmp_path, capsys):
    pkg = _pkg(tmp_path, "gfx90a")
    assert cli.main(["verify", "-q", str(pkg), "--require=gfx90a"]) == 0
    assert cli.main(["verify", str(pkg), "--require=gfx908"]) == 1
    assert cli.main(["inspect", str(tmp_path / "missing")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("offload-tool: error: ") and "missing" in err


@pytest.mark.parametrize("script", ["offload-tool", "offload-bundler", "offload-packager"])
def test_console_scripts_installed(tmp_path, script):
    """pyproject's console scripts exist beside the interpreter (the .venv that `make test` uses) and run."""
    exe = console_script(script)
    if exe is None:
        pytest.skip(f"{script} console script not installed (pip install -e .)")
    res = run([exe, "--version"])
    assert res.returncode == 0 and res.stdout.strip(), res.stderr
    if script == "offload-tool":
        pkg = _pkg(tmp_path, "gfx90a")
        assert run([exe, "verify", pkg, "--require=gfx90a"]).returncode == 0
