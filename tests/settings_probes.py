"""The probes of tests/test_settings_effects.py, part one: how a key's two configurations are
written and loaded, the fixtures the probes share, and the probes of the query pipeline, the
boundary, the chunkers and the contextualizer (in-process, over real parts).

A probe is ``probe(config, tmp) -> observation``: it builds the real component from a
configuration loaded from a context.toml on disk and returns what the component does. It never
reads the setting back from the configuration.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

from contextd import ContextModule, hookimpl
from contextd.config.loading import load_config
from contextd.config.project import Project
from contextd.config.sections import ContextConfig
from contextd.errors import ContextdError
from contextd.plugins.manager import get_plugin_manager
from contextd.providers.base import ContextProvider
from contextd.query.records import QueryRequest
from contextd.records import ProviderType
from contextd.store import open_store

REPO = Path(__file__).resolve().parent.parent

Probe = Callable[[ContextConfig, Path], Any]


@dataclass(frozen=True)
class Effect:
    """A non-default ``value`` for a key and the ``probe`` that shows what it changes.
    ``table``: the map table the key is written in (``chunking.typescript``) for map sections;
    ``base``: settings both configurations share, so that the key has something to change.
    ``value`` and ``base`` may be functions giving them when the test runs (a free port, the
    URL of a server the module starts)."""

    value: Any
    probe: Probe
    table: str = ""
    base: dict | Callable[[], dict] = field(default_factory=dict)


# ----- writing and loading the two configurations ----------------------------------------

def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(value)


def toml(tables: dict[str, dict]) -> str:
    return "".join(f"[{name}]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in keys.items())
                   for name, keys in tables.items())


def merged(base: dict, table: str, change: dict) -> dict[str, dict]:
    """``base`` ({"section": {key: value}} or {"providers.x": {...}}) with ``change`` laid
    over ``table``."""
    tables = {name: dict(keys) for name, keys in base.items()}
    tables.setdefault(table, {}).update(change)
    return tables


def loaded(directory: Path, tables: dict[str, dict]) -> ContextConfig:
    directory.mkdir(parents=True)
    path = directory / "context.toml"
    path.write_text(toml(tables))
    config = load_config(path)
    assert config.notes == (), config.notes  # every key lands (no alias, no removed key)
    return config


def key_parts(key: str, effect: Effect) -> tuple[str, str]:
    section, name = key.split(".")[0], key.rsplit(".", 1)[1]
    return (effect.table or section), name


def toml_text(config: ContextConfig) -> str:
    return Path(config.source).read_text()


# ----- shared fixtures --------------------------------------------------------------------

def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                   env=dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@x",
                            GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@x"))


def tree(root: Path, files: dict[str, str | bytes]) -> Path:
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
            root = tree(self.base / "query", QUERY_FILES)
            git(root, "init", "-q")
            git(root, "add", "src", "tests", "docs")
            git(root, "commit", "-qm", "retry backoff for the client")
            git(root, "add", "vendor", "config")
            git(root, "commit", "-qm", "vendor the backoff helper")
            git(root, "add", ".")
            git(root, "commit", "-qm", "orders of the backend and the frontend")
            from contextd.indexer import Indexer

            project = Project(root, load_config(None))
            store = open_store(project)
            Indexer(project, store, embed=False).ensure_indexed()
            self.closers.append(store.close)
            self._query = root, store
        return self._query


SHARED: Shared | None = None


def fixtures() -> Shared:
    """The shared fixtures of the running test module (set by its module-scoped fixture)."""
    assert SHARED is not None, "the test module's fixture sets the shared fixtures"
    return SHARED


# ----- probes: the query pipeline over the shared index ------------------------------------

@contextlib.contextmanager
def query_module(config: ContextConfig):
    root, store = fixtures().query_index
    module = ContextModule(Project(root, config), store)
    try:
        yield module
    finally:
        module.shutdown()


def hits(config: ContextConfig, query: str = "retry backoff", **request) -> list[tuple]:
    """(file, label, score, providers) of each hit, best first."""
    with query_module(config) as module:
        response = module.query(QueryRequest(query, **request))
    return [(h.file_path, h.label, round(h.score, 4), h.providers) for h in response.hits]


def query_probe(query: str, **request) -> Probe:
    return lambda config, tmp: hits(config, query, **request)


class _SlowProvider(ContextProvider):
    """A provider answering in ~0.3 s from a worker thread (it does not say it answers from
    memory): what ``timeout_ms`` bounds. The built-in providers answer in milliseconds, too
    fast to show a limit without a race."""
    id, name, type = "slow_probe", "Answers in 0.3 s", ProviderType.FULL_TEXT

    def query(self, query, scope, budget):
        time.sleep(0.3)
        return []


class _SlowPlugin:
    @hookimpl
    def register_providers(self, register):
        register(_SlowProvider)


def slow_provider_probe(config: ContextConfig, tmp: Path) -> tuple[str, ...]:
    """The notes of a query asked of the slow provider alone (one says it timed out, or
    none does)."""
    manager = get_plugin_manager()
    manager.register(_SlowPlugin(), name="settings-probe-slow")
    try:
        with query_module(config) as module:
            notes = module.query(QueryRequest("retry backoff", providers=("slow_probe",))).notes
    finally:
        manager.unregister(name="settings-probe-slow")
    return tuple(n for n in notes if "slow_probe" in n)


def files_probe(query: str) -> Probe:
    def probe(config, tmp):
        with query_module(config) as module:
            response = module.query(QueryRequest(query, by_file=True))
        return [(f.file_path, round(f.score, 4)) for f in response.files]
    return probe


def notes_probe(query: str) -> Probe:
    def probe(config, tmp):
        with query_module(config) as module:
            return module.query(QueryRequest(query)).notes
    return probe


def outcome(call: Callable[[], Any]) -> Any:
    """What ``call`` returns, or contextd's refusal (type and message): a refusal is an
    observable effect too. Any other exception is a bug of the probe or the code, and fails
    the test rather than counting as a difference."""
    try:
        return call()
    except ContextdError as exc:
        return type(exc).__name__, str(exc)


def task_probe(task: dict) -> Probe:
    """The context of a task through get_task_context (the budget of the task)."""
    def probe(config, tmp):
        with query_module(config) as module:
            context = outcome(lambda: module.get_task_context(task))
        return context if isinstance(context, tuple) else (
            context.total_tokens, [s.file_path for s in context.snippets], context.notes)
    return probe


def budget_log(config, tmp) -> list[str]:
    """What the budget manager logs about a context filling its budget."""
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())
    logger = logging.getLogger("contextd.query.budget")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        hits(config, "retry backoff policy client", max_tokens=200)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    return records


def usage_probe(columns: str, query: str = "where is retry_backoff computed") -> Probe:
    """The usage_metrics row of one query (None: the query wrote none)."""
    def probe(config, tmp):
        root, store = fixtures().query_index
        task_id = f"probe-{time.monotonic_ns()}"
        with query_module(config) as module:
            module.query(QueryRequest(query, task_id=task_id, wait_for_model=True))
            module.pipeline.usage.flush()
        with store._own_cursor() as cur:  # a read of the real table, beside the store
            rows = cur.execute(f"SELECT {columns} FROM usage_metrics WHERE task_id = ?",
                               [task_id]).fetchall()
        return rows[0] if rows else None
    return probe


def usage_flags(config, tmp):
    """Whether the query's usage row exists and holds tokens and a latency."""
    row = usage_probe("context_tokens, query_latency_ms")(config, tmp)
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


