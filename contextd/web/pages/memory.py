"""Memory: what agents stashed, newest first, filterable by session."""

from __future__ import annotations

from contextd.web.layout import esc, table

PATH = "/memory"
TITLE = "Memory"
PREVIEW_CHARS = 160


async def body(request, ctx) -> str:
    session = request.query_params.get("session", "")
    page = await ctx.call("list_stashed", session_id=session, all_sessions=not session,
                          limit=200)
    rows = [(s.segment_id, s.session_id, s.type, s.topic, s.tokens, s.stashed_at,
             s.expires_at or "never", "yes" if s.protected else "",
             s.text[:PREVIEW_CHARS] + ("…" if len(s.text) > PREVIEW_CHARS else ""))
            for s in page.segments]
    return (f'<form method="get" action="/memory"><input name="session" '
            f'value="{esc(session)}" placeholder="session id (empty: all)"> '
            f"<button>Show</button></form>"
            f'<p class="muted">{len(page.segments):,} of {page.total:,} segments.</p>'
            + table(["segment", "session", "type", "topic", "tokens", "stashed", "expires",
                     "protected", "text"], rows, table_id="segments"))
