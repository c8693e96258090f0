"""The contextualizer stage: structural prefixes from real chunks, and the LLM
contextualizer end to end against a local HTTP server speaking the OpenAI chat API.

The server stands for the external LLM (it is not our code): its answers are canned but depend
on the chunk in the prompt, so the quality checks see realistic input. Nothing of ours is
mocked: chunks come from the real chunkers, prefixes are cached in a real DuckDB store, and the
resume test kills a real subprocess with SIGKILL.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from contextd.chunkers.chunking import chunk_file
from contextd.config.loading import config_from_dict
from contextd.config.sections import ContextConfig
from contextd.contextualizers.stage import (
    ContextStage, IndexText, contextualizer_signature, index_texts,
)
from contextd.contextualizers.llm import check_quality, prefix_quality
from contextd.store.base import FileRecord, IndexedChunk
from contextd.store.duckdb import DuckDBStore
from contextd.text.tokens import estimate_tokens

PY_SOURCE = '''"""Greeting helpers for the demo service.

Everything here is deliberately small.
"""


class Greeter:
    """Greets people by name, politely.

    Longer explanation that the prefix must not carry.
    """

    def greet(self, name):
        return f"Hello, {name}!"

    def farewell(self, name):
        return f"Goodbye, {name}."


def shout(text):
    return text.upper()
'''

MD_SOURCE = """# Guide

Intro text.

## Install

Pick one way.

### From source

Clone the repository and run the build script.
"""

YAML_SOURCE = """services:
  web:
    image: nginx:1.25
    environment:
      LOG_LEVEL: debug
      WORKERS: "4"
      TIMEOUT_SECONDS: "30"
      RETRY_BACKOFF: exponential
  db:
    image: postgres:16
"""

_CHUNK_RE = re.compile(r"Specific Chunk to Contextualize:\n(.*?)\n\nGenerate a 50-100", re.S)
_TITLE_RE = re.compile(r"Document Title: (.*)")
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")


def prefixes_of(source: str, path: str, config: ContextConfig | None = None) -> dict[str, str]:
    """label -> prefix of every chunk of a real file."""
    config = config or ContextConfig()
    chunks = chunk_file(path, source.encode(), config).chunks
    texts = index_texts(source, path, chunks, config)
    return {c.label: t.text[:-len(c.text)].strip() if t.contextualized else "" for c, t
            in zip(chunks, texts)}


def test_structural_prefix_of_a_python_method():
    small = config_from_dict({"chunking": {"python": {"max_tokens": 40}}})  # split the class
    prefixes = prefixes_of(PY_SOURCE, "demo/greeting.py", small)
    method = prefixes["Greeter.greet"]
    assert method.splitlines() == [
        "File: demo/greeting.py",
        "Class: Greeter - Greets people by name, politely.",
        "Module: Greeting helpers for the demo service.",
    ]
    assert "Class:" not in prefixes["shout"]
    assert prefixes["shout"].startswith("File: demo/greeting.py\nModule: Greeting helpers")


def test_structural_prefix_of_markdown_and_yaml():
    md = prefixes_of(MD_SOURCE, "docs/guide.md")
    from_source = next(p for label, p in md.items() if "From source" in label)
    assert "Section: Guide > Install > From source" in from_source
    small = config_from_dict({"chunking": {"yaml": {"max_tokens": 40}}})
    yaml_prefixes = prefixes_of(YAML_SOURCE, "deploy/compose.yaml", small)
    assert "Keys: services > web" in yaml_prefixes["services.web.environment"]
    assert "Keys: services" in yaml_prefixes["services.db"].splitlines()


def test_structural_prefix_is_trimmed_never_the_chunk():
    config = ContextConfig()
    body = "\n".join(f"    total_{n} = compute_value_{n}(argument_{n})" for n in range(18))
    source = f'"""{"Very long module summary words " * 30}."""\n\nclass Big:\n' \
             f'    def work(self):\n{body}\n'
    chunks = chunk_file("pkg/big.py", source.encode(), config).chunks
    window = config.embedding.max_seq_length
    for chunk, item in zip(chunks, index_texts(source, "pkg/big.py", chunks, config)):
        text = item.text
        assert text.endswith(chunk.text)
        prefix = text[:-len(chunk.text)]
        assert estimate_tokens(prefix) <= config.contextualizer.max_prefix_tokens + 1
        assert chunk.tokens > window - 4 or estimate_tokens(prefix) + chunk.tokens <= window


def test_strategy_none_and_signature():
    config = config_from_dict({"contextualizer": {"strategy": "none"}})
    chunks = chunk_file("demo/greeting.py", PY_SOURCE.encode(), config).chunks
    assert index_texts(PY_SOURCE, "demo/greeting.py", chunks, config) == \
        [IndexText(c.text) for c in chunks]
    assert contextualizer_signature(config) != contextualizer_signature(ContextConfig())


# ----- the LLM contextualizer against a local OpenAI-style server ---------------------------


def good_answer(chunk: str, title: str) -> str:
    """A specific 50-100 word prefix naming the chunk's identifiers."""
    names = list(dict.fromkeys(_IDENT_RE.findall(chunk)))[:12]
    words = (f"Within {title}, this part implements {' '.join(names)} and explains how "
             f"{' '.join(names[:3])} cooperate with the rest of the module.").split()
    filler = f"The {title} file keeps these {names[0] if names else 'items'} details " \
             f"together for readers".split()
    while len(words) < 60:
        words += filler
    return " ".join(words[:90])


