# `make demo` and `make test` are all a newcomer needs; both set up .venv on first use.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TOOLS := .venv-tools
TOOLS_STAMP := $(TOOLS)/.installed
# Packages are installed by uv (from PyPI, as pip would): the same versions pip resolves, in a
# fifth of the time (16 s against 85 s for .venv), which a fresh `make test` feels. Compiled to
# bytecode at install, as pip does: where PYTHONDONTWRITEBYTECODE is set (this machine image sets
# it), every process would otherwise compile what it imports, 1.8 s of CPU for `bucket-memory ls`
# and for each of the suite's many subprocesses. (The tools run once per `make lint`: compiled as they import.)
UV_VERSION := 0.13.9
INSTALL := $(PY) -m uv pip install --quiet --compile-bytecode --python $(PY)

.PHONY: demo test test-slow lint bench screenshots dist clean

# The browser tests drive Debian's chromium. Installing it takes a minute or two, so `make test`
# starts it in the background and waits for it only before pytest; without root or apt-get the
# browser tests skip and say why.
CHROMIUM_LOG := $(VENV)/chromium-install.log
define install_chromium
command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
  { DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium || \
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; }; }; }
endef

# Python 3.13 from, in order: $PYTHON, a python3.13 that really runs (pyenv shims can fail),
# pyenv's own 3.13 install, or the system one (Debian 13).
PYTHON313 := $(shell for p in "$$PYTHON" python3.13 $$(ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/3.13.*/bin/python3.13 2>/dev/null | sort -V -r) /usr/bin/python3.13 /usr/local/bin/python3.13; do \
	[ -n "$$p" ] && "$$p" -c 'import sys; assert sys.version_info[:2] == (3, 13)' 2>/dev/null && { echo "$$p"; break; }; done)

$(STAMP): pyproject.toml
	@if [ -z "$(PYTHON313)" ]; then echo "error: Python 3.13 not found. Install it (pyenv install 3.13, or apt-get install python3.13) or set PYTHON=/path/to/python3.13." >&2; exit 1; fi
	@[ -x $(PY) ] || $(PYTHON313) -m venv $(VENV)
	$(PY) -m pip install --quiet uv==$(UV_VERSION)
	$(INSTALL) -e '.[test]'
	$(PY) -m compileall -q -j0 src tests examples benchmarks >/dev/null
	@touch $(STAMP)

$(TOOLS_STAMP): requirements-tools.txt
	@if [ -z "$(PYTHON313)" ]; then echo "error: Python 3.13 not found (see above)." >&2; exit 1; fi
	@[ -x $(TOOLS)/bin/python ] || $(PYTHON313) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install --quiet uv==$(UV_VERSION)
	$(TOOLS)/bin/python -m uv pip install --quiet --python $(TOOLS)/bin/python -r requirements-tools.txt
	@touch $(TOOLS_STAMP)

lint: $(STAMP) $(TOOLS_STAMP)
	$(VENV)/bin/ruff check src tests benchmarks examples tools
	$(VENV)/bin/ruff format --check src tests benchmarks examples tools
	$(VENV)/bin/mypy
	$(TOOLS)/bin/checkov -d terraform --framework terraform --skip-download --quiet --compact
	$(TOOLS)/bin/python tools/terraform_fmt_check.py terraform
	$(TOOLS)/bin/python tools/terraform_fmt_check.py tests/terraform_roots

# Lint runs beside the tests, not before them: the suite leaves part of the two cores idle while
# its processes wait on each other, and mypy's first run on a fresh clone fills it (a fresh
# `make test` was 450 s of its 480 s budget with lint first). Its output follows the tests'.
LINT_LOG := $(VENV)/lint.log
test:
	@command -v chromium >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || echo "make test: installing Debian's chromium" \
	  "with apt-get in the background, for the browser tests (apt may upgrade system packages it depends on;" \
	  "log: $(CHROMIUM_LOG)). Install chromium first, or run as a user, to skip this." >&2
	@mkdir -p $(VENV); ( $(install_chromium) ) > $(CHROMIUM_LOG) 2>&1 & installing=$$!; \
	$(MAKE) --no-print-directory -j2 $(STAMP) $(TOOLS_STAMP) || exit 1; \
	$(MAKE) --no-print-directory lint > $(LINT_LOG) 2>&1 & linting=$$!; \
	wait $$installing || echo "warning: chromium did not install (see $(CHROMIUM_LOG)); the browser tests will skip" >&2; \
	$(VENV)/bin/pytest -q -n 3 --durations=25; tested=$$?; \
	wait $$linting; linted=$$?; cat $(LINT_LOG); \
	[ $$linted = 0 ] || echo "error: make lint failed (above)" >&2; \
	[ $$tested = 0 ] && [ $$linted = 0 ]

test-slow: $(STAMP)
	$(VENV)/bin/pytest -q -m slow -n 2

# The browser views in docs/img, as the browser tests see them.
screenshots: $(STAMP)
	@( $(install_chromium) ) > $(CHROMIUM_LOG) 2>&1 || true
	BUCKET_MEMORY_SCREENSHOTS=docs/img $(VENV)/bin/pytest -q tests/test_browser.py

bench: $(STAMP)
	$(INSTALL) -e '.[test,bench]'
	$(PY) -m benchmarks.bench
	$(PY) -m benchmarks.records
	$(PY) -m benchmarks.recall
	$(PY) -m benchmarks.fusion
	$(PY) -m benchmarks.peers
	$(PY) -m benchmarks.peers_s3
	$(PY) -m benchmarks.layers
	$(PY) -m benchmarks.erase
	$(PY) -m benchmarks.fleet
	$(PY) -m benchmarks.fleet --records
	$(PY) -m benchmarks.memories

# The wheel and sdist in dist/, built from this checkout and checked as PyPI would take them.
dist: $(STAMP)
	$(INSTALL) 'twine>=6,<7'
	rm -rf dist
	$(PY) -m build --outdir dist .
	$(PY) -m twine check --strict dist/*

demo: $(STAMP)
	$(PY) -m examples.demo

clean:
	rm -rf $(VENV) $(TOOLS) .pytest_cache .mypy_cache .ruff_cache
