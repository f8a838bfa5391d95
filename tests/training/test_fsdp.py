"""Training at scale on CPU (issue #15 part 2): FSDP2, activation checkpointing, torch.compile, fused AdamW,
sharded (DCP) train states, the paper presets' dry runs; 2 gloo processes where ranks matter.

Multi-process tests use real processes: `torchrun ... -m interp.cli.train` (the user's entry point), or one
torch.multiprocessing spawn of 2 ranks that runs several Trainers in a row (`_worker`: one process group,
set up once, so each run costs seconds, not a fresh interpreter). Nothing here needs a GPU; what only a GPU
can test (nccl, bf16 mixed precision on GPU kernels, MFU) is listed in docs/scale.md.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from interp._util.io import FAULT_ENV
from interp._util.paths import CONFIG_FILE, REPO_ROOT, RESULT_FILE, WEIGHTS_FILE
from interp.training import TrainConfig, Trainer
from interp.training.checkpoints import load_checkpoint, load_train_state, validate_checkpoint
from interp.training.presets import PRESETS, dry_run
from tests.factories import random_tokens, tiny_config, tiny_lm, write_corpus
from tests.launch import free_port, torchrun

PYTHON = sys.executable
VOCAB = PRESETS["micro"]["vocab_size"]
PAPER_PRESETS = ("440m", "760m", "1.3b")


@pytest.fixture(scope="module")
def env(tmp_path_factory, module_cache):
    """(corpus, TokenData, cache dir): a 40-document synthetic corpus and its micro BPE tokens, built once."""
    from interp.data import prepare_tokens

    corpus = write_corpus(tmp_path_factory.mktemp("fsdp") / "corpus", n_docs=40, sentences=60)
    return corpus, prepare_tokens(str(corpus), "bpe", VOCAB, val_fraction=0.25), module_cache


def micro(env, out: Path, **overrides) -> TrainConfig:
    return TrainConfig.from_preset("micro", source=str(env[0]), val_fraction=0.25, out_dir=str(out), threads=1,
                                   log_interval=1, **overrides)


def weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(str(run_dir / WEIGHTS_FILE))


def same(a: Path, b: Path) -> bool:
    wa, wb = weights(a), weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def close(a: Path, b: Path, atol: float) -> None:
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    for name in wa:
        torch.testing.assert_close(wa[name], wb[name], rtol=0, atol=atol, msg=name)


def losses(run_dir: Path) -> list[float]:
    return [r["loss"] for r in map(json.loads, (run_dir / "log.jsonl").read_text().splitlines())
            if r["kind"] == "train"]


# ------------------------------------------------------------------------------------------ one process

def grads(model: torch.nn.Module, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    model(tokens, return_type="loss").backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}


def test_activation_checkpointing_gives_identical_gradients():
    from interp.training.parallel import prepare_blocks

    tokens = random_tokens(64, batch=4, pos=32)
    plain, ckpt = tiny_lm(train=True), tiny_lm(train=True)  # same seed: same weights
    names = (list(ckpt.state_dict()), sorted(ckpt.hook_dict))
    prepare_blocks(ckpt, checkpointing=True, compile=False)
    assert (list(ckpt.state_dict()), sorted(ckpt.hook_dict)) == names  # no wrapper module: names unchanged
    ga, gb = grads(plain, tokens), grads(ckpt, tokens)
    assert ga.keys() == gb.keys() and all(torch.equal(ga[n], gb[n]) for n in ga)  # bit-identical
    # ... and the recompute really happens: the blocks' MLP runs twice per step (a pre-hook: the recompute
    # stops as soon as the tensors backward needs exist, before the MLP's own forward hook would run)
    calls = []
    ckpt.blocks[0].mlp.register_forward_pre_hook(lambda *a: calls.append(1))
    grads(ckpt, tokens)
    assert len(calls) == 2
    with pytest.raises(RuntimeError, match="prepared twice"):
        prepare_blocks(ckpt, checkpointing=True, compile=False)


def test_adamw_implementations(env, tmp_path):
    """foreach is bit-identical to torch's for-loop (so choosing it changes no number); fused is not (~1e-7),
    which is why it is opt-in; fused=True is available on this CPU under torch 2.13."""
    from interp.training import make_optimizer

    cfg = micro(env, tmp_path)
    tokens = random_tokens(64, batch=4, pos=32)
    final = {}
    for impl in ("for-loop", "foreach", "fused"):
        model = tiny_lm(train=True)
        optimizer = make_optimizer(model, cfg, impl=impl)
        assert optimizer.impl == impl and optimizer.defaults["foreach" if impl != "fused" else "fused"] == (
            impl != "for-loop")
        for _ in range(3):
            grads(model, tokens)
            optimizer.step()
        final[impl] = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert make_optimizer(tiny_lm(), cfg).impl == "for-loop"  # torch's own choice on CPU: no number changes
    assert make_optimizer(tiny_lm(), cfg.with_overrides(fused_adamw=True)).impl == "fused"  # CPU has the kernel
    assert torch.equal(final["foreach"], final["for-loop"])
    assert not torch.equal(final["fused"], final["for-loop"])
    torch.testing.assert_close(final["fused"], final["for-loop"], rtol=0, atol=1e-6)


def test_options_reach_the_cli_and_old_runs_stay_resumable():
    from interp.cli import build_parser
    from interp.cli.train import config_from_args
    from interp.training.config import config_diff

    args = build_parser().parse_args(["train", "--out", "r", "--parallel", "fsdp", "--activation-checkpointing",
                                      "--compile", "--fused-adamw"])
    cfg = config_from_args(args)
    assert (cfg.parallel, cfg.activation_checkpointing, cfg.compile, cfg.fused_adamw) == ("fsdp", True, True, True)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--out", "r", "--parallel", "zero"])
    with pytest.raises(ValueError, match=r"TrainConfig\.parallel='zero' \(--parallel\)"):
        TrainConfig(parallel="zero").validate()
    # a run directory written before these options existed: missing fields are their defaults, not a difference
    old = json.loads(json.dumps(TrainConfig().to_dict()))
    for name in ("parallel", "activation_checkpointing", "compile", "fused_adamw"):
        del old[name]
    assert config_diff(old, TrainConfig()) == []
    assert config_diff(old, TrainConfig(parallel="fsdp")) == ["parallel: 'ddp' -> 'fsdp'"]


def test_sharded_state_in_one_process_resumes_exactly_and_consolidates(env, tmp_path):
    """parallel=fsdp without torchrun: the plain model, but its train state through DCP (no process group),
    so the same run can later continue on any number of ranks."""
    from interp.training import consolidate

    straight, split = micro(env, tmp_path / "straight", parallel="fsdp"), micro(env, tmp_path / "split", parallel="fsdp")
    Trainer(straight, data=env[1]).run()
    half = Trainer(split, data=env[1]).run(stop_at=4)
    state = load_train_state(tmp_path / "split")
    assert half["step"] == 4 and state["sharded"] == "train_state.dcp/step_000004" and "model" not in state
    assert sorted(p.name for p in (tmp_path / "split" / "train_state.dcp").iterdir()) == ["step_000004"]
    Trainer(split.with_overrides(resume=True), data=env[1]).run()
    assert same(tmp_path / "straight", tmp_path / "split") and losses(tmp_path / "straight") == losses(tmp_path / "split")
    assert sorted(p.name for p in (tmp_path / "split" / "train_state.dcp").iterdir()) == ["step_000008"]
    # a single-process consolidation of the sharded state = the weights the run gathered at its final save
    out = consolidate(tmp_path / "split", tmp_path / "consolidated")
    assert same(out, tmp_path / "split") and validate_checkpoint(out)["step"] == 8


@pytest.mark.slow  # compiling two block shapes: ~60 s with a cold inductor cache (6 s warm)
def test_compiled_blocks_match_eager(env, tmp_path):
    from torch._dynamo.utils import counters

    from interp.training.parallel import eager, prepare_blocks

    tokens = random_tokens(64, batch=4, pos=32)
    cfg = tiny_config(d_mlp=[96, 32])  # two widths: two graphs
    plain, compiled = tiny_lm(cfg=cfg, train=True), tiny_lm(cfg=cfg, train=True)
    names = list(compiled.state_dict())
    counters.clear()
    prepare_blocks(compiled, checkpointing=True, compile=True)
    ga, gb = grads(plain, tokens), grads(compiled, tokens)
    assert counters["stats"]["unique_graphs"] >= 2 and list(compiled.state_dict()) == names
    for name in ga:
        torch.testing.assert_close(gb[name], ga[name], rtol=1e-4, atol=1e-6, msg=name)
    graphs = counters["stats"]["unique_graphs"]
    with torch.no_grad(), eager():
        torch.testing.assert_close(compiled(tokens), plain(tokens), rtol=0, atol=1e-5)
    assert counters["stats"]["unique_graphs"] == graphs  # evaluation compiled nothing
    # through the Trainer: the same run, compiled and eager, reach the same weights
    Trainer(micro(env, tmp_path / "eager", steps=3), data=env[1]).run()
    result = Trainer(micro(env, tmp_path / "compiled", steps=3, compile=True), data=env[1]).run()
    assert result["compiled"] == "decoder blocks"
    close(tmp_path / "compiled", tmp_path / "eager", atol=1e-5)


def test_recompile_limit_makes_room_for_every_prepared_model(monkeypatch):
    """Each compiled model adds its block shapes to dynamo's limit, on top of the graphs earlier models hold
    (found by bench_gpu_scale: a 24-width taper compiled after a uniform model hit the limit and its last
    blocks ran eagerly)."""
    import torch._dynamo.config as dynamo_config

    from interp.training.parallel import prepare_blocks

    name = "recompile_limit" if hasattr(dynamo_config, "recompile_limit") else "cache_size_limit"
    monkeypatch.setattr(dynamo_config, name, 8)
    if hasattr(dynamo_config, "accumulated_recompile_limit"):
        monkeypatch.setattr(dynamo_config, "accumulated_recompile_limit", 256)
    prepare_blocks(tiny_lm(cfg=tiny_config(d_mlp=[96, 32])), checkpointing=False, compile=True)
    assert getattr(dynamo_config, name) == 8 + 3
    prepare_blocks(tiny_lm(cfg=tiny_config(d_mlp=[64, 48, 16])), checkpointing=False, compile=True)
    assert getattr(dynamo_config, name) == 8 + 3 + 4  # not max(11, 4): the first model's graphs stay counted
    if hasattr(dynamo_config, "accumulated_recompile_limit"):
        assert dynamo_config.accumulated_recompile_limit == 256 + 7


# --------------------------------------------------------------------------------------- two processes

def _worker(rank: int, world: int, port: int, corpus: str, cache: str, runs: list[tuple[str, dict, int | None]]):
    """One rank of a spawned 2-rank gloo group: every (out_dir, TrainConfig overrides, stop_at) in turn."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), INTERP_CACHE_DIR=cache)
    import torch.distributed as tdist

    from interp.data import prepare_tokens

    torch.set_num_threads(1)
    tdist.init_process_group("gloo")  # the Trainers join it (Distributed.from_env) and leave it up
    try:
        data = prepare_tokens(corpus, "bpe", VOCAB, val_fraction=0.25)
        for out, overrides, stop_at in runs:
            preset = overrides.pop("preset", "micro")
            cfg = TrainConfig.from_preset(preset, **{"source": corpus, "val_fraction": 0.25, "threads": 1,
                                                     "log_interval": 1, **overrides, "out_dir": out})
            Trainer(cfg, data=data).run(stop_at=stop_at)
    finally:
        tdist.barrier()
        tdist.destroy_process_group()


