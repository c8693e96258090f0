"""Sessions: the kept results of search_knowledge, newest first."""

from __future__ import annotations

from contextd.web.layout import table

PATH = "/sessions"
TITLE = "Sessions"


async def body(request, ctx) -> str:
    listing = await ctx.call("list_search_results")
    rows = [(s.session_id, s.query, s.result_count, s.created_at, s.expires_at or "never")
            for s in listing.sessions]
    return (f'<p class="muted">The newest {listing.max_sessions:,} sessions are kept; '
            f"get_search_results returns a session's full chunks.</p>"
            + table(["session", "query", "results", "made", "expires"], rows,
                    table_id="sessions"))
