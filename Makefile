# tzpush developer entry points. `make help` lists them.
#   make install   venv + ActiveMQ (apt, when missing) + SecantusDB's own venv + Chromium (apt)
#   make run       the local stack + the demo
#   make test      the whole suite; the integration fixtures start and stop their own stack
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# The interpreter the venv is made from (and so SecantusDB's, made by the venv's python): Debian's
# own /usr/bin/python3 when it is 3.11 or newer, else the first python3 on PATH that is. Debian
# builds its python with PGO and LTO; pyenv builds without them by default, and here the pyenv
# build measured 25 to 35% slower for tzpush and for the database server, which is Python too
# (docs/performance.md). `make PYTHON3=/path/to/python3.12 install` chooses another; a venv that
# already exists is kept: remove .venv and .local/secantus-venv to rebuild them on a new one.
ifndef PYTHON3
PYTHON3 := $(shell for p in /usr/bin/python3 python3; do \
	$$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null && { echo $$p; break; }; \
	done)
endif
VENV := .venv
PY := $(VENV)/bin/python
TZPUSH := $(VENV)/bin/tzpush
# The integration fixtures' stack (tests/integration/conftest.py reads the same variables).
export TZPUSH_TEST_STATE_DIR ?= $(CURDIR)/.local/test
export TZPUSH_TEST_STOMP_PORT ?= 61623
export TZPUSH_TEST_MONGO_PORT ?= 27027
PYTEST_ARGS ?=
# The suite runs in TEST_WORKERS processes (pytest-xdist), each on a stack of its own (state dir
# <TZPUSH_TEST_STATE_DIR>/gwN, ports + 100 + 10 N): it mostly waits for due instants. Each test
# file runs whole on one worker, the longest files first (tests/scheduling.py), so the 2-minute
# chaos run and the other long drills run beside the rest from the start. TEST_WORKERS=0 runs
# it in one process.
TEST_WORKERS ?= 4
ARGS ?=

.PHONY: help venv install run test lint fmt bench chaos services-up services-down services-status \
	clean promtool client-types

help:
	@echo "targets: venv install run test lint fmt bench chaos services-up services-down services-status clean"
	@echo "  make test PYTEST_ARGS='-k stack -x'    make bench ARGS='--help'"

# Debian's python3 has no ensurepip (so no `-m venv`) until python3-venv is installed.
$(VENV)/.stamp: pyproject.toml
	@if ! test -x $(PY); then \
		if test -z "$(PYTHON3)"; then \
			echo "tzpush needs Python 3.11 or newer: none found (set PYTHON3=/path/to/python3)" >&2; \
			exit 1; \
		fi; \
		echo "making $(VENV) with $(PYTHON3) ($$($(PYTHON3) -V))"; \
		if ! $(PYTHON3) -c 'import ensurepip' 2>/dev/null; then \
			apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y python3-venv; \
		fi; \
		$(PYTHON3) -m venv $(VENV); \
	fi
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $@

# Byte-compile the project's own modules every time (quick when nothing changed): an editable
# install is not compiled by pip, and with PYTHONDONTWRITEBYTECODE set (as on CI) every process
# would compile them again at start, about 0.2 s of a consumer's restart.
venv: $(VENV)/.stamp
	@$(PY) -m compileall -q shared creator consumer ops devstack api bench >/dev/null

install: venv
	$(TZPUSH) services install
	@# Offline validator for deploy/docker-compose.yml (`docker-compose config`, no engine needed).
	@command -v docker-compose >/dev/null || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null; }
	@# Debian's Chromium, which the operator console's browser tests drive through Playwright
	@# (Playwright's own browser download is not used).
	@test -x /usr/bin/chromium || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	@$(MAKE) --no-print-directory promtool
	@# Debian's libfaketime: a chaos run moves one process's clock (bench/chaos_sut.py).
	@test -x /usr/bin/faketime || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq faketime >/dev/null; }

# Debian's Prometheus, for `promtool check rules` (lint) and `promtool test rules` (test) of
# deploy/prometheus/alerts.yml; its server is not used.
promtool:
	@command -v promtool >/dev/null || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		prometheus >/dev/null; }

# The TypeScript client's types, generated again from the OpenAPI document `tzpush api` serves
# (commit the result); `make lint` fails while the committed ones differ.
client-types: venv
	clients/typescript/scripts/deps.sh --no-build
	clients/typescript/scripts/generate.sh $(CURDIR)/$(PY)

# The demo starts the broker and the database when they are not running and stops, on Ctrl-C or at
# the end, exactly what it started.
run: install
	$(TZPUSH) demo $(ARGS)

# pytest's exit code is kept; the safety net stops whatever a killed session left running (only
# processes named by the test state dirs' pid files, and only when no other session holds a
# state dir's lock: two `make test` in one tree take turns, see tests/integration/conftest.py).
test: install
	@command -v node >/dev/null && command -v npm >/dev/null || \
		echo "Node.js is not installed: the TypeScript client's tests are skipped"
	@status=0; $(PY) -m pytest $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile) \
		$(PYTEST_ARGS) || status=$$?; \
	mkdir -p "$(TZPUSH_TEST_STATE_DIR)"; \
	for dir in "$(TZPUSH_TEST_STATE_DIR)" "$(TZPUSH_TEST_STATE_DIR)"/gw*; do \
		test -f "$$dir/.session.lock" || continue; \
		TZPUSH_LOCAL__STATE_DIR="$$dir" flock -n "$$dir/.session.lock" \
			$(TZPUSH) services down >/dev/null || true; \
	done; \
	exit $$status

lint: venv promtool
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(PY) -m tools.import_cycles
	$(PY) -m tools.seam_check
	promtool check rules deploy/prometheus/alerts.yml
	promtool check config --syntax-only deploy/prometheus/prometheus.yml
	@if command -v node >/dev/null && command -v npm >/dev/null; then \
		clients/typescript/scripts/deps.sh --no-build && \
		clients/typescript/scripts/generate.sh $(CURDIR)/$(PY) --check && \
		clients/typescript/node_modules/.bin/tsc -p clients/typescript --noEmit && \
		echo "clients/typescript: types match the API's OpenAPI document; tsc clean"; \
	else echo "Node.js is not installed: the TypeScript client's checks are skipped"; fi

fmt: venv
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: install
	$(PY) -m bench $(ARGS)

# A seeded chaos run (docs/architecture.md "Chaos"): make chaos SEED=3 MINUTES=10
SEED ?= 1
MINUTES ?= 10
chaos: install
	$(PY) -m bench chaos --seed $(SEED) --minutes $(MINUTES) $(ARGS)

services-up: install
	$(TZPUSH) services up

services-down:
	@if [ -x $(TZPUSH) ]; then $(TZPUSH) services down; fi

services-status: venv
	$(TZPUSH) services status

clean:
	@if [ -x $(TZPUSH) ]; then \
		$(TZPUSH) services down || true; \
		TZPUSH_LOCAL__STATE_DIR="$(TZPUSH_TEST_STATE_DIR)" $(TZPUSH) services down || true; \
	fi
	rm -rf .local .pytest_cache .mypy_cache .ruff_cache .hypothesis build dist
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -print0 | xargs -0 rm -rf