def spawn(env, runs: list[tuple[Path, dict, int | None]]) -> None:
    import torch.multiprocessing as mp

    jobs = [(str(out), dict(overrides), stop_at) for out, overrides, stop_at in runs]
    mp.start_processes(_worker, args=(2, free_port(), str(env[0]), str(env[2]), jobs), nprocs=2,
                       start_method="spawn")


@pytest.mark.integration  # ~12-16 s on 2 lightly loaded cores (7 runs of 2 ranks + 3 single-process runs)
def test_fsdp_two_ranks(env, tmp_path):
    """Under 2 gloo ranks: FSDP = one process (to float reduction order); activation checkpointing changes no
    bit; a stopped run resumes bit-identically and also on ONE process (DCP reshards); bf16 mixed precision
    and fused AdamW run on DTensors."""
    base = {"steps": 4, "grad_accum": 2, "parallel": "fsdp"}  # 2 micro-batches: the reduce-scatter is deferred once
    spawn(env, [(tmp_path / "fsdp", base, None),
                (tmp_path / "fsdp-ac", {**base, "activation_checkpointing": True}, None),
                (tmp_path / "split", base, 2), (tmp_path / "split", {**base, "resume": True}, None),
                (tmp_path / "to-one", base, 2),
                (tmp_path / "bf16", {**base, "dtype": "bf16"}, None),
                (tmp_path / "fused", {**base, "fused_adamw": True}, None)])
    Trainer(micro(env, tmp_path / "single", steps=4, grad_accum=2), data=env[1]).run()
    result = json.loads((tmp_path / "fsdp" / RESULT_FILE).read_text())
    assert (result["world_size"], result["parallel"], result["adamw"]) == (2, "fsdp", "foreach")
    assert "rank_param_sha256" not in result  # FSDP ranks hold different shards by design
    close(tmp_path / "fsdp", tmp_path / "single", atol=1e-5)
    assert not torch.equal(weights(tmp_path / "single")["embed.weight"],
                           tiny_lm(0, micro(env, tmp_path).model_config(env[1].vocab_size)).embed.weight)
    assert same(tmp_path / "fsdp-ac", tmp_path / "fsdp")
    assert same(tmp_path / "split", tmp_path / "fsdp") and losses(tmp_path / "split") == losses(tmp_path / "fsdp")
    # the 2-rank state at step 2, resumed by one process: the model is whole again, the run continues
    Trainer(micro(env, tmp_path / "to-one", **base, resume=True), data=env[1]).run()
    close(tmp_path / "to-one", tmp_path / "fsdp", atol=1e-5)
    bf16 = json.loads((tmp_path / "bf16" / RESULT_FILE).read_text())
    single_bf16 = Trainer(micro(env, tmp_path / "single-bf16", steps=4, grad_accum=2, dtype="bf16"),
                          data=env[1]).run()
    assert bf16["dtype"] == "bfloat16" and all(w.dtype == torch.float32 for w in weights(tmp_path / "bf16").values())
    assert bf16["val_loss"] == pytest.approx(single_bf16["val_loss"], abs=0.05)  # bf16 params vs autocast
    fused = json.loads((tmp_path / "fused" / RESULT_FILE).read_text())
    assert fused["adamw"] == "fused"
    close(tmp_path / "fused", tmp_path / "fsdp", atol=1e-5)


