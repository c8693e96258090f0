"""Overview: what the index holds and who serves it."""

from __future__ import annotations

from contextd.web.layout import cards, table

PATH = "/"
TITLE = "Overview"


async def body(request, ctx) -> str:
    stats = await ctx.call("stats")
    storage = stats.get("storage", {})
    embeddings = sum((storage.get("embeddings_by_model") or {}).values())
    owner = stats.get("owner") or {}
    indexing = stats.get("indexing") or {}
    figures = cards([
        ("files", storage.get("total_files")), ("chunks", storage.get("total_chunks")),
        ("embedded chunks", embeddings), ("store size (MB)", storage.get("db_size_mb")),
        ("errors / skips", storage.get("errors")),
        ("secrets redacted", storage.get("secrets_redacted"))])
    providers = table(["provider", "type", "enabled", "ready", "note"], [
        (p.get("id"), p.get("type"), p.get("enabled"), p.get("available"), p.get("pending"))
        for p in stats.get("providers", [])], table_id="providers")
    languages = table(["language", "chunks"], sorted(
        (stats.get("languages") or {}).items(), key=lambda item: -item[1]), table_id="languages")
    models = table(["embedding model", "vectors"],
                   (storage.get("embeddings_by_model") or {}).items())
    facts = table(["", ""], [
        ("project", ctx.project), ("indexing", indexing.get("text")),
        ("state", indexing.get("state")),
        ("embeddings pending", indexing.get("embeddings_pending")),
        ("last indexed", storage.get("last_indexed")),
        ("owner process", (f"pid {owner.get('pid')}" if owner.get("pid")
                           else "none (each process opens the shared store itself)")
         + (" (this manager)" if owner.get("this_process") else "")),
    ], table_id="facts")
    return (f"{figures}{facts}<h2>Providers</h2>{providers}<h2>Languages</h2>{languages}"
            f"<h2>Embeddings</h2>{models}")

