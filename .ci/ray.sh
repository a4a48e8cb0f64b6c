#!/usr/bin/env bash
# Ray lane: `latencykit bench --cluster local:2` on real two-node Ray clusters started on 127.0.0.1
# (tests/cluster/, and tests/test_cluster.py), in venvs cached outside the repository: one with the
# newest Ray, one with the extra's floor (.ci/ray-constraints.txt). LK_RAY_REQUIRED=1 makes a
# missing Ray a failure, so the lane cannot pass by skipping. Each test checks that no Ray process
# outlives it. ~5 min on 2 cores once cached (each local cluster starts in ~5 s and holds ~1 GB);
# the first install downloads ~110 MB of wheels. Usage: bash .ci/ray.sh [install|test|all]
# (.ci/run installs in the background while the other tiers run, then tests).
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${LATENCYKIT_CI_CACHE:-$HOME/.cache/latencykit-ci}"

# install NAME PIP-ARGS...: the cached venv with latencykit[test,ray] (idempotent)
install() {
  local name=$1; shift
  local venv="$cache/$name"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q "$@" -e ".[test,ray]"
}

# lane NAME PYTEST-ARGS...: the cluster tests in that venv, Ray required
lane() {
  local name=$1; shift
  local venv="$cache/$name" site
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "== $name: $("$venv/bin/pip" list 2>/dev/null | grep -iE '^(ray|grpcio) ' | awk '{print $1"=="$2}' | xargs)," \
       "ray package $(du -sm "$site/ray" | cut -f1) MB, grpcio $(du -sm "$site/grpc" 2>/dev/null | cut -f1) MB"
  LK_RAY_REQUIRED=1 "$venv/bin/python" -m pytest -q -n 0 -p no:cacheprovider "$@"  # Ray clusters one at a time
}

mode="${1:-all}"
if [ "$mode" = install ] || [ "$mode" = all ]; then
  install ray-latest
  install ray-floor -c .ci/ray-constraints.txt
fi
if [ "$mode" = test ] || [ "$mode" = all ]; then
  install ray-latest  # seconds when the background install already made them
  install ray-floor -c .ci/ray-constraints.txt
  lane ray-latest tests/cluster tests/test_cluster.py
  lane ray-floor tests/cluster/test_cluster_ray.py -k "known_timing or skewed"
  lane ray-floor tests/cluster/test_cluster_address_ray.py  # the address check asks Ray's gRPC services by name
fi
