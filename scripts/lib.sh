# Shared settings for the test-bed scripts: where caches and runtime state live.
# Caches sit outside the repo (survive clones); runtime state sits in .onceflow/ (ignored).
set -euo pipefail
ONCEFLOW_ROOT="${ONCEFLOW_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
ONCEFLOW_CACHE="${ONCEFLOW_CACHE:-$HOME/.cache/onceflow}"
ONCEFLOW_STATE="${ONCEFLOW_STATE:-$ONCEFLOW_ROOT/.onceflow}"
mkdir -p "$ONCEFLOW_CACHE" "$ONCEFLOW_STATE"
# Every build of the Onceflow image, as tags of one OCI layout (scripts/oci_layout.py).
IMAGE_LAYOUT="$ONCEFLOW_CACHE/images/onceflow"
oci_layout() { python3 "$ONCEFLOW_ROOT/scripts/oci_layout.py" "$@"; }

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# Scripts whose stdout is a value (an address, a path) call `stdout_is_value` first.
# From then on the script and every tool it runs (Maven, Go, apt, java) write to
# stderr, and only `emit` reaches the caller's stdout: `$(bash scripts/kafka.sh up)`
# captures the value and nothing else, whatever a tool prints on a cold cache (a cold
# Maven run once put ANSI codes into the captured bootstrap address). Daemons started
# from such a script close fd 3 (`3>&-`): one that kept it would hold the caller's
# pipe open and `$(...)` would wait for the daemon to exit.
stdout_is_value() { exec 3>&1 1>&2; }
emit() { printf '%s\n' "$1" >&3; }

# maven ARGS...: Maven for scripts — batch mode, quiet, no colour, no transfer progress.
maven() { mvn -q -B --no-transfer-progress -Dstyle.color=never "$@"; }

# with_lock NAME COMMAND...: COMMAND holding the cache's lock NAME. Two runs that build
# the same thing at once (two `make k8s-up`, a test run beside a `make image`) once
# wrote the same .partial files; now the second waits and finds the first's result.
# Only for builds: a daemon started under it would hold the lock for its lifetime.
with_lock() {
  local name="$1"; shift
  mkdir -p "$ONCEFLOW_CACHE/locks"
  ( flock 9; "$@" ) 9>"$ONCEFLOW_CACHE/locks/$name.lock"
}

# maven_libs POM CACHE_DIR MARKER [-Dproperty=value...]: the runtime classpath POM
# copies into CACHE_DIR/libs, resolved once (MARKER, a glob, says it is there) and
# swapped in whole so an interrupted download is never taken for a complete one.
maven_libs() { with_lock "maven-${2##*/}" maven_libs_locked "$@"; }

maven_libs_locked() {
  local pom="$1" dir="$2" marker="$3"; shift 3
  compgen -G "$dir/libs/$marker" >/dev/null && return 0
  log "resolving ${dir#"$ONCEFLOW_CACHE"/} from Maven Central ($*)"
  maven -f "$pom" package -Dbuild.dir="$dir/build" -Dlibs.dir="$dir/libs.partial" "$@"
  rm -rf "$dir/libs" && mv "$dir/libs.partial" "$dir/libs"
}

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

# stop_pidfile PIDFILE NAME [PIDFILE NAME...]: TERM to all at once, wait up to 30 s for
# all (a broker flushes its logs), then KILL. Together, because each of the node's
# components takes about 2 s to go: one after another, a teardown waited 14 s for them.
stop_pidfile() {
  local pids=() pid
  while (( $# >= 2 )); do
    if pid_alive "$1"; then
      pid="$(cat "$1")"
      log "stopping $2 (pid $pid)"
      kill "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
    rm -f "$1"
    shift 2
  done
  local deadline=$((SECONDS + 30))
  for pid in "${pids[@]}"; do
    while kill -0 "$pid" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
}

# The test bed's node network: a bridge with an address of its own inside this machine,
# so a kubelet has a node IP that is not loopback (refused) and pods on the bridge reach
# the broker and the API server without leaving the machine. The broker gets a listener
# on it when the bridge can be made (root with CAP_NET_ADMIN); nothing routes outside.
NODE_BRIDGE="${NODE_BRIDGE:-onceflow0}"
NODE_IP="${NODE_IP:-10.217.0.1}"
NODE_POD_CIDR="${NODE_POD_CIDR:-10.217.0.0/24}"

# node_network_up: makes the bridge if it is missing; false where that is not permitted.
node_network_up() {
  if ! ip -br addr show "$NODE_BRIDGE" 2>/dev/null | grep -qw "$NODE_IP/${NODE_POD_CIDR#*/}"; then
    { ip link show "$NODE_BRIDGE" || ip link add "$NODE_BRIDGE" type bridge; } >/dev/null 2>&1 || return 1
    ip addr add "$NODE_IP/${NODE_POD_CIDR#*/}" dev "$NODE_BRIDGE" 2>/dev/null || return 1
  fi
  ip link set "$NODE_BRIDGE" up 2>/dev/null
}
