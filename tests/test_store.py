"""The index stores on real databases: schema, migrations, atomic writes, cache, jobs.

Tests taking ``make_store`` run against both backends: a DuckDB file and a workspace of a
real PostgreSQL server with pgvector (the postgres fixtures of tests/conftest.py).
"""

from __future__ import annotations

import threading

import duckdb
import numpy as np
import pytest

from contextd.errors import StoreError
from contextd.records import Chunk, ChunkKind, SymbolDef
from contextd.store import FileRecord, IndexedChunk
from contextd.store.base import DocumentRecord
from contextd.store.duckdb.store import SCHEMA_VERSION, DuckDBStore, _migrations


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


def test_file_stats_of_unchanged_files_are_updated_together(make_store):
    """After a git checkout, files whose bytes did not change get their new size and
    modification time in one statement (DuckDB ran an executemany row by row: seconds for
    a few hundred files); the others and every content hash stay as they were."""
    store = make_store()
    paths = [f"m{i}.py" for i in range(300)]
    store.write_files([record(p, make_chunk(f"v{i} = {i}", f"v{i}"), digest=f"h{i}")
                       for i, p in enumerate(paths)])
    before = store.file_states()
    store.update_file_stats([(p, 1000 + i, 5000 + i) for i, p in enumerate(paths[:200])])
    after = store.file_states()
    for i, p in enumerate(paths):
        state = after[p]
        assert (state.file_id, state.content_hash) == (before[p].file_id, f"h{i}")
        if i < 200:
            assert (state.size_bytes, state.mtime_ns) == (1000 + i, 5000 + i)
        else:
            assert (state.size_bytes, state.mtime_ns) == (before[p].size_bytes,
                                                          before[p].mtime_ns)


def test_missing_embeddings_of_some_files_only(make_store):
    """A knowledge add embeds its own documents' chunks, not a bootstrap's backlog (issue
    26): ``paths`` limits the texts to those of the named stored files."""
    store = make_store()
    store.write_files([record("a.py", make_chunk("x = 1", "x"), make_chunk("y = 2", "y")),
                       record("kb://notes.md", make_chunk("z = 3", "z"))])
    assert len(store.missing_embeddings("m1", 10)) == 3
    scoped = store.missing_embeddings("m1", 10, paths=["kb://notes.md"])
    assert len(scoped) == 1 and scoped[0][1].endswith("z = 3")
    assert store.missing_embeddings("m1", 10, paths=[]) == []
    store.put_embeddings("m1", [h for h, _ in scoped], np.ones((1, 4), dtype=np.float32))
    assert store.missing_embeddings("m1", 10, paths=["kb://notes.md"]) == []
    assert store.count_missing_embeddings("m1") == 2


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
    # the same vectors as a matrix, a row per hash found (an unknown hash is left out)
    hashes, matrix = store.vector_rows("m1", [h for h, _ in missing] + ["unknown"])
    assert sorted(hashes) == sorted(by_hash) and matrix.dtype == np.float32
    assert all(np.array_equal(row, by_hash[h]) for h, row in zip(hashes, matrix))
    assert store.vector_rows("m2", [h for h, _ in missing])[0] == []
    # in batches, when all are asked for (a scan of the table on DuckDB) or one of them
    store.put_embeddings("m2", [missing[0][0]], vectors[:1])  # another model's row is skipped
    for asked in ([h for h, _ in missing], [missing[1][0]]):
        batches = list(store.vector_batches("m1", asked, 1))
        found = {h: row for hashes, rows in batches for h, row in zip(hashes, rows)}
        assert set(asked) <= set(found) <= set(by_hash)
        assert all(np.array_equal(found[h], by_hash[h]) for h in asked)
        assert all(len(hashes) <= 1 for hashes, _ in batches)
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


def kb_document(path: str, text: str, pages=()) -> DocumentRecord:
    return DocumentRecord(record(path, make_chunk(text, path.rsplit("/", 1)[-1])),
                          source=f"/docs/{path[5:]}", format="markdown",
                          page_starts=tuple(pages), title=path)


