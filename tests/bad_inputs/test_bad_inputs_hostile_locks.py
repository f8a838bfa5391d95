"""Issue #33, locks and full disks (items 1 and 19): a lock file planted as a symlink is refused unwritten in every
command that takes one, and a disk that fills during a checkpoint save is one line naming the file, with the
previous checkpoint intact. Each through the real CLI (tests/badinput.py); the symlink's target lies inside the
scratch folder, so a write through it shows up as a changed file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.badinput import Case, cases_of, check_case
from tests.bad_inputs.test_bad_inputs_data_tokenize import TOKENIZE, _tokenized, _with
from tests.bad_inputs.test_bad_inputs_models import BATCH, CACHE, PROBE, _checkpoint
from tests.bad_inputs.test_bad_inputs_train import LOCK, MICRO, OUT, run_dir

LINK = r"is a symbolic link .*interp never writes through a link"


def _precious(tmp: Path) -> Path:
    (tmp / "precious.txt").write_text("a file outside every output folder\n")
    return tmp / "precious.txt"


def _lock_link(rel: str, base=None):
    """setup: `base` (if any), then `rel` replaced by a symlink to precious.txt."""
    def setup(tmp: Path) -> None:
        if base is not None:
            base(tmp)
        target = _precious(tmp)
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        if (tmp / rel).exists() or (tmp / rel).is_symlink():
            (tmp / rel).unlink()
        os.symlink(target, tmp / rel)
    return setup


def _hard_link(rel: str, base=None):
    def setup(tmp: Path) -> None:
        if base is not None:
            base(tmp)
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        if (tmp / rel).exists():
            (tmp / rel).unlink()
        os.link(_precious(tmp), tmp / rel)
    return setup


Case("lock-link-train-finished-run", item="33.1", setup=_lock_link(LOCK, run_dir("done")),
     argv=[*MICRO], message=LINK, may_change=("cache/*",))
Case("lock-link-train-resume", item="33.1", setup=_lock_link(LOCK, run_dir("stopped")),
     argv=[*MICRO, "--resume"], message=LINK, may_change=("cache/*",))
Case("lock-hardlink-train-resume", item="33.1", setup=_hard_link(LOCK, run_dir("stopped")),
     argv=[*MICRO, "--resume"], message=r"is a hard link", may_change=("cache/*",))
Case("lock-link-batch-rank-lock", item="33.1", setup=_lock_link("w.parts/.rank0.lock", _checkpoint),
     argv=["batch", "good1", "--out", "w.parquet", *BATCH], message=LINK, may_change=(*CACHE,))
Case("lock-link-data-tokenize-out", item="33.1", setup=_lock_link("out/.lock", _with(_tokenized())), argv=[*TOKENIZE, "--val-fraction", "0.2"],
     message=LINK, may_change=("cache/*",))


def _still_loadable(tmp: Path) -> None:
    """The failed save replaced nothing: the run's checkpoint from step 2 still loads."""
    from interp.training.checkpoints import load_checkpoint

    model, config = load_checkpoint(tmp / OUT)
    assert model is not None and "model" in config


# A 64 KB file-size limit: the micro model's weights cannot be written, as on a full disk. The run stopped after
# step 2 resumes, trains, and fails at its next save; its step-2 checkpoint must stay loadable.
Case("disk-full-during-a-checkpoint-save", item="33.19", setup=run_dir("stopped"), subprocess=True,
     fsize=64 << 10, argv=[*MICRO, "--resume"], rc=2,
     message=r"interp train: .*no room left to write it .*the previous version is unchanged",
     may_change=(f"{OUT}/*", "cache/*"), check=_still_loadable)


@pytest.mark.parametrize("case", cases_of("lock-link-") + cases_of("lock-hardlink-") + cases_of("disk-full-"),
                         ids=lambda c: c.id)
def test_case(case, tmp_path):
    check_case(case, tmp_path)
    if (tmp_path / "precious.txt").exists():
        assert (tmp_path / "precious.txt").read_text() == "a file outside every output folder\n"
