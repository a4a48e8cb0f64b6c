#!/usr/bin/env bash
# Framework tier: latencykit clients handed to the real frameworks, against the emulator.
#
# Two venvs, because the frameworks cannot share one: instructor caps jiter<0.15, which holds
# openai at 3.3.0, and the pydantic-ai that installs beside that openai breaks on the current
# anthropic SDK. Each venv gets latencykit editable with [test] plus its frameworks (pinned in
# .ci/frameworks-constraints.txt), and runs only its frameworks' tests. A missing framework
# is an error there (LATENCYKIT_REQUIRE_FRAMEWORKS=1), never a skip. Venvs are cached outside
# the repository; re-running is idempotent. Usage: bash .ci/frameworks.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
CACHE="${LATENCYKIT_CI_CACHE:-$HOME/.cache/latencykit-ci}"
export LATENCYKIT_REQUIRE_FRAMEWORKS=1
export LITELLM_LOCAL_MODEL_COST_MAP=True    # LiteLLM fetches prices from the network otherwise
export OPENAI_AGENTS_DISABLE_TRACING=1      # openai-agents exports traces to the platform otherwise

tier() {  # tier NAME "PACKAGES" TEST_FILES...
  local name="$1" packages="$2"; shift 2
  local venv="$CACHE/frameworks-$name"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  # shellcheck disable=SC2086
  "$venv/bin/pip" install -q -c "$ROOT/.ci/frameworks-constraints.txt" -e "$ROOT[test]" $packages
  echo "== framework tier '$name':" $("$venv/bin/pip" list 2>/dev/null | grep -iE "^(openai|anthropic|instructor|pydantic-ai-slim|openai-agents|langchain-openai|langchain-anthropic|litellm) " | awk '{print $1"=="$2}')
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@"
}

tier instructor "instructor" tests/frameworks/test_fw_instructor.py
tier agents "pydantic-ai-slim[openai,anthropic] openai-agents langchain-openai langchain-anthropic litellm" \
  tests/frameworks/test_fw_pydantic_ai.py tests/frameworks/test_fw_openai_agents.py \
  tests/frameworks/test_fw_langchain.py tests/frameworks/test_fw_litellm.py
