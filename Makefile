# Developer tasks. .ci/run uses these targets; README's Quick start uses install and pg-up.
# `make VENV=/path/to/venv lint` runs the tools from another environment.

SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV ?= .venv
PYTHON ?= $(shell command -v python3.11 || command -v python3)
PG_HOST ?= 127.0.0.1
PG_PORT ?= 5432
PG_WAIT_SECONDS ?= 30

.PHONY: help install lint typecheck test pg-up screenshots

help: ## List the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

install: ## Create the venv (.venv) and install signoff with its dev extras, editable.
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install -e '.[dev]' -e './client[pydantic-ai,openai-agents,langgraph,mcp,worker]'

lint: ## ruff check.
	$(VENV)/bin/ruff check .

typecheck: ## mypy --strict on the packages, the client, the examples and the tests.
	$(VENV)/bin/mypy --strict bot store resume client/signoff_client examples tests

test: ## The README's test command.
	$(VENV)/bin/pytest

screenshots: ## Refresh the README's pictures (docs/screenshots) from the browser tests.
	SIGNOFF_SCREENSHOTS_DIR=$(CURDIR)/docs/screenshots SIGNOFF_REQUIRE_BROWSER=1 \
	  $(VENV)/bin/pytest -q tests/acceptance/test_sandbox_browser.py \
	  -k "quote_approved_stale_double_click_refused or credit_hold_blocks_the_send"

pg-up: ## Start the local PostgreSQL cluster if it is down, and wait until it accepts connections.
	@pg_isready -q -h $(PG_HOST) -p $(PG_PORT) \
	  || { test -d /etc/postgresql || { echo "PostgreSQL is not installed (no /etc/postgresql)" >&2; exit 1; }; \
	       pg_ctlcluster --skip-systemctl-redirect $$(ls /etc/postgresql | sort -V | tail -n 1) main start; }
	@for _ in $$(seq $(PG_WAIT_SECONDS)); do \
	  pg_isready -q -h $(PG_HOST) -p $(PG_PORT) && { echo "PostgreSQL is up on $(PG_HOST):$(PG_PORT)"; exit 0; }; \
	  sleep 1; \
	done; \
	echo "PostgreSQL did not come up on $(PG_HOST):$(PG_PORT) within $(PG_WAIT_SECONDS)s" >&2; exit 1
