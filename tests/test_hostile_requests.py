"""Hostile and malformed requests to a real ``contextd serve``: every one gets an answer (a
JSON-RPC error, or a tool error naming the reason), nothing reaches the log as a traceback,
and the server keeps serving afterwards. Over stdio with raw frames, and over HTTP."""

from __future__ import annotations

import http.client
import json
import os

import pytest

from contextd.mcp.guard import MAX_REQUEST_BYTES, top_level_id
from manager_support import send_raw
from test_mcp_http import INITIALIZE as HTTP_INITIALIZE
from test_mcp_http import http_server
from test_mcp_server import _read_answer, _request, _start_raw

CALL = '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"query_context",' \
       '"arguments":%s}}'
DEEP_SCOPE = '{"query":"x","scope":' + "[" * 5000 + "]" * 5000 + "}"
MALFORMED = [
    ("lone surrogate", CALL % (21, '{"query":"invoice \\ud800 total"}'), -32700),
    ("scope nested 5,000 deep", CALL % (22, DEEP_SCOPE), -32700),
    ("oversize", CALL % (23, json.dumps({"query": "x" * (MAX_REQUEST_BYTES + 10)})), -32600),
    ("not JSON-RPC", '{"jsonrpc":"2.0","id":24,"method":7}', -32600),
]


def _send_raw(proc, line: str) -> None:
    proc.stdin.write(line.encode("utf-8", "surrogatepass") + b"\n")
    proc.stdin.flush()


@pytest.fixture()
def raw(tmp_path, monkeypatch):
    proc, _ = _start_raw(tmp_path, monkeypatch, "admin,knowledge")  # the tools called below
    yield proc, tmp_path / "server.log", tmp_path / "repo"
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_malformed_frames_get_json_rpc_errors_over_stdio(raw):
    proc, log, _ = raw
    for name, frame, code in MALFORMED:
        _send_raw(proc, frame)
        answer = _read_answer(proc, json.loads(frame[:40].split(",")[1].split(":")[1]))
        assert answer["error"]["code"] == code, name
        assert answer["error"]["message"], name
    _send_raw(proc, "{not json at all")
    garbage = json.loads(proc.stdout.readline())
    assert garbage["id"] is None and garbage["error"]["code"] == -32700
    _request(proc, {"jsonrpc": "2.0", "id": 30, "method": "tools/call", "params": {
        "name": "query_context", "arguments": {"query": "invoice total"}}})
    assert not _read_answer(proc, 30)["result"]["isError"]  # still serving
    assert "Traceback" not in log.read_text()


def test_refresh_refuses_bad_paths_with_a_reason_each(raw):
    proc, log, root = raw
    os.symlink("/etc", root / "etc_link")
    cases = [(["x" * 10_000], "10,000 characters"), (["x\0y.py"], "NUL byte"),
             (["~/.ssh"], "'~' is not expanded"), (["/root/.ssh"], "outside the project root"),
             (["etc_link"], "leading outside the project root"),
             (["../outside.py"], "outside the project root"),
             (["no/such/file.py"], "does not exist")]
    for request_id, (paths, reason) in enumerate(cases, start=40):
        for run_async in (False, True):
            if run_async and reason == "does not exist":
                continue  # queued: a path deleted meanwhile is removed by the refresh
            _request(proc, {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                            "params": {"name": "refresh_context",
                                       "arguments": {"paths": paths, "async": run_async}}})
            result = _read_answer(proc, request_id)["result"]
            assert result["isError"], paths
            assert reason in result["content"][0]["text"], result
    _request(proc, {"jsonrpc": "2.0", "id": 60, "method": "tools/call", "params": {
        "name": "refresh_context", "arguments": {"paths": ["src/billing", "x\0y"],
                                                 "async": False}}})
    answer = _read_answer(proc, 60)["result"]["structuredContent"]
    assert answer["status"] == "completed"
    assert answer["refused"] == [{"path": "x\\x00y", "reason": "contains a NUL byte"}]
    assert "Traceback" not in log.read_text()


def test_top_level_id_ignores_nested_ids():
    assert top_level_id('{"params":{"id":5},"id":7}') == 7
    assert top_level_id('{"method":"x","params":{"a":"\\"id\\": 3"},"id":"r-1"}') == "r-1"
    assert top_level_id("[" * 100 + '{"id": 3}') is None
    assert top_level_id('{"id": 12, "params": ' + "[" * 5000) == 12


def _post_bytes(port: int, body: bytes) -> tuple[int, dict | None]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", "/mcp", body=body, headers={
        "Host": f"127.0.0.1:{port}", "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream"})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    try:
        return response.status, json.loads(data)
    except ValueError:
        return response.status, None


