#!/usr/bin/env bash
# Runs the kubectl end-to-end tests with every kubectl version that ships beside `kubectl`
# (1.27 … 1.33); CI runs the oldest and the newest.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(dirname "$(readlink -f "$(command -v kubectl)")")
versions=$(ls "$dir" | sed -n 's/^kubectl\.\(1\.[0-9]*\)$/\1/p' | sort -t. -k2 -n | paste -sd, -)
echo "kubectl versions: $versions"
CRDCTL_KUBECTL_VERSIONS="$versions" cargo test -p crdctl --test cli -- serve::kubectl_drives_the_seed_story
