# schedd developer commands. `make run` and `make test` work on a fresh machine with Python 3.11+.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PROTO_SRC := $(wildcard protos/schedd/v1/*.proto)
GEN_DIR := libs

.PHONY: install run test test-fast test-chaos soak lint protos bench clean images images-test compose-test test-containers-faults

# schedd itself, and beside it devtools/ (the schedd-devtools distribution: the local stack of
# `make run` and the test harness), which schedd's wheel and image leave out.
$(STAMP): pyproject.toml devtools/pyproject.toml $(wildcard libs/*/__init__.py services/*/__init__.py devtools/*/__init__.py)
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,local]' -e ./devtools
	touch $(STAMP)

install: $(STAMP)

protos: $(STAMP)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m grpc_tools.protoc -I protos --python_out=$(GEN_DIR) --grpc_python_out=$(GEN_DIR) \
		--mypy_out=$(GEN_DIR) --mypy_grpc_out=$(GEN_DIR) $(PROTO_SRC)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy libs services devtools tests
	PYTHONPATH="$(CURDIR)/libs:$(CURDIR)/services:$(CURDIR)/devtools" $(VENV)/bin/lint-imports

test: $(STAMP)
	$(PY) -m pytest -q --durations=30

test-chaos: $(STAMP)
	$(PY) -m pytest -q -m chaos --durations=30

# A random mix of faults against a steady load (not in CI): make soak SOAK_ARGS="--minutes 10 --seed 42"
soak: $(STAMP)
	$(PY) -m tests.chaos.soak $(SOAK_ARGS)

run: $(STAMP)
	$(PY) -m schedd_devstack.run_local

BENCH_STAMP := $(VENV)/.installed-bench

$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,local,bench]'
	touch $(BENCH_STAMP)

# make bench BASELINE=REF: REF and the working tree measured interleaved, figures as ratios
# (BENCH_ARGS="--only latency --pairs 5" to choose; tests/benchmarks/ab.py).
bench: $(BENCH_STAMP)
	$(PY) -m tests.benchmarks.run $(if $(BASELINE),--baseline $(BASELINE)) $(BENCH_ARGS)

# Podman's settings for hosts where no process may raise its hard rlimits and crun refuses the
# cgroup layout (runc, lower default ulimits; docs/deploy.md); CONTAINERS_CONF=... overrides it.
images images-test compose-test test-containers-faults: export CONTAINERS_CONF ?= $(CURDIR)/deploy/images/containers.conf

# The images, built with podman on a Debian base made with mmdebstrap (docs/deploy.md, "The image").
images:
	deploy/images/build.sh

CONTAINERS_STAMP := $(VENV)/.installed-containers
CONTAINER_TESTS := SCHEDD_CONTAINER_TESTS=require $(PY) -m pytest -q -s -p no:cacheprovider

$(CONTAINERS_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,local,containers]'
	touch $(CONTAINERS_STAMP)

# The image as built (user, no build tools or secrets) and the Kubernetes containers' commands,
# variables and probes run on it. These fail (not skip) without podman or Docker.
images-test: images $(CONTAINERS_STAMP)
	$(CONTAINER_TESTS) tests/containers/test_image.py tests/containers/test_kubernetes_commands.py

# deploy/compose up for real and the walk-through of docs/deploy.md, step by step (about 2 minutes).
compose-test: images $(CONTAINERS_STAMP)
	$(CONTAINER_TESTS) tests/containers/test_compose_walkthrough.py

# Faults across real containers and networks, with the figures of each.
test-containers-faults: images $(CONTAINERS_STAMP)
	$(CONTAINER_TESTS) tests/containers/test_faults_leader.py tests/containers/test_faults_network.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info .schedd