def test_malformed_requests_over_http(tmp_path):
    with http_server(tmp_path) as (proc, port, _):
        for name, frame, _code in MALFORMED:
            status, body = _post_bytes(port, frame.encode("utf-8", "surrogatepass"))
            assert 400 <= status < 500, name
            if status != 413:  # the body limit answers before any JSON is read
                assert body["error"]["code"] in (-32700, -32600, -32602), (name, body)
        for value in ("{}", "null", "1.5"):  # as over stdio (issue 28)
            status, body = _post_bytes(
                port, b'{"jsonrpc":"2.0","id":%s,"method":"tools/list"}' % value.encode())
            assert status == 400 and body["error"]["code"] == -32600, (value, body)
        status, body = _post_bytes(port, json.dumps(HTTP_INITIALIZE).encode())
        assert status == 200 and proc.poll() is None
    assert "Traceback" not in (tmp_path / "server.log").read_text()


# ------------------------------------------------------------------ issue 28: hostile clients
# The service on loopback without keys, MCP over stdio and the Index Manager, each driven
# with what a hostile web page or a careless client sends.

EVIL_ORIGIN = "https://evil.example"
INJECTED = {"file_path": "src/injected.py", "content": "def backdoor():\n    return 1\n"}
DEEP_BODY = b'{"q":' + b"[" * 100_000 + b"]" * 100_000 + b"}"


def _call(port: int, method: str, path: str, body: bytes | dict | None = None,
          conn: http.client.HTTPConnection | None = None, **headers: str
          ) -> tuple[int, dict | None]:
    """One raw request (the caller's headers replace the defaults: our Host, JSON)."""
    own = conn is None
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    data = body if isinstance(body, bytes) else json.dumps(body).encode() if body else b""
    defaults = {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json"}
    try:
        status, _, payload = send_raw(conn, method, path, data, {**defaults, **headers})
    finally:
        if own:
            conn.close()
    try:
        return status, json.loads(payload)
    except ValueError:
        return status, None


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    from service_helpers import running_server

    with running_server(tmp_path_factory.mktemp("hostile-svc"),
                        "[engine]\nrate_limit_per_s = 0\n") as server:
        yield server


def _indexed(server, rel: str) -> bool:
    status, found = _call(server.port, "POST", "/query_context", {"q": "def backdoor"})
    assert status == 200, found
    return rel in {hit["file_path"] for hit in found["hits"]}


def test_service_refuses_cross_site_and_rebinding_requests(service):
    port = service.port
    # The no-preflight form of the probe: a text/plain body whose parameters say "json".
    status, body = _call(port, "POST", "/add_context", INJECTED,
                         **{"Content-Type": "text/plain;charset=json"})
    assert status == 415 and body["error"]["code"] == "unsupported_media_type"
    for media_type in ("application/jsonp", "text/json", "application/x-www-form-urlencoded"):
        assert _call(port, "POST", "/add_context", INJECTED,
                     **{"Content-Type": media_type})[0] == 415, media_type
    # A foreign Origin, even with the right media type (a page that got a preflight
    # through elsewhere, or a browser extension): refused on every route.
    for origin in (EVIL_ORIGIN, "null", "http://127.0.0.1.evil.example:80"):
        status, body = _call(port, "POST", "/add_context", INJECTED, Origin=origin)
        assert status == 403 and body["error"]["code"] == "foreign_origin", origin
    assert _call(port, "GET", "/stats", Origin=EVIL_ORIGIN)[0] == 403
    # DNS rebinding: the page's requests name its own host.
    for method, path, body in (("POST", "/query_context", {"q": "tokens"}),
                               ("GET", "/stats", None), ("GET", "/healthz", None),
                               ("POST", "/add_context", INJECTED)):
        status, answer = _call(port, method, path, body, Host="attacker.test")
        assert status == 421 and answer["error"]["code"] == "misdirected_request", path
    assert not _indexed(service, "src/injected.py")
    # Our own names and origins still work.
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "localhost"):
        assert _call(port, "GET", "/stats", Host=host)[0] == 200, host
    status, _ = _call(port, "POST", "/query_context", {"q": "tokens"},
                      Origin=f"http://localhost:{port}",
                      **{"Content-Type": "application/json; charset=utf-8"})
    assert status == 200


