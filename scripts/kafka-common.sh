# What the single broker (kafka.sh) and the three-broker cluster (kafka-cluster.sh)
# share: the jars, the settings every test-bed broker has, its log configuration, and
# how a broker process is formatted and started. Sourced after lib.sh.
KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"
LIBS="$ONCEFLOW_CACHE/kafka/$KAFKA_VERSION/libs"
PYTHON="${PYTHON:-$ONCEFLOW_ROOT/.venv/bin/python}"

fetch_libs() {
  maven_libs "$ONCEFLOW_ROOT/scripts/maven/kafka-broker/pom.xml" "${LIBS%/libs}" \
    "kafka_2.13-$KAFKA_VERSION.jar" -Dkafka.version="$KAFKA_VERSION"
}

# common_properties: the settings of every test-bed broker, whatever its size.
common_properties() {
  cat <<PROPS
group.initial.rebalance.delay.ms=0
# Producers use transaction.timeout.ms <= 60 s; the broker must allow it.
transaction.max.timeout.ms=900000
# Abort timed-out transactions of dead producers within a few seconds, not the default 10 s.
transaction.abort.timed.out.transaction.cleanup.interval.ms=2000
# Topics are created on purpose (tasks and sinks do it), never by a stray metadata request.
auto.create.topics.enable=false
PROPS
}

# write_log4j DIR: the broker in DIR logs to DIR/broker.log.
write_log4j() {
  cat >"$1/log4j2.properties" <<PROPS
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = $1/broker.log
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

# kafka_java DIR HEAP CLASS ARGS...: a Kafka JVM with DIR's log configuration.
kafka_java() {
  local dir="$1" heap="$2"; shift 2
  java -Xms"$heap" -Xmx"$heap" -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$dir/log4j2.properties" -cp "$LIBS/*" "$@"
}

# format_storage DIR CLUSTER_ID [ARGS...]: DIR/data formatted once for the cluster.
format_storage() {
  local dir="$1" cluster_id="$2"; shift 2
  [[ -f "$dir/data/meta.properties" ]] && return 0
  kafka_java "$dir" 256m kafka.tools.StorageTool format --ignore-formatted \
    -t "$cluster_id" -c "$dir/server.properties" "$@" >"$dir/format.log"
}

# start_broker DIR MIN_HEAP MAX_HEAP: the broker of DIR/server.properties, its pid in
# DIR/broker.pid. setsid: it must outlive the make/pytest process that started it.
start_broker() {
  local dir="$1" min_heap="$2" max_heap="$3"
  setsid bash -c "exec java -Xms$min_heap -Xmx$max_heap -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile='$dir/log4j2.properties' -cp '$LIBS/*' kafka.Kafka '$dir/server.properties'" \
    >"$dir/stdout.log" 2>&1 </dev/null 3>&- &
  echo $! >"$dir/broker.pid"
}

# brokers_answer BOOTSTRAP COUNT: an AdminClient sees COUNT brokers.
brokers_answer() {
  "$PYTHON" - "$1" "$2" <<'PY'
import sys
from confluent_kafka.admin import AdminClient
admin = AdminClient({"bootstrap.servers": sys.argv[1], "socket.timeout.ms": 2000})
assert len(admin.list_topics(timeout=2).brokers) >= int(sys.argv[2])
PY
}
