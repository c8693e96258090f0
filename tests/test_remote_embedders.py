"""Remote embedders against real HTTP servers started here (tests/embedding_server.py) that
serve vectors from contextd's own ONNX model: indexing and querying end to end, faults
retried without losing or duplicating a chunk, one-line errors, switching backends, the
query-local probe, and settings from the environment and .env."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from embedding_server import DROP, RATE_LIMITED, SERVER_ERROR, STALL, EmbeddingServer
from test_indexer import make_repo

from contextd.config.loading import load_config
from contextd.config.sections import EmbeddingConfig
from contextd.config.env import describe_embedding, resolve_embedding
from contextd.embedders.remote.embedder import plan_batches
from contextd.embedders.remote.ratelimit import RateLimiter
from contextd.embedders.registry import get_embedder
from contextd.runtime.engine import Engine
from contextd.query.records import QueryRequest

MODEL = "all-MiniLM-L6-v2"
KEY_VAR = "CONTEXTD_TEST_EMBED_KEY"
KEY = "test-key-5f3a"
CONTEXTD = [sys.executable, "-m", "contextd"]

FILES = {
    "auth/tokens.py": '''"""Issuing and checking access tokens."""


def refresh_token(session):
    """Exchange an expiring refresh token for a new access token."""
    return session.issue(scope="refresh")


def validate_jwt(token, key):
    """Check the signature and expiry of a JSON web token."""
    return token.verify(key) and not token.expired
''',
    "net/retry.py": '''"""Retries for flaky network calls."""
import random


def backoff_delay(attempt):
    """Exponential backoff with jitter between attempts."""
    return min(30, 0.5 * 2 ** attempt) * random.random()


class RateLimiter:
    """Allow at most N calls per minute."""

    def allow(self):
        return True
''',
    "db/pool.py": '''"""A pool of database connections."""


def open_connection(url):
    """Open one connection to the database at url."""
    return url


def close_all(pool):
    """Close every pooled connection on shutdown."""
    for conn in pool:
        conn.close()
''',
    # The two projects compared differ in their context.toml only: keep it out of both.
    ".contextignore": "context.toml\n",
    "README.md": "# Demo\n\nA demo service: tokens, retries and a database pool.\n\n"
                 "## Setup\n\nRun the server with a config file.\n",
}


@pytest.fixture(scope="module")
def local():
    """The in-process reference: ONNX fp32, whose vectors do not depend on the batch."""
    embedder = get_embedder(EmbeddingConfig(quantize="none"))
    embedder.embed_query("load the model before the server's first request")
    return embedder


@pytest.fixture(scope="module")
def server(local):
    srv = EmbeddingServer(local.embed, MODEL, api_key=KEY, stall_s=2.5).start()
    yield srv
    srv.stop()


@pytest.fixture
def fresh(server, monkeypatch):
    server.reset()
    monkeypatch.setenv(KEY_VAR, KEY)
    return server


def remote_toml(server: EmbeddingServer, backend: str = "openai", **extra) -> str:
    base = server.base_url + ("/v1" if backend == "openai" else "")
    settings = {"backend": backend, "model": MODEL, "base_url": base, "api_key_env": KEY_VAR,
                "max_batch_items": 4, "concurrency": 4, "timeout_s": 10.0, **extra}
    lines = [f"{k} = {v!r}".replace("'", '"') if isinstance(v, str) else f"{k} = {v}"
             for k, v in settings.items()]
    return "[embedding]\n" + "\n".join(lines) + "\n"


LOCAL_TOML = '[embedding]\nbackend = "onnx"\nquantize = "none"\n'


def project(tmp_path: Path, toml: str, name: str = "repo") -> Path:
    root = make_repo(tmp_path / name, FILES)
    (root / "context.toml").write_text(toml)
    return root


def semantic_hits(engine: Engine, text: str) -> list[tuple[str, int, float]]:
    response = engine.query(QueryRequest(query=text, k=5, providers=("semantic",),
                                         wait_for_model=True))
    return [(h.file_path, h.start_line, h.score) for h in response.hits]


def assert_every_chunk_has_its_own_vector(engine: Engine, local) -> None:
    """No chunk lost (each has a vector), none duplicated (one row per text), none swapped
    (each vector is the reference model's vector of that very text)."""
    identity = engine.indexer.embedder.identity
    rows = engine.store.chunks_for_files()
    texts = {row.embed_hash: row.index_text or row.text for row in rows}
    assert engine.store.count_missing_embeddings(identity) == 0
    stored = engine.store.vectors_for(identity, list(texts))
    assert set(stored) == set(texts)
    count = engine.store.stats()["embeddings_by_model"][identity]
    assert count == len(texts)
    hashes = sorted(texts)
    reference = local.embed([texts[h] for h in hashes])
    got = np.stack([stored[h] for h in hashes])
    assert np.min(np.sum(got * reference, axis=1)) > 0.9999


def test_openai_server_indexes_and_answers_like_the_local_model(tmp_path, fresh, local):
    remote_root = project(tmp_path, remote_toml(fresh), "remote")
    local_root = project(tmp_path, LOCAL_TOML, "local")
    remote, reference = Engine.open(str(remote_root)), Engine.open(str(local_root))
    try:
        report = remote.ensure_indexed()
        assert report.embedding_error is None
        assert report.chunks_embedded == len(fresh.served) > 0
        assert set(fresh.served.values()) == {1}  # each text sent once
        assert max(fresh.batch_sizes) <= 4
        assert report.embedding["requests"] == len(fresh.batch_sizes)
        assert "remote:" in report.summary and "requests" in report.summary
        assert_every_chunk_has_its_own_vector(remote, local)
        reference.ensure_indexed()
        for question in ("how is a JSON web token checked", "wait longer between retries"):
            got, want = semantic_hits(remote, question), semantic_hits(reference, question)
            assert [h[:2] for h in got] == [h[:2] for h in want]
            assert np.allclose([h[2] for h in got], [h[2] for h in want], atol=1e-4)
        stats = remote.stats().embedding
        assert stats["identity"] == f"openai:{MODEL}/384@{fresh.base_url[7:]}"
        assert stats["query_backend"].startswith("remote")
        assert stats["texts"] >= report.chunks_embedded and stats["tokens"] > 0
    finally:
        remote.close()
        reference.close()


def test_faults_are_retried_without_losing_or_duplicating_a_chunk(tmp_path, fresh, local):
    root = project(tmp_path, remote_toml(fresh, max_retries=6, timeout_s=1.0))
    fresh.faults.extend([RATE_LIMITED, SERVER_ERROR, STALL, DROP, SERVER_ERROR])
    engine = Engine.open(str(root))
    try:
        report = engine.ensure_indexed()
        assert report.embedding_error is None
        assert not fresh.faults and fresh.faults_served == 5
        assert report.embedding["retries"] >= 5
        assert report.embedding["rate_limit_waits"] >= 1
        assert report.embedding["rate_limit_wait_s"] >= 1.0  # Retry-After: 1 honoured
        assert_every_chunk_has_its_own_vector(engine, local)
    finally:
        engine.close()


def test_ollama_server_indexes_and_answers(tmp_path, fresh, local):
    root = project(tmp_path, remote_toml(fresh, "ollama"))
    engine = Engine.open(str(root))
    try:
        report = engine.ensure_indexed()
        assert report.embedding_error is None and report.chunks_embedded > 0
        assert_every_chunk_has_its_own_vector(engine, local)
        hits = semantic_hits(engine, "close the database connections")
        assert hits[0][0] == "db/pool.py"
        assert engine.stats().embedding["identity"].startswith(f"ollama:{MODEL}/384@")
    finally:
        engine.close()


def test_switching_backends_reembeds_once_and_switching_back_is_free(tmp_path, fresh):
    root = project(tmp_path, LOCAL_TOML)

    def index_with(toml: str):
        (root / "context.toml").write_text(toml)
        engine = Engine.open(str(root))
        try:
            return engine.ensure_indexed()
        finally:
            engine.close()

    first = index_with(LOCAL_TOML)
    assert first.chunks_embedded > 0 and not fresh.served
    to_remote = index_with(remote_toml(fresh))
    assert to_remote.chunks_embedded == first.chunks_embedded == sum(fresh.served.values())
    assert index_with(LOCAL_TOML).chunks_embedded == 0
    assert index_with(remote_toml(fresh)).chunks_embedded == 0
    assert sum(fresh.served.values()) == first.chunks_embedded


def query_route(tmp_path: Path, server: EmbeddingServer, name: str, **settings) -> str:
    """Index a project whose queries should be embedded locally, query it, and return which
    backend embedded the query (stats)."""
    root = project(tmp_path, remote_toml(server, query_backend="local", **settings), name)
    engine = Engine.open(str(root))
    try:
        engine.ensure_indexed()
        assert semantic_hits(engine, "validate a token")
        return engine.stats().embedding["query_backend"]
    finally:
        engine.close()


def test_query_local_only_when_the_probe_agrees(tmp_path, fresh):
    route = query_route(tmp_path, fresh, "same")
    assert route.startswith("local (") and "probe cosine" in route
    # The same model name, but the server now answers in another vector space.
    fresh.transform = lambda v: np.roll(v, 7, axis=1)
    route = query_route(tmp_path, fresh, "other", max_batch_items=3)
    assert route.startswith("remote (") and "disagrees" in route


def run_cli(root: Path, *args: str, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess:
    return subprocess.run([*CONTEXTD, "--root", str(root), *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})})