def boundary_root() -> Path:
    root = fixtures().base / "boundary"
    if not root.exists():
        tree(root, BOUNDARY_FILES)
        (root / "linked").symlink_to(root / "src", target_is_directory=True)
    return root


def boundary(config, tmp) -> tuple[list, ...]:
    """What the boundary (the indexer's and the watcher's) makes of the shared tree: the files
    it accepts, those it flags as large, and why it leaves each other path out."""
    from contextd.boundary.walk import Boundary

    scan = Boundary(Project(boundary_root(), config)).scan()
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


def chunks_probe(path: str, text: str) -> Probe:
    """(label, first line, last line) of each chunk the chunker cuts from ``text``."""
    def probe(config, tmp):
        from contextd.chunkers.chunking import chunk_file

        return [(c.label, c.start_line, c.end_line)
                for c in chunk_file(path, text.encode(), config).chunks]
    return probe


# ----- probes: the contextualizer -----------------------------------------------------------

def index_texts(config, tmp) -> list[str]:
    """The texts the contextualizer stage makes of a file's chunks (what gets embedded)."""
    from contextd.chunkers.chunking import chunk_file
    from contextd.contextualizers.stage import ContextStage

    chunks = chunk_file("billing/invoice.py", LONG_PYTHON.encode(), config).chunks
    stage = ContextStage(config)
    return [t.text for t in stage.index_texts(LONG_PYTHON, "billing/invoice.py", chunks)]


