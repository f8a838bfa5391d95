"""The README's tour runs: every command of its CLI tour and its Python API snippet, executed in a scratch
folder, as the notebooks are executed (tests/test_notebooks.py).

Commands run as written, the training lines with their steps capped by the one documented variable
(INTERP_MAX_STEPS=3, interp.training.config.max_steps); the experiment, ablation and figures lines with QUICK
arguments appended (a dry run for the experiment grids, small ablation settings, a scratch figures folder) and the tour's placeholders (/path/to/..., my_text.txt)
replaced by real files; what the README promises (flag names, accepted model kinds, outputs) is what is
exercised. The fast test only parses every command with the real parser, so a renamed flag fails in seconds.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from interp._util.paths import REPO_ROOT
from tests.launch import torchrun

README = REPO_ROOT / "README.md"

MAX_STEPS = "3"   # INTERP_MAX_STEPS for the whole tour: every training line runs as written, 3 steps long
# Appended to commands starting with these words (first match wins): fast settings, same code paths. The other
# lines run as written: training (interp train, torchrun; INTERP_MAX_STEPS shortens them), probe, batch, taper,
# export, data. What is left here: the experiment grids (dozens of runs; they write the repository's figures/),
# the SmolLM2 ablation at its defaults (minutes) and the figures lines (they write figures/; --recompute is
# `make figures` itself).
QUICK: tuple[tuple[str, list[str]], ...] = (
    ("interp experiment", ["--dry-run", "--out", "{tmp}/figures"]),
    ("interp ablate", ["--seq-len", "64", "--score-sequences", "2", "--eval-sequences", "4",
                       "--fractions", "0.5", "--seeds", "0", "--skip-layers", "none"]),
    ("interp figures --recompute", None),  # is `make figures` itself: parsed only
    ("interp figures", ["--figures-dir", "{tmp}/figures"]),
)


def _block(heading: str, language: str) -> str:
    text = README.read_text()
    section = text.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    match = re.search(rf"```{language}\n(.*?)```", section, re.S)
    assert match, f"README section {heading!r} has no ```{language} block"
    return match.group(1)


def tour_commands() -> list[list[str]]:
    """The CLI tour's commands as argv lists, comments and `source` lines dropped."""
    commands = []
    for line in _block("CLI tour", "bash").splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith(("source", "#")):
            commands.append(shlex.split(line))
    return commands


def quick(argv: list[str], tmp: Path, hf_dir: Path, text_file: Path) -> list[str] | None:
    line = " ".join(argv)
    extra: list[str] | None = []
    for prefix, args in QUICK:
        if line.startswith(prefix):
            extra = args
            break
    if extra is None:
        return None
    argv = [str(hf_dir) if a == "/path/to/any-hf-dir-or-file.gguf" else str(text_file) if a == "my_text.txt" else a
            for a in argv]
    return argv + [a.format(tmp=tmp) for a in extra]


def test_tour_commands_parse():
    from interp.cli import build_parser

    commands = tour_commands()
    assert len(commands) >= 15, "the README's CLI tour lost its commands"
    parser = build_parser()
    for argv in commands:
        args = argv[argv.index("interp.cli") + 1:] if argv[0] == "torchrun" else argv[1:]
        assert argv[0] in ("interp", "torchrun"), argv
        parser.parse_args(args)  # SystemExit on an unknown flag or command


@pytest.mark.integration
@pytest.mark.slow
def test_tour_runs(tmp_path, save_pretrained_dir, smollm2_tokenizer):
    from tests.factories import SMOLLM2_VOCAB, tiny_hf

    # a Llama with random tiny weights (2 layers, d_model 64, d_mlp 128) and SmolLM2's tokenizer
    llama = tiny_hf("LlamaForCausalLM", vocab_size=SMOLLM2_VOCAB, d_model=64, d_mlp=128, n_layers=2, n_ctx=512)
    hf_dir = save_pretrained_dir("hf-llama", llama, smollm2_tokenizer)
    text_file = tmp_path / "my_text.txt"
    from interp.data import heldout_text

    text_file.write_text(heldout_text("wiki", "val")[:200_000])
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "2",
           "INTERP_MAX_STEPS": MAX_STEPS,
           "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    ran = 0
    for argv in tour_commands():
        cmd = quick(argv, tmp_path, hf_dir, text_file)
        if cmd is None:
            continue
        if cmd[0] == "interp":
            out = subprocess.run([sys.executable, "-m", "interp.cli", *cmd[1:]], cwd=tmp_path, env=env,
                                 capture_output=True, text=True, timeout=3600)  # a hang, not a slow machine
        else:  # torchrun: the README's flags, plus --standalone (a free port of its own)
            out = torchrun(cmd[1:], env=env, cwd=tmp_path, nproc=None, timeout=3600)
        assert out.returncode == 0, f"{' '.join(argv)}\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
        if "train" in cmd and argv == cmd:   # a training line, as written: the cap shortened it and said so
            assert f"by INTERP_MAX_STEPS={MAX_STEPS}" in out.stderr or "--resume" in cmd, argv
        ran += 1
    assert ran >= 15
    assert (tmp_path / "runs" / "cosine" / "result.json").is_file()
    assert (tmp_path / "results" / "batch.parquet").is_file()
    assert (tmp_path / "results" / "smollm2.parquet").is_file()


@pytest.mark.integration
@pytest.mark.slow
def test_python_tour_runs(tmp_path, monkeypatch):
    code = _block("Python API tour", "python")            # as written, its training capped like the CLI tour's
    monkeypatch.setenv("INTERP_MAX_STEPS", MAX_STEPS)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code, str(README), "exec"), namespace)  # noqa: S102 - the README's own snippet
    assert namespace["param_counts"](namespace["cfg"])["total"] > 0
    assert set(namespace["df"]["metric"]) >= {"rho_mlp", "rho_block"}
    assert (namespace["result"]["status"], namespace["result"]["step"]) == ("done", int(MAX_STEPS))


def test_first_screen_and_docs_index():
    """The README's first screen holds the pitch, the two commands and the task table; docs/README.md names every
    page of docs/ (a new page without a line fails here)."""
    first_screen = "\n".join(README.read_text().splitlines()[:40])
    for needed in ("Tapered Language Model", "make figures", "make test", "| task | one command | read |"):
        assert needed in first_screen, needed
    index = (REPO_ROOT / "docs" / "README.md").read_text()
    pages = sorted(p.name for p in (REPO_ROOT / "docs").glob("*.md") if p.name != "README.md")
    assert [p for p in pages if f"]({p})" not in index] == []
