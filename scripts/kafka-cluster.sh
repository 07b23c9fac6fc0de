#!/usr/bin/env bash
# kafka-cluster.sh up|down|status|netns-bootstrap|kill N|pause N|resume N|start N|pid N — three Apache
# Kafka brokers (KRaft, each broker and controller, a quorum of three) on loopback, as
# users run Kafka: replication factor 3, min.insync.replicas 2, no unclean election.
# Partition leaders and transaction coordinators move when a broker dies, which one
# broker never shows. Each broker can be killed (SIGKILL), paused (SIGSTOP: it still
# believes it leads), resumed and started again on its data, for the fault tests.
# Data and logs live in .onceflow/kafka-cluster/<n>/; the single broker (kafka.sh)
# stays the default test bed, on other ports.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kafka-common.sh"
stdout_is_value
CLUSTER_PORT="${KAFKA_CLUSTER_PORT:-19092}"
# Where tasks in network namespaces of their own reach the brokers (through a veth whose
# host end routes to it): a second address on the loopback device, in the range set
# aside for benchmarking networks (198.18.0.0/15), so nothing listens on a real
# interface and no real network is shadowed. Only where it can be added (root); the
# fault tests need it; `down` removes it.
NETNS_IP="${KAFKA_NETNS_IP:-198.18.0.1}"
NODES=(1 2 3)
ROOT_DIR="$ONCEFLOW_STATE/kafka-cluster"
HEAP=512m

broker_port() { echo $((CLUSTER_PORT + 2 * ($1 - 1))); }
netns_port() { echo $((CLUSTER_PORT + 100 + 2 * ($1 - 1))); }

netns_address_up() {
  ip -br addr show lo 2>/dev/null | grep -qw "$NETNS_IP/32" && return 0
  ip addr add "$NETNS_IP/32" dev lo 2>/dev/null
}

netns_address_down() { ip addr del "$NETNS_IP/32" dev lo 2>/dev/null || true; }

netns_bootstrap() {
  local n addresses=()
  for n in "${NODES[@]}"; do addresses+=("$NETNS_IP:$(netns_port "$n")"); done
  (IFS=,; echo "${addresses[*]}")
}
controller_port() { echo $((CLUSTER_PORT + 2 * ($1 - 1) + 1)); }
node_dir() { echo "$ROOT_DIR/$1"; }
pidfile() { echo "$(node_dir "$1")/broker.pid"; }

bootstrap() {
  local n addresses=()
  for n in "${NODES[@]}"; do addresses+=("127.0.0.1:$(broker_port "$n")"); done
  (IFS=,; echo "${addresses[*]}")
}

voters() {
  local n voters=()
  for n in "${NODES[@]}"; do voters+=("$n@127.0.0.1:$(controller_port "$n")"); done
  (IFS=,; echo "${voters[*]}")
}

write_config() {
  local n="$1" dir; dir="$(node_dir "$1")"
  mkdir -p "$dir/data"
  local listeners="PLAINTEXT://127.0.0.1:$(broker_port "$n")" advertised
  advertised="$listeners"
  if netns_address_up; then
    listeners+=",NETNS://$NETNS_IP:$(netns_port "$n")"; advertised+=",NETNS://$NETNS_IP:$(netns_port "$n")"
  fi
  cat >"$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=$n
listeners=$listeners,CONTROLLER://127.0.0.1:$(controller_port "$n")
advertised.listeners=$advertised
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,NETNS:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.quorum.voters=$(voters)
log.dirs=$dir/data
num.partitions=1
default.replication.factor=3
min.insync.replicas=2
unclean.leader.election.enable=false
offsets.topic.replication.factor=3
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=6
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
# A broker that comes back catches up fast, and a dead one leaves the ISR within seconds.
replica.lag.time.max.ms=5000
$(common_properties)
PROPS
  write_log4j "$dir"
}

