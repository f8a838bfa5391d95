"""The notebooks: committed WITH the outputs of a full run of their current source, and executed end to end
(quick settings) with nbclient.

Committed outputs come from `python scripts/run_notebooks.py NOTEBOOK`, which runs the notebook in full mode and
stamps each code cell with the sha256 of its source: a cell edited after that run no longer matches its stamp, and
the test names it and the command. The CI run (INTERP_NB_QUICK=1: fewer tokens and steps) executes an in-memory
copy and never rewrites the committed file; it has no time limit per cell (a busy machine is slow, not broken) and
prints each cell's index and seconds as it finishes.

Execution uses the "python3" kernel; jupyter_client starts a kernel spec whose argv[0] is "python" with the
interpreter running this test (sys.executable), so the venv's ipykernel runs it (the first code cell of
explore.ipynb prints the kernel's interpreter and the CI run checks it). INTERP_NB_RUNS puts the notebooks'
training runs and tables in a temporary folder.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
import pytest

from interp._util.paths import REPO_ROOT
from scripts.run_notebooks import KERNEL, STAMP, execute, kernel_env, rerun_command, source_sha256

NOTEBOOKS = REPO_ROOT / "notebooks"
NAMES = ("explore.ipynb", "tapered_training.ipynb", "your_own_model.ipynb")
MIN_IMAGES = 2   # every notebook draws at least two figures


def code_cells(nb: nbformat.NotebookNode) -> list[tuple[int, nbformat.NotebookNode]]:
    return [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]


def describe(index: int, cell: nbformat.NotebookNode) -> str:
    first = next((line for line in cell.source.splitlines() if line.strip()), "")
    return f"cell {index} ({first[:60]!r})"


def outputs_of(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [o for _, c in code_cells(nb) for o in c.outputs]


def png_count(nb: nbformat.NotebookNode) -> int:
    return sum("image/png" in o.get("data", {}) for o in outputs_of(nb))


def test_every_notebook_is_listed():
    assert sorted(NAMES) == sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))


@pytest.mark.parametrize("name", NAMES)
def test_committed_notebooks_carry_the_outputs_of_their_source(name):
    path = NOTEBOOKS / name
    rerun = rerun_command(path)
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = code_cells(nb)
    assert code, f"{name} has no code cells"
    assert nb.metadata.kernelspec.name == KERNEL
    assert "INTERP_NB_QUICK" in code[0][1].source  # the quick switch is set at the top
    assert nb.metadata.get(STAMP, {}).get("quick") is False, \
        f"{name}: its outputs do not come from a full run (no notebook stamp with quick=false): run {rerun}"
    not_run = [describe(i, c) for i, c in code if c.execution_count is None]
    assert not not_run, f"{name}: {', '.join(not_run)} never executed: run {rerun}"
    counts = [c.execution_count for _, c in code]
    assert counts == list(range(1, len(code) + 1)), \
        f"{name}: execution counts {counts}: not one run from the top in a fresh kernel: run {rerun}"
    stale = [describe(i, c) for i, c in code
             if c.metadata.get(STAMP, {}).get("source_sha256") != source_sha256(c.source)]
    assert not stale, (f"{name}: {', '.join(stale)} changed since its outputs were made (the source no longer "
                       f"matches the stamped source_sha256): run {rerun}")
    errors = [describe(i, c) for i, c in code if any(o.output_type == "error" for o in c.outputs)]
    assert not errors, f"{name}: {', '.join(errors)} committed with an error output: fix it and run {rerun}"
    assert png_count(nb) >= MIN_IMAGES, f"{name}: {png_count(nb)} PNG figures in its outputs, expected {MIN_IMAGES}+"


def test_kernel_runs_this_interpreter():
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec(KERNEL)
    # jupyter_client replaces a bare "python" with sys.executable when it starts the kernel
    assert spec.argv[0] in ("python", "python3", sys.executable), spec.argv
    assert spec.argv[1:3] == ["-m", "ipykernel_launcher"]


def test_a_stamp_follows_the_source():
    assert source_sha256("x = 1") != source_sha256("x = 2")
    assert source_sha256("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert rerun_command(NOTEBOOKS / "explore.ipynb") == "python scripts/run_notebooks.py notebooks/explore.ipynb"


@pytest.mark.integration
@pytest.mark.parametrize("name", NAMES)
def test_notebook_executes_quickly(name, tmp_path):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    for _, cell in code_cells(nb):   # a clean in-memory copy: the committed file is never written
        cell.outputs, cell.execution_count = [], None
    env = kernel_env(quick=True, runs=tmp_path / "runs")
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="2")
    print(f"{name}: quick run, no time limit per cell")
    start = time.perf_counter()
    elapsed = execute(nb, env, cwd=NOTEBOOKS, timeout=None, log=print)
    print(f"{name}: executed in {time.perf_counter() - start:.1f} s ({sum(elapsed.values()):.1f} s in cells)")
    errors = [o for o in outputs_of(nb) if o.output_type == "error"]
    assert not errors, errors
    assert png_count(nb) >= MIN_IMAGES, "every notebook draws at least two figures"
    if name == "explore.ipynb":
        shown = Path(nb.cells[1].outputs[0].text.strip())
        kernel_python = shown if shown.is_absolute() else NOTEBOOKS.parent / shown
        assert kernel_python == Path(sys.executable), "the kernel must be this venv's interpreter"
