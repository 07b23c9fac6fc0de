#!/usr/bin/env bash
# Builds etcd and the Kubernetes binaries (the API server and kubectl, and the node's
# kubelet, kube-scheduler, kube-controller-manager and kube-proxy) from the Go module
# proxy, once per version.
# k8s.io/kubernetes cannot be `go install`ed (its go.mod replaces staging modules with
# local paths), so a throwaway wrapper module requires it and points every k8s.io
# staging module at its published v0.Y.Z twin. Binaries are cached by version; a
# finished binary is never rebuilt, and an interrupted build resumes from Go's caches.
source "$(dirname "$0")/lib.sh"
stdout_is_value
K8S_VERSION="${K8S_VERSION:-1.34.4}"
ETCD_VERSION="${ETCD_VERSION:-3.6.16}"
BIN="$ONCEFLOW_CACHE/k8s/v$K8S_VERSION-etcd$ETCD_VERSION"
export GOFLAGS="-mod=mod -buildvcs=false"
mkdir -p "$BIN"

COMMANDS=(kube-apiserver kubectl kubelet kube-scheduler kube-controller-manager kube-proxy)

build_kubernetes() {
  local cmd missing=0
  for cmd in "${COMMANDS[@]}"; do [[ -x "$BIN/$cmd" ]] || missing=1; done
  ((missing)) || return 0
  local work="$ONCEFLOW_CACHE/k8s/wrapper-$K8S_VERSION" minor="${K8S_VERSION#*.}"
  minor="${minor%%.*}"
  mkdir -p "$work"
  log "resolving k8s.io/kubernetes v$K8S_VERSION"
  go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" >"$work/download.json"
  local gomod; gomod="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["GoMod"])' "$work/download.json")"
  {
    echo "module onceflow.local/k8sbuild"
    echo "go 1.24"
    echo "require k8s.io/kubernetes v$K8S_VERSION"
    sed -nE 's#^\s*(k8s\.io/[a-z0-9-]+) => \./staging/.*#replace \1 => \1 v0.'"$minor.${K8S_VERSION##*.}"'#p' "$gomod"
  } >"$work/go.mod"
  {
    printf '//go:build tools\npackage tools\n\nimport (\n'
    for cmd in "${COMMANDS[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$cmd"; done
    printf ')\n'
  } >"$work/tools.go"
  (cd "$work" && go mod tidy)
  local ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=v$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  for cmd in "${COMMANDS[@]}"; do
    [[ -x "$BIN/$cmd" ]] && continue
    log "building $cmd v$K8S_VERSION (cold: many minutes on 2 cores; Go's cache makes a retry resume)"
    (cd "$work" && go build -v -ldflags "$ldflags" -o "$BIN/$cmd.partial" "k8s.io/kubernetes/cmd/$cmd" 2>&1 \
      | awk '{n++; if (n % 100 == 0) printf "  ... %d packages compiled (%s)\n", n, $0; fflush()}' >&2)
    mv "$BIN/$cmd.partial" "$BIN/$cmd"
  done
}

build_etcd() {
  [[ -x "$BIN/etcd" ]] && return 0
  local work="$ONCEFLOW_CACHE/k8s/etcd-wrapper-$ETCD_VERSION"
  mkdir -p "$work"
  printf 'module onceflow.local/etcdbuild\ngo 1.24\nrequire go.etcd.io/etcd/server/v3 v%s\n' "$ETCD_VERSION" >"$work/go.mod"
  printf '//go:build tools\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >"$work/tools.go"
  log "building etcd v$ETCD_VERSION"
  (cd "$work" && go mod tidy && go build -ldflags "-s -w" -o "$BIN/etcd.partial" go.etcd.io/etcd/server/v3)
  mv "$BIN/etcd.partial" "$BIN/etcd"
}

with_lock "k8s-$K8S_VERSION" build_etcd
with_lock "k8s-$K8S_VERSION" build_kubernetes
emit "$BIN"
