"""The package's layers and its import graph: counts, upward arrows and circles.

    python tools/layers.py          # modules, root modules, arrows, upward arrows, circles

Every import counts, including those inside functions (a lazy import still makes one module
depend on another; it only moves the cost to the first call). ``tests/test_layers.py`` runs
the same checks in CI: a circle or an arrow from a lower layer up to a higher one fails it.
"""

from __future__ import annotations

import ast
import collections
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "contextd"

# Top to bottom; a module belongs to the layer of its longest matching prefix. A module may
# import its own layer or any layer below it, never one above.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("entry", ("contextd", "contextd.__main__")),
    ("surfaces", ("contextd.cli", "contextd.mcp", "contextd.http", "contextd.web")),
    ("api", ("contextd.api",)),
    ("runtime", ("contextd.runtime", "contextd.operations")),
    ("facade", ("contextd.facade",)),
    ("query pipeline", ("contextd.query.pipeline", "contextd.query.scope_check",
                        "contextd.query.projects")),
    ("capabilities", ("contextd.knowledge", "contextd.stash", "contextd.sessions")),
    ("providers", ("contextd.providers",)),
    ("query stages", ("contextd.query",)),
    ("index", ("contextd.indexer", "contextd.chunkers", "contextd.embedders",
               "contextd.contextualizers", "contextd.boundary", "contextd.scrub")),
    ("foundation", ("contextd.store", "contextd.crypto", "contextd.config", "contextd.plugins",
                    "contextd.text", "contextd.vectors", "contextd.agents")),
    ("base", ("contextd.records", "contextd.errors", "contextd.hookspecs")),
)
# What the package root may hold besides sub-packages: the public entry points.
ROOT_MODULES = frozenset({"__init__", "__main__", "errors", "hookspecs", "records"})


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    """module → the package's modules it imports, anywhere in its body."""
    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = collections.defaultdict(set)
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                # ``from pkg import submodule`` depends on the submodule, not on pkg.
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                           for a in node.names]
            else:
                continue
            for target in targets:
                resolved = resolve(target) if target.split(".")[0] == PACKAGE.name else None
                if resolved and resolved != name:
                    edges[name].add(resolved)
    return edges


def layer_of(module: str) -> int:
    """Index of the module's layer in LAYERS (0 is the top)."""
    best, depth = None, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            matches = module == prefix or (module.startswith(prefix + ".")
                                          and prefix != PACKAGE.name)
            if matches and prefix.count(".") > depth:
                best, depth = index, prefix.count(".")
    if best is None:
        raise LookupError(f"{module} belongs to no layer; add it to LAYERS in {__file__}")
    return best


def upward(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Arrows from a module to one in a higher layer."""
    return sorted((a, b) for a, targets in edges.items() for b in targets
                  if layer_of(b) < layer_of(a))


def circles(edges: dict[str, set[str]], mods: dict[str, Path]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in mods:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def root_modules(package: Path = PACKAGE) -> list[str]:
    """Loose modules at the package root."""
    return sorted(p.stem for p in package.glob("*.py"))


def main() -> int:
    mods = modules()
    edges = imports(mods)
    arrows = sum(len(t) for t in edges.values())
    ups, rings = upward(edges), circles(edges, mods)
    print(f"modules: {len(mods)}, import arrows: {arrows}")
    print(f"root modules: {len(root_modules())} ({', '.join(root_modules())})")
    print(f"layers: {' > '.join(name for name, _ in LAYERS)}")
    print(f"upward arrows: {len(ups)}")
    for a, b in ups:
        print(f"  {a} ({LAYERS[layer_of(a)][0]}) -> {b} ({LAYERS[layer_of(b)][0]})")
    print(f"circles: {len(rings)}")
    for ring in rings:
        print("  " + " <-> ".join(ring))
    return 1 if ups or rings else 0


if __name__ == "__main__":
    sys.exit(main())
