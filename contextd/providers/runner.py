"""Run several providers at once, each under its own time limit, failures isolated.

Providers run on a shared pool of long-lived threads (the store keeps one database cursor per
thread, so fresh threads per query would pay for new cursors every time). A provider that
raises is reported and skipped; one that hangs is abandoned when its ``timeout_ms`` passes —
Python cannot kill a thread, so it keeps one pool thread until it returns, and the pool is
sized so that a few hung plugins still leave room for everyone else. Either way the other
providers' answers are used: one bad plugin never breaks a query.

Providers that answer from memory with nothing to catch up on (``answers_from_memory``: the
built-in semantic, symbol and full-text providers on a warm index) run on the caller's thread
instead, while the pooled ones work: a hand-off to a pool thread and back costs a few
milliseconds on a loaded 2-core machine, more than their whole answer. Their exceptions are
isolated the same way.

A provider's ``timeout_ms`` bounds its answer, not the loading of its index: before the timers
start, every provider with something to catch up on (``catch_up``: a never-queried index, a
backlog of written files) does so, in parallel, bounded only by :data:`CATCH_UP_LIMIT_S`. Were
the loading timed, a cold first query on a large project would drop its full-text results
("timed out after 2000 ms" while BM25 was still being built) and answer from whatever was left.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from contextd.providers.base import ProviderQuery
from contextd.query.left_out import LEFT_OUT_NOTE
from contextd.records import ContextScope, ContextSnippet, TokenBudget

log = logging.getLogger(__name__)

POOL_THREADS = 32
# The longest the providers' catch-up may take before the query goes on without the ones not
# done: only a plugin that never returns reaches it (loading a 100k-chunk index takes seconds).
CATCH_UP_LIMIT_S = 120.0

_pool_lock = threading.Lock()
_pool: concurrent.futures.ThreadPoolExecutor | None = None


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(POOL_THREADS,
                                                          thread_name_prefix="contextd-provider")
        return _pool


def left_out_notes(runs: "dict[str, ProviderRun]") -> list[str]:
    """A note per provider whose run failed."""
    return [LEFT_OUT_NOTE.format(pid, run.error) for pid, run in runs.items() if run.error]


@dataclass
class ProviderRun:
    """What one provider did for one query."""

    provider_id: str
    snippets: list[ContextSnippet] = field(default_factory=list)
    elapsed_ms: float = 0.0
    error: str | None = None
    # Time its catch-up took first (loading its index in a cold process, taking in changes).
    load_ms: float = 0.0


def _timed(provider: Any, query: ProviderQuery, scope: ContextScope, budget: TokenBudget
           ) -> ProviderRun:
    begin = time.perf_counter()
    run = ProviderRun(provider.id)
    try:
        own_query = query.for_kind(getattr(provider, "type", None))
        run.snippets = list(provider.query(own_query, scope, budget))
    except Exception as exc:  # isolation: a plugin's bug must not break the query
        run.error = f"{type(exc).__name__}: {exc}"
        log.warning("provider %s failed: %s", provider.id, run.error)
    run.elapsed_ms = (time.perf_counter() - begin) * 1000
    return run


def _in_memory(provider: Any, generation: int | None) -> bool:
    """Whether the provider says it answers from memory (duck-typed plugins may not say)."""
    check = getattr(provider, "answers_from_memory", None)
    try:
        return bool(check(generation)) if check is not None else False
    except Exception:  # a plugin's bug here only costs it the fast path
        return False


def _timed_catch_up(provider: Any, generation: int | None) -> float:
    begin = time.perf_counter()
    provider.catch_up(generation)
    return (time.perf_counter() - begin) * 1000


def _catch_up(providers: Sequence[Any], generation: int | None
              ) -> tuple[dict[str, ProviderRun], dict[str, float]]:
    """Let the providers that are behind the store catch up, in parallel: a failed run per
    provider that raised or did not finish within :data:`CATCH_UP_LIMIT_S`, and the ms each
    of the others took."""
    behind = [p for p in providers
              if hasattr(p, "catch_up") and not _in_memory(p, generation)]
    if not behind:
        return {}, {}
    started = time.perf_counter()
    futures = {p.id: _executor().submit(_timed_catch_up, p, generation) for p in behind}
    failed, loads = {}, {}
    for provider_id, future in futures.items():
        left = max(0.0, CATCH_UP_LIMIT_S - (time.perf_counter() - started))
        try:
            loads[provider_id] = future.result(left)
        except concurrent.futures.TimeoutError:
            failed[provider_id] = ProviderRun(
                provider_id, elapsed_ms=CATCH_UP_LIMIT_S * 1000,
                error=f"its index was still loading after {CATCH_UP_LIMIT_S:.0f} s")
        except Exception as exc:  # isolation, as for query()
            failed[provider_id] = ProviderRun(provider_id,
                                              error=f"{type(exc).__name__}: {exc}")
    for run in failed.values():
        log.warning("provider %s left out: %s", run.provider_id, run.error)
    return failed, loads


def run_providers(providers: Sequence[Any], query: ProviderQuery | str, scope: ContextScope,
                  budget: TokenBudget, timeout_ms: Callable[[str], int]
                  ) -> dict[str, ProviderRun]:
    """Query ``providers`` in parallel, each with the text meant for its kind
    (:meth:`ProviderQuery.for_kind`); a run per provider id, in the given order."""
    query = ProviderQuery.of(query)
    generation = query.generation
    failed, loads = _catch_up(providers, generation)
    started = time.perf_counter()
    live = [p for p in providers if p.id not in failed]
    inline = [p for p in live if _in_memory(p, generation)]
    pooled = [p for p in live if p not in inline]
    futures = {p.id: _executor().submit(_timed, p, query, scope, budget) for p in pooled}
    done = {p.id: _timed(p, query, scope, budget) for p in inline}
    runs = {}
    for provider_id, future in futures.items():
        limit_s = timeout_ms(provider_id) / 1000
        try:
            runs[provider_id] = future.result(max(0.0, limit_s - (time.perf_counter() - started)))
        except concurrent.futures.TimeoutError:
            runs[provider_id] = ProviderRun(provider_id, elapsed_ms=limit_s * 1000,
                                            error=f"timed out after {limit_s * 1000:.0f} ms")
            log.warning("provider %s timed out after %.0f ms", provider_id, limit_s * 1000)
    runs.update(done)
    runs.update(failed)
    for provider_id, load_ms in loads.items():
        runs[provider_id].load_ms = load_ms
    return {p.id: runs[p.id] for p in providers}
