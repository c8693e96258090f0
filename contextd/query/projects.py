"""Named projects of one index: ``[projects.NAME]`` in context.toml.

A monorepo keeps one index and one owner; a project is a named part of it (its watch paths,
less its ignore patterns). A query naming projects gathers candidates from each project on
its own, so a project whose matches score lower still gets its best ones in, then fuses them
and cuts them to one budget; every hit says which project(s) it comes from
(``metadata["projects"]``). Knowledge documents belong to no project: a query naming
projects leaves them out.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

from contextd.errors import UsageError
from contextd.providers.base import ScopeFilter, path_matches
from contextd.records import ContextScope, ContextSnippet

# A query naming this searches every configured project.
ALL_PROJECTS = "*"


def _root_relative(path: str) -> str:
    path = path.strip()
    while path.startswith("./"):
        path = path[2:]
    return path.lstrip("/")


def exclusions(pattern: str) -> tuple[str, ...]:
    """A gitignore-style pattern as scope exclusions: one with a slash inside is relative to
    the root; a bare name (``node_modules``, ``*.log``) matches at any depth."""
    pattern = pattern.strip()
    anchored = pattern.startswith("/") or "/" in pattern.rstrip("/")
    pattern = _root_relative(pattern).rstrip("/")
    if not pattern:
        return ()
    if anchored:
        return (pattern,)
    return (pattern, f"*/{pattern}", f"{pattern}/*", f"*/{pattern}/*")


class Projects:
    """The configured projects: resolve the names a query gives, scope a query to one, and
    say which projects hold a file."""

    def __init__(self, configured: Mapping[str, object]):
        self.configured = dict(configured)
        self._own = {name: tuple(_root_relative(p) for p in cfg.watch_paths)
                     for name, cfg in self.configured.items()}
        self._excluded = {name: tuple(e for p in cfg.ignore_patterns for e in exclusions(p))
                          for name, cfg in self.configured.items()}
        self._members = {name: ScopeFilter(ContextScope(paths=self._own[name],
                                                        exclude_patterns=self._excluded[name]))
                         for name in self.configured}

    def resolve(self, names: Sequence[str]) -> list[str]:
        """The projects a query names (``*``: all), each once; an unknown name is refused
        with the known ones."""
        if not self.configured:
            raise UsageError("no projects are configured: add [projects.NAME] tables with "
                             "watch_paths to context.toml (contextd init shows one)")
        wanted = list(self.configured) if ALL_PROJECTS in names else list(dict.fromkeys(names))
        unknown = [n for n in wanted if n not in self.configured]
        if unknown:
            raise UsageError(f"unknown project(s) {', '.join(unknown)}; configured: "
                             f"{', '.join(sorted(self.configured))}")
        return wanted

    def scope(self, name: str, base: ContextScope) -> ContextScope | None:
        """``base`` narrowed to project ``name``; None when the paths ``base`` asks for and
        the project's share nothing."""
        own = self._own[name]
        paths = own
        if base.paths:
            paths = tuple(p for p in base.paths
                          if any(path_matches(_root_relative(p).rstrip("/*"), q) for q in own))
            paths += tuple(q for q in own if q not in paths
                           and any(path_matches(q.rstrip("/"), p) for p in base.paths))
            if not paths:
                return None
        return dataclasses.replace(base, paths=paths, include_project=True, documents=(),
                                   exclude_patterns=base.exclude_patterns + self._excluded[name])

    def of(self, path: str) -> list[str]:
        """The projects holding a file (several when their paths overlap)."""
        return [name for name, members in self._members.items() if members.accepts_path(path)]

    def annotate(self, snippets: Sequence[ContextSnippet]) -> list[ContextSnippet]:
        """Each snippet with ``metadata["projects"]`` when projects are configured."""
        if not self.configured:
            return list(snippets)
        return [dataclasses.replace(s, metadata={**s.metadata, "projects": self.of(s.file_path)})
                for s in snippets]


def merge_pools(pools: Sequence[Sequence[ContextSnippet]]) -> list[ContextSnippet]:
    """The candidates of several projects as one list, best first; a chunk found for two
    (overlapping) projects once, at its better score. Each pool's scores are its own fusion's,
    scaled to [0, 1] the same way, so each project's best candidates meet on equal terms."""
    best: dict[str, ContextSnippet] = {}
    for pool in pools:
        for snippet in pool:
            kept = best.get(snippet.chunk_id)
            if kept is None or snippet.score > kept.score:
                best[snippet.chunk_id] = snippet
    return sorted(best.values(), key=lambda s: (-s.score, s.file_path, s.start_line))
