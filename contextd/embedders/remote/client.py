"""One HTTP request to an embedding server, retried until it succeeds or fails for good.

Retried (exponential backoff with jitter, ``Retry-After`` honoured): 408, 429 and 5xx
answers, timeouts, refused connections and connections dropped mid-request. Not retried,
because waiting cannot fix them: a rejected key (401/403), an unknown model or URL (404), a
refused request (other 4xx). Each failure becomes one :class:`RemoteEmbeddingError` line that
says what to change. The connection pool keeps connections alive between requests (TLS and
TCP set-up cost more than a small batch's embedding on a GPU server).
"""

from __future__ import annotations

import email.utils
import logging
import random
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

import httpx2

from contextd.embedders.remote.protocols import Answer, Protocol
from contextd.embedders.remote.ratelimit import RateLimiter
from contextd.errors import RemoteEmbeddingError

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 30.0
# A server asking for a longer pause than this is treated as down for now.
RETRY_AFTER_CAP_S = 120.0
CONNECT_TIMEOUT_S = 10.0
DETAIL_CHARS = 200


@dataclass
class RemoteCounters:
    """What an embedder's requests cost so far (stats, progress, the cost counter).

    ``tokens`` is what the server reported (estimated where it reports nothing);
    ``rate_limit_waits``/``rate_limit_wait_s`` count pauses for the configured per-minute
    limits and for the server's 429 answers; ``busy_s`` is wall time spent inside ``embed``
    calls, so ``texts / busy_s`` is the remote throughput."""

    requests: int = 0
    texts: int = 0
    tokens: int = 0
    retries: int = 0
    rate_limit_waits: int = 0
    rate_limit_wait_s: float = 0.0
    failures: int = 0
    busy_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["rate_limit_wait_s"] = round(self.rate_limit_wait_s, 3)
        data["busy_s"] = round(self.busy_s, 3)
        data["texts_per_second"] = round(self.texts / self.busy_s, 1) if self.busy_s else None
        return data


class Transient(Exception):
    """A failure worth retrying; ``wait`` is the server's Retry-After in seconds, if any."""

    def __init__(self, message: str, wait: float | None = None, rate_limited: bool = False):
        super().__init__(message)
        self.wait = wait
        self.rate_limited = rate_limited


def retry_after(value: str | None) -> float | None:
    """Seconds a ``Retry-After`` header asks for (delta-seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - time.time())


def backoff(attempt: int) -> float:
    """Exponential backoff with "equal jitter": half the step fixed, half random, so many
    clients retrying at once spread out but none retries immediately."""
    step = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** attempt)
    return step / 2 + random.uniform(0, step / 2)


def _detail(response: httpx2.Response) -> str:
    """The server's own error message, on one line, shortened."""
    try:
        payload = response.json()
    except ValueError:
        text = response.text
    else:
        error = payload.get("error", payload) if isinstance(payload, dict) else payload
        if isinstance(error, dict):
            error = error.get("message") or error
        text = str(error)
    text = " ".join(text.split())
    return text[:DETAIL_CHARS] + ("…" if len(text) > DETAIL_CHARS else "")


class RemoteClient:
    """Posts embedding requests for one configured endpoint; thread-safe."""

    def __init__(self, protocol: Protocol, base_url: str, model: str, api_key: str | None,
                 key_variable: str | None, concurrency: int, timeout_s: float,
                 max_retries: int, limiter: RateLimiter):
        self.protocol = protocol
        self.url = protocol.url(base_url)
        self.model = model
        self.key_variable = key_variable
        self.has_key = bool(api_key)
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.limiter = limiter
        self.counters = RemoteCounters()
        self.counters_lock = threading.Lock()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx2.Client(
            headers=headers,
            timeout=httpx2.Timeout(timeout_s, connect=min(CONNECT_TIMEOUT_S, timeout_s)),
            limits=httpx2.Limits(max_connections=concurrency,
                                 max_keepalive_connections=concurrency))

    def count(self, **deltas: float) -> None:
        with self.counters_lock:
            for name, delta in deltas.items():
                setattr(self.counters, name, getattr(self.counters, name) + delta)

    def embed(self, texts: list[str], estimated_tokens: int) -> Answer:
        """The server's vectors of ``texts``, retrying transient failures; raises
        RemoteEmbeddingError when it fails for good."""
        last, tries = "", 0
        for attempt in range(self.max_retries + 1):
            tries = attempt + 1
            waited = self.limiter.acquire(estimated_tokens)
            if waited:
                self.count(rate_limit_waits=1, rate_limit_wait_s=waited)
            try:
                answer = self._post(texts)
            except Transient as exc:
                last = str(exc)
                if attempt == self.max_retries:
                    break
                pause = exc.wait if exc.wait is not None else backoff(attempt)
                if pause > RETRY_AFTER_CAP_S:
                    last += f", and asks to wait {pause:.0f} s"
                    break
                log.info("embedding request failed (%s); retry %d of %d in %.1f s", last,
                         attempt + 1, self.max_retries, pause)
                self.count(retries=1, **({"rate_limit_waits": 1, "rate_limit_wait_s": pause}
                                         if exc.rate_limited else {}))
                time.sleep(pause)
                continue
            except RemoteEmbeddingError:
                self.count(failures=1)
                raise
            self.count(requests=1, texts=len(texts),
                       tokens=answer.tokens if answer.tokens is not None else estimated_tokens)
            return answer
        self.count(failures=1)
        raise RemoteEmbeddingError(
            f"embedding server {self.url} failed {tries} time{'s' * (tries > 1)}: {last}")

    def _post(self, texts: list[str]) -> Answer:
        try:
            response = self._http.post(self.url, json=self.protocol.body(self.model, texts))
        except httpx2.TimeoutException:
            raise Transient(f"no answer within {self.timeout_s:g} s") from None
        except httpx2.ConnectError as exc:
            raise Transient(f"cannot connect ({exc})") from None
        except httpx2.TransportError as exc:
            raise Transient(f"connection dropped ({type(exc).__name__}: {exc})") from None
        status = response.status_code
        if status == 200:
            try:
                return self.protocol.parse(response.json(), len(texts))
            except ValueError as exc:
                raise RemoteEmbeddingError(
                    f"embedding server {self.url} answered something that is not a "
                    f"{self.protocol.kind} embeddings reply: {exc}") from None
        if status in RETRY_STATUSES:
            raise Transient(f"HTTP {status}: {_detail(response)}",
                            retry_after(response.headers.get("retry-after")),
                            rate_limited=status == 429)
        raise RemoteEmbeddingError(self._refusal(status, _detail(response)))

    def _refusal(self, status: int, detail: str) -> str:
        """The one line for an answer that retrying cannot fix."""
        where = f"embedding server {self.url}"
        if status in (401, 403):
            variable = self.key_variable or "OPENAI_COMPATIBLE_API_KEY"
            if not self.has_key:
                return (f"{where} wants an API key (HTTP {status}: {detail}); set "
                        f"${variable} in the environment or the project's .env, or name "
                        f"another variable in [embedding] api_key_env")
            return (f"{where} rejected the API key in ${variable} (HTTP {status}: {detail}); "
                    f"set a valid key there or name another variable in [embedding] "
                    f"api_key_env")
        if status == 404 or "model" in detail.lower():
            return (f"{where} does not serve model {self.model!r} (HTTP {status}: {detail}); "
                    f"check [embedding] model and base_url")
        return f"{where} refused the request (HTTP {status}: {detail})"
