# Two commands do all set-up on a fresh machine:
#   make demo   -> environment + synthetic scans + the whole asset graph, printing where outputs went
#   make test   -> environment + the test suite (what CI runs)
#   make ui     -> the Dagster UI (dagster dev) on the demo's instance, after make demo, with the releases folder
#                  served on http://127.0.0.1:3001 so the release's report and Data Docs links open from the UI
# Scaling out (README, "Scaling out"):
#   make cluster-demo -> Postgres, Redis, S3 (moto), two Celery workers, daemon and UI on loopback; the demo
#                        scans as a backfill; stops everything on exit or Ctrl-C
#   make test-cluster -> the loopback cluster tests (CI runs them in their own step)
#   make test-cluster-long -> the cluster tier's long end-to-end runs (faults healing, automation alone): not in CI
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup system-deps cluster-deps demo ui cluster-demo test test-slow test-acceptance test-browser test-cluster test-cluster-long clean-data

setup: $(VENV)/.installed

# Open3D's wheel links libusb at import time; Debian ships it as libusb-1.0-0.
system-deps:
	@if command -v dpkg >/dev/null 2>&1 && ! dpkg -s libusb-1.0-0 >/dev/null 2>&1; then \
	  echo "installing system package libusb-1.0-0 (needed by Open3D)"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq libusb-1.0-0 libgomp1; \
	fi

# The services a deployment runs, from Debian's packages: Postgres (Dagster's storage), Redis (Celery's broker).
cluster-deps:
	@missing=""; for p in postgresql redis-server; do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing (the loopback cluster)"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $$missing; \
	fi

# deploy/requirements.lock (the image's pinned set) constrains every package both install, so the tests run the
# versions the image ships; packages only the tests use (pytest, moto, ...) resolve freely.
$(VENV)/.installed: pyproject.toml deploy/requirements.lock | system-deps
	@echo "creating $(VENV) and installing scan2qa with its test extras"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	@echo "(pip prints each package as it installs; a first install takes a few minutes)"
	$(BIN)/pip install --progress-bar on -c deploy/requirements.lock -e ".[test]"
	@touch $@

# The demo builds into a persistent Dagster instance (DAGSTER_HOME, default .dagster_home), so `make ui`
# (dagster dev on that instance) afterwards shows every partition, check and the release already materialized.
# SCAN2QA_MAX_CONCURRENT_RUNS sets how many runs the UI's queue starts at once (default: half the cores).
DAGSTER_HOME ?= $(CURDIR)/.dagster_home
DEMO_HOME    := $(abspath $(DAGSTER_HOME))

# The release's report and Data Docs links point under SCAN2QA_RELEASE_URL, where make ui serves the releases
# folder (loopback only; a browser refuses file:// links from the UI's page).
RELEASES     ?= data/out/releases
RELEASE_PORT ?= 3001
RELEASE_URL  ?= http://127.0.0.1:$(RELEASE_PORT)

demo: setup
	$(BIN)/python -m runs.demo_instance "$(DEMO_HOME)"
	DAGSTER_HOME="$(DEMO_HOME)" SCAN2QA_RELEASE_URL="$(RELEASE_URL)" $(BIN)/scan2qa build

ui: setup
	@mkdir -p "$(RELEASES)"
	@echo "releases served at $(RELEASE_URL) (the release's report and data_docs links)"
	@$(BIN)/python -m http.server --directory "$(RELEASES)" --bind 127.0.0.1 $(RELEASE_PORT) >/dev/null 2>&1 & \
	server=$$!; trap 'kill $$server' EXIT INT TERM; \
	DAGSTER_HOME="$(DEMO_HOME)" SCAN2QA_RELEASE_URL="$(RELEASE_URL)" $(BIN)/dagster dev -w workspace.yaml

test: setup
	$(BIN)/python -m pytest -n 2 -q -rs

# The reviewer report and the Data Docs in headless Chromium: Debian's chromium package plus playwright's driver.
test-browser: setup
	@command -v chromium >/dev/null 2>&1 || { echo "installing Debian's chromium"; $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium; }
	$(BIN)/pip install -q -c deploy/requirements.lock -e ".[test,browser]"
	$(BIN)/python -m pytest -q -m browser

cluster-demo: setup cluster-deps
	$(BIN)/python -m deploy.cluster_demo

test-cluster: setup cluster-deps
	$(BIN)/python -m pytest -q -m "cluster and not cluster_long"

# The end-to-end runs of the cluster tier: each fault of issue 40 healed into the complete release, sensors and
# automation alone, 10,000 scans in runs of 100. 70-100 min on 2 cores, past CI's time: run them before changing
# deploy/, assets/automation.py, assets/sensors.py or runs/backfill*.py (docs/scaling.md has their figures).
test-cluster-long: setup cluster-deps
	$(BIN)/python -m pytest -q -m cluster_long

test-slow: setup
	$(BIN)/python -m pytest -n 2 -q -m slow

# The slow tests that are issues' acceptance (config staleness, a fourth budget, interrupts, a full disk, up-to-date
# builds, no abort at exit, the dataset bench on real sources, the UI journeys under the real daemon): CI runs these;
# the rest of the slow tier is for a change that touches its subject.
ACCEPTANCE := tests/test_config_staleness.py tests/test_budget_128.py tests/test_build_interrupts.py \
              tests/test_build_out_of_space.py tests/test_build_up_to_date.py tests/test_build_exit_status.py \
              tests/test_dataset_bench.py tests/test_daemon_rerun.py
test-acceptance: setup
	$(BIN)/python -m pytest -n 2 -q -rs -m slow $(ACCEPTANCE)

clean-data:
	rm -rf data
