#!/usr/bin/env bash
# Everything issue #15 (and the --device options) still needs a GPU for, as ONE device call:
#
#     scripts/gpu_wheels.sh                         # here, first: the pure-Python wheels into .whl/
#     run(command="bash scripts/gpu_check.sh", carry=[".whl"], timeout_s=560)   # the device tool
#
# 1. installs .whl/ into /tmp/site (that machine has its own torch and no package index);
# 2. the 440m benchmark, uniform, four variants (ddp, fsdp, each with and without compile): tokens/s, MFU, and
#    each variant's 15 costliest kernels of one profiled step (where the time goes);
# 3. the same shape with the cosine 1.5 -> 0.5 taper beside uniform (ddp, fsdp; no compile: 24 widths recompile);
# 4. the CUDA tests that skip on CPU: probes, pretrained ablation, interp eval (gpu_matches_cpu);
# 5. the 1.3b shape under FSDP, eager and compiled (does it fit at 8 x 4096 per GPU, at what MFU).
# Every step has its own time limit and prints as it goes, so a call stopped at its limit still returns what
# it measured; everything lands in $OUT (logs, benchmarks/RESULTS.md): copy $OUT/RESULTS.md over
# benchmarks/RESULTS.md here (its bench_gpu_scale sections are the new ones). Budget: 240 + 120 + 60 + 100 s of limits, plus the install
# (~9 min at most). If the first benchmark hangs (its limit reached before any row: a process group that never
# forms, say), the other benchmarks are skipped rather than hang too, and the tests still run.
# On a machine without CUDA each benchmark says so and exits 0, and the tests skip (how this script is tested).
set -uo pipefail
PY=${PY:-python3}
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if [[ "${SKIP_INSTALL:-0}" != 1 ]]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || { echo "gpu_check: installing .whl/ failed: run scripts/gpu_wheels.sh here and carry .whl"; exit 2; }
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
(nvidia-smi -L || echo "gpu_check: no nvidia-smi") 2>&1 | tee "$OUT/gpu.txt"
step() {  # step NAME LIMIT_S COMMAND...: run with a limit, log to $OUT/NAME.log, report the status, go on
    local name=$1 limit=$2; shift 2
    echo "== $name (limit ${limit}s): $*"
    timeout -k 10 "$limit" "$@" 2>&1 | tee "$OUT/$name.log"
    local rc=${PIPESTATUS[0]}
    echo "== $name: exit $rc"
    return "$rc"
}
step bench_uniform 240 "$PY" benchmarks/bench_gpu_scale.py --write --profile 15
rc=$? hung=0
if [[ $rc == 124 ]] && ! grep -q "tokens/s per GPU" "$OUT/bench_uniform.log"; then
    hung=1
    echo "== bench_uniform reached its limit before any row: the other benchmarks are skipped"
fi
[[ $hung == 1 ]] || step bench_widths 120 "$PY" benchmarks/bench_gpu_scale.py --widths uniform,cosine:1.5:0.5 \
    --variants ddp,fsdp --write
step cuda_tests 60 "$PY" -m pytest -q -p no:cacheprovider -k gpu_matches_cpu \
    tests/probes/test_probes.py tests/ablations/test_ablations.py tests/evals/test_evals_cli.py
[[ $hung == 1 ]] || step bench_1_3b 100 "$PY" benchmarks/bench_gpu_scale.py --preset 1.3b --variants fsdp,fsdp+compile \
    --steps 5 --warmup 2 --write
cp benchmarks/RESULTS.md "$OUT/RESULTS.md"
echo "gpu_check: done; logs and RESULTS.md in $OUT"
