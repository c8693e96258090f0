"""The Engine: one project's index and query services, behind one set of methods.

The CLI, the MCP tools and the owner's local socket all call these methods, so they behave the
same everywhere. Every argument and return value is a plain record that serialises to JSON
(:func:`contextd.records.to_dict`), which is what lets a thin client in another process call a
running owner with the same signatures (see :mod:`contextd.owner`).
"""

from __future__ import annotations

import threading
from typing import Any, Sequence

from contextd.project import Project
from contextd.records import to_dict
from contextd.store import IndexStore, open_store


class Engine:
    """Index + query services of one project, living in the process that owns its database.

    Parts load lazily: opening an Engine opens the store only; the embedder loads on the
    first query or indexing run that needs it.
    """

    def __init__(self, project: Project, store: IndexStore | None = None):
        self.project = project
        self.store = store if store is not None else open_store(project)
        self._lock = threading.RLock()
        self._indexer = None
        self._module = None
        self._jobs = None

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

                self._indexer = Indexer(self.project, self.store)
            return self._indexer

    @property
    def module(self):
        """The :class:`contextd.module.ContextModule` answering queries."""
        with self._lock:
            if self._module is None:
                from contextd.module import ContextModule

                self._module = ContextModule(self.project, self.store)
            return self._module

    @property
    def jobs(self):
        """The :class:`contextd.jobs.JobRunner` running rebuilds one at a time."""
        with self._lock:
            if self._jobs is None:
                from contextd.jobs import JobRunner

                self._jobs = JobRunner(self.indexer, self.store)
            return self._jobs

    # ----- indexing --------------------------------------------------------------------
    def ensure_indexed(self, progress=None):
        """Bootstrap or catch up (resuming an interrupted bootstrap) when the index is not
        current; returns an :class:`contextd.indexer.IndexReport`."""
        return self.indexer.ensure_indexed(progress=progress)

    def refresh(self, paths: Sequence[str] | None = None, force: bool = False, progress=None):
        """Re-index changed files (all, or under ``paths``); returns an IndexReport."""
        return self.indexer.refresh(paths=paths, force=force, progress=progress)

    def rebuild(self, paths: Sequence[str] | None = None, *, dry_run: bool = False,
                vacuum: bool = True, keep_errors: bool = False, wait: bool = True,
                created_by: str = "cli", progress=None):
        """Rebuild all or part of the index as a tracked job (one at a time); with
        ``dry_run`` only estimate. Returns a :class:`contextd.jobs.RebuildResult`."""
        return self.jobs.rebuild(paths=paths, dry_run=dry_run, vacuum=vacuum,
                                 keep_errors=keep_errors, wait=wait, created_by=created_by,
                                 progress=progress)

    def job_status(self, job_id: str, include_logs: bool = False):
        """A job's status and progress (get_rebuild_status)."""
        return self.jobs.status(job_id, include_logs=include_logs)

    def cancel_job(self, job_id: str):
        """Ask a running job to stop after its current batch."""
        return self.jobs.cancel(job_id)

    # ----- querying --------------------------------------------------------------------
    def query(self, request):
        """Answer a :class:`contextd.module.QueryRequest` with a
        :class:`contextd.module.QueryResponse`."""
        return self.module.query(request)

    def stats(self) -> dict[str, Any]:
        """get_context_stats: providers, storage, performance, languages, the embedding
        backend (which one embeds queries; a remote one's requests, tokens, retries and
        rate-limit waits), indexing progress ("N / M files") and recent jobs."""
        from contextd.embedding import embedding_stats

        data = self.module.stats()
        data["embedding"] = embedding_stats(self.project.config.embedding)
        data["indexing"] = self.indexer.status()
        data["recent_jobs"] = [to_dict(job) for job in self.store.list_jobs(limit=5)]
        return data

    def close(self) -> None:
        """Stop background work and close the store."""
        with self._lock:
            if self._jobs is not None:
                self._jobs.shutdown()
            if self._module is not None:
                self._module.shutdown()
            self.store.close()