def test_wrong_key_and_wrong_dimension_are_one_line(tmp_path, fresh):
    root = project(tmp_path, remote_toml(fresh))
    cases = [
        ({KEY_VAR: "not-the-key"}, {}, [f"rejected the API key in ${KEY_VAR} (HTTP 401"]),
        ({KEY_VAR: ""}, {}, ["wants an API key (HTTP 401", f"set ${KEY_VAR}"]),
        ({KEY_VAR: KEY}, {"dimension": 768}, ["returned 384-dimensional vectors",
                                              "dimension is 768; set dimension = 384"]),
        ({KEY_VAR: KEY}, {"model": "no-such-model"},
         ["does not serve model 'no-such-model' (HTTP 404"]),
    ]
    for env, settings, phrases in cases:
        (root / "context.toml").write_text(remote_toml(fresh, **settings))
        failed = run_cli(root, "embedders", "probe", env=env)
        assert failed.returncode == 1 and failed.stdout == "", failed.stderr
        assert failed.stderr.count("\n") == 1 and failed.stderr.startswith("contextd: error: ")
        assert all(phrase in failed.stderr for phrase in phrases), failed.stderr
        assert "not-the-key" not in failed.stderr

    (root / "context.toml").write_text(remote_toml(fresh))
    good = run_cli(root, "embedders", "probe", env={KEY_VAR: KEY})
    assert good.returncode == 0, good.stderr
    assert good.stdout.startswith(f"openai:{MODEL}/384@") and "384 dimensions" in good.stdout
    stats = run_cli(root, "stats", env={KEY_VAR: KEY})
    assert stats.returncode == 0, stats.stderr
    assert f"embedding: openai:{MODEL}/384@" in stats.stdout
    assert "queries: remote (same as indexing)" in stats.stdout
    assert "requests" in stats.stdout and "rate-limit waits" in stats.stdout


