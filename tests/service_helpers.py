"""Helpers of the standalone-service tests: a project on disk and ``contextd server`` as a
real subprocess, waited for until its index is built."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2

READY_TIMEOUT_S = 120  # a loaded two-core machine: imports and the first index take a while

PROJECT_FILES = {
    "auth/tokens.py": (
        "def refresh_token(token):\n"
        '    """Refresh an expired JWT access token using the refresh token."""\n'
        "    return token.renew()\n"),
    "billing/invoice.py": (
        "class InvoiceTotals:\n"
        '    """Sum invoice lines, taxes and discounts."""\n'
        "    def total(self, lines):\n"
        "        return sum(line.amount for line in lines)\n"),
    "docs/backup.md": "# Backups\n\nNightly snapshots of the ledger database.\n",
}


def make_project(root: Path, config: str = "") -> Path:
    for rel, text in PROJECT_FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "context.toml").write_text(config)
    return root


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def env_for(runtime: Path, **extra: str) -> dict[str, str]:
    """One private owner-socket directory per test."""
    runtime.mkdir(exist_ok=True)
    return {**os.environ, "XDG_RUNTIME_DIR": str(runtime), **extra}


def cli(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), *args],
                          capture_output=True, text=True, env=env, timeout=300)


class Server:
    """``contextd server`` on a free port; :meth:`wait_indexed` blocks until it answers."""

    def __init__(self, root: Path, env: dict[str, str], port: int | None = None,
                 key: str | None = None):
        self.root = root
        self.env = env
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.key = key
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Server":
        self.log = Path(self.env["XDG_RUNTIME_DIR"]) / f"server-{self.port}.log"
        with open(self.log, "ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "contextd", "--root", str(self.root), "server",
                 "--port", str(self.port)], stdout=subprocess.DEVNULL, stderr=err,
                env=self.env)
        return self

    def wait_indexed(self, files: int = len(PROJECT_FILES)) -> "Server":
        headers = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()
            with contextlib.suppress(httpx2.HTTPError):
                stats = httpx2.get(f"{self.url}/stats", headers=headers, timeout=30)
                if stats.status_code == 200:
                    indexing = stats.json()["indexing"]
                    if indexing["state"] == "idle" and indexing["files_indexed"] >= files \
                            and not indexing["embeddings_pending"]:
                        return self
            time.sleep(0.3)
        raise AssertionError(f"server not ready after {READY_TIMEOUT_S}s")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def create_key(root: Path, env: dict[str, str], name: str, scope: str) -> str:
    done = cli(root, env, "--json", "keys", "create", name, "--scope", scope)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["key"]


@contextlib.contextmanager
def running_server(base: Path, config: str):
    """A server on a fresh project under ``base``, indexed; stopped cleanly afterwards."""
    root = make_project(base / "proj", config)
    server = Server(root, env_for(base / "run")).start()
    try:
        yield server.wait_indexed()
    finally:
        assert server.stop() == 0
