"""Retrieval precision and token efficiency: ``.venv/bin/python -m benchmarks.eval.precision``.

Three task sets, each split in two halves by a hash of the case id (``tune`` and
``held-out``; the held-out half is the one reported against the targets, and nobody tunes
on it):

- verbatim docstring: the first paragraph of a function's docstring as the query, docstrings
  KEPT in the indexed copy (an agent quoting what it read); a hit is a chunk of the gold file
  overlapping the function;
- commit message: a real commit's message as the query, the source files it changed as the
  gold, the index a snapshot before it (benchmarks/eval/history.py, generated from the git
  mirrors at run time); files ranked;
- "where is X implemented": hand-written questions (tasks/where_<corpus>.json) whose gold is
  the implementing source file; also the share of queries whose top 3 files hold any source
  file.

Systems: each provider alone with the raw query (``full_text`` is BM25), their RRF fusion
("hybrid"), contextd's own path (``ContextModule.query``), and for token efficiency a
``grep`` baseline: grep the query's keywords, read the matching files whole, most keywords
first. Token efficiency as semble reports it: expected tokens read until the first relevant
hit (32k when never found) and recall at 500 / 1k / 2k / 4k tokens read.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.eval import history
from benchmarks.eval.corpora import CORPUS_LIST, TASKS, original_dir, stripped_dir
from benchmarks.eval.run import (
    CANDIDATES, NO_BUDGET, Case, build_index, doc_cases, providers_for,
    run_systems,
)
from contextd.config.sections import DEFAULT_ALLOWED_EXTENSIONS
from contextd import ContextModule
from contextd.providers.fulltext import STOPWORDS
from contextd.query.records import QueryRequest
from contextd.query.understanding import aggregate_files
from contextd.text.stop_words import STOP_WORDS
from contextd.text.tokens import estimate_tokens

NEVER_FOUND_TOKENS = 32_000
BUDGETS = (500, 1000, 2000, 4000)
SPLITS = ("held-out", "tune")
_KEYWORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_SOURCE_SUFFIXES = (".py", ".ts", ".tsx", ".js")
_NON_SOURCE_PARTS = ("test", "tests", "docs", "doc", "examples", "example")


def split_of(case_id: str) -> str:
    """A fixed half: the parity of the first byte of the id's BLAKE2 hash."""
    return SPLITS[hashlib.blake2b(case_id.encode(), digest_size=4).digest()[0] % 2]


def is_source_path(path: str) -> bool:
    """A source file by path conventions (the evaluation's own rule, not the product's)."""
    parts = path.lower().split("/")
    name = parts[-1]
    return (name.endswith(_SOURCE_SUFFIXES) and not name.startswith("test_")
            and not any(p in _NON_SOURCE_PARTS for p in parts[:-1])
            and ".test." not in name and ".spec." not in name)


@dataclass
class Ranked:
    """What a system returned for one case: chunks (path, lines, tokens) and files."""

    chunks: list[tuple[str, int, int, int]]
    files: list[str]


@dataclass
class Score:
    """Per-system tallies over a set of cases."""

    ranks: list[int | None] = field(default_factory=list)
    tokens_to_first: list[int] = field(default_factory=list)
    found_within: dict[int, list[bool]] = field(default_factory=lambda: {b: [] for b in BUDGETS})
    source_top3: list[bool] = field(default_factory=list)

    def add(self, rank: int | None, reading: list[tuple[int, bool]], source_top3: bool) -> None:
        self.ranks.append(rank)
        used, first = 0, None
        for tokens, relevant in reading:
            used += tokens
            if relevant:
                first = used
                break
        self.tokens_to_first.append(first if first is not None else NEVER_FOUND_TOKENS)
        for budget in BUDGETS:
            self.found_within[budget].append(first is not None and first <= budget)
        self.source_top3.append(source_top3)


def _hit(chunk: tuple[str, int, int, int], case: Case) -> bool:
    path, start, end, _ = chunk
    if path not in case.gold_files:
        return False
    return case.lines is None or (start <= case.lines[1] and end >= case.lines[0])


def score_case(ranked: Ranked, case: Case, score: Score, files: bool) -> None:
    if files:
        rank = next((i for i, p in enumerate(ranked.files, 1) if p in case.gold_files), None)
    else:
        rank = next((i for i, c in enumerate(ranked.chunks, 1) if _hit(c, case)), None)
    reading = [(c[3], _hit(c, case)) for c in ranked.chunks]
    score.add(rank, reading, any(is_source_path(p) for p in ranked.files[:3]))


# ----- systems ---------------------------------------------------------------------------
def provider_rankings(providers: dict, case: Case, project) -> dict[str, Ranked]:
    chunks = run_systems(providers, case, project, files=False)
    ranking = project.config.ranking
    return {system: Ranked([(s.file_path, s.start_line, s.end_line, s.tokens) for s in items],
                           [f.file_path for f in aggregate_files(items, ranking)])
            for system, items in chunks.items()}


