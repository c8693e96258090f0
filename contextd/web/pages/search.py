"""Search: the one query path with its scope filters; hits with the matching words marked,
which providers found them, and the ``<project_context>`` block an agent would get."""

from __future__ import annotations

import re

from contextd.query.records import QueryRequest
from contextd.records import ContextScope
from contextd.query.render import context_from_response, render_context
from contextd.web.layout import esc, int_param

PATH = "/search"
TITLE = "Search"

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")


async def body(request, ctx) -> str:
    params = request.query_params
    text = params.get("q", "").strip()
    k = int_param(params.get("k"), 10, 1, 100)
    budget = int_param(params.get("budget"), 2000, 50, 32000)
    form = (f'<form method="get" action="/search" id="search-form">'
            f'<input name="q" size="60" value="{esc(text)}" placeholder="where are tokens '
            f'validated" autofocus> '
            f'<input name="lang" size="10" value="{esc(params.get("lang", ""))}" '
            f'placeholder="language"> '
            f'<input name="kind" size="14" value="{esc(params.get("kind", ""))}" '
            f'placeholder="chunk kind"> '
            f'<input name="path" size="14" value="{esc(params.get("path", ""))}" '
            f'placeholder="path prefix"> '
            f'k <input name="k" size="3" value="{k}"> budget <input name="budget" size="5" '
            f'value="{budget}"> <button>Search</button></form>')
    if not text:
        return form
    scope = ContextScope(paths=_list(params.get("path")), languages=_list(params.get("lang")),
                         kinds=_list(params.get("kind")))
    response = await ctx.call("query", QueryRequest(text, k=k, scope=scope, max_tokens=budget))
    notes = "".join(f'<p class="muted">{esc(note)}</p>' for note in response.notes)
    hits = "".join(_hit(hit, text) for hit in response.hits) or \
        '<p class="muted">No hits.</p>'
    block = render_context(context_from_response(response))
    return (f'{form}<p id="hit-count">{len(response.hits)} hits, '
            f'{response.total_tokens:,} tokens</p>{notes}<div id="hits">{hits}</div>'
            f"<h2>&lt;project_context&gt; for {budget:,} tokens</h2>"
            f'<pre id="context-block">{esc(block)}</pre>')


def _hit(hit, query: str) -> str:
    return (f'<div class="hit"><h2><code class="hit-path">{esc(hit.file_path)}</code>:'
            f"{hit.start_line}-{hit.end_line} <span class=muted>{esc(hit.label)} · "
            f"{esc(hit.kind)} · score {hit.score:.2f} · "
            f'{esc(", ".join(hit.providers))}</span></h2>'
            f"<pre>{highlight(hit.snippet, query)}</pre></div>")


def highlight(snippet: str, query: str) -> str:
    """The snippet, escaped, with the query's words (3+ characters, any case) marked."""
    words = {w.lower() for w in _WORD.findall(query)}
    if not words:
        return esc(snippet)
    pattern = re.compile("|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)),
                         re.IGNORECASE)
    out, last = [], 0
    for match in pattern.finditer(snippet):
        out.append(esc(snippet[last:match.start()]))
        out.append(f"<mark>{esc(match.group(0))}</mark>")
        last = match.end()
    out.append(esc(snippet[last:]))
    return "".join(out)


def _list(raw: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (raw or "").split(",") if part.strip())
