"""Hostile and malformed requests to a real ``contextd serve``: every one gets an answer (a
JSON-RPC error, or a tool error naming the reason), nothing reaches the log as a traceback,
and the server keeps serving afterwards. Over stdio with raw frames, and over HTTP."""

from __future__ import annotations

import http.client
import json
import os

import pytest

from contextd.server.guard import MAX_REQUEST_BYTES, top_level_id
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
    proc, _ = _start_raw(tmp_path, monkeypatch)
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
        status, body = _post_bytes(port, json.dumps(HTTP_INITIALIZE).encode())
        assert status == 200 and proc.poll() is None
    assert "Traceback" not in (tmp_path / "server.log").read_text()
