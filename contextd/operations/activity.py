"""Operations that report: statistics, what runs now, the job history, indexing problems and
what answers saved (the Index Manager's pages, ``contextd stats``, get_context_stats)."""

from __future__ import annotations

from typing import Any

from contextd.operations.declare import operation
from contextd.operations.records import EngineStats, IndexActivity, UsageSavings
from contextd.records import to_dict
from contextd.store.base import Job

SKIPPED_EXAMPLES = 20  # skipped files named by stats (the counts cover them all)
# Files with an indexing problem listed by stats (the store keeps them all).
PROBLEM_FILES_SHOWN = 20


@operation(mcp=("get_context_stats", "index_status", "cancel_index_generation"),
           http=("/stats",), cli=("stats",))
def stats(engine) -> EngineStats:
    """Providers, storage (with files skipped, by reason, and a few of them), performance,
    languages, the embedding backend (which one embeds queries; a remote one's requests,
    tokens, retries and rate-limit waits), indexing progress ("N / M files") and recent
    jobs."""
    from contextd.embedders.registry import embedding_stats
    from contextd.runtime.job_log import destination
    from contextd.runtime.process_memory import memory_figures

    module = engine.module.stats()
    recent_jobs = tuple(to_dict(job) for job in engine.store.list_jobs(limit=5))
    indexing = {
        **engine.indexer.status(),
        # Files that failed (or were indexed only as line windows), with the reason: a
        # count alone ("1 failed") leaves the user to guess which.
        "problem_files": [
            {"path": e["file_path"], "reason": f"{e['error_type']}: {e['error_message']}"}
            for e in engine.store.list_errors(limit=PROBLEM_FILES_SHOWN)],
        "current_job": next((job for job in recent_jobs
                             if job["status"] in ("queued", "in_progress")), None)}
    storage = {**module.get("storage", {}), "skipped_examples": [
        to_dict(skip) for skip in engine.store.list_skips(limit=SKIPPED_EXAMPLES)]}
    return EngineStats(
        providers=tuple(module["providers"]), storage=storage,
        cache_hit_rate=module["cache_hit_rate"], performance=module["performance"],
        languages=module["languages"], contextualizer=module["contextualizer"],
        embedding=embedding_stats(engine.project.config.embedding), indexing=indexing,
        recent_jobs=recent_jobs,
        # The process holding the index: what it costs in memory (the owner, for a client),
        # and where it logs its jobs (a background owner: owner.log; else its stderr).
        owner={**memory_figures(engine.project.config.owner.memory_limit_mb),
               "log": str(destination()) if destination() else "stderr"})


@operation()
def progress(engine, with_pending: bool = False) -> IndexActivity:
    """What runs now, cheap enough to poll twice a second: the indexer's state, the store's
    generation (it moves with every write) and the queued/running jobs with their figures;
    with ``with_pending`` also the chunks still waiting for a vector."""
    jobs = engine.store.list_jobs(("queued", "in_progress"), limit=5)
    indexer = engine.indexer
    embedding = indexer.embedding_under_way
    # The vectors a background owner computes after the chunks (no job of their own):
    # "embedding", with done, pending, rate and ETA, as Overview and stats show them.
    state = "embedding" if embedding and indexer.state == "idle" else indexer.state
    return IndexActivity(
        state=state, generation=engine.store.generation(),
        jobs=tuple(to_dict(job) for job in jobs),
        embedding={**indexer.embedding_figures.as_dict(),
                   "text": indexer.embedding_figures.text()} if embedding else None,
        embeddings_pending=indexer.status()["embeddings_pending"] if with_pending else None)


@operation()
def job_history(engine, limit: int = 50) -> list[Job]:
    """The job history, newest first, each with its final report (``metrics``)."""
    return engine.store.list_jobs(limit=limit)


@operation()
def errors(engine, limit: int = 500) -> list[dict[str, Any]]:
    """Files that failed or were skipped while indexing, newest first, with reasons."""
    return engine.store.list_errors(limit=limit)


@operation()
def savings(engine, days: int = 30) -> UsageSavings:
    """What answers of the last ``days`` days saved, per day, task and provider, with
    latency percentiles and the embedding cache's hit rate over recent indexing runs."""
    engine.module.pipeline.usage.flush()
    data = engine.store.usage_summary(days)
    reused = embedded = 0
    for job in engine.store.list_jobs(limit=200):
        reused += int(job.metrics.get("embeddings_reused") or 0)
        embedded += int(job.metrics.get("chunks_embedded") or 0)
    return UsageSavings(
        days=data["days"], queries=data["queries"], tokens_served=data["tokens_served"],
        source_tokens=data["source_tokens"], latency_ms=data["latency_ms"],
        per_day=tuple(data["per_day"]), per_task=tuple(data["per_task"]),
        providers=tuple(data["providers"]),
        embedding_cache={"reused": reused, "embedded": embedded,
                         "hit_rate": reused / (reused + embedded) if reused + embedded
                         else None})
