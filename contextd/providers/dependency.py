"""Dependency provider (ProviderType.DEPENDENCY): what the project declares and where it
uses it.

A query that names a declared dependency ("how do we call requests", "where is PyYAML used",
"upgrade lodash") gets, best first: the manifest chunk declaring it (version and group in
``metadata``), the chunks importing it, then the chunks using the names those imports bind,
most uses first. A query about dependencies in general ("which libraries does it depend on")
gets the manifests' declaration chunks. Manifests: pyproject.toml, requirements*.txt,
package.json, go.mod, Cargo.toml (:mod:`contextd.providers.manifests`). Everything is read
from the module's in-memory catalog, manifests from disk, cached by size and mtime; a query
naming no dependency costs a set lookup.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from typing import Any, Iterable

from contextd.providers.base import (
    ContextProvider, ProviderQuery, ScopeFilter, snippet_from_row,
)
from contextd.providers.manifests import Dependency, is_manifest, normalise, parse_manifest
from contextd.text.languages import ids_of_ecosystem
from contextd.text.stop_words import STOP_WORDS
from contextd.records import ContextScope, ContextSnippet, ProviderType, TokenBudget

DECLARES_SCORE = 1.0
IMPORTS_SCORE = 0.9
USES_SCORE = 0.5
# A using chunk's score grows with its uses, up to USES_SCORE + this at USES_FOR_FULL uses.
USES_BONUS = 0.3
USES_FOR_FULL = 5
MANIFEST_LIST_SCORE = 0.6
# Words that ask about dependencies in general.
GENERAL_WORDS = frozenset({
    "dependency", "dependencies", "depend", "depends", "package", "packages", "library",
    "libraries", "requirement", "requirements", "third-party", "3rd-party", "vendor",
    "versions", "upgrade", "pinned", "manifest"})
_QUERY_WORD = re.compile(r"[@\w][\w.\-/@]*")


@dataclass(frozen=True)
class _Import:
    chunk_id: str
    file_id: int
    bound: tuple[str, ...]  # names the import statement binds in its file


def _import_pattern(ecosystem: str, name: str) -> re.Pattern:
    n = re.escape(name)
    if ecosystem == "python":
        return re.compile(rf"^[ \t]*(?:import[ \t]+{n}(?:\.[\w.]+)?(?:[ \t]+as[ \t]+(\w+))?"
                          rf"|from[ \t]+{n}(?:\.[\w.]+)?[ \t]+import[ \t]+\(?([^)\n]+))",
                          re.MULTILINE)
    if ecosystem == "npm":
        return re.compile(rf"""(?:import[ \t]+(?:type[ \t]+)?([^;'"]*?)[ \t]*from[ \t]*"""
                          rf"""|(?:const|let|var)[ \t]+([\w{{}}, \t]+?)[ \t]*=[ \t]*require\("""
                          rf"""|import\()[ \t]*['"]{n}(?:/[^'"]*)?['"]""")
    if ecosystem == "go":
        return re.compile(rf'^[ \t]*(?:import[ \t]+)?(\w+[ \t]+)?"{n}(?:/[^"]*)?"', re.MULTILINE)
    return re.compile(rf"\b(?:use|extern[ \t]+crate)[ \t]+({n})\b")


def _bound_names(ecosystem: str, name: str, match: re.Match) -> tuple[str, ...]:
    """The names an import binds (what later code writes to use the dependency)."""
    groups = [g for g in match.groups() if g]
    if ecosystem == "python":
        if not groups:  # import name(.sub) binds the top-level name
            return (name,)
        if match.group(1):  # import name as alias
            return (match.group(1),)
        names = []
        for part in groups[-1].split(","):
            part = part.strip().rstrip("\\").strip()
            alias = part.split(" as ")[-1].strip()
            if alias.isidentifier():
                names.append(alias)
        return tuple(names)
    if ecosystem == "npm":
        names = re.findall(r"\w+", " ".join(groups).replace(" as ", " "))
        return tuple(n for n in names if n not in ("type", "from", "import"))
    if ecosystem == "go":
        return (groups[0].strip(),) if groups else (name.rstrip("/").rsplit("/", 1)[-1],)
    return (name,)


class DependencyProvider(ContextProvider):
    """Declared dependencies and the code importing and using them."""

    id = "dependency"
    name = "Dependencies (manifests, importers and users)"
    type = ProviderType.DEPENDENCY

    def __init__(self) -> None:
        super().__init__()
        self._manifests: dict[str, tuple[tuple[int, int], list[Dependency]]] = {}
        self._lock = threading.Lock()
        # The catalog's version and the manifests among its paths then (2,855 paths
        # looked at for every query and stats call otherwise).
        self._manifest_paths: tuple[int, list[str]] = (-1, [])

    def answers_from_memory(self, generation: int | None) -> bool:
        return self.context is not None and self.context.catalog.is_current(generation)

    # ----- declared dependencies -------------------------------------------------------
    def dependencies(self, generation: int | None = None, sync: bool = True
                     ) -> list[Dependency]:
        """Every dependency the project's manifests declare (indexed manifests, and a
        go.mod at the root, which the default extensions do not index). ``sync=False``:
        the manifests of the files the catalog holds now, without taking in what was
        written since."""
        assert self.context is not None, "initialize() was not called"
        root = self.context.project.root
        catalog = self.context.catalog
        with catalog.lock:
            if sync:
                catalog.sync(generation)
            if self._manifest_paths[0] != catalog.version:
                self._manifest_paths = (catalog.version,
                                        [p for p in catalog.paths if is_manifest(p)])
            paths = list(self._manifest_paths[1])
        if (root / "go.mod").is_file() and "go.mod" not in paths:
            paths.append("go.mod")
        found: list[Dependency] = []
        with self._lock:
            for path in sorted(paths):
                found += self._parsed(root, path)
        return found

    def _parsed(self, root: Any, path: str) -> list[Dependency]:
        try:
            stat = os.stat(root / path)
        except OSError:
            return []
        stamp = (stat.st_size, stat.st_mtime_ns)
        cached = self._manifests.get(path)
        if cached is None or cached[0] != stamp:
            try:
                text = (root / path).read_text(encoding="utf-8", errors="replace")
            except OSError:
                return []
            cached = self._manifests[path] = (stamp, parse_manifest(path, text))
        return cached[1]

    # ----- the query ----------------------------------------------------------------------
    def query(self, query: ProviderQuery | str, scope: ContextScope, budget: TokenBudget
              ) -> list[ContextSnippet]:
        query = ProviderQuery.of(query)
        words = _words(query.text)
        declared = self.dependencies(query.generation)
        named = _named(declared, words)
        accepts = ScopeFilter(scope).accepts_row
        if named:
            found = self._about(named, query.generation)
        elif words & GENERAL_WORDS:
            found = [(cid, MANIFEST_LIST_SCORE, meta)
                     for cid, meta in self._declarations(declared, query.generation)]
        else:
            return []
        rows = self.context.catalog.rows_by_id([cid for cid, _, _ in found], query.generation)
        out: dict[str, ContextSnippet] = {}
        for cid, score, meta in found:
            row = rows.get(cid)
            if row is not None and cid not in out and accepts(row) and score >= query.min_score:
                out[cid] = snippet_from_row(row, score, self.id, meta)
        return sorted(out.values(), key=lambda s: -s.score)[:query.limit]

    def query_share(self, query: ProviderQuery) -> float:
        """The share of the query's content words that name a declared dependency (by its
        name or an import name) or ask about dependencies in general: 1.0 for "where is
        PyYAML used", 1/8 for a question about pydantic models converted to JSON, whose
        subject is the conversion (see :meth:`ContextProvider.query_share`)."""
        query = ProviderQuery.of(query)
        words = _words(query.text)
        content = {w for w in words if len(w) >= 2 and w not in STOP_WORDS}
        if not content:
            return 1.0
        recognised = content & GENERAL_WORDS
        for dep in _named(self.dependencies(query.generation), content):
            recognised |= {w for w in content
                           if normalise(w) == dep.key
                           or w in {n.lower() for n in dep.import_names()}}
        return len(recognised) / len(content)

    def _declarations(self, deps: Iterable[Dependency], generation: int | None
                      ) -> list[tuple[str, dict[str, Any]]]:
        """(chunk id, metadata) of the manifest chunk holding each declaration."""
        catalog = self.context.catalog
        paths = catalog.file_paths(generation)
        out = []
        for dep in deps:
            file_id = paths.get(dep.manifest)
            if file_id is None:
                continue
            for row in catalog.entries_for_files([file_id], generation):
                if row.start_line <= dep.line <= row.end_line:
                    out.append((row.chunk_id, _meta(dep, "declares")))
                    break
        return out

    def _about(self, deps: list[Dependency], generation: int | None
               ) -> list[tuple[str, float, dict[str, Any]]]:
        found = [(cid, DECLARES_SCORE, meta) for cid, meta in self._declarations(deps,
                                                                                  generation)]
        for dep in deps:
            imports = self._importers(dep, generation)
            found += [(imp.chunk_id, IMPORTS_SCORE, _meta(dep, "imports")) for imp in imports]
            found += [(cid, USES_SCORE + USES_BONUS * min(1.0, uses / USES_FOR_FULL),
                       {**_meta(dep, "uses"), "uses": uses})
                      for cid, uses in self._users(imports, generation)]
        return found

    def _importers(self, dep: Dependency, generation: int | None) -> list[_Import]:
        """Chunks with an import statement of the dependency, by its first import name any
        code uses."""
        catalog = self.context.catalog
        languages = ids_of_ecosystem(dep.ecosystem)
        files = sorted({e.file_id for e in catalog.entries_for_files(None, generation)
                        if e.language in languages})
        for name in dep.import_names():
            pattern = _import_pattern(dep.ecosystem, name)
            found = []
            for row in catalog.iter_chunks(files, generation):  # texts from the spool
                if row.language not in languages or name not in row.text:
                    continue
                matches = list(pattern.finditer(row.text))
                if matches:
                    found.append(_Import(row.chunk_id, row.file_id, tuple(
                        b for m in matches for b in _bound_names(dep.ecosystem, name, m))))
            if found:
                return found
        return []

    def _users(self, imports: list[_Import], generation: int | None
               ) -> list[tuple[str, int]]:
        """(chunk id, uses) of chunks of the importing files that use a bound name."""
        importing = {imp.chunk_id for imp in imports}
        by_file: dict[int, set[str]] = {}
        for imp in imports:
            by_file.setdefault(imp.file_id, set()).update(imp.bound)
        out = []
        catalog = self.context.catalog
        for file_id, names in by_file.items():
            if not names:
                continue
            pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(names))) + r")\b")
            for row in catalog.chunks_for_files([file_id], generation):
                if row.chunk_id in importing:
                    continue
                uses = len(pattern.findall(row.text))
                if uses:
                    out.append((row.chunk_id, uses))
        return sorted(out, key=lambda item: -item[1])

    def stats(self) -> dict[str, Any]:
        if self.context is None:
            return {}
        # A catalog already loaded (an owner's) is not brought up to the store for this:
        # the owner answers stats every second or so while it reads a checkout.
        deps = self.dependencies(sync=self.context.catalog.generation < 0)
        return {"declared": len(deps), "manifests": sorted({d.manifest for d in deps})}


def _words(text: str) -> set[str]:
    """The lower-cased words of a query, as dependency names are written."""
    return {w.strip(".,;:!?'\"()").lower() for w in _QUERY_WORD.findall(text)}


def _named(declared: Iterable[Dependency], words: set[str]) -> list[Dependency]:
    """The declared dependencies the words name, by distribution or import name."""
    keys = {normalise(w) for w in words}
    return [d for d in declared if d.key in keys or any(
        n.lower() in words for n in d.import_names())]


def _meta(dep: Dependency, relation: str) -> dict[str, Any]:
    return {"dependency": dep.name, "version": dep.spec, "group": dep.group,
            "manifest": dep.manifest, "manifest_line": dep.line, "relation": relation}
