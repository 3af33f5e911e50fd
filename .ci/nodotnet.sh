#!/usr/bin/env bash
# The binary builds on a machine without .NET: the SDK is hidden under an empty tmpfs in a private
# mount namespace (so `dotnet` is on no PATH and CMake cannot find it), then `make build-bin`
# configures and builds dotmon alone, dotmon starts, and the tests that need the SDK are listed
# as skipped with the reason (never silently passed).
set -euo pipefail
cd "$(dirname "$0")/.."
sdk=$(dirname "$(readlink -f "$(command -v dotnet)")")
build=build-nodotnet
unshare --mount --propagation private bash -euo pipefail -c '
  sdk=$1 build=$2
  mount -t tmpfs -o size=1m,mode=0755 none "$sdk"
  if command -v dotnet >/dev/null; then echo "nodotnet: dotnet is still visible" >&2; exit 1; fi
  rm -rf "$build"
  make --no-print-directory build-bin BUILD="$build" >/dev/null
  "$build/dotmon" --version
  conf=$(cmake -S . -B "$build" 2>&1)
  grep -q "dotnet: not found" <<<"$conf"
  out=$(ctest --test-dir "$build" -R "^(api_parity|auth_jwt_dotnet_crosscheck)$" 2>&1)
  echo "$out" | grep -E "\(Skipped\)|tests passed"
  [ "$(echo "$out" | grep -c "(Skipped)")" -eq 2 ] || { echo "$out" >&2; exit 1; }
  echo "nodotnet: dotmon builds and starts without .NET; the SDK tests are skipped"
' nodotnet "$sdk" "$build"
rm -rf "$build" 2>/dev/null || true
