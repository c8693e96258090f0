"""Adding documents: files or folders → read → scrub, chunk, contextualize → store.

A document is stored once, however many contexts hold it: its chunks are file rows under a
``kb://`` path (see :data:`contextd.store.base.KNOWLEDGE_PREFIX`), and contexts only hold
memberships. Its identity is the file it was read from, so adding the same file to a second
context links it (no reading, no chunking, no embedding), and re-adding an unchanged file
costs a BLAKE3 of its bytes. A changed file is read and chunked again; its chunks are
embedded only where their text changed, because vectors are keyed by the BLAKE3 of the text
(the embeddings table is the cache). Each document is written in one transaction with its
memberships (a batch of documents per transaction), so a kill mid-add leaves whole
documents or none: adding again resumes.
"""

from __future__ import annotations

import fnmatch
import logging
import os
from pathlib import Path
from typing import Sequence

import blake3

from contextd.config.sections import ContextConfig
from contextd.indexer.plan import FileTask
from contextd.indexer.worker import INDEXED, index_text
from contextd.errors import KnowledgeError
from contextd.knowledge.readers import read_document
from contextd.knowledge.readers.base import ReadFailure, format_of
from contextd.knowledge.records import DocumentOutcome
from contextd.store.base import KNOWLEDGE_PREFIX, DocumentRecord, IndexStore

log = logging.getLogger(__name__)

ADDED, UPDATED, UNCHANGED, FAILED, SKIPPED = "added", "updated", "unchanged", "failed", \
    "skipped"
# Documents (or chunks) stored per transaction by a folder add.
WRITE_BATCH_DOCUMENTS = 32
WRITE_BATCH_CHUNKS = 4000
# Folders a folder add never descends into (version control, caches, environments).
SKIPPED_FOLDERS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv",
                             "venv", ".contextd", ".mypy_cache", ".pytest_cache", ".tox"})


def index_path(source: Path, root: Path) -> str:
    """The ``kb://`` path of a document: relative to the project root when inside it (so
    scope folders and files name it as they name project files), else absolute."""
    try:
        return KNOWLEDGE_PREFIX + source.relative_to(root.resolve()).as_posix()
    except ValueError:
        return KNOWLEDGE_PREFIX + source.as_posix()


def _selected(rel: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
    """Whether a file of a folder (path relative to it) passes the include/exclude globs;
    a glob without '/' also matches the file name alone."""
    def hit(pattern: str) -> bool:
        return fnmatch.fnmatchcase(rel, pattern) or (
            "/" not in pattern and fnmatch.fnmatchcase(rel.rsplit("/", 1)[-1], pattern))
    return (not include or any(hit(p) for p in include)) and not any(hit(p) for p in exclude)


def expand(sources: Sequence[Path], include: Sequence[str], exclude: Sequence[str],
           limit: int) -> list[tuple[Path, bool]]:
    """Files to add: (file, named explicitly?). Folders are walked recursively (symlinks
    not followed, hidden and tool folders skipped) and filtered by the globs."""
    files: list[tuple[Path, bool]] = []
    for source in sources:
        if source.is_file():
            files.append((source, True))
            continue
        for folder, dirs, names in os.walk(source):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_FOLDERS
                             and not d.startswith("."))
            for name in sorted(names):
                path = Path(folder) / name
                if name.startswith(".") or path.is_symlink():
                    continue
                if _selected(path.relative_to(source).as_posix(), include, exclude):
                    files.append((path, False))
        if len(files) > limit:
            raise KnowledgeError(f"{source}: more than {limit} files to add "
                                 "(knowledge.max_files_per_add); narrow it with include/"
                                 "exclude globs")
    return list(dict.fromkeys(files))


