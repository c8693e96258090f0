"""Configuration checks that need the file system.

:mod:`contextd.config.sections` validates names, types and ranges while loading; this module checks what
only the disk can answer: do the watch paths exist, do they overlap, are they dangerous, do the
globs compile, are extensions well formed. Every problem is returned at once as a
:class:`~contextd.errors.ConfigIssue` naming the file and the dotted key, with a severity:
errors make the boundary unusable (:class:`contextd.boundary.walk.Boundary` refuses to start),
warnings are reported by ``contextd validate-config`` and otherwise accepted.

The helpers here (:func:`resolve_watch_paths`, :func:`dangerous_root`, :func:`compile_patterns`)
are shared with the boundary so that validation and the walk cannot disagree.
"""

from __future__ import annotations

import os
from pathlib import Path

import pathspec

from contextd.errors import ConfigIssue
from contextd.config.project import Project
from contextd.config.roots import WatchPath, dangerous_root

AUTO = "auto"

ERROR = "error"
WARNING = "warning"


def config_file_name(project: Project) -> str:
    """The name issues carry: the config file, or ``<defaults>`` when there is none."""
    return project.config.source or "<defaults>"


def is_auto(watch_paths: list[str]) -> bool:
    """``[]`` and ``["auto"]`` both mean: detect the project root."""
    return all(p.strip() == AUTO for p in watch_paths)


def resolve_watch_paths(project: Project) -> list[WatchPath]:
    """The watch paths of a project as absolute, symlink-resolved directories.

    "auto" (or an empty list) is the project root. Relative paths are relative to the root;
    ``~`` is expanded. Existence is not checked here (see :func:`check_project`).
    """
    raw_paths = project.config.watcher.watch_paths
    if is_auto(raw_paths):
        return [WatchPath(AUTO, project.root, "watcher.watch_paths", explicit=False)]
    out = []
    for i, raw in enumerate(raw_paths):
        key = f"watcher.watch_paths[{i}]"
        if raw.strip() == AUTO:
            out.append(WatchPath(raw, project.root, key, explicit=False))
            continue
        path = Path(raw).expanduser()
        if not path.is_absolute():
            path = project.root / path
        out.append(WatchPath(raw, path.resolve(), key, explicit=True))
    return out


def pattern_problem(pattern: str) -> str | None:
    """The reason a gitignore-style pattern does not compile, or None."""
    try:
        pathspec.GitIgnoreSpec.from_lines([pattern])
    except Exception as exc:  # pathspec raises several types (ValueError, re.error, ...)
        return f"invalid pattern {pattern!r}: {exc}"
    if _unclosed_bracket(pattern):
        return (f"invalid pattern {pattern!r}: '[' without a closing ']' matches nothing "
                "(write '\\[' for a literal bracket)")
    return None


def _unclosed_bracket(pattern: str) -> bool:
    """Whether a character class is opened and never closed: pathspec accepts such a pattern
    but it never matches, which is surely not what its author meant."""
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            # A ']' right after '[' or '[!' / '[^' is a member of the class, not its end.
            start = i + 1 + (pattern[i + 1:i + 2] in ("!", "^"))
            end = pattern.find("]", start + 1)
            if end < 0:
                return True
            i = end
        i += 1
    return False


def compile_patterns(patterns: list[str]) -> pathspec.GitIgnoreSpec:
    """Compile gitignore-style patterns (call :func:`check_project` first for messages)."""
    return pathspec.GitIgnoreSpec.from_lines(patterns)


def check_project(project: Project) -> list[ConfigIssue]:
    """Every file-system problem of a loaded configuration, errors and warnings."""
    fname = config_file_name(project)
    issues = _check_watch_paths(project, fname)
    cfg = project.config
    for key, patterns in (("watcher.ignore_patterns", cfg.watcher.ignore_patterns),
                          ("indexing.size_exceptions", cfg.indexing.size_exceptions)):
        for i, pattern in enumerate(patterns):
            problem = pattern_problem(pattern)
            if problem:
                issues.append(ConfigIssue(fname, f"{key}[{i}]", problem))
    if not cfg.watcher.ignore_patterns:
        issues.append(ConfigIssue(fname, "watcher.ignore_patterns", "no ignore patterns: "
                                  "everything not git-ignored will be indexed", WARNING))
    issues += _check_extensions(project, fname)
    if cfg.indexing.warn_file_size_mb > cfg.indexing.max_file_size_mb:
        issues.append(ConfigIssue(
            fname, "indexing.warn_file_size_mb",
            f"{cfg.indexing.warn_file_size_mb} is above max_file_size_mb "
            f"({cfg.indexing.max_file_size_mb}); no file will ever trigger the warning", WARNING))
    issues += list(cfg.notes)
    issues += _check_projects(project, fname)
    if cfg.storage.backend == "postgres" and not cfg.storage.url:
        issues.append(ConfigIssue(fname, "storage.url", 'empty, but storage.backend is '
                                  '"postgres": set it, e.g. url = "${DATABASE_URL}"'))
    return issues


