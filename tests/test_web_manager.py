"""The web Index Manager as a real ``contextd ui`` process: its guard (token, Host, Origin,
loopback only), its JSON endpoints and progress log, the registry of running managers from
the CLI and over MCP (the SDK client over stdio)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from contextd.config.project import Project
from contextd.web.registry import workspace_id
from manager_support import BAD_FILE, read_first_line, running_manager, ui_command
from test_mcp_server import make_repo, mcp_session, server_env, structured


@pytest.fixture(scope="module")
def manager(tmp_path_factory):
    with running_manager(tmp_path_factory.mktemp("ui")) as running:
        yield running


def test_the_printed_url_enters_once_and_sets_a_strict_cookie(manager):
    status, headers, _ = manager.request("GET", f"/?token={manager.token}", Cookie=None)
    assert status == 303 and headers["location"] == "/"
    cookie = headers["set-cookie"]
    assert cookie.startswith(f"contextd_manager={manager.token}")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    status, _, page = manager.request("GET", "/")
    assert status == 200 and b"Overview" in page and b"Providers" in page


@pytest.mark.parametrize("headers, reason", [
    ({"Cookie": None}, b"token"),
    ({"Cookie": "contextd_manager=guessed"}, b"token"),
    ({"Host": "evil.example:80"}, b"unknown host"),
    ({"Host": "attacker.test"}, b"unknown host"),
    ({"Origin": "http://evil.example"}, b"cross-site"),
])
def test_requests_without_token_or_from_elsewhere_are_refused(manager, headers, reason):
    for path in ("/", "/api/progress", "/events", "/progress"):
        status, _, body = manager.request("GET", path, **headers)
        assert status == 403 and reason in body, (path, headers)


def test_a_non_ascii_token_is_refused_like_any_wrong_token(manager):
    """Issue 40: ``hmac.compare_digest`` raised TypeError on it and the manager answered 500."""
    for path in ("/?token=%C3%A9t%C3%A9", "/api/progress?token=%E2%82%AC"):
        status, _, body = manager.request("GET", path, Cookie=None)
        assert status == 403 and b"token" in body, path


def test_state_changing_requests_need_our_origin(manager):
    status, _, body = manager.request("POST", "/api/rebuild", {"confirm": True}, Origin=None)
    assert status == 403 and b"own pages" in body
    status, _, _ = manager.request("POST", "/api/rebuild", {"confirm": True},
                                   Origin="http://127.0.0.1:1")
    assert status == 403
    status, _, body = manager.request("POST", "/api/rebuild", {"confirm": False})
    assert status == 400 and b"confirm=true" in body
    status, _, body = manager.request("POST", "/api/rebuild", b"{not json")
    assert status == 400 and b"not JSON" in body
    status, _, body = manager.request("POST", "/api/rebuild", b"x" * 70000)
    assert status == 413


def test_listens_on_loopback_only(manager):
    listening = []
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, port = local.split(":")
        if int(port, 16) == manager.port and state == "0A":
            listening.append(address)
    assert listening == ["0100007F"]  # 127.0.0.1, nothing else
    assert not os.path.exists("/proc/net/tcp6") or f"{manager.port:04X}" not in \
        " ".join(line.split()[1] for line in open("/proc/net/tcp6").read().splitlines()[1:])


def test_rebuild_is_watched_logged_and_a_second_refused(manager):
    manager.wait_idle()
    status, _, body = manager.request("POST", "/api/rebuild", {"confirm": True})
    assert status == 202, body
    job_id = json.loads(body)["job_id"]
    status, _, body = manager.request("POST", "/api/rebuild", {"confirm": True})
    assert status == 409 and b"already running" in body
    seen_running = False
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        jobs = manager.json("/api/progress")["jobs"]
        if any(j["job_id"] == job_id and j["status"] == "in_progress" for j in jobs):
            seen_running = True
        if not jobs and seen_running:
            break
        time.sleep(0.1)
    manager.wait_idle()
    log = manager.json("/progress")
    events = [(e["event"], e.get("job_id")) for e in log]
    assert ("start", job_id) in events and ("complete", job_id) in events
    on_disk = [json.loads(line) for line in
               (manager.root / ".contextd" / "progress.jsonl").read_text().splitlines()]
    # The job's end is on disk (the background embedding's events may follow it).
    assert {"event": "complete", "job_id": job_id}.items() <= next(
        e for e in reversed(on_disk) if e.get("job_id") == job_id).items()
    status, _, page = manager.request("GET", "/jobs")
    assert job_id.encode() in page and b"completed" in page


def test_errors_listed_and_retried(manager):
    status, _, page = manager.request("GET", "/errors?type=decode_error")
    assert status == 200 and BAD_FILE.encode() in page and b"not valid UTF-8" in page
    status, _, body = manager.request("POST", "/api/errors/retry", {"path": BAD_FILE})
    assert status == 200 and json.loads(body)["failed"] == 1
    status, _, body = manager.request("POST", "/api/errors/retry", {"path": 3})
    assert status == 400


def test_search_and_savings_pages(manager):
    status, _, page = manager.request("GET", "/search?q=invoice+total&k=5&budget=800")
    assert status == 200 and b"src/billing/invoice.py" in page
    assert b"<mark>invoice</mark>" in page.lower() or b"<mark>" in page
    assert b"&lt;project_context" in page
    status, _, page = manager.request("GET", "/savings")
    assert status == 200 and b"tokens served" in page and b"<svg" in page
    savings = manager.json("/api/progress")
    assert savings["ready"]


def test_one_manager_per_project_and_cli_registry(manager, tmp_path):
    second = subprocess.run(ui_command(manager.root), capture_output=True, text=True,
                            env=manager.env, timeout=120)
    assert second.returncode == 0 and second.stdout.splitlines()[0] == manager.url
    listed = subprocess.run([sys.executable, "-m", "contextd", "--json", "ui", "list"],
                            capture_output=True, text=True, env=manager.env, timeout=120)
    entries = json.loads(listed.stdout)
    assert [e["workspace_id"] for e in entries] == [workspace_id(manager.root)]
    assert entries[0]["url"] == manager.url and entries[0]["pid"] == manager.proc.pid


def test_busy_port_is_one_line(tmp_path):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    root = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    try:
        result = subprocess.run(ui_command(root, "--port", str(holder.getsockname()[1])),
                                capture_output=True, text=True, timeout=120,
                                env=server_env(tmp_path / "run"))
    finally:
        holder.close()
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "cannot listen" in result.stderr


def test_mcp_tools_open_list_and_stop_a_manager(tmp_path):
    root = make_repo(tmp_path / "repo", {"a.py": "def alpha():\n    return 1\n"})
    env = server_env(tmp_path / "run")
    with mcp_session(root, env, tmp_path / "server.log", "admin") as client:
        opened = structured(client.call("open_index_manager", {}))
        assert opened["started"] is True and opened["manager"]["url"].startswith(
            "http://127.0.0.1:")
        again = structured(client.call("open_index_manager", {}))
        assert again["started"] is False and again["manager"]["url"] == opened["manager"]["url"]
        listed = structured(client.call("list_index_managers", {}))
        assert [m["root"] for m in listed["managers"]] == [str(root)]
        wid = listed["managers"][0]["workspaceId"]
        assert wid == workspace_id(Project.open(str(root)).root)
        stopped = structured(client.call("stop_index_manager", {"workspace_id": wid}))
        pid = stopped["manager"]["pid"]
        assert _gone(pid)
        assert structured(client.call("list_index_managers", {}))["managers"] == []
        missing = client.call("stop_index_manager", {"workspace_id": wid})
        assert missing.is_error and "no Index Manager runs" in missing.content[0].text


def _gone(pid: int, timeout: float = 10.0) -> bool:
    """Whether ``pid`` has exited and been reaped within ``timeout`` (the MCP server that
    started the manager reaps it a moment after it exits)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_stop_by_signal_exits_cleanly_and_unregisters(tmp_path):
    root = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    env = server_env(tmp_path / "run")
    proc = subprocess.Popen(ui_command(root), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    url = read_first_line(proc)
    assert url.startswith("http://127.0.0.1:")
    proc.send_signal(2)
    assert proc.wait(60) == 0
    listed = subprocess.run([sys.executable, "-m", "contextd", "--json", "ui", "list"],
                            capture_output=True, text=True, env=env, timeout=120)
    assert json.loads(listed.stdout) == []
    proc.stdout.close()
    proc.stderr.close()


def test_open_index_manager_from_a_folder_holding_a_contextd_folder(tmp_path):
    """Issue 27: open_index_manager failed with an ImportError when the server's working
    folder held a folder named ``contextd``: the launcher ran ``python -m contextd`` there,
    which imported that folder. The server runs as the console script would (``-P``: no
    working folder on sys.path), in such a folder."""
    from mcp import StdioServerParameters
    from anyio.from_thread import start_blocking_portal
    from test_mcp_server import SyncSession, _session

    root = make_repo(tmp_path / "repo", {"a.py": "def alpha():\n    return 1\n"})
    workdir = tmp_path / "elsewhere"
    (workdir / "contextd").mkdir(parents=True)
    (workdir / "contextd" / "__init__.py").write_text("raise ImportError('the wrong contextd')\n")
    params = StdioServerParameters(
        command=sys.executable, args=["-P", "-m", "contextd", "serve", "--root", str(root), "--tools", "admin"],
        env=server_env(tmp_path / "run"), cwd=str(workdir))
    with start_blocking_portal() as portal, open(tmp_path / "server.log", "a") as err:
        with portal.wrap_async_context_manager(_session(params, err)) as raw:
            client = SyncSession(portal, raw)
            opened = structured(client.call("open_index_manager", {}))
            assert opened["started"] is True, opened
            wid = opened["manager"]["workspaceId"]
            stopped = structured(client.call("stop_index_manager", {"workspace_id": wid}))
            assert _gone(stopped["manager"]["pid"])


def test_the_live_line_and_progress_log_show_the_background_embedding(tmp_path):
    """Issue 27: during a long background embedding the live line said "idle · N chunks
    waiting for vectors · no job running" and the Progress page was empty; only Overview
    showed the embedding."""
    from manager_support import Manager
    from test_first_minutes import _words

    files = {f"pkg/module_{n:03d}.py": "".join(
        f'def handler_{n}_{i}(request):\n    """{_words(n * 40 + i)}"""\n    return {i}\n\n\n'
        for i in range(40)) for n in range(30)}
    # Every file read in-line, however loaded the machine: only the vectors are handed over.
    files["context.toml"] = ('[owner]\nanswer_within_seconds = 0\nindex_within_seconds = 0\n'
                             '[contextualizer]\nstrategy = "none"\n')
    root = make_repo(tmp_path / "repo", files)
    env = server_env(tmp_path / "run")
    query = subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), "query",
                            "handler"], capture_output=True, text=True, env=env, timeout=300)
    assert "in the background" in query.stderr, query.stderr
    proc = subprocess.Popen(ui_command(root), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=open(tmp_path / "manager.log", "w"), env=env, cwd=str(root))
    try:
        manager = Manager(proc, read_first_line(proc), root, env)
        deadline = time.monotonic() + 120
        live = {}
        while time.monotonic() < deadline:
            live = manager.json("/api/progress")
            if live.get("embedding") and live["embedding"]["done"] > 0:
                break
            time.sleep(0.25)
        assert live["state"] == "embedding" and live["embedding"]["pending"] > 0, live
        events = [e for e in manager.json("/progress") if e.get("job_type") == "embedding"]
        assert events and events[0]["event"] == "start", events
        status, _, page = manager.request("GET", "/live")
        assert status == 200 and b"embedding" in page
    finally:
        proc.terminate()
        proc.wait(20)
        proc.stdout.close()
        subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), "stop"],
                       env=env, capture_output=True, timeout=60)
