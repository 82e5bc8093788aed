# Two commands matter: `make e2e` (the main job) and `make test` (the fast suite).
# Everything else is a building block they call.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
XDIST  ?= auto
# e2e items mostly wait on processes: with clusters from each worker's pool, five at a time
# keep two cores ~70 % busy; items that measure latency run beside at most one other, first
# (harness/runner/exclusive.py, ordering.py).
E2E_WORKERS ?= 5
REPORT_DIR ?= reports

.PHONY: setup lint test e2e e2e-tests e2e-scenarios e2e-byo e2e-klm binaries bench soak up clean help

help:
	@echo "make test      fast suite: lint, types, unit and loopback integration tests"
	@echo "make e2e       main job: binaries, e2e tests, the scenario library (HTML report)"
	@echo "make e2e-kubeconfig  the scenario library on the kubeconfig backend (local clusters)"
	@echo "make e2e-byo   the scenario library against another webhook (WEBHOOK_COMMAND=...)"
	@echo "make e2e-klm   a Lifecycle Manager build as a process in the loop (KLM_COMMAND=...)"
	@echo "make binaries  build/install kube-apiserver, etcd and the Go tools into the cache (done by e2e)"
	@echo "make bench     benchmark suite (<= 25 min); writes docs/benchmarks.md/.json + plots"
	@echo "make soak      10 min churn at 50 writes/s, oracle + RSS/fd growth; docs/soak.md (SOAK_DURATION=s)"
	@echo "make up        keep KCP + 2 SKRs + gateway + watcher running (Ctrl-C stops)"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -U pip
	$(VENV)/bin/pip install -q --disable-pip-version-check -e '.[dev]'
	@touch $@

setup: $(STAMP)

# tests/ is not a package, so `mypy tests` cannot name its modules (several conftest.py);
# tools/typecheck_tests.py names them and runs mypy once (strict, as the product).
lint: setup
	$(VENV)/bin/ruff format --check watcher harness tests tools
	$(VENV)/bin/ruff check watcher harness tests tools
	$(VENV)/bin/mypy watcher harness tools
	$(PY) tools/typecheck_tests.py
	$(VENV)/bin/lint-imports

test: lint
	$(VENV)/bin/pytest -n $(XDIST) -q

binaries: setup
	$(PY) -m harness.clusters.binaries ensure --upstream-listener --event-load

e2e-tests: binaries
	@mkdir -p $(REPORT_DIR)
	$(VENV)/bin/pytest -n $(E2E_WORKERS) -q -m e2e --junitxml=$(REPORT_DIR)/e2e-junit.xml

# The scenario library: each scenario file is a pytest item (harness/runner/pytest_plugin.py).
# HTML + JSON report and process logs in $(REPORT_DIR)/scenarios.
e2e-scenarios: binaries
	@mkdir -p $(REPORT_DIR)
	$(VENV)/bin/pytest -n $(E2E_WORKERS) -q -m e2e scenarios/ --cluster-pool \
		--junitxml=$(REPORT_DIR)/scenarios-junit.xml --scenario-report-dir=$(REPORT_DIR)/scenarios \
		|| { echo "e2e: scenarios FAILED; report: $(REPORT_DIR)/scenarios/index.html"; exit 1; }

# The scenario library on the kubeconfig backend: local clusters known to the run only by
# one kubeconfig file (harness/runner/via_kubeconfig.py); two groups at once, each on its own
# clusters, one scenario at a time within a group; fails if the harness left anything behind.
e2e-kubeconfig: binaries
	$(PY) -m harness.runner.via_kubeconfig scenarios/ --shards 2 \
		--report-dir $(REPORT_DIR)/kubeconfig-scenarios -- -q

# The scenario library against a webhook that is not ours (bring your own: any command
# taking upstream's environment contract). By default our webhook in its upstream-like
# sync mode, started as such a command: scenarios needing our own features are skipped
# with the reason; everything else must pass.
WEBHOOK_COMMAND ?= env WATCHER_DELIVERY_MODE=sync $(abspath $(VENV))/bin/watcher-webhook

