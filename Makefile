# Fulcrum: `make run` sets everything up and runs the product; `make test` sets up and runs every test;
# `make check` is the quick inner loop (the linters and the fast tests, in about two minutes);
# `make plotly` rebuilds the console's Plotly bundle (the one target that needs Node and npm).
PYTHON      ?= python3
VENV        := .venv
BIN         := $(VENV)/bin
REDIS_PORT  ?= 6390
TEST_REDIS_PORT ?= 6391
TEST_PG_PORT ?= 6392
CHECK_REDIS_PORT ?= 6394
# pytest-xdist's workers for the tests that can run side by side (the machines have 2 cores).
TEST_WORKERS ?= 2
WEB_PORT    ?= 8000
WEB_WORKERS ?= 1
PULSAR_PORT ?= 18080
# The simulated cluster's size: demo (8 brokers, 101 bundles) or large (200 brokers in 5 failure
# domains, 250 namespaces x 200 bundles = 50,000 bundles); each size keeps its own var folder.
CLUSTER     ?= demo
CLUSTER_ARGS_demo  :=
# A trace minute every 6 s (not 2): one simulator process answers for all 200 brokers meanwhile.
CLUSTER_ARGS_large := --brokers 200 --namespaces 250 --bundles-per-namespace 200 --failure-domains 5 \
                      --step-seconds 6
