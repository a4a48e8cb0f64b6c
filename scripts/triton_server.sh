#!/usr/bin/env bash
# Triton tier: a real Triton Inference Server (tritonserver 2.51, bundled by the nvidia-pytriton
# wheel) serving a decoupled (streaming) text model on the CPU, no Docker, no GPU; the reader and
# the doctor pointed at its /metrics (tests/real_servers/test_triton_real.py).
#
#   bash scripts/triton_server.sh install   # make the pytriton venv if missing (cached), nothing else
#   bash scripts/triton_server.sh test      # install, then run the Triton tests for real
# `test` uses the active environment's pytest (latencykit installed with [test,vllm]). Where the
# tier cannot run, it prints why and exits 0 (the tier is skipped, said so in the log); where the
# venv exists, a skipped test fails the tier (LK_REAL_SERVERS_REQUIRED=triton).
#
# Triton's Python backend runs the model in a stub process that loads the interpreter's
# libpython: the venv must come from an interpreter built against the system's shared libpython,
# i.e. the distribution's /usr/bin/python3 (a separately built Python crashed in the stub).
# Cached under $LK_CI_CACHE (default ~/.cache/latencykit-ci)/venv-pytriton-<ver> (~370 MB;
# measured here: 56 s to install, the server ready ~2 s after start and the model ~5 s after).
set -uo pipefail
cd "$(dirname "$0")/.."

PYTRITON_VERSION=0.7.0
CACHE="${LK_CI_CACHE:-$HOME/.cache/latencykit-ci}"
SYS_PY="${LK_TRITON_PYTHON:-/usr/bin/python3}"
VENV="$CACHE/venv-pytriton-$PYTRITON_VERSION"
mkdir -p "$CACHE"

log() { printf '[triton %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

unavailable_reason() {
  [ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ] || { echo "nvidia-pytriton ships x86_64 Linux wheels only (this is $(uname -s)-$(uname -m))"; return 0; }
  [ -x "$SYS_PY" ] || { echo "no system Python at $SYS_PY (apt-get install python3 python3-venv)"; return 0; }
  local pyv; pyv="$("$SYS_PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  case "$pyv" in 3.8|3.9|3.10|3.11|3.12|3.13) ;; *) echo "system Python $pyv: pytriton's backend stubs exist for 3.8-3.13"; return 0;; esac
  "$SYS_PY" -c 'import sysconfig, sys; sys.exit(0 if sysconfig.get_config_var("Py_ENABLE_SHARED") else 1)' || {
    echo "$SYS_PY is not built with a shared libpython; Triton's Python backend stub needs one"; return 0; }
  # The stub embeds the system's libpython3.X.so with the venv's standard library: an interpreter
  # built elsewhere (pyenv 3.11.7 over Debian's 3.11.2, measured) fails inside the stub
  # ("'_thread.RLock' object has no attribute '_recursion_count'" when the model initializes).
  "$SYS_PY" -c 'import sys; sys.exit(0 if sys.base_prefix == "/usr" else 1)' || {
    echo "$SYS_PY is not the distribution's Python (prefix $("$SYS_PY" -c 'import sys; print(sys.base_prefix)')): Triton's Python backend stub embeds the system libpython, and a separately built interpreter fails inside it"; return 0; }
  "$SYS_PY" -c 'import venv, ensurepip' 2>/dev/null || { echo "$SYS_PY has no venv/ensurepip (apt-get install python3-venv)"; return 0; }
  local free_kb; free_kb="$(df -Pk "$CACHE" | awk 'NR==2 {print $4}')"
  [ "${free_kb:-0}" -ge 1500000 ] || { echo "only $((free_kb / 1024)) MiB free under $CACHE; the venv needs ~400 MB"; return 0; }
  return 1
}

ensure_venv() {
  if [ -x "$VENV/bin/python" ] && [ -f "$VENV/.complete" ]; then log "pytriton: cached venv $VENV"; return 0; fi
  local why; if why="$(unavailable_reason)"; then log "pytriton: NOT AVAILABLE on this machine: $why"; return 1; fi
  rm -rf "$VENV"
  local t0=$SECONDS
  log "pytriton: installing nvidia-pytriton==$PYTRITON_VERSION into $VENV (from $SYS_PY)"
  "$SYS_PY" -m venv "$VENV" && "$VENV/bin/pip" install -q --upgrade pip \
    && "$VENV/bin/pip" install -q "nvidia-pytriton==$PYTRITON_VERSION" || { log "pytriton: pip install failed"; rm -rf "$VENV"; return 1; }
  local tritonserver; tritonserver="$(ls "$VENV"/lib/python3*/site-packages/pytriton/tritonserver/bin/tritonserver 2>/dev/null)"
  [ -x "$tritonserver" ] || { log "pytriton: the wheel has no bundled tritonserver"; rm -rf "$VENV"; return 1; }
  touch "$VENV/.complete"
  log "pytriton: installed in $((SECONDS - t0)) s, $(du -sh "$VENV" | cut -f1)"
}

run_tests() {
  if ! ensure_venv; then
    log "SKIPPED: the Triton tier cannot run here (reason above); tests/real_servers/test_triton_real.py not run"
    return 0
  fi
  log "running tests/real_servers/test_triton_real.py with LK_REAL_SERVERS_REQUIRED=triton"
  LK_CI_CACHE="$CACHE" LK_REAL_SERVERS_REQUIRED=triton LK_REAL_SERVERS_REPORT=triton-report.json python -m pytest tests/real_servers/test_triton_real.py -n 0 -v -rs -p no:cacheprovider
}

case "${1:-test}" in
  install) ensure_venv || true ;;
  test) run_tests ;;
  *) echo "usage: $0 install|test" >&2; exit 2 ;;
esac
