"""Odd files and dead processes never hurt the index: a rebuild SIGKILLed mid-run is marked
interrupted when the next owner opens the index (and its files are resumed); generated and
minified files are skipped with the reason recorded where check-file and stats show it;
files deleted during a rebuild are gone from the index when it ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

from contextd.runtime.engine import Engine
from contextd.indexer.progress import Progress
from contextd.config.project import Project
from test_indexer import FUNC, make_repo, open_indexer

REBUILD_SCRIPT = textwrap.dedent("""
    import sys, time
    from contextd.runtime.engine import Engine
    engine = Engine.open(sys.argv[1])
    engine.indexer.embed = False
    engine.ensure_indexed()
    result = engine.rebuild(wait=False)
    while engine.store.get_job(result.job_id).status != "in_progress":
        time.sleep(0.01)
    print(result.job_id, flush=True)
    time.sleep(600)
""")


def test_sigkilled_rebuild_is_marked_interrupted_by_the_next_owner(tmp_path):
    root = make_repo(tmp_path / "repo", {f"p{i % 10}/m{i}.py": FUNC.format(
        name=f"f{i}", doc=f"Doc {i}.", n=i) * 3 for i in range(600)})
    proc = subprocess.Popen([sys.executable, "-c", REBUILD_SCRIPT, str(root)],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        job_id = proc.stdout.readline().strip()
        assert job_id, "the rebuild did not start"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    engine = Engine(Project.open(root))
    try:
        job = engine.store.get_job(job_id)
        assert job.status == "interrupted" and "ended" in job.error_message
        assert engine.job_status(job_id).status == "interrupted"
        assert not engine.store.list_jobs(("queued", "in_progress"))
        engine.indexer.embed = False
        engine.ensure_indexed()  # resumes what the rebuild had left
        assert len(engine.store.file_states()) == 600
    finally:
        engine.close()


class DeleteWhileIndexing(Progress):
    """Deletes the first file the run has stored, while the run goes on."""

    def __init__(self, indexer):
        self.indexer = indexer
        self.deleted: str | None = None

    def update(self, files_done, chunks_done, current_file=None):
        if self.deleted is None and files_done:
            self.deleted = sorted(self.indexer.store.file_states())[0]
            os.remove(self.indexer.project.root / self.deleted)


def test_files_deleted_during_a_rebuild_are_gone_when_it_ends(tmp_path):
    root = make_repo(tmp_path / "repo", {f"p{i % 10}/m{i}.py": FUNC.format(
        name=f"f{i}", doc=f"Doc {i}.", n=i) * 3 for i in range(1200)})
    indexer = open_indexer(root)
    progress = DeleteWhileIndexing(indexer)
    report = indexer.bootstrap(progress=progress)
    assert progress.deleted is not None and report.files_indexed + report.files_failed >= 1199
    assert progress.deleted not in indexer.store.file_states()
    assert report.files_removed >= 1
    # Issue 28: the run reported the deleted file among those indexed, and did not name it.
    assert report.files_indexed == len(indexer.store.file_states())
    assert progress.deleted in report.vanished and report.files_vanished >= 1
    assert f"deleted while indexing ({progress.deleted}" in report.summary
    indexer.store.close()


def test_a_refresh_after_a_killed_rebuild_leaves_no_stale_left_out_rows(tmp_path):
    """Issue 28: after a killed rebuild, a refresh indexed everything, but stats went on
    saying "N files left out by an interrupted run"."""
    root = make_repo(tmp_path / "repo", {f"p{i % 10}/m{i}.py": FUNC.format(
        name=f"f{i}", doc=f"Doc {i}.", n=i) * 3 for i in range(600)})
    script = REBUILD_SCRIPT.replace(  # killed once it has stored some files, not all
        'engine.store.get_job(result.job_id).status != "in_progress"',
        "not engine.store.get_job(result.job_id).files_processed")
    proc = subprocess.Popen([sys.executable, "-c", script, str(root)],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout.readline().strip(), "the rebuild did not start"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    indexer = open_indexer(root)
    try:
        assert indexer.status()["left_out"] > 0  # what the killed run left
        indexer.refresh()
        status = indexer.status()
        assert len(indexer.store.file_states()) == 600
        assert status["left_out"] == 0 and "left out" not in status["text"], status
    finally:
        indexer.store.close()


def test_generated_and_secret_files_are_skipped_with_the_reason_recorded(tmp_path):
    minified = "function a(b){return b+1}" * 160_000  # 4 MB on one line
    root = make_repo(tmp_path / "repo", {
        "app.py": FUNC.format(name="main", doc="Entry point.", n=1),
        "static/vendor.js": minified,
        "static/app.min.js": "var x=1;\n",
        "static/app.bundle.js": "var y=2;\n",
        ".env": "TOKEN=abc\n",
        "big.txt": "line\n" * 10, "context.toml": "[indexing]\nmax_file_size_mb = 3.0\n"})
    indexer = open_indexer(root)
    report = indexer.ensure_indexed()
    assert set(indexer.store.file_states()) == {"app.py", "big.txt", "context.toml"}
    assert report.chunks_written < 20  # the bundle did not become thousands of chunks
    skips = {s.path: s.reason for s in indexer.store.list_skips()}
    assert skips == {"static/vendor.js": "too_large", "static/app.min.js": "generated",
                     "static/app.bundle.js": "generated", ".env": "secret_file"}
    stats = indexer.store.stats()["skipped"]
    assert stats == {"generated": 2, "secret_file": 1, "too_large": 1}
    indexer.store.close()
    (root / "context.toml").write_text("[indexing]\nmax_file_size_mb = 10.0\n")
    indexer = open_indexer(root)
    indexer.ensure_indexed()
    skips = {s.path: (s.reason, s.detail) for s in indexer.store.list_skips()}
    assert skips["static/vendor.js"][0] == "generated"
    assert "no line break" in skips["static/vendor.js"][1]
    assert "static/vendor.js" not in indexer.store.file_states()
    indexer.store.close()
    done = subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), "--json",
                           "check-file", "static/vendor.js"], capture_output=True, text=True,
                          cwd=root, timeout=60)
    verdict = json.loads(done.stdout)
    assert verdict["reason"] == "generated" and done.returncode == 1
    done = subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), "stats"],
                          capture_output=True, text=True, cwd=root, timeout=120)
    assert "skipped: generated 3, secret_file 1" in done.stdout, done.stdout + done.stderr


CHUNK_SCRIPT = textwrap.dedent("""
    import sys
    from contextd.runtime.engine import Engine
    engine = Engine.open(sys.argv[1])
    engine.indexer.embed = False
    engine.ensure_indexed()
