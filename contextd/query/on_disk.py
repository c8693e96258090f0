"""Snippets as the files are now: no answer shows a line that is not on disk.

The index lags the disk: right after a ``git checkout`` the stored chunks still hold the
previous tree, and an answer read from them showed the right file with the wrong text (13 of
13 lines on prometheus came from the previous checkout), so an agent cited lines that do not
exist. Before an answer goes out, each chosen snippet of a project file is checked against the
file as it is now (the few files of one answer, each read once):

- the lines at the snippet's range are its text: current (the usual case, nothing hashed);
- else the file's BLAKE3 is the hash it was indexed at: its text differs by construction (a
  secret scrubbed, a chunker's normalisation) and is current;
- else the file changed since it was indexed. Its text found elsewhere in the file (lines
  added above it) keeps it at the new line numbers; not found, the snippet shows the lines now
  at its range, scrubbed as indexing scrubs them, marked ``metadata["stale"]``; a file gone or
  shorter than the range drops the snippet.

Snippets that are not project files (knowledge documents ``kb://``, agent memory's
``stash:<id>``: no file, no indexed file state) are left as they are: they have no file on
disk to differ from; nor those just read from disk (``metadata["read_from_disk"]``:
:mod:`contextd.query.unread_scan`), nor those of content
pushed through the service (``add_context``, recorded with ``PUSHED_MTIME_NS``): what the
caller pushed is what it asked to be answered from, until the file changes on disk.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable, Sequence

import blake3

from contextd.indexer.plan import PUSHED_MTIME_NS
from contextd.records import ContextSnippet
from contextd.store.base import FileState
from contextd.text.tokens import estimate_tokens

# Said in the answer when a snippet was re-read from disk.
STALE_NOTE = ("{} snippet(s) come from files changed on disk since they were indexed: they "
              "show the lines as they are now (marked stale); the index catches up in the "
              "background")
GONE_NOTE = "{} snippet(s) left out: their files changed or were removed since they were indexed"


@dataclasses.dataclass
class DiskCheck:
    """The snippets as on disk and the notes saying what was re-read or left out."""

    snippets: list[ContextSnippet]
    notes: list[str]


def as_on_disk(snippets: Sequence[ContextSnippet], root: Path,
               indexed_state: Callable[[str], FileState | None],
               scrub: Callable[[str, str], str]) -> DiskCheck:
    """Each snippet of a project file checked against the file now (see the module
    docstring). ``indexed_state(path)``: the file's state as indexed (None when it is not
    indexed); ``scrub(text, path)``: the secret scrubber indexing applies to file text."""
    files: dict[str, str | None] = {}
    kept: list[ContextSnippet] = []
    stale = gone = 0
    for snippet in snippets:
        path = snippet.file_path
        if "://" in path or snippet.metadata.get("read_from_disk"):
            kept.append(snippet)
            continue
        state = indexed_state(path)
        if state is not None and state.mtime_ns == PUSHED_MTIME_NS:
            kept.append(snippet)
            continue
        if path not in files:
            files[path] = _read(root / path)
        checked = _checked(snippet, files[path], state, scrub)
        if checked is None:
            gone += 1
            continue
        stale += bool(checked.metadata.get("stale"))
        kept.append(checked)
    notes = []
    if stale:
        notes.append(STALE_NOTE.format(stale))
    if gone:
        notes.append(GONE_NOTE.format(gone))
    return DiskCheck(kept, notes)


def _read(path: Path) -> str | None:
    """The file's text, or None when it is gone or unreadable as UTF-8."""
    try:
        return path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _checked(snippet: ContextSnippet, text: str | None, state: FileState | None,
             scrub: Callable[[str, str], str]) -> ContextSnippet | None:
    """The snippet as the file ``text`` holds it now (``state``: the file as indexed);
    None when it cannot be shown."""
    if text is None:  # gone, unless it never was a file (agent memory's ``stash:<id>``)
        return None if state is not None else snippet
    lines = text.splitlines()
    start, end = snippet.start_line, snippet.end_line
    if "\n".join(lines[start - 1:end]) == snippet.text:
        return snippet
    if state is not None and blake3.blake3(text.encode("utf-8")).hexdigest() == state.content_hash:
        return snippet
    moved = _find(snippet.text, text)
    if moved is not None:
        return dataclasses.replace(snippet, start_line=moved,
                                   end_line=moved + (end - start),
                                   metadata={**snippet.metadata, "moved_from": start})
    if end > len(lines) or start < 1:
        return None
    now = scrub("\n".join(lines[start - 1:end]), snippet.file_path)
    return dataclasses.replace(snippet, text=now, tokens=estimate_tokens(now),
                               metadata={**snippet.metadata, "stale": True})


def _find(chunk: str, text: str) -> int | None:
    """The 1-based line where ``chunk`` starts in ``text`` as whole lines, or None."""
    at = text.find(chunk)
    while at != -1:
        if at == 0 or text[at - 1] == "\n":
            end = at + len(chunk)
            if end == len(text) or text[end] in "\r\n":
                return text.count("\n", 0, at) + 1
        at = text.find(chunk, at + 1)
    return None
