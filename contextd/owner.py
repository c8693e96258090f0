"""Shared access to one project's index: one process owns the database, the others are clients.

DuckDB lets one process write a database file, yet several MCP servers (one per agent
session), a watcher and a person's CLI all work on one project at once. So:

* **Election** — an exclusive ``flock`` on ``<db dir>/owner.lock``. The kernel releases it
  when the holder exits, however it exits (SIGKILL included), so there is never a stale
  owner to clean up. Only the lock holder opens the database, so "database is locked" cannot
  happen between contextd processes.
* **Serving** — the holder opens the :class:`contextd.engine.Engine` and serves it on a Unix
  domain socket (:mod:`contextd.rpc`). The socket lives in a private 0700 directory under
  ``$XDG_RUNTIME_DIR`` (or ``/tmp/contextd-<uid>``), named by a hash of the database path,
  because a path inside a deep project could pass the 108-byte limit of socket addresses.
* **Shared databases** — none of this applies to a PostgreSQL store: it takes many writing
  processes, so each process opens the Engine itself (:attr:`SharedEngine.is_owner` is then
  always true).
* **Takeover** — a client whose call breaks (the owner died or is shutting down) runs the
  election again: the winner opens the Engine, the others reconnect, and the call is retried,
  so a refresh in flight is not lost. A long-running process that should keep the index
  current (``duties``: the MCP server) does not wait for its next call: it polls the lock and
  takes over within a fraction of a second, then catches the index up and starts the watcher.

:func:`connect` is the entry point; it returns a :class:`SharedEngine` with the Engine's
methods, whichever role the process ends up in.
"""

from __future__ import annotations

import fcntl
import hashlib
import inspect
import logging
import os
import socket
import stat
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from contextd import rpc
from contextd.errors import ContextdError, StoreError
from contextd.project import Project
from contextd.records import to_dict
from contextd.store.base import KNOWLEDGE_PREFIX

log = logging.getLogger("contextd.owner")

# How often a process with duties checks whether the owner is gone.
STANDBY_POLL_S = 0.25
# How long a call waits for an owner (election, reconnect, Engine open) before giving up.
DEFAULT_WAIT_S = 30.0


def runtime_dir() -> Path:
    """A directory only this user can enter, for sockets: ``$XDG_RUNTIME_DIR/contextd``
    when the session has one, else ``/tmp/contextd-<uid>``."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    path = Path(base) / "contextd" if base and os.path.isdir(base) else Path(
        f"/tmp/contextd-{os.getuid()}")
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise ContextdError(f"{path} is not a directory owned by this user; remove it or set "
                            "XDG_RUNTIME_DIR to a private directory")
    if stat.S_IMODE(info.st_mode) != 0o700:
        path.chmod(0o700)
    return path


def socket_path(db_path: Path) -> str:
    """The owner socket of a database, short enough for any project path."""
    digest = hashlib.sha256(str(Path(db_path).resolve()).encode()).hexdigest()[:24]
    return str(runtime_dir() / f"{digest}.sock")


def lock_path(db_path: Path) -> Path:
    """The election lock, next to the database it guards."""
    return Path(db_path).resolve().parent / "owner.lock"


class OwnerLock:
    """The exclusive, non-blocking ``flock`` that makes a process the owner."""

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None
        self.held = False

    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it; record our pid in the file for diagnostics."""
        if self.held:
            return True
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{os.getpid()}\n".encode(), 0)
        self.held = True
        return True

    def holder_pid(self) -> int | None:
        """The pid the current owner wrote, if readable."""
        try:
            return int(self.path.read_text().strip() or 0) or None
        except (OSError, ValueError):
            return None

    def release(self) -> None:
        """Give the lock up (closing the descriptor releases it too)."""
        if self._fd is not None:
            os.close(self._fd)
        self._fd = None
        self.held = False