e2e-byo: binaries
	@mkdir -p $(REPORT_DIR)
	$(VENV)/bin/pytest -n 2 -q -m e2e scenarios/ -rs --scenario-retries 1 \
		--webhook-command "$(WEBHOOK_COMMAND)" \
		--junitxml=$(REPORT_DIR)/byo-junit.xml --scenario-report-dir=$(REPORT_DIR)/byo-scenarios \
		|| { echo "e2e-byo: scenarios FAILED; report: $(REPORT_DIR)/byo-scenarios/index.html"; exit 1; }

# A Lifecycle Manager build in the loop (bring your own KLM: any command taking KLM's
# flags, harness/environment/any_klm.py): the any-KLM e2e tests, then the scenario library
# with that KLM; scenarios needing what it does not show (KLM_FEATURES, docs/any-klm.md)
# are skipped with the reason, everything else must pass. By default ours as such a
# process (watcher-klm), reconciling a Kyma an event queued 100 ms later: an event can
# leave the SKR before the write it reports is stored (docs/compatibility.md).
ifeq ($(origin KLM_COMMAND), undefined)
KLM_COMMAND := $(abspath $(VENV))/bin/watcher-klm --watch-event-settle=100ms
KLM_FEATURES ?= reconcile-triggers,reconcile-outcomes,san-pinning,modules
endif
KLM_FEATURES ?=
KLM_CRDS ?=

e2e-klm: binaries
	@mkdir -p $(REPORT_DIR)
	WATCHER_HARNESS_KLM_COMMAND="$(KLM_COMMAND)" WATCHER_HARNESS_KLM_CRDS="$(KLM_CRDS)" \
		$(VENV)/bin/pytest -q -m e2e -rs tests/harness/environment/test_any_klm_e2e.py \
		--junitxml=$(REPORT_DIR)/klm-junit.xml
	WATCHER_HARNESS_KLM_CRDS="$(KLM_CRDS)" $(VENV)/bin/pytest -n 2 -q -m e2e scenarios/ -rs \
		--scenario-retries 1 --klm-command "$(KLM_COMMAND)" --klm-features "$(KLM_FEATURES)" \
		--junitxml=$(REPORT_DIR)/klm-scenarios-junit.xml \
		--scenario-report-dir=$(REPORT_DIR)/klm-scenarios \
		|| { echo "e2e-klm: scenarios FAILED; report: $(REPORT_DIR)/klm-scenarios/index.html"; exit 1; }

# The e2e tests and the scenario library in one session: one queue for the workers, the
# longest items first (harness/runner/ordering.py; --maxschedchunk 1: xdist hands them out
# one by one, not six at once per worker); each worker's scenarios share their API
# servers, reset in between (--cluster-pool, harness/clusters/pool.py).
e2e: binaries
	@mkdir -p $(REPORT_DIR)
	$(VENV)/bin/pytest -n $(E2E_WORKERS) --maxschedchunk 1 -q -m e2e tests scenarios/ --cluster-pool \
		--junitxml=$(REPORT_DIR)/e2e-junit.xml --scenario-report-dir=$(REPORT_DIR)/scenarios \
		|| { echo "e2e: FAILED; scenario report: $(REPORT_DIR)/scenarios/index.html"; exit 1; }
	@echo "e2e: all flows and scenarios passed"
	@echo "  report: $(REPORT_DIR)/scenarios/index.html"
	@echo "  JUnit:  $(REPORT_DIR)/e2e-junit.xml"

BENCH_ARGS ?=

bench: binaries
	$(PY) -m harness.bench $(BENCH_ARGS)

# SOAK_DURATION (seconds, default 600) or SOAK_ARGS (see python -m harness.soak --help).
SOAK_ARGS ?=

soak: binaries
	$(PY) -m harness.soak $(SOAK_ARGS)

up: binaries
	$(VENV)/bin/watcher-harness up

clean:
	rm -rf $(VENV) $(REPORT_DIR) .mypy_cache .ruff_cache .hypothesis
