"""Errors: files that failed or were skipped while indexing, filterable, with a retry."""

from __future__ import annotations

from contextd.web.layout import esc, table

PATH = "/errors"
TITLE = "Errors"

SCRIPT = """
async function retry(path){
  const r = await post('/api/errors/retry', {path});
  if(r.ok) setTimeout(()=>location.reload(), 800);
}
"""


async def body(request, ctx) -> str:
    wanted_type = request.query_params.get("type", "")
    text = request.query_params.get("q", "").lower()
    errors = await ctx.call("errors", limit=1000)
    types = sorted({e["error_type"] for e in errors})
    shown = [e for e in errors if (not wanted_type or e["error_type"] == wanted_type)
             and (not text or text in e["file_path"].lower()
                  or text in (e["error_message"] or "").lower())]
    options = "".join(f'<option value="{esc(t)}"{" selected" if t == wanted_type else ""}>'
                      f"{esc(t)}</option>" for t in types)
    rows = [(f"<code>{esc(e['file_path'])}</code>", esc(e["error_type"]),
             esc(e["error_message"] or ""), esc(str(e.get("occurred_at") or "")),
             esc(str(e.get("retry_count") or 0)),
             f'<button class="retry" data-path="{esc(e["file_path"])}" '
             f'onclick="retry(this.dataset.path)">Retry</button>') for e in shown]
    return (f'<form method="get" action="/errors" id="error-filter">'
            f'<select name="type"><option value="">every kind</option>{options}</select> '
            f'<input name="q" value="{esc(text)}" placeholder="path or message contains"> '
            f"<button>Filter</button></form>"
            f'<p class="muted">{len(shown):,} of {len(errors):,} shown.</p>'
            + table(["file", "kind", "reason", "when", "retries", ""], rows, raw=True,
                    table_id="errors"))