def test_unreachable_server_keeps_the_lexical_index_and_embeds_later(tmp_path, fresh, local):
    dead = EmbeddingServer(local.embed, MODEL)
    port = dead.httpd.server_address[1]
    dead.httpd.server_close()  # nothing listens on this port now
    toml = remote_toml(fresh, max_retries=1).replace(fresh.base_url,
                                                     f"http://127.0.0.1:{port}")
    root = project(tmp_path, toml)
    refresh = run_cli(root, "refresh", env={KEY_VAR: KEY})
    assert refresh.returncode == 0
    assert "embeddings unavailable" in refresh.stdout and "cannot connect" in refresh.stdout
    assert "Traceback" not in refresh.stderr
    found = run_cli(root, "query", "refresh_token", "--provider", "symbol",
                    env={KEY_VAR: KEY})
    assert "auth/tokens.py" in found.stdout
    (root / "context.toml").write_text(remote_toml(fresh))
    engine = Engine.open(str(root))
    try:
        report = engine.ensure_indexed()
        assert report.chunks_embedded > 0 and report.embedding_error is None
        assert_every_chunk_has_its_own_vector(engine, local)
    finally:
        engine.close()


def test_settings_come_from_toml_then_environment_then_dotenv(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / ".env").write_text(
        "# team settings\nEMBEDDING_BACKEND=ollama\nEMBEDDING_MODEL='nomic-embed-text'\n"
        "export OLLAMA_BASE_URL=http://gpu-box:11434\nMY_KEY=dotenv-secret  # comment\n")
    (root / "context.toml").write_text('[embedding]\nbase_url = "http://toml-box:11434"\n'
                                       'api_key_env = "MY_KEY"\n')
    config = load_config(root / "context.toml")
    embedding, origins = resolve_embedding(config, root, {"EMBEDDING_MODEL": "all-minilm"})
    assert (embedding.backend, embedding.model, embedding.base_url, embedding.dimension) == \
        ("ollama", "all-minilm", "http://toml-box:11434", 384)
    assert str(origins["backend"]) == ".env EMBEDDING_BACKEND"
    assert str(origins["model"]) == "environment EMBEDDING_MODEL"
    assert str(origins["base_url"]) == "context.toml"
    assert str(origins["dimension"]) == "known model all-minilm"
    rows = {r.key: (r.value, r.origin) for r in describe_embedding(config, root, {})}
    assert rows["embedding.dimension"] == ("768", "known model nomic-embed-text")
    assert rows["API key $MY_KEY"] == ("set", ".env MY_KEY")
    # A local backend is never renamed by a server's model variable.
    local_only, _ = resolve_embedding(load_config(None), tmp_path, {"EMBEDDING_MODEL": "x"})
    assert local_only == EmbeddingConfig()


