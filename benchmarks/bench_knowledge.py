"""Knowledge base figures: add throughput, scoped vs cross-context query latency, and context
create/list latency.

1. Add throughput (pages/s and MB/s) of PDFs (made with fpdf2) and Markdown files, whose text
   is real prose: the docstrings of the Python standard library. Measured with the embedding
   of the new chunks (the real model) and without it, each run on a fresh database, so no
   vector comes from the cache.
2. Query p50/p95 through ContextModule.query (hybrid, k=12, MMR, the real query embedding)
   with 100 contexts holding >= 50k document chunks: scoped to one context vs across every
   context. The documents' chunks are real text (standard-library source cut by the real
   chunkers) written through the store's kb_write_documents, with random unit vectors
   inserted directly (embedding 50k chunks would take ~6 minutes here), as in bench_query.
3. Context create and list latency (100 contexts).

    .venv/bin/python benchmarks/bench_knowledge.py [--pdfs 12] [--chunks 50000] [--queries 40]
"""

from __future__ import annotations

import argparse
import ast
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench_query import QUERIES, source_files
from contextd.chunkers.chunking import chunk_file
from contextd.config.sections import ContextConfig
from contextd.embedders.registry import get_embedder
from contextd.knowledge.scope import knowledge_request
from contextd.knowledge.service import KnowledgeBase
from contextd import ContextModule
from contextd.config.project import Project
from contextd.store.base import KNOWLEDGE_PREFIX, DocumentRecord, FileRecord, IndexedChunk
from contextd.store.duckdb import DuckDBStore
from contextd.store.rows import text_hash

CONTEXTS = 100
CHUNKS_PER_DOCUMENT = 50


def prose(limit_chars: int) -> list[str]:
    """Paragraphs of real English: docstrings of standard-library modules."""
    out, total = [], 0
    for file in source_files():
        try:
            tree = ast.parse(file.read_text(encoding="utf-8", errors="replace"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)):
                doc = ast.get_docstring(node)
                if doc and len(doc) > 200:
                    text = doc.encode("latin-1", "replace").decode("latin-1")
                    out.append(text)
                    total += len(text)
                    if total >= limit_chars:
                        return out
    return out


def make_documents(folder: Path, pdfs: int, pages: int) -> tuple[Path, Path, int]:
    """``pdfs`` PDFs of ``pages`` pages and as many Markdown files with the same text."""
    from fpdf import FPDF

    paragraphs = prose(pdfs * pages * 2500)
    pdf_dir, md_dir = folder / "pdf", folder / "md"
    pdf_dir.mkdir(parents=True)
    md_dir.mkdir(parents=True)
    cursor = 0
    for number in range(pdfs):
        pdf = FPDF()
        pdf.set_font("Helvetica", size=10)
        sections = []
        for _ in range(pages):
            pdf.add_page()
            text = "\n\n".join(paragraphs[cursor:cursor + 3])
            cursor = (cursor + 3) % max(1, len(paragraphs) - 3)
            pdf.multi_cell(0, 4, text, new_x="LMARGIN", new_y="NEXT")
            sections.append(text)
        pdf.output(str(pdf_dir / f"doc{number:03}.pdf"))
        (md_dir / f"doc{number:03}.md").write_text(
            "".join(f"## Section {i}\n\n{t}\n\n" for i, t in enumerate(sections)))
    return pdf_dir, md_dir, pdfs * pages


def add_throughput(workdir: Path, pdfs: int, pages: int) -> None:
    config = ContextConfig()
    pdf_dir, md_dir, total_pages = make_documents(workdir / "docs", pdfs, pages)
    sizes = {d: sum(f.stat().st_size for f in d.iterdir()) for d in (pdf_dir, md_dir)}
    for embed in (False, True):
        for folder, label in ((pdf_dir, "PDF"), (md_dir, "Markdown")):
            db = workdir / f"add_{label}_{embed}.duckdb"
            store = DuckDBStore(db)
            module = ContextModule(Project(root=workdir, config=config), store)
            if embed:
                module.pipeline.warm_up(wait=True)  # the model load is not the add's cost
            kb = KnowledgeBase(module.project, store,
                               module._embed_missing if embed else None, "bench")
            started = time.perf_counter()
            report = kb.add([str(folder)])
            seconds = time.perf_counter() - started
            module.shutdown()
            store.close()
            chunks = sum(d.chunks for d in report.documents)
            # The Markdown files hold the PDFs' text section for page: pages compare.
            print(f"add {label:<8} {'with' if embed else 'without':>7} embeddings: "
                  f"{report.added} files, {total_pages} pages, {chunks} chunks, "
                  f"{total_pages / seconds:6.1f} pages/s, {report.added / seconds:5.1f} files/s, "
                  f"{sizes[folder] / 2**20 / seconds:5.2f} MB/s ({seconds:.1f} s; "
                  f"{report.chunks_embedded} embedded)", flush=True)


