"""The indexer on real git repositories in tmp_path and a real DuckDB file: bootstrap, edits,
deletes, renames, directory moves, failures, and SIGKILL at any point followed by a resume."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import duckdb

from contextd.indexer import Indexer
from contextd.indexer.plan import order_by_priority
from contextd.indexer.report import BUSY
from contextd.config.project import Project
from contextd.store.duckdb import DuckDBStore

FUNC = "def {name}(x):\n    \"\"\"{doc}\"\"\"\n    return x + {n}\n\n\n"


def make_repo(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def open_indexer(root: Path, embed: bool = False) -> Indexer:
    project = Project.open(root)
    return Indexer(project, DuckDBStore(project.db_path), embed=embed)


def stored(indexer: Indexer) -> dict[str, list[str]]:
    """Chunk texts by file path."""
    out: dict[str, list[str]] = {}
    for row in indexer.store.chunks_for_files():
        out.setdefault(row.file_path, []).append(row.text)
    return out


def small_repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {
        "src/app.py": FUNC.format(name="alpha", doc="Alpha adds one.", n=1)
        + FUNC.format(name="beta", doc="Beta adds two.", n=2),
        "src/util/helpers.py": FUNC.format(name="gamma", doc="Gamma helper.", n=3),
        "docs/guide.md": "# Guide\n\nHow to use the app.\n\n## Install\n\nRun it.\n",
        "config.yaml": "name: demo\nport: 8080\n",
        "node_modules/dep/index.js": "module.exports = 1;\n",
    })


def test_bootstrap_indexes_the_repository(tmp_path):
    indexer = open_indexer(small_repo(tmp_path))
    report = indexer.ensure_indexed()
    assert report.mode == "bootstrap"
    assert report.files_indexed == 4 and report.files_failed == 0
    chunks = stored(indexer)
    assert set(chunks) == {"src/app.py", "src/util/helpers.py", "docs/guide.md", "config.yaml"}
    assert any("def beta" in t for t in chunks["src/app.py"])
    assert indexer.store.find_symbols(["gamma"])
    assert indexer.status()["text"] == "4 / 4 files"
    assert indexer.store.progress_pending() == (None, [])
    again = indexer.ensure_indexed()
    assert again.mode == "incremental" and again.files_indexed == 0
    assert again.files_unchanged == 4


def test_edit_delete_rename_and_directory_move(tmp_path):
    root = small_repo(tmp_path)
    indexer = open_indexer(root)
    indexer.ensure_indexed()
    (root / "src/app.py").write_text(FUNC.format(name="alpha", doc="Edited.", n=10))
    assert indexer.refresh(["src/app.py"]).files_indexed == 1
    assert stored(indexer)["src/app.py"] == [FUNC.format(name="alpha", doc="Edited.",
                                                         n=10).strip()]
    (root / "config.yaml").unlink()
    assert indexer.refresh(["config.yaml"]).files_removed == 1
    (root / "docs/guide.md").rename(root / "docs/manual.md")
    indexer.refresh(["docs/guide.md", "docs/manual.md"])
    os.rename(root / "src/util", root / "lib")
    indexer.refresh(["src/util", "lib"])
    assert set(stored(indexer)) == {"src/app.py", "docs/manual.md", "lib/helpers.py"}
    # A whole-project refresh finds nothing left to do.
    report = indexer.refresh()
    assert report.files_indexed == report.files_removed == 0


def test_a_batch_of_many_paths_refreshes_exactly_those(tmp_path):
    """A watcher batch of a ``git checkout`` names hundreds of paths (files edited, added,
    deleted, a directory gone); its stored states are read at once, not per path: the
    refresh still touches those paths and nothing else (a look-alike name beside one,
    ``mod_1.pyx``, stays as it is)."""
    files = {f"pkg/mod_{i}.py": FUNC.format(name=f"f{i}", doc=f"Function {i}.", n=i)
             for i in range(30)}
    files |= {f"old/part_{i}.py": FUNC.format(name=f"p{i}", doc="Old part.", n=i)
              for i in range(5)}
    files["pkg/mod_1.pyx"] = "def look_alike(): pass\n"
    root = make_repo(tmp_path / "repo", files)
    (root / "context.toml").write_text('[indexing]\nallowed_extensions = [".py", ".pyx"]\n')
    indexer = open_indexer(root)
    indexer.ensure_indexed()
    for i in range(0, 30, 2):
        (root / f"pkg/mod_{i}.py").write_text(FUNC.format(name=f"g{i}", doc="Edited.", n=i))
    for i in (1, 3):
        (root / f"pkg/mod_{i}.py").unlink()
    (root / "pkg/new.py").write_text(FUNC.format(name="fresh", doc="New.", n=0))
    (root / "pkg/mod_1.pyx").write_text("def look_alike_edited(): pass\n")  # not named
    for i in range(5):
        (root / f"old/part_{i}.py").unlink()
    (root / "old").rmdir()
    named = [f"pkg/mod_{i}.py" for i in range(30)] + ["pkg/new.py", "old"]
    report = indexer.refresh(named)
    assert (report.files_indexed, report.files_removed, report.files_unchanged) == (16, 7, 13)
    chunks = stored(indexer)
    assert "pkg/mod_1.py" not in chunks and not any(p.startswith("old/") for p in chunks)
    assert "look_alike_edited" not in "".join(chunks["pkg/mod_1.pyx"])
    assert any("def g4" in t for t in chunks["pkg/mod_4.py"])
    assert any("def f5" in t for t in chunks["pkg/mod_5.py"])
    assert "pkg/new.py" in chunks


def test_a_refresh_writes_full_batches_where_a_bootstrap_also_writes_by_time(tmp_path,
                                                                            monkeypatch):
    """A bootstrap writes by time as well as by size (its early files answer the first
    questions); a refresh of many paths (a ``git checkout``) writes full batches: 34
    transactions of ~22 files took a fifth of fastapi's refresh (issue 37). Written by time
    as often as possible here, the bootstrap takes many transactions, the refresh one."""
    from contextd.indexer import pipeline

    monkeypatch.setattr(pipeline, "WRITE_BATCH_SECONDS", 0.0)
    monkeypatch.setattr(pipeline, "WRITE_INTERVAL_FACTOR", 0)
    files = {f"pkg/mod_{i}.py": FUNC.format(name=f"f{i}", doc=f"Function {i}.", n=i)
             for i in range(20)}
    root = make_repo(tmp_path / "repo", files)
    indexer = open_indexer(root)
    store = indexer.store  # each batch of files is one transaction and one new generation
    indexer.ensure_indexed()
    assert store.generation() >= 10
    for i in range(20):
        (root / f"pkg/mod_{i}.py").write_text(FUNC.format(name=f"g{i}", doc="Edited.", n=i))
    before = store.generation()
    report = indexer.refresh(list(files))
    assert report.files_indexed == 20 and store.generation() == before + 1
    assert all(any(f"def g{i}" in t for t in stored(indexer)[f"pkg/mod_{i}.py"])
               for i in range(20))


def test_unchanged_content_is_not_rechunked(tmp_path):
    root = small_repo(tmp_path)
    indexer = open_indexer(root)
    indexer.ensure_indexed()
    generation = indexer.store.generation()
    os.utime(root / "src/app.py", ns=(1, 1))  # new mtime, same bytes
    report = indexer.refresh()
    assert report.files_unchanged == 4 and report.files_indexed == 0
    assert indexer.store.generation() == generation
    assert indexer.store.file_states()["src/app.py"].mtime_ns == 1
    assert indexer.refresh().files_seen == 4  # the fast path now holds


def test_latin1_file_is_indexed_with_a_warning_not_dropped(tmp_path):
    """A file with one Latin-1 letter is indexed whole, read as Windows-1252, the fallback
    kept among the file's warnings (issue 40: it was dropped with ``decode_error``)."""
    root = small_repo(tmp_path)
    (root / "src/latin1.py").write_bytes(b"# caf\xe9\n" + b"x = 1\n" * 50)
    indexer = open_indexer(root)
    report = indexer.ensure_indexed()
    assert report.files_failed == 0 and report.files_indexed == 5
    assert indexer.store.list_errors() == []
    assert "# caf\u00e9" in "".join(stored(indexer)["src/latin1.py"])
    indexer.store.close()
    with duckdb.connect(str(indexer.project.db_path), read_only=True) as con:
        warnings = con.execute("SELECT warnings FROM file_state WHERE path = 'src/latin1.py'"
                               ).fetchone()[0]
    assert warnings == ["not valid UTF-8 (invalid continuation byte at byte 5): decoded as "
                        "Windows-1252"]