class FakeLLMHandler(BaseHTTPRequestHandler):
    """Speaks POST /v1/chat/completions; behaviour set on the server object."""

    def do_POST(self):  # noqa: N802 (http.server's naming)
        server = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][0]["content"]
        chunk = _CHUNK_RE.search(prompt).group(1)
        title = _TITLE_RE.search(prompt).group(1)
        with server.lock:
            server.requests.append((title, chunk))
            seen = sum(1 for _, c in server.requests if c == chunk)
        if server.delay:
            threading.Event().wait(server.delay)
        if server.mode == "fail":
            self.send_response(500)
            self.end_headers()
            return
        answer = ("This chunk is code." if server.mode == "bad_first" and seen == 1
                  else good_answer(chunk, title))
        payload = json.dumps({
            "choices": [{"message": {"role": "assistant", "content": answer}}],
            "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens":
                      len(answer.split())}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def llm_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeLLMHandler)
    server.lock = threading.Lock()
    server.requests = []
    server.mode = "good"
    server.delay = 0.0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_structural_prefix_is_rated_when_the_report_asks_not_while_indexing(tmp_path):
    """Issue 37: nothing on the index path that only the reports need. A structural prefix
    is stored unrated; the store rates it when asked, as prefix_quality rates it, with the
    key-term share it is given."""
    config = ContextConfig()
    path = "demo/greeting.py"
    chunks = chunk_file(path, PY_SOURCE.encode(), config).chunks
    texts = index_texts(PY_SOURCE, path, chunks, config)
    assert texts and all(t.contextualized and t.prefix_quality is None for t in texts)
    expected = [prefix_quality(t.text[:-len(c.text) - 2], c, config.contextualizer,
                               generated=False) for c, t in zip(chunks, texts)]
    store = DuckDBStore(tmp_path / "index.duckdb")
    store.write_files([FileRecord(path=path, size_bytes=len(PY_SOURCE), mtime_ns=1,
                                  content_hash="h", language="python", chunks=[
                                      IndexedChunk(c, t.text, t.contextualized,
                                                   t.prefix_quality, t.prefix_tokens)
                                      for c, t in zip(chunks, texts)])])
    ids = [row.chunk_id for row in store.chunks_for_files()]
    assert [store.prefix_details(ids)[cid][0] for cid in ids] == expected
    summary = store.prefix_summary()
    assert summary["mean_quality"] == round(sum(expected) / len(expected), 3)
    assert sum(summary["quality"].values()) == summary["contextualized"] == len(chunks)
    assert store.prefix_summary(1.0)["mean_quality"] < summary["mean_quality"]
    store.close()


def llm_config(server, **extra) -> dict:
    return {"contextualizer": {
        "strategy": "llm", "llm_endpoint": f"http://127.0.0.1:{server.server_address[1]}",
        "llm_model": "tiny-test", "llm_timeout_s": 10.0, "llm_max_retries": 1,
        "price_per_1k_input_tokens": 0.5, "price_per_1k_output_tokens": 1.5, **extra}}


