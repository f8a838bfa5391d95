"""Nothing written where it should not be (issue #33): every write in the tree goes through interp/_util/io.py.

Read from the source (ast), for interp/, analyses/, scripts/ and benchmarks/:
  - no `open(...)` / `Path.open(...)` / `os.fdopen(...)` with a writing mode (w, a, x, +) outside
    interp/_util/io.py: `safe_open` is the one way to open a file to write (never through a link; an overwrite
    replaces the entry) and `atomic_write` the one way to replace a file;
  - `.write_text` / `.write_bytes` and the writers of other libraries (torch.save, safetensors' save_file,
    savefig, to_parquet, to_csv, save_pretrained, shutil.copy*) write only to a path the enclosing function or
    lambda was given: in practice the private temporary that atomic_write hands its writer callbacks.
A line may opt out with a comment `# not-safe-open: <why>` (a /proc file, a folder made fresh by mkdtemp); the
reason must be given.
"""

from __future__ import annotations

import ast
from pathlib import Path

from interp._util.paths import REPO_ROOT

ROOTS = ("interp", "analyses", "scripts", "benchmarks")
SAFE_MODULE = REPO_ROOT / "interp" / "_util" / "io.py"
PRAGMA = "# not-safe-open:"
WRITE_METHODS = {"write_text", "write_bytes"}
SAVERS = {"save", "save_file", "savefig", "to_parquet", "to_csv", "to_json", "save_pretrained", "copy", "copy2",
          "copyfile", "copytree", "write_table", "save_model"}


def _mode(call: ast.Call) -> str | None:
    """The mode string of an open()/Path.open()/os.fdopen() call (None when not a literal)."""
    f = call.func
    position = 0 if isinstance(f, ast.Attribute) and f.attr == "open" and not _is_module(f.value, "os", "io") else 1
    if len(call.args) > position and isinstance(call.args[position], ast.Constant):
        return call.args[position].value
    for kw in call.keywords:
        if kw.arg == "mode" and isinstance(kw.value, ast.Constant):
            return kw.value.value
    return "r"


def _is_module(node: ast.expr, *names: str) -> bool:
    return isinstance(node, ast.Name) and node.id in names


def _params(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    a = node.args
    return {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]} | {x.arg for x in (a.vararg, a.kwarg) if x}


def _given(node: ast.expr, params: set[str]) -> bool:
    """`p`, `str(p)` or `os.fspath(p)` for a parameter p of the enclosing function or lambda."""
    if isinstance(node, ast.Call) and len(node.args) == 1 and ast.unparse(node.func) in ("str", "os.fspath"):
        node = node.args[0]
    return isinstance(node, ast.Name) and node.id in params


def unsafe_writes(source: str) -> list[tuple[int, str]]:
    """(line, what) of every write that bypasses interp/_util/io.py in `source` (pragma lines excepted)."""
    lines = source.splitlines()
    found: list[tuple[int, str]] = []

    def exempt(lineno: int) -> bool:
        line = lines[lineno - 1]
        return PRAGMA in line and line.split(PRAGMA, 1)[1].strip() != ""

    def visit(node: ast.AST, params: set[str]) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            params = _params(node)
        if isinstance(node, ast.Call) and not exempt(node.lineno):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name in ("open", "fdopen"):
                mode = _mode(node)
                if isinstance(mode, str) and any(c in mode for c in "wax+"):
                    found.append((node.lineno, f"{name}(..., {mode!r}): use interp._util.io.safe_open or atomic_write"))
            elif name in WRITE_METHODS or name in SAVERS:
                targets = [f.value] if name in WRITE_METHODS else [*node.args, *(k.value for k in node.keywords)]
                if name == "save" and isinstance(f, ast.Attribute) and _is_module(f.value, "nnsight"):
                    targets = []  # nnsight.save keeps a traced value; it writes no file
                if targets and not any(_given(t, params) for t in targets):
                    found.append((node.lineno, f".{name}(...) to a path this function was not given: write inside "
                                               "an atomic_write writer (or safe_open)"))
        for child in ast.iter_child_nodes(node):
            visit(child, params)

    visit(ast.parse(source), set())
    return found


def _files() -> list[Path]:
    return [p for root in ROOTS for p in sorted((REPO_ROOT / root).rglob("*.py")) if p != SAFE_MODULE]


def test_the_rule_catches_what_it_should():
    bad = unsafe_writes("def f(d):\n    open(d / 'x', 'w')\n    (d / 'y').write_text('t')\n"
                        "    torch.save(1, d / 'z')\n    with open(p, mode='a+'): pass\n")
    assert [line for line, _ in bad] == [2, 3, 4, 5]
    good = unsafe_writes("def f(d):\n    open(d)\n    atomic_write(d, {'x': lambda p: p.write_text('t')})\n"
                         "    atomic_write(d, {'y': lambda p: torch.save(1, p)})\n"
                         "    open('/proc/x', 'w')  # not-safe-open: a kernel file\n")
    assert good == []
    assert unsafe_writes("open('/proc/x', 'w')  # not-safe-open:\n")  # a pragma without a reason counts for nothing


def test_every_write_goes_through_the_safe_helpers():
    files = _files()
    assert len(files) > 100, "the scan found (almost) no source files"
    bad = [f"{path.relative_to(REPO_ROOT)}:{line}: {what}" for path in files
           for line, what in unsafe_writes(path.read_text(encoding="utf-8"))]
    assert not bad, "writes that bypass interp/_util/io.py:\n" + "\n".join(bad)
