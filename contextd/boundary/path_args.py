"""Paths given by a caller (refresh_context, ``contextd refresh``): each one checked before
the file system sees it, with a reason for each refused path.

Unchecked, a 10,000-character path would reach ``os.stat`` and end in ENAMETOOLONG with a traceback;
``x\\0y.py``, a link to ``/etc`` or ``~/.ssh`` would answer "completed, 0 files" as if
nothing were wrong. Here every path is judged on its text first (length, characters, where it
points), then on the file system (existence, symbolic links leading out of the root).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

MAX_PATH_CHARS = 4096   # PATH_MAX on Linux
MAX_NAME_BYTES = 255    # NAME_MAX
SHOWN_CHARS = 120       # how much of a refused path an answer repeats


@dataclass(frozen=True)
class RefusedPath:
    """A path argument that was not used, and why."""

    path: str
    reason: str


def shown(raw: str) -> str:
    """``raw`` as an answer may repeat it: control characters escaped, long ones cut."""
    text = raw.encode("unicode_escape", "backslashreplace").decode("ascii") \
        if not raw.isprintable() else raw
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}… ({len(raw):,} chars)"


def text_problem(raw: str) -> str | None:
    """What is wrong with ``raw`` as a path string, before it reaches the file system."""
    if not raw.strip():
        return "an empty path"
    if "\0" in raw:
        return "contains a NUL byte"
    if any(ord(c) < 32 or ord(c) == 127 for c in raw):
        return "contains a control character"
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode (a lone surrogate)"
    if len(raw) > MAX_PATH_CHARS:
        return f"is {len(raw):,} characters long (the limit is {MAX_PATH_CHARS:,})"
    if any(len(part.encode("utf-8")) > MAX_NAME_BYTES for part in raw.split("/")):
        return f"has a name longer than {MAX_NAME_BYTES} bytes"
    if raw.startswith("~"):
        return "is outside the project root ('~' is not expanded: give paths relative to the root)"
    return None


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def check_path(root: Path, raw: str, known: Callable[[str], bool] | None = None,
               real_root: str | None = None) -> tuple[str | None, str | None]:
    """(the root-relative POSIX path, None) for a usable path, or (None, reason).

    A path that does not exist is usable only when ``known(rel)`` says the index holds
    files there (a refresh then removes them); without ``known`` it is accepted as such.
    ``real_root``: the root with its links resolved, when the caller already has it."""
    problem = text_problem(raw)
    if problem:
        return None, problem
    root_text = str(root)
    absolute = os.path.normpath(raw if os.path.isabs(raw) else os.path.join(root_text, raw))
    if not _inside(absolute, root_text):
        return None, f"is outside the project root {root_text}"
    rel = "." if absolute == root_text else absolute[len(root_text.rstrip("/")) + 1:]
    try:
        exists = os.path.lexists(absolute)
        real = os.path.realpath(absolute)
    except (OSError, ValueError) as exc:
        return None, f"cannot be read: {exc.strerror if isinstance(exc, OSError) else exc}"
    if exists and not _inside(real, real_root or os.path.realpath(root_text)):
        return None, "is a symbolic link (or lies under one) leading outside the project root"
    if not exists and known is not None and not known(rel):
        return None, "does not exist (and nothing under it is indexed)"
    return rel, None


def check_paths(root: Path, paths: Sequence[str], known: Callable[[str], bool] | None = None
                ) -> tuple[list[str], list[RefusedPath]]:
    """The usable paths of ``paths`` (root-relative, "." for the root) and the refused ones.
    The root's links are resolved once for the batch, not once per path: resolving them
    (an lstat per component) was a fifth of checking a ``git checkout``'s 740 paths (issue 37)."""
    accepted: list[str] = []
    refused: list[RefusedPath] = []
    real_root = os.path.realpath(str(root))
    for raw in paths:
        rel, reason = check_path(root, raw, known, real_root)
        if reason is None:
            assert rel is not None  # check_path gives a path exactly when it gives no reason
            accepted.append(rel)
        else:
            refused.append(RefusedPath(shown(raw), reason))
    return accepted, refused


def refusal_text(refused: Sequence[RefusedPath]) -> str:
    """One line naming each refused path and its reason."""
    return "; ".join(f"'{r.path}' {r.reason}" for r in refused)
