"""Operations that keep the index current: catch-up, refresh, rebuild jobs, one file pushed
or dropped, the schema, backups and configuration reloads."""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from contextd.errors import JobConflictError, UsageError
from contextd.indexer.report import IndexReport
from contextd.operations.declare import operation
from contextd.runtime.jobs import JobStatus, RebuildResult

# Settings reload_config cannot apply to a running process (the database it has open).
RESTART_SECTIONS = ("storage.", "security.encrypt_db", "security.key_env", "security.key_file")


@operation(cli=("query", "search", "kb"))
def ensure_indexed(engine, embed: bool = True, within_s: float | None = None,
                   wait: bool = True, progress=None) -> IndexReport:
    """Bootstrap or catch up (resuming an interrupted bootstrap) when the index is not
    current. ``embed=False`` leaves the vectors for later (see
    :mod:`contextd.runtime.background`). With a watcher that has caught up, the changes it
    noted are indexed at once instead (a 2,000-file walk cost every command on a large
    project a few hundred ms).

    ``within_s`` and ``wait``: see :meth:`contextd.indexer.Indexer.ensure_indexed`."""
    watcher = engine.watcher
    if not embed and watcher is not None and watcher.running:
        return watcher.flush(wait=wait, within_s=within_s)
    return engine.indexer.ensure_indexed(progress=progress, embed=embed, wait=wait,
                                         within_s=within_s)


@operation()
def embeddings_pending(engine) -> int:
    """Distinct chunk texts still without a vector for the configured model."""
    return engine.store.count_missing_embeddings(engine.indexer.embedder.identity)


@operation(mcp=("refresh_context", "rebuild_index"), cli=("refresh",))
def refresh(engine, paths: Sequence[str] | None = None, force: bool = False,
            progress=None) -> IndexReport:
    """Re-index changed files (all, or under ``paths``)."""
    return engine.indexer.refresh(paths=paths, force=force, progress=progress)


@operation()
def check_refresh_paths(engine, paths: list[str]) -> dict[str, Any]:
    """``{"accepted": [root-relative paths], "refused": [{"path", "reason"}]}``: the check a
    refresh of ``paths`` makes before it runs. refresh_context(async=true) asks it before
    queuing, so a missing path is refused there as the synchronous form refuses it, not
    answered "queued" and dropped later in a log line nobody reads."""
    accepted, refused = engine.indexer.checked_paths(paths)
    return {"accepted": accepted, "refused": [dataclasses.asdict(r) for r in refused]}


@operation(mcp=("rebuild_context", "rebuild_index"), cli=("rebuild",))
def rebuild(engine, paths: Sequence[str] | None = None, dry_run: bool = False,
            vacuum: bool = True, keep_errors: bool = False, wait: bool = True,
            created_by: str = "cli", progress=None) -> RebuildResult:
    """Rebuild all or part of the index as a tracked job (one at a time); with ``dry_run``
    only estimate."""
    return engine.jobs.rebuild(paths=paths, dry_run=dry_run, vacuum=vacuum,
                               keep_errors=keep_errors, wait=wait, created_by=created_by,
                               progress=progress)


@operation(mcp=("get_rebuild_status",))
def job_status(engine, job_id: str, include_logs: bool = False) -> JobStatus:
    """A job's status and progress."""
    return engine.jobs.status(job_id, include_logs=include_logs)


@operation(mcp=("cancel_rebuild", "cancel_index_generation"))
def cancel_job(engine, job_id: str) -> JobStatus:
    """Ask a running job to stop after its current batch."""
    return engine.jobs.cancel(job_id)


