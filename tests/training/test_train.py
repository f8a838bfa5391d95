"""Training loop: schedule, loss goes down, run-directory layout, exact resume, no-op rerun, signals, DDP.

Fast tests use the `micro` preset on a synthetic corpus with a tiny BPE (vocab 384) built once per
module in a temporary INTERP_CACHE_DIR, and pass the TokenData in, so nothing here trains the 8k BPE.
"""

import dataclasses
import json
import math
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from interp._util.paths import (
    CONFIG_FILE,
    LOG_FILE,
    REPO_ROOT,
    RESULT_FILE,
    TRAIN_STATE_FILE,
    WEIGHTS_FILE,
)
from interp.cli import build_parser
from interp.cli.train import config_from_args
from interp.widths import WidthSpec
from interp.training import TrainConfig, Trainer, config_diff, lr_at
from interp.training.checkpoints import (
    load_checkpoint,
    load_train_state,
    validate_checkpoint,
)
from interp.training.presets import PRESETS
from tests.factories import tiny_lm
from tests.launch import torchrun

PYTHON = sys.executable


def micro(env, out: Path, **overrides) -> TrainConfig:
    corpus = env[0]
    return TrainConfig.from_preset("micro", source=str(corpus), val_fraction=0.25, out_dir=str(out),
                                   threads=1, log_interval=1, **overrides)


def run(env, cfg: TrainConfig, **kw) -> dict:
    return Trainer(cfg, data=env[2]).run(**kw)


def read_log(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / LOG_FILE).read_text().splitlines()]


def weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(str(run_dir / WEIGHTS_FILE))


def initial_weights(env) -> dict[str, torch.Tensor]:
    """Untrained micro weights (same seed as a run): shows a comparison is not between two inits."""
    cfg = micro(env, Path("unused"))
    return tiny_lm(cfg.seed, cfg.model_config(env[2].vocab_size), train=True).state_dict()


# ------------------------------------------------------------------------------------------ config

def test_lr_schedule_shape():
    cfg = TrainConfig(lr=1.0, min_lr=0.1, warmup_steps=10, steps=111)
    lrs = [lr_at(s, cfg) for s in range(cfg.steps)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)  # linear warm-up to the peak
    assert all(b > a for a, b in zip(lrs[:10], lrs[1:10]))
    assert lrs[10] == pytest.approx(1.0)
    assert lrs[60] == pytest.approx(0.55)  # half-way through the cosine: (lr + min_lr) / 2
    assert lrs[35] == pytest.approx(0.1 + 0.45 * (1 + math.cos(math.pi * 0.25)))
    assert lrs[-1] == pytest.approx(0.1)  # reaches min_lr at the last step
    assert all(b <= a for a, b in zip(lrs[10:], lrs[11:]))


def test_config_round_trip_and_overrides():
    cfg = TrainConfig.from_preset("tiny", schedule="cosine", start=1.5, end=0.5, seed=3)
    assert cfg.width == WidthSpec("cosine", 1.5, 0.5) and cfg.seed == 3 and cfg.preset == "tiny"
    again = TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg and again.betas == (0.9, 0.95)
    assert cfg.with_overrides(profile="wider-early").width == WidthSpec("profile", profile="wider-early")
    assert cfg.with_overrides(profile="wider-early").with_overrides(schedule="linear", start=1.25,
                                                                     end=0.75).width.label == "linear 1.25->0.75"
    widths = cfg.model_config(8192).d_mlp
    assert widths[0] > widths[-1] and sum(widths) == cfg.n_layers * cfg.d_ff  # budget-exact taper
    with pytest.raises(ValueError, match="unknown fields \\['learning_rate'\\]"):
        cfg.with_overrides(learning_rate=1.0)
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        TrainConfig.from_preset("huge")
    with pytest.raises(ValueError, match="grad_accum"):
        TrainConfig(batch_size=6, grad_accum=4).validate()
    for name in PRESETS:  # every preset builds a valid config and model shape
        preset = TrainConfig.from_preset(name)
        preset.validate()
        preset.model_config(preset.vocab_size).validate()
        assert preset.notes


