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

import contextlib
import dataclasses
import io
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
from contextd.errors import ContextdError
from contextd.query.records import QueryRequest
from contextd.store import open_store

from test_settings_truth import contextd, documented_keys

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
    """(file, label, score) of each hit, best first."""
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
    """What ``call`` returns, or the error it raises (type and message): a refusal is an
    observable effect too."""
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 (the probe reports whatever it was)
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
def _environ(**values: str):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
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
}


# ===== the tests ==========================================================================

def _resolved(value: Any) -> Any:
    return value() if callable(value) else value


def _configs(key: str, effect: Effect, tmp: Path) -> tuple[ContextConfig, ContextConfig]:
    table, name = _key_parts(key, effect)
    base = _resolved(effect.base)
    return (_loaded(tmp / "default", _merged(base, table, {})),
            _loaded(tmp / "changed", _merged(base, table, {name: _resolved(effect.value)})))


def test_the_table_covers_exactly_the_documented_keys():
    documented = set().union(*documented_keys().values())
    assert set(EFFECTS) == documented, (
        f"keys without a probe: {sorted(documented - set(EFFECTS))}; "
        f"probes of keys not documented: {sorted(set(EFFECTS) - documented)}")


@pytest.mark.parametrize("key", sorted(EFFECTS))
def test_each_documented_key_changes_what_contextd_does(key, tmp_path):
    effect = EFFECTS[key]
    default, changed = _configs(key, effect, tmp_path)
    (tmp_path / "probe-default").mkdir()
    (tmp_path / "probe-changed").mkdir()
    before = effect.probe(default, tmp_path / "probe-default")
    after = effect.probe(changed, tmp_path / "probe-changed")
    assert before != after, f"{key} = {_resolved(effect.value)!r} changed nothing: {before!r}"
