#!/usr/bin/env bash
# bench/sandboxd.sh — the sandboxd door's cost: stock clients (grpc-js on the published
# process.proto, fetch on the REST routes) against abx's own REST for the same calls, same
# server, same run, interleaved (bench/sandboxd.mjs): gRPC Execute of /bin/true vs POST
# /commands/run, gRPC Start of /bin/true read to its ExitEvent vs the same, and GET
# /v1/files of 1 KiB vs GET /files/download. Needs Node >= 20 and the pinned packages
# (tests/e2e/sandboxd/install.sh installs them).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
bin=${ABX_BIN:-$root/build/abx}
bash "$root/tests/e2e/sandboxd/install.sh"
tmp=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT INT TERM
free() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free); rest=$(free); grpc=$(free)
token=bench-token-0123456789abcdef
mkdir -p "$tmp/ws" "$tmp/cfg"
printf %s "$token" >"$tmp/cfg/token"
cat >"$tmp/cfg/abx.yaml" <<YAML
workspace: $tmp/ws
terminal_listen: "off"
ledger: {path: $tmp/cfg/ledger.db}
sandboxd: {rest_listen: 127.0.0.1:$rest, grpc_listen: 127.0.0.1:$grpc}
auth: {tokens: [{principal: bench, roles: [agent], token_file: $tmp/cfg/token}]}
policy:
  allow:
    - {ops: ["core.*"], principals: ["*"]}
    - {ops: ["files.*", "process.*", "commands.*"], principals: ["role:agent"], paths: ["$tmp/ws/**"],
       commands: ["/bin/true"]}
YAML
ABX_HOME="$tmp/home" "$bin" serve --config "$tmp/cfg/abx.yaml" --listen "127.0.0.1:$port" >"$tmp/log" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$rest/v1/health" >/dev/null && break; sleep 0.05; done
kill -0 "$pid" 2>/dev/null || { cat "$tmp/log" >&2; exit 1; }
node "$here/sandboxd.mjs" "127.0.0.1:$grpc" "http://127.0.0.1:$rest" "http://127.0.0.1:$port" "$token" "$tmp/ws" "${N:-200}"
