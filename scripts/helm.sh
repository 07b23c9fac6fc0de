#!/usr/bin/env bash
# Builds helm from the Go module proxy once per version and prints its path.
# The version is stamped in as helm's own release build does: a plain `go install`
# reports v3 "unreleased" and has `helm template` assume Kubernetes 1.20, which the
# chart's kubeVersion (>= 1.30) refuses. Helm 3.19 is built on client-go 0.34.
source "$(dirname "$0")/lib.sh"
stdout_is_value
HELM_VERSION="${HELM_VERSION:-3.19.5}"
HELM_KUBE_MINOR="${HELM_KUBE_MINOR:-34}"
BIN="$ONCEFLOW_CACHE/helm/v$HELM_VERSION-k1.$HELM_KUBE_MINOR"
build_helm() {
  [[ -x "$BIN/helm" ]] && return 0
  mkdir -p "$BIN"
  log "building helm v$HELM_VERSION from the Go module proxy (a few minutes cold)"
  GOBIN="$BIN/partial" GOFLAGS="-buildvcs=false" go install \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION
      -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1
      -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$HELM_KUBE_MINOR
      -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1
      -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$HELM_KUBE_MINOR" \
    "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION"
  mv "$BIN/partial/helm" "$BIN/helm"
  rmdir "$BIN/partial"
}
with_lock helm build_helm
emit "$BIN/helm"
