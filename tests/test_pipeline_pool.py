"""The bootstrap's worker pool: this process and the pool share the batches of a run; the
writer stores what they make in batches."""

from __future__ import annotations

import gc
import pickle
import threading

import pytest

from contextd.config.project import Project
from contextd.indexer import pipeline
from contextd.indexer.pipeline import TASK_BATCH_FILES, Writer, outcomes
from contextd.indexer.plan import FileTask
from contextd.indexer.progress import NullProgress
from contextd.indexer.report import IndexReport
from contextd.indexer.worker import INDEXED, load_outcomes, process_file
from contextd.store.duckdb import DuckDBStore


@pytest.mark.slow  # a pool of processes: ~3 s on a quiet machine, minutes on a loaded one
def test_a_pool_run_yields_every_file_once_whoever_takes_its_batch(tmp_path):
    """This process takes batches the pool has not been sent, and at the end the last ones
    it has not started (issue 37: one core otherwise waited for the pool's queue alone).
    Whichever process takes a batch, each file comes out once, indexed."""
    root = tmp_path / "repo"
    root.mkdir()
    tasks = []
    for n in range(TASK_BATCH_FILES * 5 + 7):
        path = root / f"module_{n}.py"
        path.write_text(f"def handler_{n}(value):\n    return value * {n}\n")
        stat = path.stat()
        tasks.append(FileTask(path.name, str(path), stat.st_size, stat.st_mtime_ns))
    config = Project.open(root).config
    produced = list(outcomes(tasks, config, workers=1, cancel=threading.Event()))
    assert sorted(o.task.path for o in produced) == sorted(t.path for t in tasks)
    assert {o.status for o in produced} == {INDEXED}
    for outcome in produced:
        number = outcome.task.path.removeprefix("module_").removesuffix(".py")
        assert outcome.record.chunks[0].chunk.defines[0].name == f"handler_{number}"


def test_past_the_first_answers_window_the_writer_flushes_by_size(tmp_path, monkeypatch):
    """Once the first answers' window is over, the writer no longer commits every fraction
    of a second: a batch waits for WRITE_BATCH_FILES files (or WRITE_INTERVAL_LATE_S), since
    each commit waits on the disk while this process could be chunking (issue 37). The
    clock plays no part here: the window is over at once and the late interval never
    passes."""
    monkeypatch.setattr(pipeline, "FIRST_ANSWER_WINDOW_S", 0.0)
    monkeypatch.setattr(pipeline, "WRITE_INTERVAL_LATE_S", 3600.0)
    monkeypatch.setattr(pipeline, "WRITE_BATCH_FILES", 5)
    root = tmp_path / "repo"
    root.mkdir()
    config = Project.open(root).config
    store = DuckDBStore(tmp_path / "index.duckdb")
    try:
        writer = Writer(store, IndexReport(mode="bootstrap"), NullProgress(),
                        track_progress=False, fail_fast=False, on_written=lambda: None)
        writer.flush()  # the run's first flush: past the window, the late interval holds
        for n in range(7):
            path = root / f"module_{n}.py"
            path.write_text(f"def handler_{n}(value):\n    return value * {n}\n")
            stat = path.stat()
            writer.add(process_file(FileTask(path.name, str(path), stat.st_size,
                                             stat.st_mtime_ns), config))
            stored = len(store.file_states())
            assert stored == (5 if n >= 4 else 0), f"after file {n + 1}: {stored} stored"
        writer.flush()
        assert len(store.file_states()) == 7
    finally:
        store.close()


def test_a_batch_is_unpickled_with_the_collector_paused_and_restored(tmp_path):
    """The writer unpickles a worker's batch with the garbage collector off (issue 37: it
    started a collection every 700 new objects, none of them garbage), and turns it back
    on afterwards, even when the batch cannot be read; a collector that was off stays off."""
    path = tmp_path / "module.py"
    path.write_text("def handler(value):\n    return value\n")
    stat = path.stat()
    outcome = process_file(FileTask(path.name, str(path), stat.st_size, stat.st_mtime_ns),
                           Project.open(tmp_path).config)
    assert gc.isenabled()
    loaded = load_outcomes(pickle.dumps([outcome]))
    assert loaded == [outcome] and gc.isenabled()
    with pytest.raises(pickle.UnpicklingError):
        load_outcomes(b"not a pickle")
    assert gc.isenabled()
    gc.disable()
    try:
        load_outcomes(pickle.dumps([outcome]))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_files_indexed_in_this_process_leave_the_collector_as_they_found_it(tmp_path):
    """A run too small for the pool indexes its files here, each with the garbage collector
    paused (issue 37); whoever reads an outcome finds it on again, and a collector that was
    off stays off."""
    tasks = []
    for n in range(3):
        path = tmp_path / f"module_{n}.py"
        path.write_text(f"class Handler{n}:\n    def run(self, value):\n        return value\n")
        stat = path.stat()
        tasks.append(FileTask(path.name, str(path), stat.st_size, stat.st_mtime_ns))
    config = Project.open(tmp_path).config
    seen = []
    for outcome in outcomes(tasks, config, workers=1, cancel=threading.Event()):
        seen.append((outcome.status, gc.isenabled()))
    assert seen == [(INDEXED, True)] * 3
    gc.disable()
    try:
        produced = list(outcomes(tasks, config, workers=1, cancel=threading.Event()))
        assert [o.status for o in produced] == [INDEXED] * 3 and not gc.isenabled()
    finally:
        gc.enable()
