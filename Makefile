# Onceflow developer entry points. Target names are stable: CI, docs and other
# scripts call them. Services run on loopback; state lives in .onceflow/, downloads
# and builds in ~/.cache/onceflow, ~/.m2 and Go's caches.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: crds install kafka-up kafka-down k8s-build k8s-up k8s-down node-up node-down spark-jars jvm-writer \
        postgres-up postgres-down s3-up s3-down image testbed-deps lint typecheck imports check unit test \
        e2e-cluster chaos conformance campaign dashboard-picture demo clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH (or: make PYTHON=python3)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

# KAFKA_BROKERS=3: the three-broker cluster (RF 3, min ISR 2) on ports 19092-19097,
# beside the single broker the tests use by default.
KAFKA_SCRIPT = $(if $(filter 3,$(KAFKA_BROKERS)),scripts/kafka-cluster.sh,scripts/kafka.sh)

kafka-up: install
	@bash $(KAFKA_SCRIPT) up
kafka-down:
	@bash $(KAFKA_SCRIPT) down

k8s-build:
	@bash scripts/k8s-build.sh
k8s-up:
	@bash scripts/k8s.sh up
k8s-down:
	@bash scripts/k8s.sh down

# A second cluster whose pods really run (kubelet, containerd, runc; needs root).
# Start Kafka first: it listens on the node network only if started after the bridge.
node-up: kafka-up
	@bash scripts/node.sh up
node-down:
	@bash scripts/node.sh down

spark-jars: install
	@bash scripts/spark-jars.sh

# The JVM exactly-once writer for the Spark Kafka sink (jvm/onceflow-spark-kafka), built
# and tested against the installed pyspark; prints the directory holding the jar.
jvm-writer: install
	@bash scripts/jvm-writer.sh

postgres-up:
	@bash scripts/postgres.sh up
postgres-down:
	@bash scripts/postgres.sh down

# An S3 endpoint (S3Proxy, in memory) for s3a:// checkpoints.
s3-up:
	@bash scripts/s3proxy.sh up
s3-down:
	@bash scripts/s3proxy.sh down

# The image (podman, from a Debian rootfs built here); prints its reference.
image:
	@bash scripts/image.sh build

# Everything the suite needs on disk; the services themselves are started by the
# pytest fixtures (and stopped again if the fixtures started them).
testbed-deps: install
	@bash scripts/kafka.sh libs >/dev/null
	@bash scripts/spark-jars.sh >/dev/null
	@bash scripts/jvm-writer.sh >/dev/null
	@$(BIN)/python -m tests.support.spark_archive >/dev/null
	@bash scripts/k8s-build.sh >/dev/null
	@bash scripts/node.sh deps
	@bash scripts/helm.sh >/dev/null
	@bash scripts/spark-operator-crd.sh >/dev/null
	@bash scripts/argocd-health.sh >/dev/null
	@bash scripts/image.sh build >/dev/null

lint: install
	$(BIN)/ruff check operator tests benchmarks scripts
	$(BIN)/ruff format --check operator tests benchmarks scripts

typecheck: install
	$(BIN)/mypy

imports: install
	$(BIN)/lint-imports

check: lint typecheck imports

# The pure tests: no service, no build, well under a minute. The loop to run after
# every edit of logic; `make test` runs them first too.
unit: install
	@$(BIN)/pytest tests/unit -q $(PYTEST_ARGS)

# Everything, cheapest tier first (unit, the test bed itself, then the rest on two
# workers, then the tests marked `alone` one at a time: scripts/test.sh says why), so a
# broken pure test shows in the first minute. A suite that runs no test is broken.
test: testbed-deps check
	@bash scripts/test.sh

# The end-to-end tests and the conformance kits at the sizes that find rare
# interleavings (the defaults in make test still inject real faults, and assert they
# landed): 200 task kills (50 faults a connector in the source kit), 20 driver kills a
# Spark chaos test and a sink in the sink kit, 20,000 records a stream.
chaos: testbed-deps
	@ONCEFLOW_CHAOS_KILLS=200 ONCEFLOW_CHAOS_RECORDS=20000 ONCEFLOW_CHAOS_DRIVER_KILLS=20 \
	  $(BIN)/pytest tests/conformance tests/e2e -m "not node" $(PYTEST_ARGS)

# The conformance kits alone, large: 30 faults and a generation change per source
# connector, 10 driver kills per sink, loads scaled to 20,000 records (make test: 5
# faults, 3 driver kills, 3000). A connector author's own kit module in
# tests/conformance runs here too; PYTEST_ARGS="-k my-connector" picks one.
conformance: testbed-deps
	@ONCEFLOW_CHAOS_KILLS=120 ONCEFLOW_CHAOS_RECORDS=20000 ONCEFLOW_CHAOS_DRIVER_KILLS=10 \
	  $(BIN)/pytest tests/conformance $(PYTEST_ARGS)

# The fault campaign (docs/testbed.md, "The fault campaign"): 1,000 faults of every kind
# over 1,000,000 records on the three-broker cluster, about an hour on 2 cores; it
# prints the report's folder. CAMPAIGN_ARGS="--faults 100 --per-stream 25000" is a short
# one (--help lists the rest). make test runs one fault of each kind.
campaign: testbed-deps
	@$(BIN)/python -m tests.campaign $(CAMPAIGN_ARGS)

# Every fault of the real-node end-to-end test (make test runs a short list).
e2e-cluster: testbed-deps
	@ONCEFLOW_NODE_FAULTS=full $(BIN)/pytest tests/e2e/test_real_node.py $(PYTEST_ARGS)

# The Grafana dashboard's panels drawn from a real Prometheus scraping a real operator
# and task (its test), written where the docs show it.
dashboard-picture: testbed-deps
	@ONCEFLOW_DASHBOARD_PICTURE=$(CURDIR)/docs/images/dashboard.png \
	  $(BIN)/pytest tests/integration/test_metrics_prometheus.py $(PYTEST_ARGS)

crds: install
	$(BIN)/onceflow crds crds --reference docs/reference/fields.md
	rm -rf helm/onceflow/files/crds && $(BIN)/onceflow crds helm/onceflow/files/crds

# The quickstart's Spark job writes through the JVM writer (the default), so the demo
# builds it too: on a fresh machine nothing else has.
demo: install spark-jars
	@bash scripts/jvm-writer.sh >/dev/null
	@bash scripts/demo.sh

clean:
	-bash scripts/node.sh down
	-bash scripts/kafka.sh down
	-bash scripts/kafka-cluster.sh down
	-bash scripts/k8s.sh down
	-bash scripts/postgres.sh down
	-bash scripts/s3proxy.sh down
	rm -rf .onceflow