""")


def _children() -> dict[int, list[int]]:
    """Every process's children, from /proc."""
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    parent = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(parent, []).append(int(entry))
    return tree


def _descendants(pid: int) -> set[int]:
    tree, found, todo = _children(), set(), [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_sigkill_during_chunking_leaves_no_process_behind(tmp_path):
    """Issue 28: the forkserver, its pool workers and the resource tracker outlived a
    SIGKILLed indexing process, holding its stdout and stderr open."""
    root = make_repo(tmp_path / "repo", {f"p{i % 20}/m{i}.py": FUNC.format(
        name=f"f{i}", doc=f"Doc {i}.", n=i) * 20 for i in range(2000)})
    (root / "context.toml").write_text("[bootstrap]\nparallel_workers = 2\n")
    proc = subprocess.Popen([sys.executable, "-c", CHUNK_SCRIPT, str(root)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    family: set[int] = set()
    while time.monotonic() < deadline and len(family) < 4:  # tracker, forkserver, 2 workers
        family = _descendants(proc.pid)
        time.sleep(0.05)
    assert len(family) >= 4 and proc.poll() is None, "no chunking pool to kill"
    proc.kill()
    proc.wait()
    ended = threading.Event()

    def read_to_eof() -> None:  # what a caller of the command does
        proc.stdout.read()
        proc.stderr.read()
        ended.set()

    threading.Thread(target=read_to_eof, daemon=True).start()
    try:
        assert ended.wait(15), "stdout/stderr still open: a child of the killed process " \
                               "holds them"
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(_running(p) for p in family):
            time.sleep(0.1)
        assert not [p for p in family if _running(p)]
    finally:
        for pid in family:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)


def _skips_after_a_run(root) -> dict[str, str]:
    indexer = open_indexer(root)
    try:
        indexer.refresh()
        return {s.path: s.reason for s in indexer.store.list_skips()}
    finally:
        indexer.store.close()


def test_fifos_and_links_left_out_are_named(tmp_path):
    """Issue 28: FIFOs, link loops and links out of the project were counted, never named."""
    root = make_repo(tmp_path / "repo", {"app.py": FUNC.format(name="main", doc="Entry.", n=1),
                                         "context.toml": "[indexing]\nfollow_symlinks = true\n"})
    os.mkfifo(root / "events.pipe")
    os.symlink("loop_b", root / "loop_a")
    os.symlink("loop_a", root / "loop_b")
    os.symlink("/etc", root / "etc_link")
    os.symlink("/etc/hostname", root / "host.txt")
    skips = _skips_after_a_run(root)
    assert skips.get("events.pipe") == "not_a_regular_file", skips
    assert skips.get("loop_a") == skips.get("loop_b") == "symlink_loop", skips
    assert skips.get("etc_link") == skips.get("host.txt") == "symlink_escape", skips
    (root / "context.toml").write_text("")  # links not followed (the default): named too
    skips = _skips_after_a_run(root)
    assert {skips.get(p) for p in ("loop_a", "etc_link", "host.txt")} == \
        {"symlink_not_followed"}, skips
