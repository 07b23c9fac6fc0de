#!/usr/bin/env bash
# demo.sh — what `make demo` runs: start the local broker and show a transactional
# round trip (committed records visible, aborted ones not, a zombie fenced).
source "$(dirname "$0")/lib.sh"
PYTHON="${PYTHON:-$ONCEFLOW_ROOT/.venv/bin/python}"
bash "$ONCEFLOW_ROOT/scripts/kafka.sh" up >/dev/null
cd "$ONCEFLOW_ROOT"
exec "$PYTHON" -m pytest -v -p no:cacheprovider tests/integration/test_kafka_broker.py
