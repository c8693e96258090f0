"""Retrieval quality of each provider and of the hybrid, on code no one here wrote.

Corpus: the sources of a few libraries from PyPI (``pip download --no-binary :all: --no-deps``
into benchmarks/.cache/, git-ignored), with every docstring removed from the indexed copy.
Queries: the first sentence of each public function's docstring. Gold: that function (a hit
counts when it is in the function's file and covers its ``def`` line). Prints Recall@1/5/10
and MRR@10 per provider, then each provider's pass rate on the golden queries of
tests/test_golden_queries.py (expected file/symbol in the top 3).

With ``--backends`` the corpus is indexed once per embedding backend (written to the corpus'
context.toml) and the providers that use vectors are scored again, so the default backend's
quality can be compared with the torch reference on the same queries.

    .venv/bin/python benchmarks/bench_retrieval.py [--per-library 80]
    .venv/bin/python benchmarks/bench_retrieval.py --backends torch-fp32 onnx-fp32 onnx-int8
"""

from __future__ import annotations

import argparse
import ast
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench_embedders import BACKENDS
from contextd import ContextModule
from contextd.embedders.common import require_extra
from contextd.errors import ContextdError
from contextd.query.records import QueryRequest

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
LIBRARIES = {"requests": ("requests==2.32.3", "src/requests"),
             "more_itertools": ("more-itertools==10.5.0", "more_itertools"),
             "toolz": ("toolz==0.12.1", "toolz")}
PROVIDERS = ("semantic", "symbol", "full_text", "hybrid")
# The providers whose results depend on the embedding backend.
VECTOR_PROVIDERS = ("semantic", "hybrid")
DEFAULT_BACKEND = "onnx-int8"
CUTOFFS = (1, 5, 10)
MIN_QUERY_WORDS = 4
NO_BUDGET = 10**7
SEED = 7


@dataclass(frozen=True)
class Case:
    query: str
    path: str
    def_line: int


def fetch(spec: str) -> Path:
    """The sdist of ``spec`` (downloaded once into the cache)."""
    target = CACHE / "sdists"
    target.mkdir(parents=True, exist_ok=True)
    name, version = spec.split("==")
    found = [p for p in target.glob("*.tar.gz")
             if p.name.lower().replace("_", "-").startswith(f"{name.lower()}-{version}")]
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:",
                        "--no-deps", "-d", str(target), spec], check=True,
                       stdout=subprocess.DEVNULL)
        return fetch(spec)
    return found[0]


def _first_sentence(doc: str) -> str:
    text = " ".join(doc.strip().split("\n\n")[0].split())
    return text.split(". ")[0].rstrip(".")


def strip_docstrings(source: str) -> tuple[str, list[tuple[str, int]]]:
    """The source with docstrings blanked (line numbers kept) and (first sentence, def line)
    of each public function that had one."""
    tree = ast.parse(source)
    lines = source.split("\n")
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                 ast.Module)):
            continue
        doc = ast.get_docstring(node, clean=True)
        if not doc:
            continue
        expr = node.body[0]
        indent = lines[expr.lineno - 1][:expr.col_offset]
        lines[expr.lineno - 1] = indent + "pass" if len(node.body) == 1 else ""
        for number in range(expr.lineno, expr.end_lineno):
            lines[number] = ""
        sentence = _first_sentence(doc)
        if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and not node.name.startswith("_") and len(sentence.split()) >= MIN_QUERY_WORDS):
            found.append((sentence, node.lineno))
    return "\n".join(lines), found


def build_corpus(root: Path, per_library: int) -> list[Case]:
    """Extract each library without docstrings under ``root``; sample query cases."""
    rng = random.Random(SEED)
    cases: list[Case] = []
    for name, (spec, package_dir) in LIBRARIES.items():
        with tarfile.open(fetch(spec)) as archive, tempfile.TemporaryDirectory() as tmp:
            archive.extractall(tmp, filter="data")
            top = next(Path(tmp).iterdir())
            library_cases = []
            for file in sorted((top / package_dir).rglob("*.py")):
                if "test" in file.name:
                    continue
                rel = f"{name}/{file.relative_to(top / package_dir).as_posix()}"
                stripped, found = strip_docstrings(file.read_text(encoding="utf-8"))
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text(stripped, encoding="utf-8")
                library_cases += [Case(q, rel, line) for q, line in found]
            cases += rng.sample(library_cases, min(per_library, len(library_cases)))
    return cases


