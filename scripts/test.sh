#!/usr/bin/env bash
# make test's runs of pytest. Run serially the suite keeps two cores about 40 % busy:
# most of it waits on reconciles, task pods and paced sources. So after the pure tests
# and the test bed's own, it runs on two workers side by side, leaving out the tests
# marked `alone` (they freeze the broker, restart the database or replace an object the
# whole API server shares), which then run one at a time. The services start once,
# before the workers, which would otherwise race to start them; the ones started here
# stop at the end (ONCEFLOW_KEEP_SERVICES=1 keeps them).
#
# PYTEST_ARGS reaches every run (e.g. -k, -x; not -n: ONCEFLOW_TEST_WORKERS sets the
# workers, 1 for one at a time); a run it leaves empty is fine, a suite it leaves
# empty is not.
set -uo pipefail
cd "$(dirname "$0")/.."

PYTEST=.venv/bin/pytest
WORKERS="${ONCEFLOW_TEST_WORKERS:-2}"
eval "EXTRA=(${PYTEST_ARGS:-})"
SHARED=(kafka k8s postgres s3proxy)
LATER=(tests/integration tests/conformance tests/e2e)

was_up() { bash "scripts/$1.sh" status >/dev/null 2>&1; }
KEEP="${ONCEFLOW_KEEP_SERVICES:-}"  # the caller's: the runs below always keep them
STARTED=()
for service in "${SHARED[@]}" node kafka-cluster; do
  was_up "$service" || STARTED+=("$service")
done
stop_started() {
  [[ -n "$KEEP" ]] && return
  for service in "${STARTED[@]}"; do
    # The cluster goes down even half up: a broker a failed test left killed or paused
    # makes `status` fail while the other two still run.
    if was_up "$service" || [[ $service == kafka-cluster ]]; then
      bash "scripts/$service.sh" down >/dev/null 2>&1
    fi
  done
}
trap stop_started EXIT
export ONCEFLOW_KEEP_SERVICES=1 PYTHON="$PWD/.venv/bin/python"

ran=0 failed=0
run() {  # one pytest run; 5 (it collected nothing) is not a failure on its own
  echo "== pytest $*"
  "$PYTEST" "$@" "${EXTRA[@]}"
  local rc=$?
  case $rc in
    0) ran=1 ;;
    5) ;;
    *) ran=1 failed=1 ;;
  esac
}

run tests/unit
[[ $failed -eq 0 ]] || exit 1
for service in "${SHARED[@]}"; do  # their start-up chatter only if one fails
  if ! out="$(bash "scripts/$service.sh" up 2>&1)"; then
    echo "$out" >&2; echo "scripts/$service.sh up failed" >&2; exit 1
  fi
done
run tests/testbed
[[ $failed -eq 0 ]] || exit 1
run -n "$WORKERS" --dist worksteal --alone=exclude "${LATER[@]}"
run --alone=only "${LATER[@]}"

[[ $ran -eq 1 ]] || { echo "pytest collected no tests"; exit 1; }
exit $failed
