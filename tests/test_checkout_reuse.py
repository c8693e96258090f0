"""A branch switched back takes back the chunks a recent refresh cut (issue 37): in a process
that stays up, a file whose bytes hash to a content one of its refreshes chunked is not
chunked again. Real parts: a git repository in a tmp dir switched with ``git checkout``, the
real indexer and DuckDB store; what the store holds is compared with a fresh chunking."""

from __future__ import annotations

import subprocess
from pathlib import Path

from test_mcp_server import make_repo

from contextd.config.project import Project
from contextd.indexer import Indexer
from contextd.indexer.plan import FileTask
from contextd.indexer.reuse import ROOM_CHECK_FILES, RecentChunks
from contextd.indexer.worker import process_file
from contextd.store.duckdb import DuckDBStore


def _module(name: str, doc: str) -> str:
    return "".join(f'def {name}_{j}(order):\n    """{doc} {j}."""\n    return order + {j}\n\n\n'
                   for j in range(3))


def _git(root: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.com",
           "HOME": "/nonexistent", "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True, env=env).stdout.strip()


def _stored(indexer: Indexer, path: str) -> list[tuple[str, int, int]]:
    """(text, start line, end line) of the stored chunks of ``path``."""
    state = indexer.store.file_states(path)[path]
    return [(c.text, c.start_line, c.end_line)
            for c in indexer.store.chunks_for_files([state.file_id])]


def test_a_branch_switched_back_takes_back_the_chunks_its_refresh_cut(tmp_path):
    root = make_repo(tmp_path / "repo", {"src/orders.py": _module("ship", "Ship the order"),
                                         "src/stock.py": _module("count", "Count the stock")})
    main = _git(root, "rev-parse", "HEAD")
    _git(root, "checkout", "-q", "-b", "topic")
    (root / "src/orders.py").write_text(_module("bill", "Bill the order"))
    _git(root, "commit", "-q", "-am", "bill instead")
    project = Project.open(root)
    indexer = Indexer(project, DuckDBStore(project.db_path), embed=False)
    try:
        indexer.follow_vectors()  # a process that stays up (the owner) keeps what it cuts
        indexer.ensure_indexed()
        _git(root, "checkout", "-q", main)
        first = indexer.refresh(["src/orders.py"])
        assert first.files_indexed == 1 and first.files_reused == 0  # never cut before
        _git(root, "checkout", "-q", "topic")
        second = indexer.refresh(["src/orders.py"])
        assert second.files_reused == 0  # the bootstrap's chunks are not kept
        _git(root, "checkout", "-q", main)
        back = indexer.refresh(["src/orders.py"])
        assert back.files_indexed == 1 and back.files_reused == 1
        assert "1 of them from chunks cut lately" in back.summary
        # What the store holds is what chunking the file now gives, under its state now.
        path = root / "src/orders.py"
        fresh = process_file(FileTask("src/orders.py", str(path), path.stat().st_size,
                                      path.stat().st_mtime_ns), project.config)
        assert fresh.record is not None
        assert _stored(indexer, "src/orders.py") == [
            (c.chunk.text, c.chunk.start_line, c.chunk.end_line) for c in fresh.record.chunks]
        state = indexer.store.file_states("src/orders.py")["src/orders.py"]
        assert (state.size_bytes, state.mtime_ns, state.content_hash) == (
            path.stat().st_size, path.stat().st_mtime_ns, fresh.record.content_hash)
        assert indexer.store.find_symbols(["ship_1"], []) and \
            not indexer.store.find_symbols(["bill_1"], [])
        # Nothing changed since: the file is found unchanged, not taken back again.
        again = indexer.refresh(["src/orders.py"])
        assert again.files_indexed == 0 and again.files_reused == 0
    finally:
        indexer.follow_vectors().stop()
        indexer.store.close()


def test_new_settings_drop_the_kept_chunks(tmp_path):
    root = make_repo(tmp_path / "repo", {"src/orders.py": _module("ship", "Ship the order")})
    project = Project.open(root)
    indexer = Indexer(project, DuckDBStore(project.db_path), embed=False)
    try:
        indexer.follow_vectors()
        indexer.ensure_indexed()
        (root / "src/orders.py").write_text(_module("bill", "Bill the order"))
        indexer.refresh(["src/orders.py"])
        assert indexer.recent is not None and len(indexer.recent) == 1
        (root / "context.toml").write_text("[chunking.python]\nmax_tokens = 128\n")
        indexer.reload()
        assert len(indexer.recent) == 0 and indexer.recent.bytes == 0
    finally:
        indexer.follow_vectors().stop()
        indexer.store.close()


def test_a_one_off_process_keeps_nothing(tmp_path):
    """A command that indexes and exits (no follow_vectors) would pay for keeping chunks
    no later refresh of its own takes back."""
    root = make_repo(tmp_path / "repo", {"src/orders.py": _module("ship", "Ship the order")})
    project = Project.open(root)
    indexer = Indexer(project, DuckDBStore(project.db_path), embed=False)
    try:
        indexer.ensure_indexed()
        (root / "src/orders.py").write_text(_module("bill", "Bill the order"))
        assert indexer.refresh(["src/orders.py"]).files_indexed == 1
        assert indexer.recent is None
    finally:
        indexer.store.close()


def test_the_least_recently_used_go_past_the_budget(tmp_path):
    config = Project.open(make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})).config
    outcomes = []
    for i in range(6):
        path = tmp_path / f"m{i}.py"
        path.write_text(_module(f"step{i}", f"Step {i}"))
        outcomes.append(process_file(FileTask(path.name, str(path), path.stat().st_size,
                                              path.stat().st_mtime_ns), config))
    one = RecentChunks()
    one.keep(outcomes[0])
    recent = RecentChunks(budget_bytes=one.bytes * 3 + one.bytes // 2)
    for outcome in outcomes[:3]:
        recent.keep(outcome)
    tasks = [o.task for o in outcomes]
    assert recent.take(tasks[0]) is not None  # used: now the most recent
    for outcome in outcomes[3:5]:
        recent.keep(outcome)
    assert recent.bytes <= recent.budget_bytes and len(recent) == 3
    assert [recent.take(t) is not None for t in tasks[:5]] == [True, False, False, True, True]


def test_nothing_is_kept_near_the_memory_budget(tmp_path):
    """The kept chunks count in the owner's memory: within HEADROOM_MB of its
    ``[owner] memory_limit_mb`` nothing more is kept (this test process is over a 1 MB one)."""
    config = Project.open(make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})).config
    path = tmp_path / "m.py"
    path.write_text(_module("step", "Step"))
    outcome = process_file(FileTask(path.name, str(path), path.stat().st_size,
                                    path.stat().st_mtime_ns), config)
    tight, roomy = RecentChunks(limit_mb=1), RecentChunks(limit_mb=1 << 20)
    tight.keep(outcome)
    roomy.keep(outcome)
    assert (len(tight), tight.bytes) == (0, 0) and len(roomy) == 1


def test_the_memory_budget_is_looked_at_again_within_a_few_files(tmp_path):
    """The resident size is read once per ROOM_CHECK_FILES files kept, not per file (a read
    of /proc each was ~6% of a checkout's refresh thread, issue 37): a process that comes
    near its budget stops keeping within that many files."""
    config = Project.open(make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})).config
    outcomes = []
    for n in range(2 * ROOM_CHECK_FILES):
        path = tmp_path / f"m{n}.py"
        path.write_text(_module(f"step{n}", "Step"))
        outcomes.append(process_file(FileTask(path.name, str(path), path.stat().st_size,
                                              path.stat().st_mtime_ns), config))
    recent = RecentChunks(limit_mb=1 << 20)
    recent.keep(outcomes[0])
    recent.limit_mb = 1  # this test process is over a 1 MB budget from now on
    for outcome in outcomes[1:]:
        recent.keep(outcome)
    assert 1 <= len(recent) <= ROOM_CHECK_FILES
