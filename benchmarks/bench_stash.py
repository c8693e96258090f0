"""Agent memory (contextd.stash): retrieval quality and stash/retrieve latency.

Quality: benchmarks/stash_eval/segments.json, written for this benchmark: 104 realistic
segments of a made-up shop's engineering work (tracebacks, decisions, some superseded by
newer ones, research notes, code blocks, task state, messages) spread over two months, and
40 paraphrased queries, each with the one segment that answers it. Every segment is stashed
through StashService with the real model at its own time (injected clock); queries run "now".
Prints Recall@1/@5 with similarity only (weights 1/0/0) and with the combined score
(0.6/0.2/0.2, decays 30 and 7 days), both without a similarity cut-off, and how many golds
pass the default min_similarity.

Scale: 10k and 100k segments with SYNTHETIC random unit vectors inserted directly into the
store (embedding 100k texts would take most of an hour here); queries and the stashes timed
are real texts embedded by the real model. Prints stash and retrieve latency p50/p95, warm.

    .venv/bin/python benchmarks/bench_stash.py            # quality + 10k + 100k
    .venv/bin/python benchmarks/bench_stash.py --sizes 10000 --queries 100
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from contextd.runtime.engine import Engine
from contextd.config.project import Project
from contextd.stash.model import RetrieveRequest, SegmentInput, StashRequest
from contextd.store.base import SegmentRow
from contextd.store.rows import text_hash

DATA = Path(__file__).resolve().parent / "stash_eval" / "segments.json"
NOW = datetime(2026, 11, 23, 12, 0)
TYPES = ("message", "code_block", "error_log", "decision", "research", "debug_output")


class Clock:
    def __init__(self, value: datetime):
        self.value = value

    def __call__(self) -> datetime:
        return self.value


def open_engine(root: Path, **stash) -> tuple[Engine, Clock]:
    project = Project.open(root)
    config = dataclasses.replace(project.config,
                                 stash=dataclasses.replace(project.config.stash, **stash))
    engine = Engine(Project(project.root, config))
    clock = Clock(NOW)
    engine.module.stash.now = clock
    return engine, clock


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


# ----- quality ------------------------------------------------------------------------------
def quality(workdir: Path) -> None:
    data = json.loads(DATA.read_text())
    engine, clock = open_engine(workdir / "quality")
    service = engine.module.stash
    ids = {}
    for item in sorted(data["segments"], key=lambda s: -s["stashed_days_ago"]):
        clock.value = NOW - timedelta(days=item["stashed_days_ago"])
        created = NOW - timedelta(days=item["created_days_ago"])
        result = engine.stash(StashRequest((SegmentInput(
            text=item["text"], type=item["type"], topic=item["topic"], session_id="eval",
            timestamp=created.isoformat()),)))
        ids[item["key"]] = result.segment_ids[0]
    clock.value = NOW
    default_cutoff = service.settings.min_similarity
    print(f"stash eval: {len(data['segments'])} segments, {len(data['queries'])} paraphrased "
          "queries (benchmarks/stash_eval/segments.json)")
    for label, weights in (("similarity only", (1.0, 0.0, 0.0)),
                           ("combined 0.6/0.2/0.2", (0.6, 0.2, 0.2)),
                           ("combined 0.8/0.1/0.1", (0.8, 0.1, 0.1))):
        service.settings = dataclasses.replace(service.settings, similarity_weight=weights[0],
                                               age_weight=weights[1],
                                               recency_weight=weights[2])
        at1 = at5 = above = 0
        for query in data["queries"]:
            found = engine.retrieve_stashed(RetrieveRequest(
                query=query["query"], session_id="eval", top_k=5, min_similarity=-1.0,
                max_hops=0, max_tokens=100_000))
            ranked = [s.segment_id for s in found.segments]
            gold = ids[query["gold"]]
            at1 += ranked[:1] == [gold]
            at5 += gold in ranked
            above += any(s.segment_id == gold and s.similarity >= default_cutoff
                         for s in found.segments)
        n = len(data["queries"])
        print(f"  {label:<22} Recall@1 {at1 / n:6.1%}   Recall@5 {at5 / n:6.1%}")
    print(f"  golds at or above min_similarity {default_cutoff}: {above}/{n} "
          "(the seed's default cut-off; paraphrases mostly score 0.4-0.7 with MiniLM)")
    engine.close()


# ----- scale --------------------------------------------------------------------------------
def fill(engine: Engine, count: int, seed: int = 7) -> None:
    """``count`` segments with random unit vectors, written straight through the store."""
    rng = np.random.default_rng(seed)
    model = engine.module.embedder.wait(120)
    store = engine.store
    batch = 20_000
    for start in range(0, count, batch):
        size = min(batch, count - start)
        vectors = rng.standard_normal((size, model.dimension)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        rows = []
        for i in range(start, start + size):
            text = f"synthetic segment {i}: note {rng.integers(1_000_000)}"
            stashed = NOW - timedelta(days=float(rng.uniform(0, 60)))
            rows.append(SegmentRow(
                segment_id=f"syn-{i}", session_id=f"session-{i % 20}", text=text,
                segment_type=TYPES[i % len(TYPES)], created_at=stashed - timedelta(hours=1),
                stashed_at=stashed, tokens=12, topic=f"topic-{i % 50}", source=None,
                references=(), text_hash=text_hash(text), embedding_model=model.identity,
                expires_at=None, protected=False))
        with store.batch():
            store.put_embeddings(model.identity, [r.text_hash for r in rows], vectors)
            store.put_segments(rows)


QUERIES = ["why did checkout crash for the platinum tier", "database pool exhausted",
           "where do we keep sessions", "invoice numbering per tenant",
           "flaky upload test", "deploy window rules", "JWT expired clock skew",
           "thumbnail memory for big TIFF files", "bank TLS certificate", "API versioning"]


def scale(workdir: Path, count: int, queries: int, stashes: int) -> None:
    engine, _ = open_engine(workdir / f"scale-{count}", max_segments=count + 10 * stashes)
    started = time.perf_counter()
    fill(engine, count)
    filled = time.perf_counter()
    service = engine.module.stash
    service.index()
    built = time.perf_counter()
    print(f"{count:>7} segments: insert {filled - started:.1f} s, index load "
          f"{built - filled:.2f} s (synthetic random vectors, written directly)")
    for label, cutoff, session in (("default cut-off 0.7, one session", None, "session-3"),
                                   ("no cut-off, all sessions (worst case)", -1.0, None)):
        for text in QUERIES:  # warm: the model's first calls
            engine.retrieve_stashed(RetrieveRequest(query=text, all_sessions=True))
        times, search = [], []
        for number in range(queries):
            text = f"{QUERIES[number % len(QUERIES)]} {number}"  # a new text: embedded
            tick = time.perf_counter()
            found = engine.retrieve_stashed(RetrieveRequest(
                query=text, min_similarity=cutoff, session_id=session or "default",
                all_sessions=session is None))
            times.append((time.perf_counter() - tick) * 1000)
            search.append(found.timings_ms["search"])
        print(f"  retrieve, {label:<38} p50 {statistics.median(times):6.2f} ms   "
              f"p95 {percentile(times, 0.95):6.2f} ms   (n={queries}; of which ranking "
              f"p50 {statistics.median(search):.2f} / p95 {percentile(search, 0.95):.2f} ms, "
              "the rest embeds the query)")
    times = []
    for number in range(stashes):
        tick = time.perf_counter()
        engine.stash(StashRequest((SegmentInput(
            text=f"Timed stash {number}: {random.choice(QUERIES)} — measured at {count}",
            type="research", session_id="timed"),)))
        times.append((time.perf_counter() - tick) * 1000)
    print(f"  stash one segment (embed + one transaction + index)  p50 "
          f"{statistics.median(times):6.2f} ms   p95 {percentile(times, 0.95):6.2f} ms   "
          f"(n={stashes})")
    engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--stashes", type=int, default=50)
    parser.add_argument("--skip-quality", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-stash-") as tmp:
        workdir = Path(tmp)
        for name in ["quality"] + [f"scale-{n}" for n in args.sizes]:
            (workdir / name).mkdir()
        if not args.skip_quality:
            quality(workdir)
        for count in args.sizes:
            scale(workdir, count, args.queries, args.stashes)


if __name__ == "__main__":
    main()
