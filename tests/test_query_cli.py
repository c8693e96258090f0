"""``contextd query`` and ``contextd stats`` as a user runs them, in a fresh repository."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def run(root, *args):
    return subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), *args],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def fresh_repo(tmp_path_factory):
    from golden import make_golden_copy

    return make_golden_copy(tmp_path_factory.mktemp("cli") / "repo")


def test_query_indexes_first_and_prints_json(fresh_repo):
    result = run(fresh_repo, "query", "where are JWT tokens validated", "--k", "3", "--json")
    assert result.returncode == 0, result.stderr
    assert "bootstrap" in result.stderr  # progress of the first index goes to stderr
    data = json.loads(result.stdout)
    hit = data["hits"][0]
    assert hit["file_path"] == "src/shoptrack/auth.py" and hit["label"].endswith("validate_token")
    assert {"start_line", "end_line", "kind", "language", "score", "providers",
            "snippet"} <= set(hit)
    assert data["total_tokens"] == sum(h["tokens"] for h in data["hits"])


def test_query_filters_budget_and_render(fresh_repo):
    result = run(fresh_repo, "--json", "query", "retry", "--lang", "typescript",
                 "--provider", "full_text", "--budget", "150")
    data = json.loads(result.stdout)
    assert data["hits"] and all(h["language"] == "typescript" for h in data["hits"])
    assert data["total_tokens"] <= 150 and data["providers"].keys() == {"full_text"}
    block = run(fresh_repo, "query", "cancel order", "--render", "--k", "2")
    assert block.stdout.startswith("<project_context>")
    human = run(fresh_repo, "query", "LRUCache", "--kind", "CODE_CLASS")
    assert "src/shoptrack/cache.py" in human.stdout and "hits" in human.stdout


def test_query_files(fresh_repo):
    task = "Fix: cancelling an order does not refund the payment"
    data = json.loads(run(fresh_repo, "query", task, "--files", "--k", "3", "--json").stdout)
    assert [f["file_path"] for f in data["files"]][:1] == ["src/shoptrack/orders.py"]
    assert len(data["files"]) == 3 and all(f["ranges"] for f in data["files"])
    human = run(fresh_repo, "query", task, "--files", "--k", "3")
    assert human.returncode == 0, human.stderr
    lines = human.stdout.splitlines()
    assert lines[0].split()[2] == "src/shoptrack/orders.py" and lines[-1].startswith("3 files")
    refused = run(fresh_repo, "query", task, "--files", "--render")
    assert refused.returncode != 0 and "exclude each other" in refused.stderr


def test_stats(fresh_repo):
    run(fresh_repo, "query", "cache", "--k", "1")
    result = run(fresh_repo, "--json", "stats")
    # exit 0: a model load started by the availability check must not abort the process
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["storage"]["total_files"] >= 15
    assert {p["id"] for p in data["providers"]} >= {"semantic", "hybrid"}
    # The memory of the process holding the index (issue 26), here the stats command itself.
    owner = data["owner"]
    assert 10 < owner["rss_mb"] <= owner["peak_rss_mb"] and owner["memory_limit_mb"] == 600
    human = run(fresh_repo, "stats")
    assert human.returncode == 0, human.stderr
    assert "semantic     unavailable" not in human.stdout
    assert "MB resident, peak" in human.stdout


def test_unknown_provider_exit_code(fresh_repo):
    result = run(fresh_repo, "query", "x", "--provider", "nope")
    assert result.returncode == 2 and "choose from" in result.stderr
