# Two commands do all set-up on a fresh machine:
#   make demo   -> environment + synthetic scans + the whole asset graph, printing where outputs went
#   make test   -> environment + the test suite (what CI runs)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup system-deps demo test test-slow test-browser clean-data

setup: $(VENV)/.installed

# Open3D's wheel links libusb at import time; Debian ships it as libusb-1.0-0.
system-deps:
	@if command -v dpkg >/dev/null 2>&1 && ! dpkg -s libusb-1.0-0 >/dev/null 2>&1; then \
	  echo "installing system package libusb-1.0-0 (needed by Open3D)"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq libusb-1.0-0 libgomp1; \
	fi

$(VENV)/.installed: pyproject.toml | system-deps
	@echo "creating $(VENV) and installing scan2qa with its test extras"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[test]"
	@touch $@

demo: setup
	$(BIN)/scan2qa build

test: setup
	$(BIN)/python -m pytest -n 2 -q

# The reviewer report in headless Chromium: Debian's chromium package plus playwright's driver.
test-browser: setup
	@command -v chromium >/dev/null 2>&1 || { echo "installing Debian's chromium"; $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium; }
	$(BIN)/pip install -q -e ".[test,browser]"
	$(BIN)/python -m pytest -q -m browser

test-slow: setup
	$(BIN)/python -m pytest -n 2 -q -m slow

clean-data:
	rm -rf data
