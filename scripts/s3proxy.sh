#!/usr/bin/env bash
# s3proxy.sh up|down|status|credentials|bucket NAME|keys BUCKET PREFIX — an S3 endpoint
# on a loopback port for s3a:// checkpoints: S3Proxy from Maven Central, storing in
# memory (its `transient` store is the one whose keys behave as S3A expects; its
# directory-backed stores present a directory marker as a file). `up` and `status`
# print the endpoint URL; `credentials` the access key and the secret key, one per line
# (test bed only); `bucket NAME` creates a bucket; `keys` lists the keys under PREFIX.
source "$(dirname "$0")/lib.sh"
stdout_is_value
S3PROXY_VERSION="${S3PROXY_VERSION:-2.6.0}"
S3_PORT="${S3_PORT:-19900}"
CACHE="$ONCEFLOW_CACHE/s3proxy/$S3PROXY_VERSION"
DIR="$ONCEFLOW_STATE/s3proxy"
PIDFILE="$DIR/s3proxy.pid"
ENDPOINT="http://127.0.0.1:$S3_PORT"
ACCESS_KEY=onceflow
SECRET_KEY=onceflow-test-bed

up() {
  if ! pid_alive "$PIDFILE"; then
    maven_libs "$ONCEFLOW_ROOT/scripts/maven/s3proxy/pom.xml" "$CACHE" \
      "s3proxy-$S3PROXY_VERSION.jar" -Ds3proxy.version="$S3PROXY_VERSION"
    mkdir -p "$DIR"
    cat >"$DIR/s3proxy.properties" <<PROPERTIES
s3proxy.endpoint=$ENDPOINT
s3proxy.authorization=aws-v2-or-v4
s3proxy.identity=$ACCESS_KEY
s3proxy.credential=$SECRET_KEY
jclouds.provider=transient
jclouds.identity=$ACCESS_KEY
jclouds.credential=$SECRET_KEY
PROPERTIES
    # The jar ships no logging configuration, and logback's default logs every request
    # at DEBUG.
    cat >"$DIR/logback.xml" <<'LOGBACK'
<configuration>
  <appender name="out" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level %logger{36} %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="out"/></root>
</configuration>
LOGBACK
    log "starting S3Proxy on $ENDPOINT"
    nohup java -Dlogback.configurationFile="$DIR/logback.xml" -cp "$CACHE/libs/*" \
      org.gaul.s3proxy.Main --properties "$DIR/s3proxy.properties" \
      >"$DIR/s3proxy.log" 2>&1 3>&- &
    echo $! >"$PIDFILE"
  fi
  # Any HTTP answer (an anonymous request is refused with 403) means it serves.
  wait_for "S3Proxy on $S3_PORT" 60 curl -s -o /dev/null "$ENDPOINT/"
  emit "$ENDPOINT"
}

# s3 METHOD BUCKET [CURL ARGS...]: a request signed with the test bed's key (AWS
# signature version 2, which S3Proxy accepts: HMAC-SHA1 of method, date and resource).
s3() {
  local method="$1" bucket="$2"; shift 2
  local date signature
  date="$(LC_ALL=C date -u '+%a, %d %b %Y %H:%M:%S GMT')"
  signature="$(printf '%s\n\n\n%s\n/%s' "$method" "$date" "$bucket" \
    | openssl dgst -sha1 -hmac "$SECRET_KEY" -binary | base64)"
  curl -sS --fail-with-body -X "$method" -H "Date: $date" \
    -H "Authorization: AWS $ACCESS_KEY:$signature" "$@" "$ENDPOINT/$bucket"
}

case "${1:-}" in
  up) up ;;
  down) stop_pidfile "$PIDFILE" S3Proxy ;;
  status) pid_alive "$PIDFILE" && curl -s -o /dev/null "$ENDPOINT/" && emit "$ENDPOINT" ;;
  credentials) emit "$ACCESS_KEY"; emit "$SECRET_KEY" ;;
  bucket)  # S3Proxy refuses to create a bucket twice
    s3 GET "${2:?bucket name}" -G -d max-keys=0 -o /dev/null 2>/dev/null \
      || s3 PUT "$2" -o /dev/null ;;
  keys)
    listing="$(s3 GET "${2:?bucket name}" -G --data-urlencode "prefix=${3:-}")"
    { grep -o '<Key>[^<]*</Key>' <<<"$listing" || true; } | sed 's/<[^>]*>//g' >&3 ;;
  *) echo "usage: $0 up|down|status|credentials|bucket NAME|keys BUCKET PREFIX" >&2; exit 2 ;;
esac
