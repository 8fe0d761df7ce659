#!/usr/bin/env bash
# Runs every Go fuzz target of the pure packages (and the gateway's body reader) for a
# bounded time each.
# Usage: hack/fuzz.sh [FUZZTIME]   (default 20s per target)
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-20s}
for pkg in ./internal/retirement ./internal/fleet ./internal/claim ./internal/liveness ./internal/giteaclaim ./internal/gateway; do
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo ">> $pkg $target ($fuzztime)"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
  done
done
