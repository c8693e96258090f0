"""Public retrieval evaluation: ``.venv/bin/python -m benchmarks.eval``.

For each corpus (benchmarks/eval/corpora.py) and contextualizer strategy (none, structural),
the corpus is indexed through the real indexer into its own index directory under
benchmarks/.cache/eval/index/, then two task types are asked:

- docstring -> function (docstrings stripped from the indexed copy): a hit is a chunk of the
  gold file overlapping the function's lines;
- task-style descriptions (benchmarks/eval/tasks/*.json, written before any run): a hit is a
  gold file, chunks aggregated to files.

Rows: each provider with the raw query, their RRF fusion with the raw query ("hybrid"), and
"contextd": the product's own path, ``ContextModule.query`` (query understanding, fusion,
ranking boosts, de-duplication, MMR, the token budget), files ranked with ``by_file`` for
task-style queries. Columns: Recall@1/5/10, MRR, and for contextd's context at the
1,500-token budget: its tokens, the tokens of the whole gold files, and the share of cases
whose context holds the gold snippet (any chunk of a gold file for task-style queries, an
overlapping chunk for docstring queries).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.eval.corpora import CACHE, CORPUS_LIST, TASKS, DocTask, original_dir, stripped_dir
from benchmarks.eval.index_cache import index_dir
from contextd.config.loading import config_from_dict
from contextd.indexer import Indexer
from contextd import ContextModule
from contextd.config.project import Project
from contextd.providers.base import EmbedderHandle, ProviderContext, ProviderQuery
from contextd.providers.fulltext import FullTextProvider
from contextd.providers.semantic import SemanticProvider
from contextd.providers.symbol import SymbolProvider
from contextd.query.records import QueryRequest
from contextd.query.understanding import aggregate_files
from contextd.query.fusion import FusionStrategy, fuse
from contextd.records import ContextScope, TokenBudget
from contextd.store.duckdb import DuckDBStore
from contextd.text.tokens import estimate_tokens

INDEXES = CACHE / "eval" / "index"
STRATEGIES = ("none", "structural")
CUTOFFS = (1, 5, 10)
RENDER_BUDGET = 1500
CANDIDATES = 50
NO_BUDGET = 10**7  # ranking figures are taken before any budget cut
PROVIDER_CLASSES = (SemanticProvider, FullTextProvider, SymbolProvider)


@dataclass
class Case:
    """One query with its gold: files (task-style) or a file and line range (docstring)."""

    id: str
    query: str
    gold_files: tuple[str, ...]
    lines: tuple[int, int] | None = None


@dataclass
class Tally:
    """Ranks of the first hit and rendering figures of one system over a set of cases."""

    ranks: list[int | None] = field(default_factory=list)
    rendered_tokens: list[int] = field(default_factory=list)
    gold_tokens: list[int] = field(default_factory=list)
    contains_gold: list[bool] = field(default_factory=list)

    def row(self) -> list[str]:
        n = len(self.ranks) or 1
        cells = [f"{sum(1 for r in self.ranks if r is not None and r <= k) / n:6.1%}"
                 for k in CUTOFFS]
        cells.append(f"{sum(1 / r for r in self.ranks if r) / n:.3f}")
        if self.rendered_tokens:
            ratio = sum(self.rendered_tokens) / max(1, sum(self.gold_tokens))
            cells += [f"{statistics.mean(self.rendered_tokens):7.0f}",
                      f"{statistics.mean(self.gold_tokens):7.0f}", f"{ratio:6.1%}",
                      f"{sum(self.contains_gold) / n:6.1%}"]
        return cells


def build_index(corpus_name: str, root: Path, variant: str, strategy: str):
    """Index ``root`` with the real indexer into its own directory (named with the indexing
    code's fingerprint, :mod:`benchmarks.eval.index_cache`); returns project, store."""
    settings = {"contextualizer": {"strategy": strategy}, "watcher": {"use_gitignore": False}}
    folder = index_dir(INDEXES, f"{corpus_name}-{variant}-{strategy}",
                       config_from_dict(settings))
    db = folder / "context.duckdb"
    config = config_from_dict({**settings, "storage": {"db_path": str(db)}})
    project = Project(root=root, config=config)
    store = DuckDBStore(db)
    indexer = Indexer(project, store)
    indexer.ensure_indexed()
    indexer.embed_pending()
    return project, store


def providers_for(project: Project, store) -> dict:
    """The semantic, full-text and symbol providers over one index, the model loaded (a
    semantic query before that answers nothing)."""
    embedder = EmbedderHandle(project.config)
    embedder.wait()
    found: dict = {}
    context = ProviderContext(project, project.config, store, embedder, found.get)
    for cls in PROVIDER_CLASSES:
        provider = cls()
        provider.initialize(context)
        found[provider.id] = provider
    return found


def rank_of(snippets, case: Case, files: bool) -> int | None:
    """1-based rank of the first hit (files: of the first gold file among aggregated files)."""
    if files:
        for rank, path in enumerate(snippets, start=1):
            if path in case.gold_files:
                return rank
        return None
    for rank, s in enumerate(snippets, start=1):
        if is_gold_snippet(s, case):
            return rank
    return None


def is_gold_snippet(snippet, case: Case) -> bool:
    if snippet.file_path not in case.gold_files:
        return False
    if case.lines is None:
        return True
    return snippet.start_line <= case.lines[1] and snippet.end_line >= case.lines[0]


def run_systems(providers: dict, case: Case, project: Project, files: bool
                ) -> dict[str, list]:
    """What each raw system ranks for one case: file paths when ``files``, else snippets."""
    config = project.config
    scope, budget = ContextScope(), TokenBudget()
    raw = {pid: p.query(ProviderQuery(case.query, CANDIDATES), scope, budget)
           for pid, p in providers.items()}
    weights = {pid: config.provider(pid).weight for pid in raw}
    out = dict(raw)
    out["hybrid"] = fuse(raw, weights, FusionStrategy.RRF, config.provider("hybrid").rrf_k)
    if files:
        return {system: [h.file_path for h in aggregate_files(snippets, config.ranking)]
                for system, snippets in out.items()}
    return out


def product_tally(module: ContextModule, case: Case, files: bool, tally: "Tally",
                  gold_tokens: int) -> None:
    """contextd's own answer to one case: its ranking, and the context it renders at the
    budget."""
    ranked = module.query(QueryRequest(case.query, k=max(CUTOFFS), max_tokens=NO_BUDGET,
                                       by_file=files))
    tally.ranks.append(rank_of([f.file_path for f in ranked.files] if files else ranked.hits,
                               case, files))
    shown = module.query(QueryRequest(case.query, max_tokens=RENDER_BUDGET)).hits
    tally.rendered_tokens.append(sum(h.tokens for h in shown))
    tally.gold_tokens.append(gold_tokens)
    tally.contains_gold.append(any(is_gold_snippet(h, case) for h in shown))


def evaluate(cases: list[Case], providers: dict, module: ContextModule, files: bool,
             root: Path) -> dict[str, Tally]:
    tallies: dict[str, Tally] = {}
    gold_cache: dict[str, int] = {}
    for case in cases:
        for system, ranked in run_systems(providers, case, module.project, files).items():
            tallies.setdefault(system, Tally()).ranks.append(rank_of(ranked, case, files))
        for path in case.gold_files:
            if path not in gold_cache:
                gold_cache[path] = estimate_tokens((root / path).read_text("utf-8"))
        product_tally(module, case, files, tallies.setdefault("contextd", Tally()),
                      sum(gold_cache[p] for p in case.gold_files))
    return tallies


def evaluate_index(project: Project, store, cases: list[Case], files: bool,
                   root: Path) -> dict[str, Tally]:
    """Every system's tally over one index, which is closed afterwards. The model is loaded
    and the in-memory indexes built first: otherwise the first queries race the semantic
    provider's start and the figures depend on timing."""
    providers = providers_for(project, store)
    module = ContextModule(project, store)
    module.pipeline.warm_up(wait=True)
    try:
        return evaluate(cases, providers, module, files, root)
    finally:
        module.shutdown()
        for p in providers.values():
            p.shutdown()
        store.close()


def task_cases(corpus_name: str) -> list[Case]:
    doc = json.loads((TASKS / f"{corpus_name}.json").read_text())
    return [Case(t["id"], t["query"], tuple(t["gold_files"])) for t in doc["tasks"]]


def doc_cases(tasks: list[DocTask]) -> list[Case]:
    return [Case(t.id, t.query, (t.path,), (t.start_line, t.end_line)) for t in tasks]


HEADER = ["system", "R@1", "R@5", "R@10", "MRR", "ctx tok", "gold tok", "ctx/gold",
          "has gold"]


def print_table(title: str, tallies: dict[str, Tally]) -> None:
    print(f"\n### {title}")
    print("| " + " | ".join(HEADER) + " |")
    print("|" + "---|" * len(HEADER))
    for system, tally in tallies.items():
        cells = tally.row() + [""] * (len(HEADER) - 1 - len(tally.row()))
        print("| " + " | ".join([system, *cells]) + " |")


def merge(into: dict[str, Tally], more: dict[str, Tally]) -> None:
    for system, tally in more.items():
        target = into.setdefault(system, Tally())
        for name in ("ranks", "rendered_tokens", "gold_tokens", "contains_gold"):
            getattr(target, name).extend(getattr(tally, name))


def eval_sets(corpora: list[str], strategies: list[str]):
    """Every (corpus, strategy, kind, root, variant, cases, files) to evaluate: per corpus and
    strategy, the task-style cases on the original copy and the docstring cases on the
    stripped one (``files``: whether hits are whole files)."""
    for corpus in [c for c in CORPUS_LIST if c.name in corpora]:
        original = original_dir(corpus)
        stripped, doc_tasks = stripped_dir(corpus)
        for strategy in strategies:
            yield corpus, strategy, "task", original, "original", task_cases(corpus.name), True
            yield (corpus, strategy, "docstring", stripped, "stripped", doc_cases(doc_tasks),
                   False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", nargs="*", default=[c.name for c in CORPUS_LIST])
    parser.add_argument("--strategies", nargs="*", default=list(STRATEGIES))
    args = parser.parse_args(argv)
    totals: dict[tuple[str, str], dict[str, Tally]] = {}
    for corpus, strategy, kind, root, variant, cases, files in eval_sets(args.corpora,
                                                                args.strategies):
        print(f"indexing {corpus.name}/{variant} with {strategy} prefixes ...",
              file=sys.stderr)
        project, store = build_index(corpus.name, root, variant, strategy)
        tallies = evaluate_index(project, store, cases, files, root)
        print_table(f"{corpus.name} - {kind} ({len(cases)} queries) - prefixes: "
                    f"{strategy}", tallies)
        merge(totals.setdefault((kind, strategy), {}), tallies)
    for (kind, strategy), tallies in totals.items():
        print_table(f"ALL corpora - {kind} - prefixes: {strategy}", tallies)
    return 0


if __name__ == "__main__":
    sys.exit(main())