def test_config_diff_ignores_runtime_fields():
    cfg = TrainConfig()
    stored = json.loads(json.dumps(cfg.to_dict()))
    assert config_diff(stored, cfg.with_overrides(out_dir="elsewhere", threads=7, resume=True)) == []
    assert config_diff(stored, cfg.with_overrides(lr=1e-4, start=1.5, schedule="cosine")) == [
        "lr: 0.002 -> 0.0001",
        "width: {'schedule': 'uniform', 'start': 1.0, 'end': 1.0, 'profile': None, 'multiple': 16, 'k': 10.0}"
        " -> {'schedule': 'cosine', 'start': 1.5, 'end': 1.0, 'profile': None, 'multiple': 16, 'k': 10.0}"]


def test_cli_parses_into_config():
    args = build_parser().parse_args(["train", "--preset", "tiny", "--schedule", "cosine", "--start", "1.5",
                                      "--end", "0.5", "--out", "runs/x", "--mixer", "gated_attention",
                                      "--steps", "12", "--batch-size", "4", "--lr", "1e-3", "--dtype", "bf16",
                                      "--resume", "--set", "warmup_steps=3", "--set", "betas=[0.9, 0.99]"])
    cfg = config_from_args(args)
    assert (cfg.width.label, cfg.out_dir, cfg.mixer, cfg.steps, cfg.batch_size, cfg.lr, cfg.dtype, cfg.resume,
            cfg.warmup_steps, cfg.betas) == ("cosine 1.5->0.5", "runs/x", "gated_attention", 12, 4, 1e-3,
                                             "bf16", True, 3, (0.9, 0.99))
    args = build_parser().parse_args(["train", "--profile", "wider-late", "--out", "r"])
    assert config_from_args(args).width.label == "wider-late"
    with pytest.raises(SystemExit, match="--schedule"):
        config_from_args(build_parser().parse_args(["train", "--start", "1.5", "--out", "r"]))


def test_cli_flags_are_generated_from_train_config():
    """Every option field of TrainConfig is a flag of `interp train`; flags not given keep the preset's value."""
    from interp._util.config import cli_fields, flag_name

    parser = build_parser()
    train_parser = parser._subparsers._group_actions[0].choices["train"]
    flags = {s for a in train_parser._actions for s in a.option_strings}
    assert {flag_name(f) for f in cli_fields(TrainConfig)} <= flags
    assert {"--preset", "--out", "--schedule", "--start", "--end", "--profile", "--multiple", "--set"} <= flags
    args = parser.parse_args(["train", "--preset", "micro", "--out", "r", "--warmup-steps", "3", "--no-progress",
                              "--betas", "0.8,0.9", "--keep-step-checkpoints", "--d-model", "48"])
    cfg = config_from_args(args)
    assert (cfg.warmup_steps, cfg.progress, cfg.betas, cfg.keep_step_checkpoints, cfg.d_model) == (
        3, False, (0.8, 0.9), True, 48)
    preset = TrainConfig.from_preset("micro")
    assert (cfg.steps, cfg.lr, cfg.n_ctx) == (preset.steps, preset.lr, preset.n_ctx)  # the preset's
    with pytest.raises(SystemExit):
        parser.parse_args(["train", "--preset", "micro"])  # --out is required
    with pytest.raises(SystemExit, match="--set learning_rate: no such field"):
        config_from_args(parser.parse_args(["train", "--out", "r", "--set", "learning_rate=1"]))


# ------------------------------------------------------------------------------------------ training

