"""Agent memory thresholds calibrated on the embedding model: how similar a paraphrased
question is to the segment that answers it, versus to segments that do not.

Seed 001 proposes min_similarity 0.7; with all-MiniLM-L6-v2 a traceback and a question about
it score far lower (FACTS.md: 0.175-0.61), so a 0.7 cut-off hides almost every right answer.
This benchmark measures, with the real model, three distributions of cosine similarity:

* paraphrase: each of the 40 questions of benchmarks/stash_eval/segments.json against the one
  segment that answers it (each segment embedded in pieces, as the stash does);
* same project, other segment: the question against the 103 segments that do not answer it
  (same shop, same vocabulary: the hard negatives);
* terse: short agent questions against the raw artefact they are about (TERSE below);
* unrelated: every question against texts of other domains (UNRELATED below).

It prints each distribution's percentiles and, per candidate cut-off, the share of each that
passes. ``[stash] min_similarity`` (contextd/config/sections.py) is the largest cut-off that
keeps at least KEEP_PARAPHRASES of the paraphrases, rounded down to 0.05; ranking (similarity,
age, recency) then orders what passes.

    .venv/bin/python benchmarks/bench_memory_thresholds.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from contextd.config.sections import EmbeddingConfig
from contextd.embedders.registry import get_embedder
from contextd.stash.pieces import piece_budget, split_pieces

DATA = Path(__file__).resolve().parent / "stash_eval" / "segments.json"
KEEP_PARAPHRASES = 0.95
CUTOFFS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7)
PERCENTILES = (0, 5, 25, 50, 75, 95, 100)
# Terse questions an agent asks about raw artefacts it stashed (a log, a traceback, a diff):
# further from their answer than the curated questions above (FACTS.md's 0.175 came from
# the README's own three-word traceback).
TERSE = (
    ("checkout crash for a missing discount tier",
     "Traceback ... KeyError: 'platinum'"),
    ("why did checkout crash",
     "Traceback (most recent call last):\n  File \"app/checkout.py\", line 52, in submit\n"
     "    total = pricing.total(cart, customer.tier)\n  File \"app/pricing.py\", line 41, "
     "in total\n    rate = DISCOUNTS[tier]\nKeyError: 'platinum'"),
    ("the login timeout",
     "2026-11-02 10:14:03 ERROR auth.session: upstream idp did not answer within 30s; "
     "returning 504 to /login (request id 8f2c)"),
    ("what broke the nightly build",
     "npm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree\n"
     "npm ERR! peer react@\"^17\" from react-beautiful-dnd@13.1.1"),
    ("memory leak in the worker",
     "worker-3 rss 512MB -> 1.9GB over 6h; heap snapshot: 1.2M retained ImageCache entries, "
     "never evicted since the LRU bound was removed in a4f9e1"),
    ("why we picked postgres",
     "Decision: keep PostgreSQL over MongoDB for orders. Reasons: multi-row transactions for "
     "refunds, existing pg expertise, JSONB covers the flexible attributes."),
    ("flaky test",
     "FAILED tests/test_sync.py::test_retry_backoff - AssertionError: assert 3 == 4 "
     "(passes on rerun; depends on wall-clock sleep of 0.1s)"),
    ("the slow query",
     "EXPLAIN ANALYZE: Seq Scan on orders (cost=0.00..48211.00) filter customer_id = 42; "
     "3.8 s; no index on orders.customer_id"),
    ("disk full on the db host",
     "pg_wal: could not write to file \"pg_wal/xlogtemp.1234\": No space left on device"),
    ("rate limit from the payment provider",
     "stripe.error.RateLimitError: Request rate limit exceeded (429) on POST /v1/charges; "
     "retry-after 2s"),
    ("cors problem on the dashboard",
     "Access to fetch at 'https://api.shop.test/v2/stats' from origin "
     "'https://dash.shop.test' has been blocked by CORS policy: No "
     "'Access-Control-Allow-Origin' header"),
    ("the null pointer in invoices",
     "java.lang.NullPointerException: Cannot invoke \"Customer.getVatId()\" because "
     "\"customer\" is null\n\tat billing.InvoiceRenderer.header(InvoiceRenderer.java:77)"),
)
UNRELATED = (
    "Preheat the oven to 180 degrees and butter a round cake tin before folding in the flour.",
    "The river flooded the lower fields after three days of heavy rain in the valley.",
    "Our hiking group meets at the trailhead at seven; bring water and a rain jacket.",
    "The string quartet played Schubert's Death and the Maiden to a full hall.",
    "Tomatoes need six to eight hours of direct sun and deep watering twice a week.",
    "The midfielder scored twice in the second half to win the derby.",
    "Renew your passport at least six months before the expiry date printed inside.",
    "The museum's new wing shows Impressionist landscapes on loan from Paris.",
    "Knit two, purl two for the ribbing, then switch to stockinette stitch for the body.",
    "The ferry to the island leaves every hour from the north pier in summer.",
    "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen.",
    "She practised the cello scales slowly with a metronome every morning.",
    "The bakery on the corner sells sourdough until noon on Saturdays.",
    "Migrating geese fly in a V formation to save energy on long journeys.",
    "The chess opening sacrifices a pawn for rapid development and central control.",
    "Mount Everest's summit is 8,849 metres above sea level.",
    "Dear committee, please find attached the minutes of the annual garden show.",
    "The novel follows three sisters returning to their childhood home by the sea.",
    "Remember to defrost the freezer and wipe the seals with warm soapy water.",
    "The telescope revealed Saturn's rings and four of its moons on a clear night.",
)


def segment_vectors(embedder, texts: list[str], budget: int) -> list[np.ndarray]:
    """Per text, the vectors of its pieces (the stash scores a segment by its best piece)."""
    return [embedder.embed(split_pieces(text, budget)) for text in texts]


def best_piece(query: np.ndarray, pieces: np.ndarray) -> float:
    return float((pieces @ query).max())


def describe(name: str, values: list[float]) -> None:
    cells = "  ".join(f"p{p}={np.percentile(values, p):.3f}" for p in PERCENTILES)
    print(f"{name:<28} n={len(values):<5} {cells}")


def main() -> None:
    config = EmbeddingConfig()
    embedder = get_embedder(config)
    data = json.loads(DATA.read_text())
    keys = [s["key"] for s in data["segments"]]
    budget = piece_budget(config.max_seq_length)
    segments = segment_vectors(embedder, [s["text"] for s in data["segments"]], budget)
    unrelated = embedder.embed(list(UNRELATED))
    paraphrase, others, foreign = [], [], []
    for item in data["queries"]:
        query = embedder.embed_query(item["query"])
        for key, pieces in zip(keys, segments):
            (paraphrase if key == item["gold"] else others).append(best_piece(query, pieces))
        foreign.extend(float(v) for v in unrelated @ query)
    terse = []
    for question, artefact in TERSE:
        query = embedder.embed_query(question)
        terse.append(best_piece(query, segment_vectors(embedder, [artefact], budget)[0]))
        foreign.extend(float(v) for v in unrelated @ query)
    paraphrase_all = paraphrase + terse
    print(f"model {embedder.identity}; {len(data['queries'])} questions, "
          f"{len(keys)} segments, {len(TERSE)} terse pairs, {len(UNRELATED)} unrelated texts")
    describe("paraphrase (the answer)", paraphrase)
    describe("terse question, raw artefact", terse)
    describe("same project, not the answer", others)
    describe("unrelated text", foreign)
    print(f"\n{'cut-off':>8} {'paraphrases kept':>17} {'same-project pass':>18} "
          f"{'unrelated pass':>15}")
    chosen = CUTOFFS[0]
    for cut in CUTOFFS:
        kept = np.mean(np.array(paraphrase_all) >= cut)
        if kept >= KEEP_PARAPHRASES:
            chosen = cut
        print(f"{cut:>8.2f} {kept:>17.1%} {np.mean(np.array(others) >= cut):>18.1%} "
              f"{np.mean(np.array(foreign) >= cut):>15.1%}")
    print(f"\nlargest cut-off keeping >= {KEEP_PARAPHRASES:.0%} of paraphrases: {chosen:.2f}")


if __name__ == "__main__":
    main()
