"""The Engine: one project's index and query services, behind one set of methods.

The CLI, the MCP tools and the owner's local socket all call these methods, so they behave the
same everywhere. Every argument and return value is a plain record that serialises to JSON
(:func:`contextd.records.to_dict`), which is what lets a thin client in another process call a
running owner with the same signatures (see :mod:`contextd.runtime.owner`).
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Sequence

from contextd.runtime.jobs import recover_interrupted_jobs
from contextd.errors import JobConflictError, UsageError
from contextd.runtime.process_memory import memory_figures
from contextd.facade.context import ProjectContext
from contextd.config.project import Project
from contextd.records import to_dict
from contextd.store import IndexStore, open_store


# Settings reload_config cannot apply to a running process (the database it has open).
RESTART_SECTIONS = ("storage.", "security.encrypt_db", "security.key_env", "security.key_file")
SKIPPED_EXAMPLES = 20  # skipped files named by stats (the counts cover them all)
# Files with an indexing problem listed by stats (the store keeps them all).
PROBLEM_FILES_SHOWN = 20


class Engine:
    """Index + query services of one project, living in the process that owns its database.

    Parts load lazily: opening an Engine opens the store only (and marks jobs a dead owner
    left running as interrupted); the embedder loads on the first query or indexing run
    that needs it.
    """

    def __init__(self, project: Project, store: IndexStore | None = None, *,
                 context_type: type[ProjectContext] = ProjectContext):
        self.project = project
        # What ``module`` builds: ContextModule.open asks for its own class (contextd.api).
        self._context_type = context_type
        self.store = store if store is not None else open_store(project)
        if project.config.storage.backend == "duckdb":
            # The owner election makes this the only writer: a job still marked running was
            # left by a dead one. A shared (PostgreSQL) index has live writers elsewhere;
            # there a rebuild's claim decides (contextd.runtime.jobs).
            recover_interrupted_jobs(self.store)
        self._lock = threading.RLock()
        self._indexer = None
        self._module = None
        self._jobs = None
        self._sessions = None
        # The watcher of an owner with duties once it has caught up (OwnerDuties): from then
        # on a command's catch-up is the watcher's pending changes, not a walk of the tree.
        self.watcher = None

    @classmethod
    def open(cls, root: str | None = None, config_path: str | None = None) -> "Engine":
        """Open the engine of a project directory (detected from the cwd when None)."""
        return cls(Project.open(root, config_path))

    # ----- parts, created on first use -------------------------------------------------
    @property
    def indexer(self):
        """The :class:`contextd.indexer.Indexer` of this project."""
        with self._lock:
            if self._indexer is None:
                from contextd.indexer import Indexer
                from contextd.query.catch_up import answering_now

                self._indexer = Indexer(self.project, self.store)
                self._indexer.gives_way = answering_now
            return self._indexer

    @property
    def module(self):
        """The :class:`contextd.facade.context.ProjectContext` answering queries, holding the
        knowledge base and agent memory."""
        with self._lock:
            if self._module is None:
                self._module = self._context_type(self.project, self.store)
                self._module.pipeline.catch_up.writing = self._writing
            return self._module

    def _writing(self) -> bool:
        """Whether this process's indexer is writing files (answers then take in a large
        write a slice at a time: contextd.query.catch_up)."""
        return self._indexer is not None and self._indexer.indexing

    @property
    def jobs(self):
        """The :class:`contextd.runtime.jobs.JobRunner` running rebuilds one at a time."""
        with self._lock:
            if self._jobs is None:
                from contextd.runtime.jobs import JobRunner

                self._jobs = JobRunner(self.indexer, self.store)
            return self._jobs

    @property
    def sessions(self):
        """The :class:`contextd.sessions.manager.SessionManager` of search sessions."""
        with self._lock:
            if self._sessions is None:
                from contextd.sessions.manager import SessionManager

                self._sessions = SessionManager(self.project, self.store, self.query)
            return self._sessions

    # ----- indexing --------------------------------------------------------------------
    def ensure_indexed(self, progress=None, embed: bool = True, within_s: float | None = None,
                       wait: bool = True):
        """Bootstrap or catch up (resuming an interrupted bootstrap) when the index is not
        current; returns an :class:`contextd.indexer.IndexReport`. ``embed=False`` leaves
        the vectors for later (see :mod:`contextd.runtime.background`). With a watcher that
        has caught up, the changes it noted are indexed at once instead (a 2,000-file walk
        cost every command on a large project a few hundred ms).

        ``within_s`` and ``wait``: see :meth:`contextd.indexer.Indexer.ensure_indexed`."""
        watcher = self.watcher
        if not embed and watcher is not None and watcher.running:
            return watcher.flush()
        return self.indexer.ensure_indexed(progress=progress, embed=embed, wait=wait,
                                           within_s=within_s)

    def embeddings_pending(self) -> int:
        """Distinct chunk texts still without a vector for the configured model."""
        return self.store.count_missing_embeddings(self.indexer.embedder.identity)

    def refresh(self, paths: Sequence[str] | None = None, force: bool = False, progress=None):
        """Re-index changed files (all, or under ``paths``); returns an IndexReport."""
        return self.indexer.refresh(paths=paths, force=force, progress=progress)

    def rebuild(self, paths: Sequence[str] | None = None, *, dry_run: bool = False,
                vacuum: bool = True, keep_errors: bool = False, wait: bool = True,
                created_by: str = "cli", progress=None):
        """Rebuild all or part of the index as a tracked job (one at a time); with
        ``dry_run`` only estimate. Returns a :class:`contextd.runtime.jobs.RebuildResult`."""
        return self.jobs.rebuild(paths=paths, dry_run=dry_run, vacuum=vacuum,
                                 keep_errors=keep_errors, wait=wait, created_by=created_by,
                                 progress=progress)

    def job_status(self, job_id: str, include_logs: bool = False):
        """A job's status and progress (get_rebuild_status)."""
        return self.jobs.status(job_id, include_logs=include_logs)

    def cancel_job(self, job_id: str):
        """Ask a running job to stop after its current batch."""
        return self.jobs.cancel(job_id)

    # ----- configuration and schema (seed 002: reload_config, reinitialize_schema) -------
    def reload_config(self) -> dict[str, Any]:
        """Re-read context.toml and the project's .env and apply them without a restart:
        the query pipeline, providers, sessions and the indexer's boundary are rebuilt from
        the new settings. A file that does not load is refused with its issues and the
        running configuration stays. Storage settings need a restart (said in ``restart``);
        chunking, redaction and contextualizer changes re-index at the next catch-up
        (``reindex``)."""
        from contextd.config.compare import changed_keys
        from contextd.indexer.core import index_signature

        new = Project.open(self.project.root, self.project.config.source)
        changed = changed_keys(self.project.config, new.config)
        restart = [k for k in changed if k.startswith(RESTART_SECTIONS)]
        applied = [k for k in changed if k not in restart]
        reindex = index_signature(self.project.config) != index_signature(new.config)
        if applied:
            with self._lock:
                old_module = self._module
                self.project = dataclasses.replace(
                    new, config=dataclasses.replace(new.config, storage=self.project.config.storage))
                self._module = self._sessions = None
                if self._indexer is not None:
                    self._indexer.reload()
                if old_module is not None:
                    old_module.shutdown()
        return {"config_file": new.config.source, "changed": applied, "restart": restart,
                "reindex": reindex, "notes": [str(n) for n in new.config.notes]}

    def reinitialize_schema(self) -> dict[str, Any]:
        """Drop this project's index (files, chunks, symbols, errors, progress) and start it
        afresh at the current schema version; the knowledge base, agent memory and the
        vector cache stay. The next catch-up (a query, refresh_context, the watcher) indexes
        the project again. Refused while a rebuild runs."""
        release = self.store.try_exclusive("reinitialize_schema")
        if release is None:
            raise JobConflictError("a rebuild is running: cancel it or wait for it to end "
                                   "before reinitializing the schema")
        try:
            dropped = self.indexer.reset()
        finally:
            release()
        return {"files_dropped": dropped, "schema_version": self.store.schema_version()}

    def schema_status(self) -> dict[str, Any]:
        """Seed 002's /schema-status: schema version, embedding model and dimension, files
        in the project / indexed / not indexed / changed / deleted, and the status (No Index,
        Updating, Cancelling, Needs Update, Up to Date) with what to do."""
        from contextd.runtime.index_health import schema_status

        return schema_status(self.indexer, self.store, self.project.config,
                             str(self.project.root))

    # ----- the service's document API (spec 004 §8.2) ---------------------------------
    def add_context(self, file_path: str, content: str | None = None, lang: str | None = None,
                    mime: str | None = None) -> dict[str, Any]:
        """Index one project file: ``content`` as that file's text (see
        :meth:`contextd.indexer.Indexer.push` for how it relates to the file on disk), or
        the file read from disk when ``content`` is None. ``lang`` and ``mime`` are hints:
        the language is detected from the file name, as for every file, and a hint that
        disagrees is reported in ``notes``."""
        if content is None:
            report = self.indexer.refresh([self.indexer.indexable(file_path)])
        else:
            report = self.indexer.push(file_path, content.encode("utf-8"))
        rel = self.indexer.relative(file_path)
        state = self.store.file_states(rel).get(rel)
        if report.errors:
            raise UsageError(f"{rel} was not indexed: {report.errors[0]}")
        from contextd.chunkers.chunking import language_for

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

    def delete_context(self, file_path: str) -> dict[str, Any]:
        """Drop one file from the index. A file that still exists on disk comes back at its
        next change or catch-up (delete it, or list it in .contextignore, to keep it out)."""
        return {"file_path": self.indexer.relative(file_path),
                "deleted": self.indexer.remove(file_path)}

    def backup(self, destination: str | None = None) -> dict[str, Any]:
        """A consistent snapshot of the index, taken while it stays in use (see
        :mod:`contextd.runtime.backup`); returns where it went and what it holds."""
        from contextd.runtime.backup import take_backup

        return take_backup(self.project, self.store, destination)

    # ----- querying --------------------------------------------------------------------
    def query(self, request):
        """Answer a :class:`contextd.facade.context.QueryRequest` with a
        :class:`contextd.facade.context.QueryResponse`, saying what the answer cannot include yet:
        while files are still being indexed an empty answer waits briefly for them, then
        says how far indexing is (never a bare "nothing matched"); while vectors are still
        being computed, how far that is."""
        from contextd.runtime.indexing_notes import answer_while_indexing

        return answer_while_indexing(self.indexer, lambda: self.module.query(request))

    # ----- contextual retrieval (seed 003) ---------------------------------------------
    def generate_context_for_chunk(self, chunk: str, document: str,
                                   metadata: dict[str, Any] | None = None,
                                   max_words: int = 100) -> dict[str, Any]:
        """The configured contextualizer's prefix for one chunk of a document, with its
        quality score and tokens (:mod:`contextd.contextualizers.single`)."""
        from contextd.contextualizers.single import generate_for_chunk

        return to_dict(generate_for_chunk(self.project.config, chunk, document, metadata,
                                          max_words))

    def reindex_with_context(self, batch_size: int | None = None,
                             max_workers: int | None = None, llm_provider: str | None = None,
                             wait: bool = False) -> dict[str, Any]:
        """Re-index every file with contextual prefixes as a tracked, resumable job
        (:mod:`contextd.runtime.contextual_jobs`); returns the job and its progress."""
        from contextd.runtime import contextual_jobs

        contextual_jobs.check_request(self.project.config, batch_size, max_workers,
                                      llm_provider)
        result = self.rebuild(wait=wait, created_by=contextual_jobs.CREATED_BY)
        return {"success": result.status not in ("failed",), "job_id": result.job_id,
                "message": result.message, "progress": self.reindexing_progress()}

    def reindexing_progress(self) -> dict[str, Any]:
        """The latest re-index job's progress (get_reindexing_progress)."""
        from contextd.runtime import contextual_jobs

        job = next((j for j in self.store.list_jobs(limit=200)
                    if j.created_by == contextual_jobs.CREATED_BY), None)
        return contextual_jobs.progress(job)

    def contextual_search(self, query: str, limit: int = 10,
                          score_threshold: float | None = None, ab: bool = False,
                          expect: Sequence[str] = ()) -> dict[str, Any]:
        """search_with_contextual_retrieval, with the A/B comparison when ``ab`` (``expect``:
        files known to answer the query, whose rank each side reports)."""
        return to_dict(self.module.contextual.search(query, limit, score_threshold, ab,
                                                     expect))

    def contextual_stats(self) -> dict[str, Any]:
        """get_contextual_retrieval_stats."""
        return self.module.contextual.stats()

    # ----- token usage agents report (spec 004 §7.3/§15) ------------------------------
    def report_task_usage(self, task_id: str, op: str, tokens_input: int, tokens_output: int,
                          agent: str | None = None, context_tokens: int | None = None,
                          notes: str | None = None) -> dict[str, Any]:
        """Record a task run's tokens; returns the token-reduction report."""
        return self.module.report_task_usage(task_id, op, tokens_input, tokens_output, agent,
                                             context_tokens, notes)

    def token_reduction(self) -> dict[str, Any]:
        """The token-reduction report over every reported task run."""
        return self.module.token_reduction()

    # ----- search sessions (contextd.sessions) -------------------------------------------
    def search_knowledge(self, request):
        """Run a :class:`contextd.sessions.SearchRequest`, keep its best results as a new
        session; returns a :class:`contextd.sessions.SearchSession` (id and preview)."""
        return self.sessions.search(request)

    def get_search_results(self, session_ids: Sequence[str], limit: int | None = None):
        """Full results of stored sessions (:class:`contextd.sessions.SearchResults`)."""
        return self.sessions.results(session_ids, limit)

    def list_search_results(self):
        """Live sessions, newest first (:class:`contextd.sessions.SessionList`)."""
        return self.sessions.list()

    # ----- agent memory (contextd.stash) ---------------------------------------------------
    def stash(self, request):
        """Stash segments (a :class:`contextd.stash.model.StashRequest`)."""
        return self.module.stash.stash(request)

    def retrieve_stashed(self, request):
        """Rank stashed segments for a :class:`contextd.stash.model.RetrieveRequest`."""
        return self.module.stash.retrieve(request)

    def merge_stashed(self, segment_ids: Sequence[str], remove: bool = False):
        """Full segments to merge back (and optionally forget)."""
        return self.module.stash.merge(segment_ids, remove=remove)

    def get_stashed(self, segment_ids: Sequence[str]):
        """Segments by id."""
        return self.module.stash.get(segment_ids)

    def list_stashed(self, session_id: str = "", all_sessions: bool = False,
                     types: Sequence[str] = (), topic: str | None = None, limit: int = 50,
                     offset: int = 0, include_expired: bool = False):
        """A page of stored segments, newest first (expired ones only when asked)."""
        return self.module.stash.list(session_id=session_id, all_sessions=all_sessions,
                                      types=types, topic=topic, limit=limit, offset=offset,
                                      include_expired=include_expired)

    def delete_stashed(self, segment_ids: Sequence[str]):
        """Forget segments."""
        return self.module.stash.delete(segment_ids)

    def protect_stashed(self, segment_ids: Sequence[str], protected: bool = True):
        """Protect segments from expiry and gc (or lift it)."""
        return self.module.stash.protect(segment_ids, protected=protected)

    def gc_stash(self):
        """Collect expired and aged-out unprotected segments."""
        return self.module.stash.gc()

    # ----- knowledge base (contextd.knowledge; searched through query) -----------------
    def knowledge_create_context(self, name: str, description: str = ""):
        """Create a knowledge context; a ContextInfo."""
        return self.module.knowledge.create_context(name, description)

    def knowledge_list_contexts(self):
        """Every knowledge context; a ContextList."""
        return self.module.knowledge.list_contexts()

    def knowledge_show_context(self, name: str):
        """A context and its documents; a ContextDetail."""
        return self.module.knowledge.show_context(name)

    def knowledge_delete_context(self, name: str, confirm: bool = False):
        """Delete a context (never ``default``); a ContextDeleted."""
        return self.module.knowledge.delete_context(name, confirm)

    def knowledge_add(self, paths: Sequence[str], contexts: Sequence[str] | None = None,
                      include: Sequence[str] = (), exclude: Sequence[str] = (),
                      via_mcp: bool = False, metadata: dict | None = None,
                      force_ocr: bool = False):
        """Add files or folders to contexts; ``via_mcp`` limits them to the allowed roots;
        ``metadata`` is kept with each document, ``force_ocr`` reads PDFs by OCR. An
        AddReport."""
        return self.module.knowledge.add(paths, contexts, include, exclude, via_mcp,
                                         metadata, force_ocr)

    def knowledge_list_documents(self, context: str | None = None, limit: int = 100,
                                 offset: int = 0):
        """Documents of one context or of all (seed 000 knowledge-show); a DocumentList."""
        return self.module.knowledge.list_documents(context, limit, offset)

    def knowledge_remove(self, paths: Sequence[str], contexts: Sequence[str] | None = None):
        """Take documents out of contexts (all when None); a RemoveReport."""
        return self.module.knowledge.remove(paths, contexts)

    def stats(self) -> dict[str, Any]:
        """get_context_stats: providers, storage (with files skipped, by reason, and a few
        of them), performance, languages, the embedding backend (which one embeds queries; a
        remote one's requests, tokens, retries and rate-limit waits), indexing progress
        ("N / M files") and recent jobs."""
        from contextd.embedders.registry import embedding_stats

        data = self.module.stats()
        data["embedding"] = embedding_stats(self.project.config.embedding)
        data["indexing"] = self.indexer.status()
        # Files that failed (or were indexed only as line windows), with the reason: a
        # count alone ("1 failed") leaves the user to guess which.
        data["indexing"]["problem_files"] = [
            {"path": e["file_path"], "reason": f"{e['error_type']}: {e['error_message']}"}
            for e in self.store.list_errors(limit=PROBLEM_FILES_SHOWN)]
        data["recent_jobs"] = [to_dict(job) for job in self.store.list_jobs(limit=5)]
        # The process holding the index: what it costs in memory (the owner, for a client).
        data["owner"] = memory_figures(self.project.config.owner.memory_limit_mb)
        data["indexing"]["current_job"] = next(
            (job for job in data["recent_jobs"] if job["status"] in ("queued", "in_progress")),
            None)
        data.setdefault("storage", {})["skipped_examples"] = [
            to_dict(skip) for skip in self.store.list_skips(limit=SKIPPED_EXAMPLES)]
        return data

    # ----- activity (the Index Manager's pages) ----------------------------------------
    def progress(self, with_pending: bool = False) -> dict[str, Any]:
        """What runs now, cheap enough to poll twice a second: the indexer's state, the
        store's generation (it moves with every write) and the queued/running jobs with their
        figures; with ``with_pending`` also the chunks still waiting for a vector."""
        jobs = self.store.list_jobs(("queued", "in_progress"), limit=5)
        indexer = self.indexer
        embedding = indexer.embedding_under_way
        # The vectors a background owner computes after the chunks (no job of their own):
        # "embedding", with done, pending, rate and ETA, as Overview and stats show them.
        state = "embedding" if embedding and indexer.state == "idle" else indexer.state
        data = {"state": state, "generation": self.store.generation(),
                "jobs": [to_dict(job) for job in jobs],
                "embedding": {**indexer.embedding_figures.as_dict(),
                              "text": indexer.embedding_figures.text()} if embedding else None}
        if with_pending:
            data["embeddings_pending"] = self.indexer.status()["embeddings_pending"]
        return data

    def job_history(self, limit: int = 50) -> list[dict[str, Any]]:
        """The job history, newest first, each with its final report (``metrics``)."""
        return [to_dict(job) for job in self.store.list_jobs(limit=limit)]

    def errors(self, limit: int = 500) -> list[dict[str, Any]]:
        """Files that failed or were skipped while indexing, newest first, with reasons."""
        return self.store.list_errors(limit=limit)

    def savings(self, days: int = 30) -> dict[str, Any]:
        """What answers of the last ``days`` days saved, per day, task and provider, with
        latency percentiles and the embedding cache's hit rate over recent indexing runs."""
        self.module.flush_usage()
        data = self.store.usage_summary(days)
        reused = embedded = 0
        for job in self.store.list_jobs(limit=200):
            reused += int(job.metrics.get("embeddings_reused") or 0)
            embedded += int(job.metrics.get("chunks_embedded") or 0)
        data["embedding_cache"] = {
            "reused": reused, "embedded": embedded,
            "hit_rate": reused / (reused + embedded) if reused + embedded else None}
        return data

    def close(self) -> None:
        """Stop background work and close the store."""
        with self._lock:
            if self._jobs is not None:
                self._jobs.shutdown()
            if self._module is not None:
                self._module.shutdown()
            self.store.close()
