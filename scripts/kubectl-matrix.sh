#!/usr/bin/env bash
# Runs the kubectl end-to-end tests with every kubectl version that ships beside `kubectl`
# (1.27 … 1.33); CI runs the oldest and the newest.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(dirname "$(readlink -f "$(command -v kubectl)")")
versions=$(ls "$dir" | sed -n 's/^kubectl\.\(1\.[0-9]*\)$/\1/p' | sort -t. -k2 -n | paste -sd, -)
echo "kubectl versions: $versions"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# Every test that drives kubectl (the seed story and the real-CRD checks, on each backend).
CRDCTL_KUBECTL_VERSIONS="$versions" cargo test -p crdctl --test cli -- kubectl_ 2>&1 | tee "$out"
# A filter that matches nothing passes with zero tests: that must not pass here.
grep -q '^test result: ok\. [1-9]' "$out" || { echo "kubectl-matrix: no kubectl test ran" >&2; exit 1; }
