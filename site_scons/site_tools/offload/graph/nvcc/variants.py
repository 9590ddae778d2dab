"""nvcc's arch variants: whether the nvcc in use builds each arch-specific or family arch of a
compile (`sm_90a`, `sm_100f`), refused by name when it does not (`refuse_unbuilt_variants`)."""

from __future__ import annotations

import os
import re
import subprocess

import SCons.Errors

from ...scons import nodes as _nodes


# An arch with a suffix: arch-specific `sm_90a`, family `sm_100f`.
_VARIANT = re.compile(r"sm_(\d+)([a-z])")
_variants: dict[tuple, str] = {}


def _variant_refused(env, command: str, path: str, arch: str) -> str:
    """What nvcc says when asked for the arch-specific or family variant `arch` (`''` when it
    builds it): nvcc lists only its `sm_NN` (`--list-gpu-code`), and which variants a CUDA
    release has is its own to say (CUDA 13 builds `sm_90a` and `sm_100f`, not `sm_90f` nor
    `sm_89a`). Asked with `--dryrun`, which compiles nothing (~25 ms), once per nvcc and arch;
    kept between runs with the other probes' answers while nvcc is unchanged."""
    from ...toolchain import probe_cache as _probe_cache
    from ...toolchain import discovery as _toolchain
    penv = _toolchain.build_env(env)
    memo = (path, penv.get("PATH", ""), arch)
    if memo in _variants:
        return _variants[memo]
    top = _nodes.abspath(env.Dir("#"))
    k = _probe_cache.key(command, path, penv, False, probe=f"nvcc-arch-variant {arch}")
    entry = _probe_cache.load(top, k) if k else None
    if entry is not None and len(entry["answers"]) == 1 and isinstance(entry["answers"][0], str):
        _variants[memo] = entry["answers"][0]
        return _variants[memo]
    n = arch[3:]
    try:
        run = subprocess.run([path, "--dryrun", "-gencode", f"arch=compute_{n},code=sm_{n}", "-c", "-x", "cu",
                              os.devnull, "-o", os.devnull], capture_output=True, text=True, timeout=60, env=penv)
    except (OSError, subprocess.SubprocessError, ValueError):
        return ""            # it cannot say: the compile will
    said = [ln.strip() for ln in (run.stdout + run.stderr).splitlines() if f"_{n}" in ln and not ln.startswith("#$")]
    # Only a refusal that names the arch is one: a wrapper failing on an empty source is not.
    _variants[memo] = re.sub(r"\s+", " ", said[0]) if run.returncode and said else ""
    if k and (run.returncode == 0 or said):
        _probe_cache.store(top, k, [_variants[memo]], [])
    return _variants[memo]


def refuse_unbuilt_variants(env, o: dict, source) -> None:
    """A `UserError` naming the first arch-specific or family arch of the compile with overrides
    `o` (`sm_89a`, `sm_90f`) that nvcc does not build. The check of `OFFLOAD_ARCHS` against what
    nvcc lists takes every listed `sm_NN` as standing for its variants too; one nvcc lacks would
    otherwise fail in nvcc's plan (a note, then the compile's own error) or in the compile, with
    no word of which setting to change. Asked in every nvcc mode (split or not, a launcher)."""
    from ...toolchain import discovery as _toolchain
    suffixed = [a for a in o.get("_OFFLOAD_NVCC_ARCHS") or [] if _VARIANT.fullmatch(a)]
    command = env.subst("$OFFLOAD_NVCC").strip() if suffixed else ""
    path = _toolchain.resolve(env, command) if command else None
    for arch in suffixed if path else ():
        why = _variant_refused(env, command, path, arch)
        if why:
            src = f", which compiles '{source[0]}' ({o.get('_OFFLOAD_LANG') or 'cuda'})" if source else ""
            raise SCons.Errors.UserError(
                f"offload: OFFLOAD_ARCHS: '{arch}' is not an arch {_toolchain.compiler_words(env, command, True)} "
                f"builds ({why}){src}: sm_{_VARIANT.fullmatch(arch).group(1)}, or a CUDA whose nvcc builds "
                f"{arch} (OFFLOAD_NVCC)")
