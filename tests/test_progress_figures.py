"""The figures a bootstrap reports while it runs, sampled from a real bootstrap of a generated
project (issue 40, item 7): a new-user trial saw the file total change from note to note
(739 → 725 → 686), "0 / 686 files indexed" right after 53 were read, and an ETA of
"~1 h 26 min" for reading that ended 80 s later."""

from __future__ import annotations

import re
import subprocess
import threading
import time
from pathlib import Path

from contextd.config.project import Project
from contextd.indexer import Indexer
from contextd.indexer.progress import Progress, WorkFigures
from contextd.runtime.indexing_notes import indexing_note
from contextd.store.duckdb import DuckDBStore

FILES = 300
STOP_AFTER = 90  # files the first run reads before it is stopped (a closed session)
NOTE = re.compile(r"([\d,]+) / ([\d,]+) files indexed")


def generated_project(root: Path) -> Path:
    """FILES small Python modules in a git repository."""
    for n in range(FILES):
        path = root / f"pkg_{n // 30:02d}" / f"module_{n:03d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'def handler_{n}(request):\n    """Handle request kind {n}."""\n'
                        f"    return request.get('field_{n}', {n})\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


class StopAfter(Progress):
    """Stops the run once ``files`` files are stored, as a closing session's owner does."""

    def __init__(self, cancel: threading.Event, files: int):
        self.cancel, self.files = cancel, files

    def update(self, files_done: int, chunks_done: int, current_file: str | None = None
               ) -> None:
        if files_done >= self.files:
            self.cancel.set()


class Sampler:
    """Reads, every few milliseconds while a run goes on, what an agent is shown: the query
    note's "N / M files indexed", the figures of get_context_stats, the job row, and then
    the files actually stored."""

    def __init__(self, indexer: Indexer):
        self.indexer = indexer
        self.samples: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def __enter__(self) -> "Sampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            if not self.indexer.reading_project:
                continue
            note = indexing_note(self.indexer)
            status = self.indexer.status()
            jobs = self.indexer.store.list_jobs(("in_progress",), limit=1)
            stored = len(self.indexer.store.file_states())
            done, total = (int(x.replace(",", "")) for x in NOTE.search(note).groups())
            self.samples.append({
                "note_done": done, "note_total": total, "eta": "retry in ~" in note,
                "stats_total": status["files_total"] if status["state"] == "indexing"
                else None,
                "job_total": jobs[0].files_total if jobs else None,
                "job_done": jobs[0].files_processed if jobs else None,
                "stored_after": stored, "at": time.monotonic()})


def test_bootstrap_figures_hold_their_total_and_count_files_read_across_a_resume(tmp_path):
    root = generated_project(tmp_path / "repo")
    project = Project.open(root)
    indexer = Indexer(project, DuckDBStore(project.db_path), embed=False)
    try:
        cancel = threading.Event()
        started = time.monotonic()
        with Sampler(indexer) as first:
            cut = indexer.ensure_indexed(progress=StopAfter(cancel, STOP_AFTER), cancel=cancel)
        assert cut.cancelled and cut.files_left, cut.summary
        read_first = len(indexer.store.file_states())
        assert read_first >= STOP_AFTER and read_first + cut.files_left == FILES

        with Sampler(indexer) as resumed:
            rest = indexer.ensure_indexed()
        assert rest.mode == "resume" and rest.files_indexed == cut.files_left
        assert len(indexer.store.file_states()) == FILES

        samples = first.samples + resumed.samples
        assert first.samples and resumed.samples, "the runs ended before a sample; use more files"
        # One total, the walk's, in every figure of both runs (the resume said 210 before).
        totals = {s[key] for s in samples for key in ("note_total", "stats_total", "job_total")
                  if s[key] is not None}
        assert totals == {FILES}, totals
        # The done count counts the files read: never more than are stored, never going
        # back, and a resume starts from what the first run read (it said "0 / 210").
        for sample in samples:
            assert sample["note_done"] <= sample["stored_after"], sample
        dones = [s["note_done"] for s in samples]
        assert dones == sorted(dones), dones
        assert all(s["note_done"] >= read_first for s in resumed.samples), resumed.samples[:3]
        job_dones = [s["job_done"] for s in resumed.samples if s["job_done"] is not None]
        assert job_dones and min(job_dones) >= read_first, job_dones[:3]
        job = indexer.store.list_jobs(limit=1)[0]
        assert job.job_type == "bootstrap" and job.status == "completed"
        assert job.files_total == job.files_processed == FILES
        # No ETA is guessed before a rate has been measured over a few seconds.
        early = WorkFigures().window_s / 4
        assert all(s["at"] - started >= early for s in first.samples if s["eta"])
    finally:
        indexer.store.close()


def test_the_eta_follows_the_recent_rate_not_a_slow_start():
    """A run that stalled at its start (the worker pool starting, the model loading) and
    then reads fast: the rate since the start announced hours; the recent rate is the
    truth. Measured on the real clock, with a stall of 2.5 s and a window of 2 s."""
    figures = WorkFigures("files indexed", window_s=2.0)
    figures.record(0, 600)
    assert figures.eta_seconds is None  # no rate yet: no ETA at all
    stall = 2.5
    time.sleep(stall)
    figures.record(0, 600)
    assert figures.eta_seconds is None  # nothing read: still no rate
    began = time.monotonic()
    for step in range(1, 11):
        time.sleep(0.1)
        figures.record(30 * step, 600 - 30 * step)
    reading = time.monotonic() - began
    eta = figures.eta_seconds
    assert eta is not None
    # 300 files left at the rate of the last ``reading`` seconds: about ``reading`` seconds;
    # the rate since the start would say at least reading + stall.
    assert eta < reading + stall / 2, (eta, reading)
