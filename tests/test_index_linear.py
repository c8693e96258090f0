"""No stage of the index path grows faster than linearly with a file's length (issue 37).

The work of indexing one file (hash, decode, scrub, chunk, contextualize, the store's rows) is
counted, not timed: every Python line executed and every call into C (a regex match, a
``str`` method) is one step, counted by the interpreter's own trace and profile hooks. The
count is deterministic, so the test cannot flake on a loaded machine, and it sees a quadratic
loop whatever the loop's body is. A file 4 times as long must cost at most ~4 times the
steps; the quadratic YAML key path this guards against cost ~15 times, the trimming of a
long module summary word by word for every chunk's prefix ~9 times.
"""

from __future__ import annotations

import json
import sys

import pytest

from contextd.config.sections import ContextConfig
from contextd.indexer.plan import FileTask
from contextd.indexer.worker import INDEXED, process_data
from contextd.store.rows import record_columns

# steps(4N) / steps(N): 4 for linear work; what the fixed cost of a file saves leaves room
# for the few n·log n sorts (chunks, keys) of the path.
MAX_GROWTH = 4.6
BASE_LINES = 1200


def yaml_text(lines: int) -> str:
    """A compose-like file: one top-level key holding many nested services."""
    out = ["# services of the test deployment", "services:"]
    n = 0
    while len(out) < lines:
        n += 1
        out += [f"  svc{n:05d}:", f'    image: "registry.local/svc{n:05d}:1.{n % 7}"',
                "    ports:", f'      - "{8000 + n}:80"', "    environment:",
                f"      LEVEL: {'debug' if n % 2 else 'info'}", f"      NAME: svc{n:05d}",
                f"      REPLICAS: {n % 5 + 1}"]
    return "\n".join(out[:lines]) + "\n"


def json_text(lines: int) -> str:
    """A settings file: one object per entry, about 8 lines each."""
    entries = {f"entry{n:05d}": {"name": f"entry {n}", "enabled": bool(n % 2),
                                 "limits": {"cpu": n % 4 + 1, "memory": f"{n % 9 + 1}Gi"}}
               for n in range(1, lines // 9 + 1)}
    return json.dumps({"entries": entries}, indent=2) + "\n"


def python_text(lines: int) -> str:
    """A module of many small classes, each with a docstring and two methods."""
    out = ['"""Accounts of the test ledger."""', "", "import math", ""]
    n = 0
    while len(out) < lines:
        n += 1
        out += [f"class Account{n:05d}:", f'    """Account number {n} of the ledger."""', "",
                "    def balance(self, entries):", f"        total = sum(entries) + {n}",
                "        return math.floor(total)", "",
                "    def owner(self):", f'        return "owner-{n}"', "", ""]
    return "\n".join(out[:lines]) + "\n"


def markdown_text(lines: int) -> str:
    """A handbook of many nested sections."""
    out = ["# Handbook", ""]
    n = 0
    while len(out) < lines:
        n += 1
        out += [f"## Chapter {n}", "", f"Chapter {n} explains the step number {n} in prose.",
                "", f"### Details of {n}", "", f"- item one of {n}", f"- item two of {n}", ""]
    return "\n".join(out[:lines]) + "\n"


def typescript_text(lines: int) -> str:
    """A module of many small exported classes with doc comments."""
    out = ["// Shapes of the test drawing."]
    n = 0
    while len(out) < lines:
        n += 1
        out += [f"/** Shape number {n}. */", f"export class Shape{n} {{",
                f"  area(scale: number): number {{ return scale * {n}; }}",
                f"  name(): string {{ return 'shape-{n}'; }}", "}", ""]
    return "\n".join(out[:lines]) + "\n"


def commented_go_text(lines: int) -> str:
    """A Go file opening with one long comment sentence (its module summary, trimmed to fit
    every chunk's prefix), then many small functions."""
    out = [f"// Package ledger keeps the accounts of shop number {n} of the chain and"
           for n in range(lines // 3)] + ["package ledger", ""]
    n = 0
    while len(out) < lines:
        n += 1
        out += [f"// Balance{n} returns the balance of account {n}.",
                f"func Balance{n}(entries []int) int {{", "\ttotal := 0",
                "\tfor _, e := range entries {", "\t\ttotal += e", "\t}",
                f"\treturn total + {n}", "}", ""]
    return "\n".join(out[:lines]) + "\n"


KINDS = {"deploy.yaml": yaml_text, "settings.json": json_text, "ledger.py": python_text,
         "handbook.md": markdown_text, "shapes.ts": typescript_text,
         "ledger.go": commented_go_text}


def count_steps(work) -> int:
    """Python lines executed plus calls made (C functions included) while ``work()`` runs."""
    steps = 0

    def trace(frame, event, arg):
        nonlocal steps
        steps += 1
        return trace

    def profile(frame, event, arg):
        nonlocal steps
        if event == "c_call":
            steps += 1

    sys.settrace(trace)
    sys.setprofile(profile)
    try:
        work()
    finally:
        sys.setprofile(None)
        sys.settrace(None)
    return steps


def index_one(path: str, text: str, config: ContextConfig) -> int:
    """Index one file's text as the indexer does (no store): returns its chunks."""
    data = text.encode()
    outcome = process_data(FileTask(path, f"/nowhere/{path}", len(data), 1, None), data, config)
    assert outcome.status == INDEXED and not outcome.error_type, outcome.message
    record_columns([outcome.record], {path: 1}, 1)
    return len(outcome.record.chunks)


@pytest.mark.parametrize("path", sorted(KINDS))
def test_indexing_one_file_is_linear_in_its_length(path):
    config = ContextConfig()
    make = KINDS[path]
    index_one(path, make(BASE_LINES // 4), config)  # grammars, caches, compiled patterns
    chunks = {}

    def run(lines: int) -> int:
        text = make(lines)
        assert text.count("\n") == lines or path.endswith(".json")
        return count_steps(lambda: chunks.__setitem__(lines, index_one(path, text, config)))

    small, large = run(BASE_LINES), run(4 * BASE_LINES)
    # The long file is really cut into ~4 times the chunks: the steps are per-chunk work.
    assert 3.5 * chunks[BASE_LINES] <= chunks[4 * BASE_LINES], chunks
    assert large <= MAX_GROWTH * small, (
        f"{path}: {large:,} steps for {4 * BASE_LINES} lines against {small:,} for "
        f"{BASE_LINES}: x{large / small:.1f}, more than linear")
