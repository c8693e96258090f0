"""A large write is taken into the in-memory indexes a slice at a time (issue 26: answers
given while the background owner reads a large project waited 3-4 s to take in what it had
written since the last answer).

The catalog takes in re-written and removed files at once and new files for a bounded time,
leaving the rest waiting; BM25 follows the catalog, never the store, so it holds exactly the
catalog's chunks. While files are being indexed, an answer says how many files it could not
search yet and a background thread takes in the rest; otherwise an answer takes everything in
first. Real DuckDB store, real indexer, real files.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from golden import open_indexed
from contextd import ContextModule
from contextd.indexer import Indexer
from contextd.providers.catalog import FILES_PER_READ, ChunkCatalog
from contextd.providers.fulltext import FullTextIndex, code_tokens
from contextd.providers.spool import spool_folder
from contextd.query import catch_up as catch_up_module
from contextd.query.left_out import CATCHING_UP_NOTE
from contextd.query.records import QueryRequest

FIRST = 40  # files indexed before the large write
WRITTEN = FILES_PER_READ + 60  # new files of the large write: one read, then some waiting


def _word(file: int) -> str:
    """A word only this file holds (letters: the tokenizer keeps it whole)."""
    return "quux" + "".join(chr(ord("a") + int(d)) for d in f"{file:03d}")


def _write(root: Path, file: int, version: int = 0) -> None:
    (root / f"module_{file:03d}.py").write_text(
        f"def handler_{file}(value):\n    \"\"\"{_word(file)} version{version}\"\"\"\n"
        f"    return value + {version}\n")


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    (root / "context.toml").write_text('[contextualizer]\nstrategy = "none"\n')
    for file in range(FIRST):
        _write(root, file)
    project, store = open_indexed(root)
    yield project, store
    store.close()


def _large_write(project, store) -> None:
    root = Path(project.root)
    for file in range(FIRST, FIRST + WRITTEN):
        _write(root, file)
    _write(root, 0, version=1)  # a file the catalog holds, re-written
    Indexer(project, store, embed=False).ensure_indexed()


def _catching_up(answer) -> list[str]:
    """The answer's note that files are not searchable yet (with their number)."""
    head, tail = CATCHING_UP_NOTE.split("{:,}")
    return [n for n in answer.notes if n.startswith(head) and tail in n]


def _paths_of(catalog: ChunkCatalog, chunk_ids) -> set[str]:
    return {catalog.rows[cid].file_path for cid in chunk_ids}


def test_new_files_wait_rewritten_ones_never_and_bm25_follows_the_catalog(project):
    project, store = project
    catalog = ChunkCatalog(store, spool_folder(project))
    bm25 = FullTextIndex(catalog)
    bm25.sync()
    _large_write(project, store)

    catalog.catch_up(store.generation(), within_s=0.0)  # one read of new files, no more
    assert len(catalog.waiting) == WRITTEN - FILES_PER_READ
    (rewritten,) = catalog.chunks_for_files([catalog.paths["module_000.py"]])
    assert "version1" in rewritten.text  # taken in at once: what is searchable is not stale
    bm25.sync(store.generation())
    assert set(bm25.bm25.slot_of) == set(catalog.rows)
    waiting_path = next(p for p, fid in catalog.paths.items() if fid in catalog.waiting)
    waiting_file = int(waiting_path[len("module_"):-len(".py")])
    assert bm25.bm25.top(code_tokens(_word(waiting_file)), 5) == []
    loaded_file = next(f for f in range(FIRST, FIRST + WRITTEN)
                       if catalog.paths[f"module_{f:03d}.py"] not in catalog.waiting)
    hits = bm25.bm25.top(code_tokens(_word(loaded_file)), 5)
    assert _paths_of(catalog, [cid for cid, _ in hits]) == {f"module_{loaded_file:03d}.py"}

    # A waiting file removed is no longer waiting; the rest comes in with a catch-up.
    (Path(project.root) / waiting_path).unlink()
    Indexer(project, store, embed=False).ensure_indexed()
    catalog.catch_up(store.generation(), within_s=0.0)
    assert catalog.paths.get(waiting_path) is None
    catalog.catch_up(store.generation())
    assert not catalog.waiting
    bm25.sync(store.generation())
    stored = {r.chunk_id for r in store.chunks_for_files(None)}
    assert set(catalog.rows) == stored == set(bm25.bm25.slot_of)


