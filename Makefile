# Two commands matter: `make e2e` (the main job) and `make test` (the fast suite).
# Everything else is a building block they call.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
XDIST  ?= auto
REPORT_DIR ?= reports

.PHONY: setup lint test e2e e2e-tests binaries bench up clean help

help:
	@echo "make test      fast suite: lint, types, unit and loopback integration tests"
	@echo "make e2e       main job: build binaries, start clusters + gateway, run scenarios, report"
	@echo "make binaries  build/install kube-apiserver and etcd into the cache (done by e2e)"
	@echo "make bench     loopback benchmark; writes docs/benchmarks-loopback.md"
	@echo "make up        keep KCP + 2 SKRs + gateway + watcher running (Ctrl-C stops)"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -U pip
	$(VENV)/bin/pip install -q --disable-pip-version-check -e '.[dev]'
	@touch $@

setup: $(STAMP)

lint: setup
	$(VENV)/bin/ruff format --check watcher harness tests
	$(VENV)/bin/ruff check watcher harness tests
	$(VENV)/bin/mypy watcher harness
	$(VENV)/bin/lint-imports

test: lint
	$(VENV)/bin/pytest -n $(XDIST) -q

binaries: setup
	$(PY) -m harness.clusters.binaries ensure

e2e-tests: binaries
	@mkdir -p $(REPORT_DIR)
	$(VENV)/bin/pytest -n $(XDIST) -q -m e2e --junitxml=$(REPORT_DIR)/e2e-junit.xml

e2e: e2e-tests
	@echo "e2e: all flows passed; JUnit report in $(REPORT_DIR)/e2e-junit.xml"

bench: setup
	$(PY) -m harness.bench.loopback

up: binaries
	$(VENV)/bin/watcher-harness up

clean:
	rm -rf $(VENV) $(REPORT_DIR) .mypy_cache .ruff_cache .hypothesis
