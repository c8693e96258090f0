"""Agent memory end to end: the MCP tools over stdio (the SDK client), the CLI as
subprocesses, and three servers stashing at once while the owner is SIGKILLed.

Time is moved with ``CONTEXTD_NOW`` (the stash clock of each process): the agent stashes on
day 0 in one session of ``contextd serve`` and retrieves on day 1 in a new one.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import ExitStack, suppress

import pytest

from test_mcp_server import error_text, make_repo, mcp_session, server_env, structured

DAY0 = "2026-11-02T09:00:00Z"
DAY1 = "2026-11-03T09:00:00Z"
SESSION = "agent-7"
TRACEBACK = '''Traceback (most recent call last):
  File "src/billing/invoice.py", line 14, in invoice_total
    return sum(qty * price for qty, price in lines)
TypeError: unsupported operand type(s) for *: 'int' and 'NoneType'
'''
DECISION = ("Decision: reminders are sent by a nightly batch job instead of on every invoice "
            "save, so customers get one email a day; agreed with the support team.")
REPO = {
    "src/billing/invoice.py": "def invoice_total(lines):\n"
                              "    return sum(qty * price for qty, price in lines)\n",
    "README.md": "# Billing\n\nInvoices and reminders.\n",
}


def _segment(text: str, kind: str, **extra) -> dict:
    return {"text": text, "type": kind, "session_id": SESSION, **extra}


def test_stash_work_retrieve_a_day_later_and_merge_over_mcp(tmp_path):
    root = make_repo(tmp_path / "repo", REPO)
    env = server_env(tmp_path / "run")
    with mcp_session(root, {**env, "CONTEXTD_NOW": DAY0}, tmp_path / "day0.log",
                     "memory") as agent:
        names = {tool.name for tool in agent.list_tools()}
        assert {"stash_context", "retrieve_stashed_context", "merge_stashed_context",
                "list_stashed_context", "delete_stashed_context",
                "protect_stashed_context"} <= names
        stashed = structured(agent.call("stash_context", {"segments": [
            _segment(TRACEBACK, "error_log", topic="invoices", source="pytest -x"),
            _segment(DECISION, "decision", topic="reminders")]}))
        trace_id, decision_id = stashed["segment_ids"]
        assert stashed["tokens_freed"] > 0
        # The agent works on: project queries never see memory unless the scope asks.
        answer = structured(agent.call("query_context", {"query": "invoice total price"}))
        assert not any(h["filePath"].startswith("stash:") for h in answer["hits"])
        for arguments, hint in (
                ({"segments": [_segment("  ", "message")]}, "text is empty"),
                ({"segments": [_segment("x", "gossip")]}, "code_block"),
                ({"segments": [_segment("x", "message", references=["seg-nope"])]},
                 "references unknown segment 'seg-nope'"),
                ({"segments": [_segment("x", "message", timestamp="03/11/2026")]},
                 "not an ISO 8601")):
            assert hint in error_text(agent.call("stash_context", arguments))
        assert structured(agent.call("list_stashed_context", {"session_id": SESSION}))[
            "total"] == 2  # the bad calls wrote nothing

    with mcp_session(root, {**env, "CONTEXTD_NOW": DAY1}, tmp_path / "day1.log",
                     "memory") as agent:
        crash = structured(agent.call("retrieve_stashed_context", {
            "query": "invoice total crashed because a line had no price",
            "session_id": SESSION, "min_similarity": 0.4}))
        top = crash["segments"][0]
        assert top["segment_id"] == trace_id
        assert top["score_parts"]["recency"] == pytest.approx(math.exp(-1 / 7), abs=1e-3)
        assert top["score"] == pytest.approx(
            0.6 * top["similarity"] + 0.2 * top["score_parts"]["age"]
            + 0.2 * top["score_parts"]["recency"], abs=1e-3)
        why = structured(agent.call("retrieve_stashed_context", {
            "query": "why do payment reminder emails go out once per day",
            "session_id": SESSION, "min_similarity": 0.4, "top_k": 1}))
        assert [s["segment_id"] for s in why["segments"]] == [decision_id]
        other = structured(agent.call("retrieve_stashed_context", {
            "query": "invoice total crashed because a line had no price",
            "session_id": "someone-else", "min_similarity": 0.4}))
        assert other["segments"] == []
        assert "top_k" in error_text(agent.call("retrieve_stashed_context",
                                                {"query": "x", "top_k": 0}))
        assert "is after until" in error_text(agent.call("retrieve_stashed_context", {
            "query": "x", "filters": {"since": "2026-11-03", "until": "2026-11-01"}}))

        with_memory = structured(agent.call("query_context", {
            "query": "invoice total TypeError NoneType price", "scope": {"memory": SESSION}}))
        assert f"stash:{trace_id}" in {h["filePath"] for h in with_memory["hits"]}

        merged = structured(agent.call("merge_stashed_context",
                                       {"segment_ids": [trace_id, decision_id]}))
        assert [s["text"] for s in merged["segments"]] == [TRACEBACK, DECISION]
        assert merged["tokens_added"] == sum(s["tokens"] for s in merged["segments"])
        assert structured(agent.call("protect_stashed_context",
                                     {"segment_ids": [decision_id]}))["count"] == 1
        assert structured(agent.call("delete_stashed_context",
                                     {"segment_ids": [trace_id]}))["count"] == 1
        left = structured(agent.call("list_stashed_context", {"session_id": SESSION}))
        assert [(s["segment_id"], s["protected"]) for s in left["segments"]] == [
            (decision_id, True)]
        assert "unknown segment id" in error_text(agent.call(
            "merge_stashed_context", {"segment_ids": [trace_id]}))


def _cli(root, env, *args, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), "stash",
                           *args], input=stdin, capture_output=True, text=True, env=env,
                          timeout=180)


@pytest.mark.slow
def test_stash_search_show_rm_and_gc_from_the_cli(tmp_path):
    root = make_repo(tmp_path / "repo", REPO)
    env = server_env(tmp_path / "run")
    day0 = {**env, "CONTEXTD_NOW": DAY0}
    added = _cli(root, day0, "add", "--type", "error_log", "--session", SESSION, "--json",
                 stdin=TRACEBACK)
    assert added.returncode == 0, added.stderr
    trace_id = json.loads(added.stdout)["segment_ids"][0]
    decision = _cli(root, day0, "add", DECISION, "--type", "decision", "--session", SESSION,
                    "--ref", trace_id, "--expires-in-days", "3", "--json")
    decision_id = json.loads(decision.stdout)["segment_ids"][0]

    day1 = {**env, "CONTEXTD_NOW": DAY1}
    found = _cli(root, day1, "search", "why do payment reminder emails go out once per day",
                 "--session", SESSION, "--min-similarity", "0.4", "--json")
    assert found.returncode == 0, found.stderr
    segments = json.loads(found.stdout)["segments"]
    assert segments[0]["segment_id"] == decision_id
    chained = next(s for s in segments if s["segment_id"] == trace_id)
    assert chained["reached_from"] == decision_id and chained["score_parts"]["hops"] == 1
    human = _cli(root, day1, "search", "reminder emails once per day", "--session", SESSION,
                 "--min-similarity", "0.4")
    assert decision_id in human.stdout and "sim " in human.stdout

    shown = _cli(root, day1, "show", trace_id)
    assert shown.returncode == 0 and TRACEBACK.strip() in shown.stdout

    bad = _cli(root, day1, "add", "--type", "error_log", stdin="   \n")
    assert bad.returncode == 2 and bad.stderr.strip() == (
        "contextd: error: segment 1: text is empty")
    assert _cli(root, day1, "rm", "seg-unknown").returncode == 2

    day5 = {**env, "CONTEXTD_NOW": "2026-11-07T09:00:00Z"}
    collected = json.loads(_cli(root, day5, "gc", "--json").stdout)
    assert collected["expired"] == [decision_id] and collected["remaining"] == 1
    removed = _cli(root, day5, "rm", trace_id, "--json")
    assert json.loads(removed.stdout)["count"] == 1
    listed = json.loads(_cli(root, day5, "show", "--session", SESSION, "--json").stdout)
    assert listed["total"] == 0


# Stashes each server makes, one call at a time.
STASHES_PER_SERVER = 12


def _owner_pid(server) -> int:
    return structured(server.call("get_context_stats", {}))["owner"]["pid"]


@pytest.mark.slow
def test_three_servers_stash_at_once_and_an_owner_killed_midway_loses_nothing(tmp_path):
    root = make_repo(tmp_path / "repo", REPO)
    env = server_env(tmp_path / "run")
    with ExitStack() as stack:
        servers = [stack.enter_context(mcp_session(root, env, tmp_path / f"server{i}.log",
                                                   "memory"))
                   for i in range(3)]
        owner = _owner_pid(servers[0])
        killed = next(s for s in servers
                      if structured(s.call("get_context_stats", {}))["owner"]["this_process"])
        acknowledged: dict[int, list[str]] = {i: [] for i in range(3)}
        failures: dict[int, list[str]] = {i: [] for i in range(3)}

        def agent(number: int) -> None:
            for step in range(STASHES_PER_SERVER):
                text = f"Agent {number} note {step}: cache key for tenant {number * 100 + step}"
                try:
                    result = servers[number].call("stash_context", {"segments": [
                        {"text": text, "type": "research", "session_id": f"agent-{number}"}]})
                except Exception as exc:  # the killed server's own pipe
                    failures[number].append(repr(exc))
                    return
                if result.is_error:
                    failures[number].append(result.content[0].text)
                    return
                acknowledged[number] += result.structured_content["segment_ids"]

        threads = [threading.Thread(target=agent, args=(i,)) for i in range(3)]
        for thread in threads:
            thread.start()
        while sum(map(len, acknowledged.values())) < STASHES_PER_SERVER:
            time.sleep(0.05)
        os.kill(owner, signal.SIGKILL)
        for thread in threads:
            thread.join(180)
        survivors = [i for i, s in enumerate(servers) if s is not killed]
        for number in survivors:
            assert failures[number] == [] and len(acknowledged[number]) == STASHES_PER_SERVER
        listed = structured(servers[survivors[0]].call("list_stashed_context", {
            "all_sessions": True, "limit": 500}))
        stored = {s["segment_id"] for s in listed["segments"]}
        every = [sid for ids in acknowledged.values() for sid in ids]
        assert set(every) <= stored and len(every) == len(set(every))  # nothing lost or doubled
        # Beyond those, at most the killed server's own call in flight (committed, unanswered).
        assert len(stored - set(every)) <= 1
        assert _owner_pid(servers[survivors[0]]) != owner
        with suppress(Exception):  # the killed server's pipe died with it
            stack.close()