def test_a_plain_sync_takes_everything_in(project):
    """Readers that do not go through an answer (a provider asked directly, the tools)
    see every file written: only an answer's catch-up leaves files waiting."""
    project, store = project
    catalog = ChunkCatalog(store, spool_folder(project))
    catalog.sync()
    _large_write(project, store)
    catalog.sync()
    assert not catalog.waiting
    assert set(catalog.rows) == {r.chunk_id for r in store.chunks_for_files(None)}


def _asker(module):
    return lambda file: module.query(QueryRequest(
        f"{_word(file)} handler", providers=("full_text", "symbol"), wait_for_model=False))


def test_while_files_are_indexed_an_answer_says_what_it_could_not_search_yet(project,
                                                                            monkeypatch):
    """While the indexer writes, an answer takes in one read of new files and says how many
    wait; a background thread follows the store and takes in the rest once it stops."""
    project, store = project
    monkeypatch.setattr(catch_up_module, "SLICE_S", 0.0)
    module = ContextModule(project, store)
    writing = threading.Event()
    module.pipeline.catch_up.writing = writing.is_set  # as the engine does with its indexer
    try:
        ask = _asker(module)
        assert "module_000.py" in {h.file_path for h in ask(0).hits}
        writing.set()
        _large_write(project, store)
        answer = ask(FIRST + WRITTEN - 1)
        assert _catching_up(answer), answer.notes
        writing.clear()
        deadline = time.monotonic() + 60
        while module.pipeline.catalog.waiting and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not module.pipeline.catalog.waiting
        answer = ask(FIRST + WRITTEN - 1)
        assert f"module_{FIRST + WRITTEN - 1:03d}.py" in {h.file_path for h in answer.hits}
        assert not _catching_up(answer), answer.notes
    finally:
        module.shutdown()


def test_when_nothing_is_being_indexed_an_answer_takes_everything_in(project, monkeypatch):
    project, store = project
    monkeypatch.setattr(catch_up_module, "SLICE_S", 0.0)
    module = ContextModule(project, store)
    try:
        ask = _asker(module)
        ask(0)  # the catalog loaded before the large write
        _large_write(project, store)
        answer = ask(FIRST + WRITTEN - 1)
        assert f"module_{FIRST + WRITTEN - 1:03d}.py" in {h.file_path for h in answer.hits}
        assert not _catching_up(answer) and not module.pipeline.catalog.waiting
    finally:
        module.shutdown()


def test_an_answer_never_waits_for_the_bm25_save_it_finds_due(project, tmp_path):
    """The first sync builds the index and finds its save due (nothing saved yet); an
    answer searching meanwhile does not pay for the fold and the write (issue 37: the
    first answer after a ``git checkout`` did): the file is written once the process's
    answers are done, and a closing process writes what is still due."""
    project, store = project
    saved = tmp_path / "bm25.npz"
    index = FullTextIndex(ChunkCatalog(store, spool_folder(project)), saved)
    answers = catch_up_module.CatchUp(index.catalog, lambda: [])
    with answers.answering(store.generation()):
        index.sync(store.generation())
        assert len(index.bm25) and not saved.exists()
        assert index.bm25.delta_count == 0 and index.bm25.frozen_count  # a build is frozen
    deadline = time.monotonic() + 60
    while not saved.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert saved.exists(), "saved once no answer searched"

    closing = FullTextIndex(ChunkCatalog(store, spool_folder(project)), tmp_path / "b.npz")
    with answers.answering(store.generation()):
        closing.sync(store.generation())
    closing.flush()
    assert closing.saved.exists()
    loaded = FullTextIndex(ChunkCatalog(store, spool_folder(project)), closing.saved)
    loaded.sync(store.generation())
    assert loaded.bm25.frozen_count == len(loaded.bm25) == len(index.bm25)
