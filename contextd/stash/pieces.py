"""A long segment is embedded in pieces (segments may hold up to 1 MB).

The embedding model reads its first ``max_seq_length`` tokens (256 for all-MiniLM-L6-v2) and
ignores the rest, so a 40 kB log embedded whole is found only by what its first lines say.
A segment longer than one window is therefore cut into windows of whole lines (a line longer
than a window by words); the segment's own vector (keyed by its text hash) covers
the first window and each further piece gets a vector of its own. Retrieval scores a segment
by its best piece (:meth:`contextd.stash.index.StashIndex.similarities`), so a question about
the end of a traceback finds it.
"""

from __future__ import annotations

from contextd.text.tokens import estimate_tokens

# Tokens of the model window not given to text: [CLS] and [SEP], plus a margin because the
# estimate can be a little short on unusual text.
WINDOW_MARGIN = 16
# Texts shorter than this many characters fit one window for certain (the estimate gives at
# least one token per 5 characters of the densest prose), so they are never measured.
SHORT_CHARS = 600


def piece_budget(max_seq_length: int) -> int:
    """Estimated tokens of text one piece may hold for a model reading ``max_seq_length``."""
    return max(16, max_seq_length - WINDOW_MARGIN)


def split_pieces(text: str, budget: int) -> list[str]:
    """``text`` as consecutive pieces of at most ``budget`` estimated tokens (whole lines
    where they fit, else words); one piece when it fits a window."""
    if len(text) < SHORT_CHARS or estimate_tokens(text) <= budget:
        return [text]
    pieces: list[str] = []
    current: list[str] = []
    spent = 0
    for line in _units(text, budget):
        cost = estimate_tokens(line) + 1
        if current and spent + cost > budget:
            pieces.append("\n".join(current))
            current, spent = [], 0
        current.append(line)
        spent += cost
    if current:
        pieces.append("\n".join(current))
    return [p for p in pieces if p.strip()] or [text]


def _units(text: str, budget: int):
    """The lines of ``text``, a line over ``budget`` cut into runs of words that fit."""
    for line in text.split("\n"):
        if estimate_tokens(line) <= budget:
            yield line
            continue
        run: list[str] = []
        spent = 0
        for word in line.split(" "):
            cost = estimate_tokens(word) + 1
            if run and spent + cost > budget:
                yield " ".join(run)
                run, spent = [], 0
            run.append(word)
            spent += cost
        if run:
            yield " ".join(run)


def extra_pieces(text: str, budget: int) -> list[str]:
    """The pieces after the first: those the segment's own vector does not cover."""
    return split_pieces(text, budget)[1:]
