"""Agent memory as a new user meets it (issue 30): the README's examples return what
they promise on a fresh project, long segments are found by any part of them, expired ones
leave the listing at once, and an empty answer says why.

Everything runs through the real surfaces (the ``Memory`` import in a fresh interpreter, the
CLI as subprocesses, ``query_context`` over MCP stdio) with the real embedding model.
"""

from __future__ import annotations

import pytest

import json
import re
import subprocess
import sys
from pathlib import Path

from test_mcp_server import make_repo, mcp_session, server_env, structured

README = Path(__file__).resolve().parent.parent / "README.md"
REPO = {"src/checkout.py": "def submit(cart, customer):\n    return pricing.total(cart, "
                           "customer.tier)\n",
        "README.md": "# Shop\n\nCheckout and pricing.\n"}
TRACE = """Traceback (most recent call last):
  File "app/checkout.py", line 52, in submit
    total = pricing.total(cart, customer.tier)
  File "app/pricing.py", line 41, in total
    rate = DISCOUNTS[tier]
KeyError: 'platinum'
"""


def _cli(root: Path, env: dict, *args: str, stdin: str | None = None
         ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), *args],
                          input=stdin, capture_output=True, text=True, env=env, timeout=300)


def _readme_block(marker: str) -> str:
    """The README's fenced Python block that contains ``marker``."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    return next(b for b in blocks if marker in b)


def test_readme_memory_example_prints_the_traceback(tmp_path):
    root = make_repo(tmp_path / "repo", REPO)
    code = _readme_block("from contextd import Memory").replace("path/to/project", str(root))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=server_env(tmp_path / "run"), timeout=300, cwd=root)
    assert run.returncode == 0, run.stderr
    assert "KeyError: 'platinum'" in run.stdout


@pytest.mark.slow
def test_readme_stash_search_example_finds_the_trace(tmp_path):
    root = make_repo(tmp_path / "repo", REPO)
    env = server_env(tmp_path / "run")
    readme = README.read_text()
    assert 'contextd stash add --type error_log < trace.txt' in readme
    assert 'contextd stash search "why did checkout crash" --json' in readme
    added = _cli(root, env, "stash", "add", "--type", "error_log", stdin=TRACE)
    assert added.returncode == 0, added.stderr
    found = _cli(root, env, "stash", "search", "why did checkout crash", "--json")
    assert found.returncode == 0, found.stderr
    answer = json.loads(found.stdout)
    assert answer["total_found"] >= 1
    assert "KeyError: 'platinum'" in answer["segments"][0]["text"]


def _long_log(lines: int = 400) -> str:
    """A long service log whose one telling line is at the very end."""
    body = [f"2026-11-02 10:{n // 60:02d}:{n % 60:02d} INFO worker-{n % 4}: batch {n} "
            f"processed 250 rows in {40 + n % 17} ms" for n in range(lines)]
    body.append("2026-11-02 11:00:00 ERROR payments: Stripe webhook signature verification "
                "failed: the signing secret was rotated and the service still uses the old one")
    return "\n".join(body)


@pytest.mark.slow
def test_a_long_segment_is_found_by_its_last_line(tmp_path):
    root = make_repo(tmp_path / "repo", REPO)
    env = server_env(tmp_path / "run")
    log = _long_log()
    assert len(log) > 20_000
    added = _cli(root, env, "stash", "add", "--type", "error_log", "--session", "ops", stdin=log)
    assert added.returncode == 0, added.stderr
    found = json.loads(_cli(root, env, "stash", "search",
                            "stripe webhook signature failing after secret rotation",
                            "--session", "ops", "--json").stdout)
    assert found["segments"], found["notes"]
    assert found["segments"][0]["similarity"] > 0.5


@pytest.mark.slow
def test_empty_answers_say_why_and_expired_segments_leave_the_listing(tmp_path):
    root = make_repo(tmp_path / "repo", REPO)
    env = server_env(tmp_path / "run")
    day0 = {**env, "CONTEXTD_NOW": "2026-11-02T09:00:00Z"}
    added = _cli(root, day0, "stash", "add", "--type", "error_log", "--session", "agent-7",
                 stdin=TRACE)
    segment = added.stdout.split()[0]
    _cli(root, day0, "stash", "add", "--session", "agent-7", "--expires-in-days", "1",
         "short-lived note about the staging deploy window")

    # Stashed under agent-7, searched with no session: the answer names agent-7.
    unnamed = json.loads(_cli(root, day0, "stash", "search", "why did checkout crash",
                              "--json").stdout)
    assert unnamed["segments"] == []
    assert any("'agent-7'" in note for note in unnamed["notes"]), unnamed["notes"]
    assert unnamed["sessions"] == {"agent-7": 2}
    # Nothing close enough: the best similarity seen is reported, and is below the cut-off.
    far = _cli(root, day0, "stash", "search", "sourdough bread recipe", "--session",
               "agent-7", "--json")
    data = json.loads(far.stdout)
    assert data["segments"] == [] and data["best_similarity"] < data["min_similarity"]
    assert f"{data['best_similarity']:.3f}" in " ".join(data["notes"])
    human = _cli(root, day0, "stash", "search", "sourdough bread recipe", "--session",
                 "agent-7")
    assert "best similarity seen" in human.stderr

    day2 = {**env, "CONTEXTD_NOW": "2026-11-04T09:00:00Z"}
    listed = json.loads(_cli(root, day2, "stash", "show", "--session", "agent-7",
                             "--json").stdout)
    assert [s["segment_id"] for s in listed["segments"]] == [segment]
    everything = json.loads(_cli(root, day2, "stash", "show", "--session", "agent-7",
                                 "--expired", "--json").stdout)
    assert everything["total"] == 2


def test_query_context_lowers_the_memory_cut_off(tmp_path):
    root = make_repo(tmp_path / "repo", REPO)
    env = server_env(tmp_path / "run")
    terse = "Traceback ... KeyError: 'platinum'"  # scores ~0.14-0.18 against the question
    with mcp_session(root, env, tmp_path / "serve.log", "memory") as agent:
        structured(agent.call("stash_context", {"segments": [
            {"text": terse, "type": "error_log", "session_id": "agent-7"}]}))
        question = "checkout crash for a missing discount tier"

        def memory_hits(scope: dict) -> list:
            answer = structured(agent.call("query_context", {"query": question,
                                                             "scope": scope}))
            return [h for h in answer["hits"] if h["filePath"].startswith("stash:")]

        assert memory_hits({"memory": "agent-7"}) == []
        assert memory_hits({"memory": "agent-7", "memoryMinSimilarity": 0.05})
