#!/usr/bin/env bash
# k8s.sh up|down|bin — etcd + kube-apiserver on loopback, the API half of a cluster.
# There is no scheduler, controller-manager or kubelet: pods stay Pending unless the
# test harness runs them, and owned objects are not garbage-collected. CRDs, status
# subresources, finalizers, RBAC, watches and admission webhooks are all real.
# scripts/node.sh runs a second one of these (K8S_CLUSTER, K8S_ADDRESS on the node
# network) as the control plane of a cluster with a real node.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pki.sh"
stdout_is_value
K8S_VERSION="${K8S_VERSION:-1.34.4}"
ETCD_VERSION="${ETCD_VERSION:-3.6.16}"
K8S_PORT="${K8S_PORT:-16443}"
ETCD_PORT="${ETCD_PORT:-12379}"
K8S_CLUSTER="${K8S_CLUSTER:-k8s}"
K8S_ADDRESS="${K8S_ADDRESS:-127.0.0.1}"
BIN="$ONCEFLOW_CACHE/k8s/v$K8S_VERSION-etcd$ETCD_VERSION"
DIR="$ONCEFLOW_STATE/$K8S_CLUSTER"
KUBECONFIG_OUT="$ONCEFLOW_STATE/kubeconfig"
[[ "$K8S_CLUSTER" == k8s ]] || KUBECONFIG_OUT="$DIR/kubeconfig"
# The first address of the service range: what pods reach the API server at.
SERVICE_CIDR=10.96.0.0/24
API_SERVICE_IP=10.96.0.1

ensure_binaries() {
  [[ -x "$BIN/kube-apiserver" && -x "$BIN/kubectl" && -x "$BIN/etcd" ]] && return 0
  K8S_VERSION="$K8S_VERSION" ETCD_VERSION="$ETCD_VERSION" bash "$ONCEFLOW_ROOT/scripts/k8s-build.sh" >/dev/null
}

write_pki() {
  local pki="$DIR/pki"
  [[ -f "$pki/serving.crt" ]] && return 0
  issue_certificate "$pki" serving kube-apiserver \
    "IP:127.0.0.1,IP:$K8S_ADDRESS,IP:$API_SERVICE_IP,DNS:localhost,DNS:kubernetes.default.svc"
  openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  printf '%s,admin,admin-uid,system:masters\n' "$(openssl rand -hex 16)" >"$pki/tokens.csv"
}

write_kubeconfig() {
  local token; token="$(cut -d, -f1 "$DIR/pki/tokens.csv")"
  cat >"$KUBECONFIG_OUT" <<KC
apiVersion: v1
kind: Config
clusters:
- name: onceflow-testbed
  cluster:
    server: https://$K8S_ADDRESS:$K8S_PORT
    certificate-authority-data: $(base64 -w0 "$DIR/pki/ca.crt")
users:
- name: admin
  user:
    token: $token
contexts:
- name: onceflow-testbed
  context: {cluster: onceflow-testbed, user: admin, namespace: default}
current-context: onceflow-testbed
KC
}

apiserver_ready() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_OUT" get --raw /readyz; }
etcd_ready() { curl -sf "http://127.0.0.1:$ETCD_PORT/health"; }

start_etcd() {
  pid_alive "$DIR/etcd.pid" && etcd_ready && return 0
  stop_pidfile "$DIR/etcd.pid" etcd
  log "starting etcd on 127.0.0.1:$ETCD_PORT"
  setsid "$BIN/etcd" --name testbed --data-dir "$DIR/etcd" --unsafe-no-fsync \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
    --initial-cluster "testbed=http://127.0.0.1:$((ETCD_PORT + 1))" \
    --listen-metrics-urls "http://127.0.0.1:$((ETCD_PORT + 2))" \
    >"$DIR/etcd.log" 2>&1 </dev/null 3>&- &
  echo $! >"$DIR/etcd.pid"
  wait_for "etcd on $ETCD_PORT" 60 etcd_ready
}

# Who did what, for service accounts only (the tests themselves are admins): the
# least-privilege test reads which verbs the operator's account used.
write_audit_policy() {
  cat >"$DIR/audit-policy.yaml" <<'POLICY'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
  - level: None
POLICY
}

start_apiserver() {
  pid_alive "$DIR/apiserver.pid" && apiserver_ready && return 0
  write_audit_policy
  stop_pidfile "$DIR/apiserver.pid" kube-apiserver
  log "starting kube-apiserver v$K8S_VERSION on https://$K8S_ADDRESS:$K8S_PORT"
  # On loopback the service range is bookkeeping only and pods get no service account
  # token (nothing creates the accounts); on the node network kube-proxy routes the
  # range and the controller-manager creates the accounts, as in any cluster.
  local admission=(--disable-admission-plugins ServiceAccount)
  [[ "$K8S_ADDRESS" == 127.* ]] || admission=()
  setsid "$BIN/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address "$K8S_ADDRESS" --advertise-address "$K8S_ADDRESS" --secure-port "$K8S_PORT" \
    --tls-cert-file "$DIR/pki/serving.crt" --tls-private-key-file "$DIR/pki/serving.key" \
    --client-ca-file "$DIR/pki/ca.crt" \
    --token-auth-file "$DIR/pki/tokens.csv" \
    --authorization-mode RBAC \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$DIR/pki/sa.pub" \
    --service-account-signing-key-file "$DIR/pki/sa.key" \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    "${admission[@]}" \
    --allow-privileged=true \
    --cert-dir "$DIR/pki/generated" \
    --kubelet-preferred-address-types InternalIP \
    --audit-policy-file "$DIR/audit-policy.yaml" --audit-log-path "$DIR/audit.log" \
    --audit-log-format json --audit-log-maxsize 200 --audit-log-maxbackup 1 \
    >"$DIR/apiserver.log" 2>&1 </dev/null 3>&- &
  echo $! >"$DIR/apiserver.pid"
  if ! wait_for "kube-apiserver /readyz" 120 apiserver_ready; then
    tail -30 "$DIR/apiserver.log" >&2; return 1
  fi
}

up() {
  ensure_binaries
  mkdir -p "$DIR"
  write_pki
  write_kubeconfig
  start_etcd
  start_apiserver
  log "kube-apiserver ready; KUBECONFIG=$KUBECONFIG_OUT"
  emit "$KUBECONFIG_OUT"
}

down() {
  stop_pidfile "$DIR/apiserver.pid" kube-apiserver "$DIR/etcd.pid" etcd
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  bin) ensure_binaries && emit "$BIN" ;;
  status) pid_alive "$DIR/apiserver.pid" && apiserver_ready >/dev/null 2>&1 && emit "$KUBECONFIG_OUT" ;;
  *) echo "usage: $0 up|down|status|bin" >&2; exit 2 ;;
esac
