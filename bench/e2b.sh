#!/usr/bin/env bash
# bench/e2b.sh — the stock E2B SDK through abx's E2B door vs abx's own REST, same server,
# same run, interleaved (bench/e2b.mjs): commands.run('true') and files.read of 1 KiB.
# Needs Node >= 20 and the pinned SDK (tests/e2b/install.sh installs it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
bin=${ABX_BIN:-$root/build/abx}
bash "$root/tests/e2b/install.sh"
tmp=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT INT TERM
free() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free); envd=$(free)
token=bench-token-0123456789abcdef
hash=$(printf %s "$token" | sha256sum | cut -d' ' -f1)
mkdir -p "$tmp/ws" "$tmp/cfg"
cat >"$tmp/cfg/abx.yaml" <<YAML
workspace: $tmp/ws
terminal_listen: "off"
ledger: {path: $tmp/cfg/ledger.db}
e2b: {envd_listen: 127.0.0.1:$envd, interpreter_listen: "off"}
auth: {tokens: [{principal: bench, roles: [agent], token_sha256: $hash}]}
policy:
  allow:
    - {ops: ["core.*"], principals: ["*"]}
    - {ops: ["files.*", "process.*", "commands.*"], principals: ["role:agent"], paths: ["$tmp/ws/**"],
       commands: ["/bin/bash *"]}
YAML
ABX_HOME="$tmp/home" "$bin" serve --config "$tmp/cfg/abx.yaml" --listen "127.0.0.1:$port" >"$tmp/log" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.05; done
kill -0 "$pid" 2>/dev/null || { cat "$tmp/log" >&2; exit 1; }
node "$here/e2b.mjs" "http://127.0.0.1:$envd" "http://127.0.0.1:$port" "$token" "$tmp/ws" "${N:-200}"
