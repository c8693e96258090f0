"""A small Python client of the standalone service (``contextd server``).

    from contextd.runtime.service_client import ServiceClient
    client = ServiceClient("http://127.0.0.1:9090", api_key="ctxd_...")
    answer = client.query_context("where are tokens refreshed", k=5)

Timeouts and retries come from ``[engine]`` (:meth:`ServiceClient.from_config`): each request
waits ``timeout_ms``; a request that cannot connect, times out, or gets 502/503/504 (a
service restarting, a proxy without upstream) is retried ``retry_attempts`` times, waiting
``backoff_ms`` and doubling. Every endpoint is idempotent (adding the same content twice
indexes it once), so a retry after a lost answer is safe. Other errors raise
:class:`ServiceError` with the service's message, at once.

Uses ``httpx2`` (the HTTP client the MCP SDK depends on, so no extra package); it does not
import DuckDB or the model, which is what lets standalone mode keep them out of the caller.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import httpx2

from contextd.errors import ContextdError

log = logging.getLogger("contextd.runtime.service_client")

RETRY_STATUSES = frozenset({502, 503, 504})


class ServiceError(ContextdError):
    """The service refused or failed a request (``status``, ``code`` from its JSON error),
    or could not be reached at all (``status`` 0) after every retry."""

    def __init__(self, message: str, status: int = 0, code: str = "unreachable"):
        super().__init__(message)
        self.status = status
        self.code = code


class ServiceClient:
    """The JSON API of one service, with timeouts and retries. Thread-safe."""

    def __init__(self, url: str, api_key: str | None = None, *, timeout_s: float = 5.0,
                 retries: int = 3, backoff_s: float = 0.2):
        self.url = url.rstrip("/")
        self.retries = retries
        self.backoff_s = backoff_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx2.Client(base_url=self.url, timeout=timeout_s, headers=headers)

    @classmethod
    def from_config(cls, config: Any) -> "ServiceClient":
        """A client as ``[engine]`` says: url (or http://host:port), the key from the
        environment variable ``api_key_env``, timeout_ms, retry_attempts, backoff_ms."""
        engine = config.engine
        host = f"[{engine.host}]" if ":" in engine.host else engine.host
        url = engine.url or f"http://{host}:{engine.port}"
        key = os.environ.get(engine.api_key_env) if engine.api_key_env else None
        return cls(url, key or None, timeout_s=engine.timeout_ms / 1000,
                   retries=engine.retry_attempts, backoff_s=engine.backoff_ms / 1000)

    # ----- endpoints -------------------------------------------------------------------
    def add_context(self, file_path: str, content: str | None = None, lang: str | None = None,
                    mime: str | None = None) -> dict[str, Any]:
        body = {"file_path": file_path, "content": content, "lang": lang, "mime": mime}
        return self._request("POST", "/add_context", {k: v for k, v in body.items()
                                                      if v is not None})

    def query_context(self, q: str, k: int | None = None, filters: dict[str, Any] | None = None,
                      mmr_lambda: float | None = None, budget: int | None = None
                      ) -> dict[str, Any]:
        body = {"q": q, "k": k, "filters": filters, "mmr_lambda": mmr_lambda, "budget": budget}
        return self._request("POST", "/query_context", {k_: v for k_, v in body.items()
                                                        if v is not None})

    def stats(self) -> dict[str, Any]:
        return self._request("GET", "/stats")

    def ready(self) -> bool:
        """Whether the service answers /readyz with 200 (one try, no retries)."""
        try:
            return self._http.get("/readyz").status_code == 200
        except httpx2.HTTPError:
            return False

    # ----- transport -------------------------------------------------------------------
    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        delay = self.backoff_s
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = self._http.request(method, path, json=body)
            except httpx2.HTTPError as exc:  # refused, reset, timed out
                if last:
                    raise ServiceError(f"contextd service at {self.url} is unreachable "
                                       f"({type(exc).__name__}: {exc}) after "
                                       f"{self.retries + 1} attempt(s)") from None
            else:
                if response.status_code < 400:
                    return response.json()
                if response.status_code not in RETRY_STATUSES or last:
                    raise self._error(response)
            log.debug("service %s %s: retrying in %.2f s", method, path, delay)
            time.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

    @staticmethod
    def _error(response: Any) -> ServiceError:
        try:
            error = response.json().get("error") or {}
        except ValueError:
            error = {}
        message = error.get("message") or response.text[:200] or response.reason_phrase
        return ServiceError(f"contextd service: {message} (HTTP {response.status_code})",
                            response.status_code, error.get("code", "http_error"))

    def close(self) -> None:
        self._http.close()
