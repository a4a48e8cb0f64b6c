#!/usr/bin/env bash
# The full test suite on the SDK floors (.ci/floor-constraints.txt = the lower bounds in
# pyproject.toml), in a venv cached outside the repository; the main run in .ci/run covers
# the latest releases. Idempotent. Usage: bash .ci/floor.sh
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${LATENCYKIT_CI_CACHE:-$HOME/.cache/latencykit-ci}/floor"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q -c .ci/floor-constraints.txt -e ".[test]" openai anthropic
echo "== floor:" $("$venv/bin/pip" list 2>/dev/null | grep -iE "^(openai|anthropic|httpx2|pydantic|jiter) " | awk '{print $1"=="$2}')
"$venv/bin/python" -m pytest -q -p no:cacheprovider "$@"
