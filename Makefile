# AgentClash for Django: the two commands are `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint bench install services system-deps pytest clean format bytecode

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

# The project's own modules compiled once, as an installed package ships them (pip compiles
# the dependencies; this checkout is installed editable). Without it a process started where
# PYTHONDONTWRITEBYTECODE is set compiles ~70 modules on every start (~0.3 s per command).
bytecode: $(STAMP)
	@$(PY) -m compileall -q -j 0 -x '/(\.venv|\.peers|node_modules)/' manage.py agentclash_site grading packs runs bench scripts

# Web server + Celery worker (with beat) + the example agent and judge, on SQLite and
# Celery's filesystem broker. Ctrl-C stops everything. The URLs it prints and gives agents
# follow BIND unless PUBLIC_BASE_URL is set.
RUN_BASE_URL = $(or $(PUBLIC_BASE_URL),http://$(or $(BIND),127.0.0.1:8000))
run: $(STAMP) bytecode
	@mkdir -p var
	@$(PY) scripts/devserver.py --check
	$(PY) manage.py migrate --noinput
	PUBLIC_BASE_URL=$(RUN_BASE_URL) $(PY) manage.py demo setup
	PUBLIC_BASE_URL=$(RUN_BASE_URL) $(PY) scripts/devserver.py

# Ruff, migrations check and the whole suite on PostgreSQL and Redis.
test: $(STAMP) system-deps services
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/agentclash} \
		$(PY) manage.py makemigrations --check --dry-run
	$(PY) -m pytest $(PYTEST_ARGS)

# Run a subset: make pytest ARGS="tests/grading -x"
pytest: $(STAMP)
	$(PY) -m pytest $(ARGS)

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

format: $(STAMP)
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

services:
	@scripts/ensure-services.sh

system-deps:
	@scripts/ensure-system-deps.sh

bench: $(STAMP) services bytecode
	$(PY) bench/run_all.py

clean:
	rm -rf var/ .pytest_cache .ruff_cache
