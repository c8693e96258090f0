"""Shared access to one project's index: one process owns the database, the others are clients.

DuckDB lets one process write a database file, yet several MCP servers (one per agent
session), a watcher and a person's CLI all work on one project at once. So:

* **Election** — an exclusive ``flock`` on ``<db dir>/owner.lock``. The kernel releases it
  when the holder exits, however it exits (SIGKILL included), so there is never a stale
  owner to clean up. Only the lock holder opens the database, so "database is locked" cannot
  happen between contextd processes.
* **Serving** — the holder opens the :class:`contextd.runtime.engine.Engine` and serves it on a Unix
  domain socket (:mod:`contextd.runtime.rpc`). The socket lives in a private 0700 directory under
  ``$XDG_RUNTIME_DIR`` (or ``/tmp/contextd-<uid>``), named by a hash of the database path,
  because a path inside a deep project could pass the 108-byte limit of socket addresses.
* **Shared databases** — a PostgreSQL store takes many writing processes, so no election is
  needed to open it: a process opens the Engine itself. Only the background owner that
  finishes a long embedding (``serve``: :mod:`contextd.runtime.background`) takes the lock
  and serves its socket, so that at most one embeds per machine and the commands run meanwhile
  (``stats`` above all) ask it, the process that knows how far the embedding is, and get
  answers from its warm model; with no such owner they open the Engine themselves.
* **Takeover** — a client whose call breaks (the owner died or is shutting down) runs the
  election again: the winner opens the Engine, the others reconnect, and the call is retried,
  so a refresh in flight is not lost. A long-running process that should keep the index
  current (``duties``: the MCP server) does not wait for its next call: it polls the lock and
  takes over within a fraction of a second, then catches the index up and starts the watcher.

:func:`connect` is the entry point; it returns a :class:`SharedEngine` with the Engine's
methods, whichever role the process ends up in.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from contextd.runtime import rpc
from contextd.runtime.election import OwnerLock, lock_path, socket_path
from contextd.runtime.owner_server import OwnerDuties, OwnerServer
from contextd.errors import ContextdError, StoreError
from contextd.config.project import Project
from contextd.records import to_dict
from contextd.store.base import KNOWLEDGE_PREFIX

log = logging.getLogger("contextd.runtime.owner")

# How often a process with duties checks whether the owner is gone.
STANDBY_POLL_S = 0.25
# How long a call waits for an owner (election, reconnect, Engine open) before giving up.
DEFAULT_WAIT_S = 30.0


class SharedEngine:
    """The Engine's methods, wherever the Engine lives: in this process when it won the
    election, else in the owner process, reached over the socket.

    Calls are retried across a takeover: when the owner dies mid-call, the election runs
    again and the call is repeated on the new owner (the Engine's methods are idempotent or,
    like rebuild, died with the old owner). Thread-safe; each thread uses its own connection.
    """

    def __init__(self, project: Project, *, duties: bool = False,
                 wait_s: float = DEFAULT_WAIT_S, serve: bool = False):
        self.project = project
        self.duties = duties
        self.wait_s = wait_s
        self._db = str(Path(project.db_path).resolve())
        self._socket = socket_path(project.db_path)
        self._lock = OwnerLock(lock_path(project.db_path))
        # A PostgreSQL store takes any number of writing processes (advisory locks guard its
        # rebuilds and file replaces): a process opens it itself unless the local background
        # owner (the one that takes the lock and serves: ``serve``) is running.
        shared_store = project.config.storage.backend != "duckdb"
        self._elects = not shared_store or serve
        self._mutex = threading.RLock()
        self._engine = None
        self._server: OwnerServer | None = None
        self._duties: OwnerDuties | None = None
        self._idle: list[rpc.Client] = []
        self._closed = threading.Event()
        self.owner_pid: int | None = None

    @property
    def is_owner(self) -> bool:
        """True while this process owns the database."""
        return self._engine is not None

    def start(self) -> "SharedEngine":
        """Win the election or connect to the owner; a process with duties then stands by
        to take over when the owner goes."""
        self._release(self._checkout(time.monotonic() + self.wait_s))
        if self.duties and not self.is_owner:
            threading.Thread(target=self._stand_by, name="contextd-standby",
                             daemon=True).start()
        return self

    # ----- the Engine's methods --------------------------------------------------------
    def ensure_indexed(self, progress=None, embed: bool = True, within_s: float | None = None,
                       wait: bool = True):
        """See :meth:`contextd.runtime.engine.Engine.ensure_indexed`."""
        return self._call("ensure_indexed", {"embed": embed, "within_s": within_s,
                                             "wait": wait}, progress)

    def embeddings_pending(self) -> int:
        """See :meth:`contextd.runtime.engine.Engine.embeddings_pending`."""
        return self._call("embeddings_pending", {})

    def idle_seconds(self) -> float | None:
        """Seconds since this owner last answered a call, or None while it is not the
        owner, a call is in flight, or indexing or embedding is under way: what a
        background owner waits on before it exits (:mod:`contextd.runtime.background`)."""
        with self._mutex:
            engine, server, duties = self._engine, self._server, self._duties
        if engine is None or server is None or server.in_flight:
            return None
        if engine.indexer.busy or (duties is not None and duties.busy):
            return None
        return time.monotonic() - server.last_call

    def refresh(self, paths: Sequence[str] | None = None, force: bool = False, progress=None):
        """See :meth:`contextd.runtime.engine.Engine.refresh`."""
        return self._call("refresh", {"paths": paths, "force": force}, progress)

    def rebuild(self, paths: Sequence[str] | None = None, *, dry_run: bool = False,
                vacuum: bool = True, keep_errors: bool = False, wait: bool = True,
                created_by: str = "cli", progress=None):
        """See :meth:`contextd.runtime.engine.Engine.rebuild`."""
        return self._call("rebuild", {"paths": paths, "dry_run": dry_run, "vacuum": vacuum,
                                      "keep_errors": keep_errors, "wait": wait,
                                      "created_by": created_by}, progress)

    def job_status(self, job_id: str, include_logs: bool = False):
        """See :meth:`contextd.runtime.engine.Engine.job_status`."""
        return self._call("job_status", {"job_id": job_id, "include_logs": include_logs})

    def cancel_job(self, job_id: str):
        """See :meth:`contextd.runtime.engine.Engine.cancel_job`."""
        return self._call("cancel_job", {"job_id": job_id})

    def query(self, request):
        """See :meth:`contextd.runtime.engine.Engine.query`."""
        return self._call("query", {"request": request})

    def search_knowledge(self, request):
        """See :meth:`contextd.runtime.engine.Engine.search_knowledge`."""
        return self._call("search_knowledge", {"request": request})

    def get_search_results(self, session_ids: Sequence[str], limit: int | None = None):
        """See :meth:`contextd.runtime.engine.Engine.get_search_results`."""
        return self._call("get_search_results", {"session_ids": list(session_ids),
                                                 "limit": limit})

    def list_search_results(self):
        """See :meth:`contextd.runtime.engine.Engine.list_search_results`."""
        return self._call("list_search_results", {})

    # ----- agent memory: see the Engine's methods of the same names ----------------------
    def stash(self, request):
        """See :meth:`contextd.runtime.engine.Engine.stash`. Segment ids are given here, before the
        call leaves this process, so a call retried on a new owner (the old one died after
        committing) finds its segments instead of storing them twice."""
        from contextd.stash.model import with_ids

        return self._call("stash", {"request": with_ids(request)})

    def retrieve_stashed(self, request):
        return self._call("retrieve_stashed", {"request": request})

    def merge_stashed(self, segment_ids: Sequence[str], remove: bool = False):
        return self._call("merge_stashed", {"segment_ids": list(segment_ids), "remove": remove})

    def get_stashed(self, segment_ids: Sequence[str]):
        return self._call("get_stashed", {"segment_ids": list(segment_ids)})

    def list_stashed(self, session_id: str = "", all_sessions: bool = False,
                     types: Sequence[str] = (), topic: str | None = None, limit: int = 50,
                     offset: int = 0, include_expired: bool = False):
        return self._call("list_stashed", {"session_id": session_id,
                                           "all_sessions": all_sessions, "types": list(types),
                                           "topic": topic, "limit": limit, "offset": offset,
                                           "include_expired": include_expired})

    def delete_stashed(self, segment_ids: Sequence[str]):
        return self._call("delete_stashed", {"segment_ids": list(segment_ids)})

    def protect_stashed(self, segment_ids: Sequence[str], protected: bool = True):
        return self._call("protect_stashed", {"segment_ids": list(segment_ids),
                                              "protected": protected})

    def gc_stash(self):
        return self._call("gc_stash", {})

    def knowledge_create_context(self, name: str, description: str = ""):
        """See :meth:`contextd.runtime.engine.Engine.knowledge_create_context`."""
        return self._call("knowledge_create_context", {"name": name,
                                                       "description": description})

    def knowledge_list_contexts(self):
        """See :meth:`contextd.runtime.engine.Engine.knowledge_list_contexts`."""
        return self._call("knowledge_list_contexts", {})

    def knowledge_show_context(self, name: str):
        """See :meth:`contextd.runtime.engine.Engine.knowledge_show_context`."""
        return self._call("knowledge_show_context", {"name": name})

    def knowledge_delete_context(self, name: str, confirm: bool = False):
        """See :meth:`contextd.runtime.engine.Engine.knowledge_delete_context`."""
        return self._call("knowledge_delete_context", {"name": name, "confirm": confirm})

    def knowledge_add(self, paths: Sequence[str], contexts: Sequence[str] | None = None,
                      include: Sequence[str] = (), exclude: Sequence[str] = (),
                      via_mcp: bool = False, metadata: dict | None = None,
                      force_ocr: bool = False):
        """See :meth:`contextd.runtime.engine.Engine.knowledge_add`. Paths are made absolute here:
        the owner runs in another working directory."""
        return self._call("knowledge_add", {
            "paths": [os.path.abspath(os.path.expanduser(p)) for p in paths],
            "contexts": list(contexts) if contexts else None, "include": list(include),
            "exclude": list(exclude), "via_mcp": via_mcp, "metadata": metadata,
            "force_ocr": force_ocr})

    def knowledge_list_documents(self, context: str | None = None, limit: int = 100,
                                 offset: int = 0):
        """See :meth:`contextd.runtime.engine.Engine.knowledge_list_documents`."""
        return self._call("knowledge_list_documents", {"context": context, "limit": limit,
                                                       "offset": offset})

    def knowledge_remove(self, paths: Sequence[str], contexts: Sequence[str] | None = None):
        """See :meth:`contextd.runtime.engine.Engine.knowledge_remove` (paths made absolute)."""
        return self._call("knowledge_remove", {
            "paths": [p if p.startswith(KNOWLEDGE_PREFIX) else os.path.abspath(os.path.expanduser(p))
                      for p in paths],
            "contexts": list(contexts) if contexts else None})

    def stats(self) -> dict[str, Any]:
        """See :meth:`contextd.runtime.engine.Engine.stats`; adds who owns the database."""
        data = self._call("stats", {})
        owner = data.setdefault("owner", {})  # the Engine's memory figures
        if self.is_owner and not self._elects:
            # A PostgreSQL store opened by this process alone: nobody owns it.
            owner.update(pid=None, this_process=False)
        else:
            owner.update(pid=os.getpid() if self.is_owner else self.owner_pid,
                         this_process=self.is_owner)
        return data

    def progress(self, with_pending: bool = False) -> dict[str, Any]:
        """See :meth:`contextd.runtime.engine.Engine.progress`."""
        return self._call("progress", {"with_pending": with_pending})

    def job_history(self, limit: int = 50) -> list[dict[str, Any]]:
        """See :meth:`contextd.runtime.engine.Engine.job_history`."""
        return self._call("job_history", {"limit": limit})

    def errors(self, limit: int = 500) -> list[dict[str, Any]]:
        """See :meth:`contextd.runtime.engine.Engine.errors`."""
        return self._call("errors", {"limit": limit})

    def savings(self, days: int = 30) -> dict[str, Any]:
        """See :meth:`contextd.runtime.engine.Engine.savings`."""
        return self._call("savings", {"days": days})
    def add_context(self, file_path: str, content: str | None = None, lang: str | None = None,
                    mime: str | None = None) -> dict[str, Any]:
        """See :meth:`contextd.runtime.engine.Engine.add_context`."""
        return self._call("add_context", {"file_path": file_path, "content": content,
                                          "lang": lang, "mime": mime})

    def delete_context(self, file_path: str) -> dict[str, Any]:
        """See :meth:`contextd.runtime.engine.Engine.delete_context`."""
        return self._call("delete_context", {"file_path": file_path})

    def backup(self, destination: str | None = None) -> dict[str, Any]:
        """See :meth:`contextd.runtime.engine.Engine.backup`."""
        return self._call("backup", {"destination": destination})

    def reload_config(self) -> dict[str, Any]:
        """See :meth:`contextd.runtime.engine.Engine.reload_config`; this process's own view
        of the settings (budgets of the MCP tools) follows."""
        result = self._call("reload_config", {})
        if result["changed"]:
            self.project = Project(self.project.root, dataclasses.replace(
                Project.open(self.project.root, self.project.config.source).config,
                storage=self.project.config.storage))
        return result

    def reinitialize_schema(self) -> dict[str, Any]:
        """See :meth:`contextd.runtime.engine.Engine.reinitialize_schema`."""
        return self._call("reinitialize_schema", {})

    def schema_status(self) -> dict[str, Any]:
        """See :meth:`contextd.runtime.engine.Engine.schema_status`."""
        return self._call("schema_status", {})

    # ----- contextual retrieval and task usage (see the Engine) ------------------------
    def generate_context_for_chunk(self, chunk: str, document: str,
                                   metadata: dict[str, Any] | None = None,
                                   max_words: int = 100) -> dict[str, Any]:
        return self._call("generate_context_for_chunk", {
            "chunk": chunk, "document": document, "metadata": metadata,
            "max_words": max_words})

    def reindex_with_context(self, batch_size: int | None = None,
                             max_workers: int | None = None, llm_provider: str | None = None,
                             wait: bool = False) -> dict[str, Any]:
        return self._call("reindex_with_context", {
            "batch_size": batch_size, "max_workers": max_workers,
            "llm_provider": llm_provider, "wait": wait})

    def reindexing_progress(self) -> dict[str, Any]:
        return self._call("reindexing_progress", {})

    def contextual_search(self, query: str, limit: int = 10,
                          score_threshold: float | None = None, ab: bool = False,
                          expect: Sequence[str] = ()) -> dict[str, Any]:
        return self._call("contextual_search", {"query": query, "limit": limit,
                                                "score_threshold": score_threshold, "ab": ab,
                                                "expect": list(expect)})

    def contextual_stats(self) -> dict[str, Any]:
        return self._call("contextual_stats", {})

    def report_task_usage(self, task_id: str, op: str, tokens_input: int, tokens_output: int,
                          agent: str | None = None, context_tokens: int | None = None,
                          notes: str | None = None) -> dict[str, Any]:
        return self._call("report_task_usage", {
            "task_id": task_id, "op": op, "tokens_input": tokens_input,
            "tokens_output": tokens_output, "agent": agent, "context_tokens": context_tokens,
            "notes": notes})

    def token_reduction(self) -> dict[str, Any]:
        return self._call("token_reduction", {})

    # ----- routing ---------------------------------------------------------------------
    def _call(self, method: str, params: dict[str, Any], progress=None) -> Any:
        spec = rpc.METHODS[method]
        deadline = time.monotonic() + self.wait_s
        while True:
            client = self._checkout(deadline)
            if client is None:
                kwargs = dict(params, progress=progress) if progress is not None else params
                return getattr(self._engine, method)(**kwargs)
            wire = {name: to_dict(value) for name, value in params.items()}
            try:
                result = client.call(method, wire, progress)
            except rpc.PeerGone:
                client.close()
                log.info("owner: lost the owner during %s; electing again", method)
                continue
            self._release(client)
            return rpc.from_dict(rpc.resolve(spec.result), result) if spec.result else result

    def _checkout(self, deadline: float) -> rpc.Client | None:
        """A connection to the owner, or None when this process is (or just became) it."""
        delay = 0.02
        while True:
            with self._mutex:
                if self._closed.is_set():
                    raise ContextdError("this contextd engine is closed")
                if self._engine is not None:
                    return None
                if self._idle:
                    return self._idle.pop()
                if self._may_own():
                    self._become_owner(deadline)
                    return None
            try:
                client = rpc.Client.connect(self._socket, self._db)
                self.owner_pid = client.owner_pid
                return client
            except (OSError, rpc.PeerGone):
                pass  # the owner is starting or stopping; the lock tells us when it is gone
            if time.monotonic() > deadline:
                raise ContextdError(
                    f"the owner of {self._db} (pid {self._lock.holder_pid()}) is not answering "
                    f"on {self._socket}; if it is hung, stop it and retry")
            time.sleep(delay)
            delay = min(delay * 2, 0.25)

    def _may_own(self) -> bool:
        """Whether this process opens the Engine now: it won the election (a DuckDB index;
        the background owner of a PostgreSQL one), or, on PostgreSQL, no background owner
        holds the lock on this machine."""
        if self._elects:
            return self._lock.try_acquire()
        if not self._lock.path.exists():
            return True
        probe = OwnerLock(self._lock.path)
        if probe.try_acquire():
            probe.release()
            return True
        return False

    def _release(self, client: rpc.Client | None) -> None:
        if client is not None:
            with self._mutex:
                if self._closed.is_set() or self._engine is not None:
                    client.close()
                else:
                    self._idle.append(client)

    def _become_owner(self, deadline: float) -> None:
        """Open the Engine and serve it (called with the lock just taken, under the mutex)."""
        try:
            engine = self._open_engine(deadline)
        except BaseException:
            self._lock.release()
            raise
        if self._elects:
            self._server = OwnerServer(engine, self._socket, self._db).start()
        self._engine = engine
        for client in self._idle:
            client.close()
        self._idle.clear()
        log.info("owner: pid %d owns %s", os.getpid(), self._db)
        if self.duties:
            self._duties = OwnerDuties(engine).start()

    def _open_engine(self, deadline: float):
        """The Engine, retrying while a process outside this protocol (an older contextd, a
        DuckDB shell) still holds the file, rather than showing "database is locked"."""
        from contextd.runtime.engine import Engine

        while True:
            try:
                return Engine(self.project)
            except StoreError as exc:
                if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                    raise
            time.sleep(0.1)

    def _stand_by(self) -> None:
        """Take over as soon as the owner goes, so the watcher never stops for long."""
        while not self._closed.wait(STANDBY_POLL_S):
            with self._mutex:
                if self._closed.is_set() or self._engine is not None:
                    return
                try:
                    if self._may_own():
                        self._become_owner(time.monotonic() + self.wait_s)
                        return
                except ContextdError as exc:
                    log.warning("owner: cannot take over yet: %s", exc)

    def close(self) -> None:
        """Stop serving, close the Engine, release the lock; clients of this owner re-elect."""
        with self._mutex:
            if self._closed.is_set():
                return
            self._closed.set()
            if self._server is not None:
                self._server.stop()
            if self._duties is not None:
                self._duties.stop()
            if self._engine is not None:
                self._engine.close()
                self._engine = None
            self._lock.release()
            for client in self._idle:
                client.close()
            self._idle.clear()


def connect(project: Project, *, duties: bool = False, wait_s: float = DEFAULT_WAIT_S,
            serve: bool = False) -> SharedEngine:
    """The project's Engine, shared: become the owner if nobody is, else a client of the
    owner. ``duties`` (long-running processes: the MCP server, the watcher) also keeps the
    index current while owning, and takes over as soon as the owner goes. ``serve`` (the
    background owner) takes the lock and serves other processes on a PostgreSQL index too."""
    return SharedEngine(project, duties=duties, wait_s=wait_s, serve=serve).start()
