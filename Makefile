# Telescope dashboard. `make run` serves the dashboard with demo data; `make test` runs the suite.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test test-python test-js lint bench clean

# Front-end libraries (package.json: SortableJS), served with the static files; and the
# JavaScript's lint and type check (ESLint, TypeScript: devDependencies).
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Two distributions, both editable: the trainer client (clients/python: telescope-trainer-hooks,
# whose source is trainer_hooks/) and the server (pyproject.toml: telescope-dashboard), which
# depends on it. Their metadata gives ranges; constraints/dev.txt pins what is tested, this
# machine's CPU torch among them (any other torch spec downloads a multi-GB CUDA build).
CONSTRAINTS := constraints/dev.txt
VENV_INPUTS := pyproject.toml clients/python/pyproject.toml $(CONSTRAINTS)

$(VENV)/.server: $(VENV_INPUTS)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c $(CONSTRAINTS) -e ./clients/python -e ".[server]"
	touch $@

$(VENV)/.dev: $(VENV_INPUTS)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c $(CONSTRAINTS) -e ./clients/python -e ".[dev]"
	touch $@ $(VENV)/.server

# The server, and beside it a live demo run (telescope_ui/live_demo.py; LIVE_DEMO=0: none) that
# watches the server's pid: `exec` makes the shell's pid the server's, so Ctrl-C stops both.
# The server collects the static files (static/, plotly, SortableJS from node_modules) into
# data/static first when a source changed since the last start (telescope_ui/assets.py).
LIVE_DEMO ?= 1
run: $(VENV)/.server node_modules/.installed
	$(PY) manage.py migrate -v 0
	$(PY) manage.py demo --if-empty
	@if [ "$(LIVE_DEMO)" = 1 ]; then \
	  $(PY) -m telescope_ui.live_demo --url http://$(HOST):$(PORT) --watch-pid $$$$ & \
	fi; \
	exec $(PY) -m telescope_ui.serve --host $(HOST) --port $(PORT)

test: test-js test-python

test-python: $(VENV)/.dev node_modules/.installed
	$(PY) -m pytest $(PYTEST_ARGS)

test-js:
	@if [ -d tests/js ]; then node --test tests/js/; fi

# Python: ruff, mypy. JavaScript (static/js, tests/js): ESLint (eslint.config.js) and the JSDoc
# types checked by tsc (tsconfig.json; nothing is emitted).
lint: $(VENV)/.dev node_modules/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	npx --no-install eslint static/js tests/js eslint.config.js
	npx --no-install tsc --noEmit -p tsconfig.json

bench: $(VENV)/.dev
	$(PY) bench/ingest.py
	$(PY) bench/read.py
	$(PY) bench/hooks.py
	$(PY) bench/browser.py
	$(PY) bench/renormalize.py
	$(PY) bench/peers_workload.py
	$(PY) bench/samples.py
	$(PY) bench/isolation.py
	$(PY) bench/freshness.py
	$(PY) bench/soak.py
	$(PY) bench/vs_trackio.py
	$(PY) bench/events.py
	$(PY) bench/timeline.py
	$(PY) bench/timeline_page.py
	$(PY) bench/spans.py

clean:
	rm -rf $(VENV) data
