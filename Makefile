# Two commands on a fresh machine: `make demo` and `make test` (each creates the environment when missing).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install demo server-stop test test-slow clean

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[test]"
	@touch $(STAMP)

install: $(STAMP)

## the main job on the embedded default: demo data, REV evaluators, scores, report under runs/demo-nli
demo: install
	$(BIN)/larev run --server local

## stop the background Prefect server (UI on http://127.0.0.1:4200) that `make demo` starts
server-stop: install
	$(BIN)/prefect server stop

## the default test suite (slow real-data checks are behind `-m slow`: make test-slow)
test: install
	$(BIN)/python -m pytest -q

test-slow: install
	$(BIN)/python -m pytest -q -m slow

clean:
	rm -rf .larev runs