class _ProgressRelay:
    """Forwards the Engine's progress calls to the client that asked for them, while its call
    is in flight (a background job outlives the call; its progress then goes nowhere)."""

    def __init__(self, send):
        self._send = send
        self.active = True

    def _relay(self, call: str, *args: Any) -> None:
        if self.active:
            try:
                self._send({"jsonrpc": "2.0", "method": "progress",
                            "params": {"call": call, "args": list(args)}})
            except rpc.PeerGone:
                self.active = False

    def start(self, total_files: int, label: str = "indexing") -> None:
        self._relay("start", total_files, label)

    def update(self, files_done: int, chunks_done: int, current_file: str | None = None
               ) -> None:
        self._relay("update", files_done, chunks_done, current_file)

    def embedding(self, done: int, pending: int) -> None:
        self._relay("embedding", done, pending)

    def finish(self, message: str = "") -> None:
        self._relay("finish", message)


class OwnerServer:
    """Serves an Engine on the owner socket: one thread per client connection, so a slow
    call (a synchronous refresh) never holds up another client's query."""

    def __init__(self, engine, path: str, db_path: str):
        self.engine = engine
        self.path = path
        self.db_path = db_path
        self._listener: socket.socket | None = None
        self._conns: set[rpc.Connection] = set()
        self._guard = threading.Lock()
        self.last_call = time.monotonic()
        self.in_flight = 0

    def start(self) -> "OwnerServer":
        """Bind (replacing the socket file a dead owner left behind) and start accepting.
        Only the lock holder gets here, so unlinking cannot steal a live owner's socket."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.path)
        os.chmod(self.path, 0o600)
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept_loop, name="contextd-owner-accept",
                         daemon=True).start()
        return self

    def _accept_loop(self) -> None:
        listener = self._listener
        while True:
            try:
                sock, _ = listener.accept()
            except OSError:
                return  # stop() shut the listener down
            conn = rpc.Connection(sock)
            with self._guard:
                self._conns.add(conn)
            threading.Thread(target=self._serve, args=(conn,), name="contextd-owner-conn",
                             daemon=True).start()

    def _serve(self, conn: rpc.Connection) -> None:
        write_lock = threading.Lock()

        def send(message: dict[str, Any]) -> None:
            with write_lock:
                conn.send(message)

        try:
            if self._hello(conn.receive(), send):
                while True:
                    self._answer(conn.receive(), send)
        except rpc.PeerGone:
            pass  # the client went away, possibly mid-call; its call's work still completes
        finally:
            with self._guard:
                self._conns.discard(conn)
            conn.close()

    def _hello(self, message: dict[str, Any], send) -> bool:
        params = message.get("params") or {}
        refusal = None
        if message.get("method") != "hello":
            refusal = "expected hello first"
        elif params.get("protocol") != rpc.PROTOCOL_VERSION:
            refusal = (f"contextd owner (pid {os.getpid()}) speaks protocol "
                       f"{rpc.PROTOCOL_VERSION}, this process speaks {params.get('protocol')}: "
                       "stop the other contextd processes of this project (or upgrade them) "
                       "and retry")
        elif params.get("db") != self.db_path:
            refusal = f"this owner serves {self.db_path}, not {params.get('db')}"
        if refusal:
            send({"jsonrpc": "2.0", "id": message.get("id"),
                  "error": {"code": rpc.PROTOCOL_MISMATCH, "message": refusal,
                            "data": {"type": "ContextdError"}}})
            return False
        send({"jsonrpc": "2.0", "id": message.get("id"),
              "result": {"protocol": rpc.PROTOCOL_VERSION, "pid": os.getpid(),
                         "db": self.db_path}})
        return True

    def _answer(self, message: dict[str, Any], send) -> None:
        request_id = message.get("id")
        relay = _ProgressRelay(send) if message.get("progress") else None
        with self._guard:
            self.in_flight += 1
        try:
            result = self._dispatch(message.get("method"), message.get("params") or {}, relay)
            reply = {"jsonrpc": "2.0", "id": request_id, "result": to_dict(result)}
        except _BadRequest as exc:
            reply = {"jsonrpc": "2.0", "id": request_id,
                     "error": {"code": exc.code, "message": str(exc)}}
        except Exception as exc:  # the Engine's failure goes back to the caller, typed
            if not isinstance(exc, ContextdError):
                log.exception("owner: %s failed", message.get("method"))
            reply = {"jsonrpc": "2.0", "id": request_id, "error": rpc.encode_error(exc)}
        finally:
            if relay is not None:
                relay.active = False
            with self._guard:
                self.in_flight -= 1
                self.last_call = time.monotonic()
        send(reply)

    def _dispatch(self, method: Any, params: dict[str, Any], relay) -> Any:
        spec = rpc.METHODS.get(method) if isinstance(method, str) else None
        if spec is None:
            raise _BadRequest(rpc.METHOD_NOT_FOUND, f"unknown method {method!r}")
        kwargs = dict(params)
        for name, class_name in spec.record_params:
            if name in kwargs:
                kwargs[name] = rpc.from_dict(rpc.resolve(class_name), kwargs[name])
        if relay is not None:
            kwargs["progress"] = relay
        function = getattr(self.engine, spec.name)
        try:
            inspect.signature(function).bind(**kwargs)
        except TypeError as exc:
            raise _BadRequest(rpc.INVALID_PARAMS, f"{spec.name}: {exc}") from None
        return function(**kwargs)

    def stop(self) -> None:
        """Stop accepting, remove the socket file, and cut every client loose (they re-elect
        once the lock is released)."""
        listener, self._listener = self._listener, None
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
        with self._guard:
            conns, self._conns = list(self._conns), set()
        for conn in conns:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _BadRequest(Exception):
    """A request the owner cannot run (unknown method, wrong parameters)."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


