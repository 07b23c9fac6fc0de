# Sourced by the test-bed scripts with TLS endpoints (the API server, the broker's node
# listener): a CA of the test bed's own and the certificates it signs.

# issue_certificate DIR NAME CN SAN: DIR/ca.{crt,key} (made once), DIR/NAME.{crt,key}
# for CN with the subjectAltName SAN (e.g. "IP:10.217.0.1,DNS:localhost").
issue_certificate() {
  local dir="$1" name="$2" cn="$3" san="$4"
  mkdir -p "$dir"
  if [[ ! -f "$dir/ca.crt" ]]; then
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=onceflow-testbed-ca" \
      -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
  fi
  openssl req -newkey rsa:2048 -nodes -subj "/CN=$cn" -keyout "$dir/$name.key" \
    -out "$dir/$name.csr" 2>/dev/null
  printf 'subjectAltName=%s\n' "$san" >"$dir/$name.ext"
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
    -days 3650 -extfile "$dir/$name.ext" -out "$dir/$name.crt" 2>/dev/null
}
