"""``contextd ui``: start the Index Manager of a project and serve it until interrupted.

The process binds 127.0.0.1 (a free port unless one is configured), prints its full URL
(token included) as the first line of stdout, records itself in the registry, and opens the
project's engine in the background through :mod:`contextd.runtime.owner` (becoming the owner, with
the catch-up and the watcher, or a client of the running one). One manager per project: a
second ``contextd ui`` prints the running one's URL instead of starting another.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import socket
import sys
import webbrowser
from datetime import datetime, timezone
from typing import TextIO

from contextd.errors import ContextdError
from contextd.config.project import Project
from contextd.crypto import side_file
from contextd.web import registry

log = logging.getLogger("contextd.web")


def bind_loopback(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1 (never another address): the port asked for, or a
    free one for 0. A busy port is one clear error."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        raise ContextdError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}; choose "
                            "another port with --port (0 = any free port)") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def run_manager(project: Project, config_path: str | None, port: int | None = None,
                open_browser: bool | None = None, out: TextIO | None = None) -> None:
    """Serve the Index Manager of ``project`` until SIGINT/SIGTERM."""
    out = out or sys.stdout
    settings = project.config.ui
    wid = registry.workspace_id(project.root)
    running = registry.find(wid)
    if running is not None:
        out.write(running.url + "\n")
        out.flush()
        log.warning("the Index Manager of %s already runs (pid %d)", project.root, running.pid)
        if open_browser if open_browser is not None else settings.open_browser:
            webbrowser.open(running.url)
        return
    sock = bind_loopback(settings.port if port is None else port)
    actual = sock.getsockname()[1]
    token = secrets.token_urlsafe(24)
    url = f"http://127.0.0.1:{actual}/?token={token}"
    from contextd.mcp.engine_handle import EngineHandle
    from contextd.web.app import build_app
    from contextd.web.feed import ProgressFeed

    handle = EngineHandle(str(project.root), config_path)
    feed = ProgressFeed(handle, side_file(project, "progress.jsonl"),
                        settings.progress_log_lines)
    app = build_app(handle, feed, token, actual, str(project.root))
    with _StopSignals() as stop:
        handle.start()
        out.write(url + "\n")
        out.flush()
        registry.register(registry.ManagerEntry(
            workspace_id=wid, root=str(project.root), pid=os.getpid(), port=actual, url=url,
            started_at=datetime.now(timezone.utc).isoformat(timespec="seconds")))
        try:
            feed.start()
            if open_browser if open_browser is not None else settings.open_browser:
                webbrowser.open(url)
            _serve(app, sock, stop)
        finally:
            feed.stop()
            registry.unregister(wid, os.getpid())
            handle.close()


class _StopSignals:
    """SIGINT and SIGTERM end the manager with exit status 0, whenever they arrive: before
    uvicorn runs (the URL is out, the engine opening), while it runs (it stops gracefully),
    or as uvicorn re-raises them after its shutdown, which would otherwise kill the process
    before the engine (owner lock, socket) is closed."""

    def __init__(self) -> None:
        self.requested = False
        self.server = None
        self._previous: dict = {}

    def __enter__(self) -> "_StopSignals":
        self._previous = {sig: signal.signal(sig, self._handle)
                          for sig in (signal.SIGTERM, signal.SIGINT)}
        return self

    def _handle(self, signum, frame) -> None:
        self.requested = True
        if self.server is not None:
            self.server.should_exit = True

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def _serve(app, sock: socket.socket, stop: _StopSignals) -> None:
    import uvicorn

    config = uvicorn.Config(app, log_config=None, access_log=False, log_level="warning",
                            lifespan="on", timeout_graceful_shutdown=2)
    stop.server = uvicorn.Server(config)
    try:
        if not stop.requested:
            stop.server.run(sockets=[sock])
    finally:
        sock.close()
