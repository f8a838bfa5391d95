"""How the model runs: its decoder blocks (activation checkpointing, torch.compile) and its ranks (DDP or FSDP2).

    model = wrap_model(raw, cfg, dist, dtype)   # what train_step runs; `raw` stays the TaperedLM
    with grad_sync(model, enabled=last_micro_batch): loss.backward()
    weights = host_copy(model, raw.cfg, into)    # the full weights on rank 0 (a collective under FSDP)

What each option does, and why this way (docs/scale.md has the user-facing version):
- Blocks are changed by giving each `model.blocks[i]` an instance `forward` (checkpointed, compiled, or both),
  never by wrapping it in another module: parameter names, state dicts, HookPoint names and every reader of a
  checkpoint stay exactly as without the options, and FSDP's hooks (which nn.Module.__call__ runs around
  `forward`) stay outside the compiled code.
- activation_checkpointing: torch.utils.checkpoint(use_reentrant=False) per block: the block's activations are
  recomputed in backward; gradients are bit-identical on CPU (tests/training/test_fsdp.py).
- compile: torch.compile of each block's forward (and of its checkpointed form); the embedding, final norm,
  unembedding and loss stay eager. A tapered model has one MLP width per layer and dynamo specialises on
  parameter shapes, so there is one graph per distinct width: the recompile limit is raised to that count
  (a process-wide dynamo setting, only ever raised). `eager()` runs compiled blocks eagerly (evaluation).
- ddp: DistributedDataParallel, gradients all-reduced on the last micro-batch (`no_sync` before it).
- fsdp: FSDP2 `fully_shard` on every block, then on the root (embedding, final norm, unembedding); with
  dtype bf16 a MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32): parameters all-gathered and
  computed in bf16, gradients reduce-scattered in fp32, fp32 sharded master weights for AdamW. Gradient
  reduce-scatter is skipped before the last micro-batch (set_requires_gradient_sync). Each rank builds the
  full model first (same seed), then shards it: fine to 1.3B on a GPU; a larger model would need meta-device
  init. Train states are sharded (interp.training.sharded).
One process (no torchrun) trains the plain module whatever `parallel` says.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from interp._util.dist import Distributed


def prepare_blocks(model: nn.Module, *, checkpointing: bool, compile: bool) -> None:
    """Give every block of `model.blocks` its checkpointed and/or compiled forward (in place; once)."""
    if not (checkpointing or compile):
        return
    blocks = list(model.blocks)
    for block in blocks:
        if "forward" in vars(block):
            raise RuntimeError("prepare_blocks: the blocks already have their own forward (prepared twice?)")
        forward: Callable[..., Any] = block.forward
        if checkpointing:
            forward = _checkpointed(forward)
        if compile:
            forward = torch.compile(forward)
        block.forward = forward
    if compile:
        shapes = {tuple(tuple(p.shape) for p in block.parameters()) for block in blocks}
        _raise_recompile_limit(len(shapes) + 1)


def _checkpointed(forward: Callable[..., Any]) -> Callable[..., Any]:
    from torch.utils.checkpoint import checkpoint

    def run(*args: Any, **kwargs: Any) -> Any:
        return checkpoint(forward, *args, use_reentrant=False, **kwargs)

    return run


def _raise_recompile_limit(n: int) -> None:
    """Room for n more graphs of the block forward. Dynamo's limit counts every graph of that code compiled in
    this process, earlier models' included (a benchmark or notebook that compiles a uniform model and then a
    24-width taper), so the limit grows by n per prepared model; setting it to n let a second model's blocks
    fall back to eager past the limit, silently."""
    import torch._dynamo.config as dynamo_config

    name = "recompile_limit" if hasattr(dynamo_config, "recompile_limit") else "cache_size_limit"
    setattr(dynamo_config, name, getattr(dynamo_config, name) + n)
    if hasattr(dynamo_config, "accumulated_recompile_limit"):  # the cap over all code, same reason
        dynamo_config.accumulated_recompile_limit += n


def eager() -> contextlib.AbstractContextManager:
    """Run torch.compile'd code eagerly inside the block (no compilation): used for evaluation."""
    return torch.compiler.set_stance("force_eager")


