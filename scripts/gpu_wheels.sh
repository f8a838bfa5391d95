#!/usr/bin/env bash
# The pure-Python wheels a lent GPU machine lacks for running interp (issue #15's GPU measurements), fetched
# HERE into .whl/ (gitignored), because that machine has its own torch (2.11, CUDA 13) and no package index.
# `interp.model` needs transformer-lens (HookPoint), and transformer-lens imports datasets, fancy-einsum,
# beartype and typeguard; datasets brings dill, multiprocess and a newer fsspec. Versions = this venv's pins.
# Add the memory mixers' packages with MIXERS=1 (titans-pytorch and its dependencies: the architectures runs).
#
#     scripts/gpu_wheels.sh            # ~6 MiB into .whl/; then, on the GPU machine (device tool, carry .whl):
#     python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
#         .whl/*.whl && export PYTHONPATH=/tmp/site || exit; python3 benchmarks/bench_gpu_scale.py --write
#
# docs/scale.md ("Measuring on a GPU") gives the whole device command.
set -euo pipefail
PY=${PY:-.venv/bin/python}
DEST=${DEST:-.whl}
CORE="transformer-lens==4.3.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 fsspec==2026.9.0 fancy-einsum==0.0.3
beartype==0.23.1 typeguard==4.6.1"
TITANS="titans-pytorch==0.5.5 accelerated-scan==0.3.1 assoc-scan==0.0.6 axial_positional_embedding==0.3.12 einx==0.4.3
frozendict==2.5.1 hyper-connections==0.4.11 loguru==0.7.3 pyvers==0.2.3 rotary-embedding-torch==0.9.1
tensordict==0.15.3 torch-einops-utils==0.2.0 x-transformers==2.31.10"
WANT=$CORE
[[ "${MIXERS:-0}" == 1 ]] && WANT="$CORE $TITANS"
mkdir -p "$DEST"
# shellcheck disable=SC2086  # word splitting of the package list is intended
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any -d "$DEST" $WANT
ls -1 "$DEST"
du -sh "$DEST"
