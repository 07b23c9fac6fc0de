#!/usr/bin/env bash
# demo.sh — what `make demo` runs: a local broker, the quickstart pipeline under
# `onceflow run` (a 3-task source and a Spark job copying its output through the
# exactly-once sink), a task and the Spark driver SIGKILLed part-way, and audits
# proving both topics hold every record exactly once.
source "$(dirname "$0")/lib.sh"
PYTHON="${PYTHON:-$ONCEFLOW_ROOT/.venv/bin/python}"
ONCEFLOW=("$PYTHON" -m onceflow)
MANIFEST="$ONCEFLOW_ROOT/examples/quickstart.yaml"
TOPIC=quickstart.counts
COPIED=quickstart.copied
EXPECT=20000
STATE="$ONCEFLOW_STATE/demo"
cd "$ONCEFLOW_ROOT"

banner() { printf '\n== %s\n' "$*"; }

banner "1. Kafka (single-node KRaft, real broker)"
BOOTSTRAP="$(bash scripts/kafka.sh up)"

banner "2. fresh start: removing the demo's topics and state from earlier runs"
"$PYTHON" - "$BOOTSTRAP" "$TOPIC" default.quickstart-counter-offsets \
  "$COPIED" default.quickstart-copier-sink-markers <<'PY'
import sys, time
from confluent_kafka.admin import AdminClient
admin = AdminClient({"bootstrap.servers": sys.argv[1]})
existing = set(admin.list_topics(timeout=10).topics)
doomed = [t for t in sys.argv[2:] if t in existing]
for topic, future in (admin.delete_topics(doomed).items() if doomed else []):
    future.result()
    print(f"deleted {topic}")
deadline = time.monotonic() + 30
while doomed and set(doomed) & set(admin.list_topics(timeout=10).topics):
    if time.monotonic() > deadline:
        sys.exit("topics still exist after 30 s")
    time.sleep(0.2)
PY
rm -rf "$STATE"

banner "3. onceflow run $MANIFEST (3 tasks, 4 streams x $EXPECT records, a Spark copier; exactly-once enabled)"
LOG="$(mktemp)"
"${ONCEFLOW[@]}" run "$MANIFEST" --bootstrap "$BOOTSTRAP" --state-dir "$STATE" > >(tee "$LOG") 2>&1 &
RUN_PID=$!
trap 'kill -INT $RUN_PID 2>/dev/null || true; wait $RUN_PID 2>/dev/null || true; rm -f "$LOG"' EXIT
wait_for "first commits" 60 grep -q "committed" "$LOG"
wait_for "records flowing for a while" 60 grep -qE "committed .*offsets s[0-9]=[0-9]{4}" "$LOG"

VICTIM="$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["1"])' "$STATE/default.counter.pids.json")"
banner "4. SIGKILL task 1 (pid $VICTIM) in the middle of its work"
kill -9 "$VICTIM"
wait_for "task 1 to restart" 30 grep -q "task 1 started" "$LOG"

banner "5. waiting for every stream to reach $EXPECT"
audit_clean() { "${ONCEFLOW[@]}" audit --bootstrap "$BOOTSTRAP" --topic "$1" --expect "$EXPECT" --keys 4 >/dev/null; }
wait_for "all $EXPECT records of every stream" 300 audit_clean "$TOPIC"

copied_some() {
  "${ONCEFLOW[@]}" audit --bootstrap "$BOOTSTRAP" --topic "$COPIED" --json 2>/dev/null \
    | "$PYTHON" -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["records"] > 0 else 1)'
}
wait_for "the Spark job's first committed batch in $COPIED" 180 copied_some
DRIVER="$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["driver"])' "$STATE/default.copier.pids.json")"
banner "6. SIGKILL the Spark driver (pid $DRIVER) between batches or inside one"
kill -9 "$DRIVER"
wait_for "the driver to restart from its checkpoint" 30 grep -q "copier: driver exited -9 (killed by SIGKILL); restarting" "$LOG"
wait_for "all $EXPECT records of every stream copied" 300 audit_clean "$COPIED"
kill -INT "$RUN_PID"; wait "$RUN_PID" || true

for topic in "$TOPIC" "$COPIED"; do
  banner "onceflow audit $topic: read_committed, per stream: duplicates, gaps, order"
  "${ONCEFLOW[@]}" audit --bootstrap "$BOOTSTRAP" --topic "$topic" --expect "$EXPECT" \
    --expect-key s0 --expect-key s1 --expect-key s2 --expect-key s3
done
echo
echo "Task 1 was killed part-way (most likely inside a transaction) and restarted; it resumed from the offsets committed"
echo "with its records. The Spark driver was killed too and replayed its batch from the checkpoint; the sink skipped"
echo "what it had already committed. Both topics read 1..$EXPECT per stream exactly once."
