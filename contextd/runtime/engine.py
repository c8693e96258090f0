"""The Engine: one project's index and query services, in the process that owns them.

It holds the parts (store, indexer, query module, jobs, search sessions) and has one method per
operation declared in :mod:`contextd.operations`, each running that operation's handler here.
The CLI, the MCP tools and the owner's socket call the same methods, so they behave the same
everywhere; every request and result is a record that serialises to JSON
(:func:`contextd.records.to_dict`), which lets a thin client in another process call a running
owner with the same signatures (:mod:`contextd.runtime.owner`).
"""

from __future__ import annotations

import threading
from typing import Any

from contextd.config.project import Project
from contextd.facade.context import ProjectContext
from contextd.operations import OPERATIONS, expose
from contextd.runtime.jobs import recover_interrupted_jobs
from contextd.store import IndexStore, open_store


class Engine:
    """Index + query services of one project, living in the process that owns its database.

    Parts load lazily: opening an Engine opens the store only (and marks jobs a dead owner
    left running as interrupted); the embedder loads on the first query or indexing run
    that needs it.
    """

    def __init__(self, project: Project, store: IndexStore | None = None, *,
                 context_type: type[ProjectContext] | None = None):
        self.project = project
        # What ``module`` builds: ContextModule.open asks for its own class (contextd.api).
        self._context_type = context_type or ProjectContext
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
                self._indexer.after_write = self.take_in_written
                self._indexer.taking_in = self._taking_in
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

    def take_in_written(self) -> None:
        """After each batch the indexer writes, the in-memory indexes take it in in a
        background thread (:meth:`contextd.query.catch_up.CatchUp.follow`), so the next
        answer finds them current; nothing before the first answer loaded them. Called from
        the indexing thread: it reads the module without the engine's lock (close() holds
        that lock while it waits for a run to end)."""
        module = self._module
        if module is not None:
            module.pipeline.catch_up.follow()

    def _taking_in(self) -> bool:
        """Whether the in-memory indexes are taking in written files in the background, or
        the watcher holds changes its next batch refreshes (the vector follower waits
        meanwhile: during a ``git checkout`` the model took a core while the watcher
        gathered its paths, issue 37). Read without the engine's lock, as
        :meth:`take_in_written`."""
        module = self._module
        watcher = self.watcher
        return (module is not None and module.pipeline.catch_up.busy) \
            or (watcher is not None and watcher.holds_changes)

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
                from contextd.operations.answers import answer_within_engine
                from contextd.sessions.manager import SessionManager

                self._sessions = SessionManager(
                    self.project, self.store, lambda request: answer_within_engine(self, request))
            return self._sessions

    # ----- operations --------------------------------------------------------------------
    def call(self, name: str, params: dict[str, Any], progress=None) -> Any:
        """Run a declared operation (:mod:`contextd.operations`) here; the Engine's method of
        each operation's name comes here."""
        return OPERATIONS[name].run(self, params, progress)

    def replace_project(self, project: Project) -> None:
        """Take new settings (reload_config): the query pipeline, providers and sessions are
        built again from them, the indexer re-reads its boundary."""
        with self._lock:
            old_module = self._module
            self.project = project
            self._module = self._sessions = None
            if self._indexer is not None:
                self._indexer.reload()
            if old_module is not None:
                old_module.shutdown()

    def close(self) -> None:
        """Stop background work and close the store."""
        with self._lock:
            if self._jobs is not None:
                self._jobs.shutdown()
            if self._module is not None:
                self._module.shutdown()
            self.store.close()


expose(Engine)