def build_knowledge(db: Path, target: int, config: ContextConfig, identity: str,
                    dimension: int) -> tuple[int, dict[str, int]]:
    """Documents of real text chunks in 100 contexts (each in one, every tenth in a second),
    written per context in batches as a folder add writes them."""
    store = DuckDBStore(db)
    rng = np.random.default_rng(0)
    names = [f"context-{n:03}" for n in range(CONTEXTS)]
    for name in names:
        store.kb_create_context(name, name, "")
    total, number, per_context = 0, 0, dict.fromkeys(names, 0)
    groups: dict[str, list[DocumentRecord]] = {name: [] for name in names}
    second: dict[str, list[str]] = {name: [] for name in names}
    hashes: set[str] = set()
    for file in source_files():
        chunks = chunk_file(file.name, file.read_bytes(), config).chunks[:CHUNKS_PER_DOCUMENT]
        if len(chunks) < 5:
            continue
        path = f"{KNOWLEDGE_PREFIX}library/doc{number:05}.txt"
        home = names[number % CONTEXTS]
        record = FileRecord(path, 1, 0, text_hash(path), "text",
                            [IndexedChunk(c, c.text) for c in chunks])
        groups[home].append(DocumentRecord(record, f"/library/doc{number:05}.txt", "text"))
        per_context[home] += len(chunks)
        if number % 10 == 0:
            extra = names[(number * 7 + 3) % CONTEXTS]
            second[extra].append(path)
            per_context[extra] += len(chunks)
        hashes.update(text_hash(c.text) for c in chunks)
        total += len(chunks)
        number += 1
        if total >= target:
            break
    for name in names:
        for start in range(0, len(groups[name]), 32):
            store.kb_write_documents(groups[name][start:start + 32], [name])
    for name, paths in second.items():
        store.kb_link(paths, [name])
    ordered = sorted(hashes)
    vectors = rng.standard_normal((len(ordered), dimension)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store.put_embeddings(identity, ordered, vectors)
    store.close()
    return total, per_context


def percentiles(values: list[float]) -> tuple[float, float]:
    values = sorted(values)
    return statistics.median(values), values[max(0, int(round(0.95 * len(values))) - 1)]


def query_latency(workdir: Path, target: int, queries: int) -> None:
    config = ContextConfig()
    embedder = get_embedder(config.embedding)
    db = workdir / "knowledge.duckdb"
    started = time.perf_counter()
    total, per_context = build_knowledge(db, target, config, embedder.identity,
                                         embedder.dimension)
    print(f"{total} document chunks in {CONTEXTS} contexts (median "
          f"{statistics.median(per_context.values()):.0f} chunks per context), stored in "
          f"{time.perf_counter() - started:.0f} s", flush=True)
    store = DuckDBStore(db)
    module = ContextModule(Project(root=workdir, config=config), store)
    module.pipeline.warm_up(wait=True)
    module.query(knowledge_request(QUERIES[0], None, k=12))
    rng = random.Random(0)
    scoped, cross = [], []
    for i in range(queries):
        text = QUERIES[i % len(QUERIES)]
        for contexts, into in (([f"context-{rng.randrange(CONTEXTS):03}"], scoped),
                               (None, cross)):
            begin = time.perf_counter()
            module.query(knowledge_request(text, contexts, k=12))
            into.append((time.perf_counter() - begin) * 1000)
    for label, values in (("scoped (1 context)", scoped), ("cross-context (all)", cross)):
        p50, p95 = percentiles(values)
        print(f"query {label:<20}: p50 {p50:6.1f} ms, p95 {p95:6.1f} ms "
              f"(hybrid, k=12, MMR; {queries} queries)", flush=True)
    creates, lists = [], []
    for n in range(CONTEXTS):
        begin = time.perf_counter()
        module.knowledge_create_context(f"extra-{n:03}", "created by the benchmark")
        creates.append((time.perf_counter() - begin) * 1000)
    for _ in range(50):
        begin = time.perf_counter()
        listed = module.knowledge_list_contexts()
        lists.append((time.perf_counter() - begin) * 1000)
    for label, values in (("create", creates), (f"list ({len(listed.contexts)} contexts)",
                                                 lists)):
        p50, p95 = percentiles(values)
        print(f"context {label:<23}: p50 {p50:6.2f} ms, p95 {p95:6.2f} ms", flush=True)
    module.shutdown()
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pdfs", type=int, default=12, help="PDFs (and Markdown files) added")
    parser.add_argument("--pages", type=int, default=10, help="pages per PDF")
    parser.add_argument("--chunks", type=int, default=50_000, help="document chunks stored")
    parser.add_argument("--queries", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        add_throughput(Path(tmp), args.pdfs, args.pages)
        query_latency(Path(tmp), args.chunks, args.queries)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
