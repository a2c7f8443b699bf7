"""The workspace's import contract, checked from the source text (issue 36).

Reads every first-party package's `src` (each `packages/*/pyproject.toml`, adapters included), builds the module
graph from the AST and fails (exit 1) on:
  - a cycle between first-party modules;
  - an import of a distribution the importing package does not declare in its pyproject (dependencies or any
    extra): for first-party distributions this is the "no upward arrow" rule, since a package may only import
    packages below it; third-party modules count when this environment can name their distribution;
  - an import of another package's `_private` module (a module whose path has a `_name` component may only be
    imported from inside the package that holds that component, and from the same distribution).

Every import statement counts, wherever it is: module level, function-local, `try`/`except ImportError` and
`if TYPE_CHECKING:` blocks alike. A function-local import hides a cycle from the interpreter, not from the design;
a TYPE_CHECKING import is still a dependency mypy resolves, so it must point down like any other (such edges are
marked `[type-only]` in the output). An import resolves to the most specific first-party module it names
(`from a.b import c` is an edge to `a.b.c` when that module exists, else to `a.b`); parent packages' `__init__`
are not implied edges, as in import-linter, or every package would form a cycle with its own `__init__`.

Usage: python .ci/import_graph.py [--root DIR] [--dot FILE]   (prints the package graph; --dot writes it too)
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

# Known violations, as "importer -> imported" (a module, or a top-level third-party name): each with the reason and
# the branch removing it. The goal is an empty list once the `split` and `contract` branches of issue 36 have merged.
# Known violations, each with its reason; the check fails on an entry whose import is gone, so the list only shrinks.
ALLOWLIST: frozenset[str] = frozenset()
# Type checkers ship typing_extensions themselves (mypy's typeshed), so an import of it under TYPE_CHECKING needs no
# runtime dependency.
TYPE_ONLY_FREE = frozenset({"typing_extensions"})


@dataclass(frozen=True)
class Edge:
    """One import statement resolved to a first-party module or to a top-level third-party name."""

    src: str
    dst: str
    path: Path
    line: int
    type_only: bool

    def where(self, root: Path) -> str:
        """`file:line` relative to the workspace root."""
        try:
            rel = self.path.relative_to(root)
        except ValueError:
            rel = self.path
        return f"{rel}:{self.line}"


@dataclass
class Package:
    """One workspace member: its distribution name, declared dependencies and modules."""

    dist: str
    root: Path
    deps: set[str] = field(default_factory=set)
    reqs: list[Requirement] = field(default_factory=list)
    modules: dict[str, Path] = field(default_factory=dict)


def normalize(name: str) -> str:
    """PEP 503 form of a distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def load_packages(root: Path) -> list[Package]:
    """Every `packages/*` member with a `src` folder, with its modules and declared dependencies."""
    packages = []
    for pyproject in sorted(root.glob("packages/*/pyproject.toml")):
        src = pyproject.parent / "src"
        if not src.is_dir():
            continue  # a metadata-only package (the `gymverse` meta distribution) has no imports to check
        project = tomllib.loads(pyproject.read_text())["project"]
        pkg = Package(dist=normalize(project["name"]), root=pyproject.parent)
        reqs = list(project.get("dependencies", []))
        for extra in project.get("optional-dependencies", {}).values():
            reqs.extend(extra)
        pkg.reqs = [Requirement(r) for r in reqs]
        pkg.deps = {normalize(r.name) for r in pkg.reqs}
        for path in sorted(src.rglob("*.py")):
            parts = list(path.relative_to(src).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            if parts:
                pkg.modules[".".join(parts)] = path
        packages.append(pkg)
    return packages


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement in the tree, with whether it sits under `if TYPE_CHECKING:`."""

    def walk(node: ast.AST, type_only: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, type_only
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for stmt in node.body:
                yield from walk(stmt, True)
            for stmt in node.orelse:
                yield from walk(stmt, type_only)
            return
        for child in ast.iter_child_nodes(node):
            yield from walk(child, type_only)

    yield from walk(tree, False)


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_pkg: bool) -> Iterable[str]:
    """The dotted names an import statement loads (for `from x import y`, `x.y`, which may be an attribute)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        pkg_parts = module.split(".") if is_pkg else module.split(".")[:-1]
        keep = len(pkg_parts) - (node.level - 1)
        base = ".".join([*pkg_parts[:keep], *([base] if base else [])])
    return [f"{base}.{alias.name}" if alias.name != "*" else base for alias in node.names]


class Graph:
    """First-party module graph plus the third-party names each module imports."""

    def __init__(self, root: Path, packages: list[Package]) -> None:
        self.root = root
        self.packages = packages
        self.owner: dict[str, Package] = {m: p for p in packages for m in p.modules}
        self.edges: list[Edge] = []
        self.external: list[Edge] = []
        for pkg in packages:
            for module, path in pkg.modules.items():
                self._scan(module, path)

    def _resolve(self, name: str) -> str | None:
        parts = name.split(".")
        for n in range(len(parts), 0, -1):
            candidate = ".".join(parts[:n])
            if candidate in self.owner:
                return candidate
        return None

    def _scan(self, module: str, path: Path) -> None:
        tree = ast.parse(path.read_text(), filename=str(path))
        is_pkg = path.name == "__init__.py"
        for node, type_only in _imports(tree):
            for target in _targets(node, module, is_pkg):
                dst = self._resolve(target)
                if dst is not None:
                    if dst != module:
                        self.edges.append(Edge(module, dst, path, node.lineno, type_only))
                elif not (isinstance(node, ast.ImportFrom) and node.level):
                    top = target.split(".")[0]
                    self.external.append(Edge(module, top, path, node.lineno, type_only))


def find_cycles(edges: list[Edge]) -> list[list[Edge]]:
    """One shortest cycle per strongly connected component with more than one module (Tarjan, then BFS)."""
    adj: dict[str, dict[str, Edge]] = {}
    for e in edges:
        adj.setdefault(e.src, {}).setdefault(e.dst, e)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    sccs: list[set[str]] = []
    counter = 0

    def strongconnect(v: str) -> None:
        nonlocal counter
        # iterative Tarjan: the workspace's module chains are deeper than a comfortable recursion limit
        work = [(v, iter(sorted(adj.get(v, {}))))]
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(adj.get(w, {})))))
                    advanced = True
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    sccs.append(comp)

    for v in sorted(adj):
        if v not in index:
            strongconnect(v)
    cycles = []
    for comp in sccs:
        start = min(comp)
        prev: dict[str, Edge] = {}
        frontier = [start]
        found: Edge | None = None
        while frontier and found is None:
            nxt = []
            for v in frontier:
                for w, e in sorted(adj.get(v, {}).items()):
                    if w not in comp:
                        continue
                    if w == start:
                        found = e
                        break
                    if w not in prev:
                        prev[w] = e
                        nxt.append(w)
                if found is not None:
                    break
            frontier = nxt
        assert found is not None
        path = [found]
        while path[0].src != start:
            path.insert(0, prev[path[0].src])
        cycles.append(path)
    return cycles


