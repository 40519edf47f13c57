#!/usr/bin/env bash
# Installs the pinned npm packages of the console's end-to-end test: playwright-core here
# (package-lock.json; it drives Debian's /usr/bin/chromium and downloads no browser), and
# the console's own build tools in console/ (its lock), which the test uses to check that
# the committed console/dist is what the sources build. `npm ci` only when a lock changed
# since the last install (a stamp in node_modules records its hash).
# Exit status: 0 installed (or already current), 3 the npm registry is unreachable
# (the tests that need these packages skip and say so), anything else a real failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command -v npm >/dev/null || { echo "tests/e2e/console: npm is not installed (Node 20 and npm are needed)" >&2; exit 3; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for dir in "$here" "$here/../../../console"; do
    cd "$dir"
    want=$(sha256sum package-lock.json | cut -d' ' -f1)
    if [ -f node_modules/.abx-lock-sha256 ] && [ "$(cat node_modules/.abx-lock-sha256)" = "$want" ]; then
        continue
    fi
    if ! npm ci --no-audit --no-fund >"$log" 2>&1; then
        if grep -qE 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ENETUNREACH|network' "$log"; then
            echo "tests/e2e/console: the npm registry is unreachable; the console end-to-end tests are skipped" >&2
            tail -5 "$log" >&2
            exit 3
        fi
        cat "$log" >&2
        exit 1
    fi
    echo "$want" >node_modules/.abx-lock-sha256
    echo "tests/e2e/console: npm packages installed in $(basename "$dir") ($(ls node_modules | wc -l) top-level)"
done