def mixed_precision(dtype: torch.dtype):
    """FSDP2's policy for a compute dtype: bf16 params with fp32 gradient reduction, or none (fp32)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if dtype == torch.bfloat16:
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    return MixedPrecisionPolicy()


def wrap_model(raw: nn.Module, parallel: str, dist: Distributed, dtype: torch.dtype, *,
               checkpointing: bool = False, compile: bool = False, even_one_rank: bool = False) -> nn.Module:
    """The module train_step runs: `raw` with prepared blocks, then DDP-wrapped or fully_shard-ed (in place)
    under a process group of more than one rank; `raw` itself with one process (or, with even_one_rank and a
    1-rank process group, wrapped all the same: benchmarks/bench_gpu_scale.py measures FSDP's own cost so).
    Build the optimizer after this (FSDP replaces the parameters by sharded DTensors)."""
    prepare_blocks(raw, checkpointing=checkpointing, compile=compile)
    if dist.world_size == 1 and not (even_one_rank and dist.group):
        return raw
    device = next(raw.parameters()).device
    if parallel == "fsdp":
        from torch.distributed.fsdp import fully_shard

        policy = mixed_precision(dtype)
        for block in raw.blocks:
            fully_shard(block, mp_policy=policy)
        fully_shard(raw, mp_policy=policy)
        return raw
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(raw, device_ids=[dist.local_rank] if device.type == "cuda" else None)


def is_sharded(model: nn.Module) -> bool:
    """Whether `model` is FSDP2-sharded (its state dicts are then DTensors: collectives to gather)."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


@contextlib.contextmanager
def grad_sync(model: nn.Module, enabled: bool) -> Iterator[None]:
    """Inside: backward passes synchronise gradients across ranks only if `enabled` (DDP no_sync, FSDP
    set_requires_gradient_sync); a plain module ignores it."""
    from torch.nn.parallel import DistributedDataParallel

    if enabled:
        yield
    elif isinstance(model, DistributedDataParallel):
        with model.no_sync():
            yield
    elif is_sharded(model):
        model.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            model.set_requires_gradient_sync(True)
    else:
        yield


def host_copy(model: nn.Module, raw: nn.Module, into: nn.Module | None, dist: Distributed) -> nn.Module | None:
    """A plain CPU module holding the full weights, on rank 0 (None on other ranks); every rank must call it
    under FSDP (the shards are gathered). Without sharding that is `raw` itself. `into` (an earlier result)
    is refilled rather than allocating a second copy."""
    if not is_sharded(model):
        return raw
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if not dist.primary:
        return None
    if into is None:
        from interp.model import TaperedLM

        with torch.device("meta"):  # no init cost; to_empty keeps tied weights tied
            into = TaperedLM(raw.cfg)
        into.to_empty(device="cpu")
        with torch.no_grad():  # buffers outside the state dict (RoPE tables) are not sharded: copy them
            for (name, mine), (other, theirs) in zip(into.named_buffers(), raw.named_buffers(), strict=True):
                assert name == other, (name, other)
                mine.copy_(theirs)
    into.load_state_dict(full)
    return into


def describe(model: nn.Module, optimizer: torch.optim.Optimizer, *, checkpointing: bool, compile: bool) -> dict:
    """What ran, for result.json: how ranks share the model, what was compiled / checkpointed, which AdamW."""
    from torch.nn.parallel import DistributedDataParallel

    parallel = "fsdp" if is_sharded(model) else "ddp" if isinstance(model, DistributedDataParallel) else "none"
    return {"parallel": parallel, "compiled": "decoder blocks" if compile else "nothing",
            "activation_checkpointing": "decoder blocks" if checkpointing else "none",
            "adamw": getattr(optimizer, "impl", "torch default")}
