#!/usr/bin/env bash
# Installs the pinned npm packages of the sandboxd door tests (package-lock.json):
# @grpc/grpc-js and @grpc/proto-loader (gRPC on the published process.proto),
# openapi-response-validator and js-yaml (REST against the published OpenAPI), ajv (the
# manifests against the vendored CRD schemas). `npm ci` only when the lock changed since
# the last install (a stamp in node_modules records its hash).
# Exit status: 0 installed (or already current), 3 the npm registry is unreachable
# (the tests that need these packages skip and say so), anything else a real failure.
set -euo pipefail
cd "$(dirname "$0")"
command -v npm >/dev/null || { echo "tests/e2e/sandboxd: npm is not installed (Node 20 and npm are needed)" >&2; exit 3; }
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ -f node_modules/.abx-lock-sha256 ] && [ "$(cat node_modules/.abx-lock-sha256)" = "$want" ]; then
    exit 0
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! npm ci --no-audit --no-fund >"$log" 2>&1; then
    if grep -qE 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ENETUNREACH|network' "$log"; then
        echo "tests/e2e/sandboxd: the npm registry is unreachable; the sandboxd client tests are skipped" >&2
        tail -5 "$log" >&2
        exit 3
    fi
    cat "$log" >&2
    exit 1
fi
echo "$want" >node_modules/.abx-lock-sha256
echo "tests/e2e/sandboxd: npm packages installed ($(ls node_modules | wc -l) top-level)"
