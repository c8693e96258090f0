"""The block of instructions that tells an agent when to call contextd's tools, kept between
markers in the file the agent reads (CLAUDE.md, AGENTS.md, GEMINI.md, a Cursor rule, ...), so
a second install replaces it and uninstall takes out exactly it."""

from __future__ import annotations

BEGIN = "<!-- contextd:begin (written by `contextd install`; `contextd uninstall` removes it) -->"
END = "<!-- contextd:end -->"

BODY = """\
## contextd: this project's context engine (MCP server `contextd`)

- To find where or how something is done, call `query_context` with a plain-language question
  before grepping or opening whole files: it returns the few ranked snippets (file, lines,
  code) that answer it, cut to a token budget.
- Use grep for an exact string you already know; use `query_context` for everything else.
- After editing files, call `refresh_context` so later answers see the change.
- `get_context_stats` says whether the index is ready and what it holds.
"""

BLOCK = f"{BEGIN}\n{BODY}{END}\n"


def _span(text: str) -> tuple[int, int] | None:
    start = text.find(BEGIN)
    end = text.find(END, start + 1) if start >= 0 else -1
    if start < 0 or end < 0:
        return None
    end += len(END)
    return start, end + 1 if text[end:end + 1] == "\n" else end


def with_block(text: str | None, header: str = "") -> str:
    """The file with the block: in place of an older one, else appended after a blank line;
    a new file starts with ``header``."""
    if not text:
        return header + BLOCK
    span = _span(text)
    if span is not None:
        return text[:span[0]] + BLOCK + text[span[1]:]
    if not text.endswith("\n"):
        text += "\n"
    return text + "\n" + BLOCK


def without_block(text: str, header: str = "") -> str | None:
    """The file without the block and the blank line put before it; None when nothing but
    ``header`` would be left (the file was contextd's alone)."""
    span = _span(text)
    if span is None:
        return text
    before, after = text[:span[0]], text[span[1]:]
    if before.endswith("\n\n") and not after:
        before = before[:-1]
    rest = before + after
    return None if rest.strip() in ("", header.strip()) else rest