class OwnerDuties:
    """What a long-running owner does besides answering calls: load the embedding model,
    catch the index up with the files (edits made while nobody owned it included), and keep
    it current with the watcher. Both run in threads this object joins before the Engine
    closes, so nothing is still reading the database when it does."""

    def __init__(self, engine):
        self.engine = engine
        self._watcher = None
        self._backups = None
        self._stopped = threading.Event()
        self._threads = [
            threading.Thread(target=self._warm_up, name="contextd-owner-warm-up", daemon=True),
            threading.Thread(target=self._keep_current, name="contextd-owner-index",
                             daemon=True)]

    def start(self) -> "OwnerDuties":
        for thread in self._threads:
            thread.start()
        if self.engine.project.config.storage.backup_enabled:
            from contextd.backup import BackupSchedule

            self._backups = BackupSchedule(self.engine).start()
        return self

    def _warm_up(self) -> None:
        try:
            self.engine.module.warm_up(wait=True)
        except Exception as exc:  # queries go on with the lexical and symbol providers
            log.warning("owner: the embedding model is unavailable: %s", exc)

    @property
    def busy(self) -> bool:
        """Whether the model load or the catch-up (chunks, then vectors) still runs."""
        return any(thread.is_alive() for thread in self._threads)

    def _keep_current(self) -> None:
        from contextd.watcher import Watcher

        try:
            if self.engine.project.config.watcher.enabled:
                self._watcher = Watcher(self.engine.project, self.engine.indexer).start()
            # After the watcher starts, so an edit during the catch-up is not missed.
            # Chunks first (lexical and symbol answers at once), then the vectors outside
            # the run lock, so a client's catch-up or a watcher batch never waits for them.
            if not self._stopped.is_set():
                self.engine.indexer.ensure_indexed(cancel=self._stopped, embed=False)
            if not self._stopped.is_set():
                self.engine.indexer.embed_pending(cancel=self._stopped)
        except ContextdError as exc:  # e.g. the model is not installed: said once, no trace
            log.warning("owner: background indexing stopped: %s", exc)
        except Exception:  # the owner keeps answering queries on what is indexed
            if not self._stopped.is_set():
                log.exception("owner: background indexing failed")

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel the catch-up after its current batch, let the model finish loading, and
        stop the watcher, before the Engine closes under them."""
        self._stopped.set()
        for thread in self._threads:
            if thread.ident is not None:
                thread.join(timeout)
        if self._watcher is not None:
            self._watcher.stop()
        if self._backups is not None:
            self._backups.stop()


class SharedEngine:
    """The Engine's methods, wherever the Engine lives: in this process when it won the
    election, else in the owner process, reached over the socket.

    Calls are retried across a takeover: when the owner dies mid-call, the election runs
    again and the call is repeated on the new owner (the Engine's methods are idempotent or,
    like rebuild, died with the old owner). Thread-safe; each thread uses its own connection.
    """

    def __init__(self, project: Project, *, duties: bool = False,
                 wait_s: float = DEFAULT_WAIT_S):
        self.project = project
        self.duties = duties
        self.wait_s = wait_s
        self._db = str(Path(project.db_path).resolve())
        self._socket = socket_path(project.db_path)
        self._lock = OwnerLock(lock_path(project.db_path))
        # A PostgreSQL store takes any number of writing processes (advisory locks guard its
        # rebuilds and file replaces), so every process opens it itself: no election, no socket.
        self._opens_store_itself = project.config.storage.backend != "duckdb"
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
    def ensure_indexed(self, progress=None, embed: bool = True):
        """See :meth:`contextd.engine.Engine.ensure_indexed`."""
        return self._call("ensure_indexed", {"embed": embed}, progress)

    def embeddings_pending(self) -> int:
        """See :meth:`contextd.engine.Engine.embeddings_pending`."""
        return self._call("embeddings_pending", {})

    def idle_seconds(self) -> float | None:
        """Seconds since this owner last answered a call, or None while it is not the
        owner, a call is in flight, or indexing or embedding is under way: what a
        background owner waits on before it exits (:mod:`contextd.background`)."""
        with self._mutex:
            engine, server, duties = self._engine, self._server, self._duties
        if engine is None or server is None or server.in_flight:
            return None
        if engine.indexer.busy or (duties is not None and duties.busy):
            return None
        return time.monotonic() - server.last_call

    def refresh(self, paths: Sequence[str] | None = None, force: bool = False, progress=None):
        """See :meth:`contextd.engine.Engine.refresh`."""
        return self._call("refresh", {"paths": paths, "force": force}, progress)

    def rebuild(self, paths: Sequence[str] | None = None, *, dry_run: bool = False,
                vacuum: bool = True, keep_errors: bool = False, wait: bool = True,
                created_by: str = "cli", progress=None):
        """See :meth:`contextd.engine.Engine.rebuild`."""
        return self._call("rebuild", {"paths": paths, "dry_run": dry_run, "vacuum": vacuum,
                                      "keep_errors": keep_errors, "wait": wait,
                                      "created_by": created_by}, progress)

    def job_status(self, job_id: str, include_logs: bool = False):
        """See :meth:`contextd.engine.Engine.job_status`."""
        return self._call("job_status", {"job_id": job_id, "include_logs": include_logs})

    def cancel_job(self, job_id: str):
        """See :meth:`contextd.engine.Engine.cancel_job`."""
        return self._call("cancel_job", {"job_id": job_id})

    def query(self, request):
        """See :meth:`contextd.engine.Engine.query`."""
        return self._call("query", {"request": request})

    def search_knowledge(self, request):
        """See :meth:`contextd.engine.Engine.search_knowledge`."""
        return self._call("search_knowledge", {"request": request})

    def get_search_results(self, session_ids: Sequence[str], limit: int | None = None):
        """See :meth:`contextd.engine.Engine.get_search_results`."""
        return self._call("get_search_results", {"session_ids": list(session_ids),
                                                 "limit": limit})

    def list_search_results(self):
        """See :meth:`contextd.engine.Engine.list_search_results`."""
        return self._call("list_search_results", {})

    # ----- agent memory: see the Engine's methods of the same names ----------------------
    def stash(self, request):
        """See :meth:`contextd.engine.Engine.stash`. Segment ids are given here, before the
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
                     offset: int = 0):
        return self._call("list_stashed", {"session_id": session_id,
                                           "all_sessions": all_sessions, "types": list(types),
                                           "topic": topic, "limit": limit, "offset": offset})

    def delete_stashed(self, segment_ids: Sequence[str]):
        return self._call("delete_stashed", {"segment_ids": list(segment_ids)})

    def protect_stashed(self, segment_ids: Sequence[str], protected: bool = True):
        return self._call("protect_stashed", {"segment_ids": list(segment_ids),
                                              "protected": protected})

    def gc_stash(self):
        return self._call("gc_stash", {})

    def knowledge_create_context(self, name: str, description: str = ""):
        """See :meth:`contextd.engine.Engine.knowledge_create_context`."""
        return self._call("knowledge_create_context", {"name": name,
                                                       "description": description})

    def knowledge_list_contexts(self):
        """See :meth:`contextd.engine.Engine.knowledge_list_contexts`."""
        return self._call("knowledge_list_contexts", {})

    def knowledge_show_context(self, name: str):
        """See :meth:`contextd.engine.Engine.knowledge_show_context`."""
        return self._call("knowledge_show_context", {"name": name})

    def knowledge_delete_context(self, name: str, confirm: bool = False):
        """See :meth:`contextd.engine.Engine.knowledge_delete_context`."""
        return self._call("knowledge_delete_context", {"name": name, "confirm": confirm})

    def knowledge_add(self, paths: Sequence[str], contexts: Sequence[str] | None = None,
                      include: Sequence[str] = (), exclude: Sequence[str] = (),
                      via_mcp: bool = False):
        """See :meth:`contextd.engine.Engine.knowledge_add`. Paths are made absolute here:
        the owner runs in another working directory."""
        return self._call("knowledge_add", {
            "paths": [os.path.abspath(os.path.expanduser(p)) for p in paths],
            "contexts": list(contexts) if contexts else None, "include": list(include),
            "exclude": list(exclude), "via_mcp": via_mcp})

    def knowledge_remove(self, paths: Sequence[str], contexts: Sequence[str] | None = None):
        """See :meth:`contextd.engine.Engine.knowledge_remove` (paths made absolute)."""
        return self._call("knowledge_remove", {
            "paths": [p if p.startswith(KNOWLEDGE_PREFIX) else os.path.abspath(os.path.expanduser(p))
                      for p in paths],
            "contexts": list(contexts) if contexts else None})

    def stats(self) -> dict[str, Any]:
        """See :meth:`contextd.engine.Engine.stats`; adds who owns the database."""
        data = self._call("stats", {})
        data["owner"] = {"pid": os.getpid() if self.is_owner else self.owner_pid,
                         "this_process": self.is_owner}
        return data

    def progress(self, with_pending: bool = False) -> dict[str, Any]:
        """See :meth:`contextd.engine.Engine.progress`."""
        return self._call("progress", {"with_pending": with_pending})

    def job_history(self, limit: int = 50) -> list[dict[str, Any]]:
        """See :meth:`contextd.engine.Engine.job_history`."""
        return self._call("job_history", {"limit": limit})

    def errors(self, limit: int = 500) -> list[dict[str, Any]]:
        """See :meth:`contextd.engine.Engine.errors`."""
        return self._call("errors", {"limit": limit})

    def savings(self, days: int = 30) -> dict[str, Any]:
        """See :meth:`contextd.engine.Engine.savings`."""
        return self._call("savings", {"days": days})
    def add_context(self, file_path: str, content: str | None = None, lang: str | None = None,
                    mime: str | None = None) -> dict[str, Any]:
        """See :meth:`contextd.engine.Engine.add_context`."""
        return self._call("add_context", {"file_path": file_path, "content": content,
                                          "lang": lang, "mime": mime})

    def delete_context(self, file_path: str) -> dict[str, Any]:
        """See :meth:`contextd.engine.Engine.delete_context`."""
        return self._call("delete_context", {"file_path": file_path})

    def backup(self, destination: str | None = None) -> dict[str, Any]:
        """See :meth:`contextd.engine.Engine.backup`."""
        return self._call("backup", {"destination": destination})

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
                if self._opens_store_itself or self._lock.try_acquire():
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
        if not self._opens_store_itself:
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
        from contextd.engine import Engine

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
                    if self._lock.try_acquire():
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


def connect(project: Project, *, duties: bool = False,
            wait_s: float = DEFAULT_WAIT_S) -> SharedEngine:
    """The project's Engine, shared: become the owner if nobody is, else a client of the
    owner. ``duties`` (long-running processes: the MCP server, the watcher) also keeps the
    index current while owning, and takes over as soon as the owner goes."""
    return SharedEngine(project, duties=duties, wait_s=wait_s).start()
