#!/usr/bin/env bash
# debezium.sh up|down|libs — scripts/connect.sh's Kafka Connect worker (the same one:
# exactly.once.source.support=enabled, the counting connector) carrying Debezium's
# PostgreSQL connector too, as an isolated plugin (plugin.path); for
# benchmarks/vs_debezium.py. The plugin's jars come from Maven Central
# (benchmarks/debezium/pom.xml), cached per Debezium version and POM; `libs` prints
# the plugin.path directory. Needs the broker (kafka.sh up); the connector needs
# PostgreSQL (postgres.sh up) only once it runs.
source "$(dirname "$0")/lib.sh"
stdout_is_value
DEBEZIUM_VERSION="${DEBEZIUM_VERSION:-3.6.1.Final}"
SOURCE="$ONCEFLOW_ROOT/benchmarks/debezium"
DIGEST="$(sha256sum "$SOURCE/pom.xml" | cut -c1-12)"
CACHE="$ONCEFLOW_CACHE/debezium/$DEBEZIUM_VERSION-$DIGEST"

fetch_libs() {
  maven_libs "$SOURCE/pom.xml" "$CACHE" "debezium-connector-postgres/debezium-connector-postgres-*.jar" \
    -Ddebezium.version="$DEBEZIUM_VERSION"
}

# connect.sh with the plugin; its value (the worker's URL) goes to this script's caller.
worker() {
  CONNECT_PLUGIN_PATH="$CACHE/libs" CONNECT_EXPECT=PostgresConnector \
    bash "$ONCEFLOW_ROOT/scripts/connect.sh" "$@" >&3 3>&-
}

case "${1:-}" in
  up) fetch_libs && worker up ;;
  down) worker down ;;
  libs) fetch_libs && emit "$CACHE/libs" ;;
  *) echo "usage: $0 up|down|libs" >&2; exit 2 ;;
esac