def private_owner(module: str) -> str | None:
    """The package a module is private to (the prefix before its first `_name` component), or None if public."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def _third_party_dists() -> dict[str, list[str]]:
    return {top: [normalize(d) for d in dists] for top, dists in metadata.packages_distributions().items()}


def reachable(pkg: Package, packages: list[Package]) -> tuple[set[str], set[str]]:
    """Distributions `pkg` may import (declared, or required by one it declares, transitively) and those not installed.

    A third-party module is importable by declaring any package that brings it (synth gets numpy through the core);
    first-party arrows stay strict (only direct deps), checked separately. Requirements are followed through the
    installed metadata with their markers evaluated here, extras included.
    """
    by_dist = {p.dist: p for p in packages}
    seen: set[tuple[str, frozenset[str]]] = set()
    allowed: set[str] = set()
    missing: set[str] = set()
    todo = [(normalize(r.name), frozenset(r.extras)) for r in pkg.reqs]
    while todo:
        item = todo.pop()
        if item in seen:
            continue
        seen.add(item)
        dist, extras = item
        allowed.add(dist)
        if dist in by_dist:
            reqs = by_dist[dist].reqs
        else:
            try:
                reqs = [Requirement(r) for r in metadata.requires(dist) or []]
            except metadata.PackageNotFoundError:
                missing.add(dist)
                continue
        for req in reqs:
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in {"", *extras}):
                todo.append((normalize(req.name), frozenset(req.extras)))
    return allowed, missing


def check(root: Path) -> tuple[list[str], Graph]:
    """All contract violations under `root` (as printable lines, unique), and the graph they were found in."""
    graph = Graph(root, load_packages(root))
    problems: dict[str, None] = {}  # ordered set: `from x import a, b` is one statement, one line

    def report(edge: Edge, kind: str, why: str) -> None:
        if f"{edge.src} -> {edge.dst}" not in ALLOWLIST:
            tag = " [type-only]" if edge.type_only else ""
            problems[f"{kind}: {edge.src} -> {edge.dst}  ({edge.where(root)}){tag}: {why}"] = None

    first_party = {p.dist for p in graph.packages}
    live = [e for e in graph.edges if f"{e.src} -> {e.dst}" not in ALLOWLIST]
    for cycle in find_cycles(live):
        chain = " -> ".join([cycle[0].src, *(e.dst for e in cycle)])
        problems[f"import cycle: {chain}"] = None
        for e in cycle:
            problems[f"    {e.src} -> {e.dst}  ({e.where(root)}{', type-only' if e.type_only else ''})"] = None
    for e in live:
        src_pkg, dst_pkg = graph.owner[e.src], graph.owner[e.dst]
        if src_pkg is not dst_pkg and dst_pkg.dist not in src_pkg.deps:
            report(e, "undeclared (upward?) import", f"{src_pkg.dist} does not depend on {dst_pkg.dist}")
        scope = private_owner(e.dst)
        if scope is not None and (src_pkg is not dst_pkg or not (e.src == scope or e.src.startswith(scope + "."))):
            report(e, "private import", f"{e.dst} is private to {scope} ({dst_pkg.dist})")
    dists = _third_party_dists()
    closure = {p.dist: reachable(p, graph.packages) for p in graph.packages}
    notes: set[str] = set()
    for e in graph.external:
        if e.dst in sys.stdlib_module_names or e.dst == "__future__" or (e.type_only and e.dst in TYPE_ONLY_FREE):
            continue
        candidates = [d for d in dists.get(e.dst, []) if d not in first_party]
        pkg = graph.owner[e.src]
        allowed, missing = closure[pkg.dist]
        if not candidates or any(d in allowed for d in candidates):
            continue
        if missing:  # a declared framework is not installed here: its requirements (torch, ...) are unknown
            notes.add(f"note: {pkg.dist}: {e.dst} unchecked: {', '.join(sorted(missing))} not installed here")
            continue
        report(e, "undeclared import", f"{pkg.dist} neither declares nor depends on {', '.join(sorted(candidates))}")
    for note in sorted(notes):
        print(note)
    # An entry whose importer exists but no longer makes that import is stale: the list only ever shrinks.
    seen = {f"{e.src} -> {e.dst}" for e in [*graph.edges, *graph.external]}
    for entry in sorted(ALLOWLIST - seen):
        if entry.split(" -> ", 1)[0] in graph.owner:
            problems[f"stale allowlist entry (the import is gone: delete it from ALLOWLIST): {entry}"] = None
    return list(problems), graph


def package_graph(graph: Graph) -> dict[str, set[str]]:
    """Distribution-level edges: which first-party package imports which."""
    out: dict[str, set[str]] = {p.dist: set() for p in graph.packages}
    for e in graph.edges:
        a, b = graph.owner[e.src].dist, graph.owner[e.dst].dist
        if a != b:
            out[a].add(b)
    return out


def to_dot(pkgs: dict[str, set[str]]) -> str:
    """Graphviz source of the package graph."""
    lines = ["digraph gymverse {", "  rankdir=BT;"]
    lines += [f'  "{a}";' for a in sorted(pkgs)]
    lines += [f'  "{a}" -> "{b}";' for a in sorted(pkgs) for b in sorted(pkgs[a])]
    return "\n".join([*lines, "}"]) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Print the package graph and every violation; exit 1 if there is any."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--dot", type=Path, help="also write the package graph as Graphviz source to this file")
    args = parser.parse_args(argv)
    problems, graph = check(args.root)
    pkgs = package_graph(graph)
    print(f"package graph ({len(graph.owner)} modules, {len(graph.edges)} first-party import edges):")
    for a in sorted(pkgs):
        print(f"  {a} -> {', '.join(sorted(pkgs[a])) or '(nothing first-party)'}")
    if args.dot:
        args.dot.write_text(to_dot(pkgs))
    if ALLOWLIST:
        print(f"allowlisted known violations: {len(ALLOWLIST)}")
    if problems:
        print(f"\nimport contract: {sum(not p.startswith(' ') for p in problems)} violation(s)")
        print("\n".join(problems))
        return 1
    print("import contract: OK (no cycle, no undeclared or upward import, no foreign private module)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
