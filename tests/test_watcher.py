"""The watcher on a real directory with a real inotify observer: every kind of change reaches
the index within a few seconds, ignored paths cost nothing, bursts become one batch."""

from __future__ import annotations

import logging
import os
import subprocess
import threading
import time

import pytest
from test_indexer import FUNC, open_indexer, small_repo, stored

from contextd.indexer.report import BUSY
from contextd.runtime.watcher import (BURST_QUIET_S, FLUSH_MAX_PATHS, Watcher,
                                      git_index_lock, quiet_period)


def eventually(predicate, timeout: float = 8.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("the index did not catch up")


@pytest.fixture
def watched(tmp_path):
    root = small_repo(tmp_path)
    indexer = open_indexer(root)
    indexer.ensure_indexed()
    batches: list[list[str]] = []
    watcher = Watcher(indexer.project, indexer, on_batch=lambda p, r: batches.append(p),
                      debounce_ms=150).start()
    yield root, indexer, batches
    watcher.stop()
    indexer.store.close()


def test_create_modify_delete_rename(watched):
    root, indexer, _ = watched
    (root / "src/new.py").write_text(FUNC.format(name="fresh", doc="New.", n=1))
    eventually(lambda: "src/new.py" in stored(indexer))
    (root / "src/new.py").write_text(FUNC.format(name="fresher", doc="Newer.", n=2))
    eventually(lambda: any("fresher" in t for t in stored(indexer).get("src/new.py", [])))
    os.rename(root / "src/new.py", root / "src/renamed.py")
    eventually(lambda: "src/renamed.py" in stored(indexer)
               and "src/new.py" not in stored(indexer))
    (root / "src/renamed.py").unlink()
    eventually(lambda: "src/renamed.py" not in stored(indexer))


def test_a_file_deleted_after_leaving_the_index_costs_one_log_line(watched, caplog):
    """Issue 40: a file removed from the index (delete_context) and then from disk made the
    watcher log a full traceback ("nothing to refresh"); it is one line now."""
    root, indexer, _ = watched
    caplog.set_level(logging.INFO, logger="contextd.runtime.watcher")
    indexer.store.delete_files(["src/app.py"])
    (root / "src/app.py").unlink()
    eventually(lambda: any(r.name == "contextd.runtime.watcher" for r in caplog.records))
    assert not [r for r in caplog.records if r.exc_info], caplog.text
    assert any("src/app.py" in r.getMessage() for r in caplog.records), caplog.text


def test_directory_move_and_delete(watched):
    root, indexer, _ = watched
    os.rename(root / "src/util", root / "lib")
    eventually(lambda: "lib/helpers.py" in stored(indexer)
               and "src/util/helpers.py" not in stored(indexer))
    subprocess.run(["rm", "-rf", str(root / "lib")], check=True)
    eventually(lambda: not any(p.startswith("lib/") for p in stored(indexer)))


def test_editor_save_via_temp_file_and_rename(watched):
    root, indexer, _ = watched
    tmp = root / "src/.app.py.swp"
    tmp.write_text(FUNC.format(name="saved", doc="Saved by an editor.", n=7))
    os.replace(tmp, root / "src/app.py")
    eventually(lambda: any("def saved" in t for t in stored(indexer)["src/app.py"]))
    assert not any(".swp" in p for p in stored(indexer))


def test_burst_is_one_batch_and_ignored_paths_are_dropped(watched):
    root, indexer, batches = watched
    (root / "node_modules/dep/more.js").write_text("x = 1;\n")
    (root / "burst").mkdir()
    for i in range(40):
        (root / f"burst/b{i}.py").write_text(FUNC.format(name=f"b{i}", doc="Burst.", n=i))
    eventually(lambda: sum(p.startswith("burst/") for p in stored(indexer)) == 40)
    assert len(batches) <= 2
    assert not any("node_modules" in p for batch in batches for p in batch)


def test_gitignore_change_reevaluates_the_boundary(watched):
    root, indexer, _ = watched
    (root / ".gitignore").write_text("docs/\n")
    eventually(lambda: "docs/guide.md" not in stored(indexer))
    (root / ".gitignore").write_text("")
    eventually(lambda: "docs/guide.md" in stored(indexer))


def test_contextignore_and_config_changes_reevaluate_the_boundary(watched):
    root, indexer, _ = watched
    (root / ".contextignore").write_text("src/util/\n")
    eventually(lambda: "src/util/helpers.py" not in stored(indexer))
    (root / ".contextignore").unlink()
    eventually(lambda: "src/util/helpers.py" in stored(indexer))
    (root / "context.toml").write_text('[indexing]\nblocked_extensions = [".yaml"]\n')
    eventually(lambda: "config.yaml" not in stored(indexer))
    assert "src/app.py" in stored(indexer)


def test_git_checkout_of_another_branch_is_coalesced(watched):
    root, indexer, batches = watched
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "main"], check=True)
    subprocess.run([*git, "checkout", "-qb", "other"], check=True)
    for i in range(30):
        (root / f"src/o{i}.py").write_text(FUNC.format(name=f"o{i}", doc="Other.", n=i))
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "other"], check=True)
    subprocess.run([*git, "checkout", "-q", "-"], check=True)
    eventually(lambda: not any(p.startswith("src/o") for p in stored(indexer)))
    batches.clear()
    subprocess.run([*git, "checkout", "-q", "other"], check=True)
    eventually(lambda: sum(p.startswith("src/o") for p in stored(indexer)) == 30)
    assert len(batches) <= 2


