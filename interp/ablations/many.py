"""`interp ablate MODEL MODEL ...` (or one MODEL with --executor / --jobs): the capacity ablation of many models into
one resumable table, as a job of interp.jobs (a model is a target), run locally, under torchrun or on Slurm.

Each model's rows (run_pretrained_ablation, with a status column) go to OUT.parts/<key>.parquet, key = the model's
content (interp.jobs.keys: weights and definition files of a path; a registry model's package key; a hub id with
its revision) and the hash of every AblationConfig field that changes the numbers; a rerun skips finished models.
A model that cannot be loaded or ablated is one status="failed" row. OUT is rebuilt from the parts.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from interp._util.errors import one_line
from interp._util.io import claim_parts, text_sha256
from interp.ablations.config import AblationConfig
from interp.hf.registry import REGISTRY
from interp.jobs.executors import ExecutorConfig, JobsResult, execute
from interp.jobs.keys import definition_sha256, registry_key, settings_hash, weights_sha256
from interp.jobs.parts import (check_table_outputs, failed_part, lock_task, merge_table, part_files, parts_dir,
                               sort_rows, write_part)
from interp.jobs.runner import Outcome
from interp.jobs.targets import expand_paths

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ManyConfig", "AblationJob", "run_many", "merge_only"]

NOT_SETTINGS = ("model", "revision", "threads", "device")   # where and which model: not the setting's hash
SORT_COLUMNS = ("model_spec", "kind", "group", "fraction", "selection", "seed", "layer")


@dataclass
class ManyConfig:
    """The models, one AblationConfig for all of them (its `model` is replaced per target), and the table."""

    models: list[str] = field(default_factory=list)
    ablation: AblationConfig = field(default_factory=AblationConfig)
    out: str = "results/ablation.parquet"
    csv: bool = False
    execution: ExecutorConfig = field(default_factory=ExecutorConfig)


_PLAIN_SPEC = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+-]{0,26}")   # kept as written: "spec:" + it fits the 32 kept


def _model_key(spec: str) -> str:
    """What identifies the model `spec`: a path's weights and definition files; else the spec itself (a registry
    name keys by its package version inside the loader; a hub id names its revision as MODEL@REV). A key names a
    part file, never a path: a spec that is not a plain file name (a hub id's "/", a revision's "..") or is longer
    than the key keeps of it is hashed, so it neither lands in a folder no merge reads nor collides when cut."""
    if Path(spec).expanduser().exists():
        found = expand_paths([spec])
        if len(found) == 1 and found[0].kind != "hub":
            return f"{weights_sha256(found[0])}-{definition_sha256(found[0])}"
    if spec in REGISTRY:
        return registry_key(spec)
    return f"spec:{spec}" if _PLAIN_SPEC.fullmatch(spec) else f"spec-{text_sha256(spec)[:16]}"


def _order(df: pd.DataFrame) -> pd.DataFrame:
    """By model, then the ablation's own columns (absent when every model failed: the table is the failed rows)."""
    return sort_rows(df, SORT_COLUMNS, na_position="first")


class AblationJob:
    """The ablation of several models as a job of interp.jobs (interp.jobs.runner.Job)."""

    kind = "ablation"
    prefix = "[ablate]"
    what = "the ablation table"
    progress = True

    def __init__(self, cfg: ManyConfig):
        cfg.ablation.validate()
        cfg.execution.validate()
        check_table_outputs(cfg.out, cfg.csv)
        self.cfg = cfg
        self.out = Path(cfg.out)
        self.parts = parts_dir(self.out)
        settings = {k: v for k, v in dataclasses.asdict(cfg.ablation).items() if k not in NOT_SETTINGS}
        self.settings = settings_hash(settings)

    def plan(self) -> list[str]:
        return list(dict.fromkeys(self.cfg.models))

    def prepare(self) -> None:
        pass

    def name(self, target: str) -> str:
        return target

    def merge(self) -> pd.DataFrame:
        return merge_table(self.out, _order, self.cfg.csv)

    def do(self, spec: str) -> Outcome:
        import pandas as pd

        from interp.ablations.run import run_pretrained_ablation

        key = ""
        try:
            key = f"{_model_key(spec)[:32]}-{self.settings}"
            part = self.parts / f"{key}.parquet"
            if part.is_file():
                return Outcome("skipped")
            df = run_pretrained_ablation(dataclasses.replace(self.cfg.ablation, model=spec), log=None)
            df.insert(0, "model_spec", spec)
            df["status"], df["error"], df["key"] = "ok", "", key
            write_part(df, part)
            failed_part(self.parts, spec).unlink(missing_ok=True)
            return Outcome("done")
        except Exception as err:  # one broken model must not stop the others
            message = f"{type(err).__name__}: {one_line(err)}"
            write_part(pd.DataFrame([{"model_spec": spec, "model": spec, "status": "failed", "error": message,
                                      "key": key}]), failed_part(self.parts, spec))
            return Outcome("failed", message)


def run_many(cfg: ManyConfig) -> JobsResult:
    return execute(AblationJob, cfg, cfg.execution)


def merge_only(out: str | Path, csv: bool = False) -> pd.DataFrame:
    """`interp jobs merge OUT` for an ablation table: rebuild it under task 0's lock."""
    check_table_outputs(out, csv)
    if not part_files(out):
        raise FileNotFoundError(f"{parts_dir(out)}: no parts to merge; run `interp ablate MODEL... --table {out}` "
                                "first")
    claim_parts(parts_dir(out), AblationJob.kind, out, mark=False)
    with lock_task(out, 0, f"{AblationJob.what} {out}"):
        return merge_table(out, _order, csv)

