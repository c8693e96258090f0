"""The DuckDB store's bulk I/O without pyarrow: ids and vectors through the Arrow C data
interface (contextd/store/duckdb/arrow_io.py, nanoarrow), other rows through DuckDB's numpy scan, and
no process of a real index, query, stash or store copy importing pyarrow (it is no longer a
dependency: 174 MB of the default install)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import numpy as np
import pytest

from contextd.store.duckdb.arrow_io import ids_and_vectors, vector_table
from test_embedders import rates_repository

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def con():
    connection = duckdb.connect()
    yield connection
    connection.close()


def test_vectors_go_in_and_come_out_bit_for_bit(con):
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((1000, 384)).astype(np.float32)
    vectors[0, :4] = [0.0, -0.0, np.finfo(np.float32).tiny / 2, np.float32(1e38)]
    ids = [f"{i:032x}" for i in range(999)] + ["ünïcode ✓ id"]
    table = vector_table(("text_hash", "vector"), ids, vectors)
    con.register("incoming", table)
    assert con.sql("DESCRIBE incoming").fetchall()[:2] == [
        ("text_hash", "VARCHAR", "YES", None, None, None),
        ("vector", "FLOAT[]", "YES", None, None, None)]
    con.execute("CREATE TABLE e AS SELECT text_hash, vector FROM incoming")
    con.execute("INSERT INTO e SELECT text_hash || '+', vector FROM incoming")  # read twice
    con.unregister("incoming")
    got_ids, matrix = ids_and_vectors(con.sql("SELECT text_hash, vector FROM e "
                                              "WHERE NOT text_hash LIKE '%+' ORDER BY rowid"))
    assert got_ids == ids
    assert matrix.dtype == np.float32 and matrix.flags.c_contiguous
    assert matrix.tobytes() == vectors.tobytes()  # -0.0 and subnormals included
    assert con.execute("SELECT count(*) FROM e").fetchall() == [(2000,)]


def test_a_read_spanning_several_batches_keeps_rows_and_ids_together(con):
    # DuckDB's stream hands out 131,072 rows a batch; ids must stay beside their vectors.
    ids, matrix = ids_and_vectors(con.sql(
        "SELECT 'id-' || i, [i::FLOAT, -i::FLOAT, 0.5] FROM range(300000) t(i) ORDER BY i"))
    assert len(ids) == 300_000 and matrix.shape == (300_000, 3)
    picks = [0, 131_071, 131_072, 262_144, 299_999]
    assert [ids[i] for i in picks] == [f"id-{i}" for i in picks]
    assert matrix[picks].tolist() == [[i, -i, 0.5] for i in picks]


def test_the_matrix_outlives_its_connection():
    """The matrix is numpy's own: it stays right after the cursor and the connection (and
    the Arrow batches it was read from) are gone."""
    connection = duckdb.connect()
    ids, matrix = ids_and_vectors(connection.cursor().sql(
        "SELECT 'id-' || i, [i::FLOAT, 2 * i::FLOAT] FROM range(1000) t(i) ORDER BY i"))
    rows = matrix[10:12]  # a view of the view
    connection.close()
    del matrix
    assert ids[10] == "id-10" and rows.tolist() == [[10, 20], [11, 22]]


def test_empty_reads_and_writes(con):
    ids, matrix = ids_and_vectors(con.sql("SELECT 'a' AS id, [1.0::FLOAT] AS v WHERE false"))
    assert ids == [] and matrix.shape == (0, 0) and matrix.dtype == np.float32
    con.register("nothing", vector_table(("h", "v"), [], np.zeros((0, 384), np.float32)))
    assert con.execute("SELECT count(*) FROM nothing").fetchall() == [(0,)]
    con.unregister("nothing")


def test_reads_refuse_nulls_ragged_vectors_and_other_shapes(con):
    with pytest.raises(ValueError, match="NULL"):
        ids_and_vectors(con.sql("SELECT 'a', NULL::FLOAT[]"))
    with pytest.raises(ValueError, match="NULL"):
        ids_and_vectors(con.sql("SELECT 'a', [1.0, NULL]::FLOAT[]"))
    with pytest.raises(ValueError, match="different lengths"):
        ids_and_vectors(con.sql("SELECT * FROM (VALUES ('a', [1.0, 2.0]::FLOAT[]), "
                                "('b', [1.0, 2.0, 3.0]::FLOAT[])) t(i, v)"))
    with pytest.raises(ValueError, match="Arrow formats"):
        ids_and_vectors(con.sql("SELECT 'a', [1.0, 2.0]::DOUBLE[]"))
    with pytest.raises(ValueError, match="texts and vectors"):
        vector_table(("h", "v"), ["a", "b"], np.zeros((3, 4), np.float32))
    # The stream of a refused read was released: the connection works on.
    assert con.execute("SELECT 42").fetchall() == [(42,)]


def test_a_failing_query_raises_and_leaves_the_connection_usable(con):
    with pytest.raises(duckdb.Error):
        ids_and_vectors(con.sql("SELECT 'a', [error('boom')::FLOAT]"))
    assert con.execute("SELECT 1").fetchall() == [(1,)]


def test_store_rows_with_empty_lists_and_nulls_only(tmp_path):
    """DuckDB infers a numpy object column's type from its values: a batch of segments none
    of which references another or expires, or files without warnings, must still insert."""
    from contextd.store.base import SegmentRow
    from contextd.store.duckdb.store import DuckDBStore

    store = DuckDBStore(tmp_path / "i.duckdb")
    try:
        when = datetime(2026, 3, 4, 5, 6, 7, 890123)
        plain = [SegmentRow(f"s{i}", "sess", f"t{i}", "message", when, when, 1, None, None,
                            (), f"h{i}", None, None, False) for i in range(3)]
        store.put_segments(plain)
        later = [SegmentRow("s9", "sess", "t9", "decision", when, when + timedelta(hours=1),
                            2, "topic", "src", ("s0", "s1"), "h9", "m",
                            when + timedelta(days=3), True)]
        store.put_segments(later)
        assert store.segments() == plain + later
        assert store.segments(["s9"])[0].references == ("s0", "s1")
    finally:
        store.close()


# ----- pyarrow is imported by no process of the default path --------------------------------
SITECUSTOMIZE = '''
import importlib.abc, os, sys


class NoPyarrow(importlib.abc.MetaPathFinder):
    """Records any import of pyarrow, then fails it as if pyarrow were not installed."""

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "pyarrow":
            with open(os.environ["CONTEXTD_TEST_PYARROW_LOG"], "a") as log:
                log.write(f"{os.getpid()} {' '.join(sys.argv)[:200]}: import {name}\\n")
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None


sys.meta_path.insert(0, NoPyarrow())
'''

STASH_AND_COPY = textwrap.dedent("""
    import sys
    from datetime import datetime
    import numpy as np
    import contextd.mcp.app  # the MCP server and its tools, imported
    from contextd.store.base import SegmentRow
    from contextd.store.duckdb.store import DuckDBStore
    from contextd.store.transfer import copy_index

    source = DuckDBStore(sys.argv[1] + "/a.duckdb")
    when = datetime(2026, 1, 1)
    with source.batch():
        source.put_segments([SegmentRow("s0", "sess", "remember", "message", when, when, 2,
                                        None, None, (), "hs", "m", None, True)])
        source.put_embeddings("m", ["hs"], np.ones((1, 3), dtype=np.float32))
    target = DuckDBStore(sys.argv[1] + "/b.duckdb")
    copy_index(source, target)  # export_rows / import_rows, vectors included
    assert target.segments() == source.segments()
    assert target.segment_vectors("m")[0] == ["s0"]
    source.close()
    target.close()
    print("pyarrow" in sys.modules)
