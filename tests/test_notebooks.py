"""The notebooks: committed WITH the outputs of a full run of their current source, and executed end to end
(quick settings) with nbclient.

Committed outputs come from `python scripts/run_notebooks.py NOTEBOOK`, which runs the notebook in full mode and
stamps each code cell with the sha256 of its source: a cell edited after that run no longer matches its stamp, and
the test names it and the command; so is one whose repository modules (interp/, analyses/: the stamp's code
hashes) changed since. The CI run (INTERP_NB_QUICK=1: fewer tokens and steps) executes an in-memory
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
from scripts.run_notebooks import (KERNEL, STAMP, code_sha256, code_stamp, execute, kernel_env, rerun_command,
                                   source_sha256, stale_code)

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


@pytest.mark.parametrize("name", NAMES)
def test_committed_notebooks_are_current_with_the_code_they_ran(name):
    """A stamp records the code hash of every repository module the kernel imported (scripts/run_notebooks.py);
    one that changed since (docstrings, comments and formatting aside) makes the committed outputs stale. A stamp
    from before this check records none: the test says so and is skipped until the notebook's next full run."""
    path = NOTEBOOKS / name
    stamp = nbformat.read(path, as_version=4).metadata.get(STAMP, {})
    if "code" not in stamp:
        pytest.skip(f"{name}: its stamp ({stamp.get('date', 'undated')}) predates the code check; "
                    f"run {rerun_command(path)}")
    assert stamp["code"], f"{name}: its stamp records no module of interp/ or analyses/: run {rerun_command(path)}"
    changed = stale_code(stamp["code"])
    assert not changed, (f"{name}: {len(changed)} module(s) it ran changed since its outputs were made "
                         f"({', '.join(changed[:6])}{', ...' if len(changed) > 6 else ''}): run "
                         f"{rerun_command(path)}")


def test_the_readme_times_are_the_notebooks_own():
    """notebooks/README.md's "full run here" column gives each notebook's recorded total (metadata.interp.elapsed_s)."""
    import re

    readme = (NOTEBOOKS / "README.md").read_text()
    for name in NAMES:
        row = next(line for line in readme.splitlines() if line.startswith(f"| `{name}`"))
        seconds = int(re.search(r"\| ([\d,]+) s\b[^|]*\|$", row).group(1).replace(",", ""))
        recorded = nbformat.read(NOTEBOOKS / name, as_version=4).metadata["interp"]["elapsed_s"]
        assert seconds == round(recorded), (name, seconds, recorded)


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


def test_the_code_stamp_ignores_docstrings_and_formatting_but_not_code(tmp_path):
    module = tmp_path / "interp" / "m.py"
    module.parent.mkdir()
    module.write_text('"""doc"""\n\ndef f(x):\n    """what f does"""\n    return x + 1  # one\n')
    stamped = code_stamp([str(module), str(tmp_path / "elsewhere.py"), "", "/usr/lib/python3/x.py"], root=tmp_path)
    assert list(stamped) == ["interp/m.py"]
    module.write_text('"""another doc"""\ndef f(x):\n    """changed words"""\n    return (x +\n            1)\n')
    assert stale_code(stamped, root=tmp_path) == []
    module.write_text('def f(x):\n    return x + 2\n')
    assert stale_code(stamped, root=tmp_path) == ["interp/m.py"]
    module.unlink()
    assert stale_code(stamped, root=tmp_path) == ["interp/m.py"] and code_sha256(module) == ""


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
