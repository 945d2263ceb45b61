# hts — build, test and run. `make run` and `make test` are the two commands the README opens with.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: install test lint typecheck contracts pytest bench run clean check-java

install: $(STAMP) check-java

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

run: install
	$(PY) -m service.cli quickstart --dir var/quickstart

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis var build *.egg-info
