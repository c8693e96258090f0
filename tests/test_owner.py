"""Shared access in one process: election, the socket protocol, takeover (contextd.runtime.owner).

Each SharedEngine opens the lock file itself, and flock locks belong to open file
descriptions, so two SharedEngines in one process compete exactly like two processes.
A real owner process killed with SIGKILL is covered here too; the many-process scenario
with MCP servers is tests/test_shared_access.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time

import pytest

from contextd.runtime import rpc
from contextd.operations import wire_shape
from contextd.errors import ContextdError, UsageError
from contextd.runtime.election import OwnerLock, lock_path, socket_path
from contextd.runtime.owner import connect
from contextd.config.project import Project
from contextd.query.records import QueryRequest, QueryResponse

SOURCE = '''"""Shipping rates."""


def shipping_rate(weight_kg: float) -> float:
    """Price of shipping a parcel of the given weight."""
    return 4.5 + 1.2 * weight_kg


class Carrier:
    def label(self, order_id: str) -> str:
        return f"LBL-{order_id}"
'''


@pytest.fixture()
def project(tmp_path, monkeypatch) -> Project:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    (tmp_path / "run").mkdir()
    root = tmp_path / "repo"
    root.mkdir()
    (root / ".git").mkdir()
    (root / "shipping.py").write_text(SOURCE)
    (root / "notes.md").write_text("# Notes\n\nCarriers print a label per order.\n")
    return Project.open(str(root))


@pytest.fixture()
def engines(project):
    opened = []

    def open_one(**kwargs):
        engine = connect(project, **kwargs)
        opened.append(engine)
        return engine

    yield open_one
    for engine in reversed(opened):
        engine.close()


def test_socket_is_private_and_short(project):
    path = socket_path(project.db_path)
    assert len(path.encode()) < 108
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    assert lock_path(project.db_path).parent == project.db_path.parent


def test_first_owns_second_is_client_with_same_answers(engines, project):
    owner = engines()
    client = engines()
    assert owner.is_owner and not client.is_owner
    assert client.owner_pid == os.getpid()
    assert stat.S_IMODE(os.stat(socket_path(project.db_path)).st_mode) == 0o600
    client.refresh()
    # Lexical providers only: the model may finish loading between the two calls.
    request = QueryRequest(query="shipping rate for a parcel", k=3,
                           providers=("full_text", "symbol"))
    remote = client.query(request)
    local = owner.query(request)
    assert isinstance(remote, QueryResponse)
    assert remote.hits == local.hits
    assert remote.hits[0].file_path == "shipping.py"
    seen = client.stats().owner
    assert (seen["pid"], seen["this_process"]) == (os.getpid(), False)
    # The owner's memory, measured in the owner (issue 26): here, this very process.
    assert 10 < seen["rss_mb"] <= seen["peak_rss_mb"] and seen["memory_limit_mb"] == 600


def test_errors_keep_their_class_across_the_socket(engines):
    engines()
    client = engines()
    with pytest.raises(UsageError, match="outside the project root"):
        client.refresh(paths=["../elsewhere"])
    assert client.job_status("no-such-job") is None


class _Recorder:
    def __init__(self):
        self.calls = []

    def start(self, total_files, label="indexing"):
        self.calls.append(("start", total_files))

    def update(self, files_done, chunks_done, current_file=None):
        self.calls.append(("update", files_done))

    def finish(self, message=""):
        self.calls.append(("finish", message))


def test_progress_is_relayed_to_the_client(engines):
    engines()
    client = engines()
    recorder = _Recorder()
    report = client.refresh(force=True, progress=recorder)
    assert report.files_indexed == 2
    assert recorder.calls and recorder.calls[0][0] == "start"


def _raw_hello(path: str, params: dict) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        sock.sendall((json.dumps({"jsonrpc": "2.0", "id": 0, "method": "hello",
                                  "params": params}) + "\n").encode())
        return json.loads(sock.makefile("rb").readline())


def test_stale_protocol_and_unknown_methods_are_refused(engines, project):
    engines()
    path, db = socket_path(project.db_path), str(project.db_path.resolve())
    reply = _raw_hello(path, {"protocol": rpc.PROTOCOL_VERSION + 1, "db": db})
    assert reply["error"]["code"] == rpc.PROTOCOL_MISMATCH
    assert "speaks protocol" in reply["error"]["message"]
    # A peer built from other operation declarations (another contextd version) is refused
    # by the digest of the declarations, with no version number bumped by hand.
    reply = _raw_hello(path, {"protocol": rpc.PROTOCOL_VERSION, "operations": "0" * 16,
                              "db": db})
    assert "built from other operations" in reply["error"]["message"]
    assert "error" in _raw_hello(path, {"protocol": rpc.PROTOCOL_VERSION,
                                        "operations": wire_shape(), "db": "/other.db"})
    client = rpc.Client.connect(path, db, wire_shape())
    with pytest.raises(ContextdError, match="unknown method"):
        client.call("drop_everything", {})
    client.close()


def test_client_takes_over_when_the_owner_closes(engines):
    owner = engines()
    client = engines()
    client.refresh()
    owner.close()
    response = client.query(QueryRequest(query="Carrier label", k=2))
    assert client.is_owner
    assert response.hits


def test_an_owner_leaving_a_remade_project_keeps_the_new_owners_socket(engines, project):
    """The project's index folder deleted and made again under a running owner (a deleted
    checkout cloned afresh): a new owner takes the new lock file and binds the same socket
    path; the old owner leaving must not remove that socket, or the new one is unreachable."""
    old = engines()
    assert old.is_owner
    shutil.rmtree(project.db_path.parent)
    new = engines()
    assert new.is_owner  # the old owner's lock is on a file that no longer exists
    old.close()
    client = engines()
    assert not client.is_owner and client.owner_pid == os.getpid()
    client.refresh()
    hits = client.query(QueryRequest(query="shipping_rate", k=2,
                                     providers=("symbol",))).hits
    assert hits and hits[0].file_path == "shipping.py"


def test_standby_with_duties_takes_over_without_a_call(engines, project):
    owner = engines()
    standby = engines(duties=True)
    assert not standby.is_owner
    owner.close()
    deadline = time.monotonic() + 5
    while not standby.is_owner and time.monotonic() < deadline:
        time.sleep(0.05)
    assert standby.is_owner
    assert not OwnerLock(lock_path(project.db_path)).try_acquire()


OWNER_SCRIPT = """
import sys, time
from contextd.runtime.owner import connect
from contextd.config.project import Project
engine = connect(Project.open(sys.argv[1]))
print("owner" if engine.is_owner else "client", flush=True)
time.sleep(600)
"""


def test_owner_killed_with_sigkill_is_replaced(engines, project):
    child = subprocess.Popen([sys.executable, "-c", OWNER_SCRIPT, str(project.root)],
                             stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        assert child.stdout.readline().strip() == "owner"
        client = engines()
        assert client.owner_pid == child.pid
        client.refresh()
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        started = time.monotonic()
        response = client.query(QueryRequest(query="shipping rate", k=2))
        assert time.monotonic() - started < 5
        assert client.is_owner and response.hits
    finally:
        child.kill()
        child.wait()


@pytest.mark.slow
def test_knowledge_add_during_a_bootstrap_embeds_only_its_documents(project, tmp_path):
    """Issue 26: a knowledge_add on a project whose owner had just started indexing took 66 s,
    because the add embedded every chunk still lacking a vector. It embeds its own documents'
    chunks and answers while the owner's background embedding is still under way; a client's
    catch-up does not ask the owner for the vectors either."""
    src = project.root / "src"
    src.mkdir()
    for i in range(400):
        (src / f"mod{i}.py").write_text("".join(
            f"def handler_{i}_{j}(request):\n    \"\"\"Handle request {i}.{j}.\"\"\"\n"
            f"    return request.value * {j} + {i}\n\n\n" for j in range(6)))
    # Small windows, so closing the owner does not wait long for the one it is embedding.
    (project.root / "context.toml").write_text("[embedding]\nbatch_size = 8\n")
    project = Project.open(str(project.root))
    owner = connect(project, duties=True)
    client = connect(project)
    try:
        _add_during_the_embedding(owner, client, project, tmp_path)
    finally:
        client.close()
        owner.close()


def _add_during_the_embedding(owner, client, project, docs_parent) -> None:
    from contextd.runtime.background import index_for_command

    assert owner.is_owner and not client.is_owner
    deadline = time.monotonic() + 120
    # Chunking done, embedding under way (progress says "embedding" once vectors are computed).
    while owner.progress().state == "indexing" or owner.embeddings_pending() == 0:
        assert time.monotonic() < deadline, "the owner never got to its embedding"
        time.sleep(0.1)
    # A command reaching the owner answers from what is ready: it neither waits for the
    # vectors nor starts another background owner (the second query of issue 26: 262 s).
    handoff = index_for_command(client, project, None)
    assert handoff.handed_off and not handoff.start_owner
    backlog = client.embeddings_pending()
    assert backlog > 500
    docs = docs_parent / "docs"
    docs.mkdir()
    for name in ("alpha", "beta", "gamma", "delta"):
        (docs / f"{name}.md").write_text(f"# {name}\n\nHow the {name} release is shipped.\n")
    report = client.knowledge_add([str(docs)])
    assert report.added == 4 and report.chunks_embedded >= 4
    # Answered with most of the project's vectors still to come: it did not wait for them.
    assert client.embeddings_pending() > backlog // 2


CLIENT_QUERY = """
import json, runpy, sys
sys.argv = ["contextd", "--root", sys.argv[1], "--json", "query", "shipping rate", "--k", "2"]
try:
    runpy.run_module("contextd", run_name="__main__")
