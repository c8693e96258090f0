"""The bootstrap's worker pool: this process and the pool share the batches of a run."""

from __future__ import annotations

import threading

import pytest

from contextd.config.project import Project
from contextd.indexer.pipeline import TASK_BATCH_FILES, outcomes
from contextd.indexer.plan import FileTask
from contextd.indexer.worker import INDEXED


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
