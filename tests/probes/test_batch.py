"""interp.probes.batch and `interp batch`: PATH expansion, resumable per-checkpoint parts, failure rows, shards.

One `micro` run with step checkpoints (steps 2, 4, 6, 8) is trained once per module on a synthetic
corpus, with INTERP_CACHE_DIR in a temporary folder (as in tests/training/test_train.py); every test copies it
when it needs to damage it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from interp import probes
from interp.probes import run as probe_run
from interp._util.paths import CONFIG_FILE, REPO_ROOT, WEIGHTS_FILE
from interp.cli import main
from interp.jobs import keys, parts
from interp.jobs import targets as jt
from interp.probes import batch
from interp.training import TrainConfig, Trainer
from tests.factories import tiny_hf, write_corpus
from tests.launch import torchrun

STEPS = [2, 4, 6, 8]
SETTINGS = dict(tokens=64, seq_len=32, batch_size=2, metrics=("rho_mlp", "rho_block"), progress=False)
VALUE_COLUMNS = ["path", "run", "step", "status", "key", "layer", "metric", "mean", "std", "q50", "n_tokens"]


@pytest.fixture(scope="module")
def env(tmp_path_factory, module_cache):
    """(corpus dir, run dir, text file, environment for subprocesses) with a private cache."""
    root = tmp_path_factory.mktemp("batch")
    corpus = write_corpus(root / "corpus", n_docs=24, sentences=40)
    run_dir = root / "runs" / "micro-uniform"
    cfg = TrainConfig.from_preset("micro", source=str(corpus), val_fraction=0.25, out_dir=str(run_dir),
                                  threads=1, ckpt_interval=2, keep_step_checkpoints=True, progress=False)
    assert Trainer(cfg).run()["status"] == "done"
    text = root / "text.txt"
    text.write_text((corpus / "doc00.txt").read_text() * 3)
    return corpus, run_dir, text, {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}


def copy_run(env, tmp_path: Path, name: str = "micro-uniform") -> Path:
    dest = tmp_path / "runs" / name
    shutil.copytree(env[1], dest)
    return dest


def config(env, paths, out: Path, **kw) -> batch.BatchConfig:
    return batch.BatchConfig.build(paths=[str(p) for p in paths], out=str(out), text=str(env[2]), **{**SETTINGS, **kw})


def values(df: pd.DataFrame) -> pd.DataFrame:
    ok = df[df.status == "ok"]
    return ok[VALUE_COLUMNS].sort_values(["step", "layer", "metric"]).reset_index(drop=True)


# ------------------------------------------------------------------------------------------ expansion

def test_expand_paths_rules(env, tmp_path):
    run = copy_run(env, tmp_path)
    step_dirs = [run / "checkpoints" / f"step_{s:06d}" for s in STEPS]
    targets = jt.expand_paths([run])
    # the final model is the step-8 weights (a finished run saves both): listed once, as step 8
    assert [t.path for t in targets] == step_dirs
    assert [t.step for t in targets] == STEPS and {t.run for t in targets} == {"micro-uniform"}
    assert {t.kind for t in targets} == {"checkpoint"} and targets[0].label == "uniform"
    # a step checkpoint given directly keeps its run and step; the same path twice is listed once
    again = jt.expand_paths([step_dirs[1], run])
    assert again[0] == targets[1] and len(again) == len(STEPS)
    # final weights that differ from the last step: listed after the steps, with step NaN
    shutil.copy(step_dirs[0] / WEIGHTS_FILE, run / WEIGHTS_FILE)
    final = jt.expand_paths([run])[-1]
    assert final.path == run and math.isnan(final.step) and final.run == "micro-uniform"
    # a folder: runs, HF dirs and .gguf files below it, in sorted order; hidden and *.parts folders skipped
    zoo = tmp_path / "zoo"
    (zoo / "hf" / "smol").mkdir(parents=True)
    (zoo / "hf" / "smol" / CONFIG_FILE).write_text('{"model_type": "llama"}')
    (zoo / "hf" / "smol" / WEIGHTS_FILE).write_bytes(b"x")
    (zoo / "a.gguf").write_bytes(b"gguf")
    (zoo / "notes.txt").write_text("not a model")
    (zoo / ".hidden").mkdir()
    (zoo / ".hidden" / "b.gguf").write_bytes(b"gguf")
    (zoo / "batch.parts").mkdir()
    (zoo / "batch.parts" / "c.gguf").write_bytes(b"gguf")
    shutil.copytree(run, zoo / "runs" / "r1")
    found = jt.expand_paths([zoo])
    assert [(t.kind, t.path.relative_to(zoo).as_posix()) for t in found][:2] == [("gguf", "a.gguf"),
                                                                                 ("hf_dir", "hf/smol")]
    assert [t.step for t in found[2:]][:4] == STEPS and len(found) == 2 + len(STEPS) + 1
    with pytest.raises(FileNotFoundError, match="no such file"):
        jt.expand_paths([tmp_path / "missing"])
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "readme.md").write_text("nothing here")
    with pytest.raises(ValueError, match="found no checkpoint"):
        jt.expand_paths([empty])


def test_select_checkpoints_final_steps_and_errors(env, tmp_path, capsys):
    """--checkpoints: all; final = each run's last model; steps; both; a step no run has is an error that lists
    the steps there are, a run without it a note; pretrained models and HF dirs always stay."""
    one, two = copy_run(env, tmp_path, "r1"), copy_run(env, tmp_path, "r2")
    shutil.copy(one / "checkpoints" / "step_000002" / WEIGHTS_FILE, one / WEIGHTS_FILE)  # r1's final differs
    shutil.rmtree(two / "checkpoints" / "step_000004")
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / CONFIG_FILE).write_text('{"model_type": "llama"}')
    (hf / WEIGHTS_FILE).write_bytes(b"x")
    targets = jt.expand_paths([one, two, hf])
    assert jt.select_checkpoints(targets, "all") == targets

    def picked(which: str) -> list[tuple[str, float]]:
        return [(t.path.relative_to(tmp_path).as_posix(), t.step) for t in jt.select_checkpoints(targets, which)]

    final = picked("final")
    assert final[0][0] == "runs/r1" and math.isnan(final[0][1])                  # r1's own final model
    assert final[1:] == [("runs/r2/checkpoints/step_000008", 8), ("hf", final[2][1])]  # r2's final = its step 8
    assert [x for x in picked("4,6") if x[0] != "hf"] == [("runs/r1/checkpoints/step_000004", 4),
                                                          ("runs/r1/checkpoints/step_000006", 6),
                                                          ("runs/r2/checkpoints/step_000006", 6)]
    assert "runs/r2: no checkpoint at step 4 (it has 2, 6, 8)" in capsys.readouterr().err
    assert [x[0] for x in picked("final,2")] == ["runs/r1/checkpoints/step_000002", "runs/r1",
                                                 "runs/r2/checkpoints/step_000002", "runs/r2/checkpoints/step_000008",
                                                 "hf"]
    with pytest.raises(ValueError, match=r"no checkpoint at step 5 under the PATHs; steps found: 2, 4, 6, 8"):
        jt.select_checkpoints(targets, "5")
    with pytest.raises(ValueError, match=r"'last' is neither 'final' nor a step number"):
        jt.select_checkpoints(targets, "final,last")
    assert jt.select_checkpoints(targets[-1:], "5") == targets[-1:]   # pretrained alone: nothing to pick
    with pytest.raises(ValueError, match=r"BatchConfig.checkpoints='-1'"):
        config(env, [one], tmp_path / "b.parquet", checkpoints="-1").validate()
    from interp.cli import main

    capsys.readouterr()
    assert main(["batch", str(one), str(two), "--dry-run", "--checkpoints", "final"]) == 0
    assert [line.split()[1] for line in capsys.readouterr().out.splitlines()] == [
        str(one), str(two / "checkpoints" / "step_000008")]


def test_file_hash_is_streamed_and_cached_by_size_and_mtime(tmp_path, private_cache):
    import hashlib

    f = tmp_path / "w.bin"
    f.write_bytes(b"abc" * 1000)
    expected = hashlib.sha256(b"abc" * 1000).hexdigest()
    assert keys.sha256_cached(f) == expected
    # while (path, size, mtime) are unchanged the cache answers: plant a wrong value and see it returned
    (entry,) = (private_cache / "hashes").glob("*.json")
    record = json.loads(entry.read_text())
    assert record["path"] == str(f.resolve()) and record["size"] == 3000
    entry.write_text(json.dumps({**record, "sha256": "planted"}))
    assert keys.sha256_cached(f) == "planted"
    os.utime(f, ns=(1, 1))  # a rewrite changes the mtime: hashed again
    assert keys.sha256_cached(f) == expected


# ------------------------------------------------------------------------------------------ batch runs

def test_batch_over_a_run_gives_rows_per_step_then_skips_everything(env, tmp_path, monkeypatch):
    run = copy_run(env, tmp_path)
    out = tmp_path / "res" / "batch.parquet"
    result = batch.run_batch(config(env, [run], out, csv=True))
    assert result.ok and len(result.analysed) == len(STEPS) and not result.skipped
    df = pd.read_parquet(out)
    pd.testing.assert_frame_equal(df, result.table)
    assert out.with_suffix(".csv").is_file()
    assert list(df.columns[:len(batch.BATCH_COLUMNS)]) == list(batch.BATCH_COLUMNS)
    assert sorted(df.step.unique()) == STEPS and set(df.status) == {"ok"} and set(df.run) == {"micro-uniform"}
    assert len(df) == len(STEPS) * 2 * 2  # steps x layers x metrics
    assert df.groupby("step").weights_sha256.nunique().eq(1).all() and df.weights_sha256.nunique() == len(STEPS)
    assert df.settings_hash.nunique() == 1  # key: the model's content key (weights, config.json + tokenizer), settings
    assert all(key == keys.model_part_key(k, s) for key, k, s in zip(df.key, df.model_key, df.settings_hash))
    # each step's rows are that checkpoint's own probe (rows attached to the right step)
    step4 = run / "checkpoints" / "step_000004"
    direct = probes.probe(str(step4), text=env[2], tokens=64, seq_len=32, batch_size=2,
                          metrics=("rho_mlp", "rho_block"))
    mine = df[df.step == 4].sort_values(["metric", "layer"])
    assert mine["mean"].tolist() == direct.sort_values(["metric", "layer"])["mean"].tolist()
    assert df[df.step == 2]["mean"].tolist() != df[df.step == 8]["mean"].tolist()  # the weights moved
    assert len(list(parts.parts_dir(out).glob("*.parquet"))) == len(STEPS)

    def no_probe(*args, **kwargs):
        raise AssertionError("a checkpoint already in the table was probed again")

    monkeypatch.setattr(probe_run, "probe", no_probe)
    again = batch.run_batch(config(env, [run], out))
    assert again.ok and not again.analysed and len(again.skipped) == len(STEPS)
    pd.testing.assert_frame_equal(pd.read_parquet(out), df)
    # other settings are another key: probed again (here the probe raises, so it is a failure row)
    other = batch.run_batch(config(env, [run / "checkpoints" / "step_000002"], out, tokens=32))
    assert other.failed and "already in the table" in other.failed[0][1]


def test_truncated_checkpoint_is_reported_and_the_rest_analysed(env, tmp_path, capsys):
    run = copy_run(env, tmp_path)
    bad = run / "checkpoints" / "step_000004" / WEIGHTS_FILE
    bad.write_bytes(bad.read_bytes()[:500])
    out = tmp_path / "batch.parquet"
    code = main(["batch", str(run), "--out", str(out), "--text", str(env[2]), "--tokens", "64", "--seq-len", "32",
                 "--batch-size", "2", "--metrics", "rho_mlp", "--no-progress"])
    assert code == 1
    err = capsys.readouterr().err
    assert "FAILED" in err and "step_000004" in err and "truncated" in err
    df = pd.read_parquet(out)
    failed = df[df.status == "failed"]
    assert len(failed) == 1 and failed.step.item() == 4 and "truncated" in failed.error.item()
    assert failed.path.item() == str(bad.parent) and failed.weights_sha256.item() == keys.sha256_cached(bad)
    assert failed.key.item() == keys.model_part_key(failed.model_key.item(), failed.settings_hash.item())
    assert sorted(df[df.status == "ok"].step.unique()) == [2, 6, 8]
    # repaired: the rerun analyses only that checkpoint and its failure row disappears
    shutil.copy(env[1] / "checkpoints" / "step_000004" / WEIGHTS_FILE, bad)
    assert main(["batch", str(run), "--out", str(out), "--text", str(env[2]), "--tokens", "64", "--seq-len", "32",
                 "--batch-size", "2", "--metrics", "rho_mlp", "--no-progress"]) == 0
    assert "1 analysed, 3 skipped" in capsys.readouterr().out
    df = pd.read_parquet(out)
    assert set(df.status) == {"ok"} and sorted(df.step.unique()) == STEPS


def test_interrupted_batch_keeps_its_parts_and_a_rerun_completes(env, tmp_path, monkeypatch):
    run = copy_run(env, tmp_path)
    out = tmp_path / "batch.parquet"
    real_probe, calls = probes.probe, []

    def interrupted(*args, **kwargs):
        calls.append(args[0])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_probe(*args, **kwargs)

    monkeypatch.setattr(probe_run, "probe", interrupted)
    with pytest.raises(KeyboardInterrupt):
        batch.run_batch(config(env, [run], out))
    assert len(list(parts.parts_dir(out).glob("*.parquet"))) == 1
    assert pd.read_parquet(out).step.unique().tolist() == [2]  # the table holds what was finished
    monkeypatch.setattr(probe_run, "probe", real_probe)
    result = batch.run_batch(config(env, [run], out))
    assert len(result.skipped) == 1 and len(result.analysed) == len(STEPS) - 1
    full = batch.run_batch(config(env, [run], tmp_path / "fresh.parquet"))
    pd.testing.assert_frame_equal(values(result.table), values(full.table))


def test_deleted_parts_are_rebuilt_from_the_table(env, tmp_path, monkeypatch):
    run = copy_run(env, tmp_path)
    out = tmp_path / "batch.parquet"
    first = batch.run_batch(config(env, [run / "checkpoints" / "step_000002"], out))
    shutil.rmtree(parts.parts_dir(out))
    monkeypatch.setattr(probe_run, "probe", lambda *a, **k: (_ for _ in ()).throw(AssertionError("re-probed")))
    result = batch.run_batch(config(env, [run / "checkpoints" / "step_000002"], out))
    assert result.skipped and result.ok
    pd.testing.assert_frame_equal(result.table, first.table)


def test_a_part_from_before_sequence_level_cis_is_probed_again(env, tmp_path):
    """A part without ci_method holds per-token CIs (written before 2026-12-03): it is recomputed under the same
    key, so the merged table never mixes the two kinds of CI."""
    run = copy_run(env, tmp_path)
    out = tmp_path / "batch.parquet"
    target = run / "checkpoints" / "step_000002"
    first = batch.run_batch(config(env, [target], out))
    (part,) = parts.parts_dir(out).glob("*.parquet")
    old = pd.read_parquet(part).drop(columns=["ci_method", "n_sequences", "sem_tokens"])
    old["sem"] = 123.0  # what an old part's numbers would be: anything but today's
    old.to_parquet(part, index=False)
    result = batch.run_batch(config(env, [target], out))
    assert result.analysed == [str(target)] and not result.skipped
    assert [p.name for p in parts.parts_dir(out).glob("*.parquet")] == [part.name]
    pd.testing.assert_frame_equal(result.table, first.table)


def test_two_shards_merge_to_the_single_process_table(env, tmp_path, monkeypatch):
    """Ranks without a process group (RANK/WORLD_SIZE only): each writes its parts; --merge-only joins them."""
    run = copy_run(env, tmp_path)
    single = batch.run_batch(config(env, [run], tmp_path / "single.parquet")).table
    out = tmp_path / "sharded.parquet"
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    done = []
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        result = batch.run_batch(config(env, [run], out))
        assert (result.rank, result.world_size, result.table) == (rank, 2, None)  # no group: nobody merges
        done.append([Path(p).name for p in result.analysed])
    assert done == [["step_000002", "step_000006"], ["step_000004", "step_000008"]]
    assert main(["batch", "--merge-only", "--out", str(out)]) == 0
    pd.testing.assert_frame_equal(pd.read_parquet(out), single)


def test_bad_arguments_fail_before_any_work(env, tmp_path, capsys):
    with pytest.raises(ValueError, match="backend"):
        batch.BatchRunner(config(env, [env[1]], tmp_path / "b.parquet", backend="jax"))
    with pytest.raises(ValueError, match=r"\.parquet"):
        batch.BatchRunner(config(env, [env[1]], tmp_path / "b.csv"))
    assert main(["batch", str(tmp_path / "nope"), "--out", str(tmp_path / "b.parquet")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["batch", "--merge-only", "--out", str(tmp_path / "none.parquet")]) == 2
    assert main(["batch", str(env[1]), "--dry-run"]) == 0
    assert capsys.readouterr().out.count("step=") == len(STEPS)


@pytest.mark.integration
def test_torchrun_two_ranks_merge_automatically(env, tmp_path):
    """torchrun --nproc_per_node=2 (gloo): ranks split the checkpoints, rank 0 merges after a barrier."""
    run = copy_run(env, tmp_path)
    single = batch.run_batch(config(env, [run], tmp_path / "single.parquet")).table
    out = tmp_path / "ddp.parquet"
    proc = torchrun(["-m", "interp.cli", "batch", str(run), "--out", str(out), "--text", str(env[2]), "--tokens",
                     "64", "--seq-len", "32", "--batch-size", "2", "--metrics", "rho_mlp,rho_block", "--no-progress"],
                    env=env[3], timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rank 0/2: 2 analysed" in proc.stdout and "rank 1/2: 2 analysed" in proc.stdout
    pd.testing.assert_frame_equal(pd.read_parquet(out), single)


# ------------------------------------------------------------------------------------------ figure

def test_novelty_over_training_analysis_on_micro_runs(env, tmp_path):
    """compute -> CSV of both runs' step checkpoints; render -> heatmaps whose cells are the CSV means."""
    from analyses import novelty_over_training as analysis

    probe = dataclasses.replace(analysis.Config().probe, tokens=64, seq_len=32, batch_size=2, text=str(env[2]))
    cfg = analysis.Config(preset="micro", steps=4, ckpt_interval=2, eval_interval=4, log_interval=1,
                          out_root=str(tmp_path / "runs"), probe=probe, overrides={"source": str(env[0]), "val_fraction": 0.25, "threads": 1,
                                                       "progress": False})
    figures = tmp_path / "figures"
    analysis.compute(cfg, figures)
    df = pd.read_csv(figures / analysis.TABLE)
    assert set(df.label) == {"uniform", "cosine 1.5->0.5"} and sorted(df.step.unique()) == [2, 4]
    assert len(df) == 2 * 2 * 2 * len(cfg.probe.metrics)  # runs x steps x layers x metrics
    assert (figures / "novelty_over_training.meta.json").is_file()
    assert df["hardware"].str.contains("cores").all() and df["text_sha256"].str.len().eq(64).all()
    assert set(df["dtype"]) == {"float32"} and df["versions"].str.contains("torch=").all()
    # the batch table under the runs root holds the same numbers
    full = pd.read_parquet(tmp_path / "runs" / "batch.parquet")
    assert sorted(full["mean"]) == sorted(df["mean"])
    (png,) = analysis.render(figures)
    assert png.name == analysis.FIGURE and png.stat().st_size > 10_000

    from interp.plots.training import plot_novelty_over_training

    fig = plot_novelty_over_training(df)
    meshes = [ax.collections[0] for ax in fig.axes if ax.get_title()]  # colorbars have no title
    assert len(meshes) == 4  # 2 metrics x 2 runs, uniform first
    uniform = df[df.label == "uniform"].run.iloc[0]
    rows = df[(df.run == uniform) & (df.metric == "rho_block")]
    expected = [rows[(rows.layer == layer) & (rows.step == step)]["mean"].item() for layer in (0, 1) for step in (2, 4)]
    assert meshes[2].get_array().ravel().tolist() == pytest.approx(expected)  # row 2 = rho_block, uniform
    with pytest.raises(ValueError, match="rho_attn_x"):
        plot_novelty_over_training(df, metrics=("rho_attn_x",))


