"""No refresh waits behind the embedding backlog (issue 37): in a process that stays up (the
owner), a refresh returns once its chunks are written and the vectors follow in the
background. Real parts: a git repository in a tmp dir, the real indexer, DuckDB store and
embedding model; the order is observed through the store and the follower, not timed."""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

import numpy as np
from test_mcp_server import make_repo

from contextd.config.project import Project
from contextd.indexer import Indexer
from contextd.indexer.core import FOLLOW_WINDOW_BATCHES
from contextd.indexer.embed_stage import PIECE_TEXTS, WINDOW_BATCHES, embed_missing
from contextd.store.duckdb import DuckDBStore


def _module(i: int, doc: str) -> str:
    return "".join(f'def step_{i}_{j}(order):\n    """{doc} {j} of pipeline {i}."""\n'
                   f'    return order + {j}\n\n\n' for j in range(3))


def test_a_refresh_returns_before_the_embedding_of_the_backlog_ends(tmp_path):
    root = make_repo(tmp_path / "repo", {f"src/mod_{i:02d}.py": _module(i, "Step")
                                         for i in range(10)})
    project = Project.open(root)
    indexer = Indexer(project, DuckDBStore(project.db_path))
    try:
        indexer.ensure_indexed(embed=False)  # chunks only: a backlog of vectors is waiting
        identity = indexer.embedder.identity
        backlog = indexer.store.count_missing_embeddings(identity)
        assert backlog >= 30
        follower = indexer.follow_vectors()
        (root / "src/mod_00.py").write_text(_module(0, "Rewritten step"))
        report = indexer.refresh(["src/mod_00.py"])
        # The chunks are written and the run is over; their vectors are not computed yet.
        assert report.files_indexed == 1 and report.chunks_written == 3
        assert report.chunks_embedded == 0
        assert follower.running
        assert indexer.store.count_missing_embeddings(identity) > 0
        assert indexer.state == "idle"  # the run lock is free: the next run does not wait
        assert follower.wait(600)
        assert indexer.store.count_missing_embeddings(identity) == 0
    finally:
        indexer.follow_vectors().stop()
        indexer.store.close()


def test_a_whole_run_without_vectors_hands_them_to_the_follower_before_it_ends(tmp_path):
    """An owner's catch-up reads with embed=False; its vectors were handed over only after
    the run had ended, and an answer in between found neither a run nor a follower and
    claimed complete semantic results (the CI failure of issue 38's submission)."""
    root = make_repo(tmp_path / "repo", {f"src/mod_{i:02d}.py": _module(i, "Step")
                                         for i in range(10)})
    project = Project.open(root)
    indexer = Indexer(project, DuckDBStore(project.db_path))
    follower = indexer.follow_vectors()
    seen_during_the_run: list[bool] = []
    wake = follower.wake

    def wake_and_look() -> None:
        wake()
        seen_during_the_run.append(indexer.state != "idle" and indexer.embedding_under_way)

    follower.wake = wake_and_look
    try:
        report = indexer.ensure_indexed(embed=False)
        assert report.mode == "bootstrap" and report.chunks_written >= 30
        assert report.chunks_embedded == 0
        assert seen_during_the_run == [True]  # woken while the run still held its state
        assert follower.wait(600)
        assert indexer.store.count_missing_embeddings(indexer.embedder.identity) == 0
        assert not indexer.embedding_under_way
    finally:
        follower.stop()
        indexer.store.close()


class _HeldProgress:
    """A progress sink whose first file update holds the run (still reading, its files'
    state not yet idle) until the test releases it."""

    def __init__(self):
        self.reading = threading.Event()
        self.release = threading.Event()

    def start(self, total_files, label="indexing"):
        pass

    def update(self, files_done, chunks_done, current_file=None):
        self.reading.set()
        self.release.wait(120)

    def embedding(self, done, pending):
        pass

    def finish(self, message=""):
        pass


def test_the_follower_lets_a_run_reading_files_go_first(tmp_path):
    """Issue 37: after a ``git checkout`` the owner's watcher re-read 1,400 files while the
    follower embedded the backlog beside it, and on 2 cores the lexical answer was current
    only after minutes. The follower now waits, between windows, while a run reads files;
    it computes every vector once the run is over."""
    root = make_repo(tmp_path / "repo", {f"src/mod_{i:02d}.py": _module(i, "Step")
                                         for i in range(10)})
    project = Project.open(root)
    indexer = Indexer(project, DuckDBStore(project.db_path))
    held = _HeldProgress()
    run = threading.Thread(target=lambda: indexer.refresh(["src/mod_00.py"], progress=held))
    try:
        indexer.ensure_indexed(embed=False)
        identity = indexer.embedder.identity
        indexer.embedder.embed_query("model loaded")  # the follower's first window is prompt
        backlog = indexer.store.count_missing_embeddings(identity)
        follower = indexer.follow_vectors()
        (root / "src/mod_00.py").write_text(_module(0, "Rewritten step"))
        run.start()
        assert held.reading.wait(60)
        follower.wake()
        # Not one window while the run reads (a few seconds would embed the whole backlog).
        assert not follower.wait(3)
        assert indexer.store.count_missing_embeddings(identity) >= backlog
        held.release.set()
        run.join(60)
        assert follower.wait(600)
        assert indexer.store.count_missing_embeddings(identity) == 0
    finally:
        held.release.set()
        run.join(60)
        indexer.follow_vectors().stop()
        indexer.store.close()


