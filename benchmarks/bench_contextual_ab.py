"""What contextual prefixes buy on a real code base: the A/B comparison of seed 003
(``contextd query --ab --expect``) over handwritten questions about contextd's own package.

A copy of ``contextd/`` (Python, Markdown, SQL, real docstrings) is indexed in a temporary
git repository with the configured contextualizer (structural by default); each question
names the one file that answers it. For each side of the comparison (every chunk ranked by
the vector of its index text, i.e. prefix + chunk, and by the vector of its bare text) the
benchmark prints the rank of that file's best chunk, then MRR and hits in the top 1/5/10.
The questions were written for this benchmark by reading the modules, before any run; 15 is
few, so read the figures as a direction, not a measurement of a general gain.

    .venv/bin/python benchmarks/bench_contextual_ab.py
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from contextd.runtime.engine import Engine

PACKAGE = Path(__file__).resolve().parent.parent / "contextd"
QUESTIONS = (
    ("where are long stashed segments cut into pieces before embedding",
     "contextd/stash/pieces.py"),
    ("which process gets to write the database when several start", "contextd/runtime/election.py"),
    ("redact credentials before a file is chunked", "contextd/scrub/scrubber.py"),
    ("full text search ranking of chunks", "contextd/providers/fulltext.py"),
    ("combine the rankings of several providers into one", "contextd/query/fusion.py"),
    ("how many tokens a task of a given complexity gets", "contextd/query/budget.py"),
    ("react to files saved in the editor", "contextd/runtime/watcher.py"),
    ("prompt a language model for a chunk's context and reject generic answers",
     "contextd/contextualizers/llm.py"),
    ("page numbers of PDF documents", "contextd/knowledge/readers/pdf.py"),
    ("keep search results so a report can cite them later", "contextd/sessions/manager.py"),
    ("compare the before and after token usage of agents", "contextd/query/token_reduction.py"),
    ("commits that touched a file", "contextd/providers/git_history.py"),
    ("apply schema migrations when the index file is opened",
     "contextd/store/duckdb/store.py"),
    ("split markdown documents at their headings", "contextd/chunkers/markdown.py"),
    ("turn expected failures of MCP tools into messages for the agent",
     "contextd/mcp/app.py"),
)
TOP = (1, 5, 10)


def _summary(ranks: list[int | None]) -> str:
    mrr = sum(1 / r for r in ranks if r) / len(ranks)
    hits = "  ".join(f"top{n} {sum(1 for r in ranks if r and r <= n):>2}" for n in TOP)
    return f"MRR {mrr:.3f}  {hits}"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        shutil.copytree(PACKAGE, root / "contextd",
                        ignore=shutil.ignore_patterns("__pycache__"))
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        engine = Engine.open(str(root))
        try:
            report = engine.ensure_indexed()
            print(f"indexed {report.files_indexed} files, {report.chunks_written} chunks "
                  f"(strategy {engine.project.config.contextualizer.strategy})")
            sides: tuple[list, list] = ([], [])
            for question, path in QUESTIONS:
                ab = engine.contextual_search(question, limit=10, ab=True,
                                              expect=[path])["ab"]
                expected = ab["expected"][0]
                sides[0].append(expected["rank_with_context"])
                sides[1].append(expected["rank_without_context"])
                print(f"#{expected['rank_with_context'] or '-':>4} with  "
                      f"#{expected['rank_without_context'] or '-':>4} without  {path}")
            print(f"chunks compared: {ab['chunks_compared']}, with a prefix: "
                  f"{ab['contextualized_chunks']}")
            print(f"with prefixes:    {_summary(sides[0])}")
            print(f"without prefixes: {_summary(sides[1])}")
        finally:
            engine.close()


if __name__ == "__main__":
    main()