def test_knowledge_context_round_trip(make_store):
    store = make_store()
    store.write_files([record("a.py", make_chunk("x = 1", "x"))])
    assert [c["name"] for c in store.kb_contexts()] == ["default"]
    assert store.kb_create_context("guides", "Guides", "how-tos") is True
    assert store.kb_create_context("guides", "GUIDES", "again") is False
    g0 = store.generation()
    gen = store.kb_write_documents([kb_document("kb://g/setup.md", "install it", [1, 9])],
                                   ["guides"])
    assert gen > g0
    (doc,) = store.kb_documents("guides")
    assert (doc["path"], doc["pages"], doc["contexts"], doc["chunks"]) == \
        ("kb://g/setup.md", 2, ["guides"], 1)
    assert list(store.file_states()) == ["a.py"]  # documents are not project files
    assert list(store.file_states("kb://")) == ["kb://g/setup.md"]
    stats = store.stats()
    assert (stats["total_files"], stats["total_chunks"], stats["knowledge_documents"],
            stats["knowledge_chunks"]) == (1, 1, 1, 1)
    guides = store.kb_contexts("guides")[0]
    assert (guides["display_name"], guides["documents"], guides["chunks"]) == ("Guides", 1, 1)

    assert store.kb_link(["kb://g/setup.md"], ["default", "guides"]) == 1
    assert store.kb_document_map()["kb://g/setup.md"].contexts == ("default", "guides")
    assert store.kb_document_map()["kb://g/setup.md"].page_starts == (1, 9)
    assert store.kb_unlink(["kb://g/setup.md"], ["default"]) == (1, [])
    assert store.kb_documents(paths=["kb://g/setup.md"])[0]["contexts"] == ["guides"]

    g1 = store.generation()
    assert store.kb_delete_context("guides") == ["kb://g/setup.md"]  # its only context
    assert store.generation() > g1
    assert store.kb_documents() == [] and store.kb_document_map() == {}
    assert store.file_states("kb://") == {}
    assert [c["name"] for c in store.kb_contexts()] == ["default"]
    assert list(store.file_states()) == ["a.py"]


def test_stash_segments_round_trip_with_vectors(make_store):
    from datetime import datetime, timedelta

    from contextd.store.base import SegmentRow

    store = make_store()
    start = datetime(2026, 1, 2, 3, 4, 5)
    rows = [SegmentRow(f"s{i}", "sess", f"text {i}", "message", start, start
                       + timedelta(seconds=i), 3, "topic" if i else None, None,
                       ("s0",) if i else (), f"h{i}", None,
                       start + timedelta(days=1) if i == 2 else None, False)
            for i in range(3)]
    with store.batch():
        store.put_segments(rows)
        store.put_embeddings("m", ["h0", "h1"], np.eye(2, 3, dtype=np.float32))
    assert store.segments() == rows
    assert [s.segment_id for s in store.segments(["s2", "nope"])] == ["s2"]
    assert store.count_segments() == 3
    store.set_segment_model(["s0", "s1"], "m")
    assert [s.embedding_model for s in store.segments()] == ["m", "m", None]
    ids, matrix = store.segment_vectors("m")
    assert ids == ["s0", "s1"] and np.allclose(matrix, np.eye(2, 3))
    assert store.segment_vectors("other")[0] == []
    assert store.protect_segments(["s1", "nope"], True) == 1
    assert [s.protected for s in store.segments()] == [False, True, False]
    store.prune_embeddings("m")  # a segment's vector is kept though no chunk uses it
    assert store.segment_vectors("m")[0] == ["s0", "s1"]
    assert store.delete_segments(["s0", "s2", "nope"]) == 2
    assert [s.segment_id for s in store.segments()] == ["s1"]


def test_search_sessions_put_get_list_prune(make_store):
    from datetime import datetime, timedelta

    from contextd.store.base import StoredSearchSession

    store = make_store()
    base = datetime(2026, 3, 1, 12, 0, 0)
    for i in range(4):
        store.put_search_session(StoredSearchSession(
            f"q{i}", f"query {i}", base + timedelta(hours=i), {"top_k": i},
            1, ({"path": f"f{i}.py", "score": 0.5, "text": "é"},)))
    got = store.get_search_sessions(["q1", "missing"])
    assert list(got) == ["q1"]
    assert got["q1"].params == {"top_k": 1} and got["q1"].created_at == base + timedelta(hours=1)
    assert got["q1"].results == ({"path": "f1.py", "score": 0.5, "text": "é"},)
    listed = store.list_search_sessions(limit=3)
    assert [s.session_id for s in listed] == ["q3", "q2", "q1"]
    assert all(s.results == () for s in listed)
    assert store.prune_search_sessions(3) == 1
    assert store.prune_search_sessions(10, created_before=base + timedelta(hours=2)) == 1
    assert [s.session_id for s in store.list_search_sessions()] == ["q3", "q2"]


def test_skips_are_replaced_by_reason_and_prefix(make_store):
    from contextd.store.base import SkippedFile

    store = make_store()
    store.replace_skips([SkippedFile("big.bin", "too_large", "9 MB", 9, 1),
                         SkippedFile("src/gen.py", "generated", "header"),
                         SkippedFile("src/x.py", "failed", "parser crashed")],
                        ["too_large", "generated", "failed"])
    # A walk of src/ restates its boundary reasons; big.bin and the failure stay.
    store.replace_skips([SkippedFile("src/key.pem", "secret_file", "private key")],
                        ["generated", "secret_file"], prefixes=["src"])
    assert [(s.path, s.reason) for s in store.list_skips()] == [
        ("big.bin", "too_large"), ("src/key.pem", "secret_file"), ("src/x.py", "failed")]
    assert store.list_skips("big.bin") == [SkippedFile("big.bin", "too_large", "9 MB", 9, 1)]
    assert store.stats()["skipped"] == {"failed": 1, "secret_file": 1, "too_large": 1}


