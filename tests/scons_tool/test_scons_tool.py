"""In-process tests of the offload SCons tool: the nodes each builder emits, read-time validation,
action signatures (what does and does not rebuild), idempotent set-up; plus loading the tool the
pip way (`toolpath=[PyPackageDir('offload_scons')]`)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import need_tool
from scons_helpers import REPO, SITE_TOOLS, Project, scons_env

import SCons.Action
import SCons.Environment
import SCons.Errors
import SCons.Node.FS

sys.path.insert(0, str(SITE_TOOLS))


@pytest.fixture
def mkenv(tmp_path, monkeypatch):
    """A fresh SCons environment with the offload tool in `tmp_path` (fresh node graph)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src").mkdir()
    for name in ("a.c", "b.cpp", "c.c", "k.cu", "v.hip"):
        (tmp_path / "src" / name).write_text("int x;\n")

    def make(**kw):
        SCons.Node.FS.default_fs = None
        kw.setdefault("OFFLOAD_CLANG", "clang-19")
        return SCons.Environment.Environment(tools=["default", "offload"], toolpath=[str(SITE_TOOLS)], **kw)

    return make


def _names(nodes):
    return [n.get_path() for n in nodes]


def test_object_graph_per_arch(mkenv):
    need_tool("clang-19")
    env = mkenv(OFFLOAD_ARCHS=["sm_80", "fiji", "gfx906:xnack-:sramecc+"])
    fat = env.OffloadObject("src/a.c")
    assert _names(fat) == ["src/a.o"]
    parts = fat[0].attributes.offload_parts
    assert parts["host"].get_path() == "src/a.host.o"
    assert {a: n.get_path() for a, n in parts["devices"].items()} == {
        "sm_80": "src/a.sm_80.o", "gfx803": "src/a.gfx803.bc",
        "gfx906:sramecc+:xnack-": "src/a.gfx906_sramecc+_xnack-.bc"}
    assert parts["package"].get_path() == "src/a.pkg"
    # CUDA sources get only NVIDIA archs, HIP sources only AMD archs.
    cu = env.OffloadObject("src/k.cu")[0].attributes.offload_parts
    assert list(cu["devices"]) == ["sm_80"]
    hip = env.OffloadObject("src/v.hip")[0].attributes.offload_parts
    assert list(hip["devices"]) == ["gfx803", "gfx906:sramecc+:xnack-"]
    assert hip["package"].get_path() == "src/v.hipfb"
    # Calling again reuses the nodes (no "multiple ways to build").
    assert env.OffloadObject("src/a.c")[0] is fat[0]
    # Target IDs with features are split like plain processors (file names with '_' for ':').
    prog = env.OffloadProgram("app", ["src/a.c", "src/b.cpp"])
    assert _names(prog) == ["app"]
    assert _names(prog[0].sources[-1].sources)[-1] == "app.gfx906_sramecc+_xnack-.devlink.o"


