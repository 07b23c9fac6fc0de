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
source "$(dirname "$0")/kafka-common.sh"
stdout_is_value
KAFKA_PORT="${KAFKA_PORT:-9092}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-$((KAFKA_PORT + 1))}"
DIR="$ONCEFLOW_STATE/kafka"
PIDFILE="$DIR/broker.pid"
KAFKA_NODE_PORT="${KAFKA_NODE_PORT:-$((KAFKA_PORT + 2))}"
BOOTSTRAP="127.0.0.1:$KAFKA_PORT"
NODE_BOOTSTRAP="$NODE_IP:$KAFKA_NODE_PORT"

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
$(common_properties)
PROPS
  write_log4j "$DIR"
}

broker_ready() { brokers_answer "$BOOTSTRAP" 1; }

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
    local cluster_id; cluster_id="$(kafka_java "$DIR" 256m kafka.tools.StorageTool random-uuid)"
    format_storage "$DIR" "$cluster_id" --standalone
  fi
  log "starting Kafka $KAFKA_VERSION on $BOOTSTRAP"
  start_broker "$DIR" 256m 1g
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
