# hts — build, test and run. `make run` and `make test` are the two commands the README opens with.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
AXE := build/axe/node_modules/axe-core/axe.min.js
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: install test lint typecheck contracts pytest bench bench-big fuzz run clean check-java system-packages azurite

install: $(STAMP) check-java system-packages $(AXE) azurite

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

# Spark needs a Java 17 (or newer) runtime; say how to get one instead of failing obscurely later.
check-java:
	@v=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1); \
	if [ -z "$$v" ] || [ "$$v" -lt 17 ]; then \
	  echo "hts needs Java 17+ for Spark (found: $${v:-none})."; \
	  echo "Install it with: sudo apt-get install -y openjdk-17-jre-headless  (or set JAVA_HOME to a JDK 17)"; \
	  exit 1; \
	fi

# Debian packages the tests use: a real ZooKeeper server, promtool (from prometheus), and Chromium
# with its ChromeDriver for the console's browser tests (/usr/bin/chromium, /usr/bin/chromedriver).
DEBIAN_PACKAGES := zookeeper prometheus chromium chromium-driver
system-packages:
	@missing=""; for p in $(DEBIAN_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if ! command -v apt-get >/dev/null; then echo "hts tests need the Debian packages:$$missing (no apt-get here)"; exit 1; fi; \
	  sudo=""; [ "$$(id -u)" -eq 0 ] || sudo="sudo"; \
	  echo "installing Debian packages:$$missing"; \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

# axe-core (accessibility checks the console's browser tests inject into each page), from npm into
# build/axe (ignored by git; AXE is set at the top).
$(AXE):
	@command -v npm >/dev/null || { echo "hts tests need Node.js and npm (for axe-core): apt-get install -y nodejs npm"; exit 1; }
	mkdir -p build/axe
	npm install --silent --no-save --no-audit --no-fund --prefix build/axe axe-core@4

# Azurite, the Azure Storage emulator (npm), for the Azure tests: in the venv, not system-wide.
AZURITE := $(VENV)/azurite/node_modules/.bin/azurite-blob
azurite: $(AZURITE)
$(AZURITE):
	@command -v npm >/dev/null || { echo "hts tests need npm for Azurite (Debian: apt-get install npm)"; exit 1; }
	npm install --silent --no-audit --no-fund --prefix $(VENV)/azurite azurite@3

LINT_PATHS := hoodie jobs service tests $(wildcard bench)

lint: install
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)

typecheck: install
	$(VENV)/bin/mypy

contracts: install
	$(VENV)/bin/lint-imports

pytest: install
	$(VENV)/bin/pytest -q

test: lint typecheck contracts pytest

bench: install
	$(PY) -m bench

# One compaction task on a 20M-row / 5M-update file group within hoodie.memory.compaction.max.size
# (1 GiB): peak RSS and time / floor. Smaller: make bench-big BIG_ARGS="--rows 4000000 --updates 1000000"
# Then the Spark scale-out section (a standalone cluster of 1, then 2 workers), kept out of `make bench`
# so that it stays under 20 minutes on a 2-core machine (issue 18).
BIG_ARGS ?=
bench-big: install
	$(PY) -m bench.big $(BIG_ARGS)
	$(PY) -m bench --only scaleout

# A longer schemathesis campaign than the one in `make test` (tests/daemon/contract.py): every
# operation and check against `hts serve` on a real table; FUZZ_EXAMPLES cases per operation and
# phase, FUZZ_SECONDS at most; the table, logs and report stay in the folder it prints.
FUZZ_EXAMPLES ?= 3000
FUZZ_SECONDS ?= 1800
FUZZ_SEED ?= 15
fuzz: install
	$(PY) -m tests.daemon.contract --examples $(FUZZ_EXAMPLES) --max-time $(FUZZ_SECONDS) --seed $(FUZZ_SEED)

# The daemon with embedded defaults: tables under ./var/tables (a demo table is made there once),
# local[*] Spark, the in-process lock, TrueTime in the daemon, the API and the console on
# http://127.0.0.1:8080 (the address is printed first).
run: install
	$(PY) -m service.cli quickstart --dir var/tables/demo --if-missing
	@echo "hts console: http://127.0.0.1:$${HTS_API__PORT:-8080}/  (REST API under /v1, OpenAPI at /docs)"
	$(PY) -m service.cli serve

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis var build *.egg-info