def run_stage(config: ContextConfig, store, source=PY_SOURCE, path="demo/greeting.py"):
    stage = ContextStage(config, store)
    try:
        chunks = chunk_file(path, source.encode(), config).chunks
        return chunks, stage.index_texts(source, path, chunks), stage.stats()
    finally:
        stage.close()


def test_llm_prefixes_are_cached_and_counted(llm_server, tmp_path):
    config = config_from_dict(llm_config(llm_server))
    store = DuckDBStore(tmp_path / "index.duckdb")
    chunks, texts, stats = run_stage(config, store)
    assert len(llm_server.requests) == len(chunks)
    for chunk, item in zip(chunks, texts):
        assert item.contextualized and item.text.startswith("Within demo/greeting.py")
        assert item.text.endswith(chunk.text)
        assert item.prefix_quality is not None  # a written prefix is rated as it is kept
    assert stats["generated"] == len(chunks) and stats["llm"]["accepted"] == len(chunks)
    assert stats["llm"]["prompt_tokens"] > 0 and stats["llm"]["cost"] > 0
    _, again, stats = run_stage(config, store)
    assert again == texts and len(llm_server.requests) == len(chunks)  # zero new HTTP calls
    assert stats["cache_hits"] == len(chunks) and stats["llm"]["requests"] == 0
    store.close()


def test_llm_bad_answer_is_rejected_then_retried(llm_server, tmp_path):
    llm_server.mode = "bad_first"
    config = config_from_dict(llm_config(llm_server))
    chunks, texts, stats = run_stage(config, None)
    assert len(llm_server.requests) == 2 * len(chunks)
    assert stats["llm"]["rejected"] == len(chunks) and stats["llm"]["accepted"] == len(chunks)
    assert all(item.text.startswith("Within ") for item in texts)
    verdict = check_quality("This chunk is code.", chunks[0], config.contextualizer)
    assert not verdict.ok and "words" in verdict.reason


def test_llm_failure_falls_back_to_structural_uncached(llm_server, tmp_path):
    llm_server.mode = "fail"
    config = config_from_dict(llm_config(llm_server))
    store = DuckDBStore(tmp_path / "index.duckdb")
    chunks, texts, stats = run_stage(config, store)
    structural = [t.text for t in index_texts(PY_SOURCE, "demo/greeting.py", chunks,
                                              ContextConfig())]
    assert [t.text for t in texts] == structural
    assert stats["fallbacks"] == len(chunks) and stats["llm"]["failures"] == 2 * len(chunks)
    llm_server.mode = "good"
    _, texts, stats = run_stage(config, store)  # failures were not cached: asked again
    assert stats["generated"] == len(chunks) and texts[0].text.startswith("Within ")
    store.close()


RESUME_SCRIPT = textwrap.dedent("""
    import sys
    from pathlib import Path
    from contextd.chunkers.chunking import chunk_file
    from contextd.config.loading import config_from_dict
    from contextd.contextualizers.stage import index_texts
    from contextd.store.duckdb import DuckDBStore
    import json
    config = config_from_dict(json.loads(sys.argv[1]))
    store = DuckDBStore(sys.argv[2])
    for path in sorted(Path(sys.argv[3]).glob("*.py")):
        text = path.read_text()
        chunks = chunk_file(path.name, text.encode(), config).chunks
        index_texts(text, path.name, chunks, config, store)
        print("done", path.name, flush=True)
    store.close()
""")