def test_a_file_neither_utf8_nor_windows_1252_is_recorded_and_the_rest_indexed(tmp_path):
    """A Shift-JIS comment holds bytes Windows-1252 leaves undefined (0x8d here): read as a
    single-byte text its letters would be noise, so the file is a decode_error naming both
    decodings, until it changes."""
    root = small_repo(tmp_path)
    (root / "src/sjis.py").write_bytes("# 注文の合計。\n".encode("shift_jis") + b"x = 1\n" * 50)
    indexer = open_indexer(root)
    report = indexer.ensure_indexed()
    assert report.files_failed == 1 and report.files_indexed == 4
    errors = indexer.store.list_errors()
    assert [(e["file_path"], e["error_type"]) for e in errors] == [("src/sjis.py",
                                                                     "decode_error")]
    assert errors[0]["error_message"] == (
        "not valid UTF-8 (invalid start byte at byte 2), nor Windows-1252 (byte 0x8d at 3 is "
        "undefined there): convert the file to UTF-8")
    (root / "src/sjis.py").write_text("# 注文の合計。\n")
    indexer.refresh(["src/sjis.py"])
    assert indexer.store.list_errors() == []
    assert "src/sjis.py" in stored(indexer)


def test_one_2mb_line_after_normal_code_gives_a_few_chunks_and_the_code_is_found(tmp_path):
    """Normal code (past the 8 KB block the boundary's minified check reads) then one 2 MB
    line, a data blob, was cut into 2,140 chunks (issue 40; 2,700 here). The line is cut to
    MAX_LINE_CHARS in the index and the file says so; the lines after it keep their numbers,
    and the code answers a query."""
    from contextd.query.records import QueryRequest
    from contextd.runtime.engine import Engine
    from contextd.text.long_lines import MAX_LINE_CHARS

    functions = 150
    code = "".join(FUNC.format(name=f"helper_{i}", doc=f"Helper number {i}.", n=i)
                   for i in range(functions))
    code += FUNC.format(name="settle_invoice", doc="Settle an unpaid invoice.", n=1)
    blob = "DATA = '" + "Zm9vYmFy" * (2 * 2**20 // 8) + "'"
    root = make_repo(tmp_path / "repo", {
        "src/blob.py": code + blob + "\ndef after_blob():\n    return 2\n"})
    blob_line = code.count("\n") + 1
    engine = Engine(Project.open(root))
    try:
        engine.indexer.embed = False
        engine.ensure_indexed()
        rows = [r for r in engine.store.chunks_for_files() if r.file_path == "src/blob.py"]
        on_blob = [r for r in rows if r.start_line <= blob_line <= r.end_line]
        assert 1 <= len(on_blob) <= 3 and len(rows) <= functions + 1 + 5
        assert any(r.start_line <= blob_line + 1 <= r.end_line and "after_blob" in r.text
                   for r in rows)
        answer = engine.module.query(QueryRequest("settle unpaid invoice",
                                                  providers=("full_text", "symbol"),
                                                  wait_for_model=False))
        assert answer.hits and answer.hits[0].file_path == "src/blob.py"
        assert "settle_invoice" in answer.hits[0].snippet
    finally:
        engine.close()
    with duckdb.connect(str(root / ".contextd/context.duckdb"), read_only=True) as con:
        warnings = con.execute("SELECT warnings FROM file_state WHERE path = 'src/blob.py'"
                               ).fetchone()[0]
    assert warnings == [f"line {blob_line} longer than {MAX_LINE_CHARS:,} characters (the "
                        f"longest {len(blob):,}): only the first {MAX_LINE_CHARS:,} of each "
                        "indexed"]


def test_unparsable_file_is_recorded_and_still_searchable_as_line_windows(tmp_path):
    root = small_repo(tmp_path)
    (root / "src/broken.py").write_text("def ok(:\n" + ")) ]] }} unique_marker_text ((\n" * 40)
    indexer = open_indexer(root)
    report = indexer.ensure_indexed()
    assert report.files_failed == 0 and report.files_indexed == 5
    errors = indexer.store.list_errors()
    assert [(e["file_path"], e["error_type"]) for e in errors] == [("src/broken.py",
                                                                     "parse_error")]
    assert "cannot parse as python" in errors[0]["error_message"]
    rows = [r for r in indexer.store.chunks_for_files() if "unique_marker_text" in r.text]
    assert rows and all(r.label.startswith("lines ") for r in rows)
    (root / "src/broken.py").write_text("def ok():\n    return 1\n")
    indexer.refresh(["src/broken.py"])
    assert indexer.store.list_errors() == []


def test_changed_chunking_settings_rechunk_unchanged_files(tmp_path):
    """Chunks depend on the settings as much as on the file: a new max_tokens re-chunks every
    file at the next catch-up, though no file changed."""
    body = "".join(f"    total += {n} * weight  # step {n}\n" for n in range(60))
    root = make_repo(tmp_path / "repo", {"calc.py": f"def long(weight):\n    total = 0\n"
                                                    f"{body}    return total\n"})
    indexer = open_indexer(root)
    indexer.ensure_indexed()
    before = len(stored(indexer)["calc.py"])
    assert indexer.ensure_indexed().files_indexed == 0
    (root / "context.toml").write_text("[chunking.python]\nmax_tokens = 64\n")
    indexer.reload()
    report = indexer.ensure_indexed()
    # calc.py, unchanged but re-chunked, and context.toml, new
    assert report.files_indexed == 2 and len(stored(indexer)["calc.py"]) > before


BOOTSTRAP_SCRIPT = textwrap.dedent("""
    import sys
    from contextd.indexer import Indexer
    from contextd.config.project import Project
    from contextd.store.duckdb import DuckDBStore
    project = Project.open(sys.argv[1])
    store = DuckDBStore(project.db_path)
    print(Indexer(project, store, embed=False).ensure_indexed().mode, flush=True)
    store.close()
""")


def run_bootstrap(root: Path, kill_after: float | None = None) -> str:
    proc = subprocess.Popen([sys.executable, "-c", BOOTSTRAP_SCRIPT, str(root)],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    if kill_after is None:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        return out.strip()
    time.sleep(kill_after)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return "killed"


def snapshot(db: Path) -> dict[str, object]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {
            "files": con.execute("SELECT path, content_hash, chunk_count, size_bytes FROM "
                                 "file_state ORDER BY path").fetchall(),
            "chunks": con.execute("SELECT f.path, c.ordinal, c.chunk_id, c.text, c.embed_hash "
                                  "FROM chunks c JOIN file_state f USING (file_id) "
                                  "ORDER BY 1, 2").fetchall(),
            "symbols": con.execute("SELECT f.path, s.name, s.line FROM symbols s JOIN "
                                   "file_state f USING (file_id) ORDER BY ALL").fetchall(),
            "links": con.execute("SELECT count(*) FROM links").fetchone(),
            "orphans": con.execute(
                "SELECT (SELECT count(*) FROM chunks WHERE file_id NOT IN "
                "(SELECT file_id FROM file_state)) + (SELECT count(*) FROM symbols WHERE "
                "file_id NOT IN (SELECT file_id FROM file_state)) + (SELECT count(*) FROM "
                "links WHERE file_id NOT IN (SELECT file_id FROM file_state))").fetchone(),
            "pending": con.execute("SELECT count(*) FROM bootstrap_progress WHERE status IN "
                                   "('pending', 'processing')").fetchone(),
        }
    finally:
        con.close()


def pending_rows(db: Path) -> int:
    """Files a killed bootstrap left to do; 0 when the kill came before the schema was made
    (DuckDB creates the file first; the migration's transaction then never committed)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        if not con.execute("SELECT count(*) FROM information_schema.tables "
                           "WHERE table_name = 'bootstrap_progress'").fetchone()[0]:
            return 0
        return con.execute("SELECT count(*) FROM bootstrap_progress WHERE status IN "
                           "('pending', 'processing')").fetchone()[0]
    finally:
        con.close()


def test_sigkill_at_any_point_then_resume_gives_the_uninterrupted_rows(tmp_path):
    files = {f"pkg{i % 40}/mod{i}.py": FUNC.format(name=f"f{i}", doc=f"Doc {i}.", n=i)
             + FUNC.format(name=f"g{i}", doc=f"Other {i}.", n=i + 1) for i in range(3000)}
    reference = make_repo(tmp_path / "reference", files)
    started = time.monotonic()
    assert run_bootstrap(reference) == "bootstrap"
    full = time.monotonic() - started
    expected = snapshot(Project.open(reference).db_path)
    assert len(expected["files"]) == 3000
    victim = make_repo(tmp_path / "victim", files)
    db = Project.open(victim).db_path
    interrupted = 0
    for fraction in (0.35, 0.55, 0.75):
        run_bootstrap(victim, kill_after=full * fraction)
        if db.exists() and pending_rows(db):
            interrupted += 1
    assert interrupted >= 1, "no kill landed mid-bootstrap"
    assert run_bootstrap(victim) in ("resume", "bootstrap", "incremental")
    got = snapshot(db)
    assert got["orphans"] == (0,) and got["pending"] == (0,)
    for key in ("files", "chunks", "symbols", "links"):
        assert got[key] == expected[key], key


def test_priority_order_and_max_initial_files(tmp_path):
    big = "x = 1\n" * 3000  # ~18 KB: larger than the small config file
    root = make_repo(tmp_path / "repo", {
        "a_large.py": "y = 2\n" * 200_000,  # ~1.2 MB: large files come last
        "b_config.yaml": "k: v\n" * 3000,
        "c_doc.rst": "word\n" * 3000,
        "d_source.py": big,
        "e_small.yaml": "k: v\n",
    })
    (root / "context.toml").write_text("[bootstrap]\nmax_initial_files = 3\n")
    indexer = open_indexer(root)
    order = [e.path for e in order_by_priority(indexer.boundary.iter_files(),
                                               indexer.config.bootstrap.priority_extensions)]
    # source, docs, configuration (the smaller first), large files last
    assert order == ["d_source.py", "c_doc.rst", "e_small.yaml", "context.toml", "b_config.yaml",
                     "a_large.py"]
    report = indexer.ensure_indexed()
    assert report.files_indexed == 3
    assert set(stored(indexer)) == set(order[:3])


def test_a_resumed_bootstrap_completes_without_its_interrupted_note(tmp_path):
    """Issue 40: a bootstrap job showed ``completed`` beside the error_message "interrupted"
    its interruption had left; the run that completes it clears the note."""
    indexer = open_indexer(small_repo(tmp_path))
    paths = ["src/app.py", "src/util/helpers.py", "docs/guide.md", "config.yaml"]
    job_id = indexer.store.create_job("bootstrap", "all", len(paths), "indexer",
                                      status="in_progress").job_id
    indexer.store.progress_begin(job_id, paths)
    indexer.store.update_job(job_id, status="interrupted", completed_at="now",
                             error_message="interrupted (Ctrl-C); the next run resumes it")
    assert indexer.ensure_indexed().files_indexed == 4
    job = indexer.store.get_job(job_id)
    assert job.status == "completed" and job.error_message is None, job


def test_a_partial_index_the_settings_ask_for_stays_partial(tmp_path):
    """``max_initial_files`` and ``bootstrap.enabled = false`` hold after the first run too
    (issue 40: the next command's catch-up indexed the whole project): a later
    ensure_indexed keeps the indexed files current (an edit, a deletion) and adds no other."""
    files = {f"m{n:02}.py": FUNC.format(name=f"f{n}", doc=f"Function {n}.", n=n)
             for n in range(20)}
    root = make_repo(tmp_path / "repo", files)
    (root / "context.toml").write_text("[bootstrap]\nmax_initial_files = 5\n")
    indexer = open_indexer(root)
    assert indexer.ensure_indexed().files_indexed == 5
    first = set(stored(indexer))
    assert len(first) == 5
    again = indexer.ensure_indexed()
    assert again.files_indexed == 0 and set(stored(indexer)) == first
    edited, deleted = sorted(first)[:2]
    (root / edited).write_text(FUNC.format(name="edited", doc="Edited.", n=99))
    (root / deleted).unlink()
    indexer.ensure_indexed()
    assert set(stored(indexer)) == first - {deleted}
    assert any("def edited" in t for t in stored(indexer)[edited])
    indexer.store.close()

    other = make_repo(tmp_path / "off", files)
    (other / "context.toml").write_text("[bootstrap]\nenabled = false\n")
    indexer = open_indexer(other)
    assert indexer.ensure_indexed().files_indexed == 0 and stored(indexer) == {}
    indexer.refresh(["m03.py"])
    indexer.ensure_indexed()
    assert set(stored(indexer)) == {"m03.py"}
    indexer.refresh()  # a refresh of the whole project, asked for: every file
    assert len(stored(indexer)) == 21  # and context.toml


def test_a_run_given_a_second_reads_source_first_and_the_next_run_resumes_the_rest(tmp_path):
    """ensure_indexed(within_s=...) is how a first CLI answer on a large project comes in
    seconds (issue 26): it stops reading when the time is up, source code read first, and
    says how many files it left; those stay pending, a caller that must not wait for a run
    under way elsewhere gets a ``busy`` report at once, and the next run reads the rest
    with no file twice."""
    pages = 2000  # seconds of reading even on a quiet machine
    files = {f"docs/page_{n:04d}.md": "# Page\n\n" + "Some words of prose here.\n\n" * 150
             for n in range(pages)}
    files["src/core.py"] = FUNC.format(name="core", doc="The core.", n=1)
    root = make_repo(tmp_path / "repo", files)
    indexer = open_indexer(root)
    try:
        cut = indexer.ensure_indexed(within_s=1.0)
        assert cut.cancelled and 0 < cut.files_left < pages, cut.summary
        read = stored(indexer)
        assert "src/core.py" in read
        assert len(read) + cut.files_left == pages + 1

        resumed: list = []
        worker = threading.Thread(target=lambda: resumed.append(indexer.ensure_indexed()))
        worker.start()
        deadline = time.monotonic() + 30
        while not indexer.reading_project and time.monotonic() < deadline:
            time.sleep(0.01)
        busy = indexer.ensure_indexed(wait=False)
        still_reading = indexer.reading_project
        worker.join()
        assert still_reading, "the resume ended before the second call; use more pages"
        assert busy.mode == BUSY and busy.files_indexed == 0
        assert resumed[0].mode == "resume" and not resumed[0].cancelled
        assert resumed[0].files_indexed == cut.files_left
        assert len(stored(indexer)) == pages + 1
    finally:
        indexer.store.close()


def test_a_reading_window_spent_before_the_first_file_still_reads_a_few(tmp_path):
    """A first answer's window can be spent before its first file is read (the walk and
    the imports at load 7-24); WINDOW_FLOOR_FILES are read all the same, so a tiny project
    is always whole, and a larger one resumes from there."""
    from contextd.indexer.core import WINDOW_FLOOR_FILES

    tiny = make_repo(tmp_path / "tiny", {f"pkg/m{i}.py": FUNC.format(name=f"f{i}", doc="D.",
                                                                      n=i) for i in range(5)})
    indexer = open_indexer(tiny)
    try:
        report = indexer.ensure_indexed(within_s=0.0)
        assert not report.cancelled and len(stored(indexer)) == 5, report.summary
    finally:
        indexer.store.close()
    count = WINDOW_FLOOR_FILES + 30
    larger = make_repo(tmp_path / "larger", {
        f"pkg/m{i:03d}.py": FUNC.format(name=f"f{i}", doc="D.", n=i) for i in range(count)})
    indexer = open_indexer(larger)
    spent = threading.Event()
    spent.set()  # the window is over before the run starts
    try:
        report = indexer.ensure_indexed(cancel=spent, within_s=0.0)
        assert report.cancelled and report.files_left == count - WINDOW_FLOOR_FILES
        assert len(stored(indexer)) == WINDOW_FLOOR_FILES
        assert indexer.ensure_indexed().files_indexed == count - WINDOW_FLOOR_FILES
        assert len(stored(indexer)) == count
        (larger / "pkg/m000.py").write_text(FUNC.format(name="edited", doc="E.", n=0))
        refresh = indexer.refresh(cancel=spent)  # only a reading window has a floor
        assert refresh.cancelled and refresh.files_indexed == 0
    finally:
        indexer.store.close()


def test_a_spent_window_reads_its_floor_up_to_a_byte_limit_and_at_least_one_file(tmp_path):
    """The floor of a spent window stops at WINDOW_FLOOR_BYTES, not only at
    WINDOW_FLOOR_FILES: fastapi's first 50 files are its largest modules, 616 KB read in-line
    after the window had ended. A first file larger than the limit is still read."""
    from contextd.indexer.core import WINDOW_FLOOR_BYTES

    body = "".join(FUNC.format(name=f"f{n}", doc="Padding.", n=n) for n in range(200))
    per_file = WINDOW_FLOOR_BYTES // 3 + 1  # three of them pass the limit
    files = {f"pkg/m{i}.py": (body * (per_file // len(body) + 1))[:per_file].rsplit("\n", 1)[0]
             + "\n" for i in range(6)}
    huge = {"pkg/huge.py": body * (WINDOW_FLOOR_BYTES // len(body) + 2),
            "pkg/small.py": FUNC.format(name="small", doc="S.", n=0)}
    for name, tree, expected_read in (("big", files, 2), ("huge", huge, 1)):
        root = make_repo(tmp_path / name, tree)
        indexer = open_indexer(root)
        spent = threading.Event()
        spent.set()
        try:
            report = indexer.ensure_indexed(cancel=spent, within_s=0.0)
            assert report.cancelled, report.summary
            assert len(stored(indexer)) == expected_read, sorted(stored(indexer))
        finally:
            indexer.store.close()


def test_index_written_without_redaction_is_scrubbed_at_the_next_catch_up(tmp_path):
    """Redaction is part of what the chunks depend on: an index written while scrubbing was
    off (or by an older contextd whose rules let a credential through) is re-scrubbed at the
    next catch-up, though no file changed, instead of serving the credential until its file
    happens to be edited."""
    token = "ghp_" + "Z8q2LmX4vB7nR1tY6wK3pJ9sD5fH0gC2aE7u"
    root = make_repo(tmp_path / "repo", {"deploy.py": f'GITHUB_TOKEN = "{token}"\n\n'
                                                      "def deploy():\n    return GITHUB_TOKEN\n",
                                         "context.toml": "[security]\nscrub_secrets = false\n"})
    indexer = open_indexer(root)
    indexer.ensure_indexed()
    assert token in "".join(stored(indexer)["deploy.py"])
    (root / "context.toml").write_text("")
    indexer.reload()
    report = indexer.ensure_indexed()
    assert report.files_indexed == 2  # deploy.py, unchanged but re-scrubbed, and context.toml
    text = "".join(stored(indexer)["deploy.py"])
    assert token not in text and "[REDACTED]" in text
