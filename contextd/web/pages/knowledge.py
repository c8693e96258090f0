"""Knowledge: the named contexts of documents and, for the one chosen, its documents."""

from __future__ import annotations

from urllib.parse import quote

from contextd.web.layout import esc, table

PATH = "/knowledge"
TITLE = "Knowledge"


async def body(request, ctx) -> str:
    listing = await ctx.call("knowledge_list_contexts")
    contexts = table(["context", "description", "documents", "chunks", "size (KB)", "updated"], [
        (f'<a href="/knowledge?context={quote(c.name)}">{esc(c.name)}</a>', esc(c.description),
         f"{c.documents:,}", f"{c.chunks:,}", f"{c.size_bytes / 1024:,.0f}", esc(c.updated_at))
        for c in listing.contexts], raw=True, table_id="contexts")
    chosen = request.query_params.get("context")
    if not chosen:
        return (f"{contexts}<p class=muted>Add documents with <code>contextd kb add PATH "
                f"--context NAME</code> or the knowledge_add tool.</p>")
    detail = await ctx.call("knowledge_show_context", chosen)
    documents = table(["document", "format", "pages", "chunks", "contexts", "updated"], [
        (d.document, d.format, d.pages, d.chunks, ", ".join(d.contexts), d.updated_at)
        for d in detail.documents], table_id="documents")
    return f"{contexts}<h2>Documents of {esc(detail.context.name)}</h2>{documents}"
