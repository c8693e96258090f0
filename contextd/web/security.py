"""What keeps other sites and other users out of the Index Manager.

The app listens on 127.0.0.1 only, but any web page the user opens can make the browser
send requests there. So every request must:

* name the manager itself in ``Host`` (``127.0.0.1:PORT`` or ``localhost:PORT``): a DNS
  rebinding page's requests carry its own host name;
* carry no foreign ``Origin``, and a state-changing request (POST) must carry ours: a
  cross-site form or fetch says where it comes from;
* prove it knows the per-start token: ``?token=`` on the URL that ``contextd ui`` prints,
  which sets an HttpOnly, SameSite=Strict cookie (so a cross-site request never carries it),
  then the cookie. The token is never logged.
"""

from __future__ import annotations

import hmac
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, urlencode

COOKIE = "contextd_manager"
_UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}


class ManagerGuard:
    """ASGI middleware enforcing the rules above for every HTTP request."""

    def __init__(self, app, token: str, port: int):
        self.app = app
        self.token = token
        self.hosts = {f"127.0.0.1:{port}", f"localhost:{port}"}
        self.origins = {f"http://{host}" for host in self.hosts}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", ())}
        if headers.get("host", "") not in self.hosts:
            return await _refuse(send, 403, "unknown host: open the URL contextd ui printed")
        origin = headers.get("origin")
        if origin is not None and origin not in self.origins:
            return await _refuse(send, 403, "cross-site request refused")
        if scope["method"] in _UNSAFE and origin is None:
            return await _refuse(send, 403, "a request that changes things must come from "
                                            "the Index Manager's own pages")
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        offered = query.get("token", [None])[0]
        if offered is not None and _same_token(offered, self.token):
            if scope["method"] == "GET":
                return await _enter(send, scope["path"], query)
            return await self.app(scope, receive, send)
        cookie = SimpleCookie(headers.get("cookie", ""))
        held = cookie[COOKIE].value if COOKIE in cookie else ""
        if not _same_token(held, self.token):
            return await _refuse(send, 403, "missing or wrong token: open the full URL that "
                                            "`contextd ui` printed (token included)")
        return await self.app(scope, receive, send)


def _same_token(offered: str, token: str) -> bool:
    """Constant-time comparison of bytes: ``hmac.compare_digest`` raises TypeError for a
    ``str`` with non-ASCII characters, which answered a ``?token=été`` with a 500 instead
    of the refusal any wrong token gets."""
    return hmac.compare_digest(offered.encode("utf-8"), token.encode("utf-8"))


async def _enter(send, path: str, query: dict[str, list[str]]) -> None:
    """A valid ``?token=``: set the cookie and redirect to the same page without the token,
    so it does not stay in the address bar or the history."""
    rest = {k: v for k, v in query.items() if k != "token"}
    location = path + (f"?{urlencode(rest, doseq=True)}" if rest else "")
    token = query["token"][0]
    await send({"type": "http.response.start", "status": 303, "headers": [
        (b"location", location.encode("latin-1")),
        (b"set-cookie", f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict".encode()),
        (b"cache-control", b"no-store")]})
    await send({"type": "http.response.body", "body": b""})


async def _refuse(send, status: int, message: str) -> None:
    body = f"contextd Index Manager: {message}\n".encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
