"""offload-packager: byte-identical packaging vs clang-offload-packager-19 / llvm-offload-binary-22,
LLVM's offload-packager.c scenarios, errors, and hostile metadata."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import need_tool, run, run_cli
from offload_tool.formats.offload_binary import OffloadImage, read_offload_binaries, write_offload_binary
from offload_tool.cli.packager import main
from offload_tool.ops.package import generated_name, parse_image_arguments

NV_BC = "--libomptarget-nvptx-bc-path=/usr/lib/llvm-19/lib"


def _pack(tmp_path: Path, tool: str | None, out: str, *args: str, llvm_version: int | None = None):
    if tool is None:
        extra = [f"--llvm-version={llvm_version}"] if llvm_version else []
        return run_cli("packager", "-o", out, *extra, *args, cwd=tmp_path)
    return run([tool, "-o", out, *args], cwd=tmp_path)


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    (tmp_path / "a.o").write_bytes(b"\x7fELF device object" * 3)
    (tmp_path / "b.bc").write_bytes(b"BC\xc0\xde" + bytes(range(50)))
    (tmp_path / "c.o").write_bytes(b"BC\xc0\xde bitcode named .o")  # clang uses .o for LTO bitcode
    (tmp_path / "d.cubin").write_bytes(b"cubin!")
    (tmp_path / "e.s").write_bytes(b".version 8.0\n")
    (tmp_path / "f.fatbin").write_bytes(b"")
    (tmp_path / "g").write_bytes(b"no extension" * 7)
    return tmp_path


CASES = [
    ["--image=file=a.o,triple=amdgcn-amd-amdhsa,arch=gfx906,kind=openmp"],
    ["--image=kind=hip,arch=gfx90a:xnack+,triple=amdgcn-amd-amdhsa,file=b.bc,feature=+xnack,feature=+xnack"],
    ["--image=file=c.o,triple=nvptx64-nvidia-cuda,arch=sm_80,kind=cuda",
     "--image=file=d.cubin,triple=nvptx64-nvidia-cuda,arch=sm_90a,kind=cuda",
     "--image=file=e.s,triple=nvptx64-nvidia-cuda,arch=sm_70,kind=openmp",
     "--image=file=f.fatbin,triple=nvptx64-nvidia-cuda,arch=sm_52",
     "--image=file=g,triple=x86_64-unknown-linux-gnu,kind=sycl"],
    ["--image=file=a.o,file=b.bc,triple=amdgcn-amd-amdhsa,triple=x,arch=gfx1030,kind=hip,,=,zz,novalue"],
    ["--image", "file=a.o,triple=t,arch=a,kind=openmp,foo=1,zzz=2,a=3,long" + "x" * 80 + "=4"],
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_byte_identical_to_clang_offload_packager_19(inputs, case):
    tool = need_tool("clang-offload-packager-19")
    assert _pack(inputs, tool, "llvm.out", *CASES[case]).returncode == 0
    res = _pack(inputs, None, "ours.out", *CASES[case])
    assert res.returncode == 0, res.stderr
    assert (inputs / "ours.out").read_bytes() == (inputs / "llvm.out").read_bytes()


@pytest.mark.parametrize("case", range(len(CASES)))
def test_byte_identical_to_llvm_offload_binary_22(inputs, case):
    tool = need_tool("llvm-offload-binary-22")
    assert _pack(inputs, tool, "llvm.out", *CASES[case]).returncode == 0
    res = _pack(inputs, None, "ours.out", *CASES[case], llvm_version=22)
    assert res.returncode == 0, res.stderr
    assert (inputs / "ours.out").read_bytes() == (inputs / "llvm.out").read_bytes()


def test_many_random_key_orders_in_process(inputs, monkeypatch):
    """Shuffled key orders and extra keys, multiple images: same bytes as LLVM 19 (in-process CLI)."""
    tool = need_tool("clang-offload-packager-19")
    monkeypatch.chdir(inputs)
    rng = random.Random(7)
    for trial in range(10):
        images = []
        for f in rng.sample(["a.o", "b.bc", "c.o", "d.cubin", "e.s", "g"], rng.randint(1, 4)):
            args = [f"file={f}", f"triple={rng.choice(['amdgcn-amd-amdhsa', 'nvptx64-nvidia-cuda'])}",
                    f"arch={rng.choice(['gfx906', 'sm_80', 'gfx90a:xnack-'])}",
                    f"kind={rng.choice(['openmp', 'hip', 'cuda', 'none', 'bogus'])}"]
            args += [f"k{rng.randint(0, 999)}={rng.randint(0, 9)}" for _ in range(rng.randint(0, 6))]
            rng.shuffle(args)
            images.append("--image=" + ",".join(args))
        assert run([tool, "-o", "llvm.out", *images], cwd=inputs).returncode == 0
        assert main(["-o", "ours.out", *images]) == 0
        assert Path("ours.out").read_bytes() == Path("llvm.out").read_bytes(), images


def test_hip_kind_differs_between_versions(inputs, monkeypatch):
    monkeypatch.chdir(inputs)
    image = "--image=file=a.o,triple=amdgcn-amd-amdhsa,arch=gfx906,kind=hip"
    assert main(["-o", "p19", image]) == 0 and main(["-o", "p22", "--llvm-version=22", image]) == 0
    assert read_offload_binaries(Path("p19").read_bytes())[0].offload_kind == 3
    assert read_offload_binaries(Path("p22").read_bytes())[0].offload_kind == 4
    # extraction by kind uses the numbering of --llvm-version, as each LLVM does
    assert main(["p22", "--image=kind=hip,file=x19"]) == 0 and not Path("x19").exists()
    assert main(["p22", "--llvm-version", "22", "--image=kind=hip,file=x22"]) == 0
    assert Path("x22").read_bytes() == Path("a.o").read_bytes()


def test_parse_image_arguments():
    args = parse_image_arguments("file=a,triple=t,file=b,x,=v,k=v=w")
    assert args["file"] == "a,b" and args["x"] == "" and args[""] == "v" and args["k"] == "v=w"


# --- llvm offload-packager.c -----------------------------------------------------------------

TARGETS = [("nvptx64-nvidia-cuda", "sm_70", "openmp"), ("nvptx64-nvidia-cuda", "sm_80", "openmp"),
           ("amdgcn-amd-amdhsa", "gfx908", "openmp"), ("amdgcn-amd-amdhsa", "gfx90a", "openmp"),
           ("amdgcn-amd-amdhsa", "gfx90c", "hip")]


def _five_image_package(d: Path, elf_bytes: bytes) -> None:
    (d / "dev.o").write_bytes(elf_bytes)
    images = [f"--image=file={d / 'dev.o'},kind={k},triple={t},arch={a}" for t, a, k in TARGETS]
    assert main(["-o", str(d / "pk1.out"), *images]) == 0


def test_offload_packager_c_extract_by_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _five_image_package(tmp_path, b"\x7fELF\x02\x01\x01 pretend object")
    for t, a, k in TARGETS:
        assert main(["pk1.out", f"--image=file=out-{a}.o,kind={k},triple={t},arch={a}"]) == 0
        assert Path(f"out-{a}.o").read_bytes() == Path("dev.o").read_bytes()


def test_offload_packager_c_generated_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _five_image_package(tmp_path, b"\x7fELF pretend object")
    before = set(os.listdir())
    assert main(["pk1.out", "--image=kind=openmp"]) == 0
    assert set(os.listdir()) - before == {
        "pk1-nvptx64-nvidia-cuda-sm_70.0.o", "pk1-nvptx64-nvidia-cuda-sm_80.1.o",
        "pk1-amdgcn-amd-amdhsa-gfx908.2.o", "pk1-amdgcn-amd-amdhsa-gfx90a.3.o"}


def test_generated_names_match_llvm_19(tmp_path):
    tool = need_tool("clang-offload-packager-19")
    (tmp_path / "llvm").mkdir()
    (tmp_path / "ours").mkdir()
    _five_image_package(tmp_path, b"BC\xc0\xde pretend bitcode")
    for sub, cmd in (("llvm", [tool]), ("ours", None)):
        for image in ("--image=kind=openmp", "--image=triple=amdgcn-amd-amdhsa", "--image=arch=sm_80,kind=openmp"):
            if cmd:
                assert run([*cmd, "../pk1.out", image], cwd=tmp_path / sub).returncode == 0
            else:
                assert run_cli("packager", "../pk1.out", image, cwd=tmp_path / sub).returncode == 0
    assert sorted(os.listdir(tmp_path / "ours")) == sorted(os.listdir(tmp_path / "llvm"))
    for name in os.listdir(tmp_path / "llvm"):
        assert (tmp_path / "ours" / name).read_bytes() == (tmp_path / "llvm" / name).read_bytes()


def test_multiple_matches_to_one_file_warns_and_keeps_last(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _five_image_package(tmp_path, b"x")
    assert main(["pk1.out", "--image=file=all.o"]) == 0
    assert "warning: Multiple inputs match to a single file, 'all.o'" in capsys.readouterr().err
    assert Path("all.o").read_bytes() == b"x"


def test_extract_from_real_object_and_bitcode_like_llvm(tmp_path):
    clang = need_tool("clang-19")
    tool = need_tool("clang-offload-packager-19")
    src = tmp_path / "s.c"
    src.write_text("int main(void){int x=0;\n#pragma omp target map(tofrom:x)\nx=1;\nreturn !x;}\n")
    for flags, out in (([], "s.o"), (["-emit-llvm"], "s.bc")):
        res = run([clang, "-fopenmp", "--offload-arch=sm_80", "-nogpulib", NV_BC, "-c", *flags, src, "-o",
                   tmp_path / out])
        assert res.returncode == 0, res.stderr
        for sub in ("llvm", "ours"):
            (tmp_path / f"{sub}-{out}").mkdir()
        assert run([tool, f"../{out}", "--image=kind=openmp"], cwd=tmp_path / f"llvm-{out}").returncode == 0
        res = run_cli("packager", f"../{out}", "--image=kind=openmp", cwd=tmp_path / f"ours-{out}")
        assert res.returncode == 0, res.stderr
        names = os.listdir(tmp_path / f"llvm-{out}")
        assert names and sorted(os.listdir(tmp_path / f"ours-{out}")) == sorted(names)
        for n in names:
            assert (tmp_path / f"ours-{out}" / n).read_bytes() == (tmp_path / f"llvm-{out}" / n).read_bytes()


def test_archive_output_readable_by_llvm_ar(tmp_path, monkeypatch):
    ar = need_tool("llvm-ar-19")
    monkeypatch.chdir(tmp_path)
    _five_image_package(tmp_path, b"\x7fELF pretend")
    assert main(["pk1.out", "--archive", "--image=file=gfx908.a,arch=gfx908"]) == 0
    res = run([ar, "t", "gfx908.a"])
    assert res.returncode == 0 and res.stdout.decode().split() == ["pk1.out"]
    assert run([ar, "p", "gfx908.a"]).stdout == b"\x7fELF pretend"


def test_archive_requires_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _five_image_package(tmp_path, b"x")
    assert main(["pk1.out", "--archive", "--image=arch=gfx908"]) == 1
    assert capsys.readouterr().err.strip() == "offload-packager: error: Image must have a 'file' argument."


# --- errors ----------------------------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["-o", "x.out", "in.out"], "Packaging to an output file and extracting from an input file are mutually exclusive."),
    (["-o", "x.out", "--image=file=a.o"], "'file' and 'triple' are required image arguments"),
    (["-o", "x.out", "--image=file=missing.o,triple=t"], "No such file or directory"),
    (["-o", "x.out", "--image=file=.,triple=t"], "Is a directory"),
    (["missing.out", "--image=kind=openmp"], "'missing.out': No such file or directory"),
    (["--bogus"], "Unknown command line argument '--bogus'.  Try: 'offload-packager --help'"),
    (["a", "b"], "Too many positional arguments specified!"),
    (["-o"], "for the -o option: requires a value!"),
    (["--llvm-version=18", "-o", "x"], "unsupported --llvm-version=18"),
])
def test_cli_errors(tmp_path, args, message):
    (tmp_path / "a.o").write_bytes(b"x")
    res = run_cli("packager", *args, cwd=tmp_path)
    err = res.stderr.decode()
    assert res.returncode == 1
    # LLVM's option parser's mistakes are `<name>: <message>` (no `error:`), as LLVM 19 prints them.
    option = message.startswith(("Unknown command line", "Too many positional", "for the "))
    prefix = "offload-packager: " if option else "offload-packager: error: "
    assert err.splitlines() == [f"{prefix}{message}"] or err.startswith(
        f"{prefix}{message}") and len(err.splitlines()) == 1
    assert "Traceback" not in err
    assert not (tmp_path / "x.out").exists()


def test_failed_packaging_leaves_no_output(tmp_path):
    (tmp_path / "a.o").write_bytes(b"x")
    (tmp_path / "x.out").write_bytes(b"old")
    res = run_cli("packager", "-o", "x.out", "--image=file=a.o,triple=t", "--image=file=nope,triple=t", cwd=tmp_path)
    assert res.returncode == 1 and (tmp_path / "x.out").read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".x.out")] == []


def test_help_version_and_no_work(tmp_path):
    res = run_cli("packager", "--help", cwd=tmp_path)
    assert res.returncode == 0 and b"--image=<<key>=<value>,...>" in res.stdout and b"--archive" in res.stdout
    res = run_cli("packager", "-version", cwd=tmp_path)
    assert res.returncode == 0 and b"19.1.7" in res.stdout
    res = run_cli("packager", cwd=tmp_path)
    assert res.returncode == 0 and os.listdir(tmp_path) == []
    res = run_cli("packager", "-o", "empty.out", cwd=tmp_path)
    assert res.returncode == 0 and (tmp_path / "empty.out").read_bytes() == b""


def test_stdin_and_stdout(tmp_path):
    (tmp_path / "a.o").write_bytes(b"payload")
    res = run_cli("packager", "-o", "-", "--image=file=a.o,triple=t,arch=x", cwd=tmp_path)
    assert res.returncode == 0
    (img,) = read_offload_binaries(res.stdout)
    assert bytes(img.image) == b"payload"
    res = run_cli("packager", "-", "--image=arch=x", cwd=tmp_path, input=res.stdout)
    assert res.returncode == 0 and (tmp_path / "--t-x.0.o").read_bytes() == b"payload"


# --- hostile metadata ------------------------------------------------------------------------

@pytest.mark.parametrize("triple, arch", [("t", "../../x"), ("../..", "x"), ("a/b", "/etc/passwd"),
                                          ("t", "x\0y"), ("t", "..\\..\\x"), ("", "..")])
def test_hostile_metadata_never_escapes(tmp_path, monkeypatch, capsys, triple, arch):
    work = tmp_path / "out"
    work.mkdir()
    monkeypatch.chdir(work)
    pkg = write_offload_binary(OffloadImage(1, 1, 0, {"triple": triple, "arch": arch}, b"evil"))
    (tmp_path / "evil.out").write_bytes(pkg)
    assert main([str(tmp_path / "evil.out"), "--image=kind=openmp"]) == 0
    written = os.listdir(work)
    assert len(written) == 1 and "/" not in written[0] and "\0" not in written[0]
    assert (work / written[0]).read_bytes() == b"evil"
    assert sorted(os.listdir(tmp_path)) == ["evil.out", "out"]
    raw = generated_name("evil.out", read_offload_binaries(pkg)[0], 0)
    if raw != written[0]:
        assert "warning:" in capsys.readouterr().err


@pytest.mark.parametrize("content", [b"\x10\xff\x10\xad" + b"\0" * 60, b"\x10\xff\x10\xad\x01\0\0\0" + b"\xff" * 80])
def test_corrupt_package_is_one_error_line(tmp_path, content):
    (tmp_path / "bad.out").write_bytes(content)
    res = run_cli("packager", "bad.out", "--image=kind=openmp", cwd=tmp_path)
    err = res.stderr.decode()
    assert res.returncode == 1 and len(err.splitlines()) == 1 and err.startswith("offload-packager: error: ")
    assert os.listdir(tmp_path) == ["bad.out"]


_key = st.text(alphabet="abfiklrtnoe_-+:.=", max_size=12)
_val = st.text(alphabet="abc019_-+:./=", max_size=70)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pairs=st.lists(st.tuples(_key, _val), max_size=12), kind=st.sampled_from(["", "openmp", "hip", "cuda", "x"]),
       version=st.sampled_from([19, 22]))
def test_hypothesis_image_arguments_byte_identical(inputs, pairs, kind, version):
    """Arbitrary --image strings (repeated, empty and '='-containing keys and values)."""
    tool = need_tool("clang-offload-packager-19" if version == 19 else "llvm-offload-binary-22")
    parts = ["file=a.o", "triple=t"] + [f"{k}={v}" if "=" not in k else k for k, v in pairs if not k.startswith(
        ("file", "triple"))]
    if kind:
        parts.append(f"kind={kind}")
    image = "--image=" + ",".join(parts)
    llvm = run([tool, "-o", "llvm.out", image], cwd=inputs)
    ours = run_cli("packager", f"--llvm-version={version}", "-o", "ours.out", image, cwd=inputs)
    assert (ours.returncode, llvm.returncode) == (0, 0), (ours.stderr, llvm.stderr)
    assert (inputs / "ours.out").read_bytes() == (inputs / "llvm.out").read_bytes(), image


def test_archive_output_byte_identical_on_real_objects(tmp_path):
    """`--archive` from a real fat object and from an archive of fat objects: the same archive
    bytes as clang-offload-packager-19 (member names, deterministic header, ELF/bitcode symtab)."""
    clang = need_tool("clang-19")
    tool = need_tool("clang-offload-packager-19")
    ar = need_tool("llvm-ar-19")
    src = tmp_path / "s.c"
    src.write_text("int main(void){int x=0;\n#pragma omp target map(tofrom:x)\nx=1;\nreturn !x;}\n")
    objs = {"nv.o": ["--offload-arch=sm_80", NV_BC], "amd.o": ["--offload-arch=gfx90a", "-nogpulib"]}
    for out, flags in objs.items():
        res = run([clang, "-fopenmp", *flags, "-c", src, "-o", tmp_path / out])
        assert res.returncode == 0, res.stderr
    assert run([ar, "rcs", "in.a", "nv.o", "amd.o"], cwd=tmp_path).returncode == 0
    for inp, image in (("nv.o", "arch=sm_80"), ("in.a", "triple=amdgcn-amd-amdhsa"), ("in.a", "kind=openmp")):
        assert run([tool, inp, "--archive", f"--image=file=llvm.a,{image}"], cwd=tmp_path).returncode == 0
        res = run_cli("packager", inp, "--archive", f"--image=file=ours.a,{image}", cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert (tmp_path / "ours.a").read_bytes() == (tmp_path / "llvm.a").read_bytes(), (inp, image)


def test_failed_extraction_leaves_no_partial_outputs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _five_image_package(tmp_path, b"x")
    before = sorted(os.listdir())
    # the second request cannot be written: the first one's file must not stay behind
    assert main(["pk1.out", "--image=arch=sm_70", "--image=file=no/such/dir/x.o,arch=sm_80"]) == 1
    assert sorted(os.listdir()) == before
    # a request that is invalid is found before anything is written
    assert main(["pk1.out", "--archive", "--image=file=ok.a,arch=sm_70", "--image=arch=sm_80"]) == 1
    assert sorted(os.listdir()) == before
    assert capsys.readouterr().err.count("error:") == 2
