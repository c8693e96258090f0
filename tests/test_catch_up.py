"""A large write is taken into the in-memory indexes a slice at a time (issue 26: answers
given while the background owner reads a large project waited 3-4 s to take in what it had
written since the last answer).

The catalog drops removed files and the old chunks of re-written ones at once and loads
written files for a bounded time, leaving the rest waiting; BM25 follows the catalog, never
the store, so it holds exactly the catalog's chunks. While files are being indexed, or when
many were written (a ``git checkout``), an answer says how many files it could not search yet
and a background thread takes in the rest; otherwise an answer takes the few written files
in first. Real DuckDB store, real indexer, real files.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from golden import open_indexed
from contextd import ContextModule
from contextd.indexer import Indexer
from contextd.providers.catalog import FILES_PER_STEP, ChunkCatalog
from contextd.providers.fulltext import FullTextIndex, code_tokens
from contextd.providers import fulltext as fulltext_module
from contextd.providers.spool import spool_folder
from contextd.query import catch_up as catch_up_module
from contextd.query.left_out import CATCHING_UP_NOTE
from contextd.query.records import QueryRequest

FIRST = 40  # files indexed before the large write
WRITTEN = 260  # new files of the large write: more than an answer loads itself


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


def test_written_files_wait_rewritten_ones_lose_their_old_chunks_and_bm25_follows(project):
    project, store = project
    catalog = ChunkCatalog(store, spool_folder(project))
    bm25 = FullTextIndex(catalog)
    bm25.sync()
    _large_write(project, store)

    catalog.catch_up(store.generation(), load_at_most=0)  # an answer's, while many wait
    rewritten = catalog.paths["module_000.py"]
    assert rewritten in catalog.waiting and len(catalog.waiting) == WRITTEN + 1
    assert catalog.chunks_for_files([rewritten]) == []  # its old text is searchable no more
    bm25.sync(store.generation())
    assert set(bm25.bm25.slot_of) == set(catalog.rows)
    assert bm25.bm25.df("version0") == FIRST - 1 and bm25.bm25.df("version1") == 0

    catalog.catch_up(store.generation(), within_s=0.0)  # one step of written files, no more
    assert len(catalog.waiting) == WRITTEN + 1 - FILES_PER_STEP
    bm25.sync(store.generation())
    assert set(bm25.bm25.slot_of) == set(catalog.rows)
    waiting_path = next(p for p, fid in catalog.paths.items()
                        if fid in catalog.waiting and p != "module_000.py")
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
    """While the indexer writes, an answer takes in no new file and says how many wait; a
    background thread follows the store and takes in the rest once it stops."""
    project, store = project
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


def test_a_file_written_but_not_taken_in_is_found_by_its_text(project, monkeypatch):
    """While files are being indexed an answer leaves written files waiting (taking them in
    cost most of a first answer) and drops the old chunks of a re-written one; their text is
    searched as the files not indexed yet are (contextd.query.unread_scan), so none is
    hidden from it and nothing shown is stale."""
    project, store = project
    monkeypatch.setattr(catch_up_module, "PAUSE_S", 600.0)  # no background step meanwhile
    module = ContextModule(project, store)
    module.pipeline.catch_up.writing = lambda: True
    try:
        ask = _asker(module)
        assert "module_000.py" in {h.file_path for h in ask(0).hits}
        _large_write(project, store)
        last = f"module_{FIRST + WRITTEN - 1:03d}.py"
        answer = ask(FIRST + WRITTEN - 1)
        catalog = module.pipeline.catalog
        assert catalog.paths[last] in catalog.waiting
        assert catalog.paths["module_000.py"] in catalog.waiting
        assert _catching_up(answer), answer.notes
        assert last in {h.file_path for h in answer.hits}
        (rewritten,) = [h for h in ask(0).hits if h.file_path == "module_000.py"]
        assert "version1" in rewritten.snippet
    finally:
        module.shutdown()


def test_when_nothing_is_being_indexed_an_answer_takes_a_few_written_files_in(project):
    """An edit or two is taken in by the answer itself: it is complete, with no note."""
    project, store = project
    module = ContextModule(project, store)
    try:
        ask = _asker(module)
        ask(0)  # the catalog loaded before the edits
        root = Path(project.root)
        _write(root, 0, version=1)
        _write(root, FIRST)
        Indexer(project, store, embed=False).ensure_indexed()
        answer = ask(FIRST)
        assert f"module_{FIRST:03d}.py" in {h.file_path for h in answer.hits}
        assert not _catching_up(answer) and not module.pipeline.catalog.waiting
        (rewritten,) = [h for h in ask(0).hits if h.file_path == "module_000.py"]
        assert "version1" in rewritten.snippet
    finally:
        module.shutdown()


def test_an_answer_after_a_checkout_loads_none_of_its_files_and_the_background_does(project):
    """A ``git checkout`` re-writes hundreds of held files (fastapi: 739, 30k chunks): the
    answer that loaded them all waited 10-14 s (issue 37). It now drops their old chunks
    only, shows their text as it is on disk, and the background takes them in."""
    project, store = project
    assert FIRST > catch_up_module.ANSWER_LOADS_FILES
    module = ContextModule(project, store)
    try:
        ask = _asker(module)
        ask(0)
        _rewrite(project, store, 5)  # every held file, as a checkout's batch writes them
        catalog = module.pipeline.catalog
        full_text = module.pipeline.provider("full_text")
        with module.pipeline.catch_up.answering(store.generation()):  # no background step
            assert len(catalog.waiting) == FIRST
            assert not any(e.file_path.startswith("module_") for e in catalog.rows.values())
            full_text.catch_up(store.generation())
            bm25 = full_text.memory_index.bm25
            assert bm25.df("version0") == 0 and bm25.df("version5") == 0
        root = Path(project.root)
        answer = ask(3)
        assert "module_003.py" in {h.file_path for h in answer.hits}
        for hit in answer.hits:
            lines = (root / hit.file_path).read_text().splitlines()
            assert hit.snippet == "\n".join(lines[hit.start_line - 1:hit.end_line]), hit
        deadline = time.monotonic() + 60
        while not _followed(full_text.memory_index, store.generation()) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not catalog.waiting
        assert full_text.memory_index.bm25.df("version5") == FIRST
        assert not _catching_up(ask(3))
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


def test_background_work_waits_for_the_last_answer_and_is_woken_by_its_end(project):
    """wait_until_no_answer (the background catch-up and the BM25 save) returns only once
    no answer of the process searches, woken by the last one's end, and returns to a
    stopped waiter even while an answer goes on."""
    _, store = project
    answers = catch_up_module.CatchUp(ChunkCatalog(store), lambda: [])
    done, stopped_done, stopped = threading.Event(), threading.Event(), threading.Event()

    def wait(flag: threading.Event, stop: threading.Event | None) -> None:
        catch_up_module.wait_until_no_answer(stop)
        flag.set()

    with answers.answering(store.generation()):
        with answers.answering(store.generation()):
            threading.Thread(target=wait, args=(done, None), daemon=True).start()
            threading.Thread(target=wait, args=(stopped_done, stopped), daemon=True).start()
        assert not done.wait(0.3), "one answer still searches"
        stopped.set()
        catch_up_module.wake_waiters()
        assert stopped_done.wait(30)
        assert not done.is_set()
    assert done.wait(30)
    catch_up_module.wait_until_no_answer()  # nobody answering: at once


def test_the_bm25_file_is_written_outside_the_lock_an_answer_needs(project, tmp_path,
                                                                   monkeypatch):
    """Only the fold holds the index's lock: the file is written after it, from arrays no
    later change touches (issue 37: answers after a ``git checkout`` waited for the whole
    save), and what was written is the index as folded."""
    from contextd.providers import fulltext

    project, store = project
    index = FullTextIndex(ChunkCatalog(store, spool_folder(project)), tmp_path / "bm25.npz")
    index.sync(store.generation())
    folded = len(index.bm25)
    lock_free_while_writing = []
    write = fulltext.write_arrays

    def write_and_probe(path, arrays):
        def probe():
            free = index.lock.acquire(timeout=30)
            lock_free_while_writing.append(free)
            if free:
                # A change while the file is written must not reach it.
                index.bm25.remove(next(iter(index.bm25.slot_of)))
                index.lock.release()
        prober = threading.Thread(target=probe)
        prober.start()
        prober.join(60)
        write(path, arrays)

    monkeypatch.setattr(fulltext, "write_arrays", write_and_probe)
    index.flush()
    assert lock_free_while_writing == [True]
    assert len(index.bm25) == folded - 1
    loaded = fulltext.BM25Index.load(index.saved)[0]
    assert len(loaded) == folded


def _rewrite(project, store, version: int) -> None:
    """Every file of the fixture re-written (a ``git checkout``'s batch) and refreshed."""
    root = Path(project.root)
    for file in range(FIRST):
        _write(root, file, version)
    Indexer(project, store, embed=False).refresh([f"module_{f:03d}.py" for f in range(FIRST)])


def test_the_chunks_to_take_in_are_tokenised_outside_the_index_lock(project):
    """After a ``git checkout`` the chunks BM25 takes in are tokenised without its lock, so
    an answer is not queued behind the tokenising (issue 37); a chunk re-written after its
    tokens were made is tokenised again, and the index ends as a fresh build of the store."""
    project, store = project
    index = FullTextIndex(ChunkCatalog(store, spool_folder(project)))
    index.sync(store.generation())
    _rewrite(project, store, 7)
    index.catalog.sync(store.generation())
    preparing = threading.Thread(target=index._prepare)
    with index.lock:  # an answer searching: the tokens are made all the same
        preparing.start()
        preparing.join(60)
        assert not preparing.is_alive()
    assert len(index._ready) == FIRST  # one chunk per re-written module
    _rewrite(project, store, 8)  # after the tokens were made
    index.catalog.sync(store.generation())
    index.sync(store.generation())
    fresh = FullTextIndex(ChunkCatalog(store, spool_folder(project)))
    fresh.sync(store.generation())
    for word in ("version8", "version7", _word(3), "handler"):
        assert index.bm25.scores(code_tokens(word)) == fresh.bm25.scores(code_tokens(word))
    assert index.bm25.df("version8") == FIRST and index.bm25.df("version7") == 0


def test_a_step_loads_no_further_read_past_its_chunks(project):
    """A background step after the writing has stopped loads no further read of files once
    it holds TAIL_STEP_CHUNKS new chunks, so BM25 can tokenise them all before taking its
    lock (issue 37: fastapi's checkout, 28-30k chunks, past BM25's 16,384)."""
    project, store = project
    catalog = ChunkCatalog(store, spool_folder(project))
    catalog.sync(store.generation())
    _large_write(project, store)
    catalog.catch_up(store.generation(), within_s=600.0, chunks_at_most=1)
    assert len(catalog.waiting) == WRITTEN + 1 - FILES_PER_STEP  # one read, not more
    catalog.catch_up(store.generation(), within_s=600.0, chunks_at_most=10_000)
    assert not catalog.waiting
    assert catch_up_module.TAIL_STEP_CHUNKS + 2 * FILES_PER_STEP * 40 \
        <= fulltext_module.PREPARE_MAX_CHUNKS  # a read past the limit still fits


def test_prepared_tokens_are_taken_without_reading_the_texts_again(project, monkeypatch):
    """BM25 takes in the chunks it tokenised ahead of its lock by their catalog entries,
    without reading their texts from the spool a second time (after fastapi's checkout each
    of 30k texts was read twice, issue 37); the index ends as a fresh build of the store."""
    project, store = project
    index = FullTextIndex(ChunkCatalog(store, spool_folder(project)))
    index.sync(store.generation())
    _rewrite(project, store, 13)
    index.catalog.sync(store.generation())
    index._prepare()
    assert len(index._ready) == FIRST
    spool, reads = index.catalog.spool, []
    read = spool.read
    monkeypatch.setattr(spool, "read", lambda at, size: reads.append(at) or read(at, size))
    index.sync(store.generation())
    assert reads == [] and not index._ready
    fresh = FullTextIndex(ChunkCatalog(store, spool_folder(project)))
    fresh.sync(store.generation())
    for word in ("version13", _word(3), "handler"):
        assert index.bm25.scores(code_tokens(word)) == fresh.bm25.scores(code_tokens(word))


def _followed(index: FullTextIndex, generation: int) -> bool:
    """Whether the catalog holds every file written up to ``generation`` and BM25 follows
    it (read under the locks: a background step sets the catalog's generation first)."""
    with index.lock, index.catalog.lock:
        return not index.catalog.waiting and index.is_current(generation)


def test_after_a_watcher_batch_the_indexes_follow_without_an_answer(project):
    """The owner's watcher batch starts the in-memory indexes' catch-up at once, so the
    next answer finds them current instead of paying for it (issue 37)."""
    from contextd.runtime.engine import Engine

    project, _ = project
    engine = Engine(project)
    try:
        engine.module.query(QueryRequest("handler", providers=("full_text",),
                                         wait_for_model=False))
        _rewrite(project, engine.store, 9)
        engine.take_in_written()
        full_text = engine.module.pipeline.provider("full_text").memory_index
        deadline = time.monotonic() + 60
        while not _followed(full_text, engine.store.generation()) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _followed(full_text, engine.store.generation())
        assert full_text.bm25.df("version9") == FIRST
    finally:
        engine.close()


def test_the_indexes_follow_each_batch_a_run_writes_without_an_answer(project):
    """Every batch the indexer writes starts the in-memory indexes' catch-up, a run outside
    any watcher included: an owner's first full read of fastapi ended with 2,655 files not
    taken in, when only answers and watcher batches started it (issue 37)."""
    from contextd.runtime.engine import Engine

    project, _ = project
    engine = Engine(project)
    try:
        engine.module.query(QueryRequest("handler", providers=("full_text",),
                                         wait_for_model=False))
        root = Path(project.root)
        for file in range(FIRST):
            _write(root, file, 11)
        engine.indexer.refresh([f"module_{f:03d}.py" for f in range(FIRST)])
        full_text = engine.module.pipeline.provider("full_text").memory_index

        def taken_in() -> int:  # the run's vectors move the store on: no generation to wait on
            with full_text.lock:
                return full_text.bm25.df("version11")

        deadline = time.monotonic() + 60
        while taken_in() < FIRST and time.monotonic() < deadline:
            time.sleep(0.05)
        assert taken_in() == FIRST and not full_text.catalog.waiting
    finally:
        engine.close()


def test_the_vectors_wait_while_the_answers_indexes_take_in_a_checkout(project):
    """Between its windows the owner's vector follower waits while the in-memory indexes
    take in written files, as it waits for a run: after a checkout the model took a core
    beside that catch-up (issue 37)."""
    from contextd.runtime.engine import Engine

    project, _ = project
    engine = Engine(project)
    try:
        engine.module.query(QueryRequest("handler", providers=("full_text",),
                                         wait_for_model=False))
        _rewrite(project, engine.store, 12)  # more files than an answer loads itself
        catch_up = engine.module.pipeline.catch_up
        returned = threading.Event()

        def before_a_window() -> None:
            engine.indexer._wait_for_no_run(None)
            returned.set()

        with catch_up.answering(engine.store.generation()):
            assert catch_up.busy  # files wait; the background thread waits for this answer
            threading.Thread(target=before_a_window, daemon=True).start()
            assert not returned.wait(1.0)
        assert returned.wait(60)
        assert not engine.module.pipeline.catalog.waiting
    finally:
        engine.close()


def test_once_the_writing_has_stopped_the_rest_is_taken_in_one_step(project, monkeypatch):
    """While files are being indexed the background takes written files in a short slice at
    a time; once the writing has stopped it takes the rest in one step, so BM25 and the
    vectors follow once rather than once per slice (issue 37: 0.1 s slices after fastapi's
    checkout were 4-12 s of the wait for a current answer)."""
    # A slice of one read while writing, so the old behaviour would take several steps.
    monkeypatch.setattr(catch_up_module, "BACKGROUND_SLICE_S", 0.0)
    monkeypatch.setattr(catch_up_module, "TAIL_SLICE_S", 600.0)
    project, store = project
    module = ContextModule(project, store)
    writing = threading.Event()
    catch_up = module.pipeline.catch_up
    catch_up.writing = writing.is_set
    catalog = module.pipeline.catalog
    full_text = module.pipeline.provider("full_text").memory_index
    try:
        ask = _asker(module)
        ask(0)
        _large_write(project, store)
        assert WRITTEN + 1 > 2 * FILES_PER_STEP
        version = catalog.version
        with catch_up.answering(store.generation()):  # leaves them all waiting
            assert len(catalog.waiting) == WRITTEN + 1
        deadline = time.monotonic() + 120
        while not _followed(full_text, store.generation()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _followed(full_text, store.generation())
        with catalog.lock:
            changes = catalog.changes_after(version)
        assert [len(c.loaded) for c in changes if c.loaded] == [WRITTEN + 1]
        assert not _catching_up(ask(FIRST + WRITTEN - 1))
    finally:
        module.shutdown()


def test_the_background_is_busy_until_the_indexes_have_followed(project):
    """The background catch-up counts as busy (the owner's vector follower waits) until
    the indexes built from the catalog have followed its last step, not only until the
    catalog has loaded the files: the model took a core while BM25 still took in a
    checkout's files (issue 37)."""
    project, store = project
    module = ContextModule(project, store)
    catch_up = module.pipeline.catch_up
    catalog = module.pipeline.catalog
    full_text = module.pipeline.provider("full_text").memory_index
    try:
        _asker(module)(0)
        _rewrite(project, store, 14)  # more files than an answer loads itself
        with full_text.lock:  # an answer searching BM25: it cannot follow yet
            catch_up.follow()
            deadline = time.monotonic() + 60
            while (catalog.waiting or catalog.generation != store.generation()) \
                    and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not catalog.waiting and catch_up.busy
        deadline = time.monotonic() + 60
        while catch_up.busy and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not catch_up.busy and _followed(full_text, store.generation())
    finally:
        module.shutdown()