def _check_watch_paths(project: Project, fname: str) -> list[ConfigIssue]:
    raw_paths = project.config.watcher.watch_paths
    watches = resolve_watch_paths(project)
    issues: list[ConfigIssue] = []
    if not is_auto(raw_paths) and any(p.strip() == AUTO for p in raw_paths):
        issues.append(ConfigIssue(fname, "watcher.watch_paths", '"auto" cannot be combined '
                                  "with explicit paths; it stands for the whole project root"))
    usable = []
    for watch in watches:
        problem = _watch_path_problem(project, watch)
        if problem:
            issues.append(ConfigIssue(fname, watch.key, problem))
            continue
        usable.append(watch)
        if watch.raw.startswith("~") or "$HOME" in watch.raw:
            issues.append(ConfigIssue(fname, watch.key, f"{watch.raw!r} depends on the home "
                                      "directory; prefer an explicit absolute path", WARNING))
    if not usable and not issues:
        issues.append(ConfigIssue(fname, "watcher.watch_paths", "no valid watch path"))
    for i, outer in enumerate(usable):
        for inner in usable[i + 1:]:
            issues += _overlap(fname, outer, inner)
    return issues


def _watch_path_problem(project: Project, watch: WatchPath) -> str | None:
    danger = dangerous_root(watch)
    if danger:
        return danger
    if not watch.path.exists():
        return f"watch path does not exist: {watch.path}"
    if not watch.path.is_dir():
        return f"watch path is not a directory: {watch.path}"
    if not os.access(watch.path, os.R_OK | os.X_OK):
        return f"watch path is not readable: {watch.path}"
    if watch.path != project.root and project.root not in watch.path.parents:
        return (f"watch path {watch.path} is outside the project root {project.root}; "
                "index paths are relative to the root")
    return None


def _overlap(fname: str, a: WatchPath, b: WatchPath) -> list[ConfigIssue]:
    if a.path == b.path:
        return [ConfigIssue(fname, b.key, f"{b.raw!r} names the same directory as {a.key} "
                            f"({a.raw!r})", WARNING)]
    for outer, inner in ((a, b), (b, a)):
        if outer.path in inner.path.parents:
            return [ConfigIssue(fname, inner.key, f"{inner.raw!r} is inside {outer.key} "
                                f"({outer.raw!r}); its files are indexed once", WARNING)]
    return []


def extension_problem(ext: str) -> str | None:
    """Why an extension entry is malformed (it must look like ``.py``), or None."""
    if not ext.startswith("."):
        return f"extension {ext!r} must start with '.' (write {'.' + ext.lstrip('*.')!r})"
    if len(ext) < 2 or "/" in ext or any(c.isspace() for c in ext) or "*" in ext:
        return f"extension {ext!r} is not a file extension like '.py'"
    return None


def _check_extensions(project: Project, fname: str) -> list[ConfigIssue]:
    cfg = project.config
    issues = []
    for key, exts in (("indexing.allowed_extensions", cfg.indexing.allowed_extensions),
                      ("indexing.blocked_extensions", cfg.indexing.blocked_extensions),
                      ("bootstrap.priority_extensions", cfg.bootstrap.priority_extensions)):
        for i, ext in enumerate(exts):
            problem = extension_problem(ext)
            if problem:
                issues.append(ConfigIssue(fname, f"{key}[{i}]", problem))
    both = sorted({e.lower() for e in cfg.indexing.allowed_extensions}
                  & {e.lower() for e in cfg.indexing.blocked_extensions})
    if both:
        issues.append(ConfigIssue(fname, "indexing.blocked_extensions",
                                  f"also allowed: {', '.join(both)}; blocking wins", WARNING))
    return issues


def _check_projects(project: Project, fname: str) -> list[ConfigIssue]:
    """[projects.NAME]: watch paths inside the root that exist, patterns that compile."""
    issues = []
    for name, scope in project.config.projects.items():
        key = f"projects.{name}"
        if not scope.watch_paths:
            issues.append(ConfigIssue(fname, f"{key}.watch_paths", "empty: a project needs "
                                      "at least one directory"))
        for i, raw in enumerate(scope.watch_paths):
            path = (project.root / raw).resolve()
            if path != project.root and project.root not in path.parents:
                issues.append(ConfigIssue(fname, f"{key}.watch_paths[{i}]", f"{raw!r} is "
                                          f"outside the project root {project.root}"))
            elif not path.is_dir():
                issues.append(ConfigIssue(fname, f"{key}.watch_paths[{i}]", f"{raw!r} is not "
                                          "a directory (yet): the project holds nothing there",
                                          WARNING))
        for i, pattern in enumerate(scope.ignore_patterns):
            problem = pattern_problem(pattern)
            if problem:
                issues.append(ConfigIssue(fname, f"{key}.ignore_patterns[{i}]", problem))
    return issues
