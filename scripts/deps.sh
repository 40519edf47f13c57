#!/usr/bin/env bash
# Installs the Debian 12 packages abx needs, and only those that are missing.
#   scripts/deps.sh build   — compiler, cmake, libraries
#   scripts/deps.sh test    — build + test tools (cmocka, pytest, clang for fuzzing)
#   scripts/deps.sh bench   — build + wrk, nginx, FastAPI/uvicorn/uvloop/httptools
set -euo pipefail
what=${1:-build}
pkgs=(build-essential cmake pkg-config libmicrohttpd-dev libjansson-dev libyaml-dev libcurl4-openssl-dev libwslay-dev libsqlite3-dev zlib1g-dev ca-certificates
      libzmq3-dev   # kernels.*: libzmq speaks the Jupyter protocol
      libssl-dev    # egress: credential injection terminates TLS (OpenSSL)
      protobuf-c-compiler libprotobuf-c-dev libprotobuf-dev  # the E2B door: C from envd's .proto files (+ timestamp.proto)
      libnghttp2-dev)  # the sandboxd door: gRPC is HTTP/2
# the kernels abx starts (kernels.*, devtools.code.run): IPython and IRkernel, with the
# libraries cells are expected to have (plots, data frames)
pkgs+=(python3-ipykernel python3-matplotlib python3-pandas r-cran-irkernel)
# browser.*: Debian's headless Chromium, driven over CDP on a pipe
pkgs+=(chromium)
case "$what" in
  build) ;;
  test) pkgs+=(libcmocka-dev python3 python3-pytest python3-requests python3-websocket clang libclang-rt-14-dev openssl)
        # tests/e2e/package: the Debian packages (scripts/package.sh), lintian, a clean Debian 12 root
        pkgs+=(debhelper dh-python fakeroot lintian debootstrap systemd-container)
        # the Node-based tests (MCP SDK, OpenAPI lint, tsc) use the machine's Node.js; without
        # one, Debian's (Node 18: enough for the MCP SDK and tsc; @redocly/cli 2.77 needs 20.19)
        command -v node >/dev/null || pkgs+=(nodejs npm) ;;
  bench) pkgs+=(wrk nginx-light python3-fastapi python3-uvicorn python3-uvloop python3-httptools) ;; # the FastAPI reference of bench/run.sh
  *) echo "usage: $0 build|test|bench" >&2; exit 2 ;;
esac
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
