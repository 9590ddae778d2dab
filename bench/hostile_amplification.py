"""Time and peak memory of the CLIs on the crafted amplification inputs of tests/hostile_inputs.py.

    PYTHONPATH=$PWD .venv/bin/python bench/hostile_amplification.py [CASE...]

Each case runs in a child process capped at AS_MB MiB of address space (default 4096) and CPU_S
seconds of CPU (default 60); one line per case: input size, exit status, wall time, peak RSS and
the last stderr line."""
import os, resource, subprocess, sys, time, tempfile
sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
import hostile_inputs as H
CASES = {
 "nested_bundle": (lambda: H.nested_shared_bundle(16, 8), ["offload-tool", "inspect"]),
 "shared_ccob": (lambda: H.shared_ccob_bundle(50, 64 << 20), ["offload-tool", "inspect"]),
 "elf_shared_offloading": (lambda: H.elf_shared_offloading(4000, 64), ["offload-tool", "inspect"]),
 "elf_shared_offloading_pkgr": (lambda: H.elf_shared_offloading(4000, 64), ["offload-packager", "--image=arch=gfx1"]),
 "elf_overlapping_names": (lambda: H.elf_overlapping_names(2 << 20), ["offload-tool", "inspect"]),
 "elf_shared_names": (lambda: H.elf_shared_names(2 << 20), ["offload-tool", "inspect"]),
 "archive_long_names": (lambda: H.archive_long_names(1 << 20), ["offload-tool", "inspect"]),
 "package_strings": (lambda: H.overlapping_strings_package(8 << 20), ["offload-tool", "inspect"]),
 "hip_fatbin": (lambda: H.elf_hip_fatbin(10 << 20, 512), ["offload-tool", "inspect"]),
 "bitcode": (lambda: H.bitcode_literal_abbrev(2 << 20, 4096), ["offload-tool", "inspect"]),
 "fatbin_bomb": (lambda: H.fatbin_zstd_bomb(4, 1 << 30), ["offload-tool", "inspect"]),
}
MODS = {"offload-tool": "offload_tool.cli.tool", "offload-packager": "offload_tool.cli.packager", "offload-bundler": "offload_tool.cli.bundler"}
AS = int(os.environ.get("AS_MB", "4096")) << 20
CPU = int(os.environ.get("CPU_S", "60"))
def limit():
    resource.setrlimit(resource.RLIMIT_AS, (AS, AS)); resource.setrlimit(resource.RLIMIT_CPU, (CPU, CPU))
for name in (sys.argv[1:] or CASES):
    gen, cmd = CASES[name]
    data = gen()
    d = tempfile.mkdtemp()
    path = os.path.join(d, "in")
    open(path, "wb").write(data)
    argv = [sys.executable, "-c", f"import sys; from {MODS[cmd[0]]} import main; sys.exit(main(sys.argv[1:]))"] + cmd[1:] + [path]
    t = time.time()
    so, se = open(os.path.join(d, "out"), "wb"), open(os.path.join(d, "err"), "wb")
    p = subprocess.Popen(argv, stdout=so, stderr=se, preexec_fn=limit, cwd=d, env=dict(os.environ, PYTHONPATH=os.getcwd()))
    _, status, ru = os.wait4(p.pid, 0)
    dt = time.time() - t
    rc = os.waitstatus_to_exitcode(status)
    out = open(os.path.join(d, "out"), "rb").read(); err = open(os.path.join(d, "err"), "rb").read()
    lines = err.decode(errors="replace").strip().splitlines()
    nl = out.count(b"\n")
    last = lines[-1][:150] if lines else ""
    print(f"{name:28s} in={len(data)/1024:8.0f}KiB rc={rc:4d} wall={dt:6.2f}s maxrss={ru.ru_maxrss/1024:6.0f}MiB out_lines={nl} err={last}", flush=True)