def test_split_device_link_graph(mkenv):
    need_tool("clang-19")
    env = mkenv(OFFLOAD_ARCHS=["sm_80", "fiji", "gfx906"])
    prog = env.OffloadProgram("app", ["src/a.c", "src/b.cpp"])
    # Plain AMD processors: the program links the host objects and a carrier of the device images,
    # in which each AMD arch is linked by a DEVICELINK node of its own.
    assert _names(prog[0].sources) == ["src/a.host.o", "src/b.host.o", "app.offload.o"]
    carrier = prog[0].sources[2]
    assert _names(carrier.sources) == ["src/a.sm_80.o", "src/b.sm_80.o", "app.gfx803.devlink.o",
                                       "app.gfx906.devlink.o"]
    assert _names(carrier.sources[2].sources) == ["src/a.gfx803.bc", "src/b.gfx803.bc"]
    assert b"--offload-arch=gfx803" in _sig(carrier.sources[2])
    # A -O in LINKFLAGS sets the device link's LTO level, as it sets the wrapper's.
    prog = env.OffloadProgram("app_o3", ["src/a.c"], LINKFLAGS=["-O3"])
    assert b" -O3 " in _sig(prog[0].sources[1].sources[1])
    # Without the split (or with a library that may carry device code, which a separate device
    # link would not see), the fat objects are linked and clang-linker-wrapper links all device code.
    for name, kw in (("app2", {"OFFLOAD_SPLIT_DEVICE_LINK": False}), ("app3", {"LIBS": ["no_such_library"]})):
        prog = env.OffloadProgram(name, ["src/a.c", "src/b.cpp"], **kw)
        assert _names(prog[0].sources) == ["src/a.o", "src/b.o"]
    # A shared system library carries no device code for this link: the split stays.
    prog = env.OffloadProgram("app4", ["src/a.c", "src/b.cpp"], LIBS=["m"])
    assert _names(prog[0].sources) == ["src/a.host.o", "src/b.host.o", "app4.offload.o"]
    # OffloadObjects built for other archs keep all their images in the carrier.
    other = env.Clone(OFFLOAD_ARCHS=["sm_80", "gfx90a"]).OffloadObject("src/c.c")
    prog = env.OffloadProgram("app6", ["src/a.c", other])
    assert _names(prog[0].sources[-1].sources) == ["src/a.sm_80.o", "src/c.sm_80.o", "app6.gfx803.devlink.o",
                                                   "app6.gfx906.devlink.o", "app6.gfx90a.devlink.o"]
    # A foreign object among the inputs: no split either.
    prog = env.OffloadProgram("app5", ["src/a.c", env.File("other.o")])
    assert _names(prog[0].sources) == ["src/a.o", "other.o"]
    # A link gets only the archs its languages were built for: a CUDA-only program does not
    # change (re-link) when an AMD arch is added.
    # (A CUDA-only link is clang's CUDA link: its images name their archs, no OpenMP runtime.)
    cuda = env.OffloadProgram("cuda_app", ["src/k.cu"])
    assert b"--offload-link" in _sig(cuda[0]) and b"gfx" not in _sig(cuda[0]) and b"-fopenmp" not in _sig(cuda[0])
    # NVIDIA archs only: no device link to split, but the OpenMP images go into one carrier all
    # the same (no package and fat object per source); CUDA with clang keeps its fat objects.
    env = mkenv(OFFLOAD_ARCHS=["sm_80"])
    prog = env.OffloadProgram("app4", ["src/a.c"])
    assert _names(prog[0].sources) == ["src/a.host.o", "app4.offload.o"]
    assert _names(prog[0].sources[-1].sources) == ["src/a.sm_80.o"]
    assert _names(env.OffloadProgram("cuda_app2", ["src/k.cu"])[0].sources) == ["src/k.o"]


def test_each_device_compile_is_its_own_node(mkenv):
    need_tool("clang-19")
    env = mkenv(OFFLOAD_ARCHS=["sm_70", "sm_80"])
    devs = env.OffloadObject("src/b.cpp")[0].attributes.offload_parts["devices"]
    executors = {id(n.get_executor()) for n in devs.values()}
    assert len(executors) == 2


def _sig(node) -> bytes:
    return node.get_executor().get_contents()


def test_signatures(mkenv):
    need_tool("clang-19")
    base = dict(OFFLOAD_ARCHS=["sm_80"])

    def parts(**kw):
        env = mkenv(**{**base, **kw})
        return env.OffloadObject("src/b.cpp")[0].attributes.offload_parts

    p0 = parts()
    host0, dev0, pkg0 = _sig(p0["host"]), _sig(p0["devices"]["sm_80"]), _sig(p0["package"])
    # The host compile does not depend on the arch list.
    assert _sig(parts(OFFLOAD_ARCHS=["sm_80", "gfx90a"])["host"]) == host0
    # Device flags reach device compiles only.
    p = parts(OFFLOAD_DEVICEFLAGS=["-O3"])
    assert _sig(p["host"]) == host0 and _sig(p["devices"]["sm_80"]) != dev0
    # Host flags reach host compiles only.
    p = parts(OFFLOAD_HOSTFLAGS=["-O3"])
    assert _sig(p["host"]) != host0 and _sig(p["devices"]["sm_80"]) == dev0
    # $( $) parts are not in any signature.
    p = parts(OFFLOAD_DEVICEFLAGS=["$(", "-fmessage-length=10", "$)"])
    assert _sig(p["host"]) == host0 and _sig(p["devices"]["sm_80"]) == dev0
    # Nor is the launcher; for OpenMP it decides the graph (behind a compiler cache, no host-IR
    # node: the host object is compiled from the source, which the cache can serve).
    p = parts(OFFLOAD_LAUNCHER="ccache")
    assert _sig(p["devices"]["sm_80"]) == dev0 and b"ccache" not in _sig(p["host"])
    assert _names(p["host"].sources)[0] == "src/b.cpp" and _names(p0["host"].sources)[0] == "src/b.host.bc"
    # The compiler identity is in compile signatures, not in the packager's.
    assert b"clang version 19" in host0 and b"clang version 19" in dev0
    assert b"clang version" not in pkg0 and b"offload_tool" in pkg0
    # Where Python lives is not in the signature (clone/machine independent).
    assert sys.executable.encode() not in pkg0


