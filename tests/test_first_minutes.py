"""The first minutes with contextd (issue 13), as a new user meets them: the real CLI in a
subprocess, the real MCP client over stdio.

Bad roots create nothing, options work on either side of the subcommand, filters that cannot
match say why, Ctrl-C is one line and exit 130 with a resumable job, and a large first
embedding is handed to a background owner that answers later commands warm.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_mcp_server import error_text, make_repo, mcp_session, server_env, structured

from contextd.runtime.indexing_notes import STILL_INDEXING


def run(cwd: Path, runtime: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**server_env(runtime), "CONTEXTD_LOAD_PLUGINS": ""}
    env.pop("CONTEXTD_RAISE_ERRORS", None)
    return subprocess.run([sys.executable, "-m", "contextd", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def one_line_error(proc: subprocess.CompletedProcess, code: int = 1) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("contextd: error: "), proc.stderr
    return lines[0]


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture()
def runtime(tmp_path: Path) -> Path:
    return tmp_path / "run"


@pytest.mark.parametrize("command", [["query", "x"], ["stats"], ["refresh"],
                                     ["rebuild", "--dry-run"], ["watch"], ["serve"]])
def test_a_bad_root_fails_in_one_line_and_creates_nothing(tmp_path, runtime, command):
    missing = tmp_path / "nonexistent"
    line = one_line_error(run(tmp_path, runtime, "--root", str(missing), *command))
    assert line == f"contextd: error: project root {missing} does not exist"
    assert not missing.exists()
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x\n")
    line = one_line_error(run(tmp_path, runtime, *command, "--root", str(a_file)))
    assert line.endswith("is not a directory")


def test_the_filesystem_root_is_refused_before_anything_is_created(tmp_path, runtime):
    line = one_line_error(run(tmp_path, runtime, "--root", "/", "query", "x"))
    assert "/ is far too broad a root" in line
    assert not Path("/.contextd").exists()


@pytest.mark.slow
def test_global_options_work_after_the_subcommand_with_one_meaning(repo, tmp_path, runtime):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    listed = run(elsewhere, runtime, "list-indexable", "--json", "--root", str(repo))
    assert listed.returncode == 0, listed.stderr
    assert "src/billing/invoice.py" in {e["path"] for e in json.loads(listed.stdout)["files"]}
    answered = run(elsewhere, runtime, "query", "invoice_total", "--root", str(repo), "--json",
                   "--render")
    assert answered.returncode == 0, answered.stderr
    data = json.loads(answered.stdout)
    assert data["hits"][0]["file_path"] == "src/billing/invoice.py"
    assert data["rendered"].startswith("<project_context")
    stats = run(elsewhere, runtime, "stats", "--json", "--root", str(repo))
    assert json.loads(stats.stdout)["storage"]["total_files"] == 4
    before = run(elsewhere, runtime, "--json", "--root", str(repo), "stats")
    assert json.loads(before.stdout)["storage"]["total_files"] == 4
    # .contextd/ hides itself from git status through .git/info/exclude, not .gitignore.
    assert "/.contextd/" in (repo / ".git" / "info" / "exclude").read_text()
    assert not (repo / ".gitignore").exists()
    status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain"],
                            capture_output=True, text=True, check=True)
    assert ".contextd" not in status.stdout


@pytest.mark.slow
def test_queries_that_cannot_answer_say_why(repo, runtime):
    assert run(repo, runtime, "refresh").returncode == 0
    line = one_line_error(run(repo, runtime, "query", "  "), code=2)
    assert "the query is empty" in line
    line = one_line_error(run(repo, runtime, "query", "invoice", "--lang", "py"), code=2)
    assert "'py'" in line and "python" in line and "markdown" in line
    line = one_line_error(run(repo, runtime, "query", "invoice", "--kind", "function"), code=2)
    assert "'function'" in line and "CODE_FUNCTION" in line
    line = one_line_error(run(repo, runtime, "query", "invoice", "--path", "nowhere/"), code=2)
    assert "'nowhere/'" in line and "matches no indexed file" in line
    # --path: absolute inside the root, and relative to the working directory.
    absolute = run(repo, runtime, "--json", "query", "invoice",
                   "--path", str(repo / "src" / "billing"))
    assert absolute.returncode == 0, absolute.stderr
    hits = json.loads(absolute.stdout)["hits"]
    assert hits and all(h["file_path"].startswith("src/billing/") for h in hits)
    relative = run(repo / "src", runtime, "--json", "query", "invoice", "--path", "billing")
    assert [h["file_path"] for h in json.loads(relative.stdout)["hits"]] == \
        [h["file_path"] for h in hits]
    outside = run(repo, runtime, "query", "invoice", "--path", "/tmp")
    assert "outside the project root" in one_line_error(outside, code=2)
    tiny = run(repo, runtime, "query", "invoice", "--budget", "1")
    assert tiny.returncode == 0
    assert "none fits the token budget of 1 tokens" in tiny.stderr


@pytest.mark.slow
def test_a_failed_file_is_named_with_its_reason_and_not_retried_until_it_changes(repo,
                                                                                 runtime):
    # Shift-JIS: neither UTF-8 nor Windows-1252 (a Latin-1 file is read as Windows-1252).
    (repo / "src" / "sjis.py").write_bytes("# 注文。\n".encode("shift_jis") + b"x = 1\n" * 5)
    first = run(repo, runtime, "refresh")
    assert first.returncode == 0, first.stderr
    report = first.stdout.strip()
    assert "1 failed" in report and "src/sjis.py: not valid UTF-8" in report
    problems = _stats(repo, runtime)["indexing"]["problem_files"]
    assert [p["path"] for p in problems] == ["src/sjis.py"]
    assert problems[0]["reason"].startswith("decode_error: not valid UTF-8")
    again = json.loads(run(repo, runtime, "--json", "refresh").stdout)
    assert again["files_failed"] == 0 and again["files_indexed"] == 0
    (repo / "src" / "sjis.py").write_text("# cafe\n")
    fixed = json.loads(run(repo, runtime, "--json", "refresh").stdout)
    assert fixed["files_indexed"] == 1 and fixed["files_failed"] == 0
    assert _stats(repo, runtime)["indexing"]["problem_files"] == []


def test_validate_config_rejects_what_a_query_would(repo, runtime):
    (repo / "context.toml").write_text('[embedding]\nbackend = "cuda"\n')
    proc = run(repo, runtime, "validate-config")
    assert proc.returncode == 1
    assert "embedding.backend: unknown embedding backend 'cuda'; choose from:" in proc.stdout


def test_a_busy_port_is_one_line(repo, runtime):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        line = one_line_error(run(repo, runtime, "serve", "--http", str(port)))
    assert f"port {port} on 127.0.0.1 is already in use" in line


def _many_files(root: Path, count: int, functions: int = 40) -> None:
    """``count`` files of ``functions`` functions each, all alike: chunking takes a while,
    while the embedding cache (keyed by text; no contextual prefix naming the file) embeds
    the distinct texts once."""
    body = "".join(f"def handler_{i}(request):\n    return request.value * {i}\n\n\n"
                   for i in range(functions))
    for n in range(count):
        path = root / "pkg" / f"module_{n:04d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)


def _stats(repo: Path, runtime: Path) -> dict:
    proc = run(repo, runtime, "stats", "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_ctrl_c_during_the_first_index_is_one_line_and_resumable(repo, runtime):
    files = 2000  # a few seconds of chunking even on a quiet machine
    _many_files(repo, files)
    (repo / "context.toml").write_text("[owner]\nbackground = false\n"
                                       "[bootstrap]\nprogress_interval_seconds = 1\n"
                                       "[contextualizer]\nstrategy = \"none\"\n")
    env = {**server_env(runtime), "CONTEXTD_LOAD_PLUGINS": ""}
    proc = subprocess.Popen([sys.executable, "-m", "contextd", "query", "handler"], cwd=repo,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stderr.readline()  # "contextd: bootstrap: N files to process"
    assert "files to process" in first, first
    during = proc.stderr.readline()  # a progress line: the bootstrap is under way
    assert " / " in during and "indexed" not in during, during
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "contextd: interrupted"
    assert "leaked" not in err and "Traceback" not in err
    jobs = _stats(repo, runtime)["recent_jobs"]
    assert jobs[0]["job_type"] == "bootstrap" and jobs[0]["status"] == "interrupted"
    resumed = run(repo, runtime, "query", "handler")  # its catch-up resumes the bootstrap
    assert resumed.returncode == 0, resumed.stderr
    assert "resume: " in resumed.stderr
    stats = _stats(repo, runtime)
    assert stats["storage"]["total_files"] == files + 5  # + the 4 files + context.toml
    assert stats["recent_jobs"][0]["status"] == "completed"


def _watching(repo: Path, runtime: Path) -> subprocess.Popen:
    """``contextd watch`` in ``repo``, once it says it watches. faulthandler is on: should it
    hang after Ctrl-C, :func:`_interrupted` makes it print every thread's stack."""
    env = {**server_env(runtime), "CONTEXTD_LOAD_PLUGINS": "", "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "contextd", "watch"], cwd=repo, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    assert "watching" in line, line
    return proc


def _interrupted(proc: subprocess.Popen) -> tuple[str, str]:
    """(stdout, stderr) of a watch sent Ctrl-C; a failure with its threads' stacks when it
    still runs 60 s later."""
    try:
        return proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        pytest.fail("contextd watch still ran 60 s after Ctrl-C; its threads:\n"
                    + proc.communicate(timeout=30)[1][-8000:])


def test_ctrl_c_stops_watch_in_one_line(repo, runtime):
    proc = _watching(repo, runtime)
    proc.send_signal(signal.SIGINT)
    out, err = _interrupted(proc)
    assert proc.returncode == 130, err
    assert err == "contextd: interrupted\n" and out == ""  # no blank line before it


def test_ctrl_c_taken_by_another_thread_still_stops_watch(repo, runtime):
    """The kernel may deliver a process's SIGINT to any of its threads; Python runs the
    handler in the main thread, which must wake up to do so (it waited without end before,
    and a watch ignored Ctrl-C until killed). tgkill hands the signal to a thread that is
    not the main one, as the kernel sometimes does."""
    proc = _watching(repo, runtime)
    other = max(int(t) for t in os.listdir(f"/proc/{proc.pid}/task") if int(t) != proc.pid)
    assert ctypes.CDLL(None, use_errno=True).tgkill(proc.pid, other, signal.SIGINT) == 0
    out, err = _interrupted(proc)
    assert proc.returncode == 130, err
    assert err == "contextd: interrupted\n" and out == ""


def _owner_pid(repo: Path) -> int:
    return int((repo / ".contextd" / "owner.lock").read_text().strip())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has exited; it only waits to be reaped by its parent (init here).
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "zombie" not in status.read_text()


def _background_owner_pid(repo: Path) -> int:
    """The pid of the background owner a command started, once it holds the index (it takes
    the lock when the command has let go: a moment, longer on a loaded machine)."""
    deadline = time.monotonic() + 30
    while not _alive(pid := _owner_pid(repo)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return pid


def _assert_leaves(pid: int) -> None:
    """The owner leaves by itself within a minute (idle, where a test sets idle_exit_seconds = 5,
    or its project deleted)."""
    deadline = time.monotonic() + 60
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _alive(pid)


def _answer_with(repo: Path, runtime: Path, owner_setting: str, query: str) -> dict:
    """The JSON answer of a first ``contextd query`` under one ``[owner]`` setting, with an
    owner that exits 5 s after its work and no contextual prefixes."""
    (repo / "context.toml").write_text(f"[owner]\n{owner_setting}\nidle_exit_seconds = 5\n"
                                       "[contextualizer]\nstrategy = \"none\"\n")
    first = run(repo, runtime, "--json", "query", query)
    assert first.returncode == 0, first.stderr
    return json.loads(first.stdout)


def test_a_first_query_answers_at_once_and_the_background_owner_finishes(repo, runtime):
    _many_files(repo, 30)
    # Every file read in the command (its reading window, counted from its start, may end
    # before 1,200 chunks are cut on a loaded machine): the hand-off of the vectors is tested.
    answer = _answer_with(repo, runtime, "answer_within_seconds = 0\nindex_within_seconds = 0",
                          "invoice_total")
    assert answer["hits"][0]["file_path"] == "src/billing/invoice.py"
    assert "semantic" not in answer["providers"]
    assert any("semantic results are still being computed in the background" in note
               for note in answer["notes"])
    pid = _background_owner_pid(repo)
    try:
        assert _alive(pid)
        deadline = time.monotonic() + 120
        while True:
            stats = _stats(repo, runtime)
            assert stats["owner"]["pid"] == pid and not stats["owner"]["this_process"]
            if stats["indexing"]["embeddings_pending"] == 0:
                break
            assert time.monotonic() < deadline, stats["indexing"]
            time.sleep(1)
        later = json.loads(run(repo, runtime, "--json", "query", "invoice_total").stdout)
        assert "semantic" in later["providers"]
        assert not any("background" in note for note in later["notes"])
        _assert_leaves(pid)
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_the_background_owner_takes_the_reading_over_even_when_the_answer_fails(repo,
                                                                                runtime):
    """The command starts the background owner as soon as its reading window ends, before
    its answer is searched (the owner's start-up overlaps the search, so the next command
    finds it): an answer that then fails still leaves every file to be read."""
    _many_files(repo, 20)
    (repo / "context.toml").write_text("[owner]\nindex_within_seconds = 0.01\n"
                                       "answer_within_seconds = 0\nidle_exit_seconds = 600\n")
    on_disk = sum(1 for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts)
    failed = run(repo, runtime, "query", "handler", "--context", "nosuch")
    assert "unknown context(s) nosuch" in failed.stderr
    pid = _background_owner_pid(repo)
    try:
        assert _alive(pid)
        deadline = time.monotonic() + 120
        while _stats(repo, runtime)["storage"]["total_files"] < on_disk:
            assert time.monotonic() < deadline
            time.sleep(0.5)
        # Its project deleted, the owner leaves long before its 600 s without calls.
        shutil.rmtree(repo)
        _assert_leaves(pid)
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow  # ~10 s; tests/test_owner.py holds the hand-over in the default suite
def test_two_commands_started_together_read_the_project_once(repo, runtime):
    """Issue 37, one reader at a time: two first queries started together on a fresh
    project. The product's lock makes one of them the owner, which reads files in-line and
    hands the index to a background owner; the other asks an owner (the first command while
    it runs, then the background owner, which holds the lock from the moment it is started)
    and never owns the index to read files itself, however slow the background owner is to
    start."""
    (repo / "context.toml").write_text("[owner]\nanswer_within_seconds = 0\n"
                                       "idle_exit_seconds = 600\n")
    env = {**server_env(runtime), "CONTEXTD_LOAD_PLUGINS": ""}
    env.pop("CONTEXTD_RAISE_ERRORS", None)
    commands = [subprocess.Popen([sys.executable, "-m", "contextd", "-v", "--json", "query",
                                  "invoice_total"], cwd=repo, env=env, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                for _ in range(2)]
    outputs = [command.communicate(timeout=120) for command in commands]
    try:
        for command, (out, err) in zip(commands, outputs):
            assert command.returncode == 0, err
            assert json.loads(out)["hits"][0]["file_path"] == "src/billing/invoice.py"
        owned = [f"owner: pid {command.pid} owns" in err
                 for command, (_, err) in zip(commands, outputs)]
        assert owned.count(True) == 1, [err for _, err in outputs]
    finally:
        run(repo, runtime, "stop")


@pytest.mark.slow
def test_a_first_query_on_a_large_project_reads_source_first_and_answers_in_time(repo,
                                                                                 runtime):
    """A first query does not read a 2,000-file project to its end before answering (issue
    26): it reads for [owner] index_within_seconds, source code before docs, answers from
    that with a note saying how many files are not read yet, and the background owner reads
    them. (Reading the 2,000 pages takes seconds; the order itself is shown in
    test_indexer.)"""
    pages = 2000
    for n in range(pages):
        page = repo / "docs" / ("de", "fr", "ja", "pt")[n % 4] / f"page_{n:04d}.md"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(f"# Page {n}\n\n" + "".join(f"Shipping notes, part {n}, line {k}.\n\n"
                                                    for k in range(120)))
    (repo / "src" / "refunds.py").write_text(
        "def compute_refund_for_damaged_shipment(order, damage_report):\n"
        "    \"\"\"Refund the damaged share of a shipment to the customer who reported "
        "it.\"\"\"\n    return order.total * damage_report.damaged_share\n")
    answer = _answer_with(repo, runtime, "index_within_seconds = 0.5",
                          "refund for a damaged shipment")
    assert answer["hits"][0]["file_path"] == "src/refunds.py"
    note = [n for n in answer["notes"] if n.startswith(STILL_INDEXING)]
    assert note and "files are not read yet" in note[0], answer["notes"]
    left = int(note[0][len(STILL_INDEXING):].split(" ", 1)[0].replace(",", ""))
    assert 0 < left <= pages
    pid = _background_owner_pid(repo)
    try:
        deadline = time.monotonic() + 120
        while True:  # the background owner reads the files the first answer had no time for
            later = json.loads(run(repo, runtime, "--json", "query", "Shipping notes").stdout)
            if not any(n.startswith(STILL_INDEXING) for n in later["notes"]):
                break
            assert time.monotonic() < deadline, later["notes"]
            time.sleep(1)
        assert _stats(repo, runtime)["indexing"]["files_indexed"] > pages
    finally:
        run(repo, runtime, "stop")
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_a_command_that_loaded_its_indexes_slowly_leaves_a_warm_owner(repo, runtime):
    """A cold command on a large, fully indexed project spends seconds loading its indexes
    (fastapi: 2.5 s of a 3.9 s answer); one whose load took longer than [owner]
    warm_after_load_ms leaves a background owner, so the commands after it answer warm
    (0.3 s). A small project's load stays under the default, and no process is left."""
    (repo / "context.toml").write_text("[contextualizer]\nstrategy = \"none\"\n")
    assert run(repo, runtime, "query", "invoice_total").returncode == 0
    time.sleep(1)
    assert not _alive(_owner_pid(repo))
    (repo / "context.toml").write_text("[owner]\nwarm_after_load_ms = 1\nidle_exit_seconds = 5\n"
                                       "[contextualizer]\nstrategy = \"none\"\n")
    assert run(repo, runtime, "query", "invoice_total").returncode == 0
    pid = _background_owner_pid(repo)
    try:
        assert _alive(pid)
        stats = _stats(repo, runtime)
        assert stats["owner"]["pid"] == pid and not stats["owner"]["this_process"]
        _assert_leaves(pid)
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_mcp_filters_that_cannot_match_are_tool_errors(repo, tmp_path):
    with mcp_session(repo, server_env(tmp_path / "run"), tmp_path / "server.log") as session:
        assert structured(session.call("refresh_context",
                                       {"paths": ["."], "async": False}))["status"] == "completed"
        text = error_text(session.call("query_context", {
            "query": "invoice", "scope": {"languages": ["klingon"]}}))
        assert "'klingon'" in text and "python" in text
        answer = structured(session.call("query_context", {"query": "invoice_total"}))
        assert not any(n.startswith(STILL_INDEXING) for n in answer["notes"])


def test_a_query_during_the_first_index_says_what_is_missing(repo):
    """Engine.query while a bootstrap runs (a real indexer in a thread, a real store): an
    empty answer names the indexing progress, and the MCP text then gives no "Nothing
    matched" advice."""
    import threading

    from contextd.runtime.engine import Engine
    from contextd.runtime.indexing_notes import answer_while_indexing
    from contextd.query.records import QueryRequest
    from contextd.mcp import render

    _many_files(repo, 1000, functions=3)
    (repo / "context.toml").write_text("[bootstrap]\nparallel_workers = 1\n")
    engine = Engine.open(str(repo))
    try:
        worker = threading.Thread(target=engine.indexer.ensure_indexed,
                                  kwargs={"embed": False})
        worker.start()
        deadline = time.monotonic() + 60
        while not engine.indexer.indexing and time.monotonic() < deadline:
            time.sleep(0.01)
        request = QueryRequest(query="zebra_quokka_nowhere", wait_for_model=False,
                               providers=("full_text", "symbol"))
        response = answer_while_indexing(engine.indexer, lambda: engine.module.query(request),
                                         wait_s=0)
        still_running = engine.indexer.indexing
        worker.join()
        assert still_running, "the bootstrap finished before the query; use more files"
        note = [n for n in response.notes if n.startswith(STILL_INDEXING)]
        assert note and "files indexed" in note[0] and "retry in" in note[0]
        text = render.query_text(render.query_result(request.query, response, 1000, 0.0))
        assert "Nothing matched" not in text and STILL_INDEXING in text
        # Indexing over: once the in-memory indexes have taken in the last files written (in
        # the background: an answer loads a few itself, and says while more are being taken
        # in), a plain empty answer.
        deadline = time.monotonic() + 60
        while True:
            done = engine.query(request)
            waits = [n for n in done.notes if n.startswith(STILL_INDEXING)]
            if not waits:
                break
            assert all("being taken in" in n for n in waits), waits
            assert time.monotonic() < deadline, waits
            time.sleep(0.1)
        assert "Nothing matched" in render.query_text(
            render.query_result(request.query, done, 1000, 0.0))
    finally:
        engine.close()


def _words(seed: int, count: int = 150) -> str:
    """``count`` words of text unique to ``seed``: a chunk near the model's 256 tokens."""
    vocabulary = ("order invoice account token retry budget cache queue shard replica "
                  "tenant ledger refund parcel cursor window").split()
    return " ".join(f"{vocabulary[(seed * 7 + k * 3) % len(vocabulary)]}{(seed + k) % 97}"
                    for k in range(count))


@pytest.mark.slow
def test_contextd_stop_ends_a_background_owner_mid_embedding_promptly(repo, runtime):
    """SIGTERM used to wait for the embedding window under way (8-23 s on a loaded machine);
    the owner now gives that window up and exits within CLOSE_WAIT_S, and ``contextd stop``
    frees the index for ``restore`` without a SIGKILL."""
    from contextd.runtime.background import CLOSE_WAIT_S

    for n in range(40):  # distinct texts: minutes of embedding, not one cached vector
        path = repo / "pkg" / f"module_{n:03d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(
            f"def handler_{n}_{i}(request):\n    \"\"\"{_words(n * 40 + i)}\"\"\"\n"
            f"    return request.value * {n * 1000 + i}\n\n\n" for i in range(40)))
    (repo / "context.toml").write_text("[owner]\nanswer_within_seconds = 0\n"
                                       "[contextualizer]\nstrategy = \"none\"\n")
    assert run(repo, runtime, "query", "handler").returncode == 0
    deadline = time.monotonic() + 120
    while (stats := _stats(repo, runtime))["indexing"]["state"] != "embedding":
        assert time.monotonic() < deadline
        time.sleep(0.5)
    pid = stats["owner"]["pid"]
    try:
        stopped = run(repo, runtime, "--json", "stop")
        assert stopped.returncode == 0, stopped.stderr
        result = json.loads(stopped.stdout)
        assert result["pid"] == pid and "owner" in result["command"]
        assert not result["forced"] and result["seconds"] < CLOSE_WAIT_S + 3, result
        assert not _alive(pid)
        again = json.loads(run(repo, runtime, "--json", "stop").stdout)
        assert again["pid"] is None
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _two_files(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "shipping.py").write_text(
        'def quote(parcel):\n    """Compute the courier tariff for a parcel by its weight and '
        'destination zone."""\n    return parcel.weight * 3\n')
    (root / "greeting.py").write_text('def hello():\n    return "hi"\n')
    return root


def test_the_first_mcp_answers_on_a_new_project_are_not_empty(tmp_path):
    """Issue 27: on a new project the first query_context answered 0 hits and "still
    indexing" after 1 s (the wait covered only a bootstrap already under way, not one about to
    start), and search_knowledge found nothing for words of a docstring (in a two-file
    project every word is in half the files: BM25's IDF was 0)."""
    root = _two_files(tmp_path / "proj")
    with mcp_session(root, server_env(tmp_path / "run"), tmp_path / "server.log",
                     "reports") as session:
        answer = structured(session.call("query_context", {"query": "courier tariff weight"}))
        assert [h["filePath"] for h in answer["hits"]][:1] == ["shipping.py"], answer
        assert not any(n.startswith(STILL_INDEXING) for n in answer["notes"])
        found = structured(session.call("search_knowledge", {"query": "parcel destination zone"}))
        assert [h["file_path"] for h in found["preview"]][:1] == ["shipping.py"], found
        assert not any("nothing matched" in n for n in found["notes"])


def test_a_query_in_an_empty_folder_says_there_is_nothing_to_index(tmp_path, runtime):
    root = tmp_path / "empty"
    root.mkdir()
    result = run(root, runtime, "--json", "query", "anything")
    assert result.returncode == 0, result.stderr
    notes = json.loads(result.stdout)["notes"]
    assert not any(n.startswith(STILL_INDEXING) for n in notes), notes
    assert any("holds no file contextd indexes" in n for n in notes), notes


def test_the_reading_window_counts_from_the_command_start():
    """Issue 37: a first answer took 4.4 s, ~1.2 s of imports and opening the index before a
    1.5 s reading window. The window now ends index_within_seconds after the command
    started, keeping MIN_WINDOW_S however slow the start was; 0 still means no limit."""
    from contextd.runtime.background import MIN_WINDOW_S, reading_window

    now = time.perf_counter()
    assert reading_window(0.0, now) is None
    assert 1.0 < reading_window(2.0, now - 0.5) <= 1.5
    assert reading_window(2.0, now - 100) == MIN_WINDOW_S
    assert reading_window(0.001, now - 100) == 0.001  # a smaller setting stays smaller
