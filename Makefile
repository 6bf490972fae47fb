# Two commands do all the set-up on a fresh machine: `make run` and `make test`.
# Set-up is idempotent: the venv is rebuilt only when the lock file changes.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NATIVE_STAMP := $(VENV)/.native
UV_VERSION := 0.13.8
# Debian packages the tests need, as check:package; each is installed only when its check
# fails: a command missing from PATH, or (a check starting with /) a file that is absent.
# Java runs Spark (the pipeline and its tests); `zookeeper` gives ZooKeeper's server jars to
# the tests' fixture (tests/zookeeper_fixture.py) without `zookeeperd`'s system service;
# chromium drives the console's browser test; iproute2's `ip` makes the network namespaces
# of the fault test that cuts a host off (tests/hosts/network_namespaces.py).
DEBIAN_PACKAGES := kcat:kcat java:default-jre-headless /usr/share/java/zookeeper.jar:zookeeper chromium:chromium ip:iproute2
CONFIG ?= config/server.properties

.PHONY: setup native system-packages run test compose-test setup-check lint format typecheck unit suite bench generate clean lock

setup: $(STAMP) $(NATIVE_STAMP) system-packages

$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	test -x $(BIN)/uv || $(BIN)/python -m pip install --quiet uv==$(UV_VERSION)
	$(BIN)/uv pip sync --quiet --python $(BIN)/python requirements.lock
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps -e .
	touch $(STAMP)

# The optional mypyc build of the per-record hot loop (tools/build_native.py). Without a
# C compiler it says so in one line and the broker runs the pure-Python module; a build
# older than its source is never used.
native: $(NATIVE_STAMP)

$(NATIVE_STAMP): $(STAMP) broker/protocol/record_batch/walk.py broker/protocol/native.py tools/build_native.py
	$(BIN)/python tools/build_native.py
	touch $(NATIVE_STAMP)

# Debian tools the tests drive (kcat, Java for Spark, ZooKeeper, chromium for the console);
# installed only when missing.
system-packages:
	@missing=""; for entry in $(DEBIAN_PACKAGES); do check=$${entry%%:*}; \
	  case $$check in /*) test -e $$check ;; *) command -v $$check >/dev/null 2>&1 ;; esac \
	    || missing="$$missing $${entry#*:}"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" -eq 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

# make run CONFIG=my.properties ARGS="--override listeners=PLAINTEXT://127.0.0.1:9093"
ARGS ?=
run: setup
	$(BIN)/broker serve $(CONFIG) $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check broker tests tools bench
	$(BIN)/ruff format --check broker tests tools bench
	$(BIN)/lint-imports --no-cache

format: $(STAMP)
	$(BIN)/ruff format broker tests tools bench
	$(BIN)/ruff check --fix broker tests tools bench

typecheck: $(STAMP)
	$(BIN)/mypy

# The fast part of the suite: everything but the tests marked slow in tests/conftest.py (real
# clients, Spark, ZooKeeper, Docker, broker processes). `make test` runs the whole suite.
unit: setup
	$(BIN)/pytest -q -m "not slow"

# Two pytest-xdist workers: many tests wait on processes, sockets and timers rather than
# the CPU. Each module stays on one worker (tests/conftest.py groups them); a worker that
# dies (pytest-timeout ends a hung test's process) ends the run at once: xdist's loadfile
# scheduler was seen waiting for ever on the crashed worker's requeued module. TEST_WORKERS=0
# runs everything in one process.
TEST_WORKERS ?= 2
suite: setup
	$(BIN)/pytest -q --durations=30 -n $(TEST_WORKERS) --dist loadfile --max-worker-restart=0

test: setup lint typecheck compose-test suite

# Builds and runs compose.yaml with a real Docker engine; says plainly when there is none.
compose-test: setup
	bash docker/compose-test.sh

# `make setup` from nothing in a clean Debian container (needs a Docker engine).
setup-check:
	bash docker/setup-check.sh

generate: $(STAMP)
	$(BIN)/python tools/generate_protocol.py

bench: setup
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis

# Re-pin every dependency after editing pyproject.toml.
# requirements.lock: everything (development, tests, CI); docker/*.lock: what each image needs.
lock: $(STAMP)
	$(BIN)/uv pip compile pyproject.toml --extra pipeline --extra dev --extra bench \
		--python-version 3.11 --generate-hashes -q -o requirements.lock
	$(BIN)/uv pip compile pyproject.toml --python-version 3.11 --generate-hashes -q \
		-o docker/broker.lock
	$(BIN)/uv pip compile pyproject.toml --extra pipeline --python-version 3.11 \
		--generate-hashes -q -o docker/pipeline.lock