except SystemExit:
    pass
heavy = [m for m in ("duckdb", "numpy", "contextd.runtime.engine", "contextd.indexer.core")
         if m in sys.modules]
print("HEAVY " + json.dumps(heavy), file=sys.stderr)
"""


def test_a_query_answered_by_the_owner_loads_no_engine_in_the_command(engines, project):
    """A CLI query that reaches a running owner is a client: importing the engine stack,
    DuckDB and numpy cost it 0.8-3 s of a loaded machine's 3 s for nothing (issue 37)."""
    owner = engines()
    owner.refresh()
    done = subprocess.run([sys.executable, "-c", CLIENT_QUERY, str(project.root)],
                          capture_output=True, text=True, timeout=120, env=os.environ)
    assert json.loads(done.stdout)["hits"][0]["file_path"] == "shipping.py", done.stderr
    heavy = json.loads(done.stderr.rsplit("HEAVY ", 1)[1])
    assert heavy == [], heavy


def test_a_command_reaching_a_new_owner_is_told_busy_not_made_to_read(engines, project):
    """An owner with duties catches the index up itself; a command that reaches it first
    (a second query right after the first) is told at once that the owner reads, instead of
    having a reading window of its own run in the owner while it waits (issue 37)."""
    from contextd.indexer.report import BUSY

    body = "".join(f"def handler_{i}(request):\n    return request.value * {i}\n\n\n"
                   for i in range(40))
    for n in range(300):
        (project.root / "pkg" / f"module_{n:03d}.py").parent.mkdir(exist_ok=True)
        (project.root / "pkg" / f"module_{n:03d}.py").write_text(body)
    owner = engines(duties=True)
    client = engines()
    assert owner.is_owner and not client.is_owner
    report = client.ensure_indexed(embed=False, wait=False, within_s=1.5)
    assert report.mode == BUSY, report


