"""The notebooks: committed without outputs, and executed end to end (small settings) with nbclient.

Execution uses the "python3" kernel; jupyter_client starts a kernel spec whose argv[0] is "python" with
the interpreter running this test (sys.executable), so the venv's ipykernel runs it (the first code cell
of explore.ipynb prints sys.executable and the test checks it). INTERP_NB_QUICK=1 shrinks the notebooks'
tokens and steps; INTERP_NB_RUNS puts their training runs in a temporary folder.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
import pytest

from interp._util.paths import REPO_ROOT

NOTEBOOKS = REPO_ROOT / "notebooks"
NAMES = ("explore.ipynb", "tapered_training.ipynb")
KERNEL = "python3"


@pytest.mark.parametrize("name", NAMES)
def test_committed_notebooks_have_no_outputs(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, f"{name} has no code cells"
    dirty = [i for i, c in enumerate(nb.cells)
             if c.cell_type == "code" and (c.outputs or c.execution_count is not None)]
    assert not dirty, f"{name}: cells {dirty} carry outputs or execution counts; clear them before committing"
    assert nb.metadata.kernelspec.name == KERNEL
    assert "INTERP_NB_QUICK" in code[0].source  # the quick switch is set at the top


def test_kernel_runs_this_interpreter():
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec(KERNEL)
    # jupyter_client replaces a bare "python" with sys.executable when it starts the kernel
    assert spec.argv[0] in ("python", "python3", sys.executable), spec.argv
    assert spec.argv[1:3] == ["-m", "ipykernel_launcher"]


@pytest.mark.integration
@pytest.mark.parametrize("name", NAMES)
def test_notebook_executes_quickly(name, tmp_path, monkeypatch):
    from nbclient import NotebookClient

    monkeypatch.setenv("INTERP_NB_QUICK", "1")
    monkeypatch.setenv("INTERP_NB_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, kernel_name=KERNEL, timeout=300, resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    elapsed = time.perf_counter() - start
    print(f"{name}: executed in {elapsed:.1f} s")
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 2, "every notebook draws at least two figures"
    if name == "explore.ipynb":
        first = nb.cells[1].outputs[0].text.strip()
        assert Path(first) == Path(sys.executable), "the kernel must be this venv's interpreter"