def test_service_backups_stay_in_the_backup_folder(service, tmp_path):
    port = service.port
    outside = tmp_path / "evil.duckdb"
    backups = service.root / ".contextd" / "backups"
    for destination in (str(outside), "../../x/evil.duckdb", "../evil.duckdb",
                        "sub/../../evil.duckdb", str(backups / ".." / "evil.duckdb")):
        status, body = _call(port, "POST", "/backup", {"destination": destination})
        assert status == 400 and "backup folder" in body["error"]["message"], destination
    assert not outside.exists() and not (service.root / "x").exists()
    assert not (service.root / ".contextd" / "evil.duckdb").exists()
    status, body = _call(port, "POST", "/backup", {"destination": "named.duckdb"})
    assert status == 200 and body["path"] == str((backups / "named.duckdb").resolve())


def test_service_takes_only_strict_json_types_and_survives_deep_nesting(service):
    port = service.port
    for k in ("5", True, 2.5):
        status, body = _call(port, "POST", "/query_context", {"q": "tokens", "k": k})
        assert status == 400 and body["error"]["details"][0]["field"] == "k", k
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        status, body = _call(port, "POST", "/query_context", DEEP_BODY, conn=conn)
        assert status == 400 and body["error"]["code"] == "malformed_json", body
        # The same keep-alive connection goes on answering.
        assert _call(port, "POST", "/query_context", {"q": "tokens"}, conn=conn)[0] == 200
    finally:
        conn.close()


def test_service_add_context_from_disk_needs_an_indexable_file(service):
    (service.root / ".git").mkdir(exist_ok=True)
    (service.root / ".git" / "config").write_text("[core]\n\tbare = false\n")
    status, body = _call(service.port, "POST", "/add_context", {"file_path": ".git/config"})
    assert status == 400 and "outside what this project indexes" in body["error"]["message"]
    status, body = _call(service.port, "POST", "/add_context", {"file_path": "no/such.py"})
    assert status == 400 and "does not exist on disk" in body["error"]["message"]


def _tool(proc, request_id: int, name: str, arguments: dict) -> dict:
    _request(proc, {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                    "params": {"name": name, "arguments": arguments}})
    return _read_answer(proc, request_id)


def test_mcp_destructive_flags_and_counts_take_json_types_only(raw):
    proc, log, _ = raw
    request_id = 100
    assert not _tool(proc, 99, "knowledge_context_create", {"name": "keepme"})[
        "result"]["isError"]
    for name, arguments in (
            *(("rebuild_context", {"confirm": v}) for v in ("yes", "true", "1", 1)),
            ("knowledge_context_delete", {"name": "keepme", "confirm": "yes"}),
            ("knowledge_context_delete", {"name": "keepme", "confirm": 1}),
            ("query_context", {"query": "invoice", "k": "5"}),
            ("query_context", {"query": "invoice", "k": True})):
        request_id += 1
        answer = _tool(proc, request_id, name, arguments)
        assert answer["result"]["isError"], (name, arguments, answer)
        assert "valid" in answer["result"]["content"][0]["text"], answer
    listed = _tool(proc, 120, "knowledge_context_list", {})["result"]["structuredContent"]
    assert "keepme" in json.dumps(listed)  # not deleted
    assert not _tool(proc, 122, "query_context", {"query": "invoice", "k": 5})[
        "result"]["isError"]
    assert "Traceback" not in log.read_text()


def test_mcp_requests_with_an_unusable_id_get_invalid_request(raw):
    proc, _, _ = raw
    for value in ("{}", "null", "1.5", "true", "[1]"):
        _send_raw(proc, '{"jsonrpc":"2.0","id":%s,"method":"tools/list"}' % value)
        answer = json.loads(proc.stdout.readline())
        assert answer["id"] is None and answer["error"]["code"] == -32600, (value, answer)
        assert "the id must be a string or an integer" in answer["error"]["message"]
    _request(proc, {"jsonrpc": "2.0", "id": 130, "method": "tools/list"})
    assert _read_answer(proc, 130)["result"]["tools"]


@pytest.fixture(scope="module")
def small_manager(tmp_path_factory):
    from manager_support import running_manager
    from test_mcp_server import make_repo

    with running_manager(tmp_path_factory.mktemp("hostile-ui"), make_repo) as manager:
        yield manager


@pytest.mark.slow
def test_index_manager_answers_hostile_buttons(small_manager):
    status, _, payload = small_manager.request("POST", "/api/jobs/no-such-job/cancel", {})
    assert status == 404 and b"no job 'no-such-job'" in payload
    status, _, payload = small_manager.request("POST", "/api/refresh",
                                               {"paths": ["../../etc/passwd"]})
    assert status == 400 and b"outside the project root" in payload, payload
    deep = b"[" * 30_000 + b"]" * 30_000
    status, _, payload = small_manager.request("POST", "/api/rebuild", deep)
    assert status == 400, payload
    status, _, payload = small_manager.request("POST", "/api/rebuild", {"confirm": "yes"})
    assert status == 400 and b"confirm=true" in payload
