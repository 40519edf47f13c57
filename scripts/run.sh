#!/usr/bin/env bash
# Build abx and serve the current directory on 127.0.0.1:8080 with the embedded default:
# a random token for principal 'local' (printed once, stored 0600 in ~/.abx/token where
# `abx call` finds it) and preset workspace confined to this directory.
# Extra arguments go to `abx serve` (e.g. --config abx.yaml, --listen 127.0.0.1:9000).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bash "$here/scripts/deps.sh" build
cmake -S "$here" -B "$here/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$here/build" -j"$(nproc)" --target abx >/dev/null
exec "$here/build/abx" serve "$@"
