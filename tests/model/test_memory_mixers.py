"""Titans and Hope-attention mixers: hook identities, causality, learning, parameter parity, DDP.

Tiny models only (d_model 32, 2 layers, <= 40 tokens); chunk sizes are set small so every memory
really updates several times inside a test sequence. Run as a script under torchrun for the DDP
worker (see test_ddp_two_processes).
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import interp.model.mixers.memory as mm
from interp.model import ModelConfig, TaperedLM, param_counts
from interp.model.mixers import MIXERS
from tests.factories import random_tokens, tiny_config, tiny_lm
from tests.launch import torchrun

MEMORY_MIXERS = ("titans", "titans_lmm", "hope_attention")
# Small chunks so a 40-token sequence crosses several memory updates; the last Hope level (chunk
# 64 >= n_ctx) is the static, outer-loop-only level.
OPTIONS = {"titans": {"chunk_size": 4}, "titans_lmm": {"chunk_size": 4},
           "hope_attention": {"chunk_sizes": [4, 8, 64]}}


# These models are tiny: one intra-op thread is faster, and 20x faster on a loaded 2-core box.
pytestmark = pytest.mark.usefixtures("one_thread")


def make_cfg(mixer: str, d_mlp: list[int] | None = None, options: dict | None = None) -> ModelConfig:
    """vocab 50, d_model 32, 2 layers, n_ctx 64; the mixer's small-chunk OPTIONS unless `options` is given."""
    return tiny_config(vocab_size=50, d_mlp=d_mlp or [64, 64], n_ctx=64, mixer=mixer,
                       mixer_options=dict(OPTIONS.get(mixer, {}) if options is None else options))


tokens = functools.partial(random_tokens, 50, pos=40, seed=0)


def build(cfg: ModelConfig) -> TaperedLM:
    """Seed 0, in training mode (tests that need eval() say so)."""
    return tiny_lm(cfg=cfg, train=True)


def test_registered():
    assert set(MEMORY_MIXERS) <= set(MIXERS)


@pytest.mark.parametrize("mixer", MEMORY_MIXERS)
def test_hook_identities_and_names(mixer):
    model = build(make_cfg(mixer))
    _, cache = model.run_with_cache(tokens())
    for layer in range(2):
        b = f"blocks.{layer}."
        torch.testing.assert_close(cache[b + "hook_resid_pre"] + cache[b + "hook_attn_out"],
                                   cache[b + "hook_resid_mid"], rtol=0, atol=0)
        torch.testing.assert_close(cache[b + "hook_resid_mid"] + cache[b + "hook_mlp_out"],
                                   cache[b + "hook_resid_post"], rtol=0, atol=0)
    extra = {"titans": ["attn.hook_mem", "attn.hook_gate", "attn.hook_z"], "titans_lmm": ["attn.hook_mem"],
             "hope_attention": ["attn.hook_attn_only", "attn.cms.levels.0.hook_out", "attn.hook_z"]}[mixer]
    for name in extra:
        assert "blocks.0." + name in cache, name
    if mixer == "titans_lmm":  # the memory retrieval is the whole mixer output
        torch.testing.assert_close(cache["blocks.0.attn.hook_mem"], cache["blocks.0.hook_attn_out"])


@pytest.mark.parametrize("mixer", MEMORY_MIXERS)
def test_causal(mixer):
    """Changing token t leaves logits before t unchanged and changes logits at t (mid-chunk t)."""
    model = build(make_cfg(mixer)).eval()
    tok = tokens(pos=40)
    for t in (13, 26):
        changed = tok.clone()
        changed[:, t] = (changed[:, t] + 1) % 50
        with torch.no_grad():
            a, b = model(tok), model(changed)
        assert torch.equal(a[:, :t], b[:, :t]), f"{mixer}: position < {t} saw token {t}"
        assert not torch.allclose(a[:, t:], b[:, t:])