# broker_alive N: broker N's own process runs (not a zombie a killed broker left, not
# another process that took its pid since).
broker_alive() {
  local file pid; file="$(pidfile "$1")"
  [[ -f "$file" ]] || return 1
  pid="$(cat "$file")"
  [[ -r "/proc/$pid/stat" ]] || return 1
  [[ "$(awk '{print $3}' "/proc/$pid/stat")" != Z ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "$(node_dir "$1")/server.properties"
}

start_node() {
  local n="$1"
  broker_alive "$n" && return 0
  write_config "$n"
  log "starting Kafka broker $n on 127.0.0.1:$(broker_port "$n")"
  start_broker "$(node_dir "$n")" 256m "$HEAP"
}

ready() { brokers_answer "$(bootstrap)" "${#NODES[@]}"; }

all_alive() {
  local n
  for n in "${NODES[@]}"; do broker_alive "$n" || return 1; done
}

any_alive() {
  local n
  for n in "${NODES[@]}"; do broker_alive "$n" && return 0; done
  return 1
}

up() {
  if all_alive && ready; then log "Kafka cluster already running"; emit "$(bootstrap)"; return 0; fi
  if any_alive || brokers_answer "$(bootstrap)" 1 2>/dev/null; then
    # Some of it runs (a broker a fault test killed or paused): what is missing starts
    # again on its data, and nothing is wiped under a test that is using it.
    local n
    for n in "${NODES[@]}"; do
      broker_alive "$n" && kill -CONT "$(cat "$(pidfile "$n")")" 2>/dev/null || true
      start_node "$n"
    done
    wait_for "the Kafka cluster on $(bootstrap)" 180 ready || return 1
    emit "$(bootstrap)"
    return 0
  fi
  rm -rf "$ROOT_DIR"  # a cluster that was not running starts empty, as the broker does
  fetch_libs
  local n cluster_id
  mkdir -p "$(node_dir 1)"
  write_log4j "$(node_dir 1)"
  cluster_id="$(kafka_java "$(node_dir 1)" 256m kafka.tools.StorageTool random-uuid)"
  for n in "${NODES[@]}"; do
    write_config "$n"
    format_storage "$(node_dir "$n")" "$cluster_id"
  done
  for n in "${NODES[@]}"; do start_node "$n"; done
  if ! wait_for "the Kafka cluster on $(bootstrap)" 180 ready; then
    for n in "${NODES[@]}"; do tail -20 "$(node_dir "$n")/broker.log" >&2 || true; done
    return 1
  fi
  log "Kafka cluster ready"
  emit "$(bootstrap)"
}

down() {
  local n args=()
  for n in "${NODES[@]}"; do
    if broker_alive "$n"; then
      # A paused broker cannot take TERM: it is woken first.
      kill -CONT "$(cat "$(pidfile "$n")")" 2>/dev/null || true
      args+=("$(pidfile "$n")" "kafka broker $n")
    else
      rm -f "$(pidfile "$n")"  # a pid that is not (or no longer) the broker's: never signalled
    fi
  done
  (( ${#args[@]} )) && stop_pidfile "${args[@]}"
  netns_address_down
}

# signal_node N SIGNAL: SIGKILL, SIGSTOP or SIGCONT to broker N (whose pidfile stays, so
# `start N` knows it was ours).
signal_node() {
  local n="$1" signal="$2"
  [[ -f "$(pidfile "$n")" ]] || { log "no broker $n"; exit 1; }
  kill -"$signal" "$(cat "$(pidfile "$n")")"
}

node_arg() {
  [[ " ${NODES[*]} " == *" ${1:-} "* ]] || { echo "usage: $0 $2 1|2|3" >&2; exit 2; }
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) all_alive && ready && emit "$(bootstrap)" ;;
  kill) node_arg "${2:-}" kill; signal_node "$2" KILL ;;
  pause) node_arg "${2:-}" pause; signal_node "$2" STOP ;;
  resume) node_arg "${2:-}" resume; signal_node "$2" CONT ;;
  start) node_arg "${2:-}" start; start_node "$2" ;;
  pid) node_arg "${2:-}" pid; emit "$(cat "$(pidfile "$2")")" ;;
  # The bootstrap list network namespaces use; fails when the brokers have no such listener.
  netns-bootstrap)
    grep -q "NETNS://" "$(node_dir 1)/server.properties" 2>/dev/null \
      || { log "no listener for network namespaces: run kafka-cluster.sh up as root"; exit 1; }
    emit "$(netns_bootstrap)" ;;
  *) echo "usage: $0 up|down|status|netns-bootstrap|kill N|pause N|resume N|start N|pid N" >&2; exit 2 ;;
esac