def test_a_command_reaching_a_watching_owner_mid_run_is_told_busy(engines, project):
    """After a ``git checkout`` the owner's watcher re-reads the changed files; a command
    arriving meanwhile is told busy at once and answers from the files as they are on disk,
    instead of waiting for that run and then running its own (65 s on fastapi)."""
    import threading

    from contextd.indexer.report import BUSY

    owner = engines(duties=True)
    deadline = time.monotonic() + 60
    while owner.engine.watcher is None:  # caught up: commands now flush the watcher
        assert time.monotonic() < deadline, "the owner never caught up"
        time.sleep(0.05)
    client = engines()
    holding, done = threading.Event(), threading.Event()

    def a_run_under_way() -> None:
        with owner.engine.indexer.running():
            holding.set()
            done.wait(30)

    threading.Thread(target=a_run_under_way, daemon=True).start()
    holding.wait(10)
    (project.root / "shipping.py").write_text(SOURCE + "\n# changed on disk\n")
    try:
        report = client.ensure_indexed(embed=False, wait=False, within_s=1.5)
    finally:
        done.set()
    assert report.mode == BUSY, report


def _lock_free(project) -> bool:
    probe = OwnerLock(lock_path(project.db_path))
    free = probe.try_acquire()
    probe.release()
    return free


