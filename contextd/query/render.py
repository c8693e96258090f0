"""Rendering a TaskContext for a prompt: the ``<project_context>`` block or JSON.

Rules: snippets sorted by score and grouped by file (files in the order of their best
snippet), attributes escaped, a ``lang`` hint for code fences, the providers that found each
snippet as ``source``, overlapping snippets of one file already merged by the module, and —
when a token budget is given — snippets trimmed (whole lines) and dropped so the whole block,
tags included, fits.
"""

from __future__ import annotations

from typing import Any

from contextd.query.fusion import MIN_TRIMMED_TOKENS, trim_snippet
from contextd.records import ContextSnippet, TaskContext, to_dict
from contextd.text.languages import fence_for_language
from contextd.text.tokens import estimate_tokens

OPEN_TAG = "<project_context>"
CLOSE_TAG = "</project_context>"
_CLOSERS = ("</snippet", "</project_context")


def _attribute(value: str) -> str:
    """``value`` escaped for a double-quoted attribute, as xml.sax.saxutils.escape(value,
    {'"': "&quot;"}) does: that module imports urllib.request, http.client and the email
    parser into every first command (~0.05 s at load 8), for four replacements."""
    return (value.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")
            .replace('"', "&quot;"))


def _protect(text: str) -> str:
    """Snippet text as is, except a literal closing tag that would end the block early."""
    for closer in _CLOSERS:
        text = text.replace(closer, "<\\/" + closer[2:])
    return text


def ordered(snippets: tuple[ContextSnippet, ...] | list[ContextSnippet]
            ) -> list[ContextSnippet]:
    """Best first, grouped by file: a file's snippets follow its best one."""
    by_score = sorted(snippets, key=lambda s: (-s.score, s.file_path, s.start_line))
    files: dict[str, list[ContextSnippet]] = {}
    for snippet in by_score:
        files.setdefault(snippet.file_path, []).append(snippet)
    return [s for group in files.values() for s in group]


def _open_tag(snippet: ContextSnippet) -> str:
    attributes = {
        "path": snippet.file_path, "label": snippet.label, "kind": snippet.kind,
        "lines": f"{snippet.start_line}-{snippet.end_line}", "score": f"{snippet.score:.2f}",
        "lang": fence_for_language(snippet.language),
        "source": ",".join(snippet.providers),
        # The file changed since it was indexed: the lines are as on disk now, the label and
        # score those of the indexed version (contextd.query.on_disk).
        "stale": "true" if snippet.metadata.get("stale") else ""}
    text = " ".join(f'{key}="{_attribute(value)}"' for key, value in attributes.items()
                    if value)
    return f"  <snippet {text}>"


def render_context(context: TaskContext, max_tokens: int | None = None) -> str:
    """The ``<project_context>`` block; with ``max_tokens`` the block fits that budget."""
    used = estimate_tokens(OPEN_TAG) + estimate_tokens(CLOSE_TAG)
    parts = [OPEN_TAG]
    for snippet in ordered(context.snippets):
        head, tail = _open_tag(snippet), "  </snippet>"
        overhead = estimate_tokens(head) + estimate_tokens(tail)
        if max_tokens is not None:
            room = max_tokens - used - overhead
            if room < min(snippet.tokens, MIN_TRIMMED_TOKENS):
                continue
            trimmed = trim_snippet(snippet, room)
            if trimmed is None:
                continue
            if trimmed is not snippet:
                snippet = trimmed
                head = _open_tag(snippet)
                overhead = estimate_tokens(head) + estimate_tokens(tail)
        parts += [head, _protect(snippet.text.rstrip("\n")), tail]
        used += overhead + snippet.tokens
    parts.append(CLOSE_TAG)
    return "\n".join(parts)


def context_from_response(response: Any) -> TaskContext:
    """A TaskContext holding a QueryResponse's hits, to render it as a block."""
    snippets = tuple(ContextSnippet(
        chunk_id=h.chunk_id, score=h.score, file_path=h.file_path, label=h.label, kind=h.kind,
        text=h.snippet, language=h.language, start_line=h.start_line, end_line=h.end_line,
        tokens=h.tokens, providers=tuple(h.providers), metadata=dict(h.metadata))
        for h in response.hits)
    return TaskContext(task_id="", query=response.query, snippets=snippets,
                       total_tokens=response.total_tokens, providers=dict(response.providers),
                       timings_ms=dict(response.timings_ms), notes=tuple(response.notes))


def render_json(context: TaskContext) -> dict[str, Any]:
    """The JSON form: the TaskContext's fields with snippets in rendering order."""
    data = to_dict(context)
    data["snippets"] = [to_dict(s) for s in ordered(context.snippets)]
    return data


def skipped_text(counts: dict[str, int]) -> str:
    """One line: files left out of the index, by reason (``contextd stats``,
    get_context_stats)."""
    return ("skipped: " + ", ".join(f"{reason} {n}" for reason, n in counts.items())
            + " (contextd check-file PATH says why)")
