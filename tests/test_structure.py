"""The tree shows the architecture: no import cycle inside interp/, no module over MAX_LINES, analyses/ never
imports the CLI, only the CLI imports analyses/, and every lazily exported name resolves.

The import graph is read from the source (ast), not by importing: an edge A -> B for every import statement
that runs when A is imported (module level, outside `if TYPE_CHECKING:`). `from pkg import name` points at
pkg.name when that is a module, at the submodule that pkg's lazy _EXPORTS map names, else at pkg itself.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from interp._util.paths import REPO_ROOT

INTERP = REPO_ROOT / "interp"
ANALYSES = REPO_ROOT / "analyses"
MAX_LINES = 600


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules(root: Path) -> dict[str, Path]:
    return {module_name(p): p for p in sorted(root.rglob("*.py"))}


def lazy_exports(path: Path) -> dict[str, str]:
    """The _EXPORTS literal of a package __init__ (empty when there is none)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_EXPORTS" for t in node.targets):
            return ast.literal_eval(node.value)
    return {}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def import_time_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Import statements executed at import time: module level, incl. try/if bodies, not TYPE_CHECKING."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.append(node)
            elif isinstance(node, ast.If):
                if not _is_type_checking(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)

    visit(tree.body)
    return found


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    exports = {name: lazy_exports(path) for name, path in mods.items() if path.name == "__init__.py"}
    graph: dict[str, set[str]] = {name: set() for name in mods}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in import_time_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                targets = []
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    if full in mods:
                        targets.append(full)
                    elif alias.name in exports.get(base, {}):
                        targets.append(f"{base}.{exports[base][alias.name]}")
                    else:
                        targets.append(base)
            graph[name].update(t for t in targets if t in mods and t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return found


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_inside_interp():
    graph = import_graph(modules(INTERP))
    assert sum(len(v) for v in graph.values()) > 50, "the graph builder found (almost) no imports"
    assert "interp.model.decoder" in graph["interp.model.counts"] or graph["interp.model.counts"]
    found = cycles(graph)
    assert not found, f"import cycles inside interp/: {found}"


@pytest.mark.parametrize("root", [INTERP, ANALYSES, REPO_ROOT / "benchmarks"], ids=lambda p: p.name)
def test_no_module_over_max_lines(root):
    long = {name: n for name, path in modules(root).items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them by job): {long}"


def _all_imports(path: Path) -> set[str]:
    """Every module named by any import statement in the file (function-level ones too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_analyses_never_import_the_cli():
    offenders = {name: sorted(i for i in _all_imports(path) if i == "interp.cli" or i.startswith("interp.cli."))
                 for name, path in modules(ANALYSES).items()}
    assert not {k: v for k, v in offenders.items() if v}


def test_only_the_cli_imports_analyses():
    offenders = {name: sorted(i for i in _all_imports(path) if i == "analyses" or i.startswith("analyses."))
                 for name, path in modules(INTERP).items() if not name.startswith("interp.cli")}
    assert not {k: v for k, v in offenders.items() if v}


def test_model_knows_nothing_of_probes_training_or_hf():
    for name, path in modules(INTERP / "model").items():
        bad = [i for i in _all_imports(path) if i.startswith(("interp.probes", "interp.training", "interp.hf",
                                                               "interp.ablations", "interp.plots"))]
        assert not bad, f"{name} imports {bad}"


def test_plots_read_tables_never_models():
    for name, path in modules(INTERP / "plots").items():
        bad = [i for i in _all_imports(path) if i.startswith(("torch", "interp.model", "interp.hf", "interp.probes",
                                                               "interp.training"))]
        assert not bad, f"{name} imports {bad}"


PACKAGES = sorted(name for name, path in modules(INTERP).items() if path.name == "__init__.py" and lazy_exports(path))


def test_packages_have_lazy_exports():
    assert {"interp.model", "interp.data", "interp.training", "interp.hf", "interp.probes", "interp.ablations",
            "interp.plots"} <= set(PACKAGES)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_lazy_export_resolves(package):
    module = importlib.import_module(package)
    for name, sub in lazy_exports(INTERP.parent.joinpath(*package.split("."), "__init__.py")).items():
        target = importlib.import_module(f"{package}.{sub}")
        assert hasattr(target, name), f"{package}._EXPORTS[{name!r}] = {sub!r}, but {package}.{sub} has no {name}"
        assert getattr(module, name) is getattr(target, name)
    with pytest.raises(AttributeError):
        module.no_such_name_anywhere  # noqa: B018


def test_lazy_exports_refuse_private_names():
    from interp._util.lazy import lazy_exports as make

    with pytest.raises(ValueError, match="private names"):
        make("interp.probes", {"_plan": "run"})
    getattr_, dir_, all_ = make("interp.probes", {"probe": "run"})
    assert all_ == ["probe"] and dir_() == ["probe"]
