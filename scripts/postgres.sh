#!/usr/bin/env bash
# postgres.sh up|down|restart [fast|immediate] — Debian's PostgreSQL server on a
# loopback port, data in .onceflow/postgres/. `restart immediate` is a crash (no
# shutdown checkpoint; recovery replays the WAL), for tests of what survives one. Installs the server package when it is missing. PostgreSQL
# refuses to run as root, so under root the server runs as the `postgres` user.
source "$(dirname "$0")/lib.sh"
stdout_is_value
# Below the kernel's ephemeral range (32768-60999): a client socket once took 55432 first.
PG_PORT="${PG_PORT:-15432}"
DIR="$ONCEFLOW_STATE/postgres"
DATA="$DIR/data"

pg_bin() {
  local found
  found="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
  if [[ -z "$found" ]]; then
    log "installing Debian's postgresql server"
    if (( EUID == 0 )); then
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2 \
        || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2; }
    else
      log "PostgreSQL server not found: install the 'postgresql' package"; return 1
    fi
    found="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
  fi
  echo "$found"
}

as_owner() {
  if (( EUID == 0 )); then runuser -u postgres -- "$@"; else "$@"; fi
}

up() {
  local bin; bin="$(pg_bin)"
  mkdir -p "$DIR"
  (( EUID == 0 )) && chown postgres:postgres "$DIR"
  if [[ ! -f "$DATA/PG_VERSION" ]]; then
    as_owner "$bin/initdb" -D "$DATA" -U onceflow --auth=trust -E UTF8 >"$DIR/initdb.log"
  fi
  if ! as_owner "$bin/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
    log "starting PostgreSQL on 127.0.0.1:$PG_PORT"
    # fsync off: test data is disposable and fsync dominates small-transaction latency.
    # wal_level=logical: the postgres connector's CDC mode decodes the WAL (pgoutput).
    as_owner "$bin/pg_ctl" -D "$DATA" -l "$DIR/server.log" -w -t 60 start \
      -o "-p $PG_PORT -k $DIR -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200 -c wal_level=logical -c max_replication_slots=40 -c max_wal_senders=40" 3>&-
  fi
  wait_for "PostgreSQL on $PG_PORT" 60 "$bin/pg_isready" -h 127.0.0.1 -p "$PG_PORT"
  emit "postgresql://onceflow@127.0.0.1:$PG_PORT/postgres"
}

down() {
  local bin; bin="$(pg_bin)"
  [[ -f "$DATA/PG_VERSION" ]] || return 0
  as_owner "$bin/pg_ctl" -D "$DATA" -m fast -w stop >&2 2>/dev/null || true
}

restart() {
  local bin; bin="$(pg_bin)"
  # pg_ctl starts it again with the options it last ran with (postmaster.opts).
  as_owner "$bin/pg_ctl" -D "$DATA" -m "${1:-fast}" -w -t 60 -l "$DIR/server.log" restart >&2 3>&-
  wait_for "PostgreSQL on $PG_PORT" 60 "$bin/pg_isready" -h 127.0.0.1 -p "$PG_PORT"
  emit "postgresql://onceflow@127.0.0.1:$PG_PORT/postgres"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  restart) restart "${2:-fast}" ;;
  status) [[ -f "$DATA/PG_VERSION" ]] && "$(pg_bin)/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" && emit "postgresql://onceflow@127.0.0.1:$PG_PORT/postgres" ;;
  *) echo "usage: $0 up|down|status|restart [fast|immediate]" >&2; exit 2 ;;
esac
