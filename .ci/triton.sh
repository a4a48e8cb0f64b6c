#!/usr/bin/env bash
# Triton tier: a real Triton Inference Server (tritonserver 2.51 from the nvidia-pytriton wheel, CPU
# only, no Docker) serving a decoupled (streaming) text model; the reader and the doctor on its
# /metrics (tests/real_servers/test_triton_real.py). The pytriton venv is made from the system's
# /usr/bin/python3 and cached under ~/.cache/latencykit-ci (~50 s and ~370 MB once; the tier then
# takes ~25 s). Where it cannot run (no system Python with a shared libpython, not x86_64 Linux,
# no disk), the log says why and the tier is skipped; where the venv exists, a skipped test fails.
# Run after the project's venv is active (latencykit[test,vllm] installed).
set -euo pipefail
cd "$(dirname "$0")/.."
exec bash scripts/triton_server.sh test