def test_validation_errors(mkenv):
    need_tool("clang-19")
    env = mkenv(OFFLOAD_ARCHS=["sm_80", "gfx9999"])
    with pytest.raises(SCons.Errors.UserError, match="gfx9999"):
        env.OffloadObject("src/a.c")
    env = mkenv(OFFLOAD_ARCHS=["gfx1030:xnack+"])
    with pytest.raises(SCons.Errors.UserError, match="gfx1030:xnack\\+"):
        env.OffloadObject("src/a.c")
    env = mkenv(OFFLOAD_ARCHS=["gfx906", "gfx906:xnack+"])
    with pytest.raises(SCons.Errors.UserError, match="invalid offload arch combinations"):
        env.OffloadObject("src/a.c")
    env = mkenv(OFFLOAD_ARCHS=["sm_80"], OFFLOAD_CUDA_COMPILER="gcc")
    with pytest.raises(SCons.Errors.UserError, match="OFFLOAD_CUDA_COMPILER"):
        env.OffloadObject("src/k.cu")
    env = mkenv(OFFLOAD_ARCHS=["sm_80"], OFFLOAD_CLANG="clang-99")
    with pytest.raises(SCons.Errors.UserError, match="clang-99.*Debian package clang-19"):
        env.OffloadObject("src/a.c")
    env = mkenv(OFFLOAD_ARCHS=["sm_80"])
    with pytest.raises(SCons.Errors.UserError, match="OFFLOAD_TARGETS"):
        env.OffloadUnbundle("src/a.c")
    with pytest.raises(SCons.Errors.UserError, match="2 inputs for 1"):
        env.OffloadBundle("x.o", ["src/a.c", "src/b.cpp"], OFFLOAD_TARGETS=["host-x86_64-unknown-linux-gnu"])
    with pytest.raises(SCons.Errors.UserError, match="OFFLOAD_ARCH"):
        env.OffloadDeviceObject("src/a.c")
    with pytest.raises(SCons.Errors.UserError, match="cannot be compiled for 'gfx90a'"):
        env.OffloadDeviceObject("src/k.cu", OFFLOAD_ARCH="gfx90a")


def test_generate_is_idempotent_and_keeps_user_settings(mkenv):
    env = mkenv(OFFLOAD_ARCHS=["sm_80"], OFFLOAD_DEVICECOMSTR="dev $SOURCE", OFFLOAD_HOSTFLAGS=["-O2"])
    env.Tool("offload", toolpath=[str(SITE_TOOLS)])
    assert env["OFFLOAD_DEVICECOMSTR"] == "dev $SOURCE"
    assert list(env["OFFLOAD_HOSTFLAGS"]) == ["-O2"]
    assert env["OFFLOAD_PACKAGECOMSTR"] == "PACKAGE ${TARGET}"
    env = mkenv(OFFLOAD_VERBOSE=True)
    assert env["OFFLOAD_PACKAGECOMSTR"] == ""


def test_unbundle_targets(mkenv):
    env = mkenv()
    outs = env.OffloadUnbundle("k.bundle.o", OFFLOAD_TARGETS=["host-x86_64-unknown-linux-gnu",
                                                               "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+"])
    assert _names(outs) == ["k.bundle-host-x86_64-unknown-linux-gnu.o",
                            "k.bundle-hipv4-amdgcn-amd-amdhsa--gfx90a_xnack+.o"]
    assert len({id(t.get_executor()) for t in outs}) == 1   # one action, N outputs
    outs = env.OffloadUnbundleArchive("libk.a", OFFLOAD_TARGETS=["openmp-amdgcn-amd-amdhsa--gfx90a",
                                                                  "openmp-nvptx64-nvidia-cuda--sm_80"])
    assert _names(outs) == ["libk-openmp-amdgcn-amd-amdhsa--gfx90a.a", "libk-openmp-nvptx64-nvidia-cuda--sm_80.a"]


