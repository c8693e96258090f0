"""Per-file work: read, hash, decode, scrub, chunk, contextualize (index texts).

Pure functions of (file, configuration) with no store access, so they run the same in a
worker process (bootstrap) or inline (a watcher batch of a few files). Secrets are scrubbed
from the decoded text *before* chunking, so nothing derived from the file (chunk text, labels,
symbols, references, index text) can hold one; the content hash is that of the original bytes.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import signal
import traceback
from dataclasses import dataclass
from typing import Iterator, Sequence

import blake3

from contextd.chunkers.chunking import chunk_file
from contextd.config.sections import ContextConfig
from contextd.contextualizers.stage import index_texts
from contextd.indexer.lifeline import die_with
from contextd.indexer.plan import FileTask
from contextd.scrub.scrubber import Scrubber, get_scrubber
from contextd.store.base import FileRecord, IndexedChunk
from contextd.text.long_lines import cap_long_lines

INDEXED, SAME, FAILED, VANISHED = "indexed", "same", "failed", "vanished"


@dataclass(frozen=True)
class Outcome:
    """The result for one file: ``INDEXED`` with a record, ``SAME`` (content unchanged, only
    size/mtime to refresh), ``FAILED`` with an error, or ``VANISHED`` (deleted meanwhile).
    An ``INDEXED`` file may carry an error too: it could not be parsed and was indexed as
    line windows."""

    task: FileTask
    status: str
    record: FileRecord | None = None
    lines: int = 0
    error_type: str = ""
    message: str = ""
    trace: str | None = None


def scrubber_for(config: ContextConfig) -> Scrubber:
    """The scrubber of a configuration (compiled once per process)."""
    security = config.security
    return get_scrubber(security.scrub_secrets, tuple(security.secret_patterns))


def process_file(task: FileTask, config: ContextConfig, store=None) -> Outcome:
    """Index one file; never raises for a problem of the file itself. ``store``: where a
    contextualizer that caches its prefixes keeps them (only in the indexer's process)."""
    try:
        with open(task.abs_path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return Outcome(task, VANISHED)
    except OSError as exc:
        return Outcome(task, FAILED, error_type="read_error", message=str(exc))
    return process_data(task, data, config, store)


def process_data(task: FileTask, data: bytes, config: ContextConfig, store=None) -> Outcome:
    """Index the bytes of one file, read from disk by :func:`process_file` or pushed through
    the service's ``add_context`` (the same scrubbing, chunking and contextualizing)."""
    digest = blake3.blake3(data).hexdigest()
    if digest == task.known_hash:
        return Outcome(task, SAME)
    try:
        text, warnings = decode_source(data)
    except UnicodeDecodeError as exc:
        return Outcome(task, FAILED, error_type="decode_error", message=exc.reason)
    return index_text(task, text, digest, config, store, warnings=warnings)


def decode_source(data: bytes) -> tuple[str, tuple[str, ...]]:
    """The text of a file that passed the binary sniff, and a warning when it is not UTF-8.

    Such a file is most often an old single-byte text (a ``# café`` comment in Latin-1 or
    Windows-1252): dropping it whole for one accented letter loses every line of code around
    it. It is read as Windows-1252 (a superset of Latin-1's letters), and the file keeps a
    warning naming the fallback. The digest stays that of the bytes on disk, so an unchanged
    file is not read again. A byte Windows-1252 leaves undefined (0x81, 0x8D, 0x8F, 0x90,
    0x9D) says the file is in another encoding (Shift-JIS and GBK use them as lead bytes),
    whose letters a single-byte reading would turn into noise in the index and the answers:
    UnicodeDecodeError, whose ``reason`` names both decodings, and the file is recorded as a
    ``decode_error`` for its owner to convert."""
    try:
        return data.decode("utf-8"), ()
    except UnicodeDecodeError as exc:
        where = f"not valid UTF-8 ({exc.reason} at byte {exc.start})"
    try:
        return data.decode("cp1252"), (f"{where}: decoded as Windows-1252",)
    except UnicodeDecodeError as exc:
        raise UnicodeDecodeError(
            "cp1252", data, exc.start, exc.end,
            f"{where}, nor Windows-1252 (byte 0x{data[exc.start]:02x} at {exc.start} is "
            "undefined there): convert the file to UTF-8") from None


def index_text(task: FileTask, text: str, digest: str, config: ContextConfig, store=None,
               chunk_as: str | None = None, warnings: tuple[str, ...] = ()) -> Outcome:
    """Scrub, chunk and contextualize the decoded text of ``task`` (``digest``: BLAKE3 of
    its original bytes). ``chunk_as``: the path whose extension picks the chunker, when
    the text is not the file's own (a PDF's or an HTML page's text is chunked as text or
    Markdown; the knowledge base uses it)."""
    scrubber = scrubber_for(config)
    scrubbed = scrubber.scrub(text, task.path)
    if scrubbed.redactions:
        text = scrubbed.text
    text, cut = cap_long_lines(text)  # one 2 MB line must not become 2,000 chunks
    data = text.encode("utf-8")
    try:
        chunked = chunk_file(chunk_as or task.path, data, config)
        # The contextualizer stage: what gets embedded and BM25-indexed for each chunk.
        texts = index_texts(text, task.path, chunked.chunks, config, store)
    except Exception as exc:  # a chunker bug must cost one file, not the run
        return Outcome(task, FAILED, error_type="parse_error",
                       message=scrubber.scrub(f"{type(exc).__name__}: {exc}").text,
                       trace=scrubber.scrub(traceback.format_exc()).text)
    chunks = [IndexedChunk(c, t.text, contextualized=t.contextualized,
                           prefix_quality=t.prefix_quality, prefix_tokens=t.prefix_tokens)
              for c, t in zip(chunked.chunks, texts)]
    record = FileRecord(path=task.path, size_bytes=task.size, mtime_ns=task.mtime_ns,
                        content_hash=digest, language=chunked.language, chunks=chunks,
                        warnings=warnings + cut + tuple(chunked.warnings),
                        secrets_redacted=scrubbed.redactions)
    # An unparsable file is indexed as line windows; its reason goes to bootstrap_errors.
    return Outcome(task, INDEXED, record, lines=count_lines(data),
                   error_type="parse_error" if chunked.parse_error else "",
                   message=chunked.parse_error or "")


def count_lines(data: bytes) -> int:
    """Lines of a file, the last one counted even without a final newline."""
    return data.count(b"\n") + (bool(data) and not data.endswith(b"\n"))


# ----- process-pool entry points (the configuration is sent once per worker) ----------
_worker_config: ContextConfig | None = None
# How much lower a pool worker's CPU priority is (os.nice): answers get the cores first.
WORKER_NICENESS = 10


def init_worker(config: ContextConfig, owner_pid: int) -> None:
    """Pool initializer: end with the indexing process ``owner_pid`` (even SIGKILLed:
    :mod:`contextd.indexer.lifeline`), keep the configuration for every batch this process
    handles, leave Ctrl-C to the parent (the terminal sends SIGINT to the whole process
    group; a worker would print its own KeyboardInterrupt traceback, while the parent stops
    the pool and records where the run stopped), and run at a lower CPU priority: the
    answers of the background owner, which reads a large project with this pool, come
    first (on 2 cores a worker beside an answer doubled its time)."""
    global _worker_config
    die_with(owner_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        os.nice(WORKER_NICENESS)
    except OSError:  # a platform or sandbox that refuses it: the same pool, at par
        pass
    _worker_config = config


def process_batch(tasks: Sequence[FileTask]) -> bytes:
    """Index several files in a pool worker (batches amortise the inter-process traffic),
    with the garbage collector paused (:func:`collector_paused`). The outcomes come back
    pickled here, as bytes, for :func:`load_outcomes` to unpickle in the writer's thread
    with the collector paused too: left to the pool's result thread, the unpickling ran
    with it on."""
    assert _worker_config is not None, "init_worker was not called"
    with collector_paused():
        return pickle.dumps([process_file(task, _worker_config) for task in tasks],
                            protocol=pickle.HIGHEST_PROTOCOL)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for a stretch of indexing work, then back as it was.
    Chunking a file makes thousands of containers (chunks, symbols, tuples, tree nodes),
    freed by their reference counts, yet every 700 of them started a collection: processing
    typeorm's files in batches of 64, 11.0 CPU s with it on, 10.5 paused (issue 37). What a
    paused stretch leaves in cycles is collected after it. Another thread that pauses it
    meanwhile (the writer's, the pool's) leaves it on at the end: only a caller that found
    it on turns it back on."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def load_outcomes(batch: bytes) -> list[Outcome]:
    """The outcomes :func:`process_batch` pickled, unpickled with the garbage collector
    paused. A batch of prometheus's files makes 0.7k-33k new containers (chunks, symbols,
    tuples), none of them garbage, yet every 700 of them started a collection: over
    prometheus's outcomes 0.97 CPU s with the collector on, 0.55 off (issue 37; the
    writer's process chunks too, so this is time taken from a core that chunks)."""
    with collector_paused():
        return pickle.loads(batch)
