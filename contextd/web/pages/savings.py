"""Savings: tokens served against the whole files they came from, per
day and per task; how often each provider contributes and its mean score; the embedding
cache's hit rate; latency percentiles."""

from __future__ import annotations

from contextd.web.charts import grouped_bars, meter
from contextd.web.layout import cards, esc, table

PATH = "/savings"
TITLE = "Savings"


async def body(request, ctx) -> str:
    days = 30
    data = await ctx.call("savings", days=days)
    served, source = data.tokens_served, data.source_tokens
    saved = 1 - served / source if source else None
    latency = data.latency_ms
    cache = data.embedding_cache
    figures = cards([
        ("queries", data.queries), ("tokens served", served),
        ("tokens of the whole files", source),
        ("saved", f"{saved:.0%}" if saved is not None else None),
        ("p50 ms", latency["p50"]), ("p95 ms", latency["p95"]), ("p99 ms", latency["p99"]),
        ("embedding cache hits", f"{cache['hit_rate']:.0%}" if cache["hit_rate"] is not None
         else None)])
    per_day = data.per_day
    chart = grouped_bars([d["day"] for d in per_day], {
        "tokens served": [d["tokens_served"] for d in per_day],
        "whole-file tokens": [d["source_tokens"] for d in per_day]},
        title=f"Tokens per day, last {days} days")
    tasks = table(["task", "queries", "tokens served", "whole-file tokens", "saved"], [
        (t["task_id"], t["queries"], t["tokens_served"], t["source_tokens"],
         f"{1 - t['tokens_served'] / t['source_tokens']:.0%}" if t["source_tokens"] else "–")
        for t in data.per_task], table_id="tasks")
    providers = table(["provider", "answers it contributed to", "selection rate",
                       "mean score"], [
        (esc(p["provider"]), f'{p["selected"]:,}', meter(p["selection_rate"]),
         f'{p["avg_score"]:.2f}' if p["avg_score"] is not None else "–")
        for p in data.providers], raw=True, table_id="providers")
    return (f'{figures}<div id="per-day">{chart}</div><h2>Per task</h2>{tasks}'
            f"<h2>Providers</h2>{providers}"
            f'<p class="muted">Embedding cache: {cache["reused"]:,} chunk texts reused, '
            f'{cache["embedded"]:,} embedded in recent indexing runs.</p>')
