"""A per-minute rate limit for requests and tokens, shared by every thread of one embedder.

Hosted APIs publish limits per minute (requests and tokens); staying under them costs a short
wait here instead of a 429 and a backoff there. Each limit is a token bucket holding one
minute's allowance and refilled continuously, so a burst up to the limit goes at once and a
steady load is spread evenly.
"""

from __future__ import annotations

import threading
import time

SECONDS_PER_MINUTE = 60.0


class Bucket:
    """One limit: ``per_minute`` units, refilled continuously; 0 means unlimited."""

    def __init__(self, per_minute: int):
        self.capacity = float(per_minute)
        self.level = self.capacity
        self.stamp = time.monotonic()

    def delay(self, cost: float, now: float) -> float:
        """Seconds until ``cost`` units are there (0: now), after refilling up to ``now``.
        A cost above the capacity waits for a full bucket, so one huge request still goes."""
        if self.capacity <= 0:
            return 0.0
        self.level = min(self.capacity,
                         self.level + (now - self.stamp) * self.capacity / SECONDS_PER_MINUTE)
        self.stamp = now
        missing = min(cost, self.capacity) - self.level
        return max(0.0, missing) * SECONDS_PER_MINUTE / self.capacity

    def take(self, cost: float) -> None:
        if self.capacity > 0:
            self.level -= min(cost, self.capacity)


class RateLimiter:
    """Requests and tokens per minute; :meth:`acquire` blocks until both allow a request."""

    def __init__(self, requests_per_minute: int, tokens_per_minute: int):
        self._requests = Bucket(requests_per_minute)
        self._tokens = Bucket(tokens_per_minute)
        self._lock = threading.Lock()

    def acquire(self, tokens: int) -> float:
        """Wait until one request of ``tokens`` tokens may go; returns the seconds waited."""
        waited = 0.0
        while True:
            with self._lock:
                now = time.monotonic()
                # Both must allow it before either is charged, so a wait takes nothing.
                delay = max(self._requests.delay(1, now), self._tokens.delay(tokens, now))
                if delay <= 0:
                    self._requests.take(1)
                    self._tokens.take(tokens)
                    return waited
            time.sleep(delay)
            waited += delay
