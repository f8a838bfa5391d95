#!/usr/bin/env bash
# Issue #35 on a lent GPU as ONE device call (docs/gpu-study.md):
#
#     scripts/gpu_wheels.sh                                   # here: the pure-Python wheels into .whl/
#     .venv/bin/python scripts/gpu_study.py --prepare         # here: token files into .cache/gpu_study/ (~20 MiB)
#     .venv/bin/python scripts/gpu_study.py --dry-run         # here: the plan
#     run(command="bash scripts/gpu_study.sh", carry=[".whl", ".cache/gpu_study"], timeout_s=590)   # the device
#     tar -xzf <files_at>/records.tar.gz                      # here, at the repository root: the records
#
# It installs .whl/ into /tmp/site (the device has its own torch and no package index), then runs
# scripts/gpu_study.py with a budget LIMIT_S - MARGIN_S - the seconds already spent: groups, schedules, the 440m
# trainer check, wide, in that order, each seed only while it fits. After every seed the records go into
# $OUT/records.tar.gz, so a call stopped at its limit still returns what finished; the next call (records
# untarred here first, so they travel with the tree) skips them. Everything it prints is in $OUT/gpu_study.log.
# Without CUDA it still runs (slowly, on the CPU): use --smoke there (tests/analyses/test_gpu_study.py), never the study.
set -uo pipefail
T0=$SECONDS
PY=${PY:-python3}
OUT=${OUT:-/tmp/gpu_study_out}
LIMIT_S=${LIMIT_S:-590}      # the device call's timeout_s
MARGIN_S=${MARGIN_S:-45}     # packing the records, the interpreter's exit, the transfer back
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
if [[ "${SKIP_INSTALL:-0}" != 1 ]]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || { echo "gpu_study: installing .whl/ failed: run scripts/gpu_wheels.sh here and carry .whl"; exit 2; }
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
(nvidia-smi -L || echo "gpu_study: no nvidia-smi") 2>&1 | tee "$OUT/gpu.txt"
[[ -f .cache/gpu_study/english-bpe8192/data.json ]] \
    || { echo "gpu_study: .cache/gpu_study not carried: run scripts/gpu_study.py --prepare here, carry it"; exit 2; }
BUDGET=$(( LIMIT_S - MARGIN_S - (SECONDS - T0) ))
echo "== gpu_study: budget ${BUDGET}s of the call's ${LIMIT_S}s"
"$PY" scripts/gpu_study.py --budget-s "$BUDGET" --out "$OUT" "$@" 2>&1 | tee "$OUT/gpu_study.log"
rc=${PIPESTATUS[0]}
echo "== gpu_study: exit $rc; untar $OUT/records.tar.gz at the repository root"
exit "$rc"
