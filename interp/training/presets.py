"""Training presets: named dicts of TrainConfig overrides (applied by TrainConfig.from_preset).

Only plain values live here (and `dry_run`, computed from them), so this module imports nothing and a
preset reads like a table row.
Each preset's `notes` says which numbers come from the paper and which are our guesses; the paper
publishes the recipe (AdamW, peak LR 4e-4, cosine decay, weight decay 0.1, sequence 4K, ~0.5M tokens
per batch) and the token budgets at 760M (50B) and 1.3B (100B), not the model shapes, tokenizer,
warm-up or data set.

Shapes of the GPU presets follow Transformer++ (SwiGLU, RoPE, RMSNorm, untied embeddings) with a
32K vocabulary; parameter counts with interp.model.param_counts and the default BPE:
  440m: 24 x 1024, 16 heads, d_ff 3584 -> 432M    760m: 24 x 1536, 12 heads, d_ff 3840 -> 752M
  1.3b: 24 x 2048, 16 heads, d_ff 5120 -> 1.29B
"""

from __future__ import annotations

_PAPER_RECIPE = ("paper: AdamW, peak lr 4e-4, cosine decay, weight decay 0.1, seq 4096, ~0.5M tokens/batch "
                 "(4096 x 128 = 524,288). ")
_GPU_GUESSES = ("guesses: vocab 32768 BPE (paper's tokenizer not public), warm-up 2000 steps, min_lr 4e-5 "
                "(10% of peak), betas (0.9, 0.95), grad clip 1.0; grad_accum 8 = 16 sequences per micro-batch "
                "on one GPU (set grad_accum = 8 / n_gpus under torchrun). The data set is not public: "
                "point `source` at a corpus of the token budget's size (the offline 'wiki' corpus has ~1M tokens).")

_GPU_COMMON = dict(
    n_ctx=4096, batch_size=128, grad_accum=8, lr=4e-4, min_lr=4e-5, warmup_steps=2000,
    weight_decay=0.1, grad_clip=1.0, tokenizer="bpe", vocab_size=32768, dtype="bf16",
    eval_interval=1000, eval_batches=50, ckpt_interval=1000,
)

PRESETS: dict[str, dict] = {
    # Unit tests: seconds on one CPU thread. Vocabulary from a tiny BPE trained on the test corpus.
    "micro": dict(
        d_model=32, n_layers=2, n_heads=2, d_ff=64, n_ctx=32, vocab_size=384,
        steps=8, batch_size=8, grad_accum=1, lr=1e-2, min_lr=1e-3, warmup_steps=2,
        eval_interval=4, eval_batches=2, ckpt_interval=4, dtype="fp32",
        notes="test preset: arbitrary small numbers, nothing from the paper",
    ),
    # Minutes on 2 CPU cores. SwiGLU at d_ff 1024 gives 10.5M params (17.6 MFLOP/token forward, so
    # ~53 MFLOP/token to train); at the ~135 GFLOP/s fp32 that offline-assets.md measured for this size,
    # ~2,500 tokens/s: 250 steps x 8 x 256 = 512k tokens in ~3.5 min.
    "tiny": dict(
        d_model=256, n_layers=6, n_heads=4, d_ff=1024, n_ctx=256, source="wiki", tokenizer="bpe",
        vocab_size=8192, steps=250, batch_size=8, grad_accum=1, lr=2e-3, min_lr=2e-4, warmup_steps=25,
        eval_interval=50, eval_batches=8, ckpt_interval=50, log_interval=5, dtype="auto",
        notes=("CPU preset, all numbers ours: sized for ~3-4 min on 2 uncontended cores (250 steps x 8 x 256 "
               "= 512k tokens, ~0.45 epoch of the offline wiki corpus's 1.13M training tokens with the 8k BPE); "
               "lr 2e-3 is higher than the paper's 4e-4 because the model is 40x smaller and trains for few "
               "steps. Keeps the paper's cosine decay, weight decay 0.1 and AdamW betas. dtype 'auto' = bf16 "
               "autocast where the hardware has native bf16 (AVX512-BF16/AMX CPUs, bf16 GPUs), else fp32: "
               "benchmarks/RESULTS.md measured bf16 1.65x faster than fp32 on these CPUs (~2,700 -> ~4,500 "
               "tokens/s) with validation loss within 0.6% after 120 steps. Pass --dtype fp32 for "
               "results that do not depend on the hardware."),
    ),
    "440m": dict(
        _GPU_COMMON, d_model=1024, n_layers=24, n_heads=16, d_ff=3584, steps=17000,
        notes=_PAPER_RECIPE + "440M is the paper's scale for the width sweep; its shape and token budget "
              "are not public. Ours: 24 layers x d_model 1024, 16 heads, d_ff 3584 (432M params), "
              "17,000 steps = 8.9B tokens (~20 tokens/param, Chinchilla). " + _GPU_GUESSES,
    ),
    "760m": dict(
        _GPU_COMMON, d_model=1536, n_layers=24, n_heads=12, d_ff=3840, steps=95367,
        notes=_PAPER_RECIPE + "paper: 760M trained on 50B tokens (95,367 steps of 524,288 tokens). "
              "Shape ours: 24 layers x d_model 1536, 12 heads (d_head 128), d_ff 3840 (752M params). "
              + _GPU_GUESSES,
    ),
    "1.3b": dict(
        _GPU_COMMON, d_model=2048, n_layers=24, n_heads=16, d_ff=5120, steps=190735,
        notes=_PAPER_RECIPE + "paper: 1.3B trained on 100B tokens (190,735 steps of 524,288 tokens). "
              "Shape ours: 24 layers x d_model 2048, 16 heads, d_ff 5120 (1.29B params). " + _GPU_GUESSES,
    ),
}


# A paper preset at toy size, for a dry run on a CPU before a cluster run (tests/training/test_fsdp.py runs each under
# 2-rank DDP and FSDP): the preset's shape shrunk (depth, width, context, batch), every other field as it is
# (optimizer, schedule, dtype, tokenizer, data). Shrunk shapes keep the head count and d_ff / d_model.
DRY_RUN = dict(n_layers=4, d_head=8, n_ctx=64, batch_size=8, grad_accum=2, steps=3, warmup_steps=1,
               eval_interval=3, eval_batches=2, ckpt_interval=3, log_interval=1)


def dry_run(name: str) -> dict:
    """The overrides that shrink preset `name` for a dry run: TrainConfig.from_preset(name, **dry_run(name))."""
    preset = PRESETS[name]
    sizes = {k: v for k, v in DRY_RUN.items() if k != "d_head"}
    d_model = preset.get("n_heads", 4) * DRY_RUN["d_head"]
    d_ff = max(16, round(preset.get("d_ff", 1024) / preset.get("d_model", 256) * d_model / 16) * 16)
    return {**sizes, "d_model": d_model, "d_ff": d_ff,
            "notes": f"dry run of preset {name!r}: shape shrunk (interp.training.presets.dry_run)"}