def test_git_ignored_virtualenv_is_not_watched_and_sends_no_events(tmp_path):
    """Issue 26: a recursive watch of a repository holding a git-ignored .venv of thousands
    of folders overflowed the kernel queue at every install into it, and the owner spent
    most of a core re-walking. Only the kept tree is watched: writing 20,000 files into the
    .venv costs no event, and an edit in the kept tree is still indexed."""
    root = small_repo(tmp_path)
    (root / ".gitignore").write_text(".venv/\nbuild-output/\n")
    venv = root / ".venv" / "lib"
    for i in range(3000):
        (venv / f"pkg{i // 50}" / f"mod{i}").mkdir(parents=True)
    indexer = open_indexer(root)
    indexer.ensure_indexed()
    batches: list[list[str]] = []
    watcher = Watcher(indexer.project, indexer, on_batch=lambda p, r: batches.append(p),
                      debounce_ms=150).start()
    try:
        watched = watcher.watched_directories
        assert watched is not None and "src" in watched and "src/util" in watched
        assert not any(d.startswith(".venv") or d.startswith(".git") for d in watched)
        assert len(watched) < 20
        for i in range(20000):  # a pip install into the ignored environment
            (venv / f"pkg{i % 3000 // 50}" / f"mod{i % 3000}" / f"f{i}.py").write_text("y\n")
        (root / "src/after_install.py").write_text(FUNC.format(name="kept", doc="Kept.", n=3))
        eventually(lambda: "src/after_install.py" in stored(indexer), timeout=30)
        assert watcher.overflows == 0
        assert not any(p.startswith(".venv") for batch in batches for p in batch)
        # A folder the boundary keeps is watched when it appears; an ignored one is not.
        (root / "src/fresh/deeper").mkdir(parents=True)
        (root / "build-output/x").mkdir(parents=True)
        eventually(lambda: "src/fresh/deeper" in watcher.watched_directories)
        (root / "src/fresh/deeper/late.py").write_text(FUNC.format(name="late", doc="L.", n=4))
        eventually(lambda: "src/fresh/deeper/late.py" in stored(indexer))
        assert not any(d.startswith("build-output") for d in watcher.watched_directories)
        # New ignore rules move the watch set with the index.
        (root / ".gitignore").write_text(".venv/\nbuild-output/\nsrc/fresh/\n")
        eventually(lambda: "src/fresh/deeper/late.py" not in stored(indexer))
        eventually(lambda: "src/fresh" not in watcher.watched_directories)
    finally:
        watcher.stop()
        indexer.store.close()



