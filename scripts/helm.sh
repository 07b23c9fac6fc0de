#!/usr/bin/env bash
# Builds helm from the Go module proxy once per version and prints its path.
# The version is stamped in (a plain `go install` reports v3 "unreleased" and assumes
# an old Kubernetes); `helm template` callers still pass --kube-version.
source "$(dirname "$0")/lib.sh"
stdout_is_value
HELM_VERSION="${HELM_VERSION:-3.19.5}"
BIN="$ONCEFLOW_CACHE/helm/v$HELM_VERSION"
if [[ ! -x "$BIN/helm" ]]; then
  mkdir -p "$BIN"
  log "building helm v$HELM_VERSION from the Go module proxy (a few minutes cold)"
  GOBIN="$BIN/partial" GOFLAGS="-buildvcs=false" go install \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION" \
    "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION"
  mv "$BIN/partial/helm" "$BIN/helm"
  rmdir "$BIN/partial"
fi
emit "$BIN/helm"
