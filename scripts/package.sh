#!/usr/bin/env bash
# Builds the Debian packages of abx (abx, libabx0, libabx-dev, python3-abx) from this
# checkout with dpkg-buildpackage, then runs lintian on them (docs/install.md).
#   scripts/package.sh [OUTDIR]     default OUTDIR: build/package
# The checkout's files (tracked and new, not ignored) are copied to OUTDIR/abx-VERSION
# with packaging/debian as debian/, so the build never writes beside the checkout. A
# rebuild is skipped when that copy is byte-identical to the one the packages in OUTDIR
# were built from. Needs: scripts/deps.sh test (debhelper, dh-python, lintian).
# Env: ABX_JOBS (parallel build jobs, default 2), ABX_PACKAGE_FORCE=1 (always rebuild).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$here/build/package}" && cd "${1:-$here/build/package}" && pwd)

# one version everywhere: the header (abx --version, /health), CMake, debian/changelog
ver=$(sed -n 's/^#define ABX_VERSION "\(.*\)"$/\1/p' "$here/include/abx/abx.h")
cmake_ver=$(sed -n 's/^project(abx VERSION \([0-9.]*\) .*/\1/p' "$here/CMakeLists.txt")
deb_ver=$(sed -n '1s/^abx (\([^)]*\)).*/\1/p' "$here/packaging/debian/changelog")
if [ -z "$ver" ] || [ "$ver" != "$cmake_ver" ] || [ "$ver" != "${deb_ver%%-*}" ]; then
  echo "package.sh: versions disagree: abx.h '$ver', CMakeLists.txt '$cmake_ver', debian/changelog '$deb_ver'" >&2
  exit 1
fi

stage=$out/abx-$ver
rm -rf "$stage"
mkdir -p "$stage"
# tests/ and scripts/ stay out (the package build runs no test; abx-tierwrap's source and
# the CMake scripts the build runs aside): editing a test or this script does not rebuild
# the packages
(cd "$here" && { git ls-files -z --cached --others --exclude-standard -- . ':!:packaging/debian' ':!:tests' \
                   ':!:scripts'
                  git ls-files -z --cached --others --exclude-standard -- tests/helpers 'scripts/*.cmake'; } |
  while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf -) | tar -C "$stage" -xf -
cp -a "$here/packaging/debian" "$stage/debian"
sum=$(cd "$stage" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)

arch=$(dpkg --print-architecture)
debs=("$out/abx_${deb_ver}_$arch.deb" "$out/libabx0_${deb_ver}_$arch.deb" "$out/libabx-dev_${deb_ver}_$arch.deb"
      "$out/python3-abx_${deb_ver}_all.deb")
built=1
for d in "${debs[@]}"; do [ -f "$d" ] || built=0; done
if [ "${ABX_PACKAGE_FORCE:-0}" != 1 ] && [ $built = 1 ] && [ "$(cat "$out/.source-sha256" 2>/dev/null)" = "$sum" ]; then
  echo "package.sh: sources unchanged since the last build; the packages in $out stand"
else
  rm -f "$out"/*.deb "$out"/*.changes "$out"/*.buildinfo "$out/.source-sha256"
  echo "package.sh: dpkg-buildpackage in $stage (log: $out/build.log)"
  if ! (cd "$stage" && DEB_BUILD_OPTIONS="parallel=${ABX_JOBS:-2} nocheck" \
        dpkg-buildpackage -b -us -uc >"$out/build.log" 2>&1); then
    tail -40 "$out/build.log" >&2
    echo "package.sh: dpkg-buildpackage failed (full log: $out/build.log)" >&2
    exit 1
  fi
  echo "$sum" >"$out/.source-sha256"
fi

# lintian: no errors (it exits 2 on one); warnings land in lintian.txt, which tests/e2e/package
# wants empty
lintian --fail-on error --tag-display-limit 0 "${debs[@]}" | tee "$out/lintian.txt"
printf '%s\n' "${debs[@]}"
