"""The result records of the reporting operations (:mod:`contextd.operations.activity`), read
by attribute on every surface: the CLI's ``stats``, get_context_stats, ``GET /stats`` and the
Index Manager's pages. Their inner figures come from the store, the indexer and the embedder
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
