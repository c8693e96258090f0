"""A crash-resumed index answers exactly like a clean one (issue 40, "Done when"): the owner
of a first index is killed with SIGKILL mid-bootstrap, some vectors stored and others not (so
the rest are computed in other batches than a clean run's), the next run resumes it, and the same queries then give the
same hits, in the same order, with the same scores, as an index built in one go.

Both indexes embed with the real model, so the test is slow."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pytest

from contextd.config.project import Project
from contextd.query.records import QueryRequest
from contextd.runtime.engine import Engine

pytestmark = pytest.mark.slow

TOPICS = ("invoice totals", "refund of a damaged parcel", "retry with backoff",
          "password reset email", "cache eviction by age", "csv export of orders",
          "rate limit per client", "timezone of a meeting", "thumbnail of an image",
          "search by customer name")
QUERIES = ("how is a damaged parcel refunded", "export orders as csv", "evict old cache entries",
           "limit requests per client", "send the password reset mail")

OWNER = textwrap.dedent("""
    import sys
    from contextd.config.project import Project
    from contextd.indexer.progress import Progress
    from contextd.runtime.engine import Engine

    class Tell(Progress):  # says when vectors are part computed: the moment to kill it
        def embedding(self, done, pending):
            if done and pending:
                print("embedding", done, pending, flush=True)

    engine = Engine(Project.open(sys.argv[1]))
    report = engine.ensure_indexed(progress=Tell())
    engine.close()
    print(report.mode, flush=True)
""")


def project(root: Path) -> Path:
    """120 modules, each with two documented functions on one of ten topics."""
    for n in range(120):
        topic = TOPICS[n % len(TOPICS)]
        name = topic.replace(" ", "_")
        path = root / f"pkg_{n % 12:02d}" / f"{name}_{n:03d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'"""Helpers for {topic}, variant {n}."""\n\n\n'
                        f'def {name}_{n}(items, limit={n}):\n'
                        f'    """Handle {topic} for up to {n} items."""\n'
                        f'    return [item for item in items[:limit] if item]\n\n\n'
                        f'def check_{name}_{n}(value):\n'
                        f'    """Check a value used by {topic} ({n})."""\n'
                        f'    return value is not None and value != {n}\n')
    (root / "context.toml").write_text("[contextualizer]\nstrategy = \"none\"\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def run_owner(root: Path, kill_mid_embedding: bool = False) -> str:
    """The last line the owner printed (its run's mode), or ``killed``: SIGKILL as soon as
    it has stored some vectors and not others."""
    proc = subprocess.Popen([sys.executable, "-c", OWNER, str(root)], stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        lines = []
        for line in proc.stdout:
            if kill_mid_embedding and line.startswith("embedding"):
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return "killed"
            lines.append(line.strip())
        assert proc.wait(timeout=300) == 0
        return lines[-1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def vectors_missing(db: Path) -> int:
    """Chunk texts the killed run left without a vector."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT count(DISTINCT embed_hash) FROM chunks WHERE embed_hash "
                           "NOT IN (SELECT text_hash FROM embeddings)").fetchone()[0]
    finally:
        con.close()


def answers(root: Path) -> list[list[tuple[str, int, int, float]]]:
    """(path, first line, last line, score) of the top hits of each query."""
    engine = Engine(Project.open(root))
    try:
        engine.module.pipeline.warm_up(wait=True)
        return [[(hit.file_path, hit.start_line, hit.end_line, hit.score)
                 for hit in engine.query(QueryRequest(query=query, k=5,
                                                      wait_for_model=True)).hits]
                for query in QUERIES]
    finally:
        engine.close()


def test_a_crash_resumed_index_answers_like_a_clean_one(tmp_path):
    clean = project(tmp_path / "clean")
    assert run_owner(clean) == "bootstrap"
    victim = project(tmp_path / "victim")
    assert run_owner(victim, kill_mid_embedding=True) == "killed"
    db = Project.open(victim).db_path
    assert vectors_missing(db) > 0
    assert run_owner(victim) in ("resume", "incremental")
    assert vectors_missing(db) == 0
    expected, got = answers(clean), answers(victim)
    assert all(expected), expected
    for want, have in zip(expected, got):
        assert [hit[:3] for hit in have] == [hit[:3] for hit in want], (want, have)
        assert [hit[3] for hit in have] == pytest.approx([hit[3] for hit in want], abs=1e-4)
