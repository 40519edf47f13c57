#!/usr/bin/env bash
# The committed generated files must equal what the registry generates now.
#   tests/drift.sh BIN            — fail on any difference
#   tests/drift.sh --update [BIN] — rewrite them
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
update=0
if [ "${1:-}" = "--update" ]; then update=1; shift; fi
bin=${1:-$here/build/abx}
declare -A gen=(
  [catalog/operations.json]="catalog"
  [catalog/openapi.json]="openapi"
  [docs/reference/operations.md]="docs ops"
  [docs/reference/errors.md]="docs errors"
)
status=0
for file in "${!gen[@]}"; do
  tmp=$(mktemp)
  # shellcheck disable=SC2086
  "$bin" ${gen[$file]} >"$tmp"
  if [ $update = 1 ]; then
    mkdir -p "$(dirname "$here/$file")"; mv "$tmp" "$here/$file"; echo "updated $file"
  elif ! diff -u "$here/$file" "$tmp" >/dev/null 2>&1; then
    echo "DRIFT: $file differs from \`abx ${gen[$file]}\` (run: bash tests/drift.sh --update)"
    diff -u "$here/$file" "$tmp" | head -40 || true
    status=1
  fi
  rm -f "$tmp"
done
exit $status
