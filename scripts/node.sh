#!/usr/bin/env bash
# node.sh up|down|status|deps|load IMAGE|kill ID|tag IMAGE NEW — a cluster with a real node, next to the API-only
# test bed: its own etcd + kube-apiserver (scripts/k8s.sh on the node network),
# kube-controller-manager, kube-scheduler, kube-proxy, and a kubelet running pods in
# containers through Debian's containerd and runc, with CNI's bridge plugin on the node
# network (lib.sh). Garbage collection, Jobs, Deployments, Services and service
# accounts behave as in any cluster. `up` prints the cluster's kubeconfig.
#
# It is a separate cluster on purpose: the API-only test bed's harness "runs" pods as
# local processes, and a scheduler and kubelet there would run them twice.
# Needs root (containerd, kubelet, iptables). No registry serves images here: the
# sandbox image is built from scripts/node/pause.go and images are imported from the
# archives scripts/image.sh keeps.
source "$(dirname "$0")/lib.sh"
stdout_is_value
K8S_VERSION="${K8S_VERSION:-1.34.4}"
ETCD_VERSION="${ETCD_VERSION:-3.6.16}"
NODE_K8S_PORT="${NODE_K8S_PORT:-17443}"
NODE_ETCD_PORT="${NODE_ETCD_PORT:-13379}"
NODE_NAME="onceflow-node"
BIN="$ONCEFLOW_CACHE/k8s/v$K8S_VERSION-etcd$ETCD_VERSION"
DIR="$ONCEFLOW_STATE/node"
RUN="/run/onceflow-containerd"
SOCKET="$RUN/containerd.sock"
# containerd's images and layers outlive a checkout, like the image archives: a fresh
# clone (CI's) would otherwise import the 2.3 GB image again (about 50 s).
CONTAINERD_ROOT="$ONCEFLOW_CACHE/node/containerd"
PAUSE_IMAGE="localhost/onceflow-pause:1"
CLUSTER=(env K8S_CLUSTER=cluster K8S_ADDRESS="$NODE_IP" K8S_PORT="$NODE_K8S_PORT"
  ETCD_PORT="$NODE_ETCD_PORT" K8S_VERSION="$K8S_VERSION" ETCD_VERSION="$ETCD_VERSION"
  bash "$ONCEFLOW_ROOT/scripts/k8s.sh")
CLUSTER_KUBECONFIG="$ONCEFLOW_STATE/cluster/kubeconfig"  # what k8s.sh writes for K8S_CLUSTER=cluster
COMPONENTS=(kube-proxy kube-scheduler kube-controller-manager kubelet containerd)