def test_llm_reindex_resumes_after_kill(llm_server, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for n in range(6):
        (corpus / f"mod{n}.py").write_text(PY_SOURCE.replace("Greeter", f"Greeter{n}"))
    llm_server.delay = 0.05
    config = json.dumps(llm_config(llm_server, llm_concurrency=2))
    args = [sys.executable, "-c", RESUME_SCRIPT, config, str(tmp_path / "i.duckdb"), str(corpus)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    first = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env)
    done = [first.stdout.readline().split()[1] for _ in range(2)]
    first.send_signal(signal.SIGKILL)
    first.wait()
    with llm_server.lock:
        before = list(llm_server.requests)
    finished = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.count("done") == 6
    again = llm_server.requests[len(before):]
    assert not [title for title, _ in again if title in done]  # cached prefixes not re-asked
    assert {title for title, _ in again} >= {f"mod{n}.py" for n in range(3, 6)}


@pytest.mark.slow
def test_llm_through_the_indexer_caches_prefixes_across_a_rebuild(llm_server, tmp_path):
    """The real indexer (enough files for its worker-pool path) asks once per chunk; a full
    rebuild then asks nothing: the prefixes come from the store's cache."""
    from contextd.runtime.engine import Engine
    from contextd.indexer.pipeline import POOL_MIN_FILES

    for n in range(POOL_MIN_FILES):
        (tmp_path / f"mod{n}.py").write_text(PY_SOURCE.replace("Greeter", f"Greeter{n}"))
    settings = llm_config(llm_server)["contextualizer"]
    (tmp_path / "context.toml").write_text("[contextualizer]\n" + "".join(
        f"{key} = {json.dumps(value)}\n" for key, value in settings.items()))
    engine = Engine.open(str(tmp_path))
    try:
        report = engine.ensure_indexed()
        stats = engine.stats()
        storage = stats.storage
        assert storage["contextualized_chunks"] == storage["total_chunks"] > POOL_MIN_FILES
        assert len(llm_server.requests) == storage["total_chunks"]
        assert report.contextualizer["generated"] == storage["total_chunks"]
        assert report.contextualizer["llm"]["prompt_tokens"] > 0
        assert stats.contextualizer["strategy"] == "llm"
        assert stats.contextualizer["generated"] == storage["total_chunks"]
        rebuilt = engine.rebuild(vacuum=False)
        assert rebuilt.status == "completed"
        assert len(llm_server.requests) == storage["total_chunks"]
        assert engine.stats().storage["contextualized_chunks"] == storage["total_chunks"]
        job = engine.job_status(rebuilt.job_id)
        assert job.result["contextualizer"]["generated"] == 0
        assert job.result["contextualizer"]["cache_hits"] == storage["total_chunks"]
    finally:
        engine.close()


@pytest.mark.slow
def test_python_outline_agrees_with_ast_over_the_standard_library():
    """The Python outline reads classes, their extents and docstrings from the text; ``ast``
    is the reference. Real code no one here wrote; a few exotic quoting tricks may differ."""
    import ast
    import sysconfig

    from contextd.contextualizers.structural import ClassInfo, first_sentence, outline_python

    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:300]
    assert len(files) >= 100
    classes = agreed = modules = modules_agreed = 0
    for file in files:
        source = file.read_text(encoding="utf-8", errors="replace")
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        outline = outline_python(source)
        modules += 1
        modules_agreed += outline.summary == first_sentence(ast.get_docstring(tree) or "")
        found = {(c.name, c.start_line): c for c in outline.classes}
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                classes += 1
                agreed += found.get((node.name, node.lineno)) == ClassInfo(
                    node.name, node.lineno, node.end_lineno,
                    first_sentence(ast.get_docstring(node) or ""))
    assert classes > 500
    assert agreed / classes >= 0.99 and modules_agreed / modules >= 0.99


def test_class_outline_finds_what_the_class_pattern_finds():
    """The generic outline finds class-like definitions from their keywords instead of
    trying its pattern at every character (issue 37): on any text, the same matches as the
    pattern's own ``finditer``. Texts are drawn (seeded) from the words and blanks that make
    the cases differ: modifiers on lines of their own, blank runs, several keywords on a
    line, a keyword inside a word, a name on the next line."""
    import random

    from contextd.contextualizers.structural import _CLASS_RE, _class_matches

    pieces = ["class", "interface", "struct", "trait", "enum", "object", "export", "default",
              "abstract", "public", "private", "open", "data", "subclass", "Foo", "$bar",
              "x = ", "{", "}", " ", "  ", "\t", "\n", "\n\n", "\n  \n", "\r\n", "\x0b"]
    rng = random.Random(37)
    differing = []
    for _ in range(3000):
        text = "".join(rng.choice(pieces) + rng.choice(("", " ", "\n"))
                       for _ in range(rng.randint(1, 40)))
        expected = [(m.start(), m.group(0)) for m in _CLASS_RE.finditer(text)]
        if [(m.start(), m.group(0)) for m in _class_matches(text)] != expected:
            differing.append(text)
    assert differing == []