# ------------------------------------------------------------------------------------------ probe options

def test_default_settings_keep_the_hash_of_earlier_tables():
    """Options added to ProbeConfig later enter the settings only when set: earlier parts keep their keys (an unset
    seq_len is fitted before the settings are hashed: 256 when every model's context allows it, as before)."""
    cfg = batch.BatchConfig()
    cfg = dataclasses.replace(cfg, probe=batch.fit_seq_len(cfg.probe, []))
    before = {"text_sha256": "0" * 64, "tokens": 2048, "seq_len": 256, "batch_size": 4, "backend": "torch",
              "positions": "skip_first", "prepend_bos": False, "dtype": "float32",
              "metrics": list(probes.METRIC_NAMES), "eps": 1e-8, "tokenizer": None}  # what the settings were
    assert cfg.settings("0" * 64) == before
    hashes = {keys.settings_hash(c.settings("0" * 64)) for c in (
        cfg, batch.BatchConfig.build(reference="normed"), batch.BatchConfig.build(exclude_massive_dims=3),
        batch.BatchConfig.build(exclude_massive_dims=[3]), batch.BatchConfig.build(eps=1e-6))}
    assert len(hashes) == 5  # every field that changes the numbers changes the key
    assert batch.BatchConfig.from_dict(cfg.to_dict()) == cfg
    assert batch.BatchConfig().probe.seq_len is None
    with pytest.raises(ValueError, match=r"unknown keys \['tokens'\]"):  # probe options live under "probe"
        batch.BatchConfig.from_dict({**cfg.to_dict(), "tokens": 3})
    with pytest.raises(ValueError, match=r"BatchConfig.probe: reference='cooked'"):
        batch.BatchRunner(batch.BatchConfig.build(paths=["x"], reference="cooked"))


