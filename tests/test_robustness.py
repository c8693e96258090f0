"""Odd files and dead processes never hurt the index: a rebuild SIGKILLed mid-run is marked
interrupted when the next owner opens the index (and its files are resumed); generated and
minified files are skipped with the reason recorded where check-file and stats show it;
files deleted during a rebuild are gone from the index when it ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from contextd.engine import Engine
from contextd.project import Project
from test_indexer import FUNC, make_repo

REBUILD_SCRIPT = textwrap.dedent("""
    import sys, time
    from contextd.engine import Engine
    engine = Engine.open(sys.argv[1])
    engine.indexer.embed = False
    engine.ensure_indexed()
    result = engine.rebuild(wait=False)
    while engine.store.get_job(result.job_id).status != "in_progress":
        time.sleep(0.01)
    print(result.job_id, flush=True)
    time.sleep(600)
""")


def test_sigkilled_rebuild_is_marked_interrupted_by_the_next_owner(tmp_path):
    root = make_repo(tmp_path / "repo", {f"p{i % 10}/m{i}.py": FUNC.format(
        name=f"f{i}", doc=f"Doc {i}.", n=i) * 3 for i in range(600)})
    proc = subprocess.Popen([sys.executable, "-c", REBUILD_SCRIPT, str(root)],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        job_id = proc.stdout.readline().strip()
        assert job_id, "the rebuild did not start"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    engine = Engine(Project.open(root))
    try:
        job = engine.store.get_job(job_id)
        assert job.status == "interrupted" and "ended" in job.error_message
        assert engine.job_status(job_id).status == "interrupted"
        assert not engine.store.list_jobs(("queued", "in_progress"))
        engine.indexer.embed = False
        engine.ensure_indexed()  # resumes what the rebuild had left
        assert len(engine.store.file_states()) == 600
    finally:
        engine.close()
