"""The CLI's human output where it meets the shell: a reader that closes the pipe early
(``contextd stats | head -1``) and file names holding control characters. Real projects on
disk, ``python -m contextd`` in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTD_")}


@pytest.fixture(scope="module")
def project_400(tmp_path_factory) -> Path:
    """400 Python files under long folder and file names: list-indexable prints ~100 KB,
    more than a pipe holds, so the writer is still writing when ``head`` goes away."""
    root = tmp_path_factory.mktemp("p400")
    (root / ".git").mkdir()
    for number in range(400):
        folder = root / f"package_{number % 20:02d}" / ("module_with_a_long_name_" * 3 +
                                                      str(number % 7))
        folder.mkdir(parents=True, exist_ok=True)
        name = f"file_{number:04d}_" + "with_a_long_descriptive_name_" * 3 + "for_pipes.py"
        (folder / name).write_text(f"def f{number}():\n    return {number}\n")
    return root


@pytest.mark.parametrize("command", ["list-indexable", "stats"])
def test_head_one_prints_one_line_and_no_traceback(project_400, command):
    shell = f"set -o pipefail; {sys.executable} -m contextd {command} | head -1"
    proc = subprocess.run(["bash", "-c", shell], cwd=project_400, env=env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr  # pipefail: contextd's own status
    assert len(proc.stdout.splitlines()) == 1
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("command", ["list-indexable", "stats"])
def test_a_reader_gone_before_the_first_byte_ends_quietly(project_400, command):
    # The reader closes before contextd writes anything: every write, the last flush
    # included, meets a closed pipe.
    proc = subprocess.Popen([sys.executable, "-m", "contextd", command], cwd=project_400,
                            env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    errors = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 0, errors
    assert "Traceback" not in errors and "BrokenPipe" not in errors, errors


def test_a_file_named_with_a_newline_prints_as_one_escaped_line(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "plain.py").write_text("x = 1\n")
    (tmp_path / "two\nlines\x1b[31m.py").write_text("y = 2\n")
    run = [sys.executable, "-m", "contextd", "list-indexable"]
    human = subprocess.run(run, cwd=tmp_path, env=env(), capture_output=True, text=True,
                           timeout=120)
    assert human.returncode == 0, human.stderr
    assert sorted(human.stdout.splitlines()) == ["plain.py", "two\\nlines\\x1b[31m.py"]
    exact = subprocess.run([*run[:3], "--json", "list-indexable"], cwd=tmp_path, env=env(),
                           capture_output=True, text=True, timeout=120)
    names = {entry["path"] for entry in json.loads(exact.stdout)["files"]}
    assert names == {"plain.py", "two\nlines\x1b[31m.py"}  # JSON keeps the name exact


@pytest.mark.slow
def test_kb_search_escapes_names_and_ends_quietly_on_a_closed_pipe(tmp_path):
    (tmp_path / ".git").mkdir()
    odd = tmp_path / "odd\nname.md"
    odd.write_text("# Retries\n\nThe client retries with exponential backoff.\n")
    contextd = [sys.executable, "-m", "contextd"]
    added = subprocess.run([*contextd, "kb", "add", str(odd)], cwd=tmp_path, env=env(),
                           capture_output=True, text=True, timeout=300)
    assert added.returncode == 0, added.stderr
    assert "odd\\nname.md" in added.stdout.splitlines()[0]
    found = subprocess.run([*contextd, "kb", "search", "retry backoff"], cwd=tmp_path,
                           env=env(), capture_output=True, text=True, timeout=300)
    assert found.returncode == 0, found.stderr
    assert found.stdout.splitlines()[0].startswith(" 1. ")
    assert "odd\\nname.md  lines 1-3" in found.stdout.splitlines()[0]

    proc = subprocess.Popen([*contextd, "kb", "search", "retry backoff"], cwd=tmp_path,
                            env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    errors = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 0 and "Traceback" not in errors, errors