def test_batch_cli_takes_reference_and_exclude_massive_dims(env, tmp_path):
    """`interp batch` accepts every option of `interp probe`; its rows equal probe()'s with the same options."""
    step = copy_run(env, tmp_path) / "checkpoints" / "step_000004"
    out = tmp_path / "opts.parquet"
    common = ["--text", str(env[2]), "--tokens", "64", "--seq-len", "32", "--batch-size", "2",
              "--metrics", "rho_mlp,rho_block", "--no-progress"]
    assert main(["batch", str(step), "--out", str(out), *common, "--reference", "normed",
                 "--exclude-massive-dims", "2"]) == 0
    assert main(["batch", str(step), "--out", str(out), *common]) == 0  # other settings: another part
    df = pd.read_parquet(out)
    assert df.settings_hash.nunique() == 2 and df.weights_sha256.nunique() == 1
    opts = df[df.settings_hash == df[df.metric == "rho_mlp_normed"].settings_hash.iloc[0]]
    assert set(opts.metric) == {"rho_mlp", "rho_block", "rho_mlp_normed"} and set(opts.reference_mode) == {"normed"}
    direct = probes.probe(str(step), text=env[2], tokens=64, seq_len=32, batch_size=2,
                          metrics=("rho_mlp", "rho_block"), reference="normed", exclude_massive_dims=2)
    assert set(opts.excluded_dims) == set(direct.excluded_dims) and len(json.loads(direct.excluded_dims.iloc[0])) == 2
    key = ["metric", "layer"]
    assert opts.sort_values(key)["mean"].tolist() == direct.sort_values(key)["mean"].tolist()
    plain = df[df.settings_hash != opts.settings_hash.iloc[0]]
    assert set(plain.metric) == {"rho_mlp", "rho_block"} and plain.excluded_dims.isna().all()


def test_save_pretrained_dir_is_hf_dir_and_ours_are_checkpoints(env, tmp_path, save_pretrained_dir):
    """Classification by what config.json says (interp.hf.resolve), not by file names: both kinds hold
    config.json + model.safetensors."""
    llama = tiny_hf("LlamaForCausalLM", vocab_size=32, d_model=16, d_mlp=32, n_layers=1, n_heads=2, n_kv_heads=1)
    hf_dir = save_pretrained_dir("zoo/llama", llama)
    assert {p.name for p in hf_dir.iterdir()} >= {CONFIG_FILE, WEIGHTS_FILE}
    shutil.copytree(env[1] / "checkpoints" / "step_000002", tmp_path / "zoo" / "ours")
    found = {t.path.name: t.kind for t in jt.expand_paths([tmp_path / "zoo"])}
    assert found == {"llama": "hf_dir", "ours": "checkpoint"}
    assert [t.weights_files() for t in jt.expand_paths([hf_dir])] == [[hf_dir / WEIGHTS_FILE]]