ONE_LINER = """
env = Environment(tools=['default', 'offload'], toolpath=[PyPackageDir('offload_scons')],
                  OFFLOAD_ARCHS=['sm_80'])
print('OFFLOAD_CLANG=' + str(env['OFFLOAD_CLANG']))
print('BUILDER=' + str(env.OffloadObject('a.c')[0]))
"""


def test_pip_one_liner_loads_the_tool(tmp_path):
    """The documented one-liner for other projects: `offload_scons` is what pyproject maps
    site_scons/site_tools to. Outside a pip install, a link named offload_scons stands in."""
    need_tool("clang-19")
    import importlib.util
    pkgs = tmp_path / "pkgs"
    pkgs.mkdir()
    env = scons_env()
    if importlib.util.find_spec("offload_scons") is None:
        os.symlink(SITE_TOOLS, pkgs / "offload_scons")
        env["PYTHONPATH"] = str(pkgs) + os.pathsep + env["PYTHONPATH"]
    p = Project(tmp_path / "other")
    p.write("SConstruct", ONE_LINER)
    p.write("a.c", "int main(void) { return 0; }\n")
    # No --site-dir: the project has no site_scons of its own.
    cp = subprocess.run([sys.executable, "-m", "SCons", "-Q", "-n"], cwd=p.root, capture_output=True, text=True,
                        env=env)
    assert cp.returncode == 0, cp.stderr
    assert "BUILDER=a.o" in cp.stdout and "OFFLOAD_CLANG=clang-19" in cp.stdout
    assert str(REPO) not in cp.stdout


def test_compress_and_launcher_reach_the_commands(mkenv):
    need_tool("clang-19")
    env = mkenv(OFFLOAD_ARCHS=["gfx90a"], OFFLOAD_COMPRESS=True, OFFLOAD_LAUNCHER="ccache")
    parts = env.OffloadObject("src/v.hip")[0].attributes.offload_parts
    assert b"-compress" in _sig(parts["package"])
    dev = parts["devices"]["gfx90a"]
    cmd = dev.get_executor().get_action_list()[0].genstring([dev], dev.sources, dev.get_build_env())
    assert dev.get_build_env().subst(cmd, target=[dev], source=dev.sources).startswith("ccache clang-19 -x hip")
    assert not _sig(mkenv(OFFLOAD_ARCHS=["gfx90a"]).OffloadObject("src/v.hip")[0]
                    .attributes.offload_parts["package"]).count(b"-compress")


@pytest.mark.parametrize("clang, images, message", [
    ("/no/such/clang", ["--image=file={obj},triple=amdgcn-amd-amdhsa,arch=gfx90a,kind=openmp"], "cannot run /no/such/clang"),
    ("clang-19", ["--image=file={obj},triple=amdgcn-amd-amdhsa,arch=gfx90a,kind=openmp",
                  "--image=file={obj},triple=nvptx64-nvidia-cuda,arch=sm_80,kind=openmp"], "images of one triple"),
    ("clang-19", ["--image=file={tmp}/missing,triple=amdgcn-amd-amdhsa,arch=gfx90a,kind=openmp"], "error:"),
])
def test_device_link_helper_errors(tmp_path, clang, images, message):
    """The DEVICELINK helper fails with one line and exit status 1, never a traceback, and leaves
    neither its output nor its work directory behind."""
    obj = tmp_path / "ref.o"
    obj.write_bytes(__import__("offload_tool.formats.elf", fromlist=["x"]).empty_relocatable_like(
        b"\x7fELF\x02\x01\x01" + bytes(9) + b"\x01\x00\x3e\x00" + bytes(44)))
    argv = [sys.executable, str(SITE_TOOLS / "offload" / "_device_link.py"), str(tmp_path / "out.o"), str(obj), clang,
            "--", *[i.format(obj=obj, tmp=tmp_path) for i in images]]
    cp = subprocess.run(argv, capture_output=True, text=True, env=scons_env())
    assert cp.returncode == 1 and message in cp.stderr and "Traceback" not in cp.stderr, cp.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ref.o"]


