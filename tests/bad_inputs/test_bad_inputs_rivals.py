"""Bad inputs of the symmetric width shapes (middle-heavy, x-shaped) and of `interp ablate rivals` (issue 14
section 4): each case runs the real CLI (tests/badinput.py) and must exit 2 with one clear line, before any
data is prepared and with nothing outside its expected outputs changed.

`interp train` cases have a corpus in the scratch folder but no token cache: a config error found after the
tokenizer was trained would show up as a changed file. Experiment cases pass an absolute --root and
--figures-dir inside the scratch folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.badinput import Case, cases_of, check_case

TRAIN = ["train", "--preset", "micro", "--set", "n_layers=4", "--source", "corpus", "--val-fraction", "0.25",
         "--threads", "1", "--steps", "4", "--out", "runs/x"]
RIVALS = ["ablate", "rivals", "--preset", "micro", "--set", "n_layers=4", "--seeds", "1", "--steps", "1",
          "--root", "{tmp}/R", "--figures-dir", "{tmp}/fig"]


def corpus(tmp: Path) -> None:
    from tests.factories import write_corpus

    write_corpus(tmp / "corpus", n_docs=24, sentences=40, sentence_len=8)


def shape(name: str, start: str, end: str) -> list[str]:
    return [*TRAIN, "--schedule", name, "--start", start, "--end", end]


# --- the shapes through `interp train --schedule` -------------------------------------------------------------
for what, (argv, message) in {
        "middle-heavy-reversed": (shape("middle-heavy", "1.5", "0.5"),
                                  (r"schedule='middle-heavy' needs start < end \(start = the edge layers' ratio, end = "
                                   r"the centre's\), got start=1.5, end=0.5; swap them, or use schedule='x-shaped'")),
        "x-shaped-reversed": (shape("x-shaped", "0.5", "1.5"),
                              r"schedule='x-shaped' needs start > end .*got start=0.5, end=1.5; swap them"),
        "x-shaped-flat": (shape("x-shaped", "1", "1"), r"start == end \(1\) is no profile.*use schedule='uniform'"),
        "middle-heavy-off-budget": (shape("middle-heavy", "0.25", "1.25"),
                                    r"start=0.25 and end=1.25 \(use end = 2 - start = 1.75\) average 0.75, not 1"),
        "middle-heavy-negative": (shape("middle-heavy", "-0.5", "2.5"), r"WidthSpec.start must be a positive, finite"),
        "x-shaped-nan": (shape("x-shaped", "nan", "0.5"), r"WidthSpec.start must be a positive, finite"),
        "middle-heavy-too-narrow": (shape("middle-heavy", "0.1", "1.9"),
                                    (r"start=0.1 makes a width of .*rounds to 0 at multiple=16; the minimum start "
                                     r"ratio that works is about 0.25")),
        "x-shaped-two-layers": ([*shape("x-shaped", "1.5", "0.5"), "--set", "n_layers=2"],
                                (r"n_layers=2, d_ff=64: n_layers must be >= 3, got 2 \(a symmetric profile needs "
                                 r"two edge layers and a centre")),
        "x-shaped-multiple": ([*shape("x-shaped", "1.5", "0.5"), "--multiple", "48"],
                              r"not divisible by multiple=48"),
        "unknown-shape-flag": (shape("hourglass", "1.5", "0.5"), r"argument --schedule: invalid choice: 'hourglass'"),
        "unknown-shape-set": ([*TRAIN, "--set", 'schedule="hourglass"'],
                              (r"WidthSpec.schedule='hourglass' is unknown; valid: uniform, linear, cosine, sigmoid, "
                               r"middle-heavy, x-shaped, profile, measured")),
}.items():
    Case(f"rivals-train-{what}", item="new", argv=argv, setup=corpus,
         message=rf"^interp train: .*{message}" if not message.startswith("argument") else message)

# --- `interp ablate rivals` -----------------------------------------------------------------------------------
Case("rivals-micro-too-shallow", item="new", argv=[a for a in RIVALS if a != "n_layers=4" and a != "--set"],
     message=r"^interp ablate rivals: .*middle-heavy 0.5->1.5->0.5.*n_layers=2.*n_layers must be >= 3")
Case("rivals-unknown-variant", item="new", argv=[*RIVALS, "--only", "hourglass"],
     message=r"^interp ablate rivals: only=\['hourglass'\]: unknown variant\(s\); choose from uniform, "
             r"cosine-1.5-0.5, cosine-0.5-1.5, middle-heavy-0.5-1.5-0.5, x-shaped-1.5-0.5-1.5")
Case("rivals-dtype-choice", item="new", argv=[*RIVALS, "--dtype", "fp16"],
     message=r"argument --dtype: invalid choice: 'fp16' \(choose from 'fp32', 'bf16', 'auto'\)")
Case("rivals-dtype-twice", item="new", argv=[*RIVALS, "--set", 'dtype="bf16"'],
     message=r"^interp ablate rivals: Config.dtype='fp32' and --set dtype='bf16' disagree: give the precision once")
Case("rivals-set-schedule", item="new", argv=[*RIVALS, "--set", 'schedule="x-shaped"'],
     message=r"^interp ablate rivals: Experiment.overrides may not set \['schedule'\]")
Case("rivals-multiple-infeasible", item="new", argv=[*RIVALS, "--set", "multiple=48"],
     message=r"^interp ablate rivals: .*not divisible by multiple=48")
Case("rivals-seeds-zero", item="new", argv=[*RIVALS, "--seeds", "0"], message=r"^interp ablate rivals: --seeds must be >= 1")
Case("rivals-figures-dir-is-a-file", item="new", argv=RIVALS, setup=lambda tmp: (tmp / "fig").write_text("x"),
     message=r"^interp ablate rivals: .*--figures-dir .*fig: .*fig is a file, not a folder")


@pytest.mark.parametrize("case", cases_of("rivals-"), ids=lambda c: c.id)
def test_case(case, tmp_path):
    check_case(case, tmp_path)