def test_loss_goes_down_and_run_dir_is_complete(env, tmp_path):
    cfg = micro(env, tmp_path / "run", steps=30, keep_step_checkpoints=True, ckpt_interval=10, eval_interval=10,
                schedule="linear", start=1.5, end=0.5, peak_flops=1e9)
    result = run(env, cfg)
    out = Path(cfg.out_dir)
    log = read_log(out)
    train, evals = [r for r in log if r["kind"] == "train"], [r for r in log if r["kind"] == "eval"]
    # An untrained model predicts ~uniformly: loss ~ ln(vocab). Independent of the training code.
    assert train[0]["loss"] == pytest.approx(math.log(env[2].vocab_size), abs=0.3)
    assert result["status"] == "done" and result["step"] == 30 and result["tokens"] == 30 * 8 * 32
    assert result["val_loss"] < math.log(env[2].vocab_size) - 1.0
    assert result["val_ppl"] == pytest.approx(math.exp(result["val_loss"]))
    assert [r["step"] for r in train] == list(range(1, 31)) and [r["step"] for r in evals] == [10, 20, 30]
    assert evals[-1]["val_loss"] < evals[0]["val_loss"]
    assert set(train[0]) >= {"kind", "step", "tokens", "loss", "lr", "tokens_per_s", "elapsed_s"}
    assert set(evals[0]) == {"kind", "step", "tokens", "val_loss", "val_ppl"}
    # layout of docs/ARCHITECTURE.md "Run directories"
    for name in (CONFIG_FILE, WEIGHTS_FILE, TRAIN_STATE_FILE, LOG_FILE, RESULT_FILE):
        assert (out / name).is_file(), name
    config = json.loads((out / CONFIG_FILE).read_text())
    assert set(config) >= {"train", "model", "widths", "label", "data", "params", "flops_per_token", "provenance"}
    assert config["train"] == json.loads(json.dumps(cfg.to_dict()))
    assert config["widths"] == config["model"]["d_mlp"] == result["widths"] == [96, 32]
    assert config["label"] == result["label"] == "linear 1.5->0.5"
    model, _ = load_checkpoint(out)
    assert sum(p.numel() for p in model.parameters()) == result["params"] == config["params"]["total"]
    # achieved FLOP/s = 3 x forward FLOPs/token x tokens/s; MFU against the given peak
    fwd = 2 * sum(p.numel() for n, p in model.named_parameters() if n != "embed.weight" and p.dim() == 2)
    assert config["flops_per_token"]["total"] >= fwd  # plus attention scores
    for record in train[:3]:
        assert record["flops_per_s"] == pytest.approx(3 * config["flops_per_token"]["total"] * record["tokens_per_s"])
        assert record["mfu"] == pytest.approx(record["flops_per_s"] / 1e9)
    state = load_train_state(out)
    assert state["step"] == 30 and all(torch.equal(v, state["model"][k]) for k, v in model.state_dict().items())
    steps = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert steps == ["step_000010", "step_000020", "step_000030"]
    assert validate_checkpoint(out / "checkpoints" / "step_000010")["step"] == 10
    assert torch.equal(weights(out / "checkpoints" / "step_000030")["embed.weight"], model.embed.weight)


def test_grad_accum_matches_one_big_batch(env, tmp_path):
    a = micro(env, tmp_path / "a", steps=3)
    b = micro(env, tmp_path / "b", steps=3, grad_accum=4)
    run(env, a), run(env, b)
    wa, wb = weights(tmp_path / "a"), weights(tmp_path / "b")
    for name in wa:
        torch.testing.assert_close(wa[name], wb[name], rtol=0, atol=1e-5)
    assert not torch.equal(wa["embed.weight"], initial_weights(env)["embed.weight"])  # it did train


def test_bf16_autocast_keeps_fp32_master_weights(env, tmp_path):
    fp32 = run(env, micro(env, tmp_path / "fp32", steps=4))
    bf16 = run(env, micro(env, tmp_path / "bf16", steps=4, dtype="bf16"))
    assert bf16["dtype"] == "bfloat16" and fp32["dtype"] == "float32"
    wa, wb = weights(tmp_path / "fp32"), weights(tmp_path / "bf16")
    assert all(w.dtype == torch.float32 for w in wb.values())
    assert not torch.equal(wa["embed.weight"], wb["embed.weight"])  # autocast really ran in bf16 ...
    assert bf16["val_loss"] == pytest.approx(fp32["val_loss"], abs=0.05)  # ... and trains the same