def _compile_nodes(objs) -> list:
    out = []
    for o in objs:
        parts = o.attributes.offload_parts
        out += [parts["host"], *parts["devices"].values()]
    return out


@pytest.mark.parametrize("extra", [{}, {"CCFLAGS": ["-DSTEM=${SOURCE.filebase}"]},
                                   {"CPPDEFINES": {"OUT": "${TARGET.name}"}, "OFFLOAD_LAUNCHER": "ccache"}])
def test_group_signatures_are_scons_own(mkenv, extra):
    """A compile's signature, computed once per group of nodes with the same overrides, is
    byte-identical to SCons's own per-node one: for every language, for sources of two suffixes,
    for a caller's overrides, and where a flag asks a source or target more than its name (that
    group falls back to SCons's own substitution)."""
    need_tool("clang-19")
    from offload.scons.signatures import GroupSignatureAction
    env = mkenv(OFFLOAD_ARCHS=["sm_80", "gfx90a"], CPPPATH=["include"], **extra)
    objs = list(env.OffloadObject(["src/a.c", "src/b.cpp", "src/c.c", "src/k.cu", "src/v.hip"]))
    with open("src/d.c", "w") as f:
        f.write("int y;\n")
    objs += env.OffloadObject("src/d.c", OFFLOAD_DEVICEFLAGS=["-O3"])
    nodes = _compile_nodes(objs)
    assert len(nodes) == 4 * 3 + 2 + 2  # CUDA: sm_80 only; HIP: gfx90a only
    actions = set()
    for n in nodes:
        ex = n.get_executor()
        (act,) = [a for a in ex.get_action_list() if isinstance(a, GroupSignatureAction)]
        actions.add(act)
        tgts, srcs, benv = ex.get_all_targets(), ex.get_all_sources(), ex.get_build_env()
        own = SCons.Action.CommandAction.get_presig(act, tgts, srcs, benv)
        assert act.get_presig(tgts, srcs, benv) == own
        group = GroupSignatureAction.get_contents(act, tgts, srcs, benv)
        assert group == SCons.Action.ActionBase.get_contents(act, tgts, srcs, benv)
        # An OpenMP compile of a source (not the host object made from its IR) adds the source
        # file's identity after it.
        full = act.get_contents(tgts, srcs, benv)
        if benv.get("_OFFLOAD_LANG") == "openmp" and not srcs[0].name.endswith(".bc"):
            assert full[:len(group)] == group and full[len(group):].startswith(b"\0file src/"), full[len(group):]
        else:
            assert full == group
    groups = [m for act in actions for m in act._templates.values()]
    memoised = [m for m in groups if isinstance(m[0], str)]
    if extra.get("CCFLAGS") or extra.get("CPPDEFINES"):
        assert not memoised  # every group asked a node for more than its name
    else:
        # a.c and c.c share their host group and one group per arch; CUDA/HIP are one per source.
        assert len(memoised) < len(nodes) - 3


def test_link_signatures_are_scons_own(mkenv):
    """A link, the AMD device links and the carrier list every object of a program; their
    signatures, substituted word by word (linear in the command's length, not quadratic as SCons's
    string substitution is), are byte-identical to SCons's own. A command given as a list of
    command lines is signed by SCons itself."""
    need_tool("clang-19")
    from offload.scons.signatures import LazyCommandAction, LinearSignature
    names = [f"src/s{i}.c" for i in range(40)]
    for name in names:
        with open(name, "w") as f:
            f.write("int y;\n")
    env = mkenv(OFFLOAD_ARCHS=["sm_80", "gfx90a"], LINKFLAGS=["$(", "-Wl,--no-undefined", "$)", "-Wl,-z,  now"])
    program = env.OffloadProgram("app", names)
    linked = [program[0], env.File("app.offload.o"), env.File("app.gfx90a.devlink.o")]
    kinds = set()
    for n in linked:
        ex = n.get_executor()
        # (a step that consumes device objects is a list: their structural check, then the command)
        for act in (a for top in ex.get_action_list() for a in getattr(top, "list", [top])):
            if not isinstance(act, (LazyCommandAction, LinearSignature)):
                continue
            kinds.add(n.name)
            tgts, srcs, benv = ex.get_all_targets(), ex.get_all_sources(), ex.get_build_env()
            ours = act.get_presig(tgts, srcs, benv)
            assert ours == SCons.Action.CommandAction.get_presig(act, tgts, srcs, benv)
            assert ours.count("s0.") and len(ours.split()) > 40 and "--no-undefined" not in ours
    assert kinds == {"app", "app.gfx90a.devlink.o", "app.offload.o"}, kinds
    # A list of commands in the variable: SCons's own signature (a generator action).
    env2 = mkenv(OFFLOAD_ARCHS=["sm_80"], OFFLOAD_ARCOM=["ar rc $TARGET $SOURCES", "ranlib $TARGET"])
    lib = env2.OffloadArchive("lib/libk", ["src/a.c"])
    ex = lib[0].get_executor()
    (act,) = [a for a in ex.get_action_list() if isinstance(a, LazyCommandAction)]
    sig = act.get_presig(ex.get_all_targets(), ex.get_all_sources(), ex.get_build_env())
    assert sig.startswith(b"ar rc ") and b"ranlib " in sig


