#!/usr/bin/env bash
# spark-operator-crd.sh — the Spark operator's SparkApplication CRD (kubeflow/spark-operator,
# Apache-2.0), taken unchanged from its Go module on the module proxy, once per version,
# and prints the file's path. Tests install it into the API server so that what Onceflow
# renders is checked against the real schema (server-side dry run).
source "$(dirname "$0")/lib.sh"
stdout_is_value
SPARK_OPERATOR_VERSION="${SPARK_OPERATOR_VERSION:-2.5.0}"
CRD="$ONCEFLOW_CACHE/spark-operator/v$SPARK_OPERATOR_VERSION/sparkoperator.k8s.io_sparkapplications.yaml"
if [[ ! -s "$CRD" ]]; then
  log "fetching the Spark operator v$SPARK_OPERATOR_VERSION module for its CRD"
  mkdir -p "$(dirname "$CRD")"
  module="$(cd "$(dirname "$CRD")" && GOFLAGS=-mod=mod go mod download -json \
    "github.com/kubeflow/spark-operator/v2@v$SPARK_OPERATOR_VERSION")"
  dir="$(python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["Dir"])' <<<"$module")"
  cp "$dir/config/crd/bases/sparkoperator.k8s.io_sparkapplications.yaml" "$CRD.partial"
  mv "$CRD.partial" "$CRD"
fi
emit "$CRD"