class DocumentWriter:
    """Reads files into documents and stores them in batches (see the module docstring).

    Documents are written WRITE_BATCH_DOCUMENTS at a time, each batch in one transaction:
    a transaction costs tens of milliseconds on a loaded machine, more than reading a small
    document. A kill loses the batch in flight, never part of a document.
    """

    def __init__(self, store: IndexStore, config: ContextConfig, root: Path,
                 contexts: Sequence[str], known: dict[str, dict],
                 metadata: dict | None = None, force_ocr: bool = False):
        self.store = store
        self.config = config
        self.root = root
        self.contexts = list(contexts)
        self.known = known
        # Metadata given at add is kept with each document it adds; force_ocr
        # reads PDFs by OCR (and re-reads an unchanged one, which was read without it).
        self.metadata = dict(metadata or {})
        self.force_ocr = force_ocr
        self._pending: list[DocumentRecord] = []
        self._linked: list[str] = []

    def add(self, source: Path, explicit: bool) -> DocumentOutcome:
        """Read one file and queue it for the next write (``flush`` writes the rest)."""
        outcome, record = self._read(source, explicit)
        if record is not None:
            self._pending.append(record)
            if len(self._pending) >= WRITE_BATCH_DOCUMENTS or sum(
                    len(r.file.chunks) for r in self._pending) >= WRITE_BATCH_CHUNKS:
                self.flush()
        elif outcome.status == UNCHANGED and outcome.new_links:
            self._linked.append(outcome.path)
        return outcome

    def flush(self) -> None:
        """Store the queued documents and memberships."""
        if self._pending:
            self.store.kb_write_documents(self._pending, self.contexts)
            self._pending = []
        if self._linked:
            self.store.kb_link(self._linked, self.contexts)
            self._linked = []

    def _read(self, source: Path, explicit: bool
              ) -> tuple[DocumentOutcome, DocumentRecord | None]:
        settings = self.config.knowledge
        fmt = format_of(source.name)
        name = str(source)
        if fmt is None or fmt not in settings.formats:
            reason = ("unknown format" if fmt is None else f"format {fmt} is not enabled "
                      "(knowledge.formats)") + f" ({source.suffix or 'no extension'}); " \
                f"formats: {', '.join(settings.formats)}"
            return DocumentOutcome(name, FAILED if explicit else SKIPPED, reason=reason), None
        try:
            info = source.stat()
            if info.st_size > settings.max_file_size_mb * 2**20:
                return DocumentOutcome(name, FAILED, format=fmt, reason=(
                    f"{info.st_size / 2**20:.1f} MB, over knowledge.max_file_size_mb "
                    f"({settings.max_file_size_mb:g})")), None
            data = source.read_bytes()
        except OSError as exc:
            return DocumentOutcome(name, FAILED, format=fmt,
                                   reason=f"cannot read: {exc.strerror or exc}"), None
        path = index_path(source, self.root)
        digest = blake3.blake3(data).hexdigest()
        stored = self.known.get(path)
        new_links = len(set(self.contexts) - set(stored["contexts"] or ())) if stored \
            else len(self.contexts)
        if stored and stored["content_hash"] == digest and not (
                self.force_ocr and fmt == "pdf") and (
                not self.metadata or stored.get("metadata") == self.metadata):
            # what it holds, nothing re-done
            return DocumentOutcome(name, UNCHANGED, path, fmt, chunks=stored["chunks"] or 0,
                                   pages=stored.get("pages"), new_links=new_links), None
        try:
            text = read_document(data, source.name, fmt, settings.max_pages,
                                 force_ocr=self.force_ocr)
        except ReadFailure as exc:
            return DocumentOutcome(name, FAILED, path, fmt, reason=str(exc)), None
        task = FileTask(path, name, info.st_size, info.st_mtime_ns)
        outcome = index_text(task, text.text, digest, self.config, self.store,
                             chunk_as=text.chunk_as)
        if outcome.status != INDEXED or outcome.record is None:
            return DocumentOutcome(name, FAILED, path, fmt,
                                   reason=outcome.message or outcome.status), None
        metadata = self.metadata or (stored or {}).get("metadata") or {}
        record = DocumentRecord(outcome.record, name, text.format, text.page_starts,
                                text.title, metadata)
        return DocumentOutcome(name, UPDATED if stored else ADDED, path, text.format,
                               chunks=len(outcome.record.chunks),
                               pages=len(text.page_starts) or None, new_links=new_links,
                               secrets_redacted=outcome.record.secrets_redacted,
                               size_bytes=info.st_size), record
