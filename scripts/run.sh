#!/usr/bin/env bash
# Build abx and serve the current directory on 127.0.0.1:8080 with the embedded default:
# a random token for principal 'local' (printed once, stored 0600 in ~/.abx/token where
# `abx call` finds it) and preset workspace confined to this directory.
# Extra arguments go to `abx serve` (e.g. --config abx.yaml, --listen 127.0.0.1:9000).
# `abx` is put on PATH as a symlink to build/abx: in $ABX_BIN_DIR when set ("none": not at
# all), else /usr/local/bin when writable, else ~/.local/bin.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bash "$here/scripts/deps.sh" build
cmake -S "$here" -B "$here/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$here/build" -j"$(nproc)" --target abx >/dev/null
bindir=${ABX_BIN_DIR:-}
if [ -z "$bindir" ]; then
    if [ -w /usr/local/bin ]; then bindir=/usr/local/bin; else bindir="$HOME/.local/bin"; fi
fi
if [ "$bindir" != none ]; then
    mkdir -p "$bindir" && ln -sfn "$here/build/abx" "$bindir/abx"
    echo "abx: $bindir/abx -> $here/build/abx" >&2
    case ":$PATH:" in *":$bindir:"*) ;; *) echo "abx: $bindir is not on PATH; add it (export PATH=\"$bindir:\$PATH\")" >&2 ;; esac
fi
exec "$here/build/abx" serve "$@"
