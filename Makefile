# Two entry points: `make plan` (the main job) and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STACK ?= dev

.PHONY: plan test validate lint typecheck clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

plan: $(VENV)/.installed
	$(BIN)/gpuscale validate --stack $(STACK)

test: $(VENV)/.installed
	$(BIN)/python -m pytest -n 2 -q

validate: $(VENV)/.installed
	for s in dev staging prod; do $(BIN)/gpuscale validate --stack $$s || exit 1; done

lint: $(VENV)/.installed
	$(BIN)/ruff check gpuscale components infra tests
	$(BIN)/ruff format --check gpuscale components infra tests

typecheck: $(VENV)/.installed
	$(BIN)/mypy gpuscale components

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
