"""The index stores on real databases: schema, migrations, atomic writes, cache, jobs.

Tests taking ``make_store`` run against both backends: a DuckDB file and a workspace of a
real PostgreSQL server with pgvector (tests/conftest_postgres.py).
"""

from __future__ import annotations

import threading

import duckdb
import numpy as np
import pytest

from contextd.errors import StoreError
from contextd.records import Chunk, ChunkKind, SymbolDef
from contextd.store import FileRecord, IndexedChunk
from contextd.store.duckdb_store import SCHEMA_VERSION, DuckDBStore, _migrations

pytest_plugins = ["conftest_postgres"]


@pytest.fixture(params=["duckdb", "postgres"])
def make_store(request, tmp_path):
    """A factory of stores of one backend, all opening the same index; closed at the end."""
    opened = []

    def make():
        if request.param == "duckdb":
            store = DuckDBStore(tmp_path / "i.duckdb")
        else:
            from contextd.store.postgres import PostgresStore
            store = PostgresStore(request.getfixturevalue("postgres_url"),
                                  request.getfixturevalue("workspace"))
        opened.append(store)
        return store
    yield make
    for store in opened:
        store.close()


def make_chunk(text: str, label: str, line: int = 1, defines=(), references=()) -> IndexedChunk:
    chunk = Chunk(text=text, kind=ChunkKind.CODE_FUNCTION, label=label, language="python",
                  start_line=line, end_line=line + text.count("\n"), start_byte=0,
                  end_byte=len(text.encode()), tokens=max(1, len(text) // 4),
                  defines=tuple(defines), references=tuple(references))
    return IndexedChunk(chunk, index_text=f"# {label}\n{text}")


def record(path: str, *chunks: IndexedChunk, digest: str = "h") -> FileRecord:
    return FileRecord(path=path, size_bytes=10, mtime_ns=1, content_hash=digest,
                      language="python", chunks=list(chunks))


def table_shapes(con) -> dict:
    rows = con.execute("""SELECT table_name, column_name, data_type, is_nullable
                          FROM information_schema.columns ORDER BY table_name, column_name""")
    shapes: dict = {}
    for table, column, dtype, nullable in rows.fetchall():
        if table != "schema_version":
            shapes.setdefault(table, set()).add((column, dtype, nullable))
    return shapes


def test_fresh_database_has_current_version(tmp_path):
    store = DuckDBStore(tmp_path / "i.duckdb")
    assert store.schema_version() == SCHEMA_VERSION
    store.close()


def test_version_1_database_is_migrated_to_current_shape(tmp_path):
    old = tmp_path / "old.duckdb"
    con = duckdb.connect(str(old))
    con.execute("CREATE TABLE schema_version (version INTEGER NOT NULL, applied_at TIMESTAMP)")
    con.execute(_migrations()[0][1])
    con.execute("INSERT INTO schema_version VALUES (1, now())")
    con.execute("""INSERT INTO file_state (file_id, path, size_bytes, mtime_ns, content_hash,
                   language, chunk_count) VALUES (1, 'a.py', 3, 1, 'x', 'python', 1)""")
    con.execute("""INSERT INTO chunks VALUES ('c1', 1, 0, 'CODE_FUNCTION', 'f', 'python',
                   1, 1, 0, 3, 1, 'def f(): pass', 'eh')""")
    con.close()
    store = DuckDBStore(old)
    assert store.schema_version() == SCHEMA_VERSION
    rows = store.chunks_for_files()
    assert [(r.file_path, r.label, r.index_text) for r in rows] == [("a.py", "f", "def f(): pass")]
    migrated = table_shapes(store._con)
    store.close()
    fresh = DuckDBStore(tmp_path / "fresh.duckdb")
    assert migrated == table_shapes(fresh._con)
    fresh.close()


def test_newer_database_is_refused(tmp_path):
    path = tmp_path / "new.duckdb"
    DuckDBStore(path).close()
    con = duckdb.connect(str(path))
    con.execute("INSERT INTO schema_version (version) VALUES (?)", [SCHEMA_VERSION + 1])
    con.close()
    with pytest.raises(StoreError, match="newer than this contextd"):
        DuckDBStore(path)


def test_write_replaces_file_rows_and_tracks_changes(make_store):
    store = make_store()
    g1 = store.write_files([
        record("a.py", make_chunk("def alpha(): beta()", "alpha",
                                  defines=[SymbolDef("alpha", "function", 1)],
                                  references=["beta"])),
        record("b.py", make_chunk("def beta(): pass", "beta",
                                  defines=[SymbolDef("beta", "function", 1)])),
    ])
    assert {r.label for r in store.chunks_for_files()} == {"alpha", "beta"}
    assert [s[1] for s in store.find_symbols(["beta"])] == ["beta"]
    assert [s[1] for s in store.find_symbols([], ["alp"])] == ["alpha"]
    assert [t for _, t in store.find_references(["beta"])] == ["beta"]
    g2 = store.write_files([record("a.py", make_chunk("def gamma(): pass", "gamma"),
                                   digest="h2")])
    assert g2 > g1
    assert {r.label for r in store.chunks_for_files()} == {"gamma", "beta"}
    assert store.find_references(["beta"]) == []
    assert store.file_states()["a.py"].content_hash == "h2"
    file_id = store.file_states()["a.py"].file_id
    assert store.changes_since(g1).changed_file_ids == (file_id,)
    assert store.delete_files(["b.py"]) == 1
    changes = store.changes_since(g2)
    assert changes.removed_file_ids and not changes.changed_file_ids
    assert {r.label for r in store.chunks_for_files()} == {"gamma"}


def test_embeddings_are_a_cache_keyed_by_model_and_text(make_store):
    store = make_store()
    store.write_files([record("a.py", make_chunk("x = 1", "x"), make_chunk("y = 2", "y"))])
    missing = store.missing_embeddings("m1", 10)
    assert len(missing) == 2 and store.count_missing_embeddings("m1") == 2
    vectors = np.eye(2, 4, dtype=np.float32)
    store.put_embeddings("m1", [h for h, _ in missing], vectors)
    store.put_embeddings("m1", [h for h, _ in missing], vectors)  # ignored: already cached
    assert store.count_missing_embeddings("m1") == 0
    assert store.count_missing_embeddings("m2") == 2
    by_hash = store.vectors_for("m1", [h for h, _ in missing])
    assert sorted(by_hash) == sorted(h for h, _ in missing)
    assert all(v.shape == (4,) for v in by_hash.values())
    # same text in another file reuses the vector
    store.write_files([record("b.py", make_chunk("x = 1", "x"))])
    assert store.count_missing_embeddings("m1") == 0


def test_readers_never_see_half_a_file(make_store):
    store = make_store()
    chunks = [make_chunk(f"v{i} = {i}", f"v{i}") for i in range(50)]
    store.write_files([record("a.py", *chunks)])
    seen: set[int] = set()
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            seen.add(len(store.chunks_for_files()))

    thread = threading.Thread(target=reader)
    thread.start()
    for n in range(20):
        store.write_files([record("a.py", *chunks[: 25 if n % 2 else 50])])
    stop.set()
    thread.join()
    assert seen <= {25, 50}


def test_jobs_progress_errors_and_meta(make_store):
    store = make_store()
    job = store.create_job("rebuild_full", "all", 3, "test")
    store.update_job(job.job_id, status="in_progress", files_processed=2, metrics={"a": 1})
    got = store.get_job(job.job_id)
    assert got.status == "in_progress" and got.files_processed == 2 and got.metrics == {"a": 1}
    assert [j.job_id for j in store.list_jobs(["in_progress"])] == [job.job_id]
    with pytest.raises(ValueError):
        store.update_job(job.job_id, bogus=1)
    store.progress_begin(job.job_id, ["a", "b"])
    store.progress_mark(["a"], "completed")
    assert store.progress_pending() == (job.job_id, ["b"])
    store.progress_clear()
    assert store.progress_pending() == (None, [])
    store.record_error("bad.py", "decode", "boom")
    store.record_error("bad.py", "decode", "boom again")
    errors = store.list_errors()
    assert len(errors) == 1 and errors[0]["retry_count"] == 1
    store.set_meta("k", "v")
    assert store.get_meta("k") == "v"
    assert store.save_project_config({"watch_paths": ["."], "ignore_patterns": []}) is False
    assert store.save_project_config({"watch_paths": ["src"], "ignore_patterns": []}) is True
    stats = store.stats()
    assert stats["errors"] == 1 and stats["total_files"] == 0


def test_database_locked_by_another_process_is_a_clear_error(tmp_path):
    import subprocess
    import sys
    path = tmp_path / "i.duckdb"
    DuckDBStore(path).close()
    holder = subprocess.Popen([sys.executable, "-c",
                               f"import duckdb,time; c=duckdb.connect({str(path)!r}); "
                               "print('ready', flush=True); time.sleep(30)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(StoreError, match="cannot open index"):
            DuckDBStore(path)
    finally:
        holder.kill()


def test_nearest_is_answered_by_postgres_and_left_to_numpy_by_duckdb(make_store):
    store = make_store()
    store.write_files([record("a.py", make_chunk("x = 1", "x"), make_chunk("y = 2", "y"),
                              make_chunk("z = 3", "z"))])
    missing = store.missing_embeddings("m1", 10)
    vectors = np.array([[1, 0, 0, 0], [0.8, 0.6, 0, 0], [0, 0, 1, 0]], dtype=np.float32)
    store.put_embeddings("m1", [h for h, _ in missing], vectors)
    label_of = {c.embed_hash: c.label for c in store.chunks_for_files()}
    found = store.nearest("m1", np.array([1, 0, 0, 0], dtype=np.float32), 2)
    if isinstance(store, DuckDBStore):
        assert found is None
        return
    chunks = store.chunks_by_id([cid for cid, _ in found])
    expected = [label_of[h] for h, _ in missing]
    assert [chunks[cid].label for cid, _ in found] == expected[:2]
    assert [round(score, 4) for _, score in found] == [1.0, 0.8]


def test_a_rebuild_claim_is_exclusive_across_store_objects(make_store):
    first, second = make_store(), make_store()
    release = first.try_exclusive("rebuild")
    assert release is not None
    other = second.try_exclusive("rebuild")
    if isinstance(first, DuckDBStore):  # one process owns a DuckDB file: nothing to claim
        assert other is not None
        return
    assert other is None
    release()
    again = second.try_exclusive("rebuild")
    assert again is not None
    again()