def test_group_signature_follows_flag_changes(mkenv):
    """What rebuilds with group signatures: a flag changed for one source's call changes that
    source's compiles (and only the affected side), not the others'."""
    need_tool("clang-19")
    env = mkenv(OFFLOAD_ARCHS=["sm_80"])
    for name in ("d.c", "e.c"):
        with open("src/" + name, "w") as f:
            f.write("int y;\n")
    a, c = env.OffloadObject(["src/a.c", "src/c.c"])
    a2 = env.OffloadObject("src/d.c", OFFLOAD_DEVICEFLAGS=["-O3"])[0]
    a3 = env.OffloadObject("src/e.c", OFFLOAD_HOSTFLAGS=["-O3"])[0]
    part = lambda o, k: o.attributes.offload_parts[k]
    dev = lambda o: part(o, "devices")["sm_80"]
    assert _sig(dev(a)) != _sig(dev(c)) and _sig(part(a, "host")) != _sig(part(c, "host"))
    assert b"-O3" in _sig(dev(a2)) and b"-O3" not in _sig(part(a2, "host"))
    assert b"-O3" in _sig(part(a3, "host")) and b"-O3" not in _sig(dev(a3))
    # The same command but for the names (and each source's file identity, which follows it).
    command = lambda o: _sig(dev(o)).split(b"\0file ")[0]
    assert command(a).replace(b"a.sm_80", b"").replace(b"a.c", b"") == \
        command(c).replace(b"c.sm_80", b"").replace(b"c.c", b"")


def test_probe_answers_kept_between_runs(tmp_path):
    """The compiler probes' answers are kept beside `.sconsign` and used while the compiler's
    installation is unchanged; a wrapper's (not a clang executable itself) are never kept."""
    need_tool("clang-19")
    from offload.toolchain import probe_cache as _probe_cache
    import shutil
    clang = os.path.realpath(shutil.which("clang-19"))
    penv = {"PATH": os.environ["PATH"]}
    k = _probe_cache.key("clang-19", clang, penv, True)
    assert k and k == _probe_cache.key("clang-19", clang, penv, True)
    assert k != _probe_cache.key("clang-19", clang, {"PATH": "/nowhere"}, True)
    top = str(tmp_path)
    assert _probe_cache.load(top, k) is None
    _probe_cache.store(top, k, ["clang version 19", None], [clang])
    assert _probe_cache.load(top, k)["answers"] == ["clang version 19", None]
    # an answer naming a file that is gone is not used
    gone = tmp_path / "gone.so"
    gone.write_text("")
    _probe_cache.store(top, k, ["clang version 19", str(gone)], [str(gone)])
    gone.unlink()
    assert _probe_cache.load(top, k) is None
    # a wrapper script answers for a compiler the key cannot see
    wrapper = tmp_path / "clang-wrap"
    wrapper.write_text("#!/bin/sh\nexec clang-19 \"$@\"\n")
    wrapper.chmod(0o755)
    assert _probe_cache.key("clang-wrap", str(wrapper), penv, True) is None
    # a damaged file is ignored
    (tmp_path / ".sconsign.offload-probes.json").write_text("{not json")
    assert _probe_cache.load(top, k) is None