@pytest.mark.integration  # ~12-16 s on 2 lightly loaded cores (6 runs of 2 ranks)
def test_paper_presets_dry_run_under_ddp_and_fsdp(env, tmp_path):
    """Each paper preset, shape shrunk (presets.dry_run) and every other field as it is (bf16, AdamW betas,
    clip, decay, grad_accum > 1, the cosine taper), trains a few steps through the Trainer under 2 ranks."""
    runs = [(tmp_path / f"{name}-{mode}", {"preset": name, **dry_run(name), "parallel": mode, "schedule": "cosine",
                                          "start": 1.5, "end": 0.5}, None)
            for name in PAPER_PRESETS for mode in ("ddp", "fsdp")]
    spawn(env, runs)
    for out, overrides, _ in runs:
        result = json.loads((out / RESULT_FILE).read_text())
        train = json.loads((out / "config.json").read_text())["train"]
        preset = PRESETS[overrides["preset"]]
        assert result["status"] == "done" and result["world_size"] == 2 and result["parallel"] == overrides["parallel"]
        assert math.isfinite(result["val_loss"]) and result["dtype"] == "bfloat16"
        for field in ("lr", "min_lr", "weight_decay", "grad_clip", "dtype", "tokenizer"):  # the preset's own
            assert train[field] == preset[field], field
        assert len(set(result["widths"])) == 4  # tapered: uneven shards
        validate_checkpoint(out)
        assert ("sharded" in load_train_state(out)) == (overrides["parallel"] == "fsdp")


