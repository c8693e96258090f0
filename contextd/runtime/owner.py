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
* **A starting owner** — a command that starts a background owner hands it the lock's
  descriptor (:class:`contextd.runtime.election.OwnerLock`): the lock is never free between
  the command and its successor, so a process arriving while that owner still imports waits
  for its hello and asks it, rather than take the lock and read files in-line as a second
  owner. Where the lock was not handed on (a PostgreSQL index) a marker beside the database
  (:mod:`contextd.runtime.starting_owner`) makes a process that finds the lock free wait for
  the starting owner a second or two.
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
from typing import Any

from contextd.operations import OPERATIONS, expose, wire_shape
from contextd.operations.records import EngineStats
from contextd.runtime import rpc, starting_owner
from contextd.runtime.election import OwnerLock, lock_path, socket_path
from contextd.runtime.owner_server import OwnerDuties, OwnerServer
from contextd.errors import ContextdError, StoreError
from contextd.config.project import Project

log = logging.getLogger("contextd.runtime.owner")

# How often a process with duties checks whether the owner is gone.
STANDBY_POLL_S = 0.25
# How long a call waits for an owner (election, reconnect, Engine open) before giving up.
DEFAULT_WAIT_S = 30.0


class SharedEngine:
    """The Engine's operations, wherever the Engine lives: in this process when it won the
    election, else in the owner process, reached over the socket. Each operation declared in
    :mod:`contextd.operations` is a method of the same name, which comes to :meth:`call`.

    Calls are retried across a takeover: when the owner dies mid-call, the election runs
    again and the call is repeated on the new owner (the Engine's methods are idempotent or,
    like rebuild, died with the old owner). Thread-safe; each thread uses its own connection.
    """

    def __init__(self, project: Project, *, duties: bool = False,
                 wait_s: float = DEFAULT_WAIT_S, serve: bool = False,
                 context_type: type | None = None,
                 starting_wait_s: float = starting_owner.WAIT_S,
                 lock_fd: int | None = None):
        self.project = project
        self._context_type = context_type
        self.duties = duties
        self.wait_s = wait_s
        # How long this process leaves a free lock to a background owner still starting,
        # and since when it has (None: it is not waiting for one).
        self.starting_wait_s = starting_wait_s
        self._awaiting_since: float | None = None
        self._db = str(Path(project.db_path).resolve())
        self._socket = socket_path(project.db_path)
        # lock_fd: the owner lock's descriptor, handed on by the command that started this
        # process (a background owner), which holds the lock already (OwnerLock). Read by
        # whoever starts a background owner, to hand it on in turn (OwnerLock.handed_on).
        self.owner_lock = OwnerLock(lock_path(project.db_path), inherited_fd=lock_fd)
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

    @property
    def engine(self) -> Any:
        """The Engine, while this process owns the index (else None)."""
        return self._engine

    def try_own(self) -> bool:
        """Open the Engine here if nobody owns the index (no waiting, no connection to an
        owner): True when this process owns it now."""
        with self._mutex:
            if self._engine is None and self._may_own():
                self._become_owner(time.monotonic() + self.wait_s)
            return self._engine is not None

    def start(self) -> "SharedEngine":
        """Win the election or connect to the owner; a process with duties then stands by
        to take over when the owner goes."""
        self._release(self._checkout(time.monotonic() + self.wait_s))
        if self.duties and not self.is_owner:
            threading.Thread(target=self._stand_by, name="contextd-standby",
                             daemon=True).start()
        return self

    # ----- the operations: one method per declared operation (installed by expose) -------
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

    def stats(self) -> EngineStats:
        """The ``stats`` operation, and who owns the database."""
        data = self.call("stats", {})
        if self.is_owner and not self._elects:
            # A PostgreSQL store opened by this process alone: nobody owns it.
            who = {"pid": None, "this_process": False}
        else:
            who = {"pid": os.getpid() if self.is_owner else self.owner_pid,
                   "this_process": self.is_owner}
        return dataclasses.replace(data, owner={**data.owner, **who})

    def reload_config(self) -> dict[str, Any]:
        """The ``reload_config`` operation; this process's own view of the settings (budgets
        of the MCP tools) follows."""
        result = self.call("reload_config", {})
        if result["changed"]:
            self.project = Project(self.project.root, dataclasses.replace(
                Project.open(self.project.root, self.project.config.source).config,
                storage=self.project.config.storage))
        return result

    @property
    def reading_unfinished(self) -> bool:
        """Whether this process owns the index and its catch-up is still reading the
        project: work that a long-running owner whose client went away (an MCP session
        ended) hands to a background owner (:func:`contextd.mcp.engine_handle.EngineHandle.close`)
        rather than leave until the next session starts (issue 40). Vectors alone still to
        compute wait for the next owner: the index answers lexically and by symbol meanwhile,
        and no process is left behind for them."""
        with self._mutex:
            engine, duties = self._engine, self._duties
        return engine is not None and duties is not None and duties.catching_up \
            and engine.indexer.reading_project

    # ----- routing ---------------------------------------------------------------------
    def call(self, name: str, params: dict[str, Any], progress=None) -> Any:
        """Run a declared operation (:mod:`contextd.operations`) on the Engine: this
        process's when it owns the index, else the owner's, over the socket."""
        op = OPERATIONS[name]
        params = op.prepared(params)
        deadline = time.monotonic() + self.wait_s
        while True:
            client = self._checkout(deadline)
            if client is None:
                return self._engine.call(name, params, progress)
            try:
                result = client.call(name, op.encode(params), progress)
            except rpc.PeerGone:
                client.close()
                log.info("owner: lost the owner during %s; electing again", name)
                continue
            self._release(client)
            return op.decode_result(result)

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
                client = rpc.Client.connect(self._socket, self._db, wire_shape())
                self.owner_pid = client.owner_pid
                self._awaiting_since = None
                return client
            except (OSError, rpc.PeerGone):
                pass  # the owner is starting or stopping; the lock tells us when it is gone
            if time.monotonic() > deadline:
                raise ContextdError(
                    f"the owner of {self._db} (pid {self.owner_lock.holder_pid()}) is not "
                    f"answering on {self._socket}; if it is hung, stop it and retry")
            time.sleep(delay)
            delay = min(delay * 2, 0.1)  # a starting owner's hello is awaited closely

    def _may_own(self) -> bool:
        """Whether this process opens the Engine now: it won the election (a DuckDB index;
        the background owner of a PostgreSQL one), or, on PostgreSQL, no background owner
        holds the lock on this machine. Neither while a background owner started by another
        command is on its way (:meth:`_awaits_starting_owner`)."""
        if self._awaits_starting_owner():
            return False
        if self._elects:
            return self.owner_lock.try_acquire()
        if not self.owner_lock.path.exists():
            return True
        probe = OwnerLock(self.owner_lock.path)
        if probe.try_acquire():
            probe.release()
            return True
        return False

    def _awaits_starting_owner(self) -> bool:
        """Whether to leave the lock to a background owner that another command started and
        that has not taken over yet: for up to ``starting_wait_s`` without an owner to talk
        to, then this process may own the index itself (a connection to an owner starts
        the count again)."""
        pid = starting_owner.starting_pid(self._db)
        if pid is None:
            return False
        now = time.monotonic()
        if self._awaiting_since is None:
            self._awaiting_since = now
            log.info("owner: waiting for the background owner (pid %d) to start", pid)
        return now - self._awaiting_since < self.starting_wait_s

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
            self.owner_lock.release()
            raise
        # Duties before the server: their catch-up holds the run lock before any other
        # process's call can run a reading window of its own here (OwnerDuties.start).
        if self.duties:
            self._duties = OwnerDuties(engine).start()
        try:
            if self._elects:
                self._server = OwnerServer(engine, self._socket, self._db).start()
        except BaseException:
            if self._duties is not None:
                self._duties.stop()
                self._duties = None
            engine.close()
            self.owner_lock.release()
            raise
        self._engine = engine
        starting_owner.clear(self._db, os.getpid())  # announced as starting: it serves now
        for client in self._idle:
            client.close()
        self._idle.clear()
        log.info("owner: pid %d owns %s", os.getpid(), self._db)

    def _open_engine(self, deadline: float):
        """The Engine, retrying while a process outside this protocol (an older contextd, a
        DuckDB shell) still holds the file, rather than showing "database is locked"."""
        from contextd.runtime.engine import Engine

        while True:
            try:
                return Engine(self.project, context_type=self._context_type)
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
            self.owner_lock.release()
            for client in self._idle:
                client.close()
            self._idle.clear()


expose(SharedEngine)


def connect(project: Project, *, duties: bool = False, wait_s: float = DEFAULT_WAIT_S,
            serve: bool = False, starting_wait_s: float = starting_owner.WAIT_S,
            lock_fd: int | None = None) -> SharedEngine:
    """The project's Engine, shared: become the owner if nobody is, else a client of the
    owner. ``duties`` (long-running processes: the MCP server, the watcher) also keeps the
    index current while owning, and takes over as soon as the owner goes. ``serve`` (the
    background owner) takes the lock and serves other processes on a PostgreSQL index too;
    ``lock_fd``: the lock as the command that started the background owner handed it on."""
    return SharedEngine(project, duties=duties, wait_s=wait_s, serve=serve,
                        starting_wait_s=starting_wait_s, lock_fd=lock_fd).start()