def rank_of(hits, case: Case) -> int | None:
    for rank, hit in enumerate(hits, start=1):
        if hit.file_path == case.path and hit.start_line <= case.def_line <= hit.end_line:
            return rank
    return None


def evaluate(module: ContextModule, cases: list[Case], provider: str) -> dict[str, float]:
    ranks = []
    for case in cases:
        response = module.query(QueryRequest(case.query, k=max(CUTOFFS), max_tokens=NO_BUDGET,
                                             providers=(provider,)))
        ranks.append(rank_of(response.hits, case))
    n = len(cases)
    out = {f"R@{c}": sum(1 for r in ranks if r and r <= c) / n for c in CUTOFFS}
    out["MRR"] = sum(1 / r for r in ranks if r) / n
    return out


def golden_pass_rates() -> dict[str, float]:
    sys.path.insert(0, str(HERE.parent / "tests"))
    from golden import make_golden_copy
    from test_golden_queries import GOLDEN_QUERIES, golden_hit

    with tempfile.TemporaryDirectory() as tmp:
        module = ContextModule.open(str(make_golden_copy(Path(tmp) / "golden")))
        try:
            rates = {}
            for provider in PROVIDERS + ("git_history",):
                passed = sum(golden_hit(module.query(QueryRequest(
                    q, k=8, providers=(provider,))).hits, path, label)
                    for q, path, label in GOLDEN_QUERIES)
                rates[provider] = passed / len(GOLDEN_QUERIES)
        finally:
            module.shutdown()
    return rates


def score_table(root: Path, cases: list[Case], providers: tuple[str, ...], label: str
                ) -> None:
    """Index ``root`` (as its context.toml says) and print one row per provider."""
    module = ContextModule.open(str(root))
    try:
        chunks = module.store.stats()["total_chunks"]
        print(f"{label}: {chunks} chunks, {len(cases)} queries (docstring first sentences)")
        print(f"{'provider':<12}" + "".join(f"{m:>8}" for m in
                                          [f"R@{c}" for c in CUTOFFS] + ["MRR"]))
        for provider in providers:
            scores = evaluate(module, cases, provider)
            print(f"{provider:<12}" + "".join(f"{v:>8.3f}" for v in scores.values()),
                  flush=True)
    finally:
        module.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-library", type=int, default=80)
    parser.add_argument("--backends", nargs="*", choices=sorted(BACKENDS), default=[],
                        help="also score the vector providers with each of these backends")
    args = parser.parse_args()
    if "torch-fp32" in args.backends:
        try:
            require_extra("the torch-fp32 reference", "torch", "torch", "sentence_transformers")
        except ContextdError as exc:
            parser.exit(1, f"{exc}\n")
    root = CACHE / "retrieval_corpus"
    for number, backend in enumerate([DEFAULT_BACKEND] + args.backends):
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        cases = build_corpus(root, args.per_library)
        kind, quantize = BACKENDS[backend]
        (root / "context.toml").write_text(
            f'[embedding]\nbackend = "{kind}"\nquantize = "{quantize}"\n'
            f"[query]\nmax_budget_tokens = {NO_BUDGET}\n",  # ranking is scored, not the cut
            encoding="utf-8")
        score_table(root, cases, PROVIDERS if number == 0 else VECTOR_PROVIDERS,
                    f"{', '.join(LIBRARIES)} without docstrings, embedder {backend}")
    rates = golden_pass_rates()
    print("golden queries, pass rate (top 3): "
          + ", ".join(f"{p} {r:.0%}" for p, r in rates.items()))


if __name__ == "__main__":
    main()
