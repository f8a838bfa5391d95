"""Bad inputs of `interp train`'s scale options (issue #15 part 2), through the real CLI (tests/badinput.py): exit
2, one clear line, nothing else changed. A sharded run's state is checked before any data is prepared: the
scratch folders have the corpus but no token cache, so building one would show up as a changed file.

The template run is `parallel=fsdp` in one process (its train state goes through DCP without a process group),
micro preset, stopped after step 2 of 4.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.badinput import Case, _in, cases_of, check_case, copy_run
from tests.factories import write_corpus

OUT = "runs/x"
LOCK = f"{OUT}/.lock"
MICRO = ["train", "--preset", "micro", "--source", "corpus", "--val-fraction", "0.25", "--threads", "1",
         "--steps", "4", "--out", OUT]
FSDP = [*MICRO, "--parallel", "fsdp"]


@functools.cache
def _template() -> Path:
    from interp.training import TrainConfig, Trainer

    root = Path(tempfile.mkdtemp(prefix="interp-bad-fsdp-"))
    atexit.register(shutil.rmtree, root, True)
    with _in(root, {"INTERP_CACHE_DIR": str(root / "cache")}):
        write_corpus(root / "corpus", n_docs=40, sentences=60)
        cfg = TrainConfig.from_preset("micro", source="corpus", val_fraction=0.25, threads=1, steps=4,
                                      parallel="fsdp", out_dir="runs/stopped")
        Trainer(cfg).run(stop_at=2)
    return root


def stopped(change=None):
    """setup: the corpus and a copy of the stopped sharded run at runs/x (no token cache), then change(run)."""
    def setup(tmp: Path) -> None:
        shutil.copytree(_template() / "corpus", tmp / "corpus")
        copy_run(_template(), _template() / "runs" / "stopped", tmp / OUT)
        if change:
            change(tmp / OUT)
    return setup


Case("train-parallel-unknown", item="new", argv=[*MICRO, "--parallel", "zero"],
     setup=lambda tmp: shutil.copytree(_template() / "corpus", tmp / "corpus"),
     message=r"^interp train: error: argument --parallel: invalid choice: 'zero'")
Case("train-fsdp-sharded-state-deleted", item="new", argv=[*FSDP, "--resume"],
     setup=stopped(lambda run: shutil.rmtree(run / "train_state.dcp")), may_change=(LOCK,),
     message=r"runs/x/train_state\.pt: names the sharded state 'train_state\.dcp/step_000002', which is missing or "
             r"incomplete .*restore that folder from a copy, or delete train_state\.pt")
Case("train-fsdp-sharded-state-incomplete", item="new", argv=[*FSDP, "--resume"],
     setup=stopped(lambda run: (run / "train_state.dcp" / "step_000002" / ".metadata").unlink()),
     may_change=(LOCK,), message=r"runs/x/train_state\.pt: names the sharded state .* \(no \.metadata\)")
Case("train-fsdp-resumed-as-ddp", item="new", argv=[*MICRO, "--resume"], setup=stopped(), may_change=(LOCK,),
     message=r"runs/x/config\.json: was written by a different run config; differing fields: parallel: 'fsdp' -> "
             r"'ddp'")


@pytest.mark.parametrize("case", cases_of("train-parallel-") + cases_of("train-fsdp-"), ids=lambda c: c.id)
def test_case(case, tmp_path):
    check_case(case, tmp_path)


def test_consolidate_refuses_a_run_without_sharded_state(tmp_path):
    """A DDP / single-process run already has complete weights: consolidation says so and writes nothing."""
    from interp._util.errors import InputError
    from interp.training import TrainConfig, Trainer, consolidate

    with _in(tmp_path, {"INTERP_CACHE_DIR": str(_template() / "cache")}):
        shutil.copytree(_template() / "corpus", tmp_path / "corpus")
        Trainer(TrainConfig.from_preset("micro", source="corpus", val_fraction=0.25, threads=1, steps=2,
                                        out_dir="plain")).run()
        before = sorted(p.name for p in (tmp_path / "plain").iterdir())
        with pytest.raises(InputError, match=r"plain/train_state\.pt: holds no sharded state"):
            consolidate("plain", "out")
        assert sorted(p.name for p in (tmp_path / "plain").iterdir()) == before and not Path("out").exists()
