# Two commands on a fresh machine:
#   make example   builds and runs example_project/ and prints a report
#   make test      runs the whole test suite
# Each installs what it needs first (Debian packages, .venv), idempotently.
#   make gpu-kit GPU=sm_90   builds the example's and the kernel corpus's programs for one GPU
#                            (sm_NN or gfxNNN) into dist/gpu-kit-<GPU>.tar.xz, to run on a GPU
#                            node without compilers: sh gpu-kit-<GPU>/run.sh (docs/gpu-kit.md)

VENV_PY := .venv/bin/python
JOBS ?= 2
GPU ?= sm_90

.PHONY: deps example test bench gpu-kit clean

deps:
	@bash scripts/install-deps.sh

example: deps
	@$(VENV_PY) example_project/run_example.py --jobs $(JOBS)

test: deps
	@$(VENV_PY) -m pytest -q

gpu-kit: deps
	@$(VENV_PY) scripts/gpu_kit.py --gpu $(GPU) --jobs $(JOBS)

bench: deps
	@$(VENV_PY) bench/bundler.py
	@$(VENV_PY) bench/scons_scale.py

clean:
	@cd example_project && ../$(VENV_PY) -m SCons -c -Q >/dev/null 2>&1 || true
	rm -rf .venv .pytest_cache example_project/build build/gpu-kit-* dist/gpu-kit-*