@pytest.mark.parametrize("mixer", MEMORY_MIXERS)
def test_memory_reads_earlier_chunks(mixer):
    """The memory path itself carries information across chunks (not only the attention path)."""
    model = build(make_cfg(mixer)).eval()
    site = {"titans": "blocks.0.attn.hook_mem", "titans_lmm": "blocks.0.attn.hook_mem",
            "hope_attention": "blocks.0.attn.cms.levels.0.hook_out"}[mixer]
    tok = tokens(pos=24)
    changed = tok.clone()
    changed[:, 1] = (changed[:, 1] + 1) % 50
    with torch.no_grad():
        _, a = model.run_with_cache(tok, names_filter=site)
        _, b = model.run_with_cache(changed, names_filter=site)
    late = slice(16, 24)  # several chunks after the change
    assert not torch.allclose(a[site][:, late], b[site][:, late])


@pytest.mark.parametrize("mixer", MEMORY_MIXERS)
def test_gradients_reach_every_trainable_parameter(mixer):
    model = build(make_cfg(mixer))
    model(tokens(), return_type="loss").backward()
    missing = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert not missing
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


@pytest.mark.parametrize("mixer", MEMORY_MIXERS)
def test_loss_decreases(mixer):
    model = build(make_cfg(mixer))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    tok = tokens(batch=2, pos=16)
    losses = []
    for _ in range(20):
        loss = model(tok, return_type="loss")
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0], losses


@pytest.mark.parametrize("mixer", MEMORY_MIXERS)
def test_param_counts_analytic_and_taper_neutral(mixer):
    uniform, tapered = make_cfg(mixer, d_mlp=[64, 64]), make_cfg(mixer, d_mlp=[96, 32])
    for cfg in (uniform, tapered):
        assert param_counts(cfg)["total"] == sum(p.numel() for p in build(cfg).parameters())
    assert param_counts(uniform)["total"] == param_counts(tapered)["total"]
    assert [r["mixer"] for r in param_counts(uniform)["per_layer"]] == \
           [r["mixer"] for r in param_counts(tapered)["per_layer"]]


@pytest.mark.parametrize("options", [{"heads": 1, "chunk_size": 8}, {"depth": 3, "expansion": 2.0},
                                     {"momentum": False, "heads": 2}])
def test_titans_param_formula_other_shapes(options):
    cfg = make_cfg("titans", options=options)
    mixer = MIXERS["titans"](cfg, 0)
    assert MIXERS["titans"].n_params(cfg, 0) == sum(p.numel() for p in mixer.parameters())


def test_flops_exceed_plain_attention():
    for mixer in ("titans", "hope_attention"):
        cfg = make_cfg(mixer)
        mem = MIXERS[mixer].forward_flops(cfg, 0, 40)
        plain = MIXERS["attention"].forward_flops(cfg, 0, 40)
        assert mem.attention_scores == plain.attention_scores and mem.dense > plain.dense


def test_mixer_options_errors_name_the_field():
    with pytest.raises(ValueError, match="chunk_sise"):
        build(make_cfg("hope_attention", options={"chunk_sise": [4]}))
    with pytest.raises(ValueError, match="chunk_size"):
        build(make_cfg("titans", options={"chunk_size": 0}))
    with pytest.raises(ValueError, match="heads"):
        build(make_cfg("titans", options={"heads": 3}))


# ---- CMS level against an independent, autograd-based reference -------------------------------

def _reference_level(level: mm.CMSLevel, u: torch.Tensor) -> torch.Tensor:
    """Per sequence, per chunk: read with the current weights, then W <- W - autograd grad of
    mean_t eta_t * mean_d (W2 silu(W1 k_t) - v_t)^2 over the chunk (what CMSLevel writes in closed form)."""
    out = []
    for seq in u:
        k = F.rms_norm(seq, (seq.shape[-1],), eps=level.norm.eps) * level.norm.weight
        v = k @ level.value.weight.T
        eta = level.lr_max * torch.sigmoid(k @ level.lr.weight.T + level.lr.bias)
        w1, w2 = level.up.weight.clone(), level.down.weight.clone()
        pieces = []
        for start in range(0, seq.shape[0], level.chunk_size):
            sl = slice(start, start + level.chunk_size)
            w1, w2 = w1.detach().requires_grad_(), w2.detach().requires_grad_()
            read = F.silu(k[sl] @ w1.T) @ w2.T
            pieces.append(read.detach())
            loss = (eta[sl, 0] * ((read - v[sl]) ** 2).mean(-1)).mean()
            g1, g2 = torch.autograd.grad(loss, (w1, w2))
            w1, w2 = w1 - g1, w2 - g2
        out.append(seq + torch.cat(pieces))
    return torch.stack(out)


