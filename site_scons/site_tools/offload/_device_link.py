"""`python _device_link.py [--llvm=N] OUT REF CLANG [clang link flags] -- IMAGE...`: the device link
of one AMD arch of a program, as its own build step.

clang-linker-wrapper links AMD OpenMP device code (bitcode) with LTO inside the final link, for
every arch, every time the program is linked: at 100 sources that is ~25 s per arch, so adding
one arch or editing one source re-runs all of them. Here the LTO of one arch runs alone: the
images (`--image=file=...,triple=...,arch=...,kind=...`) go into an empty carrier object shaped
like REF, and `CLANG -r` links them with the device runtime: the wrapper's own LTO and code
generator, run exactly as in a final link. The object that code generator writes is what the
wrapper then hands to its device linker (ld.lld, through clang); `-Xoffload-linker-<triple>
--reproduce=` makes that ld.lld copy its inputs into a tar file, and OUT is that object, byte for
byte. Given to the final link as that arch's only image, the final link's ld.lld step gives the
device image the wrapper gives without the split (tests/scons_tool/test_scons_openmp.py,
tests/scons_tool/test_scons_link_shapes.py).

Earlier versions compiled the wrapper's `-save-temps` module (`*.postopt.bc`) again with `llc`
at the wrapper's options. That is not the wrapper's code generation: a module read back from a
bitcode file is not the one the wrapper holds in memory (for one, the order of use lists is not
kept in the file, and the code generator's choices can follow it), and on some kernels (seen
with and without `-ffast-math`) the `.text` instructions came out in another order. Nothing here
re-creates the wrapper's code generation: it is the wrapper's own.

`--llvm=N`: the major version of the clang, which says how its wrapper forwards device-linker
options (LLVM 19 gives them to its clang as they are, so `-Wl,` goes first; later versions put
`-Xlinker` before them). When the clang rejects the form given, the other is tried."""

import os
import shutil
import subprocess
import sys
import tarfile

# The wrapper's inner clang warns about its own -O2 on some versions; not the user's business.
_NOISE = "argument unused during compilation: '-O2'"
_TAR = "wrapper-link.tar"


def _capture_flags(triple: str, direct: bool) -> list[str]:
    """Flags that make the wrapper's device linker (ld.lld) copy its inputs into `_TAR` (relative
    to the working directory, which the wrapper and its clang inherit)."""
    return [f"-Xoffload-linker-{triple}", ("-Wl," if direct else "") + f"--reproduce={_TAR}"]


def _rejected(output: str) -> bool:
    """The clang or ld.lld refused the capture option (the other form of forwarding applies)."""
    return "reproduce" in output and ("unknown argument" in output or "unknown option" in output)


def _linked_object(tar_path: str, triple: str) -> bytes | str:
    """The object the wrapper's code generator wrote for `triple` (its name is
    `<output>.<triple>.<arch>-<random>.o`), from ld.lld's reproduce tar; or why there is none."""
    try:
        with tarfile.open(tar_path) as tar:
            found = [m for m in tar.getmembers()
                     if m.isfile() and os.path.basename(m.name).startswith(f"r.o.{triple}.")]
            if len(found) != 1:
                return (f"expected the one object the linker wrapper's code generator wrote for {triple}, "
                        f"found {len(found)} (does this clang's wrapper run LTO itself? if not, set "
                        "OFFLOAD_SPLIT_DEVICE_LINK=False)")
            data = tar.extractfile(found[0]).read()
    except (OSError, tarfile.TarError) as exc:
        return f"cannot read the device linker's inputs ({exc})"
    if data[:4] != b"\x7fELF" or len(data) < 18 or int.from_bytes(data[16:18], "little") != 1:
        return (f"the device linker's input {os.path.basename(found[0].name)} is not a relocatable object "
                "(this clang's device linker runs LTO itself: set OFFLOAD_SPLIT_DEVICE_LINK=False)")
    return data


def main(argv: list[str]) -> int:
    llvm = 19
    if argv and argv[0].startswith("--llvm="):
        try:
            llvm = int(argv[0][len("--llvm="):])
        except ValueError:
            llvm = 19
        argv = argv[1:]
    if "--" not in argv or argv.index("--") < 3:
        sys.stderr.write("usage: _device_link.py [--llvm=N] OUT REF CLANG [clang link flags] -- IMAGE...\n")
        return 1
    sep = argv.index("--")
    (out, ref, clang, *flags), images = argv[:sep], argv[sep + 1:]
    if not images:
        sys.stderr.write("offload device link: no images\n")
        return 1
    from offload_tool.cli import embed as embed_cli
    from offload_tool.cli import packager as packager_cli
    from offload_tool.ops import embed, package as package_ops
    from offload_tool.cli.command_line import run_command

    image_specs = [package_ops.parse_image_arguments(i[len("--image="):]) for i in images]
    triples = {args["triple"] if "triple" in args else None for args in image_specs}
    if len(triples) != 1 or None in triples:
        sys.stderr.write(f"offload device link: images of one triple expected, got {sorted(map(str, triples))}\n")
        return 1
    triple = triples.pop()
    work = os.path.join(os.path.dirname(os.path.abspath(out)), f".{os.path.basename(out)}.{os.getpid()}.d")
    os.makedirs(work)
    try:
        package, carrier = os.path.join(work, "images.pkg"), os.path.join(work, "carrier.o")
        rc = run_command(packager_cli.PROG, lambda: package_ops.write_package(image_specs, package))
        if rc:
            return rc
        rc = run_command(embed_cli.PROG, lambda: embed.embed_files(ref, [package], carrier, empty_host=True))
        if rc:
            return rc
        # The wrapper's temporary files (the linked object among them) in the work folder.
        env = dict(os.environ, TMPDIR=work)
        for direct in ((True, False) if llvm < 20 else (False, True)):
            tar_path = os.path.join(work, _TAR)
            if os.path.exists(tar_path):
                os.remove(tar_path)
            try:
                cp = subprocess.run([clang, *flags, *_capture_flags(triple, direct), "-r", "-o", "r.o", "carrier.o"],
                                    cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            except OSError as exc:
                sys.stderr.write(f"offload device link: cannot run {clang}: {exc.strerror or exc}\n")
                return 1
            if not (cp.returncode and _rejected(cp.stdout)):
                break
        text = "".join(line for line in cp.stdout.splitlines(keepends=True) if _NOISE not in line)
        sys.stderr.write(text)
        if cp.returncode:
            return cp.returncode
        data = _linked_object(tar_path, triple)
        if isinstance(data, str):
            sys.stderr.write(f"offload device link: {data}\n")
            return 1
        with open(os.path.join(work, "linked.o"), "wb") as f:
            f.write(data)
        os.replace(os.path.join(work, "linked.o"), out)
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    from offload_tool.cli.command_line import run_command
    sys.exit(run_command("offload device link", lambda: main(sys.argv[1:])))
