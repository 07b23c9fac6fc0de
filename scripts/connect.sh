#!/usr/bin/env bash
# connect.sh up|down|libs — a single-node Kafka Connect worker in distributed mode
# (exactly.once.source.support=enabled) on loopback, with benchmarks/connect's
# counting source connector on its classpath; for benchmarks/vs_connect.py (and, with
# Debezium's connector, vs_debezium.py). Jars come from Maven Central (cached per Kafka
# version and connector source); state and logs live in .onceflow/connect/. Needs the
# broker (kafka.sh up).
#
# The same worker can carry more plugins, in class loaders of their own
# (scripts/debezium.sh): CONNECT_PLUGIN_PATH is then its plugin.path, and
# CONNECT_EXPECT the connector classes (simple names) it must list to count as ready.
# A running worker that lacks one is restarted with them; one that has more is kept.
source "$(dirname "$0")/lib.sh"
stdout_is_value
KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"
CONNECT_PORT="${CONNECT_PORT:-18083}"
BOOTSTRAP="${BOOTSTRAP:-127.0.0.1:${KAFKA_PORT:-9092}}"
SOURCE="$ONCEFLOW_ROOT/benchmarks/connect"
DIGEST="$(cd "$SOURCE" && find pom.xml src -type f | sort | xargs sha256sum | sha256sum | cut -c1-12)"
CACHE="$ONCEFLOW_CACHE/connect/$KAFKA_VERSION-$DIGEST"
DIR="$ONCEFLOW_STATE/connect"
PIDFILE="$DIR/worker.pid"
URL="http://127.0.0.1:$CONNECT_PORT"
PLUGIN_PATH="${CONNECT_PLUGIN_PATH:-}"
EXPECT="CountingSourceConnector ${CONNECT_EXPECT:-}"

fetch_libs() {
  maven_libs "$SOURCE/pom.xml" "$CACHE" "counting-source-1.jar" -Dkafka.version="$KAFKA_VERSION"
}

write_config() {
  mkdir -p "$DIR"
  cat >"$DIR/worker.properties" <<PROPS
bootstrap.servers=$BOOTSTRAP
group.id=onceflow-bench-connect
config.storage.topic=onceflow-bench-connect-configs
offset.storage.topic=onceflow-bench-connect-offsets
status.storage.topic=onceflow-bench-connect-status
config.storage.replication.factor=1
offset.storage.replication.factor=1
status.storage.replication.factor=1
exactly.once.source.support=enabled
key.converter=org.apache.kafka.connect.storage.StringConverter
value.converter=org.apache.kafka.connect.storage.StringConverter
listeners=$URL
# The counting connector is on the classpath, other plugins in plugin.path: a scan
# finds both, with or without ServiceLoader manifests.
plugin.discovery=only_scan
PROPS
  if [[ -n "$PLUGIN_PATH" ]]; then
    echo "plugin.path=$PLUGIN_PATH" >>"$DIR/worker.properties"
  fi
  cat >"$DIR/log4j2.properties" <<PROPS
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = $DIR/worker.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
PROPS
}

worker_ready() {
  local plugins class
  plugins="$(curl -sf "$URL/connector-plugins")" || return 1
  for class in $EXPECT; do
    grep -qF ".$class\"" <<<"$plugins" || return 1
  done
}

up() {
  if pid_alive "$PIDFILE" && worker_ready; then
    log "Connect worker already running"; emit "$URL"; return 0
  fi
  stop_pidfile "$PIDFILE" "connect worker"
  fetch_libs
  write_config
  log "starting a Kafka Connect $KAFKA_VERSION worker on $URL"
  setsid bash -c "exec java -Xms256m -Xmx1g -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile='$DIR/log4j2.properties' -cp '$CACHE/libs/*' \
    org.apache.kafka.connect.cli.ConnectDistributed '$DIR/worker.properties'" \
    >"$DIR/stdout.log" 2>&1 </dev/null 3>&- &
  echo $! >"$PIDFILE"
  if ! wait_for "the Connect worker on $URL" 180 worker_ready; then
    tail -30 "$DIR/worker.log" "$DIR/stdout.log" >&2 || true
    return 1
  fi
  log "Connect worker ready"
  emit "$URL"
}

case "${1:-}" in
  up) up ;;
  down) stop_pidfile "$PIDFILE" "connect worker" ;;
  libs) fetch_libs && emit "$CACHE/libs" ;;
  *) echo "usage: $0 up|down|libs" >&2; exit 2 ;;
esac