@pytest.mark.integration
def test_fsdp_cli_run_is_read_by_the_toolkit(env, tmp_path):
    """`torchrun -m interp.cli.train --parallel fsdp`: its model.safetensors (gathered on rank 0) is an ordinary
    checkpoint: it loads, probes, and exports to a Hugging Face folder with the same logits."""
    from interp.hf import resolve_model
    from interp.hf.adapters import unwrap
    from interp.hf.export import export_hf
    from interp.probes import probe

    out = tmp_path / "fsdp"
    proc = torchrun(["-m", "interp.cli.train", "--preset", "micro", "--source", str(env[0]), "--set",
                     "val_fraction=0.25", "--threads", "1", "--steps", "3", "--parallel", "fsdp", "--out", str(out)])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert json.loads((out / RESULT_FILE).read_text())["parallel"] == "fsdp"
    model, _ = load_checkpoint(out)
    table = probe(str(out), tokens=256, seq_len=32)
    assert sorted(table.layer.unique()) == [0, 1]
    hf_dir = export_hf(out, tmp_path / "hf")
    exported = resolve_model(hf_dir).load()
    tokens = random_tokens(env[1].vocab_size, batch=2, pos=16)
    with torch.no_grad():
        torch.testing.assert_close(unwrap(exported.model)(tokens).logits, model.eval()(tokens), rtol=1e-5, atol=1e-5)


