# Shared settings for the test-bed scripts: where caches and runtime state live.
# Caches sit outside the repo (survive clones); runtime state sits in .onceflow/ (ignored).
set -euo pipefail
ONCEFLOW_ROOT="${ONCEFLOW_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
ONCEFLOW_CACHE="${ONCEFLOW_CACHE:-$HOME/.cache/onceflow}"
ONCEFLOW_STATE="${ONCEFLOW_STATE:-$ONCEFLOW_ROOT/.onceflow}"
mkdir -p "$ONCEFLOW_CACHE" "$ONCEFLOW_STATE"

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# wait_for DESCRIPTION SECONDS COMMAND...: polls COMMAND until it succeeds or the deadline passes.
wait_for() {
  local what="$1" seconds="$2"; shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if (( SECONDS >= deadline )); then log "timed out after ${seconds}s waiting for $what"; return 1; fi
    sleep 0.5
  done
}

# pid_alive PIDFILE: true when the pidfile names a live process.
pid_alive() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# stop_pidfile PIDFILE NAME: TERM, wait up to 30 s (a broker flushes its logs), then KILL.
stop_pidfile() {
  local pidfile="$1" name="$2"
  if pid_alive "$pidfile"; then
    local pid; pid="$(cat "$pidfile")"
    log "stopping $name (pid $pid)"
    kill "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 30))
    while kill -0 "$pid" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}
