"""Answer at once, improve in the background: the CLI side of a long first embedding.

A first ``contextd query`` on a large repository used to sit for minutes embedding before it
answered. Chunking (the lexical and symbol indexes) runs at ~100k lines/s; embedding at
~150 chunks/s. So a command run by a person indexes the chunks, answers from them at once
with a note that semantic results are still being computed, and hands the vectors to a
background owner process: ``contextd owner`` (hidden), started detached, which takes the
owner lock as soon as the command exits (:mod:`contextd.runtime.owner`), computes the vectors in the
order that pays first, watches the files, serves later CLI and MCP calls warm, and exits
after ``[owner] idle_exit_seconds`` without calls once its work is done.

The hand-off is decided by time, not size: the command reads files until ``[owner]
index_within_seconds`` after it started, its imports included (source first; a 3,000-file
project takes 8-15 s to read whole, and the owner resumes the rest) and embeds in-line only
what fits in ``[owner] answer_within_seconds`` (counted from the start of its reading,
chunking included, at a deliberately low rate), so a first answer comes within a few
seconds on any project, and no process is left behind when everything fit (unless loading
the indexes was slow: :func:`keeps_warm`). A command that reaches a running
owner never waits for its catch-up nor asks it for vectors: the owner reads and computes them
in the background (its duties), and the command answers from what is ready. ``[owner]
background = false`` turns the hand-off off.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Sequence

from contextd.config.project import Project
from contextd.crypto import side_file

log = logging.getLogger(__name__)

# Log file of the background owner, next to the database.
OWNER_LOG = "owner.log"
# How long a freshly started background owner waits to take the lock over.
TAKEOVER_WAIT_S = 60.0
# How often the background owner checks whether it has been idle long enough.
IDLE_CHECK_S = 1.0
# How long ``contextd stop`` waits for the owner to let go of the index before SIGKILL.
STOP_WAIT_S = 10.0
# How long a background owner told to stop lets its Engine close before it exits anyway: an
# embedding window under way (up to ~20 s on a busy machine) is given up, not finished; its
# texts have no vector yet and are embedded by the next owner.
CLOSE_WAIT_S = 2.0
# The embedding rate a command assumes when deciding what it can embed in-line: the rate of
# the loaded shared machine of issue 26 (35-46 chunks/s), not the quiet one (~150), so the
# estimate errs towards answering at once.
INLINE_CHUNKS_PER_S = 40.0
# The least reading window a command keeps, however long its start took (``[owner]
# index_within_seconds`` counts from the command's start): a 30-file project is read whole in
# it at load 4, and fastapi's 2,855 files are listed (the walk, ~0.6 s at load 4).
MIN_WINDOW_S = 0.5


@dataclass(frozen=True)
class Handoff:
    """What :func:`index_for_command` did: files it had no time to read (``files_left``,
    resumed by the background) and vectors left for the background (``pending`` chunk
    texts), or none; ``start_owner``: this process owns the index, so a background owner
    must be started to take the work over (a running owner does it already)."""

    pending: int = 0
    start_owner: bool = False
    files_left: int = 0
    catching_up: bool = False

    @property
    def handed_off(self) -> bool:
        return self.pending > 0 or self.files_left > 0 or self.catching_up

    def note(self, notes: Sequence[str] = ()) -> str | None:
        """The note of an answer handed off (``notes``: the answer's other notes, which say
        whether a provider was left out); None when they already say what is missing (an
        owner answering while it indexes says it itself)."""
        # Imported here: the owner process starts from this module and must take the index
        # over at once, before the query stack is loaded.
        from contextd.runtime.indexing_notes import (STILL_INDEXING, SEMANTIC_PENDING,
                                                     ready_results, says_incomplete)

        if self.files_left or self.catching_up:
            if says_incomplete(notes, files=True):
                return None
            if self.catching_up:
                return (f"{STILL_INDEXING}the background owner is catching up with the "
                        "project's files, so this answer may miss files not read yet; retry "
                        "in a few seconds. 'contextd stats' shows how far it is")
            return (f"{STILL_INDEXING}{self.files_left:,} files are not read yet (this answer "
                    "comes from those read first, source code before docs and tests); the "
                    "background owner reads them, then computes the vectors: retry in a few "
                    "seconds for a complete answer. 'contextd stats' shows how far it is")
        if says_incomplete(notes):
            return None
        return (f"{SEMANTIC_PENDING} in the background ({self.pending:,} chunks to embed); "
                f"{ready_results(notes)}. 'contextd stats' shows how far the embedding is")


def index_for_command(engine: Any, project: Project, progress: Any,
                      started: float | None = None) -> Handoff:
    """Bring the index up to date for a command run by a person, as far as it can in a few
    seconds: the files it reads until ``[owner] index_within_seconds`` after the command
    started (source first; the lexical and symbol answers), the vectors only when they fit
    in ``[owner] answer_within_seconds``; the rest is handed to the background. A command
    reaching a running owner does not wait for the owner's own catch-up either: it answers
    from what is indexed, and the answer says what is not.

    ``started``: the command's start, a ``time.perf_counter()`` reading (the CLI's: the
    start of Python), default now. The window is counted from there, not from the first
    file read, because a person waits for the interpreter, the imports and the opening of
    the index too (issue 37: ~1.2 s of them before a 1.5 s window made a 4.4 s first
    answer); the answer still searches the text of the files not read (the unread scan)."""
    from contextd.indexer.report import BUSY

    owner = project.config.owner
    if not owner.background:
        engine.ensure_indexed(progress=progress)
        return Handoff()
    began = time.perf_counter()  # answer_within_seconds counts from here, chunking included
    started = began if started is None else started
    is_owner = getattr(engine, "is_owner", False)
    # An owner reached over its socket reads under the same limit: its own catch-up resumes
    # what this call leaves.
    report = engine.ensure_indexed(progress=progress, embed=False, wait=False,
                                   within_s=reading_window(owner.index_within_seconds, started))
    files_left = report.files_left if report.cancelled else 0
    catching_up = report.mode == BUSY  # the owner's own catch-up holds the index
    # The vectors count only once every file is read: with files left, or an owner still
    # catching up, the answer's note says so and the owner embeds after reading. Not asked
    # then: a count over the chunks, in an owner busy reading (0.08-0.18 s a call at load 10).
    pending = 0 if files_left or catching_up else engine.embeddings_pending()
    if not pending and not files_left and not catching_up:
        return Handoff()
    seconds_left = owner.answer_within_seconds - (time.perf_counter() - began)
    if is_owner and not files_left and not catching_up and _fits(project, pending,
                                                                 seconds_left):
        engine.ensure_indexed(progress=progress)  # nothing to chunk: only the vectors
        return Handoff()
    return Handoff(pending, start_owner=is_owner, files_left=files_left,
                   catching_up=catching_up)


def reading_window(configured: float, started: float) -> float | None:
    """The seconds a command started at ``started`` (a ``time.perf_counter()`` reading) may
    still read files: what is left of ``configured`` (``[owner] index_within_seconds``; 0:
    no limit, None), and never less than MIN_WINDOW_S (or ``configured`` when smaller), in
    which a small project is read whole, and a large one lists its files (the walk, which the
    unread scan and the background owner need)."""
    if not configured:
        return None
    return max(min(configured, MIN_WINDOW_S), configured - (time.perf_counter() - started))


def keeps_warm(engine: Any, project: Project, response: Any) -> bool:
    """Whether a command that answered as the index's owner should leave a background owner
    behind although nothing is left to do: its providers took over ``[owner]
    warm_after_load_ms`` to load their indexes, so every command after it would too
    (fastapi's 59,598 chunks: ~2.5 s in a cold process, answers in ~0.3 s from a warm owner).
    The owner exits after ``[owner] idle_exit_seconds`` without calls."""
    from contextd.query.records import LOAD_TIMING

    owner = project.config.owner
    return (getattr(engine, "is_owner", False) and owner.background
            and bool(owner.warm_after_load_ms)
            and response.timings_ms.get(LOAD_TIMING, 0.0) >= owner.warm_after_load_ms)


def _fits(project: Project, pending: int, seconds: float) -> bool:
    """Whether ``pending`` texts embed in ``seconds`` at INLINE_CHUNKS_PER_S, with a model
    that loads without an export (a first export takes torch half a minute)."""
    from contextd.embedders.registry import get_embedder

    if seconds <= 0 or pending > seconds * INLINE_CHUNKS_PER_S:
        return False
    return bool(getattr(get_embedder(project.config.embedding), "prepared", True))


def contextd_command(root: Any, config_path: Any = None) -> list[str]:
    """The command line of a contextd child process for the project at ``root``: this
    interpreter with ``-P``, so a folder named ``contextd`` in the working directory (a
    project's own, or the folder the parent was started in) is not imported instead of
    the package (the child's working directory is the project root)."""
    command = [sys.executable, "-P", "-m", "contextd", "--root", str(root)]
    return command + (["--config", str(config_path)] if config_path else [])


def start_background_owner(project: Project, engine: Any = None) -> int:
    """Start ``contextd owner`` for ``project``, detached (own session: a Ctrl-C in the
    terminal does not reach it), logging to ``<db dir>/owner.log``; returns its pid.
    ``engine``: this process's, when it owns the index: the owner lock is handed on to the
    new process (:class:`contextd.runtime.election.OwnerLock`), so that the lock is never
    free while it starts and a command run meanwhile waits for its hello instead of becoming
    a second owner. Also marked as starting (:mod:`contextd.runtime.starting_owner`) until
    it serves, for an index whose lock nobody held (PostgreSQL)."""
    from contextd.runtime import starting_owner

    owner_lock = getattr(engine, "owner_lock", None)
    lock_fd = owner_lock.handed_on() if owner_lock is not None else None
    command = contextd_command(project.root, project.config.source) + ["owner"]
    if lock_fd is not None:
        command += ["--lock-fd", str(lock_fd)]
    # Beside the database, or in the private folder of a decrypted one; made if missing (a
    # PostgreSQL project has no database file, so nothing has made the folder yet).
    log_path = side_file(project, OWNER_LOG)
    with open(log_path, "ab") as log_file:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=log_file, start_new_session=True, close_fds=True,
                                 pass_fds=() if lock_fd is None else (lock_fd,),
                                 cwd=str(project.root))
    starting_owner.mark(project.db_path, child.pid)
    log.info("background owner started (pid %d), logging to %s", child.pid, log_path)
    return child.pid


def run_background_owner(project: Project, lock_fd: int | None = None) -> None:
    """The body of ``contextd owner``: take the index over (the command that started this
    process still holds it for a moment), let the owner duties finish the embedding and
    watch, and leave after ``idle_exit_seconds`` without calls once nothing is running, or
    as soon as the project's folder is deleted (a removed checkout or temporary project
    would otherwise keep its owner, and its memory, for up to 15 minutes). Leaves at once
    when another long-running process (an MCP server) owns the index: that one does the
    work. ``lock_fd``: the owner lock, handed on by the command that started this process
    (:func:`start_background_owner`)."""
    from contextd.runtime import starting_owner
    from contextd.runtime.job_log import log_to_owner_file
    from contextd.runtime.owner import connect

    log_to_owner_file(side_file(project, OWNER_LOG))
    log.info("background owner started for %s", project.root)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop.set())
    engine = connect(project, duties=True, wait_s=TAKEOVER_WAIT_S, serve=True,
                     lock_fd=lock_fd)
    try:
        waited = 0.0
        while not engine.is_owner and waited < TAKEOVER_WAIT_S and not stop.is_set():
            stop.wait(0.1)
            waited += 0.1
        if not engine.is_owner:
            return
        idle_limit = project.config.owner.idle_exit_seconds
        while not stop.wait(IDLE_CHECK_S):
            if not project.root.is_dir():  # nothing left to keep current or to answer for
                log.info("background owner: the project folder %s is gone, exiting",
                         project.root)
                stop.set()  # its work under way is given up, as when told to stop
                break
            idle = engine.idle_seconds()
            if idle is not None and idle >= idle_limit:
                log.info("background owner: idle for %.0f s, exiting", idle)
                break
    finally:
        starting_owner.clear(project.db_path, os.getpid())  # served, or gave up
        closing = threading.Thread(target=engine.close, name="contextd-close", daemon=True)
        closing.start()
        closing.join(CLOSE_WAIT_S if stop.is_set() else None)
    os._exit(0)  # the same reason as serve: native threads must not see finalisation


def owner_command_line(pid: int) -> str:
    """The command line of process ``pid`` ('' when it cannot be read), to say what stops."""
    try:
        raw = open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        return ""
    return " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)


def stop_owner(project: Project, wait_s: float = STOP_WAIT_S) -> dict[str, Any]:
    """Stop the process that owns the project's index on this machine (the background owner,
    a watcher or an MCP server), so that ``restore`` may replace the database: SIGTERM, then
    wait until the owner lock is free (SIGKILL after ``wait_s``; the kernel frees the lock
    of a killed process). Returns ``pid`` (None: nothing owned it), ``command`` and
    ``forced``."""
    from contextd.runtime.election import OwnerLock, lock_path

    lock = OwnerLock(lock_path(project.db_path))
    if not lock.path.exists() or lock.try_acquire():
        lock.release()
        return {"pid": None, "command": "", "forced": False, "seconds": 0.0}
    pid = lock.holder_pid()
    command = owner_command_line(pid) if pid else ""
    if not pid:
        return {"pid": pid, "command": command, "forced": False, "seconds": 0.0}
    started = time.monotonic()
    forced = False
    os.kill(pid, signal.SIGTERM)
    while not lock.try_acquire():
        if time.monotonic() - started > wait_s and not forced:
            os.kill(pid, signal.SIGKILL)
            forced = True
        time.sleep(0.05)
    lock.release()
    return {"pid": pid, "command": command, "forced": forced,
            "seconds": round(time.monotonic() - started, 2)}