def test_usage_summary_after_recorded_answers(make_store):
    store = make_store()
    store.write_files([record("a.py", make_chunk("a = 1\n" * 40, "a")),
                       record("b.py", make_chunk("b = 2\n" * 20, "b"))])
    whole_a = sum(c.tokens for c in store.chunks_for_files() if c.file_path == "a.py")
    whole_b = sum(c.tokens for c in store.chunks_for_files() if c.file_path == "b.py")
    store.record_usage("t1", "q1", ["bm25", "semantic"], 2, 50, 10.0, 0, ["a.py", "b.py"],
                       {"bm25": 0.5, "semantic": 0.25})
    store.record_usage_many([("t1", "q2", ["bm25"], 1, 30, 20.0, None, ["a.py"],
                              {"bm25": 0.75}),
                             ("", "q3", ["symbol"], 1, 20, 30.0)])
    summary = store.usage_summary(7)
    assert (summary["days"], summary["queries"], summary["tokens_served"],
            summary["source_tokens"]) == (7, 3, 100, 2 * whole_a + whole_b)
    assert summary["latency_ms"]["p50"] == pytest.approx(20.0)
    assert summary["latency_ms"]["p99"] == pytest.approx(29.8)
    assert [d["queries"] for d in summary["per_day"]] == [3]
    assert summary["per_task"] == [
        {"task_id": "t1", "queries": 2, "tokens_served": 80,
         "source_tokens": 2 * whole_a + whole_b},
        {"task_id": "(no task)", "queries": 1, "tokens_served": 20, "source_tokens": 0}]
    by_provider = {p["provider"]: p for p in summary["providers"]}
    assert [p["provider"] for p in summary["providers"]] == ["bm25", "semantic", "symbol"]
    assert by_provider["bm25"]["selection_rate"] == pytest.approx(2 / 3)
    assert by_provider["bm25"]["avg_score"] == pytest.approx(0.625)
    assert by_provider["symbol"]["avg_score"] is None
    empty = store.usage_summary(0)  # nothing recorded in the future: a summary all the same
    assert (empty["queries"], empty["per_day"], empty["providers"]) == (0, [], [])
    assert empty["latency_ms"] == {"p50": None, "p95": None, "p99": None}
    assert empty.keys() == summary.keys()


def test_store_copy_carries_knowledge_and_memory_both_ways(tmp_path, postgres_url, workspace):
    from datetime import datetime

    from contextd.store.base import SegmentRow
    from contextd.store.postgres import PostgresStore
    from contextd.store.transfer import copy_index

    source = DuckDBStore(tmp_path / "a.duckdb")
    source.write_files([record("a.py", make_chunk("x = 1", "x"))])
    source.kb_create_context("guides", "Guides", "")
    source.kb_write_documents([kb_document("kb://setup.md", "install it", [1, 4])],
                              ["guides", "default"])
    when = datetime(2026, 1, 1)
    source.put_segments([SegmentRow("s0", "sess", "remember", "message", when, when, 2, None,
                                    None, (), "hs", "m", None, True)])
    source.put_embeddings("m", ["hs"], np.ones((1, 3), dtype=np.float32))
    middle = PostgresStore(postgres_url, workspace)
    back = DuckDBStore(tmp_path / "b.duckdb")
    try:
        copied = copy_index(source, middle)
        assert (copied["kb_documents"], copied["kb_memberships"], copied["stash_segments"]) \
            == (1, 2, 1)
        copy_index(middle, back)
        for store in (middle, back):
            assert store.kb_document_map() == source.kb_document_map()
            assert [c["name"] for c in store.kb_contexts()] == ["default", "guides"]
            assert store.segments() == source.segments()
            assert store.segment_vectors("m")[0] == ["s0"]
            assert list(store.file_states()) == ["a.py"]
    finally:
        for store in (source, middle, back):
            store.close()


def test_close_waits_for_a_long_read_in_another_thread(tmp_path):
    """A shutdown while another thread loads every vector (the semantic index warming up):
    DuckDB refuses to close a connection while a cursor of it runs a query, and leaves it
    half closed. close() waits for the read; later reads get a clear error."""
    path = tmp_path / "context.duckdb"
    store = DuckDBStore(path)
    chunks = [make_chunk(f"value_{i} = {i}", f"value_{i}", line=i + 1) for i in range(20_000)]
    store.write_files([record("big.py", *chunks)])
    missing = store.missing_embeddings("m", 100_000)
    rng = np.random.default_rng(0)
    store.put_embeddings("m", [h for h, _ in missing],
                         rng.standard_normal((len(missing), 384)).astype(np.float32))
    reads, ended = [], []

    def load_vectors_until_closed() -> None:
        try:
            while True:
                reads.append(len(store.chunk_vectors("m")[0]))
        except StoreError as exc:
            ended.append(str(exc))

    reader = threading.Thread(target=load_vectors_until_closed)
    reader.start()
    while not reads:  # reads back to back: close() lands in the middle of one
        threading.Event().wait(0.01)
    store.close()
    reader.join(timeout=30)
    assert ended and "closing" in ended[0] and set(reads) == {20_000}
    reopened = DuckDBStore(path)
    assert len(reopened.chunk_vectors("m")[0]) == 20_000
    reopened.close()
