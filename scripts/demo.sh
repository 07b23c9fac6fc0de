#!/usr/bin/env bash
# demo.sh — what `make demo` runs: a local broker, the quickstart pipeline under
# `onceflow run`, a task SIGKILLed part-way, and an audit proving exactly-once.
source "$(dirname "$0")/lib.sh"
PYTHON="${PYTHON:-$ONCEFLOW_ROOT/.venv/bin/python}"
ONCEFLOW=("$PYTHON" -m onceflow)
MANIFEST="$ONCEFLOW_ROOT/examples/quickstart.yaml"
TOPIC=quickstart.counts
EXPECT=20000
STATE="$ONCEFLOW_STATE/demo"
cd "$ONCEFLOW_ROOT"

banner() { printf '\n== %s\n' "$*"; }

banner "1. Kafka (single-node KRaft, real broker)"
BOOTSTRAP="$(bash scripts/kafka.sh up)"

banner "2. fresh start: removing the demo's topics and state from earlier runs"
"$PYTHON" - "$BOOTSTRAP" "$TOPIC" default.quickstart-counter-offsets <<'PY'
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

banner "3. onceflow run $MANIFEST (3 tasks, 4 streams x $EXPECT records, exactly-once enabled)"
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
audit_clean() { "${ONCEFLOW[@]}" audit --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --expect "$EXPECT" >/dev/null; }
wait_for "all $EXPECT records of every stream" 300 audit_clean
kill -INT "$RUN_PID"; wait "$RUN_PID" || true

banner "6. onceflow audit: read_committed, per stream: duplicates, gaps, order"
"${ONCEFLOW[@]}" audit --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --expect "$EXPECT" \
  --expect-key s0 --expect-key s1 --expect-key s2 --expect-key s3
echo
echo "Task 1 was killed part-way (most likely inside a transaction) and restarted; it resumed from the offsets committed"
echo "with its records, so every stream reads 1..$EXPECT exactly once."
