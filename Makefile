# Two commands on a fresh machine:
#   make example   builds and runs example_project/ and prints a report
#   make test      runs the whole test suite
# Each installs what it needs first (Debian packages, .venv), idempotently.

VENV_PY := .venv/bin/python
JOBS ?= 2

.PHONY: deps example test bench clean

deps:
	@bash scripts/install-deps.sh

example: deps
	@$(VENV_PY) example_project/run_example.py --jobs $(JOBS)

test: deps
	@$(VENV_PY) -m pytest -q

bench: deps
	@$(VENV_PY) bench/bundler.py
	@$(VENV_PY) bench/scons_scale.py

clean:
	@cd example_project && ../$(VENV_PY) -m SCons -c -Q >/dev/null 2>&1 || true
	rm -rf .venv .pytest_cache example_project/build
