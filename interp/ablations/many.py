"""`interp ablate MODEL MODEL ...` (or one MODEL with --executor / --jobs): the capacity ablation of many models into
one resumable table, as a job of interp.jobs (a model is a target), run locally, under torchrun or on Slurm.

Each model's rows (run_pretrained_ablation, with a status column and the identity every table shares:
weights_sha256, model_key, model_spec) go to OUT.parts/<key>.parquet, key = the model's content key (interp.jobs.keys:
weights and definition files of a path, a run folder's those of its final model; a registry model's package key; a
hub id with the commit its revision resolves to) and the hash of every AblationConfig field that changes the
numbers; a rerun skips finished models (a part under the key ablation parts had before counts too), and only while
they are the same model (a moved branch or a retrained run is ablated again). A model that cannot be loaded or
ablated is one status="failed" row. OUT is rebuilt from the parts.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from interp._util.errors import one_line
from interp.ablations.config import AblationConfig
from interp.hf.resolve import resolve_model
from interp.jobs.executors import ExecutorConfig, JobsResult, execute
from interp.jobs.keys import ablation_keys, identity, model_part_key, settings_hash
from interp.jobs.parts import (
    check_table_outputs,
    claim_parts,
    failed_part,
    lock_task,
    merge_table,
    part_files,
    parts_dir,
    sort_rows,
    write_part,
)
from interp.jobs.runner import Outcome

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["AblationJob", "ManyConfig", "merge_only", "run_many"]

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

    def _superseded(self, spec: str, rows: pd.DataFrame, part: Path) -> list[Path]:
        """The other parts of this MODEL, at the same settings and revision as `rows`: what it held before its
        content changed under the same name (so the table keeps the rows of the model as it is now)."""
        import pandas as pd

        revision = set(rows["revision"].fillna("").astype(str)) if "revision" in rows else {""}
        found = []
        for path in part_files(self.out):
            if path == part or not path.name.endswith(f"-{self.settings}.parquet"):
                continue
            old = pd.read_parquet(path)
            if "model_spec" not in old or set(old["model_spec"]) != {spec}:
                continue
            old_revision = set(old["revision"].fillna("").astype(str)) if "revision" in old else {""}
            if old_revision == revision:
                found.append(path)
        return found

    def do(self, spec: str) -> Outcome:
        import pandas as pd

        from interp.ablations.run import run_pretrained_ablation

        key = ""
        try:
            # what the model is now: a path's files (a run folder: its final model), a hub revision's commit
            source = resolve_model(spec, trust_remote_code=self.cfg.ablation.trust_remote_code,
                                   revision=self.cfg.ablation.revision).pinned()
            model_key = source.content_key()
            key = model_part_key(model_key, self.settings)
            part = self.parts / f"{key}.parquet"
            if any((self.parts / f"{name}.parquet").is_file()
                   for name in (key, *ablation_keys(source, model_key, self.settings))):
                return Outcome("skipped")
            df = run_pretrained_ablation(dataclasses.replace(self.cfg.ablation, model=spec), log=None)
            weights = source.fetched().weights_sha256()   # (a hub revision: its snapshot, fetched by the ablation)
            df.insert(0, "model_spec", spec)
            df["status"], df["error"], df["key"] = "ok", "", key
            for name, value in identity(weights, model_key, spec).items():
                df[name] = value
            write_part(df, part)
            failed_part(self.parts, spec).unlink(missing_ok=True)
            for old in self._superseded(spec, df, part):
                print(f"[ablate] {spec}: {old.name} held the rows of the model it was before (a moved branch, a "
                      "retrained run): replaced", file=sys.stderr, flush=True)
                old.unlink(missing_ok=True)
            return Outcome("done")
        except Exception as err:  # noqa: BLE001 - one broken model must not stop the others
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