def test_cms_level_matches_autograd_reference():
    torch.manual_seed(0)
    opts = mm.HopeOptions(chunk_sizes=(5,), lr_max=1.0, lr_bias_init=0.0)
    level = mm.CMSLevel(d_model=12, hidden=10, chunk_size=5, opts=opts, eps=1e-6)
    with torch.no_grad():  # weights big enough that the inner steps change the reads visibly
        for lin in (level.up, level.down, level.value):
            lin.weight.normal_(0, 1.5)
    u = torch.randn(2, 17, 12)  # 17 = 3 full chunks + a partial one
    with torch.no_grad():
        got = level(u)
        static = u + level.down(F.silu(level.up(level.norm(u))))
    torch.testing.assert_close(got, _reference_level(level, u), rtol=1e-5, atol=1e-5)
    assert not torch.allclose(got[:, 5:], static[:, 5:], atol=1e-3)  # the updates matter...
    torch.testing.assert_close(got[:, :5], static[:, :5])             # ...and only after chunk 0


def test_cms_static_level_when_chunk_exceeds_context():
    cfg = make_cfg("hope_attention", options={"chunk_sizes": [4, 64]})
    levels = MIXERS["hope_attention"](cfg, 0).cms.levels
    assert [lvl.adaptive for lvl in levels] == [True, False]
    assert not hasattr(levels[1], "value")


# ---- DDP (gloo, 2 processes) --------------------------------------------------------------------

def _ddp_worker() -> None:
    """torchrun entry: 3 AdamW steps per mixer on rank-specific data; parameters must agree across ranks."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    # chunk 48 < n_ctx but > the 33-token sequence: the single-chunk case must still give DDP grads.
    options = {**OPTIONS, "hope_attention": {"chunk_sizes": [4, 48, 64]}}
    for mixer in MEMORY_MIXERS:
        model = DistributedDataParallel(build(make_cfg(mixer, options=options[mixer])))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        for step in range(3):
            loss = model(tokens(pos=33, seed=10 * step + rank), return_type="loss")
            opt.zero_grad()
            loss.backward()
            opt.step()
        flat = torch.cat([p.detach().flatten() for p in model.module.parameters()])
        ref = flat.clone()
        dist.broadcast(ref, 0)
        assert torch.equal(flat, ref), f"{mixer}: ranks diverged"
        print(f"DDP_OK {mixer} rank={rank}", flush=True)
    dist.barrier()  # see interp._util.dist.Distributed.close: no rank leaves while a peer is in flight
    dist.destroy_process_group()


@pytest.mark.integration
def test_ddp_two_processes():
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo), "OMP_NUM_THREADS": "1"}
    proc = torchrun([str(Path(__file__).resolve())], env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.count("DDP_OK") == 2 * len(MEMORY_MIXERS)


if __name__ == "__main__":
    _ddp_worker()


@pytest.mark.parametrize("mixer", ["titans", "hope_attention"])
def test_checkpoint_validates_in_a_fresh_process(mixer, tmp_path):
    """Validation builds the model on the meta device; for Titans that used to be the first import of
    titans_pytorch, whose tensordict calls .item() at import time and failed on meta tensors, so a Titans
    checkpoint could not be probed (`interp batch runs/`) by any new process."""
    from interp.training.checkpoints import save_checkpoint

    save_checkpoint(tmp_path, TaperedLM(make_cfg(mixer)), {"label": mixer})
    code = ("import sys; from interp.training.checkpoints import validate_checkpoint, load_checkpoint; "
            "validate_checkpoint(sys.argv[1]); load_checkpoint(sys.argv[1]); print('ok')")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
