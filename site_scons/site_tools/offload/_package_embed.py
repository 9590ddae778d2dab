"""`python _package_embed.py [--empty-host] PACKAGE FAT HOST [packager options]`: package the
images, then embed the package, in one process, through the library's functions
(`package_ops.write_package`, `embed.embed_files`).

OffloadObject's package and fat object are two targets of one action: one Python start-up per
source instead of two (~0.15 s of CPU each, a tenth of a source's whole build with 4 archs), or
none when the tool runs it inside SCons. With `--empty-host`, FAT is an empty object shaped like
HOST that only carries the device images (the program-level carrier of a split device link).
Errors are one line, `offload-packager: error: ...` or `offload-embed: error: ...`, as from the
CLIs the two steps stand for."""

import os
import sys


def main(argv: list[str]) -> int:
    empty_host = bool(argv) and argv[0] == "--empty-host"
    if empty_host:
        argv = argv[1:]
    if len(argv) < 3:
        sys.stderr.write("usage: _package_embed.py [--empty-host] PACKAGE FAT HOST [packager options]\n")
        return 1
    package, fat, host, *options = argv
    from offload_tool.cli import embed as embed_cli
    from offload_tool.cli import packager as packager_cli
    from offload_tool.ops import embed, package as package_ops
    from offload_tool.cli.command_line import run_command

    def package_images() -> None:
        opts = packager_cli.PARSER.parse(options)
        images = [package_ops.parse_image_arguments(i) for i in opts.values["image"]]
        package_ops.write_package(images, package, llvm_version=packager_cli.llvm_version_option(opts.last("llvm-version")))

    rc = run_command(packager_cli.PROG, package_images)
    if rc:
        return rc
    rc = run_command(embed_cli.PROG, lambda: embed.embed_files(host, [package], fat, empty_host=empty_host))
    if rc:
        # One action, two targets: a failed embed leaves neither (as a failed command leaves none).
        try:
            os.unlink(package)
        except OSError:
            pass
    return rc


if __name__ == "__main__":
    from offload_tool.cli.command_line import run_command
    sys.exit(run_command("offload-packager", lambda: main(sys.argv[1:])))
