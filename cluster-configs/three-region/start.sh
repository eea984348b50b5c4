#!/usr/bin/env bash
# Starts the three-region loopback cluster in the background: three voters
# (us, eu, ap; us also aggregates) and one edge per region. State, logs and
# PIDs live in .cluster/ at the repository root. Stop it with stop.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-bin/waymark}
DIR=.cluster
mkdir -p "$DIR"
if [ -s "$DIR/pids" ]; then
  echo "a cluster is already running (see $DIR/pids); run 'make cluster-stop' first" >&2
  exit 1
fi
[ -s "$DIR/cluster-key" ] || "$BIN" keygen > "$DIR/cluster-key"
chmod 600 "$DIR/cluster-key"
# Node-to-node TLS: one CA, one certificate per node (names from the
# config files). On a real deployment the CA key stays off the nodes.
TLS=$DIR/tls
[ -s "$TLS/waymark-agent-ca.pem" ] || "$BIN" tls ca create -dir "$TLS" >/dev/null
for cfg in cluster-configs/three-region/*.json; do
  name=$(basename "$cfg" .json)
  role=$(sed -n 's/.*"role": *"\([^"]*\)".*/\1/p' "$cfg")
  [ -s "$TLS/$name-node.pem" ] || "$BIN" tls cert create --node "$name" --role "$role" -dir "$TLS" \
    --ca "$TLS/waymark-agent-ca.pem" --ca-key "$TLS/waymark-agent-ca-key.pem" >/dev/null
done
for cfg in cluster-configs/three-region/*.json; do
  name=$(basename "$cfg" .json)
  "$BIN" node --config "$cfg" --cluster-key-file "$DIR/cluster-key" \
    --tls-cert "$TLS/$name-node.pem" --tls-key "$TLS/$name-node-key.pem" --tls-ca "$TLS/waymark-agent-ca.pem" \
    > "$DIR/$name.log" 2>&1 &
  echo "$! $name" >> "$DIR/pids"
done
# Wait (bounded) until every node answers /readyz.
deadline=$((SECONDS + 60))
for port in 8101 8102 8103 8111 8112 8113; do
  until curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then
      echo "node on :$port not ready after 60s; see $DIR/*.log" >&2
      exit 1
    fi
    sleep 0.2
  done
done
echo "three-region cluster is up:"
printf '  %-9s http %-16s admin %s\n' \
  us-voter 127.0.0.1:8101 127.0.0.1:8201  eu-voter 127.0.0.1:8102 127.0.0.1:8202  ap-voter 127.0.0.1:8103 127.0.0.1:8203 \
  us-edge 127.0.0.1:8111 127.0.0.1:8211   eu-edge 127.0.0.1:8112 127.0.0.1:8212   ap-edge 127.0.0.1:8113 127.0.0.1:8213
echo "operator token of a node: $DIR/<name>/operator-token, e.g."
echo "  $BIN members --admin-addr 127.0.0.1:8201 --token-file $DIR/us-voter/operator-token"
