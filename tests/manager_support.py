"""A real ``contextd ui`` process on a real repository, shared by the Index Manager tests."""

from __future__ import annotations

import contextlib
import http.client
import json
import selectors
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from test_mcp_server import REPO_FILES, make_repo, server_env

START_TIMEOUT_S = 120
# Enough small files that a rebuild runs for a few seconds (to be watched, refused a second
# time and cancelled); identical texts with no contextual prefix embed once, so the first
# index stays fast.
FILLER_FILES = 5000
# A file that is neither UTF-8 nor Windows-1252 (a Shift-JIS comment: its lead bytes 0x81-0x9F
# include ones Windows-1252 leaves undefined): recorded as a decode_error.
BAD_FILE = "src/legacy/sjis_notes.py"


def manager_repo(root: Path) -> Path:
    files = dict(REPO_FILES)
    files["context.toml"] = '[contextualizer]\nstrategy = "none"\n'
    for i in range(FILLER_FILES):
        files[f"src/generated/handler_{i}.py"] = \
            'def handle():\n    """Handle one request."""\n    return 1\n'
    make_repo(root, files)
    (root / BAD_FILE).parent.mkdir(parents=True, exist_ok=True)
    (root / BAD_FILE).write_bytes("# 注文モジュールのメモ。\n".encode("shift_jis")
                                  + b"ORDERS = ['coffee', 'tea', 'water']\n" * 5)
    return root


def send_raw(conn: http.client.HTTPConnection, method: str, path: str, data: bytes,
             headers: dict[str, str | None]) -> tuple[int, dict, bytes]:
    """One request with exactly ``headers`` (None: left out; no Host or Accept-Encoding of
    http.client's own), on a connection the caller keeps or closes."""
    conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    for name, value in {**headers, "Content-Length": str(len(data))}.items():
        if value is not None:
            conn.putheader(name, value)
    conn.endheaders(data)
    response = conn.getresponse()
    return response.status, dict(response.getheaders()), response.read()


@dataclass
class Manager:
    proc: subprocess.Popen
    url: str
    root: Path
    env: dict

    @property
    def port(self) -> int:
        return urlparse(self.url).port

    @property
    def token(self) -> str:
        return self.url.split("token=", 1)[1]

    def request(self, method: str, path: str, body: dict | bytes | None = None,
                **headers: str) -> tuple[int, dict, bytes]:
        """A raw request (``body`` as JSON, or bytes as they are); ``headers`` replace the
        defaults (a valid Host and cookie, and our Origin on a POST)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        data = body if isinstance(body, bytes) else \
            json.dumps(body).encode() if body is not None else b""
        defaults = {"Host": f"127.0.0.1:{self.port}",
                    "Cookie": f"contextd_manager={self.token}"}
        if method == "POST":
            defaults["Origin"] = f"http://127.0.0.1:{self.port}"
            defaults["Content-Type"] = "application/json"
        try:
            return send_raw(conn, method, path, data, {**defaults, **headers})
        finally:
            conn.close()

    def json(self, path: str) -> dict:
        status, _, payload = self.request("GET", path)
        assert status == 200, payload
        return json.loads(payload)

    def wait_idle(self, timeout: float = START_TIMEOUT_S) -> dict:
        """Wait until the engine is open, indexed and no job runs."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            snapshot = self.json("/api/progress")
            if snapshot.get("ready") and snapshot["state"] == "idle" and not snapshot["jobs"] \
                    and snapshot["generation"] > 0:
                return snapshot
            time.sleep(0.25)
        raise AssertionError(f"manager not idle after {timeout}s: {snapshot}")


def ui_command(root: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "contextd", "--root", str(root), "ui", *args]


def read_first_line(proc: subprocess.Popen, timeout: float = START_TIMEOUT_S) -> str:
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    if not selector.select(timeout):
        raise AssertionError("contextd ui printed no URL")
    return proc.stdout.readline().decode().strip()


@contextlib.contextmanager
def running_manager(base: Path, make_repo_at=manager_repo):
    """``contextd ui`` on a fresh repository (``make_repo_at(path)``: the shared one of
    :func:`manager_repo` by default); stopped (SIGTERM) afterwards."""
    root = make_repo_at(base / "repo")
    env = server_env(base / "run")
    proc = subprocess.Popen(ui_command(root), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=open(base / "manager.log", "w"), env=env, cwd=str(root))
    try:
        url = read_first_line(proc)
        manager = Manager(proc, url, root, env)
        manager.wait_idle()
        yield manager
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        proc.stdout.close()