require() {
  [[ $EUID -eq 0 ]] || { log "the node needs root (containerd, kubelet, iptables)"; return 1; }
  local missing=()
  for tool in containerd runc iptables conntrack; do
    PATH="$PATH:/usr/sbin:/sbin" command -v "$tool" >/dev/null || missing+=("$tool")
  done
  [[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
  if ((${#missing[@]})); then
    log "installing ${missing[*]} from Debian"
    local packages=(containerd runc iptables conntrack containernetworking-plugins)
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${packages[@]}" \
      || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
             --no-install-recommends "${packages[@]}"; }
  fi
  node_network_up || { log "cannot create bridge $NODE_BRIDGE (needs CAP_NET_ADMIN)"; return 1; }
  K8S_VERSION="$K8S_VERSION" ETCD_VERSION="$ETCD_VERSION" bash "$ONCEFLOW_ROOT/scripts/k8s-build.sh" >/dev/null
}

kubectl_() { "$BIN/kubectl" --kubeconfig "$CLUSTER_KUBECONFIG" "$@"; }
ctr_() { ctr --address "$SOCKET" -n k8s.io "$@"; }

# Not under image.sh's onceflow-*.tar, whose newest two it keeps.
PAUSE_ARCHIVE="$ONCEFLOW_CACHE/images/pause.tar"

build_pause_archive() {
  local archive="$PAUSE_ARCHIVE"
  if [[ ! -f "$archive" ]]; then
    log "building the sandbox image $PAUSE_IMAGE"
    local work; work="$(mktemp -d)"
    (cd "$work" && CGO_ENABLED=0 go build -ldflags "-s -w" -o pause "$ONCEFLOW_ROOT/scripts/node/pause.go")
    tar -C "$work" -cf "$work/rootfs.tar" pause
    bash "$ONCEFLOW_ROOT/scripts/image.sh" podman import --change 'ENTRYPOINT ["/pause"]' \
      "$work/rootfs.tar" "$PAUSE_IMAGE" >/dev/null
    mkdir -p "$(dirname "$archive")"
    bash "$ONCEFLOW_ROOT/scripts/image.sh" podman save --format docker-archive -o "$archive.partial" "$PAUSE_IMAGE"
    mv "$archive.partial" "$archive"
    rm -rf "$work"
  fi
}

write_configs() {
  mkdir -p "$DIR/cni" "$DIR/containerd" "$DIR/kubelet" "$DIR/logs"
  # containerd: a negative oom_score_adj is not permitted here (every sandbox would
  # fail "can't get final child's PID from pipe"), cgroupfs, the local sandbox image.
  containerd config default | sed -E \
    -e "s#^root = .*#root = \"$CONTAINERD_ROOT\"#" \
    -e "s#^state = .*#state = \"$RUN/state\"#" \
    -e "s#^(  address = )\"/run/containerd/containerd.sock\"#\1\"$SOCKET\"#" \
    -e 's#restrict_oom_score_adj = false#restrict_oom_score_adj = true#' \
    -e "s#sandbox_image = .*#sandbox_image = \"$PAUSE_IMAGE\"#" \
    -e 's#bin_dir = "/opt/cni/bin"#bin_dir = "/usr/lib/cni"#' \
    -e "s#conf_dir = \"/etc/cni/net.d\"#conf_dir = \"$DIR/cni\"#" \
    >"$DIR/containerd/config.toml"
  # Pods get addresses on the node bridge; the bridge's own address is the node's.
  cat >"$DIR/cni/10-onceflow.conflist" <<JSON
{"cniVersion": "0.4.0", "name": "onceflow", "plugins": [
  {"type": "bridge", "bridge": "$NODE_BRIDGE", "isGateway": true, "hairpinMode": true,
   "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$NODE_POD_CIDR", "gateway": "$NODE_IP"}]],
            "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$DIR/cni/ipam"}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}
JSON
  # cgroup v1 (hybrid) with cgroupfs: no QoS cgroups, no allocatable enforcement.
  # Images are never garbage-collected or pulled: they were imported and nothing
  # could pull them again.
  cat >"$DIR/kubelet/config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failCgroupV1: false
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
containerRuntimeEndpoint: unix://$SOCKET
address: $NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 2%, imagefs.available: 2%}
serializeImagePulls: false
resolvConf: $DIR/kubelet/pod-resolv.conf
YAML
  # Pods resolve nothing here: every address they use is an IP of the node network.
  # The host's nameserver cannot be reached from a pod's network namespace, so each
  # lookup there waited out its timeout, and a Java Kafka client's SASL login looks up
  # the name of the broker's IP: 10-30 s before every driver's and executor's first
  # request. A nameserver on the pod's own loopback refuses at once.
  printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' >"$DIR/kubelet/pod-resolv.conf"
}

start() {
  local name="$1"; shift
  pid_alive "$DIR/$name.pid" && return 0
  log "starting $name"
  setsid "$@" >"$DIR/logs/$name.log" 2>&1 </dev/null 3>&- &
  echo $! >"$DIR/$name.pid"
}

# Ready, as reported by the kubelet started now (a Node object outlives its kubelet).
node_ready() {
  local since="$1" ready
  ready="$(kubectl_ get node "$NODE_NAME" \
    -o jsonpath='{range .status.conditions[?(@.type=="Ready")]}{.status} {.lastHeartbeatTime}{end}')"
  [[ "${ready% *}" == True && ! "${ready#* }" < "$since" ]]
}

import_archive() {
  log "importing $1 into the node's containerd"
  ctr_ images import --no-unpack=false "$1" >/dev/null
}

# A node started anew starts an empty cluster: what a killed test run left behind
# (pods, Jobs, volumes) would otherwise run again on it.
fresh_state() {
  down
  rm -rf "$ONCEFLOW_STATE/cluster/etcd" "$DIR/cni/ipam"
  if grep -q " $DIR/kubelet/root" /proc/self/mounts; then
    log "still mounted under $DIR/kubelet/root; not removing it"; return 1
  fi
  rm -rf "$DIR/kubelet/root"
}

up() {
  require
  if running; then
    log "node $NODE_NAME already Ready"; emit "$CLUSTER_KUBECONFIG"; return 0
  fi
  local since; since="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  fresh_state
  local kubeconfig; kubeconfig="$("${CLUSTER[@]}" up)"
  local pki="$ONCEFLOW_STATE/cluster/pki"
  write_configs
  start containerd containerd --config "$DIR/containerd/config.toml"
  wait_for containerd 30 ctr_ version
  # Containers of an earlier cluster (their pods went with its etcd): only images stay.
  local stale; stale="$(ctr_ containers ls -q)"
  [[ -z "$stale" ]] || ctr_ containers rm $stale >/dev/null
  if ! ctr_ images ls -q | grep -qx "$PAUSE_IMAGE"; then
    build_pause_archive
    import_archive "$PAUSE_ARCHIVE"
  fi
  start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig "$kubeconfig" \
    --leader-elect=false --secure-port 0 --controllers '*' \
    --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
    --cluster-name onceflow-testbed
  start kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$kubeconfig" --leader-elect=false \
    --bind-address 127.0.0.1 --secure-port 0
  start kube-proxy "$BIN/kube-proxy" --kubeconfig "$kubeconfig" --proxy-mode iptables \
    --hostname-override "$NODE_NAME" --cluster-cidr "$NODE_POD_CIDR" --conntrack-max-per-core 0 \
    --metrics-bind-address 127.0.0.1:10249 --healthz-bind-address 127.0.0.1:10256
  start kubelet "$BIN/kubelet" --kubeconfig "$kubeconfig" --config "$DIR/kubelet/config.yaml" \
    --root-dir "$DIR/kubelet/root" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP"
  if ! wait_for "node $NODE_NAME Ready" 120 node_ready "$since"; then
    tail -20 "$DIR/logs/kubelet.log" >&2; return 1
  fi
  log "node $NODE_NAME Ready; KUBECONFIG=$kubeconfig"
  emit "$kubeconfig"
}

# Every container the node ran is killed with it: containerd's shims outlive containerd.
down() {
  stop_pidfile "$DIR/kubelet.pid" kubelet
  if pid_alive "$DIR/containerd.pid"; then
    local task
    # delete -f SIGKILLs a running task and waits for it to exit.
    for task in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks delete -f "$task" >/dev/null 2>&1 || true; done
  fi
  local name stops=()
  for name in "${COMPONENTS[@]}"; do stops+=("$DIR/$name.pid" "$name"); done
  stop_pidfile "${stops[@]}"
  pkill -f "containerd-shim-runc-v2 .*-address $SOCKET" 2>/dev/null || true
  # What CNI would have removed had the kubelet stopped each pod: the pods' network
  # namespaces (containerd names them cni-*), their veths, kube-proxy's rules.
  ip netns list 2>/dev/null | awk '/^cni-/ {print $1}' | xargs -r -n1 ip netns delete 2>/dev/null || true
  ip -o link show master "$NODE_BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 \
    | xargs -r -n1 ip link delete 2>/dev/null || true
  [[ -x "$BIN/kube-proxy" ]] && "$BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true
  grep -o " $DIR/kubelet/root[^ ]*" /proc/self/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  "${CLUSTER[@]}" down
}

running() {
  local name
  for name in "${COMPONENTS[@]}"; do pid_alive "$DIR/$name.pid" || return 1; done
  "${CLUSTER[@]}" status >/dev/null && node_ready 0
}

# load IMAGE: an image scripts/image.sh built, into the node (no pull is possible).
load() {
  local image="$1" tag="${1##*:}"
  ctr_ images ls -q | grep -qx "$image" && return 0
  oci_layout has "$IMAGE_LAYOUT" "$tag" || { log "no $image in the cache: run scripts/image.sh build"; return 1; }
  # Earlier builds and their test tags (2.3 GB unpacked each) would fill the disk over
  # a reused node's runs; containerd collects their layers once nothing names them.
  # Removed after the import, not before: a new build shares all but its last layers
  # with the one before, and the import carries only the blobs containerd lacks (a
  # whole archive took 30 s to import; this, under a second).
  local earlier
  earlier="$(ctr_ images ls -q | grep "^${image%:*}:" || true)"
  log "importing $image into the node's containerd"
  ctr_ content ls -q | oci_layout stream "$IMAGE_LAYOUT" "$tag" "$image" \
    | ctr_ images import - >/dev/null
  [[ -z "$earlier" ]] || ctr_ images rm $earlier >/dev/null
}

case "${1:-}" in
  up) up ;;
  # What `up` needs on disk (Debian packages, the binaries); nothing without root.
  deps) if [[ $EUID -eq 0 ]]; then require; else log "not root: no real node here"; fi ;;
  down) down ;;
  status) running && emit "$CLUSTER_KUBECONFIG" ;;
  load) load "${2:?usage: $0 load IMAGE}" ;;
  # kill CONTAINER_ID: SIGKILL, below the kubelet (a crash; the kubelet restarts it).
  kill) ctr_ tasks kill -s SIGKILL "${2:?usage: $0 kill CONTAINER_ID}" ;;
  # tag IMAGE NEW: another name for a loaded image (an upgrade to a "new" tag).
  tag) ctr_ images tag --force "${2:?usage: $0 tag IMAGE NEW}" "${3:?usage: $0 tag IMAGE NEW}" >/dev/null ;;
  *) echo "usage: $0 up|down|status|deps|load IMAGE|kill CONTAINER_ID|tag IMAGE NEW" >&2; exit 2 ;;
esac
