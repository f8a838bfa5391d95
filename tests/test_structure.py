"""The tree shows the architecture: no import cycle inside interp/, no import cycle between packages, a cycle
inside one package only where docs/ARCHITECTURE.md names it and says why, no module over MAX_LINES, analyses/
never imports the CLI, only the CLI imports analyses/, and every lazily exported name resolves.

Import graphs are read from the source (ast), not by importing. The import-time graph has an edge A -> B for every
import statement that runs when A is imported (module level, outside `if TYPE_CHECKING:`); the full graph adds the
imports inside functions and methods, `importlib.import_module("literal")` calls, and `pkg.name` attribute uses of a
lazily exporting package. `from pkg import name` points at pkg.name when that is a module, at the submodule that
pkg's lazy _EXPORTS map names, else at pkg itself. scripts/import_cycles.py prints the cycles these tests refuse.
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from interp._util.paths import REPO_ROOT

INTERP = REPO_ROOT / "interp"
ANALYSES = REPO_ROOT / "analyses"
ARCHITECTURE = REPO_ROOT / "docs" / "ARCHITECTURE.md"
MAX_LINES = 600

ImportNode = ast.Import | ast.ImportFrom | ast.Call
Sites = dict[str, dict[str, set[int]]]
"""importer -> imported module -> the lines (in the importer's file) that import it."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules(root: Path) -> dict[str, Path]:
    return {module_name(p): p for p in sorted(root.rglob("*.py"))}


@functools.lru_cache(maxsize=None)
def _parse(path: Path) -> ast.Module:
    """Each file is parsed once per session: both graphs and every test read the same trees."""
    return ast.parse(path.read_text(), filename=str(path))


def lazy_exports(path: Path) -> dict[str, str]:
    """The _EXPORTS literal of a package __init__ (empty when there is none)."""
    for node in _parse(path).body:
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


IMPORT_CALLS = ("import_module", "__import__")


def _called(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _literal_import_call(node: ast.AST) -> str | None:
    """The module named by `importlib.import_module("x.y")`, `import_module("x.y")` or `__import__("x.y")` with a
    literal absolute name; None for any other node (an f-string names no module the source can tell)."""
    if not (isinstance(node, ast.Call) and _called(node) in IMPORT_CALLS and node.args):
        return None
    name = node.args[0].value if isinstance(node.args[0], ast.Constant) else None
    return name if isinstance(name, str) and name and not name.startswith(".") else None


class _Walker(ast.NodeVisitor):
    """Every node that can import, anywhere in a module, except under `if TYPE_CHECKING:` (never run) and inside
    annotations (strings under `from __future__ import annotations`): imports, calls, and attribute uses."""

    def __init__(self) -> None:
        self.imports: list[ImportNode] = []
        self.attributes: list[ast.Attribute] = []
        self.dynamic: list[ast.Call] = []

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node.test):
            self.visit(node.test)
            for child in node.body:
                self.visit(child)
        for child in node.orelse:
            self.visit(child)

    def visit_Import(self, node: ast.Import) -> None:
        self.imports.append(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.imports.append(node)

    def visit_Call(self, node: ast.Call) -> None:
        if _literal_import_call(node):
            self.imports.append(node)
        elif _called(node) in IMPORT_CALLS:
            self.dynamic.append(node)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.attributes.append(node)
        self.generic_visit(node)

    def visit_arg(self, node: ast.arg) -> None:
        pass  # only the annotation lives here

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        for child in (node.target, node.value):
            if child is not None:
                self.visit(child)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for child in (*node.decorator_list, *node.args.defaults, *(d for d in node.args.kw_defaults if d),
                      *node.body):
            self.visit(child)

    visit_FunctionDef = visit_AsyncFunctionDef = _function


@functools.lru_cache(maxsize=None)
def _walk(path: Path) -> _Walker:
    walker = _Walker()
    walker.visit(_parse(path))
    return walker


def all_imports(tree: ast.Module) -> list[ImportNode]:
    """Every import anywhere in the module (function bodies, methods, nested try/if/with) and every
    import_module / __import__ call with a literal name; never what sits under `if TYPE_CHECKING:`."""
    walker = _Walker()
    walker.visit(tree)
    return walker.imports


def _package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _from_base(node: ast.ImportFrom, package: str) -> str:
    """The absolute module of `from <base> import ...`, relative levels resolved against the importer's package."""
    base = node.module or ""
    if node.level:
        anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join(anchor + ([base] if base else []))
    return base


def _targets(node: ImportNode, package: str, mods: dict[str, Path], exports: dict[str, dict[str, str]]
             ) -> list[str]:
    """The modules one import names, resolved the one way both graphs share."""
    if isinstance(node, ast.Call):
        return [name] if (name := _literal_import_call(node)) else []
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = _from_base(node, package)
    targets = []
    for alias in node.names:
        full = f"{base}.{alias.name}"
        if full in mods:
            targets.append(full)
        elif alias.name in exports.get(base, {}):
            targets.append(f"{base}.{exports[base][alias.name]}")
        else:
            targets.append(base)
    return targets


def _exports_of(mods: dict[str, Path]) -> dict[str, dict[str, str]]:
    return {name: lazy_exports(path) for name, path in mods.items() if path.name == "__init__.py"}


def import_sites(mods: dict[str, Path], collect: Callable[[ast.Module], list[ImportNode]]) -> Sites:
    """importer -> imported -> lines, for the import nodes `collect` picks from each module of `mods`."""
    exports = _exports_of(mods)
    sites: Sites = {name: {} for name in mods}
    for name, path in mods.items():
        package = _package_of(name, path)
        for node in collect(_parse(path)):
            for target in _targets(node, package, mods, exports):
                if target in mods and target != name:
                    sites[name].setdefault(target, set()).add(node.lineno)
    return sites


def _graph(sites: Sites) -> dict[str, set[str]]:
    return {name: set(imported) for name, imported in sites.items()}


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    return _graph(import_sites(mods, import_time_imports))


def _bindings(walker: _Walker, package: str, mods: dict[str, Path]) -> dict[str, str]:
    """Local name -> the module an import binds it to (`import a.b` binds a; `as` and `from` bind the alias)."""
    bound: dict[str, str] = {}
    for node in walker.imports:
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.partition(".")[0]
                bound[alias.asname or root] = alias.name if alias.asname else root
        elif isinstance(node, ast.ImportFrom):
            base = _from_base(node, package)
            for alias in node.names:
                if f"{base}.{alias.name}" in mods:
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
    return bound


def _dotted(node: ast.Attribute) -> tuple[str, list[str]] | None:
    attrs: list[str] = []
    current: ast.expr = node
    while isinstance(current, ast.Attribute):
        attrs.append(current.attr)
        current = current.value
    return (current.id, attrs[::-1]) if isinstance(current, ast.Name) else None


def lazy_attribute_sites(mods: dict[str, Path]) -> Sites:
    """`from interp import data` then `data.load_text(...)` imports interp.data.text (through the package's lazy
    __getattr__): an edge to the one submodule _EXPORTS names for that attribute, never to every submodule."""
    exports = _exports_of(mods)
    sites: Sites = {name: {} for name in mods}
    for name, path in mods.items():
        walker = _walk(path)
        bound = _bindings(walker, _package_of(name, path), mods)
        for node in walker.attributes:
            if not (dotted := _dotted(node)) or dotted[0] not in bound:
                continue
            module, attrs = bound[dotted[0]], dotted[1]
            for attr in attrs:
                if f"{module}.{attr}" in mods:
                    module = f"{module}.{attr}"
                    continue
                if attr in exports.get(module, {}):
                    target = f"{module}.{exports[module][attr]}"
                    if target in mods and target != name:
                        sites[name].setdefault(target, set()).add(node.lineno)
                break
    return sites


def full_import_sites(mods: dict[str, Path]) -> Sites:
    """Every import of every module, wherever it runs: the edges a cycle can close at run time."""
    sites: Sites = {name: {} for name in mods}
    for extra in (import_sites(mods, all_imports), lazy_attribute_sites(mods)):
        for name, imported in extra.items():
            for target, lines in imported.items():
                sites[name].setdefault(target, set()).update(lines)
    return sites


def full_import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    return _graph(full_import_sites(mods))


def dynamic_imports(mods: dict[str, Path]) -> list[str]:
    """import_module / __import__ calls whose name is computed: no graph can see them, so they are listed."""
    return [f"{_where(path, call.lineno)}  {ast.unparse(call)}" for path in mods.values()
            for call in _walk(path).dynamic]


def unit(module: str) -> str:
    """The package a module belongs to: interp.probes.backends.torch -> interp.probes; a top-level module such as
    interp.stats is its own unit, interp/__init__.py is "interp", and all of analyses/ is "analyses"."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "interp" else parts[0]


def package_sites(sites: Sites) -> dict[str, dict[str, list[tuple[str, str, int]]]]:
    """unit -> imported unit -> the (importer, imported, line) imports behind that edge; edges between units only."""
    units: dict[str, dict[str, list[tuple[str, str, int]]]] = {}
    for name, imported in sites.items():
        units.setdefault(unit(name), {})
        for target, lines in imported.items():
            if unit(target) != unit(name):
                units[unit(name)].setdefault(unit(target), []).extend((name, target, ln) for ln in sorted(lines))
    return units


def package_graph(sites: Sites) -> dict[str, set[str]]:
    return {u: set(imported) for u, imported in package_sites(sites).items()}


def intra_package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Only the edges between two modules of the same unit: the cycles a package keeps to itself."""
    return {name: {t for t in imported if unit(t) == unit(name)} for name, imported in graph.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    work: list[tuple[str, Iterator[str]]] = []

    def enter(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        work.append((v, iter(sorted(graph.get(v, ())))))

    for root in sorted(graph):
        if root in index:
            continue
        enter(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    enter(w)
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[v])
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
    return found


def cycle_chains(graph: dict[str, set[str]], component: list[str]) -> list[list[str]]:
    """For each edge u -> v inside a strongly connected component, the shortest cycle through it (u -> v -> ... -> u):
    every edge that closes a cycle shows up in some chain, without enumerating all cycles (which can explode)."""
    members = set(component)
    chains: set[tuple[str, ...]] = set()
    for u in sorted(members):
        for v in sorted(graph[u] & members):
            previous = {v: v}  # BFS from v back to u, inside the component
            queue = deque([v])
            while queue and u not in previous:
                x = queue.popleft()
                for y in sorted(graph[x] & members):
                    if y not in previous:
                        previous[y] = x
                        queue.append(y)
            back = [u]
            while back[-1] != v:
                back.append(previous[back[-1]])
            cycle = [u, *reversed(back[1:])]  # u -> v -> ... (the closing u left off)
            start = cycle.index(min(cycle))
            chains.add(tuple(cycle[start:] + cycle[:start]))
    return [[*c, c[0]] for c in sorted(chains, key=lambda c: (len(c), c))]


def _where(path: Path, line: int) -> str:
    try:
        return f"{path.relative_to(REPO_ROOT)}:{line}"
    except ValueError:
        return f"{path}:{line}"


def describe_cycle(sites: Sites, mods: dict[str, Path], component: list[str], of: Callable[[str], str]) -> str:
    """One strongly connected component of `of`-units: its cycles as chains, then each edge they use with the
    concrete module -> module imports and file:line, so a maintainer sees where to cut."""
    graph: dict[str, set[str]] = {}
    behind: dict[tuple[str, str], list[tuple[str, str, int]]] = {}
    for name, imported in sites.items():
        for target, lines in imported.items():
            a, b = of(name), of(target)
            if a != b and a in component and b in component:
                graph.setdefault(a, set()).add(b)
                behind.setdefault((a, b), []).extend((name, target, ln) for ln in sorted(lines))
    for u in component:
        graph.setdefault(u, set())
    chains = cycle_chains(graph, component)
    used = sorted({(c[i], c[i + 1]) for c in chains for i in range(len(c) - 1)})
    lines = [f"cycle among {', '.join(component)}:"]
    lines += [f"  {' -> '.join(chain)}" for chain in chains]
    lines.append("  edges:")
    for a, b in used:
        lines.append(f"    {a} -> {b}")
        lines += [f"      {_where(mods[src], ln)}  {src} -> {dst}" for src, dst, ln in sorted(
            behind[(a, b)], key=lambda s: (s[0], s[2], s[1]))]
    return "\n".join(lines)


def all_modules() -> dict[str, Path]:
    """interp/ and analyses/: the CLI reaches analyses/, so a cycle can run through it."""
    return {**modules(INTERP), **modules(ANALYSES)}


def package_cycles(sites: Sites) -> list[list[str]]:
    return cycles(package_graph(sites))


def intra_package_cycles(sites: Sites) -> list[list[str]]:
    return cycles(intra_package_graph(_graph(sites)))


ALLOWED_HEADING = re.compile(r"allowed cycles", re.IGNORECASE)
_CHAIN = re.compile(r"\s*([A-Za-z_][\w.]*(?:\s*(?:<->|->)\s*[A-Za-z_][\w.]*)+)(.*)", re.DOTALL)


@dataclass(frozen=True)
class AllowedCycle:
    """One bullet of ARCHITECTURE.md's "Allowed cycles" section: the modules of one cycle, and why."""

    line: int
    chain: str
    modules: frozenset[str]
    reason: str


def _allowed_section(text: str) -> list[tuple[int, str]] | None:
    """(line number, line) of the section whose heading contains "Allowed cycles", up to the next heading of the
    same or a higher level; None when there is no such heading. Lines in ``` fences are never headings."""
    section: list[tuple[int, str]] | None = None
    level = 0
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        heading = None if fenced else re.match(r"(#+)\s", line)
        if heading and section is not None and len(heading[1]) <= level:
            break
        if section is not None:
            section.append((number, line))
        elif heading and ALLOWED_HEADING.search(line):
            section, level = [], len(heading[1])
    return section


def parse_allowed_cycles(text: str) -> tuple[list[AllowedCycle], list[str]] | None:
    """The bullets of the "Allowed cycles" section and the lines that break the convention (no chain, no reason);
    None when the section is missing. A bullet names all modules of one cycle, `- interp.a.x <-> interp.a.y: why`
    or `- interp.a.x -> interp.a.y -> interp.a.x: why` (backticks optional), then the reason; indented lines
    continue it. The arrows are notation: the bullet stands for the set of modules it names."""
    section = _allowed_section(text)
    if section is None:
        return None
    bullets: list[tuple[int, str]] = []
    indent: int | None = None
    for number, line in section:
        bullet = re.match(r"(\s*)[-*+]\s+(.*)", line)
        if bullet and (indent is None or len(bullet[1]) <= indent):
            indent = len(bullet[1])
            bullets.append((number, bullet[2]))
        elif bullets and line.strip():
            bullets[-1] = (bullets[-1][0], f"{bullets[-1][1]} {line.strip()}")
    allowed, problems = [], []
    for number, body in bullets:
        match = _CHAIN.match(body.replace("`", ""))
        if not match:
            problems.append(f"ARCHITECTURE.md:{number}: the bullet names no cycle (`a.x <-> a.y` or `a.x -> a.y -> "
                            f"a.x`): {body.strip()[:80]}")
            continue
        names = frozenset(t.strip().rstrip(".") for t in re.split(r"\s*<->\s*|\s*->\s*", match[1].strip()))
        reason = match[2].strip(" \t:;,.-\u2013\u2014()")
        if not reason:
            problems.append(f"ARCHITECTURE.md:{number}: {match[1].strip()} says no reason why the cycle is allowed")
            continue
        if len(names) < 2:
            problems.append(f"ARCHITECTURE.md:{number}: {match[1].strip()} names one module: a cycle needs two")
            continue
        allowed.append(AllowedCycle(number, match[1].strip(), names, reason))
    return allowed, problems


def check_intra_package_cycles(sites: Sites, mods: dict[str, Path], text: str | None) -> list[str]:
    """What is wrong with the cycles inside packages: one not named by any bullet, a bullet that is malformed, spans
    packages, or names a cycle that no longer exists (stale docs). Empty when all is well."""
    parsed = parse_allowed_cycles(text) if text is not None else None
    allowed, problems = parsed if parsed is not None else ([], [])
    found = intra_package_cycles(sites)
    valid: list[AllowedCycle] = []
    for bullet in allowed:
        unknown = sorted(m for m in bullet.modules if m not in mods)
        units = sorted({unit(m) for m in bullet.modules})
        if unknown:
            problems.append(f"ARCHITECTURE.md:{bullet.line}: {bullet.chain} names modules that do not exist "
                            f"(stale docs?): {', '.join(unknown)}")
        elif len(units) > 1:
            problems.append(f"ARCHITECTURE.md:{bullet.line}: {bullet.chain} spans packages {', '.join(units)}: "
                            f"only a cycle inside one package can be allowed")
        elif sorted(bullet.modules) not in found:
            now = [c for c in found if unit(c[0]) == units[0]]
            problems.append(f"ARCHITECTURE.md:{bullet.line}: {bullet.chain} is no longer a cycle (stale docs: remove "
                            f"or update the bullet); the cycles inside {units[0]} now: {now or 'none'}")
        else:
            valid.append(bullet)
    for component in found:
        if not any(set(component) <= bullet.modules for bullet in valid):
            problems.append(
                f"{describe_cycle(sites, mods, component, lambda m: m)}\n  not named in {ARCHITECTURE.name}: cut it, "
                f"or list it under an 'Allowed cycles' heading as `- {' <-> '.join(component)}: why`")
    return problems


def _architecture_text() -> str | None:
    return ARCHITECTURE.read_text() if ARCHITECTURE.exists() else None


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c", "a"}}) == [["a", "b"], ["c", "d"]]
    chain = {str(i): {str(i + 1)} for i in range(5000)} | {"5000": {"0"}}
    assert len(cycles(chain)[0]) == 5001  # iterative: no RecursionError on a long cycle


def test_no_import_cycle_inside_interp():
    graph = import_graph(modules(INTERP))
    assert sum(len(v) for v in graph.values()) > 50, "the graph builder found (almost) no imports"
    assert "interp.model.decoder" in graph["interp.model.counts"] or graph["interp.model.counts"]
    found = cycles(graph)
    assert not found, f"import cycles inside interp/: {found}"


def _write(root: Path, files: dict[str, str]) -> dict[str, Path]:
    """A fake tree under tmp_path: {module name: source} -> {module name: path}."""
    mods = {}
    for name, source in files.items():
        path = root.joinpath(*name.split("."), "__init__.py") if source.startswith("# package") else \
            root.joinpath(*name.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        mods[name] = path
    return mods


def test_full_graph_reads_every_import_but_type_checking(tmp_path):
    mods = _write(tmp_path, {
        "interp": "# package\n",
        "interp.p": "# package\n_EXPORTS = {'f': 'a', 'g': 'b'}\n",
        "interp.p.a": "def f(): pass\n",
        "interp.p.b": "def g(): pass\n",
        "interp.p.c": "# package\n",
        "interp.q.x": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import interp.p.c\n"
                       "def h():\n    from interp.p import f\n    try:\n        import importlib\n"
                       "        importlib.import_module('interp.p.c')\n    except ImportError:\n        pass\n"),
        "interp.q.y": "class K:\n    def m(self):\n        from interp import p as pp\n        return pp.g()\n",
        "interp.q.z": "import importlib\nMOD = importlib.import_module(f'interp.p.{1}')\n",
    })
    sites = full_import_sites(mods)
    assert sites["interp.q.x"] == {"interp.p.a": {5}, "interp.p.c": {8}}  # not line 3 (TYPE_CHECKING)
    assert sites["interp.q.y"] == {"interp.p": {3}, "interp.p.b": {4}}  # through _EXPORTS: b only, not a
    assert import_graph(mods)["interp.q.x"] == set()  # the import-time graph sees none of these
    assert full_import_graph(mods)["interp.q.z"] == set()
    assert [d.split()[0][-6:] for d in dynamic_imports(mods)] == ["z.py:2"]


def test_full_graph_adds_function_level_imports_of_the_tree():
    mods = all_modules()
    early, full = import_graph(mods), full_import_graph(mods)
    assert all(early[m] <= full[m] for m in mods)
    assert sum(map(len, full.values())) > sum(map(len, early.values())), "no function-level import found"
    probes = modules(INTERP / "probes")
    assert not any(full[m] >= set(probes) - {m} for m in mods if m not in probes), "_EXPORTS read too loosely"


def test_units():
    assert [unit(m) for m in ("interp.probes.backends.torch", "interp.probes", "interp.stats", "interp",
                              "interp.cli.probe", "analyses.report", "analyses")] == [
        "interp.probes", "interp.probes", "interp.stats", "interp", "interp.cli", "analyses", "analyses"]


def test_cycle_chains_cover_every_edge_of_a_component():
    graph = {"a": {"b", "c"}, "b": {"a"}, "c": {"d"}, "d": {"a"}, "e": {"a"}}
    assert cycle_chains(graph, ["a", "b", "c", "d"]) == [["a", "b", "a"], ["a", "c", "d", "a"]]


def test_no_import_cycle_between_packages():
    """Packages form a DAG even counting imports inside functions: a lazy import hides a knot, it does not cut it."""
    mods = all_modules()
    sites = full_import_sites(mods)
    assert len(package_graph(sites)) > 10
    found = package_cycles(sites)
    report = "\n\n".join(describe_cycle(sites, mods, component, unit) for component in found)
    assert not found, f"import cycles between packages (scripts/import_cycles.py prints them):\n{report}"


ARCH = """# Architecture
```
# Allowed cycles (a comment in a fence, not a heading)
```
## Allowed cycles
Intro text.
- `interp.p.a <-> interp.p.b`: a needs b's table
  and b needs a's registry (continued).
- interp.p.c -> interp.p.d -> interp.p.c
- nothing here to parse
## Next
- interp.p.x <-> interp.p.y: outside the section
"""


def test_allowed_cycles_are_parsed_from_their_section():
    allowed, problems = parse_allowed_cycles(ARCH)
    assert [(a.line, sorted(a.modules), a.reason) for a in allowed] == [
        (7, ["interp.p.a", "interp.p.b"], "a needs b's table and b needs a's registry (continued")]
    assert [p.split(":")[1] for p in problems] == ["9", "10"]
    assert "no reason" in problems[0] and "names no cycle" in problems[1]
    assert parse_allowed_cycles("# Architecture\n## Rules\n- interp.p.a <-> interp.p.b: why\n") is None


def test_intra_package_cycles_need_a_named_reason(tmp_path):
    mods = _write(tmp_path, {
        "interp.p.a": "def f():\n    import interp.p.b\n",
        "interp.p.b": "import interp.p.a\n",
        "interp.p.c": "import interp.p.d\n",
        "interp.p.d": "def f():\n    import interp.p.c\n",
        "interp.r.e": "import interp.p.a\n",
    })
    sites = full_import_sites(mods)
    head = "# A\n## Allowed cycles\n"
    ok = head + "- interp.p.a <-> interp.p.b: why\n- interp.p.c -> interp.p.d -> interp.p.c: why\n"
    assert check_intra_package_cycles(sites, mods, ok) == []
    missing = check_intra_package_cycles(sites, mods, head + "- interp.p.a <-> interp.p.b: why\n")
    assert len(missing) == 1 and "interp.p.c, interp.p.d" in missing[0] and "p/d.py:2" in missing[0]
    assert len(check_intra_package_cycles(sites, mods, "# A\n")) == 2  # no section: every cycle fails
    stale = check_intra_package_cycles(sites, mods, ok + "- interp.p.a -> interp.r.e -> interp.p.a: why\n"
                                                      "- interp.p.b -> interp.p.c -> interp.p.b: why\n"
                                                      "- interp.p.a -> interp.p.gone -> interp.p.a: why\n")
    assert ["spans packages" in stale[0], "no longer a cycle" in stale[1], "do not exist" in stale[2]] == [True] * 3
    assert len(stale) == 3 and "interp.p.gone" in stale[2]


def test_intra_package_cycles_are_named_in_architecture():
    """A cycle inside one package passes only where ARCHITECTURE.md's "Allowed cycles" section names it and says
    why; a bullet naming a cycle that no longer exists fails too (stale docs)."""
    mods = all_modules()
    problems = check_intra_package_cycles(full_import_sites(mods), mods, _architecture_text())
    report = "\n\n".join(problems)
    assert not problems, f"import cycles inside packages (scripts/import_cycles.py prints them):\n{report}"


@pytest.mark.parametrize("root", [INTERP, ANALYSES, REPO_ROOT / "benchmarks"], ids=lambda p: p.name)
def test_no_module_over_max_lines(root):
    long = {name: n for name, path in modules(root).items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them by job): {long}"


def _imported_names(path: Path) -> set[str]:
    """Every module named by any import statement in the file (function-level and TYPE_CHECKING ones too)."""
    names: set[str] = set()
    for node in ast.walk(_parse(path)):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_analyses_never_import_the_cli():
    offenders = {name: sorted(i for i in _imported_names(path) if i == "interp.cli" or i.startswith("interp.cli."))
                 for name, path in modules(ANALYSES).items()}
    assert not {k: v for k, v in offenders.items() if v}


def test_only_the_cli_imports_analyses():
    offenders = {name: sorted(i for i in _imported_names(path) if i == "analyses" or i.startswith("analyses."))
                 for name, path in modules(INTERP).items() if not name.startswith("interp.cli")}
    assert not {k: v for k, v in offenders.items() if v}


def test_model_knows_nothing_of_probes_training_or_hf():
    for name, path in modules(INTERP / "model").items():
        bad = [i for i in _imported_names(path) if i.startswith(("interp.probes", "interp.training", "interp.hf",
                                                                  "interp.ablations", "interp.plots"))]
        assert not bad, f"{name} imports {bad}"


def test_plots_read_tables_never_models():
    for name, path in modules(INTERP / "plots").items():
        bad = [i for i in _imported_names(path) if i.startswith(("torch", "interp.model", "interp.hf",
                                                                  "interp.probes", "interp.training"))]
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
