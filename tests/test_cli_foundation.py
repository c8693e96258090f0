"""The boundary commands run as a user runs them: ``python -m contextd`` in a subprocess.

Checks exit codes (0 ok, 1 error or "no", 2 usage), one-line errors without tracebacks, the
--json shapes, and that ``init`` writes a file that loads back to exactly the defaults.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from contextd.config.loading import load_config
from contextd.config.sections import ContextConfig


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTD_")}
    return subprocess.run([sys.executable, "-m", "contextd", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)


def run_json(cwd: Path, *args: str) -> tuple[int, dict]:
    proc = run(cwd, "--json", *args)
    return proc.returncode, json.loads(proc.stdout)


def assert_one_line_error(proc: subprocess.CompletedProcess, code: int = 1) -> str:
    assert proc.returncode == code, proc
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("contextd: error: "), proc.stderr
    return lines[0]


@pytest.fixture()
def proj(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / "src" / "notes.md").write_text("# notes\n")
    (root / "build").mkdir()
    (root / "build" / "out.py").write_text("x = 1\n")
    (root / ".gitignore").write_text("*.log\n")
    (root / "run.log").write_text("log\n")
    return root


def test_version_and_usage_errors(proj: Path) -> None:
    proc = run(proj, "--version")
    assert proc.returncode == 0 and "contextd, version" in proc.stdout
    assert run(proj, "no-such-command").returncode == 2
    proc = run(proj, "list-indexable", "--limit", "0")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_init_writes_a_documented_file_that_loads_to_the_defaults(proj: Path) -> None:
    proc = run(proj, "init")
    target = proj / "context.toml"
    assert proc.returncode == 0 and proc.stdout.strip() == f"Wrote {target}"
    text = target.read_text()
    assert "[watcher]" in text and "# Directories to index" in text
    assert load_config(target) == dataclasses.replace(ContextConfig(), source=str(target))
    line = assert_one_line_error(run(proj, "init"))
    assert line == f"contextd: error: {target} already exists; use --force to overwrite it"
    code, out = run_json(proj, "init", "--force")
    assert code == 0 and out == {"path": str(target), "overwritten": True}
    proc = run(proj, "validate-config")
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.splitlines()[0] == f"✓ Configuration valid ({target})"


def test_validate_config_reports_every_problem(proj: Path) -> None:
    (proj / "context.toml").write_text(
        '[query]\nmmr_lambda = 1.5\n[watchr]\n')
    proc = run(proj, "validate-config")
    assert proc.returncode == 1
    out = proc.stdout
    assert "✗ Configuration invalid: 2 error(s), 0 warning(s)" in out
    assert "query.mmr_lambda: 1.5 is out of range; allowed 0.0 to 1.0" in out
    assert "watchr: unknown key 'watchr'; did you mean 'watcher'?" in out
    (proj / "context.toml").write_text(
        '[watcher]\nwatch_paths = ["src", "missing", "src/"]\nignore_patterns = ["[z-a]"]\n')
    code, report = run_json(proj, "validate-config")
    assert code == 1 and report["valid"] is False
    assert [e["key"] for e in report["errors"]] == ["watcher.watch_paths[1]",
                                                    "watcher.ignore_patterns[0]"]
    assert report["warnings"][0]["key"] == "watcher.watch_paths[2]"
    assert set(report["errors"][0]) == {"file", "key", "message", "severity"}


def test_validate_config_lists_type_and_disk_problems_together(proj: Path) -> None:
    (proj / "context.toml").write_text(
        '[watcher]\nwatch_paths = ["src", "src/", "missing"]\nignore_patterns = ["[z-a]"]\n'
        'debounce_mss = 10\n[query]\nmmr_lambda = 1.5\n')
    code, report = run_json(proj, "validate-config")
    assert code == 1 and report["valid"] is False
    assert [e["key"] for e in report["errors"]] == [
        "watcher.debounce_mss", "query.mmr_lambda", "watcher.watch_paths[2]",
        "watcher.ignore_patterns[0]"]
    assert report["errors"][0]["message"] == ("unknown key 'debounce_mss'; did you mean "
                                              "'debounce_ms'?")
    assert [w["key"] for w in report["warnings"]] == ["watcher.watch_paths[1]"]
    assert {e["file"] for e in report["errors"]} == {str(proj / "context.toml")}


def test_validate_config_warnings_alone_pass(proj: Path) -> None:
    (proj / "context.toml").write_text('[watcher]\nwatch_paths = ["src", "src"]\n')
    proc = run(proj, "validate-config")
    assert proc.returncode == 0
    assert "⚠" in proc.stdout and "✓ 2 indexable files detected" in proc.stdout
    code, report = run_json(proj, "validate-config")
    assert code == 0 and report["valid"] is True
    assert report["watch_paths"] == ["src"] and report["indexable"] == 2


def test_list_indexable(proj: Path) -> None:
    proc = run(proj, "list-indexable")
    assert proc.returncode == 0
    assert proc.stdout.splitlines() == ["src/app.py", "src/notes.md"]
    proc = run(proj, "list-indexable", "--limit", "1")
    assert proc.stdout.splitlines() == ["src/app.py"]
    code, out = run_json(proj, "list-indexable", "--limit", "1")
    assert code == 0 and out["count"] == 1 and out["truncated"] is True
    assert set(out["files"][0]) == {"path", "size", "mtime_ns"}
    # --root works from anywhere
    assert run(proj.parent, "--root", str(proj), "list-indexable").stdout.splitlines() == [
        "src/app.py", "src/notes.md"]


def test_check_file(proj: Path) -> None:
    proc = run(proj, "check-file", "src/app.py")
    assert (proc.returncode, proc.stdout.strip()) == (0, "src/app.py: indexable")
    proc = run(proj, "check-file", "run.log")
    assert proc.returncode == 1
    assert proc.stdout.strip() == "run.log: not indexable: gitignore (.gitignore: *.log)"
    code, out = run_json(proj, "check-file", "build/out.py")
    assert code == 1 and out == {"path": "build/out.py", "indexable": False,
                                 "reason": "ignored_pattern", "detail": "ignore_patterns: build"}
    code, out = run_json(proj / "src", "check-file", "../../elsewhere.py")
    assert code == 1 and out["reason"] == "outside_boundary"


def test_project_stats(proj: Path) -> None:
    code, stats = run_json(proj, "project-stats")
    assert code == 0
    assert stats["indexable"] == 2
    assert stats["watch_paths"] == [{"path": ".", "files": 2, "percent": 100.0}]
    reasons = {c["reason"]: (c["files"], c["dirs"]) for c in stats["excluded"]}
    assert reasons["ignored_pattern"] == (0, 2)  # .git and build
    assert reasons["gitignore"] == (1, 0)
    assert {d["path"]: d["files"] for d in stats["excluded_dirs"]} == {"build/": 1, ".git/": 0}
    proc = run(proj, "project-stats")
    assert proc.returncode == 0 and "Watch paths:" in proc.stdout
    assert "build/" in proc.stdout


def test_errors_are_one_line(proj: Path, tmp_path: Path) -> None:
    line = assert_one_line_error(run(tmp_path, "--root", "/", "list-indexable"))
    assert "/ is far too broad a root" in line
    (proj / "context.toml").write_text('[watcher]\nwatch_paths = ["missing"]\n')
    line = assert_one_line_error(run(proj, "check-file", "src/app.py"))
    assert "watch path does not exist" in line
    assert line.endswith("run 'contextd validate-config'")
    (proj / "context.toml").write_text('[query]\nmmr_lambda = 1.5\ndefault_k = "ten"\n')
    line = assert_one_line_error(run(proj, "list-indexable"))
    assert line == (f"contextd: error: {proj / 'context.toml'}: query.mmr_lambda: 1.5 is out of "
                    "range; allowed 0.0 to 1.0 (and 1 more); run 'contextd validate-config'")
    (proj / "context.toml").write_text("[query\n")
    assert "not valid TOML" in assert_one_line_error(run(proj, "project-stats"))