def torchrun_train(env, out: Path, *extra: str, fault: str | None = None) -> subprocess.CompletedProcess:
    environ = {**os.environ, "OMP_NUM_THREADS": "1"}
    environ.pop(FAULT_ENV, None)
    if fault:
        environ[FAULT_ENV] = fault
    return torchrun(["-m", "interp.cli.train", "--preset", "micro", "--source", str(env[0]), "--set",
                     "val_fraction=0.25", "--threads", "1", "--steps", "8", "--ckpt-interval", "2", "--log-interval",
                     "1", "--keep-step-checkpoints", "--parallel", "fsdp", "--out", str(out), *extra], env=environ)


@pytest.mark.integration
@pytest.mark.slow  # four torchrun launches: ~40 s
def test_fsdp_kills_inside_sharded_saves_resume_to_the_uninterrupted_run(env, tmp_path):
    """kill -9 (INTERP_FAULT) of rank 0 just before a sharded folder is renamed into place, then just before the
    train_state.pt that would name it: each resume continues from the last committed state and the run ends
    bit-identical to an uninterrupted one, with one sharded folder left."""
    ref, run = tmp_path / "straight", tmp_path / "killed"
    proc = torchrun_train(env, ref)
    assert proc.returncode == 0, proc.stderr[-4000:]
    dcp = run / "train_state.dcp"
    # 1. killed before train_state.dcp/.step_000004.tmp becomes step_000004: the state still names step 2
    proc = torchrun_train(env, run, fault="replace train_state.dcp/step_000004")
    assert proc.returncode != 0 and load_train_state(run)["step"] == 2, proc.stderr[-4000:]
    assert "Signal 9 (SIGKILL)" in proc.stderr  # the fault point, not some other failure
    assert sorted(p.name for p in dcp.iterdir()) == [".step_000004.tmp", "step_000002"]
    # 2. resumed (the temporary swept), killed after step_000004 is complete but before train_state.pt names it
    proc = torchrun_train(env, run, "--resume", fault="replace */train_state.pt")
    assert proc.returncode != 0 and load_train_state(run)["step"] == 2, proc.stderr[-2000:]
    assert sorted(p.name for p in dcp.iterdir()) == ["step_000002", "step_000004"]
    # 3. resumed from step 2 again (the unnamed step_000004 is rewritten): the uninterrupted run, bit for bit
    proc = torchrun_train(env, run, "--resume")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert same(ref, run) and losses(ref) == losses(run)
    assert sorted(p.name for p in dcp.iterdir()) == ["step_000008"]
    for step in ("step_000002", "step_000004", "step_000006", "step_000008"):
        assert same(ref / "checkpoints" / step, run / "checkpoints" / step), step
    assert load_train_state(run)["sharded"] == "train_state.dcp/step_000008"
    assert [r["step"] for r in json.loads((run / CONFIG_FILE).read_text())["resumed"]] == [2, 2]


