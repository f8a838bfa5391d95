"""One identity per model (issue 50): a probe batch, an eval and an ablation of the same model give rows with the same
identity columns (weights_sha256, model_key, model_spec), so the three tables join on them; and the eval parts keyed
as every eval table was before the one key scheme (sha256(model_key | settings), e.g. runs/eval/full_set.parts) are
still recognised as done."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import pytest

from interp._util.io import json_sha256
from interp.jobs.keys import IDENTITY_COLUMNS
from tests.hub_server import tiny_model_folder

WEIGHTS = "model.safetensors"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _old_model_key(folder: Path) -> str:
    """EvalTarget.model_key() of an HF directory, as the eval computed it before the model sources: the sha256 of
    '<weights sha256> <sha256 over the name and sha256 of every other top-level file>'."""
    others = sorted(f for f in folder.iterdir() if f.is_file() and not f.name.startswith(".") and f.name != WEIGHTS
                    and f.suffix not in (".parquet", ".csv", ".md"))
    definition = hashlib.sha256("".join(f"{f.name} {_sha(f)}\n" for f in others).encode()).hexdigest()
    return hashlib.sha256(f"{_sha(folder / WEIGHTS)} {definition}".encode()).hexdigest()


def _old_pair_key(model_key: str, settings: dict) -> str:
    return hashlib.sha256(f"{model_key}|{json_sha256(settings)}".encode()).hexdigest()[:20]


def _no_evaluation(monkeypatch) -> None:
    """Stand-ins for the model load and lm-eval: the keys and the identity are what is tested."""
    import interp.evals.run as eval_run

    monkeypatch.setattr(eval_run, "load_lm", lambda *args, **kwargs: (object(), 128))
    monkeypatch.setattr(eval_run.EvalRunner, "evaluate",
                        lambda self, lm, target, task, max_length: [{"metric": "acc", "value": 0.5, "n": 2}])


def test_batch_eval_and_ablation_rows_share_the_identity_columns(tmp_path, private_cache, monkeypatch):
    import interp.ablations.run as ablation_run
    from interp.ablations.config import AblationConfig
    from interp.ablations.many import ManyConfig, run_many
    from interp.evals.config import EvalConfig
    from interp.evals.run import run_eval
    from interp.probes.batch import BatchConfig, run_batch

    folder = tiny_model_folder("gpt2", tmp_path / "hf", seed=0)
    spec = str(folder)
    batch = run_batch(BatchConfig.build(paths=[spec], out=str(tmp_path / "b.parquet"), tokens=64, seq_len=16,
                                        batch_size=2)).table
    _no_evaluation(monkeypatch)
    evals = run_eval(EvalConfig(models=[spec], tasks="piqa", limit=2, out=str(tmp_path / "e.parquet"))).table
    monkeypatch.setattr(ablation_run, "run_pretrained_ablation",
                        lambda cfg, log=None: pd.DataFrame({"model": [cfg.model], "kind": ["baseline"], "loss": [1.0]}))
    ablation = run_many(ManyConfig(models=[spec], ablation=AblationConfig(), out=str(tmp_path / "a.parquet"))).table

    found = [df[list(IDENTITY_COLUMNS)].drop_duplicates() for df in (batch, evals, ablation)]
    assert all(len(f) == 1 for f in found), found
    assert found[0].iloc[0].to_dict() == found[1].iloc[0].to_dict() == found[2].iloc[0].to_dict()
    identity = found[0].iloc[0]
    assert identity["weights_sha256"] == _sha(folder / WEIGHTS) and identity["model_spec"] == spec
    assert identity["model_key"] == _old_model_key(folder)   # the eval tables' model_key, unchanged
    joined = batch.merge(evals, on=list(IDENTITY_COLUMNS)).merge(ablation, on=list(IDENTITY_COLUMNS))
    assert len(joined) > 0
    # one key scheme: each part named by the model's content key and the command's settings
    stems = {df["key"].iloc[0].split("-")[0] for df in (batch, evals, ablation)}
    assert stems == {hashlib.sha256(identity["model_key"].encode()).hexdigest()[:16]}


@pytest.mark.parametrize("kind", ["hf_dir", "registry"])
def test_eval_parts_keyed_by_the_old_scheme_are_done(kind, tmp_path, private_cache, monkeypatch):
    """A pair whose part is named sha256(model_key | settings)[:20] (every eval part before the one key scheme,
    runs/eval/full_set.parts among them) is skipped: nothing is loaded, evaluated or written again."""
    import interp.evals.run as eval_run
    from interp.evals import table
    from interp.evals.config import EvalConfig
    from interp.jobs.parts import parts_dir, write_part

    if kind == "registry":
        from interp.hf import REGISTRY

        if not REGISTRY["smollm2-135m"].installed():
            pytest.skip("needs SmolLM2's package")
        spec, model_key = "smollm2-135m", f"registry:smollm2-135m:{REGISTRY['smollm2-135m'].cache_key()}"
    else:
        folder = tiny_model_folder("gpt2", tmp_path / "hf", seed=1)
        spec, model_key = str(folder), _old_model_key(folder)
    out = tmp_path / "e.parquet"
    cfg = EvalConfig(models=[spec], tasks="piqa,arc_easy", limit=2, out=str(out))
    runner = eval_run.EvalRunner(cfg)
    for task in runner.tasks:
        old = _old_pair_key(model_key, runner.settings(task))
        rows = table.frame([{"metric": "acc", "value": 0.25, "n": 2}],
                           {"model": spec, "task": task, "status": "ok", "key": old, "model_key": model_key})
        parts_dir(out).mkdir(exist_ok=True)
        write_part(rows, parts_dir(out) / f"{old}.parquet")

    def no_load(*args, **kwargs):
        raise AssertionError("a pair done under its old key was evaluated again")

    monkeypatch.setattr(eval_run, "load_lm", no_load)
    result = eval_run.run_eval(cfg)
    assert result.ok and not result.evaluated and len(result.skipped) == len(runner.tasks) == 2
    assert sorted(p.stem for p in parts_dir(out).glob("*.parquet")) == sorted(
        _old_pair_key(model_key, runner.settings(task)) for task in runner.tasks)
    assert set(result.table["value"]) == {0.25} and set(result.table["model_key"]) == {model_key}


def test_batch_parts_keyed_by_the_old_scheme_are_done(tmp_path, private_cache, monkeypatch):
    """A batch part named <weights>-<settings>-<definition> (every batch part before the one key scheme) is skipped
    on a rerun and stays the model's part: nothing is probed or written again."""
    from interp.jobs.keys import part_key
    from interp.jobs.parts import parts_dir, write_part
    from interp.probes import run as probe_run
    from interp.probes.batch import BatchConfig, run_batch

    folder = tiny_model_folder("gpt2", tmp_path / "hf", seed=2)
    out = tmp_path / "b.parquet"
    cfg = BatchConfig.build(paths=[str(folder)], out=str(out), tokens=64, seq_len=16, batch_size=2)
    first = run_batch(cfg).table
    (part,) = parts_dir(out).glob("*.parquet")
    rows = pd.read_parquet(part)
    others = sorted(f for f in folder.iterdir() if f.is_file() and f.name != WEIGHTS)
    definition = hashlib.sha256("".join(f"{f.name} {_sha(f)}\n" for f in others).encode()).hexdigest()
    old = part.with_name(f"{part_key(_sha(folder / WEIGHTS), rows.settings_hash[0], definition)}.parquet")
    write_part(rows.assign(key=old.stem), old)   # as the batch wrote it then: its marker names that key
    part.unlink()

    def no_probe(*args, **kwargs):
        raise AssertionError("a model done under its old key was probed again")

    monkeypatch.setattr(probe_run, "probe", no_probe)
    result = run_batch(cfg)
    assert result.ok and not result.analysed and result.skipped == [str(folder)]
    assert [p.name for p in parts_dir(out).glob("*.parquet")] == [old.name]
    pd.testing.assert_frame_equal(result.table.drop(columns="key"), first.drop(columns="key"))