@pytest.mark.slow
def test_a_queue_overflow_is_one_catch_up_not_a_loop(tmp_path):
    """The kernel drops events past max_queued_events and says so once (IN_Q_OVERFLOW).
    Here the real queue overflows while the reader is held up: the watcher answers with one
    catch-up that finds the lost change, and then stays quiet."""
    root = small_repo(tmp_path)
    indexer = open_indexer(root)
    indexer.ensure_indexed()
    batches: list[list[str]] = []
    watcher = Watcher(indexer.project, indexer, on_batch=lambda p, r: batches.append(p),
                      debounce_ms=150).start()
    try:
        limit = int(open("/proc/sys/fs/inotify/max_queued_events").read())
        with watcher._watch_set._guard:  # the reader waits; the kernel queue fills
            for i in range(limit // 2 + 100):  # two events a write (modify, close)
                (root / ("src/a.py" if i % 2 else "src/b.py")).write_text(f"x = {i}\n")
            (root / "src/lost.py").write_text(FUNC.format(name="lost", doc="Lost.", n=7))
        # a batch is reported after its indexing: wait for the report, not only the row
        eventually(lambda: "src/lost.py" in stored(indexer) and batches, timeout=30)
        assert watcher.overflows == 1
        settled = len(batches)
        time.sleep(2)
        assert len(batches) == settled and settled <= 3
    finally:
        watcher.stop()
        indexer.store.close()


def test_the_watchdog_observer_still_serves_where_inotify_is_missing(tmp_path, monkeypatch):
    """Off Linux the watcher falls back to watchdog's recursive observer; the same judging
    of paths applies (here on Linux, with the inotify watch set declared unavailable)."""
    from contextd.runtime import watch_set

    monkeypatch.setattr(watch_set, "available", lambda: False)
    root = small_repo(tmp_path)
    indexer = open_indexer(root)
    indexer.ensure_indexed()
    watcher = Watcher(indexer.project, indexer, debounce_ms=150).start()
    try:
        assert watcher.watched_directories is None
        (root / "src/util/fresh.py").write_text(FUNC.format(name="fresh", doc="F.", n=8))
        eventually(lambda: "src/util/fresh.py" in stored(indexer))
    finally:
        watcher.stop()
        indexer.store.close()


def test_a_command_flushes_an_editors_changes_and_leaves_a_checkouts_to_the_batch(tmp_path):
    """A command reaching a watching owner reads the few changes the watcher noted (an
    editor's save) in its window; a checkout's hundreds it leaves to the watcher's batch
    and says ``busy``, instead of judging and planning every path before its window ends
    (issue 37: seconds of the next answer after a ``git checkout``)."""
    root = small_repo(tmp_path)
    indexer = open_indexer(root)
    indexer.ensure_indexed()
    watcher = Watcher(indexer.project, indexer)  # not started: no batch of its own runs
    try:
        (root / "src/app.py").write_text(FUNC.format(name="saved", doc="Saved.", n=1))
        watcher.note(str(root / "src/app.py"), False)
        report = watcher.flush(wait=False, within_s=30.0)
        assert report.mode == "refresh" and report.files_indexed == 1
        assert any("def saved" in t for t in stored(indexer)["src/app.py"])

        paths = [root / f"src/gen/mod_{i:03d}.py" for i in range(FLUSH_MAX_PATHS + 1)]
        for i, path in enumerate(paths):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(FUNC.format(name=f"f{i}", doc="Checked out.", n=i))
            watcher.note(str(path), False)
        assert watcher.flush(wait=False, within_s=30.0).mode == BUSY
        assert not any(p.startswith("src/gen/") for p in stored(indexer))
        report = watcher.flush()  # unwindowed (wait=True): the batch's own way, all read
        assert report.files_indexed == FLUSH_MAX_PATHS + 1
    finally:
        indexer.store.close()


def test_changes_made_while_git_holds_its_index_lock_are_one_batch(tmp_path):
    """A ``git checkout`` writes the tree while it holds ``.git/index.lock``: its paths are
    one batch taken once git lets go, however long a pause between its writes (fastapi's
    checkout came as 706 + 36 paths, two refreshes; issue 37)."""
    root = small_repo(tmp_path)
    indexer = open_indexer(root)
    indexer.ensure_indexed()
    batches: list[list[str]] = []
    lock = root / ".git" / "index.lock"
    lock.parent.mkdir(exist_ok=True)
    lock.write_text("")
    watcher = Watcher(indexer.project, indexer, on_batch=lambda p, r: batches.append(p),
                      debounce_ms=150).start()
    try:
        (root / "src/first.py").write_text(FUNC.format(name="first", doc="First.", n=1))
        eventually(lambda: "src/first.py" in watcher._pending)
        # Past the debounce: without the lock this would have been a batch of its own.
        eventually(lambda: time.monotonic() > watcher._last_event + 4 * watcher.debounce)
        (root / "src/second.py").write_text(FUNC.format(name="second", doc="Second.", n=2))
        eventually(lambda: "src/second.py" in watcher._pending)
        assert not batches
        lock.unlink()
        eventually(lambda: {"src/first.py", "src/second.py"} <= set(stored(indexer)), 60)
        assert batches == [["src/first.py", "src/second.py"]]
    finally:
        watcher.stop()
        indexer.store.close()


def test_a_large_burst_waits_a_shorter_quiet_period():
    assert quiet_period(0.5, FLUSH_MAX_PATHS) == 0.5
    assert quiet_period(0.5, FLUSH_MAX_PATHS + 1) == BURST_QUIET_S < 0.5
    assert quiet_period(0.05, FLUSH_MAX_PATHS + 1) == 0.05  # never longer than the debounce


def test_the_git_index_lock_of_a_linked_worktree_is_found(tmp_path):
    main = tmp_path / "main"
    subprocess.run(["git", "init", "-q", str(main)], check=True)
    (main / "a.py").write_text("A = 1\n")
    subprocess.run(["git", "-C", str(main), "add", "."], check=True)
    subprocess.run(["git", "-C", str(main), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-qm", "a"], check=True)
    linked = tmp_path / "linked"
    subprocess.run(["git", "-C", str(main), "worktree", "add", "-q", str(linked)], check=True)
    assert git_index_lock(main) == str(main / ".git" / "index.lock")
    (main / "sub").mkdir()
    assert git_index_lock(main / "sub") == str(main / ".git" / "index.lock")  # a project in it
    found = git_index_lock(linked)
    assert found is not None and os.path.dirname(found) == subprocess.run(
        ["git", "-C", str(linked), "rev-parse", "--absolute-git-dir"], check=True,
        capture_output=True, text=True).stdout.strip()
    outside = tmp_path / "plain"
    outside.mkdir()
    assert git_index_lock(outside) is None or not git_index_lock(outside).startswith(
        str(tmp_path))  # nothing of its own (a folder above tmp may be a repository)


def test_the_vectors_wait_while_the_watcher_holds_changes(tmp_path):
    """The owner's vector follower lets a batch the watcher is gathering go first, as it
    does a run: during a ``git checkout`` the model took a core while the watcher waited
    for the burst to end (issue 37)."""
    from contextd.runtime.engine import Engine

    from contextd.config.project import Project

    root = small_repo(tmp_path)
    engine = Engine(Project.open(root))
    try:
        engine.indexer.embed = False  # the lexical index is enough here
        engine.indexer.ensure_indexed()
        watcher = Watcher(engine.project, engine.indexer)  # not started: no batch of its own
        engine.watcher = watcher
        assert not engine.indexer.taking_in()
        (root / "src/app.py").write_text(FUNC.format(name="switched", doc="Switched.", n=1))
        watcher.note(str(root / "src/app.py"), False)
        assert watcher.holds_changes and engine.indexer.taking_in()
        watcher.flush()
        assert not watcher.holds_changes and not engine.indexer.taking_in()
    finally:
        engine.watcher = None
        engine.close()


def test_a_batch_waits_for_the_answer_searching_now(tmp_path):
    """A batch due while an answer of the process searches (the indexer's ``gives_way``,
    which the engine sets to it) starts once the answer is done: started 0.1 s after a
    checkout, the refresh beside the next answer made its search 4x slower (issue 37)."""
    root = small_repo(tmp_path)
    indexer = open_indexer(root)
    indexer.ensure_indexed()
    answering = threading.Event()
    indexer.gives_way = answering.is_set
    batches: list[list[str]] = []
    watcher = Watcher(indexer.project, indexer, on_batch=lambda p, r: batches.append(p),
                      debounce_ms=150).start()
    try:
        answering.set()
        (root / "src/first.py").write_text(FUNC.format(name="first", doc="First.", n=1))
        eventually(lambda: "src/first.py" in watcher._pending)
        eventually(lambda: time.monotonic() > watcher._last_event + 4 * watcher.debounce)
        assert not batches and watcher.holds_changes
        answering.clear()
        eventually(lambda: "src/first.py" in stored(indexer), 60)
        assert batches == [["src/first.py"]]
    finally:
        watcher.stop()
        indexer.store.close()