def test_one_rank_group_is_seen_by_distributed():
    """A live 1-rank group (what bench_gpu_scale makes so FSDP really shards) is reported as one; before this
    was checked, from_env said 'no group' at world size 1 and the benchmark measured the unwrapped module."""
    code = ("import sys; from interp._util.dist import Distributed; assert 'torch' not in sys.modules; "
            "assert not Distributed.from_env().group; "
            "import torch.distributed as t; t.init_process_group('gloo', init_method='tcp://127.0.0.1:0', "
            "rank=0, world_size=1); d = Distributed.from_env(); assert d.group and d.world_size == 1 and "
            "not d.created; t.destroy_process_group(); assert not Distributed.from_env().group; print('ok')")
    proc = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, check=False,
                          env={**os.environ, "WORLD_SIZE": "1"})
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


def test_gpu_benchmark_path_runs_on_cpu():
    """bench_gpu_scale's own code path, shrunk (--quick: the 440m preset's dry-run shape) under a 1-rank gloo
    group: each variant trains through the wrapper it names, and all train the same model. ddp+compile is left out
    here (CI time: its compilation alone is ~30 s on 2 cores); compile under DDP-free blocks is checked against eager
    by test_compiled_blocks_match_eager, and the GPU study runs all four."""
    proc = subprocess.run([PYTHON, "benchmarks/bench_gpu_scale.py", "--device", "cpu", "--quick", "--threads", "1",
                           "--variants", "ddp,fsdp,fsdp+compile"],
                          capture_output=True, text=True, cwd=REPO_ROOT, check=False, timeout=1800,
                          env={k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "MASTER_PORT")})
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = {}
    for line in proc.stdout.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| uniform |"):
            rows[cells[1]] = cells
    assert set(rows) == {"ddp", "fsdp", "fsdp+compile"}, proc.stdout[-3000:]
    for variant, cells in rows.items():
        assert cells[-2] == ("FSDPTaperedLM" if variant.startswith("fsdp") else "DistributedDataParallel"), cells
        assert cells[-3] == "fused" and float(cells[2].replace(",", "")) > 0, cells
    losses = [float(cells[-1]) for cells in rows.values()]
    assert all(math.isfinite(x) for x in losses) and max(losses) - min(losses) < 0.05, losses
    assert "dry-run shape (--quick)" in proc.stdout and "4 layers x d_model 128" in proc.stdout