def test_exact_resume_is_bit_identical(env, tmp_path):
    straight = micro(env, tmp_path / "straight", steps=8)
    run(env, straight)
    split = micro(env, tmp_path / "split", steps=8)
    half = run(env, split, stop_at=4)
    assert half["status"] == "interrupted" and half["step"] == 4
    with pytest.raises(ValueError, match="--resume"):
        run(env, split)  # an unfinished run is not silently restarted or overwritten
    with open(tmp_path / "split" / LOG_FILE, "a") as f:  # a line logged after the checkpoint, then a kill mid-line
        f.write(json.dumps({"kind": "train", "step": 5, "loss": -1.0}) + '\n{"kind": "train", "st')
    done = run(env, split.with_overrides(resume=True))
    assert done["status"] == "done" and done["step"] == 8
    wa, wb = weights(tmp_path / "straight"), weights(tmp_path / "split")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    sa, sb = load_train_state(tmp_path / "straight"), load_train_state(tmp_path / "split")
    assert torch.equal(sa["data_generator"], sb["data_generator"])
    for pa, pb in zip(sa["optimizer"]["state"].values(), sb["optimizer"]["state"].values()):
        assert torch.equal(pa["exp_avg_sq"], pb["exp_avg_sq"])
    # the log is continuous: each step once, same losses as the straight run
    la, lb = read_log(tmp_path / "straight"), read_log(tmp_path / "split")
    assert [r["step"] for r in lb if r["kind"] == "train"] == list(range(1, 9))
    assert [r["loss"] for r in la if r["kind"] == "train"] == [r["loss"] for r in lb if r["kind"] == "train"]
    assert len(json.loads((tmp_path / "split" / CONFIG_FILE).read_text())["resumed"]) == 1


def test_resume_refuses_changed_data(env, tmp_path):
    cfg = micro(env, tmp_path / "run", steps=2)
    run(env, cfg, stop_at=1)
    other = dataclasses.replace(env[2], meta={**env[2].meta, "source_hash": "0" * 64})
    with pytest.raises(ValueError, match="data.source_hash differs"):
        Trainer(cfg.with_overrides(resume=True), data=other).run()


def test_rerun_of_finished_run_is_a_noop_and_mismatch_is_named(env, tmp_path):
    cfg = micro(env, tmp_path / "run", steps=2)
    first = run(env, cfg)
    stamp = (tmp_path / "run" / WEIGHTS_FILE).stat().st_mtime_ns
    assert run(env, cfg) == first
    assert run(env, cfg.with_overrides(resume=True, threads=2)) == first
    assert (tmp_path / "run" / WEIGHTS_FILE).stat().st_mtime_ns == stamp
    with pytest.raises(ValueError, match=r"differing fields: lr: 0\.01 -> 0\.02; seed: 0 -> 1"):
        run(env, cfg.with_overrides(lr=0.02, seed=1, resume=True))


# ------------------------------------------------------------------------------------------ processes

def cli_args(corpus: Path, out: Path, *extra: str) -> list[str]:
    return ["--preset", "micro", "--source", str(corpus), "--out", str(out), "--threads", "1",
            "--set", "val_fraction=0.25", "--set", "log_interval=1", *extra]


@pytest.mark.integration
def test_sigterm_saves_a_resumable_checkpoint(env, tmp_path):
    corpus, environ, _ = env
    out = tmp_path / "run"
    args = cli_args(corpus, out, "--steps", "150", "--set", "progress=false")
    proc = subprocess.Popen([PYTHON, "-m", "interp.cli.train", *args], cwd=REPO_ROOT, env=environ,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if (out / LOG_FILE).is_file() and len((out / LOG_FILE).read_text().splitlines()) >= 3:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=1800)
    assert proc.returncode == 143, output
    result = json.loads((out / RESULT_FILE).read_text())
    assert result["status"] == "interrupted" and result["reason"] == "SIGTERM" and 3 <= result["step"] < 150
    model, _ = load_checkpoint(out)
    assert load_train_state(out)["step"] == result["step"]
    cfg = config_from_args(build_parser().parse_args(["train", *args, "--resume"]))
    done = Trainer(cfg).run()
    assert done["status"] == "done" and done["step"] == 150
    steps = [r["step"] for r in read_log(out) if r["kind"] == "train"]
    assert steps == list(range(1, 151))