def contextd_ranking(module: ContextModule, case: Case) -> Ranked:
    answer = module.query(QueryRequest(case.query, k=CANDIDATES, max_tokens=NO_BUDGET,
                                       by_file=True))
    return Ranked([(h.file_path, h.start_line, h.end_line, h.tokens) for h in answer.hits],
                  [f.file_path for f in answer.files])


class GrepBaseline:
    """grep the query's keywords, read each matching file whole, most keywords first."""

    def __init__(self, root: Path):
        self.files: dict[str, tuple[str, int]] = {}
        allowed = set(DEFAULT_ALLOWED_EXTENSIONS)
        for path in sorted(root.rglob("*")):
            if path.is_file() and path.suffix.lower() in allowed:
                try:
                    text = path.read_text("utf-8")
                except (UnicodeDecodeError, OSError):
                    continue
                self.files[path.relative_to(root).as_posix()] = (text.lower(),
                                                                 estimate_tokens(text))

    def rank(self, query: str) -> Ranked:
        words = {w.lower() for w in _KEYWORD_RE.findall(query)}
        words = {w for w in words if w not in STOPWORDS and w not in STOP_WORDS}
        counts = {path: sum(1 for w in words if w in text)
                  for path, (text, _) in self.files.items()}
        order = sorted((p for p, n in counts.items() if n), key=lambda p: (-counts[p], p))
        return Ranked([(p, 1, 10**9, self.files[p][1]) for p in order], order)


# ----- task sets ---------------------------------------------------------------------------
def where_cases(corpus: str) -> list[Case]:
    path = TASKS / f"where_{corpus}.json"
    if not path.exists():
        return []
    doc = json.loads(path.read_text())
    return [Case(t["id"], t["query"], tuple(t["gold_files"])) for t in doc["tasks"]]


def run_set(root: Path, index_name: str, variant: str, cases_by_set: dict[str, list[Case]],
            results: dict) -> None:
    """Index ``root`` once and score every case of every set on it."""
    print(f"indexing {index_name}/{variant} ...", file=sys.stderr)
    project, store = build_index(index_name, root, variant, "none")
    providers = providers_for(project, store)
    module = ContextModule(project, store)
    module.pipeline.warm_up(wait=True)
    grep = GrepBaseline(root)
    try:
        for set_name, cases in cases_by_set.items():
            files = set_name != "verbatim docstring"
            for case in cases:
                systems = provider_rankings(providers, case, project)
                systems["contextd"] = contextd_ranking(module, case)
                systems["grep"] = grep.rank(case.query)
                for system, ranked in systems.items():
                    bucket = results.setdefault((set_name, split_of(case.id)), {})
                    score_case(ranked, case, bucket.setdefault(system, Score()), files)
    finally:
        module.shutdown()
        for provider in providers.values():
            provider.shutdown()
        store.close()


HEADER = ["system", "n", "R@1", "R@3", "R@5", "MRR", "tok→1st", "rec@500", "rec@1k",
          "rec@2k", "rec@4k", "src in top3"]


def _pct(values: list[bool]) -> str:
    return f"{sum(values) / max(1, len(values)):6.1%}"


def print_results(results: dict) -> None:
    for (set_name, split), systems in sorted(results.items(), key=lambda kv: (kv[0][0],
                                                                              kv[0][1] != "held-out")):
        print(f"\n### {set_name} - {split}")
        print("| " + " | ".join(HEADER) + " |")
        print("|" + "---|" * len(HEADER))
        for system, s in systems.items():
            n = len(s.ranks)
            cells = [system, str(n)] + [_pct([r is not None and r <= k for r in s.ranks])
                                        for k in (1, 3, 5)]
            cells.append(f"{sum(1 / r for r in s.ranks if r) / max(1, n):.3f}")
            cells.append(f"{sum(s.tokens_to_first) / max(1, n):7.0f}")
            cells += [_pct(s.found_within[b]) for b in BUDGETS]
            cells.append(_pct(s.source_top3))
            print("| " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", nargs="*", default=[c.name for c in CORPUS_LIST])
    parser.add_argument("--history", nargs="*",
                        default=[r.name for r in history.HISTORY_REPOS])
    args = parser.parse_args(argv)
    results: dict = {}
    for corpus in [c for c in CORPUS_LIST if c.name in args.corpora]:
        original = original_dir(corpus)
        _, doc_tasks = stripped_dir(corpus)
        sets = {"verbatim docstring": doc_cases(doc_tasks), "where is X": where_cases(corpus.name)}
        run_set(original, corpus.name, "original", sets, results)
    for repo in [r for r in history.HISTORY_REPOS if r.name in args.history]:
        if not history.available(repo):
            print(f"commit-message tasks of {repo.name} skipped: no git mirror at "
                  f"{repo.git_dir} (set CONTEXTD_EVAL_MIRRORS)", file=sys.stderr)
            continue
        snapshot, tasks = history.sample(repo)
        root = history.snapshot_dir(repo, snapshot)
        cases = [Case(t.id, t.query, t.gold_files) for t in tasks]
        run_set(root, f"history-{repo.name}", snapshot[:12], {"commit message": cases}, results)
    print_results(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