class LLMServer(ThreadingHTTPServer):
    """A local chat endpoint (OpenAI and Ollama shapes) that records every request. A model
    named ``slow-S`` answers after S seconds; the answer is ``self.answer``."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), LLMHandler)
        self.lock = threading.Lock()
        self.reset("")
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def reset(self, answer: str) -> None:
        self.answer, self.requests, self.in_flight, self.most_in_flight = answer, [], 0, 0


class LLMHandler(BaseHTTPRequestHandler):
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


def llm_server() -> LLMServer:
    server = getattr(fixtures(), "llm", None)
    if server is None:
        server = fixtures().llm = LLMServer()
        fixtures().closers.append(lambda: (server.shutdown(), server.server_close()))
    return server


def llm_base(**extra) -> Callable[[], dict]:
    return lambda: {"contextualizer": {"strategy": "llm", "llm_endpoint": llm_server().url,
                                       "llm_model": "tiny", **extra}}


FUNCTIONS = "".join(f"def step_{i}(value):\n    \"\"\"Step {i} of the pipeline.\"\"\"\n"
                    f"    return value + {i}\n\n\n" for i in range(4))


def llm_run(config, document: str = FUNCTIONS, every_chunk: bool = False
             ) -> tuple[LLMServer, Any, list[str]]:
    """The LLM contextualizer's prefix of ``document``'s first chunk (``every_chunk``: of all),
    asked of the local server, which answers 70 words naming every key term of that chunk."""
    from contextd.chunkers.chunking import chunk_file
    from contextd.contextualizers.llm import LLMContextualizer, key_terms

    chunks = chunk_file("src/steps.py", document.encode(), config).chunks
    server = llm_server()
    server.reset(" ".join((key_terms(chunks[0]) * 70)[:70]))
    llm = LLMContextualizer(config)
    try:
        prefixes = llm.prefixes(document, "src/steps.py", chunks if every_chunk else chunks[:1])
    finally:
        llm.close()
    return server, llm.counters, prefixes


def llm_request(config, tmp) -> list[tuple]:
    """Where the contextualizer sent its request, with which header and body settings."""
    server, _, _ = llm_run(config)
    return [(path, auth, {k: v for k, v in body.items() if k != "messages"})
            for path, auth, body in server.requests]


def llm_outcome(config, tmp) -> tuple:
    """How many requests it took and which prefixes were accepted."""
    server, counters, prefixes = llm_run(config)
    return len(server.requests), [bool(p) for p in prefixes]


def llm_prompt_size(config, tmp) -> int:
    long_document = FUNCTIONS + "# filler line of the module\n" * 600
    server, _, _ = llm_run(config, long_document)
    return len(server.requests[0][2]["messages"][0]["content"])


def llm_cost(config, tmp) -> float:
    return round(llm_run(config)[1].cost, 6)


def llm_parallel(config, tmp) -> int:
    """Requests in flight at once (1, or 2 and more) while four chunks are asked for."""
    return min(llm_run(config, every_chunk=True)[0].most_in_flight, 2)


def quality(config, tmp) -> tuple[bool, str]:
    """The quality verdict on a 60-word prefix naming two of the chunk's eight key terms."""
    from contextd.chunkers.chunking import chunk_file
    from contextd.contextualizers.llm import check_quality, key_terms

    chunk = chunk_file("billing/invoice.py", LONG_PYTHON.encode(), config).chunks[-1]
    prefix = " ".join(key_terms(chunk)[:2] + ["context"] * 58)
    verdict = check_quality(prefix, chunk, config.contextualizer)
    return verdict.ok, verdict.reason


@contextlib.contextmanager
def environ(**values: str | None):
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


def llm_key_header(config, tmp) -> list:
    with environ(EFFECTS_LLM_KEY="sk-effects"):
        return [auth for _, auth, _ in llm_run(config)[0].requests]


def projects_probe(*names: str) -> Probe:
    def probe(config, tmp):
        return outcome(lambda: [h[0] for h in hits(config, "order total", projects=names)])
    return probe


def third_party_options(config, tmp):
    """The options a third-party provider is given when it is initialised."""
    from contextd.providers.base import ContextProvider, ProviderContext

    class Tickets(ContextProvider):
        id = "tickets"

    root, store = fixtures().query_index
    provider = Tickets()
    provider.initialize(ProviderContext(Project(root, config), config, store, None))
    return provider.settings.options
