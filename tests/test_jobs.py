"""Rebuild jobs on a real repository and DuckDB file: dry-run estimate, one rebuild at a time,
cancel leaving a consistent index, status from the jobs table."""

from __future__ import annotations

import time

import pytest
from test_indexer import FUNC, make_repo, open_indexer, small_repo

from contextd.errors import JobConflictError
from contextd.runtime.jobs import JobRunner


def wait_for(predicate, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("condition not reached")


@pytest.fixture
def big_repo(tmp_path):
    return make_repo(tmp_path / "big", {f"p{i % 20}/m{i}.py": FUNC.format(
        name=f"f{i}", doc=f"Doc {i}.", n=i) * 3 for i in range(1500)})


def test_dry_run_estimates_and_changes_nothing(tmp_path):
    indexer = open_indexer(small_repo(tmp_path))
    indexer.ensure_indexed()
    generation = indexer.store.generation()
    result = JobRunner(indexer, indexer.store).rebuild(dry_run=True)
    assert result.status == "completed" and result.scope == "full"
    assert result.estimated_files == 4 and result.estimated_seconds >= 0
    assert result.details["byLanguage"] == {"python": 2, "markdown": 1, "yaml": 1}
    assert "currentIndexSize" in result.details and "totalSizeMB" in result.details
    assert indexer.store.generation() == generation
    partial = JobRunner(indexer, indexer.store).rebuild(["src"], dry_run=True)
    assert partial.scope == "partial" and partial.estimated_files == 2


def test_partial_rebuild_recreates_only_its_scope(tmp_path):
    indexer = open_indexer(small_repo(tmp_path))
    indexer.ensure_indexed()
    before = indexer.store.file_states()
    result = JobRunner(indexer, indexer.store).rebuild(["src"], vacuum=False)
    assert result.status == "completed", result.message
    after = indexer.store.file_states()
    assert set(after) == set(before)
    assert after["docs/guide.md"].file_id == before["docs/guide.md"].file_id
    assert after["src/app.py"].file_id != before["src/app.py"].file_id
    status = JobRunner(indexer, indexer.store).status(result.job_id, include_logs=True)
    assert status.status == "completed" and status.progress["percentComplete"] == 100
    assert status.logs


def test_second_rebuild_is_refused_and_cancel_leaves_a_consistent_index(big_repo):
    indexer = open_indexer(big_repo)
    runner = JobRunner(indexer, indexer.store)
    first = runner.rebuild(wait=False)
    assert first.status == "queued"
    with pytest.raises(JobConflictError):
        runner.rebuild(wait=False)
    wait_for(lambda: runner.status(first.job_id).progress["filesProcessed"] > 0)
    runner.cancel(first.job_id)
    final = wait_for(lambda: (s := runner.status(first.job_id)).status != "in_progress" and s)
    assert final.status == "cancelled"
    states = indexer.store.file_states()
    assert 0 < len(states) < 1500
    counts = {}
    for row in indexer.store.chunks_for_files():
        counts[row.file_path] = counts.get(row.file_path, 0) + 1
    con = indexer.store._cursor()  # noqa: SLF001 - read-only consistency check
    declared = dict(con.execute("SELECT path, chunk_count FROM file_state").fetchall())
    assert counts == {p: n for p, n in declared.items() if n}
    # What the cancel left out is recorded, said, and resumed by the next catch-up.
    job_id, left_out = indexer.store.progress_pending()
    assert job_id == first.job_id and len(left_out) == 1500 - len(states)
    assert final.result["left_out"]["files"] == len(left_out)
    assert f"{len(left_out):,} files are left out" in final.result["left_out"]["text"]
    assert indexer.status()["left_out"] == len(left_out)
    assert indexer.ensure_indexed().files_indexed == 1500 - len(states)
    runner.shutdown()


def test_dry_run_counts_the_embedding_a_rebuild_would_do(tmp_path):
    """Issue 27: ``rebuild --dry-run`` said "about 2 s" for an index whose chunks still
    lacked their vectors: it counted reading and chunking only."""
    from contextd.runtime.jobs import DEFAULT_TEXTS_PER_SECOND

    indexer = open_indexer(small_repo(tmp_path), embed=True)
    indexer.ensure_indexed(embed=False)
    pending = indexer.store.count_missing_embeddings(indexer.embedder.identity)
    assert pending > 0
    result = JobRunner(indexer, indexer.store).rebuild(dry_run=True)
    embedding = result.details["embedding"]
    assert embedding["texts"] == pending
    assert embedding["seconds"] == round(pending / DEFAULT_TEXTS_PER_SECOND, 1)
    assert result.estimated_seconds >= embedding["seconds"]
    assert f"{pending:,} chunks to embed" in result.message
    indexer.embed_pending()
    after = JobRunner(indexer, indexer.store).rebuild(dry_run=True)
    assert after.details["embedding"]["texts"] == 0 and "to embed" not in after.message
    assert "vectors already computed are reused" in after.message
