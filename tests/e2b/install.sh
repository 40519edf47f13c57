#!/usr/bin/env bash
# Installs the pinned npm packages of the E2B SDK tests (package-lock.json): the
# stock E2B SDK (npm package e2b). `npm ci` only when the lock
# changed since the last install (a stamp in node_modules records its hash).
# Exit status: 0 installed (or already current), 3 the npm registry is unreachable
# (the tests that need these packages skip and say so), anything else a real failure.
set -euo pipefail
cd "$(dirname "$0")"
command -v npm >/dev/null || { echo "tests/e2b: npm is not installed (Node 20 and npm are needed)" >&2; exit 3; }
major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
[ "$major" -ge 20 ] || { echo "tests/e2b: the e2b SDK needs Node >= 20 (found ${major})" >&2; exit 3; }
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ -f node_modules/.abx-lock-sha256 ] && [ "$(cat node_modules/.abx-lock-sha256)" = "$want" ]; then
    exit 0
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! npm ci --no-audit --no-fund >"$log" 2>&1; then
    if grep -qE 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ENETUNREACH|network' "$log"; then
        echo "tests/e2b: the npm registry is unreachable; the E2B SDK tests are skipped" >&2
        tail -5 "$log" >&2
        exit 3
    fi
    cat "$log" >&2
    exit 1
fi
echo "$want" >node_modules/.abx-lock-sha256
echo "tests/e2b: npm packages installed ($(ls node_modules | wc -l) top-level)"
