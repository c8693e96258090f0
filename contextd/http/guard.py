"""The service's gate, in front of every endpoint (the MCP one included): the Host and Origin
of the request, API keys, scopes, rate limits and the request-size limit, each refused with
a structured JSON error.

On loopback without keys any web page the user opens can make the browser call the service.
So there every request must name a loopback host in ``Host`` (a DNS-rebinding page's requests
carry the attacker's host name: 421, as the MCP SDK answers on ``/mcp``) and carry no foreign
``Origin`` (403). Together with the exact ``application/json`` media type the JSON routes
demand (a cross-site page can only send it after a CORS preflight, which the service never
grants), no other site can read from or write to it.

A pure ASGI middleware rather than a Starlette one, so it also guards the MCP endpoint's
streaming responses and wraps the request body as it is read (a body without a
Content-Length is counted as it arrives).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from contextd.http.keys import KeyRing

# Endpoints anyone may call; every other path needs the scope it is listed with, or read.
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json"})
WRITE_PATHS = ("/add_context", "/delete_context", "/backup", "/mcp")


def required_scope(path: str) -> str | None:
    """The scope a path needs: None (public), ``read`` or ``write``. The MCP endpoint needs
    write: its tools include refresh and rebuild."""
    if path in PUBLIC_PATHS:
        return None
    return "write" if path.startswith(WRITE_PATHS) else "read"


async def send_error(send: Any, status: int, code: str, message: str,
                     details: list | None = None, headers: dict[str, str] | None = None
                     ) -> None:
    """One JSON error response: ``{"error": {"code", "message", "details"?}}``."""
    error: dict[str, Any] = {"code": code, "message": message}
    if details:
        error["details"] = details
    body = json.dumps({"error": error}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class RateLimiter:
    """A token bucket per caller: ``rate`` requests per second, ``burst`` at once."""

    def __init__(self, rate: float, burst: int):
        self.rate = rate
        self.burst = burst
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, caller: str) -> float:
        """0 when the request may go, else the seconds until it could."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(caller, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            if tokens >= 1.0:
                self._buckets[caller] = (tokens - 1.0, now)
                return 0.0
            self._buckets[caller] = (tokens, now)
            return (1.0 - tokens) / self.rate


class BodyTooLarge(Exception):
    """The request body passed the limit while it was read."""


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


class SiteCheck:
    """Which ``Host`` and ``Origin`` headers a loopback service accepts: the loopback names
    and the host it was bound to, on any port."""

    def __init__(self, bound_host: str):
        bound = bound_host.strip("[]").lower()
        self.names = frozenset({*LOOPBACK_NAMES, f"[{bound}]" if ":" in bound else bound})

    def refusal(self, headers: dict[str, str]) -> tuple | None:
        """The error to answer, or None when the request may go on."""
        host = headers.get("host", "")
        if _host_name(host) not in self.names:
            return (421, "misdirected_request", f"Host {host or '(none)'!r} is not this "
                    "service: on loopback it answers only to 127.0.0.1, localhost or [::1]")
        origin = headers.get("origin")
        if origin is not None:
            scheme, _, rest = origin.partition("://")
            if scheme.lower() not in ("http", "https") or _host_name(rest) not in self.names:
                return (403, "foreign_origin", f"requests from {origin!r} are refused: the "
                        "service answers no other site")
        return None


def _host_name(host: str) -> str:
    """``host[:port]`` without the port, lower case (IPv6 names keep their brackets)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[:host.find("]") + 1] if "]" in host else host
    name, _, port = host.partition(":")
    return name if port.isdigit() or not port else host


class Guard:
    """ASGI middleware: check the site, authenticate, authorise, rate-limit and bound the
    body."""

    def __init__(self, app: Any, keyring: KeyRing, *, keys_required: bool, max_body: int,
                 limiter: RateLimiter, site: SiteCheck | None = None):
        self.app = app
        self.site = site
        self.keyring = keyring
        self.keys_required = keys_required
        self.max_body = max_body
        self.limiter = limiter

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        needed = required_scope(scope["path"])
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        caller = (scope.get("client") or ("unknown",))[0]
        refused = self.site.refusal(headers) if self.site is not None else None
        if refused is not None:
            await send_error(send, *refused)
            return
        if needed is not None:
            outcome = self._authorise(headers, needed)
            if isinstance(outcome, tuple):
                await send_error(send, *outcome)
                return
            caller = outcome or caller
            wait = self.limiter.take(caller)
            if wait:
                await send_error(send, 429, "rate_limited",
                                 f"more than {self.limiter.rate:g} requests/s; retry later",
                                 headers={"Retry-After": str(max(1, round(wait)))})
                return
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            await send_error(send, 413, "body_too_large",
                             f"request body of {length} bytes is over the limit of "
                             f"{self.max_body} (engine.max_body_mb)")
            return
        await self._bounded(scope, receive, send)

    def _authorise(self, headers: dict[str, str], needed: str) -> str | tuple | None:
        """The caller's key id, None when no key is needed, or the error to answer."""
        auth = headers.get("authorization", "")
        if not auth:
            if not self.keys_required and not self.keyring.keys():
                return None
            return (401, "missing_key", "this service needs an API key: send "
                    "'Authorization: Bearer <key>' (contextd keys create)",
                    None, {"WWW-Authenticate": "Bearer"})
        scheme, _, token = auth.partition(" ")
        key = self.keyring.check(token.strip()) if scheme.lower() == "bearer" else None
        if key is None:
            return (401, "invalid_key", "the API key is not valid (revoked, mistyped, or "
                    "not a Bearer token)", None, {"WWW-Authenticate": "Bearer"})
        if not key.allows(needed):
            return (403, "forbidden", f"key {key.key_id} is {key.scope}-only; this endpoint "
                    f"needs {needed}")
        return key.key_id

    async def _bounded(self, scope: dict, receive: Any, send: Any) -> None:
        """Run the app with the body counted as it is read; 413 when it passes the limit
        before the response started."""
        seen = 0
        started = False

        async def counting_receive() -> dict:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body:
                    raise BodyTooLarge(f"request body is over the limit of {self.max_body} "
                                       "bytes (engine.max_body_mb)")
            return message

        async def tracking_send(message: dict) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge as exc:  # raised where no exception handler answers it
            if not started:
                await send_error(send, 413, "body_too_large", str(exc))
