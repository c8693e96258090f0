"""Faults of the disk under the index, as a user meets them: a real process, a real repository,
the index folder on a real small tmpfs (full) or a read-only bind mount (issue 40 item 6).

Each fault ends in one line naming the cause and the path, with a non-zero exit, and the index
keeps what it had: a full disk must not turn a refresh into a success that dies at close, nor a
``rebuild --force`` into an emptied index. Mounting needs root (CI runs as root); where mount
is refused the tests are skipped and say why.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from pathlib import Path

import duckdb
import pytest

from contextd.config.project import Project
from contextd.runtime.engine import Engine
from test_index_cli import contextd
from test_indexer import FUNC, make_repo


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here ({done.stderr.strip() or done.returncode}): the disk "
                    "faults need a small tmpfs or a read-only bind mount (root)")


@contextlib.contextmanager
def mounted(folder: Path, *how: tuple[str, ...]):
    """``folder`` mounted by each of ``how`` in turn (mount's arguments: a mount, then maybe
    a remount of it), unmounted at the end (lazily if something still holds it)."""
    folder.mkdir(parents=True, exist_ok=True)
    held = False
    try:
        for args in how:
            _mount(*args)
            held = True
        yield folder
    finally:
        if held and subprocess.run(["umount", str(folder)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def one_error_line(done: subprocess.CompletedProcess) -> str:
    """The error a failed command ended with, checked to be its only word on the fault."""
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("contextd: error: "), done.stderr
    return last


def indexed_files(root: Path) -> int:
    """Files ``contextd stats`` counts in the index."""
    stats = contextd(root, "--json", "stats")
    assert stats.returncode == 0, stats.stderr
    return json.loads(stats.stdout)["storage"]["total_files"]


def stored_files(root: Path) -> set[str]:
    """The files the index file holds, read as the next open reads it (its write-ahead log
    replayed), without a command's start-up."""
    with duckdb.connect(str(root / ".contextd/context.duckdb"), read_only=True) as con:
        return {path for (path,) in con.execute("SELECT path FROM file_state").fetchall()}


def fill(folder: Path, leave_kb: int) -> Path:
    """A file that leaves only ``leave_kb`` KB free on the device of ``folder``."""
    filler = folder / "filler"
    filler.unlink(missing_ok=True)
    free = shutil.disk_usage(folder).free
    filler.write_bytes(b"\0" * max(0, free - leave_kb * 1024))
    return filler


def project(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {
        f"src/m{i}.py": FUNC.format(name=f"settle_{i}", doc=f"Settle invoice {i}.", n=i)
        for i in range(3)})


def index(root: Path) -> None:
    """Index ``root`` without vectors (the model's load is the slow part of a command)."""
    engine = Engine(Project.open(root))
    try:
        engine.indexer.embed = False
        engine.ensure_indexed()
    finally:
        engine.close()


def test_a_full_disk_ends_rebuild_refresh_and_query_in_one_line_and_the_index_answers(
        tmp_path):
    """The index on a 4 MB tmpfs: rebuild --force with 300 KB free is refused before it drops
    anything; with none free, refresh and query end in one line naming the device's file;
    once space is freed the index holds every file it had."""
    root = project(tmp_path)
    with mounted(root / ".contextd", ("-t", "tmpfs", "-o", "size=4m", "tmpfs",
                                      str(root / ".contextd"))) as index_folder:
        try:
            index(root)
            before = stored_files(root)
            assert len(before) == 3
            filler = fill(index_folder, leave_kb=300)
            # rebuild --force dropped every row, then died writing them: refused before.
            refused = one_error_line(contextd(root, "rebuild", "--force"))
            assert "rebuild refused" in refused and str(index_folder) in refused
            (root / "src/more.py").write_text(FUNC.format(name="refund", doc="Refund.", n=9)
                                              * 400)
            fill(index_folder, leave_kb=0)
            # The refresh said "indexed" and then died at close (CHECKPOINT: no space left).
            line = one_error_line(contextd(root, "refresh"))
            assert "no space left" in line and str(index_folder) in line
            asked = contextd(root, "query", "settle invoice", "--k", "1")
            if asked.returncode:
                assert "no space left" in one_error_line(asked)
            else:
                assert "src/m" in asked.stdout
            filler.unlink()
            assert stored_files(root) >= before  # what was committed before is all there
        finally:
            contextd(root, "stop")


def test_a_read_only_index_folder_answers_queries_and_refuses_writes_in_one_line(tmp_path):
    """Every command stopped at the owner lock with a 49-line traceback. DuckDB opens the
    file read-only: query and stats answer from the index as it is; commands that write end
    in one line naming the folder."""
    root = project(tmp_path)
    index(root)
    folder = str(root / ".contextd")
    with mounted(root / ".contextd", ("--bind", folder, folder),
                 ("-o", "remount,ro,bind", folder)):
        for command in (("refresh",), ("rebuild", "--force")):
            line = one_error_line(contextd(root, *command))
            assert "read-only" in line and folder in line, command
        asked = contextd(root, "--json", "query", "settle invoice", "--k", "1")
        assert asked.returncode == 0, asked.stderr
        assert json.loads(asked.stdout)["hits"][0]["file_path"].startswith("src/m")
        assert f"the index folder {folder} is read-only: answering" in asked.stderr
        assert indexed_files(root) == 3
    assert stored_files(root) == {f"src/m{i}.py" for i in range(3)}


def test_the_spool_beside_a_full_index_folder_moves_to_memory(tmp_path):
    """A query's catalog spools chunk texts beside the index; on a full disk that write
    failed the query with ``OSError 28``. The spool now keeps its bytes in memory instead."""
    from contextd.providers.spool import Spool

    with mounted(tmp_path / "index", ("-t", "tmpfs", "-o", "size=1m", "tmpfs",
                                      str(tmp_path / "index"))) as folder:
        spool = Spool(folder)
        try:
            first = spool.append(b"kept " * 1000)
            fill(folder, leave_kb=0)
            second = spool.append(b"more " * 100_000)
            assert spool.read(first, 5) == b"kept " and spool.read(second + 5, 5) == b"more "
            assert spool.size == 5 * 101_000
        finally:
            spool.close()
