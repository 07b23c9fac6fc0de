#!/usr/bin/env bash
# image.sh — the Onceflow image, built here with podman and no image registry.
#   image.sh build   builds (or loads from the cache) and prints the image reference
#   image.sh podman ARGS...   podman with the settings this machine needs
# The base is a Debian bookworm rootfs made from Debian's packages (mmdebstrap), the
# same system `debian:bookworm-slim` is; built images are kept under the cache as tags
# of one OCI layout, keyed by the hash of what goes into them, so a warm run only loads
# one.
source "$(dirname "$0")/lib.sh"

IMAGES="$ONCEFLOW_CACHE/images"
BASE_IMAGE="localhost/onceflow-base:bookworm"
DEPS_IMAGE="localhost/onceflow-deps:latest"
WRITER_IMAGE="localhost/onceflow-jvm-writer:latest"
NPROC=32768
mkdir -p "$IMAGES" "$ONCEFLOW_STATE/podman"

ensure_tools() {
  local missing=()
  for tool in podman mmdebstrap runc skopeo; do command -v "$tool" >/dev/null || missing+=("$tool"); done
  ((${#missing[@]} == 0)) && return
  log "installing ${missing[*]} from Debian"
  local packages=(podman mmdebstrap runc skopeo containernetworking-plugins)
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${packages[@]}" \
    || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
           --no-install-recommends "${packages[@]}"; }
}

# Debian 12's podman runs containers here only with runc (crun rejects the hybrid
# cgroup layout), cgroupfs, and explicit ulimits: open files at most the sandbox's
# hard limit, processes at most 32768 (measured: runc may not set more, whatever
# `ulimit -Hu` says).
podman_here() {
  local conf="$ONCEFLOW_STATE/podman/containers.conf"
  cat > "$conf" <<CONF
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=$NPROC:$NPROC"]
CONF
  CONTAINERS_CONF="$conf" podman "$@"
}

base_image() {
  podman_here image exists "$BASE_IMAGE" && return
  local rootfs="$IMAGES/debian-bookworm-minbase.tar"
  if [[ ! -f "$rootfs" ]]; then
    log "building a Debian bookworm rootfs (mmdebstrap)"
    # Where the machine reaches the registries through a TLS-inspecting proxy, its CA
    # goes into the base's trust store (and pip is told to use that store), or no
    # build step could download anything. Only this machine's base gets it.
    local hooks=()
    if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
      hooks=(
        --customize-hook='copy-in /usr/local/share/ca-certificates /usr/local/share'
        --customize-hook='chroot "$1" update-ca-certificates'
        --customize-hook='printf "[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n" > "$1/etc/pip.conf"'
      )
    fi
    mmdebstrap --variant=minbase --format=tar --include=ca-certificates "${hooks[@]}" \
      bookworm "$rootfs.partial" http://deb.debian.org/debian
    mv "$rootfs.partial" "$rootfs"
  fi
  podman_here import "$rootfs" "$BASE_IMAGE"
}

# The tag: a hash of every file the Dockerfile copies (an edit to a test-bed script
# does not rebuild the image).
context_tag() {
  (cd "$ONCEFLOW_ROOT" && git ls-files -z Dockerfile .dockerignore pyproject.toml \
      operator image scripts/lib.sh scripts/spark-jars.sh scripts/maven/spark-kafka \
      scripts/maven/spark-s3a scripts/jvm-writer.sh jvm/onceflow-spark-kafka \
      tests/fixtures/sink_marker_contract.json \
      | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
}

build() {
  ensure_tools
  local tag; tag="$(context_tag)"
  local image="localhost/onceflow:$tag"
  if ! podman_here image exists "$image"; then
    if oci_layout has "$IMAGE_LAYOUT" "$tag"; then
      skopeo copy -q "oci:$IMAGE_LAYOUT:$tag" "containers-storage:$image" >&2
    else
      base_image
      log "building $image (cold: a few minutes; after a code change: seconds)"
      # The deps stage gets a name of its own so the prune below keeps its layers (2 GB:
      # Java, pyspark, the jars) for the next build, which then reruns only the layers
      # of the package itself. A new deps stage leaves the old one unnamed, and pruned.
      # So does the JVM writer's stage, whose jar every build copies: unnamed, it would
      # be pruned and rebuilt (Maven, its tests) for a Python edit.
      local build=(podman_here build --network host --build-arg "BASE=$BASE_IMAGE"
        --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit "nproc=$NPROC:$NPROC")
      "${build[@]}" --target deps -t "$DEPS_IMAGE" "$ONCEFLOW_ROOT"
      "${build[@]}" --target jvm-writer -t "$WRITER_IMAGE" "$ONCEFLOW_ROOT"
      "${build[@]}" -t "$image" "$ONCEFLOW_ROOT"
      podman_here image prune -f >/dev/null  # stages nothing names any more
      # Earlier builds of this image (2.3 GB each) would fill the disk: the layout
      # below keeps them.
      local earlier
      for earlier in $(podman_here images --format '{{.Repository}}:{{.Tag}}' \
          | grep '^localhost/onceflow:' | grep -vx "$image"); do
        podman_here rmi "$earlier" >/dev/null || true
      done
    fi
  fi
  if ! oci_layout has "$IMAGE_LAYOUT" "$tag"; then
    # Uncompressed, so a layer has the digest podman's store already knows: the layers
    # an earlier build wrote are skipped unread, and containerd's own match them.
    skopeo copy -q --dest-oci-accept-uncompressed-layers \
      "containers-storage:$image" "oci:$IMAGE_LAYOUT:$tag" >&2
    oci_layout keep "$IMAGE_LAYOUT" 2
  fi
  # The archives of earlier versions of this script, 2.3 GB per build.
  rm -f "$IMAGES"/onceflow-*.tar
  emit "$image"
}

case "${1:-}" in
  build) stdout_is_value; with_lock image build ;;
  # Also what `node.sh` builds its pause image with: podman comes with it.
  podman) shift; ensure_tools >&2; podman_here "$@" ;;
  *) echo "usage: $0 build | podman ARGS..." >&2; exit 2 ;;
esac