def test_validate_config_shows_origins_but_never_the_key(tmp_path):
    root = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    (root / ".env").write_text(f"EMBEDDING_BACKEND=openai\nEMBEDDING_MODEL={MODEL}\n"
                               "OPENAI_COMPATIBLE_API_KEY=sk-very-secret\n")
    shown = run_cli(root, "validate-config",
                    env={"EMBEDDING_BASE_URL": "http://team-gpu:8080/v1"})
    assert shown.returncode == 0, shown.stderr
    assert "embedding.backend = openai (.env EMBEDDING_BACKEND)" in shown.stdout
    assert "embedding.base_url = http://team-gpu:8080/v1 (environment EMBEDDING_BASE_URL)" \
        in shown.stdout
    assert "API key $OPENAI_COMPATIBLE_API_KEY = set (.env OPENAI_COMPATIBLE_API_KEY)" \
        in shown.stdout
    assert "sk-very-secret" not in shown.stdout + shown.stderr


def test_rate_limiter_spreads_requests_over_the_minute():
    limiter = RateLimiter(requests_per_minute=600, tokens_per_minute=0)
    assert all(limiter.acquire(50) == 0 for _ in range(600))  # a minute's burst goes at once
    assert limiter.acquire(50) > 0                               # the next one waits
    tokens = RateLimiter(requests_per_minute=0, tokens_per_minute=6000)
    assert tokens.acquire(6000) == 0 and tokens.acquire(60) > 0


def test_batches_respect_both_limits_and_cover_every_text_once():
    counts = [5, 300, 40, 40, 9000, 12, 12, 12, 80]
    batches = plan_batches(counts, max_items=3, max_tokens=100)
    assert sorted(i for batch in batches for i in batch) == list(range(len(counts)))
    for batch in batches:
        assert len(batch) <= 3
        assert len(batch) == 1 or sum(counts[i] for i in batch) <= 100
    assert [4] in batches  # longer than any request may be: sent alone
