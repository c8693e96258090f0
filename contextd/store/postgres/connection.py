"""Reaching the server: redacted URLs, one-line errors, the connection pool, the migrations.

A team database URL carries a password, and every message that names the database may end up
in a log, an MCP tool error or a bug report: :func:`redact` is applied to every one of them.
A missing server, a wrong password or a missing pgvector extension are expected failures of
configuration, so they become one :class:`~contextd.errors.StoreError` line, never a traceback.
"""

from __future__ import annotations

import logging
import re
from importlib import resources
from typing import Callable

from contextd.errors import StoreError

# How long opening the store waits for the server before saying it is unreachable.
CONNECT_TIMEOUT_S = 5
# Connections per store object: queries, the usage writer and the indexer's batches run on
# different threads of one process.
POOL_MAX_SIZE = 6
# One key for "a process is migrating this database" (any constant in the 64-bit space).
MIGRATION_LOCK_KEY = 0x636F6E7465787464  # "contextd"

_URL_PASSWORD_RE = re.compile(r"(://[^:/?#@\s]*:)([^@/?#\s]*)(@)")
_KEYWORD_PASSWORD_RE = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]*)", re.I)


def redact(text: str) -> str:
    """``text`` with every password of a PostgreSQL URL or conninfo string replaced by ***
    (``postgresql://u:secret@h/db``, ``?password=secret``, ``password=secret host=h``)."""
    text = _URL_PASSWORD_RE.sub(lambda m: f"{m.group(1)}***{m.group(3)}"
                                if m.group(2) else m.group(0), text)
    return _KEYWORD_PASSWORD_RE.sub(lambda m: f"{m.group(1)}***", text)


def describe_failure(url: str, exc: BaseException) -> str:
    """The first line of a driver error, redacted: what went wrong, without the traceback."""
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()),
                 type(exc).__name__)
    return redact(first.replace(url, redact(url)))


def _require_driver():
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
        import pgvector.psycopg  # noqa: F401
    except ImportError as exc:
        raise StoreError(
            f"storage.backend = \"postgres\" needs the PostgreSQL driver ({exc.name} is not "
            "installed): pip install 'contextd[postgres]'") from None


def check_server(url: str) -> None:
    """Connect once, outside any pool, so an unreachable server, a wrong password or a
    missing pgvector are reported clearly before anything else happens."""
    _require_driver()
    import psycopg

    if not url:
        raise StoreError('storage.url is empty: set it (e.g. url = "${DATABASE_URL}") for '
                         'storage.backend = "postgres"')
    where = redact(url)
    try:
        conn = psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True)
    except psycopg.Error as exc:
        raise StoreError(f"cannot connect to PostgreSQL at {where}: "
                         f"{describe_failure(url, exc)}") from None
    except ValueError as exc:  # a malformed URL
        raise StoreError(f"invalid PostgreSQL URL {where}: {describe_failure(url, exc)}"
                         ) from None
    with conn:
        available = conn.execute(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
        if available is None:
            raise StoreError(f"PostgreSQL at {where} lacks the pgvector extension: install "
                             "pgvector on the server (https://github.com/pgvector/pgvector)")


def open_pool(url: str, configure: Callable | None = None):
    """A pool of autocommit connections (reads need no transaction; writes open one)."""
    from psycopg_pool import ConnectionPool

    # The pool logs each failed reconnection at WARNING, multi-line and on stderr; contextd
    # reports a lost server itself, as one StoreError line.
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    pool = ConnectionPool(url, min_size=1, max_size=POOL_MAX_SIZE, open=False,
                          kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S},
                          configure=configure, name="contextd")
    try:
        pool.open(wait=True, timeout=CONNECT_TIMEOUT_S * 2)
    except Exception as exc:  # psycopg.Error or the pool's timeout: said in one line
        pool.close()
        raise StoreError(f"cannot connect to PostgreSQL at {redact(url)}: "
                         f"{describe_failure(url, exc)}") from None
    return pool


def migrations() -> list[tuple[int, str]]:
    """(version, SQL) of every Postgres migration, in order (contextd/store/postgres/migrations:
    the DuckDB ones live in contextd/migrations and are numbered on their own)."""
    folder = resources.files("contextd.store.postgres").joinpath("migrations")
    found = [(int(entry.name.split("_", 1)[0]), entry.read_text(encoding="utf-8"))
             for entry in folder.iterdir() if entry.name.endswith(".sql")]
    return sorted(found)


SCHEMA_VERSION = max(number for number, _ in migrations())


def migrate(url: str) -> int:
    """Bring the database to :data:`SCHEMA_VERSION` (creating it on first use); refuse one
    newer than this contextd. Processes opening a fresh database at once take turns (an
    advisory lock), so each migration runs exactly once. Returns the version."""
    import psycopg

    where = redact(url)
    with psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True) as conn:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", [MIGRATION_LOCK_KEY])
            conn.execute("CREATE TABLE IF NOT EXISTS contextd_schema_version "
                         "(version INTEGER NOT NULL, applied_at TIMESTAMPTZ DEFAULT now())")
            version = conn.execute(
                "SELECT coalesce(max(version), 0) FROM contextd_schema_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"PostgreSQL database at {where} has contextd schema version {version}, "
                    f"newer than this contextd understands ({SCHEMA_VERSION}); upgrade contextd")
            try:
                for number, sql in migrations():
                    if number > version:
                        conn.execute(sql)
                        conn.execute("INSERT INTO contextd_schema_version (version) VALUES (%s)",
                                     [number])
            except psycopg.errors.InsufficientPrivilege as exc:
                raise StoreError(f"cannot prepare the contextd tables in {where}: "
                                 f"{describe_failure(url, exc)} (a superuser can run "
                                 "CREATE EXTENSION vector once for this database)") from None
            except psycopg.Error as exc:
                raise StoreError(f"cannot prepare the contextd tables in {where}: "
                                 f"{describe_failure(url, exc)}") from None
    return max(version, SCHEMA_VERSION)
