"""The README's tour runs: every command of its CLI tour and its Python API snippet, executed in a scratch
folder, as the notebooks are executed (tests/test_notebooks.py).

The CLI tour runs line by line exactly as written, in order, with INTERP_MAX_STEPS=3 (the one
documented variable, interp.training.config.max_steps) shortening every training run; the only change to a line is
the placeholder path /path/to/any-hf-dir-or-file.gguf, which becomes a real save_pretrained directory (my_text.txt
is written into the scratch folder under that name). The Python tour runs as written under the same cap. The section
"Experiments and long runs" (the experiment grids, SmolLM2's ablation, `interp figures`, which take minutes to hours
and write the repository's figures/) is parsed with the real parser, and its experiments are planned with --dry-run
into a scratch folder.
The fast test only parses every command, so a renamed flag fails in seconds.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess

import pytest

from interp._util.paths import REPO_ROOT
from tests.launch import torchrun

README = REPO_ROOT / "README.md"

MAX_STEPS = "3"   # INTERP_MAX_STEPS for the whole tour: every training line runs as written, 3 steps long
HF_PLACEHOLDER = "/path/to/any-hf-dir-or-file.gguf"


def _blocks(heading: str, language: str) -> list[str]:
    text = README.read_text()
    section = text.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    found = re.findall(rf"```{language}\n(.*?)```", section, re.S)
    assert found, f"README section {heading!r} has no ```{language} block"
    return found


def _block(heading: str, language: str) -> str:
    return _blocks(heading, language)[0]


def _commands(block: str) -> list[list[str]]:
    """A bash block's commands as argv lists, comments and `source` lines dropped."""
    commands = []
    for line in block.splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith(("source", "#")):
            commands.append(shlex.split(line))
    return commands


def tour_commands() -> list[list[str]]:
    """The CLI tour: run verbatim by test_tour_runs."""
    [block] = _blocks("CLI tour", "bash")
    return _commands(block)


def long_commands() -> list[list[str]]:
    """The section "Experiments and long runs": parsed, the experiments planned."""
    [block] = _blocks("Experiments and long runs", "bash")
    return _commands(block)


def test_tour_commands_parse():
    from interp.cli import build_parser

    commands = tour_commands()
    assert len(commands) >= 15, "the README's CLI tour lost its commands"
    assert len(long_commands()) >= 6, "the README's long runs lost their commands"
    parser = build_parser()
    for argv in commands + long_commands():
        args = argv[argv.index("interp.cli") + 1:] if argv[0] == "torchrun" else argv[1:]
        assert argv[0] in ("interp", "torchrun"), argv
        parser.parse_args(args)  # SystemExit on an unknown flag or command


@pytest.mark.integration
@pytest.mark.slow
def test_tour_runs(tmp_path, save_pretrained_dir, smollm2_tokenizer, monkeypatch, capfd):
    """Every line of the CLI tour, as written, in order. An `interp` line runs through interp.cli.main in this process
    (what `interp` and `python -m interp.cli` run, less the ~5 s of imports each of 25 lines would pay again; the
    console script itself: tests/cli/); a torchrun line as its own processes."""
    import torch

    from interp.cli import main
    from tests.factories import SMOLLM2_VOCAB, tiny_hf

    # a Llama with random tiny weights (2 layers, d_model 64, d_mlp 128) and SmolLM2's tokenizer
    llama = tiny_hf("LlamaForCausalLM", vocab_size=SMOLLM2_VOCAB, d_model=64, d_mlp=128, n_layers=2, n_ctx=512)
    hf_dir = save_pretrained_dir("hf-llama", llama, smollm2_tokenizer)
    from interp.data import heldout_text

    (tmp_path / "my_text.txt").write_text(heldout_text("wiki", "val")[:200_000])
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "2",
           "INTERP_MAX_STEPS": MAX_STEPS,
           "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "INTERP_MAX_STEPS"):
        monkeypatch.setenv(name, env[name])
    monkeypatch.chdir(tmp_path)
    threads = torch.get_num_threads()

    def run(cmd: list[str]) -> subprocess.CompletedProcess:
        if cmd[0] == "interp":
            capfd.readouterr()
            torch.set_num_threads(2)   # as OMP_NUM_THREADS=2 gives a fresh process
            try:
                code = main(cmd[1:])
            except SystemExit as stop:   # argparse's refusal
                code = stop.code
            finally:
                torch.set_num_threads(threads)
            out = capfd.readouterr()
            return subprocess.CompletedProcess(cmd, code, out.out, out.err)
        return torchrun(cmd[1:], env=env, cwd=tmp_path, nproc=None, timeout=3600)  # + --standalone (its own port)

    for argv in tour_commands():
        cmd = [str(hf_dir) if a == HF_PLACEHOLDER else a for a in argv]
        out = run(cmd)
        assert out.returncode == 0, f"{' '.join(argv)}\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
        if "train" in cmd:   # a training line: the cap shortened it and said so
            assert f"by INTERP_MAX_STEPS={MAX_STEPS}" in out.stderr, argv
    for argv in long_commands():
        if argv[:2] == ["interp", "experiment"]:
            out = run([*argv, "--dry-run", "--out", str(tmp_path / "figures")])
            assert out.returncode == 0, f"{' '.join(argv)} --dry-run\n{out.stderr[-3000:]}"
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


def test_task_table_commands_parse():
    """Every `interp ...` command of the README's task table is one the CLI takes as written (NAME: a placeholder)."""
    from interp.cli import build_parser

    rows = [line for line in README.read_text().split("## What do you want to do?", 1)[1].split("\n## ", 1)[0]
            .splitlines() if line.startswith("| ")]
    commands = [c for line in rows for c in re.findall(r"`(interp [^`]*)`", line)]
    assert len(commands) >= 15, commands
    parser = build_parser()
    for command in commands:
        parser.parse_args(shlex.split(command.replace("NAME", "group_ablation"))[1:])  # SystemExit: not as written


def test_first_screen_and_docs_index():
    """The README's first screen holds the pitch, the two commands and the task table; docs/README.md names every
    page of docs/ (a new page without a line fails here)."""
    first_screen = "\n".join(README.read_text().splitlines()[:40])
    for needed in ("Tapered Language Model", "make figures", "make test", "| task | one command | read |"):
        assert needed in first_screen, needed
    index = (REPO_ROOT / "docs" / "README.md").read_text()
    pages = sorted(p.name for p in (REPO_ROOT / "docs").glob("*.md") if p.name != "README.md")
    assert [p for p in pages if f"]({p})" not in index] == []


def test_figures_readme_has_a_row_and_a_section_for_every_figure():
    """figures/README.md's table (command and cost) and its sections cover every PNG committed under figures/:
    three issue-34 figures once had a section and no row."""
    text = (REPO_ROOT / "figures" / "README.md").read_text()
    pngs = sorted(p.name for p in (REPO_ROOT / "figures").glob("*.png"))
    assert pngs, "no figure under figures/"
    assert [p for p in pngs if f"\n| {p} |" not in text] == []
    assert [p for p in pngs if f"\n## {p}" not in text] == []