def test_gpu_benchmark_stopped_by_sigterm_reports_the_rows_it_measured():
    """A time limit (SIGTERM) during a variant, here ddp+compile's compilation (which dynamo would swallow),
    ends the run with a section marked partial that holds the finished rows only (a lent GPU's 200 s limit once
    lost seven measured rows that way)."""
    import signal

    proc = subprocess.Popen([PYTHON, "benchmarks/bench_gpu_scale.py", "--device", "cpu", "--quick", "--threads", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO_ROOT,
                            env={k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "MASTER_PORT")})
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "uniform ddp:" in line:  # the first row is in; ddp+compile compiles for seconds now
            proc.send_signal(signal.SIGTERM)
            break
    out = "".join(lines) + proc.stdout.read()
    assert proc.wait(timeout=1800) == 0, out[-3000:]
    assert "stopped by SIGTERM after 1 of 4 variant runs" in out and "(partial)" in out, out[-3000:]
    table = [line for line in out.splitlines() if line.startswith("| uniform |")]
    assert len(table) == 1 and table[0].startswith("| uniform | ddp |"), out[-3000:]


def test_gpu_benchmark_width_profiles():
    from benchmarks.bench_gpu_scale import section, width_overrides

    assert [section(gpu, w)[0] for gpu in (True, False) for w in ("uniform", "uniform,cosine:1.5:0.5")] == [
        "bench_gpu_scale", "bench_gpu_scale_widths", "bench_gpu_scale_cpu", "bench_gpu_scale_cpu_widths"]
    key, title = section(True, "uniform", "1.3b")  # another preset keeps the 440m tables
    assert key == "bench_gpu_scale_1_3b" and "the 1.3b shape" in title

    assert width_overrides("uniform, cosine:1.5:0.5") == [
        {"schedule": "uniform"}, {"schedule": "cosine", "start": 1.5, "end": 0.5}]
    for bad in ("cosine:1.5", "cosine:a:0.5", " , "):
        with pytest.raises(SystemExit, match="--widths"):
            width_overrides(bad)


def test_gpu_benchmark_skips_cleanly_without_cuda(capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the benchmark would run")
    from benchmarks import bench_gpu_scale

    assert bench_gpu_scale.main([]) == ""
    assert "skipped: no CUDA device" in capsys.readouterr().out


def test_gpu_check_script_runs_every_step_and_keeps_going(tmp_path):
    """scripts/gpu_check.sh (the one device call) without CUDA: each step runs under its limit, logs to $OUT and
    reports its exit; the benchmarks write nothing, the CUDA tests are collected and skip."""
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the script would measure")
    before = (REPO_ROOT / "benchmarks" / "RESULTS.md").read_bytes()
    env = {**os.environ, "SKIP_INSTALL": "1", "PY": PYTHON, "OUT": str(tmp_path)}
    proc = subprocess.run(["bash", "scripts/gpu_check.sh"], capture_output=True, text=True, cwd=REPO_ROOT, env=env,
                          check=False, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for step in ("bench_uniform", "bench_widths", "cuda_tests", "bench_1_3b"):
        assert f"== {step}: exit 0" in proc.stdout, proc.stdout[-3000:]
        assert (tmp_path / f"{step}.log").is_file()
    assert proc.stdout.count("skipped: no CUDA device") == 3
    assert re.search(r"3 skipped, \d+ deselected", (tmp_path / "cuda_tests.log").read_text())
    assert (tmp_path / "RESULTS.md").read_bytes() == before == (REPO_ROOT / "benchmarks" / "RESULTS.md").read_bytes()


def test_slurm_example_is_valid_bash_and_uses_real_flags():
    from interp.cli import build_parser

    script = REPO_ROOT / "scripts" / "slurm" / "train_760m.sbatch"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    text = script.read_text()
    train_args = text.split("-m interp.cli.train", 1)[1]
    flags = set(re.findall(r"(--[a-z][a-z-]*)", train_args))
    parser = build_parser()
    train = next(a for a in parser._subparsers._group_actions[0].choices.values() if a.prog.endswith(" train"))
    known = set(train._option_string_actions)
    assert flags and flags <= known, sorted(flags - known)
    for flag in ("--rdzv-backend=c10d", "--rdzv-endpoint", "--nnodes", "--resume", "--parallel fsdp"):
        assert flag in text, flag
