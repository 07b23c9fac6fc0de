#!/usr/bin/env bash
# prometheus.sh path — the path of Debian's Prometheus server binary, installing the
# package when it is missing. Tests start their own server from it (a loopback port,
# a config naming their targets, data in their temporary directory); the package's
# own service is never started.
source "$(dirname "$0")/lib.sh"
stdout_is_value

install() {
  (( EUID == 0 )) || { log "Prometheus not found: install the 'prometheus' package"; return 1; }
  log "installing Debian's prometheus package"
  # A policy that refuses service starts: the package would start its own server on
  # :9090 (and scrape it) for as long as the machine runs.
  local policy=/usr/sbin/policy-rc.d created=0
  if [[ ! -e "$policy" ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created=1
  fi
  local apt=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus)
  "${apt[@]}" >&2 || { apt-get update -q >&2 && "${apt[@]}" >&2; }
  (( created )) && rm -f "$policy"
  return 0
}

case "${1:-}" in
  path)
    command -v prometheus >/dev/null || install
    emit "$(command -v prometheus)"
    ;;
  *) echo "usage: $0 path" >&2; exit 2 ;;
esac
