"""The result records of the reporting operations (:mod:`contextd.operations.activity`), read
by attribute on every surface: the CLI's ``stats``, get_context_stats, ``GET /stats`` and the
Index Manager's pages (its Savings page reads :class:`UsageSavings`). Their inner figures come from the store, the indexer and the embedder
as those report them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class EngineStats:
    """The ``stats`` operation: providers (id, name, type, enabled, available), the store's
    figures (``storage``: files, chunks, documents, size, skipped files by reason and a few
    of them), average latencies per provider (``performance``), chunks per language, the
    contextual prefixes, the embedding backend, indexing progress with its problem files and
    current job, the five latest jobs and the process holding the index (``owner``)."""

    providers: tuple[dict[str, Any], ...] = ()
    storage: dict[str, Any] = field(default_factory=dict)
    cache_hit_rate: float | None = None
    performance: dict[str, Any] = field(default_factory=dict)
    languages: dict[str, int] = field(default_factory=dict)
    contextualizer: dict[str, Any] = field(default_factory=dict)
    embedding: dict[str, Any] = field(default_factory=dict)
    indexing: dict[str, Any] = field(default_factory=dict)
    recent_jobs: tuple[dict[str, Any], ...] = ()
    owner: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class IndexActivity:
    """The ``progress`` operation: the indexer's state (``idle``, ``indexing``,
    ``embedding``...), the store's generation (it moves with every write), the queued and
    running jobs, the background embedding's figures while it runs, and the chunks still
    waiting for a vector when asked for."""

    state: str
    generation: int
    jobs: tuple[dict[str, Any], ...] = ()
    embedding: dict[str, Any] | None = None
    embeddings_pending: int | None = None


@dataclass(frozen=True)
class UsageSavings:
    """The ``savings`` operation over the last ``days`` days: answers given, the tokens they
    served against the tokens of the whole files those came from (overall, ``per_day`` and
    ``per_task``: day or task_id, queries, tokens_served, source_tokens), latency
    percentiles (p50, p95, p99 in ms), how often each provider's hits were chosen
    (``providers``: provider, selected, selection_rate, avg_score) and the embedding cache
    over recent indexing runs (reused, embedded, hit_rate)."""

    days: int
    queries: int
    tokens_served: int
    source_tokens: int
    latency_ms: dict[str, float | None] = field(default_factory=dict)
    per_day: tuple[dict[str, Any], ...] = ()
    per_task: tuple[dict[str, Any], ...] = ()
    providers: tuple[dict[str, Any], ...] = ()
    embedding_cache: dict[str, Any] = field(default_factory=dict)