class _Windows(_HeldProgress):
    """A progress sink that keeps how many texts each embedding window computed."""

    def __init__(self):
        super().__init__()
        self.sizes: list[int] = []
        self._done = 0

    def embedding(self, done, pending):
        if done > self._done:
            self.sizes.append(done - self._done)
        self._done = done


def test_the_follower_embeds_in_short_windows_a_run_waits_for_at_most(tmp_path):
    """A run that starts while the follower embeds waits for its window to end beside the
    model (issue 37: after a ``git checkout`` the refresh shared both cores with a
    512-text window for a minute). The follower's windows hold FOLLOW_WINDOW_BATCHES
    batches; the backlog is still computed whole."""
    root = make_repo(tmp_path / "repo", {f"src/mod_{i:02d}.py": _module(i, "Step")
                                         for i in range(10)})
    (root / "context.toml").write_text("[embedding]\nbatch_size = 4\n")
    project = Project.open(root)
    indexer = Indexer(project, DuckDBStore(project.db_path))
    windows = _Windows()
    try:
        indexer.ensure_indexed(embed=False)
        identity = indexer.embedder.identity
        backlog = indexer.store.count_missing_embeddings(identity)
        assert backlog >= 30
        follower = indexer.follow_vectors(lambda: windows)
        follower.wake()
        assert follower.wait(600)
        assert indexer.store.count_missing_embeddings(identity) == 0
        assert sum(windows.sizes) == backlog
        assert max(windows.sizes) == FOLLOW_WINDOW_BATCHES * 4 < WINDOW_BATCHES * 4
    finally:
        indexer.follow_vectors().stop()
        indexer.store.close()


@contextlib.contextmanager
def _chunks_without_vectors(tmp_path) -> Iterator[Indexer]:
    """The indexer of a small project whose chunks are written and none embedded."""
    root = make_repo(tmp_path / "repo", {f"src/mod_{i:02d}.py": _module(i, "Step")
                                         for i in range(10)})
    project = Project.open(root)
    indexer = Indexer(project, DuckDBStore(project.db_path))
    try:
        indexer.ensure_indexed(embed=False)
        yield indexer
    finally:
        indexer.store.close()


def test_a_window_ends_after_the_piece_under_way_when_other_work_must_go_first(tmp_path):
    """Issue 37: at load 10 a follower's window of 128 texts took 20-40 s, and a refresh
    that started meanwhile shared the cores with the model for all of it (a fifth of the
    owner's samples after a ``git checkout``). A yielding caller now embeds a window
    PIECE_TEXTS at a time and stores what it computed as soon as ``yields()`` says other
    work is waiting; the rest is fetched again by the next window."""
    with _chunks_without_vectors(tmp_path) as indexer:
        store, embedder = indexer.store, indexer.embedder
        backlog = store.count_missing_embeddings(embedder.identity)
        assert backlog > 2 * PIECE_TEXTS
        stored: list[int] = []
        windows: list[int] = []
        done = embed_missing(store, embedder, 64, on_batch=stored.append,
                             before_window=lambda: windows.append(len(stored)),
                             window_batches=2, yields=lambda: True)
        assert done == backlog and store.count_missing_embeddings(embedder.identity) == 0
        # Each window stopped after its first piece, and the next one went on from there.
        assert stored == [PIECE_TEXTS] * (backlog // PIECE_TEXTS) + \
            ([backlog % PIECE_TEXTS] if backlog % PIECE_TEXTS else [])
        assert windows == list(range(len(stored) + 1))


def test_a_window_nothing_waits_for_is_embedded_whole(tmp_path):
    """Without other work waiting, the pieces of a window add up to the whole window and
    its vectors are the ones the embedder gives the texts in one call."""
    with _chunks_without_vectors(tmp_path) as indexer:
        store, embedder = indexer.store, indexer.embedder
        rows = store.missing_embeddings(embedder.identity, 1000)
        stored: list[int] = []
        embed_missing(store, embedder, 64, on_batch=stored.append, window_batches=2,
                      yields=lambda: False)
        assert stored == [len(rows)]
        whole = embedder.embed([text for _, text in rows])
        kept = store.vectors_for(embedder.identity, [h for h, _ in rows])
        for (text_hash, _), vector in zip(rows, whole):
            assert np.allclose(kept[text_hash], vector, atol=1e-5)
