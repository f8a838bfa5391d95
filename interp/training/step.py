"""One optimizer step and what it needs: the compute dtype, the loss of a batch of windows, AdamW.

`train_step(model, optimizer, micro_batches, ...)` is the whole step (forward/backward per micro-batch with
the gradient all-reduce / reduce-scatter only on the last one, clip, AdamW). The Trainer calls it once per
step and the benchmarks' bare loop calls it too, so "Trainer vs bare loop" measures only the loop around it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path

import torch
from jaxtyping import Int
from torch import Tensor

from interp._util import cpu_kernels
from interp._util.dtypes import AUTO, torch_dtype
from interp._util.errors import InputError
from interp.model import next_token_loss
from interp.training.config import TrainConfig
from interp.training.parallel import grad_sync


def bf16_is_native(device: torch.device) -> bool:
    """Whether bf16 autocast runs on native bf16 units here: a bf16-capable GPU, or a CPU with AVX512-BF16
    or AMX. benchmarks/RESULTS.md (bench_train c): on such a CPU bf16 trained the tiny preset 1.65x faster
    than fp32 with validation loss within 0.6%, so `dtype="auto"` picks it; elsewhere fp32, and under
    INTERP_CPU_KERNELS=portable (interp._util.cpu_kernels), whose kernels never use the bf16 units."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if cpu_kernels.is_portable():
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def compute_dtype(name: str, device: torch.device) -> torch.dtype:
    """TrainConfig.dtype ("fp32" | "bf16" | "auto") -> the torch dtype the forward runs in on `device`."""
    if name == AUTO:
        name = "bf16" if bf16_is_native(device) else "fp32"
    dtype = torch_dtype(name)
    if dtype == torch.bfloat16 and device.type == "cpu" and cpu_kernels.is_portable():
        raise InputError(f"dtype {name!r} on the CPU under {cpu_kernels.MODE_VAR}=portable: bf16 runs on oneDNN "
                         f"kernels that differ between CPU kinds whatever the settings, so its results cannot be "
                         f"portable. Use --dtype fp32 (or auto), or unset {cpu_kernels.MODE_VAR}")
    return dtype


def lm_loss_sum(model: torch.nn.Module, batch: Int[Tensor, "batch n_ctx_plus_1"],
                dtype: torch.dtype = torch.float32) -> Tensor:
    """Summed next-token cross-entropy of windows [b, n_ctx + 1]: inputs batch[:, :-1], targets batch[:, 1:].

    The forward runs under bf16 autocast when dtype is bfloat16; the loss is always computed in fp32."""
    device = next(model.parameters()).device
    batch = batch.to(device, non_blocking=True)
    autocast = (torch.autocast(device.type, dtype=torch.bfloat16) if dtype == torch.bfloat16
                else contextlib.nullcontext())
    with autocast:
        logits = model(batch[:, :-1])  # [b, n_ctx, vocab]
    return next_token_loss(logits, batch, reduction="sum", fp32=True)


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer,
               micro_batches: Sequence[Int[Tensor, "micro n_ctx_plus_1"]], lr: float, grad_clip: float = 0.0,
               dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
    """One optimizer step over micro-batches (gradients accumulated); returns (mean loss, grad norm), unsynced.

    Each micro-batch's loss is the mean over its targets, / len(micro_batches), so the step's gradient is
    the batch mean. Under DDP / FSDP gradients are synchronised on the last micro-batch only
    (interp.training.parallel.grad_sync). grad_clip 0 disables clipping (the grad norm is then reported as 0)."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    n = len(micro_batches)
    loss_total = torch.zeros((), device=next(model.parameters()).device)
    for i, micro in enumerate(micro_batches):
        with grad_sync(model, enabled=i == n - 1):
            loss = lm_loss_sum(model, micro, dtype) / micro[:, 1:].numel()
            (loss / n).backward()
        loss_total += loss.detach() / n
    grad_norm = (torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
                 if grad_clip > 0 else torch.zeros(()))
    if hasattr(grad_norm, "full_tensor"):  # FSDP: a replicated DTensor
        grad_norm = grad_norm.full_tensor()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss_total, grad_norm


ADAMW_IMPLS = {"for-loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}


def make_optimizer(model: torch.nn.Module, cfg: TrainConfig, impl: str | None = None) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices (linear and embedding weights) only, not on norm gains.

    Which implementation (`impl` forces one of ADAMW_IMPLS; the choice is kept as `optimizer.impl`):
    cfg.fused_adamw -> fused where the parameters' device has the fused kernel (CUDA and, in torch 2.13, CPU;
    it rounds differently from the for-loop, ~1e-7, so it is not the default: benchmarks/RESULTS.md, bench_train
    e); else what torch itself picks for plain tensors (the for-loop on CPU, foreach on CUDA), and foreach for
    FSDP's DTensor parameters, for which torch would fall back to the for-loop (foreach is bit-identical to the
    for-loop: tests/training/test_fsdp.py)."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    if impl is None and cfg.fused_adamw:
        try:
            return _adamw(groups, cfg, "fused")
        except RuntimeError:  # "`fused=True` requires ... supported devices": the default below
            pass
    if impl is None:
        sharded = any(hasattr(p, "full_tensor") for p in params)
        impl = "foreach" if sharded or all(p.device.type == "cuda" for p in params) else "for-loop"
    return _adamw(groups, cfg, impl)


def _adamw(groups: list[dict], cfg: TrainConfig, impl: str) -> torch.optim.AdamW:
    optimizer = torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, **ADAMW_IMPLS[impl])
    optimizer.impl = impl
    return optimizer
