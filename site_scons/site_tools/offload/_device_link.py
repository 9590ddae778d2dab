"""`python _device_link.py OUT REF LLC CLANG [clang link flags] -- IMAGE...`: the device link of one
AMD arch of a program, as its own build step.

clang-linker-wrapper links AMD OpenMP device code (bitcode) with LTO inside the final link, for
every arch, every time the program is linked: at 100 sources that is ~25 s per arch, so adding
one arch or editing one source re-runs all of them. Here the LTO of one arch runs alone: the
images (`--image=file=...,triple=...,arch=...,kind=...`) go into an empty carrier object shaped
like REF, `CLANG -r -save-temps` links them with the device runtime (the wrapper's own LTO), and
its optimized module (`r.o.<triple>.<arch>.postopt.bc`) is compiled to OUT by that LLVM's `llc`
(LLC: what the clang answers to `-print-prog-name=llc`)
with the options of the wrapper's LTO code generator (CPU, opt level, PIC). Not the `.o` that
-save-temps leaves: that one went through a textual `.s`, which changes the kernel descriptors'
float modes on some processors (gfx1030). Given to the final link as that arch's only image, OUT
is what the wrapper would have produced itself: the final link's ld.lld step gives a
byte-identical device image (tests/test_scons_openmp.py checks this)."""

import glob
import os
import shutil
import subprocess
import sys

# The wrapper's inner clang (assembling the saved .s) warns about its own -O2; not the user's business.
_NOISE = "argument unused during compilation: '-O2'"


def _opt_level(flags: list[str]) -> str:
    """The wrapper's `--opt-level` as clang derives it from the link's last -O flag (default 2)."""
    level = "2"
    for f in flags:
        if f.startswith("-O"):
            level = {"": "1", "0": "0", "1": "1", "2": "2", "3": "3", "4": "3", "fast": "3", "s": "2", "z": "2",
                     "g": "1"}.get(f[2:], level)
    return level


def main(argv: list[str]) -> int:
    if "--" not in argv or argv.index("--") < 4:
        sys.stderr.write("usage: _device_link.py OUT REF LLC CLANG [clang link flags] -- IMAGE...\n")
        return 1
    sep = argv.index("--")
    (out, ref, llc, clang, *flags), images = argv[:sep], argv[sep + 1:]
    if not images:
        sys.stderr.write("offload device link: no images\n")
        return 1
    from offload_tool.cli import embed as embed_cli
    from offload_tool.cli import packager as packager_cli
    from offload_tool.ops import embed, package as package_ops
    from offload_tool.rules import target_id
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
        try:
            cp = subprocess.run([clang, *flags, "-r", "-save-temps", "-o", "r.o", "carrier.o"], cwd=work,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        except OSError as exc:
            sys.stderr.write(f"offload device link: cannot run {clang}: {exc.strerror or exc}\n")
            return 1
        text = "".join(line for line in cp.stdout.splitlines(keepends=True) if _NOISE not in line)
        sys.stderr.write(text)
        if cp.returncode:
            return cp.returncode
        found = glob.glob(os.path.join(glob.escape(work), f"r.o.{glob.escape(triple)}.*.postopt.bc"))
        if len(found) != 1:
            sys.stderr.write(f"offload device link: expected one linked {triple} module from {clang}, "
                             f"found {len(found)}\n")
            return 1
        arch = os.path.basename(found[0])[len(f"r.o.{triple}."):-len(".postopt.bc")]
        # A target ID (gfx906:xnack-) gives the processor; its features are already in the module's
        # function attributes, and the wrapper's code generator adds none (an -mattr here changes
        # instruction scheduling: the image then differs from the wrapper's and clang's own).
        parsed = target_id.parse_target_id_format(arch)
        if parsed is None:
            sys.stderr.write(f"offload device link: '{arch}' is not a target ID\n")
            return 1
        try:
            cp = subprocess.run([llc, f"-O{_opt_level(flags)}", f"-mtriple={triple}", f"-mcpu={parsed[0]}",
                                 "-filetype=obj", "-relocation-model=pic", found[0], "-o", os.path.join(work, "linked.o")])
        except OSError as exc:
            sys.stderr.write(f"offload device link: cannot run {llc}: {exc.strerror or exc} "
                             "(Debian package llvm-N for clang-N)\n")
            return 1
        if cp.returncode:
            return cp.returncode
        os.replace(os.path.join(work, "linked.o"), out)
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    from offload_tool.cli.command_line import run_command
    sys.exit(run_command("offload device link", lambda: main(sys.argv[1:])))