""")


@pytest.mark.slow
def test_index_query_stash_and_copy_never_import_pyarrow(tmp_path):
    """A cold ``contextd query`` (index, embed, load the vectors, answer), a second one in a
    fresh process (the semantic index loaded from the store), the stash and a store copy:
    every Python process they start runs with pyarrow unimportable, and none tries."""
    from contextd.config.sections import EmbeddingConfig
    from contextd.embedders.registry import get_embedder

    get_embedder(EmbeddingConfig()).prepare()  # the model's cached graph, as in a real use
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    log = tmp_path / "pyarrow-imports.log"
    env = {**os.environ, "CONTEXTD_TEST_PYARROW_LOG": str(log),
           "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]),
           "XDG_RUNTIME_DIR": str(tmp_path / "run")}
    root = rates_repository(tmp_path / "repo")

    probe = subprocess.run([sys.executable, "-c", "import pyarrow"], env=env,
                           capture_output=True, text=True)
    assert probe.returncode != 0 and "blocked" in probe.stderr  # the blocker works
    log.unlink()
    for _ in range(2):
        done = subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), "--json",
                               "query", "shipping price of a parcel"], capture_output=True,
                              text=True, env=env, cwd=tmp_path, timeout=300)
        assert done.returncode == 0, done.stderr
        hit = json.loads(done.stdout)["hits"][0]
        assert hit["file_path"] == "src/rates.py" and "semantic" in hit["providers"], hit
    done = subprocess.run([sys.executable, "-c", STASH_AND_COPY, str(tmp_path)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
    assert not log.exists(), log.read_text()


@pytest.mark.slow
def test_the_store_io_benchmark_runs_and_reports_no_pyarrow(tmp_path):
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks/bench_store_io.py"), "--chunks", "400",
         "--dims", "8", "--window", "128", "--segments", "100", "--repeat", "1",
         "--dir", str(tmp_path), "--json", str(tmp_path / "figures.json")],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    figures = json.loads((tmp_path / "figures.json").read_text())
    assert figures["put_embeddings"]["rows"] == 400 and figures["chunk_vectors"]["matrix_mb"] > 0
    assert "pyarrow imported: False" in done.stdout
