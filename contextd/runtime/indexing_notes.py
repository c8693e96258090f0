"""What an answer cannot include yet, said in the answer.

A query on a project still being indexed used to answer "0 results ... Nothing matched" while
the files were simply not read yet: an agent then concludes the code is not there. Here an
empty answer during indexing waits briefly for the files to come in, and otherwise says
exactly what is missing and when to retry; an answer given while vectors are still being
computed says how far semantic search has got.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Sequence

from contextd.query.left_out import SEMANTIC_PENDING, STILL_INDEXING, left_out_providers

from contextd.indexer.progress import format_duration

# An empty index that nothing will fill by itself.
BOOTSTRAP_OFF_NOTE = ("the index is empty and bootstrap.enabled = false: index the project "
                      "with `contextd refresh` (MCP: refresh_context with ['.'])")
# How long an empty answer waits for the indexing under way, and how often it asks again.
INDEXING_WAIT_S = 5.0
POLL_S = 0.5
# A reading of the whole project with at most this many files left (about a second's reading
# on a quiet machine) is waited for even when the answer is not empty: a new small project's
# first answer is then complete instead of "still indexing".
FEW_FILES_LEFT = 50


def _empty(response: Any) -> bool:
    return not response.hits and not response.files


def answer_while_indexing(indexer: Any, run: Callable[[], Any],
                          wait_s: float = INDEXING_WAIT_S) -> Any:
    """``run()``'s response, re-run while it is empty and files are being indexed or the
    first indexing has not started yet (at most ``wait_s``), with a note about what is still
    missing, or that the project holds nothing to index."""
    response = run()
    deadline = time.monotonic() + wait_s
    while (_empty(response) and _incomplete(indexer) or _nearly_read(indexer)) \
            and time.monotonic() < deadline:
        time.sleep(POLL_S)
        response = run()
    note = None
    if indexer.reading_project or (_empty(response) and indexer.indexing):
        note = indexing_note(indexer)
    elif _empty(response) and not indexer.config.bootstrap.enabled \
            and not indexer.store.file_states():
        note = BOOTSTRAP_OFF_NOTE
    elif _empty(response) and indexer.never_indexed:
        note = (f"{STILL_INDEXING}the index is empty and its first indexing is starting; "
                "retry in a few seconds")
    elif _empty(response) and not indexer.store.file_states():
        note = (f"nothing is indexed: {indexer.project.root} holds no file contextd indexes "
                "('contextd list-indexable' shows what it would index, 'contextd check-file "
                "PATH' why a file is left out)")
    elif indexer.embedding_under_way:
        note = embedding_note(indexer, response.notes)
    if note is None:
        return response
    notes = tuple(response.notes)
    if note.startswith(SEMANTIC_PENDING):  # its figures replace the answer's own count
        notes = tuple(n for n in notes if not n.startswith(SEMANTIC_PENDING))
    return dataclasses.replace(response, notes=notes + (note,))


def _incomplete(indexer: Any) -> bool:
    """Files are coming in, or will be: an index bootstrap.enabled = false leaves empty is
    not waited for."""
    return indexer.indexing or (indexer.never_indexed and indexer.config.bootstrap.enabled)


def _nearly_read(indexer: Any) -> bool:
    """The whole project is being read and only a few files are left."""
    pending = indexer.file_figures.pending
    return indexer.reading_project and pending is not None and pending <= FEW_FILES_LEFT


def indexing_note(indexer: Any) -> str:
    """``still indexing: 12 / 60 files indexed; retry in ~5 s``."""
    figures = indexer.file_figures
    total = figures.done + (figures.pending or 0)
    eta = figures.eta_seconds
    retry = f"retry in ~{format_duration(eta)}" if eta is not None else \
        "retry in a few seconds"
    return (f"{STILL_INDEXING}{figures.done:,} / {total:,} files indexed, so this answer may "
            f"miss files not read yet; {retry}")


def embedding_note(indexer: Any, notes: Sequence[str] = ()) -> str:
    """``semantic results cover 1,234 / 5,000 chunks so far (...)``, and what the rest of
    the answer holds (``notes``: the answer's other notes)."""
    return (f"{SEMANTIC_PENDING} ({indexer.embedding_figures.text()}); "
            f"{ready_results(notes)}")


def says_incomplete(notes: Sequence[str], files: bool = False) -> bool:
    """Whether ``notes`` already say that files or vectors are missing from the answer
    (``files``: that files are; a note about vectors does not say so)."""
    heads = (STILL_INDEXING,) if files else (STILL_INDEXING, SEMANTIC_PENDING)
    return any(note.startswith(heads) for note in notes)


def ready_results(notes: Sequence[str]) -> str:
    """What an answer given while vectors are computed rests on: the lexical and symbol
    results, complete, unless its notes say a provider was left out or files are not
    searchable yet (then never claimed)."""
    missing = left_out_providers(notes)
    if missing:
        return (f"results of {', '.join(missing)} are missing from this answer (see the note "
                "above), so it may miss what only they would find")
    if says_incomplete(notes, files=True):
        return "lexical and symbol results cover the files searchable so far (see above)"
    return "lexical and symbol results are complete"
