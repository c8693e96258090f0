"""Re-indexing with contextual prefixes as a tracked job (the MCP tool ``reindex_with_context``
and ``get_reindexing_progress``).

A re-index is a full rebuild run by :class:`contextd.runtime.jobs.JobRunner`: every file is
chunked again and prefixed by the configured contextualizer, the LLM's prefixes come from the
prefix cache where the chunk and its document did not change (so a resumed or repeated
re-index asks nothing twice), and vectors come from the embedding cache. It is resumable like
every rebuild. The seed's knobs are settings of contextd: the strategy and LLM provider
(``[contextualizer] strategy``, ``llm_api``) must be those of the configuration, because the
indexer prefixes every later edit with them; ``batch_size`` and ``max_workers`` are
``[embedding] batch_size`` and ``[contextualizer] llm_concurrency``.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from contextd.errors import UsageError
from contextd.store.base import Job

CREATED_BY = "reindex_with_context"
PROVIDERS = ("structural", "openai", "ollama", "none")


def check_request(config: Any, batch_size: int | None, max_workers: int | None,
                  llm_provider: str | None) -> None:
    """Refuse a request the configuration does not match, naming the key to change."""
    settings = config.contextualizer
    where = config.source or "context.toml"
    configured = settings.llm_api if settings.strategy == "llm" else settings.strategy
    if llm_provider is not None:
        if llm_provider not in PROVIDERS:
            raise UsageError(f"llm_provider {llm_provider!r} is not one of "
                             f"{', '.join(PROVIDERS)}")
        if llm_provider != configured:
            wanted = ('strategy = "llm", llm_api = "%s", llm_endpoint and llm_model'
                      % llm_provider if llm_provider in ("openai", "ollama")
                      else f'strategy = "{llm_provider}"')
            raise UsageError(f"the index is prefixed by {configured!r} ([contextualizer] in "
                             f"{where}); to re-index with {llm_provider!r} set {wanted} "
                             "there first: the indexer prefixes every later edit with the "
                             "configured contextualizer, so the index never mixes two")
    if batch_size is not None and batch_size != config.embedding.batch_size:
        raise UsageError(f"batch_size is [embedding] batch_size in {where} "
                         f"({config.embedding.batch_size}); set it there")
    if max_workers is not None and max_workers != settings.llm_concurrency:
        raise UsageError(f"max_workers is [contextualizer] llm_concurrency in {where} "
                         f"({settings.llm_concurrency}); set it there")


def _seconds(stamp: str | None, now: datetime) -> float | None:
    if not stamp:
        return None
    start = datetime.fromisoformat(stamp)
    if start.tzinfo is None:
        start = start.replace(tzinfo=timezone.utc)
    return max(0.0, (now - start).total_seconds())


def progress(job: Job | None) -> dict[str, Any]:
    """The seed's progress answer for the latest re-index job (``none`` when there is
    none): status, entities (files) processed of the total, failures (files that failed,
    from the job's report once it ends), percentage, elapsed and estimated remaining
    seconds."""
    if job is None:
        return {"status": "none", "message": "no re-index has run; call reindex_with_context"}
    failed = int(job.metrics.get("files_failed") or 0)
    now = datetime.now(timezone.utc)
    total = job.files_total or 0
    done = job.files_processed
    percent = 100.0 if job.status == "completed" else (
        round(100.0 * done / total, 1) if total else 0.0)
    end = now if job.completed_at is None else datetime.fromisoformat(job.completed_at) \
        .replace(tzinfo=timezone.utc)
    elapsed = _seconds(job.started_at, end)
    remaining = (elapsed / done * (total - done)
                 if elapsed and done and job.status == "in_progress" else None)
    return {"status": job.status, "job_id": job.job_id, "total_entities": total,
            "processed": done, "failed": failed, "chunks_processed": job.chunks_processed,
            "percentage": percent, "current_file": job.current_file,
            "elapsed_seconds": None if elapsed is None else round(elapsed, 1),
            "estimated_remaining_seconds": None if remaining is None else round(remaining, 1),
            "error": job.error_message}