CLUSTER_VAR_demo   := var
CLUSTER_VAR_large  := var/large
ifeq ($(filter $(CLUSTER),demo large),)
$(error CLUSTER=$(CLUSTER): the sizes are demo and large)
endif
RUN_VAR     := $(CLUSTER_VAR_$(CLUSTER))
SUDO        := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Debian packages Fulcrum needs, each only when missing (Spark 4 needs Java 17 or newer).
APT_PKGS := $(if $(shell command -v redis-server),,redis-server) \
            $(if $(shell java -version 2>&1 | grep -qE 'version "(1[7-9]|2[0-9])' && echo ok),,openjdk-17-jre-headless) \
            $(if $(wildcard /usr/bin/chromium),,chromium) \
            $(if $(wildcard /usr/lib/postgresql/*/bin/pg_ctl),,postgresql)

.PHONY: setup sysdeps run check test test-pulsar lint bench plotly clean

setup: sysdeps $(BIN)/.installed

sysdeps:
	@if [ -n "$(strip $(APT_PKGS))" ]; then \
	  if [ "$$(id -u)" != 0 ] && ! command -v sudo >/dev/null; then \
	    echo "Fulcrum needs these Debian packages: $(strip $(APT_PKGS))"; \
	    echo "Install them as root: apt-get install -y $(strip $(APT_PKGS))"; exit 1; fi; \
	  echo "Installing Debian packages: $(strip $(APT_PKGS))"; \
	  $(SUDO) apt-get update -q && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(strip $(APT_PKGS)); fi

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --no-compile -e '.[dev]'
	touch $@

# The demo: the simulator serves Pulsar's admin REST API, one port per broker from PULSAR_PORT,
# and Fulcrum is attached to it through its Pulsar connector (a bearer token made for the demo),
# taking control at start as an admin would on the Pulsar page, and again by itself when a
# restarted simulator comes back with Pulsar's own shedding on (FULCRUM_PULSAR_REASSERT).
run: export FULCRUM_DEMO = 1
run: export FULCRUM_PULSAR_URL = http://127.0.0.1:$(PULSAR_PORT)
run: export FULCRUM_PULSAR_OBSERVE_S = 5
run: export FULCRUM_PULSAR_TAKE_CONTROL_AT_START = 1
run: export FULCRUM_PULSAR_REASSERT = 1
# Prometheus' multiprocess mode: every process writes its metrics here; /metrics gathers them.
run: export PROMETHEUS_MULTIPROC_DIR = $(CURDIR)/$(RUN_VAR)/prometheus
run: export FULCRUM_VAR_DIR = $(CURDIR)/$(RUN_VAR)
run: export FULCRUM_SIM_ARGS = $(CLUSTER_ARGS_$(CLUSTER))
run: setup
	mkdir -p $(RUN_VAR)
	rm -rf $(RUN_VAR)/prometheus && mkdir -p $(RUN_VAR)/prometheus
	test -s $(RUN_VAR)/demo-pulsar-token || (umask 077 && $(BIN)/python -c "import secrets; print(secrets.token_urlsafe(24))" > $(RUN_VAR)/demo-pulsar-token)
	$(BIN)/python manage.py migrate --noinput -v0
	$(BIN)/python manage.py seed_demo
	@echo "Fulcrum: http://127.0.0.1:$(WEB_PORT)/  ($(CLUSTER) cluster; Ctrl-C stops everything)"
	PATH="$(CURDIR)/$(BIN):$$PATH" WEB_PORT=$(WEB_PORT) WEB_WORKERS=$(WEB_WORKERS) \
	  REDIS_PORT=$(REDIS_PORT) PULSAR_PORT=$(PULSAR_PORT) \
	  FULCRUM_PULSAR_TOKEN="$$(cat $(RUN_VAR)/demo-pulsar-token)" \
	  REDIS_URL=redis://127.0.0.1:$(REDIS_PORT)/0 $(BIN)/honcho start

# The quick inner loop: the linters, the core's tests and the console's fast ones (not Spark's,
# the browser's, the serial ones nor the API's schema fuzz: docs/developers/testing.md), in
# parallel (worksteal: an idle worker takes tests queued on the other), without coverage, on a
# Redis of its own, in var/check/ and on ports of its own (TEST_PORT_BASE, tests/support.py): it
# can run beside `make test`.
check: setup
	$(BIN)/ruff check balancer console tests
	$(BIN)/lint-imports
	$(BIN)/mypy balancer console
	@mkdir -p var/check; \
	 redis-server --port $(CHECK_REDIS_PORT) --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
	   --pidfile "$(CURDIR)/var/check/redis.pid" --logfile "$(CURDIR)/var/check/redis.log"; \
	 trap 'redis-cli -p $(CHECK_REDIS_PORT) shutdown nosave >/dev/null 2>&1' EXIT; \
	 export PATH="$(CURDIR)/$(BIN):$$PATH" REDIS_URL=redis://127.0.0.1:$(CHECK_REDIS_PORT)/0 \
	   FULCRUM_VAR_DIR="$(CURDIR)/var/check" TEST_PORT_BASE=26000; \
	 $(BIN)/pytest tests/balancer tests/console tests/test_docs.py \
	   --ignore=tests/console/test_schema_fuzz.py -n $(TEST_WORKERS) --dist worksteal \
	   -m "not spark and not browser and not serial" -p no:cacheprovider $(PYTEST_ARGS)

# Every test: ruff and import-linter, then three pytest passes at once (scripts/test-passes says
# how and why): the rest on SQLite, TEST_WORKERS at a time, the serial ones (each starts make run's
# stack or a benchmark's) one after another on one worker (--dist loadgroup, tests/conftest.py);
# beside it, at a lower priority, mypy and the core's tests, which alone gate balancer/ at 100 %
# branch coverage (coverage's tracer slows every other test by a quarter), and, once only the
# serial tests are left, the console's tests on PostgreSQL. exec: a SIGTERM to make (which passes
# it on to its recipes) reaches the script, whose traps stop the passes, Redis and PostgreSQL.
test: setup
	$(BIN)/ruff check balancer console tests
	$(BIN)/lint-imports
	@mkdir -p var
	BIN=$(BIN) TEST_WORKERS=$(TEST_WORKERS) TEST_REDIS_PORT=$(TEST_REDIS_PORT) \
	  TEST_PG_PORT=$(TEST_PG_PORT) exec scripts/test-passes $(PYTEST_ARGS)

# Fulcrum against a real Apache Pulsar in containers (apachepulsar/pulsar, 3.x and 4.x, both load
# managers): skipped, saying why, where no container runtime answers (docker info).
test-pulsar: setup
	@mkdir -p var; \
	 redis-server --port $(TEST_REDIS_PORT) --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
	   --pidfile "$(CURDIR)/var/redis-test.pid" --logfile "$(CURDIR)/var/redis-test.log"; \
	 trap 'redis-cli -p $(TEST_REDIS_PORT) shutdown nosave >/dev/null 2>&1' EXIT; \
	 REDIS_URL=redis://127.0.0.1:$(TEST_REDIS_PORT)/0 \
	   $(BIN)/pytest tests/real_pulsar -p no:cacheprovider -rs $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check balancer console tests
	$(BIN)/lint-imports
	$(BIN)/mypy balancer console

bench: setup
	$(BIN)/python -m tests.benchmarks --sizes 100x10000,1000x100000

# Plotly's JavaScript, static/vendor/plotly-fulcrum.min.js: plotly.js's core and only the trace
# types the console draws (scatter, bar, treemap: js/plotly-fulcrum.js), 1.10 MB, 0.39 MB gzipped
# (the Python plotly package's full bundle: 4.8 MB, 1.47 MB). plotly.js and esbuild are pinned in
# package.json/package-lock.json, plotly.js to the Python package's plotly.js (4.1.1; a test checks);
# the same lock builds the same bytes. The file is committed, so run and test need no Node: run
# this after changing the entry or a pin (Node 18 or newer; plotly.js asks 22 for its own tooling,
# a warning only).
plotly:
	npm ci --ignore-scripts --no-audit --no-fund
	node js/build-plotly.mjs

clean:
	rm -rf var .pytest_cache