@pytest.mark.integration
def test_ddp_two_ranks_match_single_process(env, tmp_path):
    corpus, environ, _ = env
    out = tmp_path / "ddp"
    proc = torchrun(["-m", "interp.cli.train", *cli_args(corpus, out, "--steps", "3")], env=environ)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads((out / RESULT_FILE).read_text())
    assert result["world_size"] == 2 and result["status"] == "done"
    hashes = result["rank_param_sha256"]
    assert len(hashes) == 2 and hashes[0] == hashes[1]  # both ranks hold bit-identical weights
    single = micro(env, tmp_path / "single", steps=3)
    run(env, single)
    wd, ws = weights(out), weights(tmp_path / "single")
    for name in ws:
        torch.testing.assert_close(wd[name], ws[name], rtol=0, atol=1e-5)
    assert not torch.equal(ws["embed.weight"], initial_weights(env)["embed.weight"])


DDP_CLOSE = """
import gc, os, sys, weakref
from pathlib import Path
from interp.cli import build_parser
from interp.cli.train import config_from_args
from interp.training import Trainer
trainer = Trainer(config_from_args(build_parser().parse_args(["train", *sys.argv[2:]])))
wrapper = weakref.ref(trainer.model)
assert type(trainer.model).__name__ == "DistributedDataParallel", type(trainer.model)
trainer.run()
Path(sys.argv[1], f"rank{os.environ['RANK']}.txt").write_text(f"{wrapper() is None} {trainer.model is trainer.raw}")
"""


@pytest.mark.integration
def test_ddp_wrapper_is_released_before_the_group(env, tmp_path):
    """Trainer.close() drops DDP's wrapper (and its Reducer, which holds the gloo group) while the group is alive,
    so the group is never destroyed from the Reducer's destructor with the GIL held (a hang at exit under
    torchrun: pytorch/pytorch#56297); afterwards trainer.model is the unwrapped model."""
    corpus, environ, _ = env
    script = tmp_path / "ddp_close.py"
    script.write_text(DDP_CLOSE)
    proc = torchrun([str(script), str(tmp_path), *cli_args(corpus, tmp_path / "ddp", "--steps", "2")], env=environ)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # each rank: the wrapper is gone, and trainer.model is the unwrapped model (one file per rank: no interleaving)
    assert [(tmp_path / f"rank{r}.txt").read_text() for r in (0, 1)] == ["True True"] * 2


@pytest.mark.integration                             # spawns a fresh interpreter
def test_cli_help_does_not_import_torch():
    """`interp --help` and every subcommand's parser build without torch (it costs ~1.5 s of CPU)."""
    import subprocess
    import sys
    code = "import sys; from interp.cli import build_parser; build_parser(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_run_trained_on_relative_paths_is_read_from_anywhere(env, tmp_path, monkeypatch):
    """`interp train --source corpus --out run` typed in one folder; the run is probed from another (its config
    stores the source, whose BPE the probe rebuilds, as an absolute path; names such as wiki stay names)."""
    import shutil

    from interp.cli import main
    from interp.training.checkpoints import read_config

    work = tmp_path / "work"
    shutil.copytree(env[0], work / "corpus")
    monkeypatch.chdir(work)
    args = ["train", "--preset", "micro", "--source", "corpus", "--out", "run", "--steps", "2", "--threads", "1",
            "--set", "val_fraction=0.25", "--set", "progress=false"]
    assert main(args) == 0
    assert read_config(work / "run")["train"]["source"] == str(work / "corpus")
    from interp.training.results import read_run

    assert read_run(work / "run")["source"] == str(work / "corpus")   # the runs tables' column too
    assert TrainConfig(source="wiki", tokenizer="bpe").to_dict()["source"] == "wiki"
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "p.parquet"
    assert main(["probe", "--model", str(work / "run"), "--tokens", "32", "--seq-len", "16", "--out", str(out)]) == 0
