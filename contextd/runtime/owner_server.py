"""What the owner process runs: the socket server that answers other processes' calls on
its Engine, and the duties of a long-running owner (model load, catch-up, watcher, backups).
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import threading
import time
from typing import Any

from contextd.errors import ContextdError
from contextd.operations import OPERATIONS, wire_shape
from contextd.records import to_dict
from contextd.runtime import rpc

log = logging.getLogger("contextd.runtime.owner")

# How long an owner's start waits for its catch-up to take the run lock (a run of another
# thread holding it, if any, goes first; the catch-up then waits its turn).
HOLD_WAIT_S = 5.0


class _ProgressRelay:
    """Forwards the Engine's progress calls to the client that asked for them, while its call
    is in flight (a background job outlives the call; its progress then goes nowhere). Its
    methods are the Progress calls a client replays (:data:`contextd.runtime.rpc.PROGRESS_CALLS`),
    so the two ends name them in one place."""

    def __init__(self, send):
        self._send = send
        self.active = True

    def __getattr__(self, call: str) -> Any:
        if call not in rpc.PROGRESS_CALLS:
            raise AttributeError(call)
        return functools.partial(self._relay, call)

    def _relay(self, call: str, *args: Any) -> None:
        if self.active:
            try:
                self._send({"jsonrpc": "2.0", "method": "progress",
                            "params": {"call": call, "args": list(args)}})
            except rpc.PeerGone:
                self.active = False


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
        self._bound: tuple[int, int] | None = None

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
        self._bound = _identity(self.path)
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
        elif params.get("operations") != wire_shape():
            refusal = (f"contextd owner (pid {os.getpid()}) was built from other operations "
                       "than this process (another contextd version): stop the other contextd "
                       "processes of this project (or upgrade them) and retry")
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
        op = OPERATIONS.get(method) if isinstance(method, str) else None
        if op is None:
            raise _BadRequest(rpc.METHOD_NOT_FOUND, f"unknown method {method!r}")
        try:
            request = op.decode(params)
        except TypeError as exc:
            raise _BadRequest(rpc.INVALID_PARAMS, f"{op.name}: {exc}") from None
        return self.engine.call(op.name, request, relay)

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
            # Only the file this server bound: when the project's folder was deleted and
            # made again, another owner (of the new lock file) may have bound the same path
            # since, and removing its socket left it unreachable.
            if _identity(self.path) == self._bound:
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


def _identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``, or None when there is none."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


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
        # Set once the catch-up holds the indexer's run lock (start() waits for it).
        self._holding = threading.Event()
        self._threads = [
            threading.Thread(target=self._warm_up, name="contextd-owner-warm-up", daemon=True),
            threading.Thread(target=self._keep_current, name="contextd-owner-index",
                             daemon=True)]

    def start(self) -> "OwnerDuties":
        from contextd.runtime.job_log import JobLog

        # This process stays up: a refresh or a watcher batch returns once its chunks are
        # written, their vectors follow (no command waits behind the embedding backlog),
        # each round logged as the "embedding" job.
        interval = self.engine.project.config.bootstrap.progress_interval_seconds
        self.engine.indexer.follow_vectors(lambda: JobLog(interval))
        for thread in self._threads:
            thread.start()
        # The catch-up takes the run lock before this owner answers anyone: a command that
        # came first (a second query right after the first) would otherwise read files in
        # the owner for its whole window (1.5-2.3 s) and wait for it, where the owner's
        # catch-up tells it "busy" and it answers at once from what is indexed.
        self._holding.wait(HOLD_WAIT_S)
        if self.engine.project.config.storage.backup_enabled:
            from contextd.runtime.backup import BackupSchedule

            self._backups = BackupSchedule(self.engine).start()
        return self

    def _warm_up(self) -> None:
        try:
            self.engine.module.pipeline.warm_up(wait=True)
        except Exception as exc:  # queries go on with the lexical and symbol providers
            log.warning("owner: the embedding model is unavailable: %s", exc)

    @property
    def busy(self) -> bool:
        """Whether the model load or the catch-up (chunks, then vectors) still runs."""
        return any(thread.is_alive() for thread in self._threads)

    def _keep_current(self) -> None:
        from contextd.runtime.job_log import JobLog
        from contextd.runtime.watcher import Watcher

        interval = self.engine.project.config.bootstrap.progress_interval_seconds
        try:
            with self.engine.indexer.running():
                self._holding.set()
                if self.engine.project.config.watcher.enabled:
                    self._watcher = Watcher(self.engine.project, self.engine.indexer,
                                            on_batch=self._written).start()
                # After the watcher starts, so an edit during the catch-up is not missed.
                # Chunks first (lexical and symbol answers at once), then the vectors outside
                # the run lock, so a client's catch-up or a watcher batch never waits for them.
                if not self._stopped.is_set():
                    report = self.engine.indexer.ensure_indexed(
                        cancel=self._stopped, embed=False, progress=JobLog(interval))
                    self._written([], report)
                    if self._watcher is not None and not report.cancelled:
                        self.engine.watcher = self._watcher
            if not self._stopped.is_set():  # by the follower: one embedding loop at a time
                follower = self.engine.indexer.follow_vectors()
                follower.wake()
                follower.wait()
        except ContextdError as exc:  # e.g. the model is not installed: said once, no trace
            log.warning("owner: background indexing stopped: %s", exc)
        except Exception:  # the owner keeps answering queries on what is indexed
            if not self._stopped.is_set():
                log.exception("owner: background indexing failed")
        finally:
            self._holding.set()

    def _written(self, paths: list[str], report) -> None:
        """A watcher's batch or the catch-up changed the index: the answers' in-memory
        indexes follow now, not in the next answer (issue 37: after the owner's catch-up
        of fastapi, 59k chunks, the first answer after a ``git checkout`` took them all in:
        22 s at load 8)."""
        if report.files_indexed or report.files_removed:
            self.engine.take_in_written()

    @property
    def catching_up(self) -> bool:
        """Whether the catch-up (files to read, then vectors to compute) still runs."""
        return self._threads[1].is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel the catch-up after its current batch, let the model finish loading, and
        stop the watcher, before the Engine closes under them."""
        self._stopped.set()
        self.engine.watcher = None
        self.engine.indexer.follow_vectors().stop(timeout)
        for thread in self._threads:
            if thread.ident is not None:
                thread.join(timeout)
        if self._watcher is not None:
            self._watcher.stop()
        if self._backups is not None:
            self._backups.stop()