def _stop(pid: int, project) -> None:
    """End a background owner this test started, and wait until it has let the index go."""
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while not _lock_free(project) and time.monotonic() < deadline:
        time.sleep(0.1)
    if not _lock_free(project):
        os.kill(pid, signal.SIGKILL)


def test_a_command_waits_for_a_starting_background_owner_instead_of_owning(engines, project):
    """Issue 37, one reader at a time: between the moment a command lets go of the index and
    the moment the background owner it started has imported and taken over, the lock is
    free. A process arriving then waits for that owner (marked as starting) and asks it,
    instead of owning the index and reading files in-line beside it."""
    from contextd.runtime.background import start_background_owner
    from contextd.runtime.starting_owner import marker_path

    pid = start_background_owner(project)
    try:
        assert marker_path(project.db_path).exists()
        # Generous: the new owner's imports take seconds on a loaded machine.
        command = engines(starting_wait_s=120)
        assert not command.is_owner
        assert command.owner_pid == pid
        assert command.stats().owner["pid"] == pid
        deadline = time.monotonic() + 30
        while marker_path(project.db_path).exists():  # the owner removes it once it serves
            assert time.monotonic() < deadline, "the serving owner left its marker"
            time.sleep(0.05)
    finally:
        _stop(pid, project)


def test_a_command_hands_the_lock_to_its_background_owner_with_no_gap(engines, project):
    """Issue 37, one reader at a time: the command that starts a background owner hands it
    the lock itself, so the lock is never free between them, however long the new owner's
    imports take; a command arriving meanwhile, even one that would not wait a moment for a
    starting owner (``starting_wait_s=0``), waits for the owner's hello and asks it."""
    from contextd.runtime.background import start_background_owner
    from contextd.runtime.starting_owner import marker_path

    first = engines()
    assert first.is_owner
    pid = start_background_owner(project, first)
    try:
        first.close()
        marker_path(project.db_path).unlink(missing_ok=True)  # the lock alone must do it
        assert not _lock_free(project)  # held by the new owner, wherever its start is
        command = engines(starting_wait_s=0)
        assert not command.is_owner
        assert command.owner_pid == pid
        assert command.stats().owner["pid"] == pid
    finally:
        _stop(pid, project)


def test_a_descriptor_that_is_not_the_lock_file_is_not_taken_for_it(project, tmp_path):
    """A background owner started by hand with a wrong ``--lock-fd`` elects as usual."""
    other = os.open(tmp_path / "other", os.O_RDWR | os.O_CREAT)
    lock = OwnerLock(lock_path(project.db_path), inherited_fd=other)
    try:
        assert lock.try_acquire()
        assert lock.handed_on() not in (None, other)
    finally:
        lock.release()
        os.close(other)


def _marker(project, pid: int, age_s: float = 0.0) -> None:
    from contextd.runtime.starting_owner import marker_path

    path = marker_path(project.db_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"pid": pid, "started": time.time() - age_s}))


def test_a_marker_whose_process_is_gone_or_too_old_is_ignored(engines, project):
    from contextd.runtime.starting_owner import STALE_S

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _marker(project, gone.pid)
    first = engines(starting_wait_s=120)
    assert first.is_owner  # at once: no wait for a process that is not there
    first.close()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        _marker(project, sleeper.pid, age_s=STALE_S + 1)
        assert engines(starting_wait_s=120).is_owner
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_wait_for_a_starting_owner_that_never_comes_is_bounded(engines, project):
    """A marked process that never takes the index over (hung in its imports) delays a
    command by ``starting_wait_s`` at most; then the command owns the index itself."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        _marker(project, sleeper.pid)
        started = time.monotonic()
        command = engines(starting_wait_s=0.5)
        assert command.is_owner
        assert time.monotonic() - started >= 0.5
    finally:
        sleeper.kill()
        sleeper.wait()