@operation(mcp=("reload_config",))
def reload_config(engine) -> dict[str, Any]:
    """Re-read context.toml and the project's .env and apply them without a restart: the
    query pipeline, providers, sessions and the indexer's boundary are rebuilt from the new
    settings. A file that does not load is refused with its issues and the running
    configuration stays. Storage settings need a restart (said in ``restart``); chunking,
    redaction and contextualizer changes re-index at the next catch-up (``reindex``)."""
    from contextd.config.compare import changed_keys
    from contextd.config.project import Project
    from contextd.indexer.core import index_signature

    current = engine.project
    new = Project.open(current.root, current.config.source)
    changed = changed_keys(current.config, new.config)
    restart = [k for k in changed if k.startswith(RESTART_SECTIONS)]
    applied = [k for k in changed if k not in restart]
    if applied:
        engine.replace_project(dataclasses.replace(
            new, config=dataclasses.replace(new.config, storage=current.config.storage)))
    return {"config_file": new.config.source, "changed": applied, "restart": restart,
            "reindex": index_signature(current.config) != index_signature(new.config),
            "notes": [str(n) for n in new.config.notes]}


@operation(mcp=("reinitialize_schema",))
def reinitialize_schema(engine) -> dict[str, Any]:
    """Drop this project's index (files, chunks, symbols, errors, progress) and start it
    afresh at the current schema version; the knowledge base, agent memory and the vector
    cache stay. The next catch-up (a query, refresh_context, the watcher) indexes the
    project again. Refused while a rebuild runs."""
    release = engine.store.try_exclusive("reinitialize_schema")
    if release is None:
        raise JobConflictError("a rebuild is running: cancel it or wait for it to end "
                               "before reinitializing the schema")
    try:
        dropped = engine.indexer.reset()
    finally:
        release()
    return {"files_dropped": dropped, "schema_version": engine.store.schema_version()}


@operation(mcp=("index_status",))
def schema_status(engine) -> dict[str, Any]:
    """Schema version, embedding model and dimension, files in the project / indexed / not
    indexed / changed / deleted, and the status (No Index, Updating, Cancelling, Needs
    Update, Up to Date) with what to do."""
    from contextd.runtime.index_health import schema_status as health

    return health(engine.indexer, engine.store, engine.project.config,
                  str(engine.project.root))


@operation(http=("/add_context",))
def add_context(engine, file_path: str, content: str | None = None, lang: str | None = None,
                mime: str | None = None) -> dict[str, Any]:
    """Index one project file: ``content`` as that file's text (see
    :meth:`contextd.indexer.Indexer.push` for how it relates to the file on disk), or the
    file read from disk when ``content`` is None. ``lang`` and ``mime`` are hints: the
    language is detected from the file name, as for every file, and a hint that disagrees
    is reported in ``notes``."""
    from contextd.chunkers.chunking import language_for

    indexer = engine.indexer
    if content is None:
        report = indexer.refresh([indexer.indexable(file_path)])
    else:
        report = indexer.push(file_path, content.encode("utf-8"))
    rel = indexer.relative(file_path)
    state = engine.store.file_states(rel).get(rel)
    if report.errors:
        raise UsageError(f"{rel} was not indexed: {report.errors[0]}")
    language = language_for(rel) or "text"
    notes = []
    if lang and lang.lower() != language:
        notes.append(f"lang {lang!r} ignored: {rel} is indexed as {language} "
                     "(detected from its name)")
    if mime and not (mime.startswith("text/") or mime.endswith(("json", "xml", "yaml",
                                                                "toml", "javascript"))):
        notes.append(f"mime {mime!r} is not a text type; indexed as text anyway")
    return {"file_path": rel, "file_id": state.file_id if state else None,
            "indexed": state is not None, "language": language,
            "chunks": report.chunks_written, "embeddings": report.chunks_embedded,
            "unchanged": report.files_unchanged > 0, "notes": notes}


@operation(http=("/delete_context",))
def delete_context(engine, file_path: str) -> dict[str, Any]:
    """Drop one file from the index. A file that still exists on disk comes back at its
    next change or catch-up (delete it, or list it in .contextignore, to keep it out)."""
    return {"file_path": engine.indexer.relative(file_path),
            "deleted": engine.indexer.remove(file_path)}


@operation(http=("/backup",), cli=("backup",))
def backup(engine, destination: str | None = None) -> dict[str, Any]:
    """A consistent snapshot of the index, taken while it stays in use (see
    :mod:`contextd.runtime.backup`); where it went and what it holds."""
    from contextd.runtime.backup import take_backup

    return take_backup(engine.project, engine.store, destination)
