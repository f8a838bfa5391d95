"""Execute notebooks in FULL mode, in place, and stamp what their committed outputs came from.

    .venv/bin/python scripts/run_notebooks.py notebooks/explore.ipynb
    .venv/bin/python scripts/run_notebooks.py --all          # every notebooks/*.ipynb, one after the other

Run it with the venv's python: the notebooks' "python3" kernel is started with the interpreter that runs this
script (jupyter_client puts sys.executable in place of the kernel spec's bare "python").

Each notebook runs top to bottom in a fresh kernel, with INTERP_NB_QUICK unset (the real settings) and
INTERP_NB_RUNS pointing at a temporary folder (removed afterwards; --runs DIR keeps the training runs there), so
nothing but the .ipynb changes in the repository. There is no time limit per cell; every cell's index and
seconds are logged to stderr as it finishes. A cell that raises stops the run and leaves the file as it was.
Progress bars are switched off, and widget outputs dropped (their view is not saved with the file).

The stamp, read by tests/test_notebooks.py:
  cell.metadata["interp"] = {"source_sha256": sha256 of the cell's source, "elapsed_s": its seconds}
  nb.metadata["interp"]   = {"quick": false, "date", "git_commit", "hardware", "packages", "elapsed_s",
                             "code": {repository file the kernel imported: code_sha256 of it}}
A committed cell whose source no longer matches its source_sha256 was edited after the outputs were made, and a
repository module the notebook ran (interp/, analyses/) whose code no longer matches its code_sha256 changed
after they were made: the test names either and this command. code_sha256 hashes the module's syntax tree without
docstrings, so a docstring, comment or formatting edit keeps the outputs current; any other change asks for a
rerun, which is the only check that the outputs did not move (a refactor that leaves them alone still costs one).
"""

from __future__ import annotations

import argparse
import ast
import datetime
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import nbformat

from interp._util.paths import REPO_ROOT
from interp._util.provenance import git_commit, hardware_label, package_versions

NOTEBOOKS = REPO_ROOT / "notebooks"
KERNEL = "python3"
STAMP = "interp"   # the metadata key, in the notebook and in each code cell
WIDGET = "application/vnd.jupyter.widget-view+json"


def source_sha256(source: str) -> str:
    """What a code cell's stamp records: the sha256 of its source text (UTF-8)."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return tree


def code_sha256(path: Path) -> str:
    """What the notebook stamp records of a module it ran: the sha256 of its syntax tree without docstrings (a
    comment, docstring or formatting edit keeps it; a change of code does not). A file that no longer parses or
    exists gives "" (never equal to a stamp)."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return ""
    return hashlib.sha256(ast.dump(_strip_docstrings(tree)).encode("utf-8")).hexdigest()


CODE_ROOTS = ("interp", "analyses")   # the repository's code a notebook's outputs depend on
# the cell appended for the run and removed before the notebook is written: which modules did the kernel import?
_MODULES_CELL = ("import json as _j, sys as _s\n"
                 "print(_j.dumps(sorted({getattr(m, '__file__', None) or '' for m in list(_s.modules.values())})))")


def code_stamp(files: list[str], root: Path = REPO_ROOT) -> dict[str, str]:
    """{path relative to `root`: code_sha256} of the .py files among `files` under root/CODE_ROOTS."""
    stamp = {}
    for name in files:
        path = Path(name)
        if path.suffix == ".py" and path.is_absolute() and path.resolve().is_relative_to(root):
            relative = path.resolve().relative_to(root)
            if relative.parts[0] in CODE_ROOTS:
                stamp[relative.as_posix()] = code_sha256(path)
    return dict(sorted(stamp.items()))


def stale_code(stamped: dict[str, str], root: Path = REPO_ROOT) -> list[str]:
    """The stamped modules whose code changed (or vanished) since the stamp: what the test names."""
    return [name for name, digest in stamped.items() if code_sha256(root / name) != digest]


def rerun_command(path: Path) -> str:
    """The command that refreshes one committed notebook, as error messages print it."""
    path = Path(path).resolve()
    shown = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
    return f"python scripts/run_notebooks.py {shown}"


