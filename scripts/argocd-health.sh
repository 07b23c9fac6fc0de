#!/usr/bin/env bash
# argocd-health.sh — builds scripts/argocd/health.go against Argo CD's own module from
# the Go module proxy, once per version, and prints the binary's path.
# Argo CD's go.mod pins Kubernetes modules with replace directives, which apply only
# inside Argo CD's own build: the wrapper module copies them, as k8s-build.sh does for
# Kubernetes. Argo CD 3.6 needs Go 1.27; GOTOOLCHAIN=auto fetches it from the proxy.
source "$(dirname "$0")/lib.sh"
stdout_is_value
ARGOCD_VERSION="${ARGOCD_VERSION:-3.6.1}"
BIN="$ONCEFLOW_CACHE/argocd/v$ARGOCD_VERSION/argocd-health"
export GOFLAGS="-mod=mod -buildvcs=false" GOTOOLCHAIN=auto
source_file="$ONCEFLOW_ROOT/scripts/argocd/health.go"
digest="$(sha256sum "$source_file" | cut -c1-12)"

if [[ ! -x "$BIN-$digest" ]]; then
  work="$ONCEFLOW_CACHE/argocd/wrapper-$ARGOCD_VERSION"
  mkdir -p "$work"
  log "building Argo CD v$ARGOCD_VERSION's health evaluation (cold: a few minutes)"
  go mod download -json "github.com/argoproj/argo-cd/v3@v$ARGOCD_VERSION" >"$work/download.json"
  gomod="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["GoMod"])' "$work/download.json")"
  {
    echo "module onceflow.local/argocdhealth"
    sed -n 's/^go .*/&/p' "$gomod"
    echo "require github.com/argoproj/argo-cd/v3 v$ARGOCD_VERSION"
    # Only the block's version pins: a local-path replace means nothing out here.
    sed -n '/^replace (/,/^)/p' "$gomod" | grep -E '=> [^.]' | sed 's/^\s*/replace /'
  } >"$work/go.mod"
  cp "$source_file" "$work/main.go"
  (cd "$work" && go mod tidy && go build -ldflags "-s -w" -o "$BIN-$digest.partial" .)
  mv "$BIN-$digest.partial" "$BIN-$digest"
fi
emit "$BIN-$digest"
