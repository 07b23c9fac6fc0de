#!/usr/bin/env bash
# kafka.sh up|down|libs|node-bootstrap|node-client — a real single-node Apache Kafka
# broker (KRaft) on loopback, plus a listener on the node network (lib.sh) for pods
# where it exists. That one is what a managed Kafka looks like: SASL (PLAIN) over TLS
# with a CA of the test bed's own; `node-client` prints the path of the librdkafka
# settings a client needs there (a Pipeline's auth Secret, key per setting).
# Jars come from Maven Central through scripts/maven/kafka-broker (cached per version);
# data and logs live in .onceflow/kafka/. `up` is idempotent and returns only when an
# AdminClient can list topics, so callers never race the broker.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pki.sh"
stdout_is_value
KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"
KAFKA_PORT="${KAFKA_PORT:-9092}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-$((KAFKA_PORT + 1))}"
LIBS="$ONCEFLOW_CACHE/kafka/$KAFKA_VERSION/libs"
DIR="$ONCEFLOW_STATE/kafka"
PIDFILE="$DIR/broker.pid"
PYTHON="${PYTHON:-$ONCEFLOW_ROOT/.venv/bin/python}"
KAFKA_NODE_PORT="${KAFKA_NODE_PORT:-$((KAFKA_PORT + 2))}"
BOOTSTRAP="127.0.0.1:$KAFKA_PORT"
NODE_BOOTSTRAP="$NODE_IP:$KAFKA_NODE_PORT"

fetch_libs() {
  maven_libs "$ONCEFLOW_ROOT/scripts/maven/kafka-broker/pom.xml" "${LIBS%/libs}" \
    "kafka_2.13-$KAFKA_VERSION.jar" -Dkafka.version="$KAFKA_VERSION"
}

# The node listener's CA, certificate (for the node's address) and one SASL user.
write_node_tls() {
  local tls="$DIR/tls"
  [[ -f "$DIR/node-client.json" ]] && return 0
  issue_certificate "$tls" broker kafka "IP:$NODE_IP"
  # Kafka's PEM key store: an unencrypted PKCS#8 key, then the certificate chain.
  cat "$tls/broker.key" "$tls/broker.crt" >"$tls/broker.pem"
  (umask 077 && openssl rand -hex 16 >"$tls/password")
  (umask 077 && "$PYTHON" - "$tls" "$DIR/node-client.json") <<'PY'
import json, pathlib, sys
tls = pathlib.Path(sys.argv[1])
pathlib.Path(sys.argv[2]).write_text(json.dumps({
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "onceflow",
    "sasl.password": (tls / "password").read_text().strip(),
    "ssl.ca.pem": (tls / "ca.crt").read_text(),
}, indent=2))
PY
}

write_config() {
  mkdir -p "$DIR/data"
  local listeners="PLAINTEXT://127.0.0.1:$KAFKA_PORT" advertised="PLAINTEXT://127.0.0.1:$KAFKA_PORT"
  local node_settings=""
  if node_network_up; then
    write_node_tls
    listeners+=",NODE://$NODE_BOOTSTRAP"; advertised+=",NODE://$NODE_BOOTSTRAP"
    node_settings="listener.name.node.ssl.keystore.type=PEM
listener.name.node.ssl.keystore.location=$DIR/tls/broker.pem
listener.name.node.sasl.enabled.mechanisms=PLAIN
listener.name.node.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_onceflow=\"$(cat "$DIR/tls/password")\";"
  fi
  cat >"$DIR/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
listeners=$listeners,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=$advertised
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,NODE:SASL_SSL,CONTROLLER:PLAINTEXT
$node_settings
controller.quorum.bootstrap.servers=127.0.0.1:$KAFKA_CONTROLLER_PORT
log.dirs=$DIR/data
num.partitions=1
# One node: every internal topic must live with a single replica.
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=3
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# Producers use transaction.timeout.ms <= 60 s; the broker must allow it.
transaction.max.timeout.ms=900000
# Abort timed-out transactions of dead producers within a few seconds, not the default 10 s.
transaction.abort.timed.out.transaction.cleanup.interval.ms=2000
# Topics are created on purpose (tasks and sinks do it), never by a stray metadata request.
auto.create.topics.enable=false
PROPS
  cat >"$DIR/log4j2.properties" <<PROPS
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = $DIR/broker.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = info
logger.request.name = kafka.request.logger
logger.request.level = warn
PROPS
}

java_cmd() {
  java -Xms256m -Xmx1g -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$DIR/log4j2.properties" -cp "$LIBS/*" "$@"
}

broker_ready() {
  "$PYTHON" - "$BOOTSTRAP" <<'PY'
import sys
from confluent_kafka.admin import AdminClient
AdminClient({"bootstrap.servers": sys.argv[1], "socket.timeout.ms": 2000}).list_topics(timeout=2)
PY
}

# A broker started before the node network could exist lacks its listener: restarted.
missing_node_listener() {
  node_network_up && ! grep -q "NODE://$NODE_BOOTSTRAP" "$DIR/server.properties" 2>/dev/null
}

up() {
  if pid_alive "$PIDFILE" && broker_ready && ! missing_node_listener; then
    log "Kafka already running"; emit "$BOOTSTRAP"; return 0
  fi
  # A broker that was not running starts empty: its data is only earlier runs' topics,
  # which grew past 10 GB over a few sessions. One restarted for its node listener keeps
  # the topics of the run that is using it, and one that answers without our pidfile
  # (started by another user, pidfile lost) keeps its data too.
  pid_alive "$PIDFILE" || broker_ready || rm -rf "$DIR/data"
  stop_pidfile "$PIDFILE" kafka
  fetch_libs
  write_config
  if [[ ! -f "$DIR/data/meta.properties" ]]; then
    local cluster_id; cluster_id="$(java_cmd kafka.tools.StorageTool random-uuid)"
    java_cmd kafka.tools.StorageTool format --standalone --ignore-formatted \
      -t "$cluster_id" -c "$DIR/server.properties" >"$DIR/format.log"
  fi
  log "starting Kafka $KAFKA_VERSION on $BOOTSTRAP"
  # setsid: the broker must outlive the make/pytest process that started it.
  setsid bash -c "exec java -Xms256m -Xmx1g -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile='$DIR/log4j2.properties' -cp '$LIBS/*' kafka.Kafka '$DIR/server.properties'" \
    >"$DIR/stdout.log" 2>&1 </dev/null 3>&- &
  echo $! >"$PIDFILE"
  if ! wait_for "Kafka on $BOOTSTRAP" 120 broker_ready; then
    tail -30 "$DIR/broker.log" "$DIR/stdout.log" >&2 || true
    return 1
  fi
  log "Kafka ready"
  emit "$BOOTSTRAP"
}

case "${1:-}" in
  up) up ;;
  down) stop_pidfile "$PIDFILE" kafka ;;
  libs) fetch_libs && emit "$LIBS" ;;
  status) pid_alive "$PIDFILE" && broker_ready && emit "$BOOTSTRAP" ;;
  # The address pods on the node network use; fails when the running broker has none.
  node-bootstrap)
    pid_alive "$PIDFILE" && grep -q "NODE://$NODE_BOOTSTRAP" "$DIR/server.properties" \
      || { log "no broker with a node listener: run kafka.sh up as root"; exit 1; }
    emit "$NODE_BOOTSTRAP" ;;
  node-client) [[ -f "$DIR/node-client.json" ]] && emit "$DIR/node-client.json" ;;
  *) echo "usage: $0 up|down|status|libs|node-bootstrap|node-client" >&2; exit 2 ;;
esac