def kernel_env(quick: bool, runs: Path) -> dict[str, str]:
    """The kernel's environment: ours, with INTERP_NB_QUICK set (quick) or removed (full), INTERP_NB_RUNS=runs,
    and no progress bars (huggingface_hub's switch, which transformers follows too): a saved progress widget
    shows as a frozen "0%" line."""
    env = {k: v for k, v in os.environ.items() if k != "INTERP_NB_QUICK"}
    env["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    if quick:
        env["INTERP_NB_QUICK"] = "1"
    env["INTERP_NB_RUNS"] = str(runs)
    return env


def execute(nb: nbformat.NotebookNode, env: dict[str, str], cwd: Path = NOTEBOOKS, timeout: int | None = None,
            log: Callable[[str], None] | None = None) -> dict[int, float]:
    """Run every code cell of `nb` (in place) in a fresh "python3" kernel started in `cwd` with `env`.

    timeout: seconds per cell, None = no limit (a slow machine is slow, not failed). log: called with one line per
    cell as it finishes ("  cell 4: 12.3 s"). Returns {cell index: seconds}. Raises nbclient's CellExecutionError
    on the first cell that raises."""
    from nbclient import NotebookClient

    started: dict[int, float] = {}
    elapsed: dict[int, float] = {}

    def on_start(cell, cell_index):
        started[cell_index] = time.perf_counter()

    def on_done(cell, cell_index, execute_reply):
        elapsed[cell_index] = time.perf_counter() - started[cell_index]
        if log is not None:
            log(f"  cell {cell_index}: {elapsed[cell_index]:.1f} s")

    client = NotebookClient(nb, kernel_name=KERNEL, timeout=timeout, record_timing=False,
                            resources={"metadata": {"path": str(cwd)}},
                            on_cell_execute=on_start, on_cell_executed=on_done)
    client.execute(env=env)
    return elapsed


def drop_widgets(nb: nbformat.NotebookNode) -> None:
    """Remove widget outputs (tqdm's notebook bars, when a library ignores the switch above) and the widget state:
    a widget's view is not saved with the file, so it would show as the text of its first frame."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if WIDGET not in o.get("data", {})]
    nb.metadata.pop("widgets", None)


def stamp(nb: nbformat.NotebookNode, elapsed: dict[int, float], quick: bool, code: dict[str, str]) -> None:
    """Write the cell and notebook stamps (module docstring) into `nb`; `code`: code_stamp of what it imported."""
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            cell.metadata[STAMP] = {"source_sha256": source_sha256(cell.source),
                                    "elapsed_s": round(elapsed.get(index, 0.0), 1)}
    nb.metadata[STAMP] = {
        "quick": quick,
        "date": datetime.date.today().isoformat(),
        "git_commit": git_commit(),
        "hardware": hardware_label(),
        "packages": package_versions(),
        "elapsed_s": round(sum(elapsed.values()), 1),
        "code": code,
    }


def machine_paths(nb: nbformat.NotebookNode) -> list[str]:
    """Outputs that name this machine's folders (the repository, the home folder, the temp folder): they make
    the committed outputs differ between machines. Returned as "cell N: the path", for a warning."""
    roots = {str(REPO_ROOT), str(Path.home()), tempfile.gettempdir()}
    found = []
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            text = output.get("text", "") + "".join(str(v) for k, v in output.get("data", {}).items()
                                                  if k.startswith("text/"))
            for root in sorted(roots, key=len, reverse=True):
                for match in re.findall(re.escape(root) + r"[^\s'\"]*", text):
                    found.append(f"cell {index}: {match}")
    return sorted(set(found))


def run_notebook(path: Path, runs: Path | None = None) -> float:
    """Execute one notebook in full mode and rewrite it with its outputs and stamps. Returns its seconds."""
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    print(f"{path}: executing in full mode", file=sys.stderr, flush=True)
    nb.cells.append(nbformat.v4.new_code_cell(_MODULES_CELL))
    try:
        with tempfile.TemporaryDirectory(prefix="interp-nb-runs-") as tmp:
            elapsed = execute(nb, kernel_env(quick=False, runs=Path(runs or tmp)), cwd=path.resolve().parent,
                              log=lambda line: print(line, file=sys.stderr, flush=True))
    finally:
        modules_cell = nb.cells.pop()
    elapsed.pop(len(nb.cells), None)
    imported = json.loads("".join(o.get("text", "") for o in modules_cell.outputs if o.output_type == "stream"))
    drop_widgets(nb)
    stamp(nb, elapsed, quick=False, code=code_stamp(imported))
    nbformat.validate(nb)
    nbformat.write(nb, path)
    for line in machine_paths(nb):
        print(f"{path}: warning: an output names a machine path ({line})", file=sys.stderr)
    total = sum(elapsed.values())
    print(f"{path}: {total:.1f} s over {len(elapsed)} code cells, written", file=sys.stderr, flush=True)
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="the .ipynb files to execute and rewrite")
    parser.add_argument("--all", action="store_true", help="every notebooks/*.ipynb")
    parser.add_argument("--runs", type=Path, default=None,
                        help="INTERP_NB_RUNS for the kernels (default: a temporary folder, removed afterwards)")
    args = parser.parse_args(argv)
    paths = sorted(NOTEBOOKS.glob("*.ipynb")) if args.all else args.notebooks
    if not paths:
        parser.error("name one or more notebooks, or --all")
    missing = [str(p) for p in paths if not Path(p).is_file()]
    if missing:
        parser.error(f"no such notebook: {', '.join(missing)}")
    for path in paths:
        run_notebook(path, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
