"""``contextd server``: start-up checks and the uvicorn run of the standalone service.

Listening policy: on a loopback address the service answers without a key as long as no key
exists (one developer's machine, like ``serve --http``); once a key exists every call needs
one. Any other address refuses to start until keys exist, and then always asks for one.
TLS: ``[engine] tls_cert``/``tls_key`` make uvicorn serve HTTPS; or put the service behind a
TLS-terminating proxy (docs/SERVICE.md).
"""

from __future__ import annotations

import ipaddress
import logging
import socket

import anyio

from contextd.errors import ContextdError
from contextd.config.project import Project

log = logging.getLogger("contextd.http")


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` names is a loopback one."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)


def serve_service(root: str | None, config_path: str | None, host: str | None,
                  port: int | None, verbose: int = 0) -> None:
    """Run the service until SIGTERM/SIGINT; the engine (owner lock, socket) is closed on
    the way out."""
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    from contextd.mcp.app import build_app
    from contextd.mcp.engine_handle import EngineHandle
    from contextd.mcp.lifecycle import run_uvicorn
    from contextd.http.app import build_service
    from contextd.http.guard import LOOPBACK_NAMES, SiteCheck
    from contextd.http.keys import KeyRing

    project = Project.open(root, config_path)
    engine_cfg = project.config.engine
    host = host or engine_cfg.host
    port = port or engine_cfg.port
    keyring = KeyRing.of(project)
    loopback = is_loopback(host)
    if not loopback and not keyring.keys():
        raise ContextdError(f"refusing to listen on {host} without API keys: anyone who can "
                            "reach it could read the index; create one with `contextd keys "
                            "create NAME`, or listen on 127.0.0.1")
    handle = EngineHandle(str(project.root), config_path)
    mcp = build_app(handle, log_level="DEBUG" if verbose > 1 else "WARNING")
    if loopback:
        local = LOOPBACK_NAMES
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[f"{h}:*" for h in local] + list(local),
            allowed_origins=[f"{scheme}://{h}:*" for h in local for scheme in ("http", "https")])
    else:  # every call carries a key: a rebinding page cannot forge one
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    mcp_app = mcp.streamable_http_app(transport_security=security, host=host)
    app = build_service(handle, mcp_app, keyring, keys_required=not loopback,
                        max_body=int(engine_cfg.max_body_mb * 1024 * 1024),
                        rate=engine_cfg.rate_limit_per_s, burst=engine_cfg.rate_limit_burst,
                        query_slots=engine_cfg.max_concurrent_queries,
                        site=SiteCheck(host) if loopback else None)
    tls = {"ssl_certfile": engine_cfg.tls_cert, "ssl_keyfile": engine_cfg.tls_key} \
        if engine_cfg.tls_cert else {}
    config = uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False,
                            log_level="warning", lifespan="on", **tls)
    handle.start()
    scheme = "https" if tls else "http"
    log.warning("contextd server: %s://%s:%d (keys %s)", scheme, host, port,
                "required" if not loopback or keyring.keys() else "not required on loopback")
    try:
        anyio.run(run_uvicorn, config, handle)
    finally:
        handle.close()
