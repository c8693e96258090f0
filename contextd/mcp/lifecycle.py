"""Start-up and shutdown of ``contextd serve``.

Start-up order matters for agents: the client times the handshake, so the server answers
``initialize`` and ``tools/list`` before anything heavy is imported. The election (which may
open DuckDB), the catch-up indexing and the model warm-up start in a background thread once
the first request after the handshake has been answered, or after
:data:`BACKGROUND_START_S` at the latest. (``initialize`` itself is answered before the SDK
loads, by :mod:`contextd.mcp.prelude`.)

Shutdown: the server exits with status 0 when stdin closes (the
client went away) or on SIGTERM/SIGINT, and always releases the owner lock and removes its
socket on the way out, so another process takes over at once. When stdin closes while the
server, as the index's owner, is still catching up (files to read, vectors to compute), a
background owner (``contextd owner``) takes the work over, so closing a session does not stop
the indexing the next one needs; a signal stops everything.
"""

from __future__ import annotations

import logging
import os
import signal
import sys

import anyio

from contextd.errors import ContextdError
from contextd.mcp.app import build_app
from contextd.mcp.engine_handle import EngineHandle
from contextd.mcp.guard import MAX_REQUEST_BYTES, run_stdio

log = logging.getLogger("contextd.mcp")

# The background start happens at the latest this long after the transport is up, so an
# HTTP server nobody has called yet still indexes and watches.
BACKGROUND_START_S = 2.0


def serve(root: str | None, config_path: str | None, http_port: int | None = None,
          verbose: int = 0, tools: list[str] | None = None) -> None:
    """Run the MCP server until the client goes away or a signal arrives; ``tools``: the
    tool groups to offer beside the core (None: ``[mcp] tools``)."""
    if http_port is not None:
        check_port_free(http_port)
    handle = EngineHandle(root, config_path)
    app = build_app(handle, log_level="DEBUG" if verbose > 1 else "WARNING", tools=tools)
    client_gone = False
    try:
        if http_port is None:
            anyio.run(_serve_stdio, app, handle)
            # stdin closed: the session ended, not the index's work (a signal, `contextd
            # stop` before a restore, must stop it: that path never comes here).
            client_gone = True
        else:
            anyio.run(_serve_http, app, handle, http_port)
    finally:
        handle.close(hand_off=client_gone)


def check_port_free(port: int, host: str = "127.0.0.1") -> None:
    """Refuse a port something already listens on, in one line, before anything starts
    (uvicorn would log a traceback and the process would linger on its shutdown)."""
    import errno
    import socket

    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
    try:
        probe.bind((host, port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise ContextdError(f"port {port} on {host} is already in use (another contextd "
                                "serve --http?); choose another with --http PORT") from None
        raise ContextdError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    finally:
        probe.close()


async def _start_later(handle: EngineHandle) -> None:
    await anyio.sleep(BACKGROUND_START_S)
    handle.start()


async def _serve_stdio(app, handle: EngineHandle) -> None:
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_start_later, handle)
        tasks.start_soon(_exit_on_signal, handle)
        try:
            await run_stdio(app)
        except* (BrokenPipeError, ConnectionResetError):
            log.info("contextd serve: the client went away")
        tasks.cancel_scope.cancel()


async def _exit_on_signal(handle: EngineHandle) -> None:
    """SIGTERM/SIGINT: release the lock and the socket, then exit (0 on SIGTERM, the normal
    way to stop a server; 130 and "interrupted" on Ctrl-C, like every command). The SDK
    reads stdin in a worker thread that cannot be interrupted, so waiting for the transport
    to wind down would wait for input that never comes; everything worth keeping is closed
    first."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("contextd serve: signal %d, shutting down", signum)
            await anyio.to_thread.run_sync(handle.close)
            if signum == signal.SIGINT:
                sys.stderr.write("contextd: interrupted\n")
            sys.stderr.flush()
            os._exit(130 if signum == signal.SIGINT else 0)


async def _serve_http(app, handle: EngineHandle, port: int) -> None:
    """Streamable HTTP on 127.0.0.1 only, with DNS-rebinding protection: a web page cannot
    reach the server through a hostname that resolves to localhost. uvicorn handles the
    signals itself and returns, after which :func:`serve` closes the engine."""
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    local = ("127.0.0.1", "localhost", "[::1]")
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{host}:*" for host in local] + list(local),
        allowed_origins=[f"http://{host}:*" for host in local]
        + [f"http://{host}" for host in local])
    starlette_app = app.streamable_http_app(transport_security=security, host="127.0.0.1",
                                            max_request_body_size=MAX_REQUEST_BYTES)
    config = uvicorn.Config(starlette_app, host="127.0.0.1", port=port, log_config=None,
                            access_log=False, log_level="warning", lifespan="on")
    await run_uvicorn(config, handle)


async def run_uvicorn(config, handle: EngineHandle) -> None:
    """Serve a uvicorn config until SIGTERM/SIGINT, starting the engine in the background
    (``contextd serve --http`` and the standalone service ``contextd server``)."""
    import uvicorn

    # uvicorn re-raises the signal that stopped it once it has shut down, which would kill
    # the process before serve() closes the engine (owner lock and socket): while it runs,
    # the handlers it restores and then invokes do nothing.
    previous = {sig: signal.signal(sig, lambda *_: None)
                for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_start_later, handle)
            await uvicorn.Server(config).serve()
            tasks.cancel_scope.cancel()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
