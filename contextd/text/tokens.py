"""A fast, conservative estimate of how many tokens the embedding model will see.

Chunk caps, budgets and rendering all need token counts many thousands of times per second;
running the real WordPiece tokenizer for each would cost more than chunking itself. The
estimate is a linear model over counts that C-level string functions give cheaply:

- punctuation characters (BERT's basic tokenizer makes each one a token; ``_`` included),
- words (runs of letters and digits) and their total length (long identifiers split into
  several word pieces),
- digits (numbers split into short pieces),
- wide characters (CJK and other characters above U+2E80 become one token each).

The coefficients were fitted against the all-MiniLM-L6-v2 tokenizer on windows of real code
and prose (standard library, site-packages, C headers, Markdown) and then scaled up by 20% so
the estimate errs high: an underestimate would let a chunk overflow the model's window and be
cut, an overestimate only makes chunks a little smaller. ``benchmarks/bench_chunkers.py
--calibrate`` re-measures the ratio on real chunks.
"""

from __future__ import annotations

import re

_WORD_RE = re.compile(r"[^\W_]+")
_WIDE_RE = re.compile(r"[\u2e80-\uffff]")
_DIGITS = "0123456789"

# Fitted weights (least squares), each multiplied by the 1.2 safety factor.
PUNCT_WEIGHT = 1.37
WORD_WEIGHT = 0.36
WORD_CHAR_WEIGHT = 0.216
DIGIT_WEIGHT = 0.564


def estimate_tokens(text: str) -> int:
    """Estimated WordPiece tokens of ``text`` for all-MiniLM-L6-v2, special tokens excluded.

    Errs high (about 20% on average; real tokens exceed it for ~3% of code chunks, rarely by
    more than 10%). Additive over whitespace-separated pieces up to rounding, so the sum of
    the estimates of a text's lines is close to the estimate of the text.
    """
    if not text:
        return 0
    words = _WORD_RE.findall(text)
    word_chars = sum(map(len, words))
    blank = text.count(" ") + text.count("\n") + text.count("\t") + text.count("\r")
    digits = sum(map(text.count, _DIGITS))
    wide = 0 if text.isascii() else len(_WIDE_RE.findall(text))
    return combine_counts(len(text) - blank - word_chars, len(words), word_chars, digits, wide)


def combine_counts(punct: int, words: int, word_chars: int, digits: int, wide: int) -> int:
    """The estimate from its counts: the one formula behind ``estimate_tokens`` and the
    per-span counts that ``contextd.chunkers.core.Source`` keeps for non-ASCII files."""
    estimate = (PUNCT_WEIGHT * punct + WORD_WEIGHT * words
                + WORD_CHAR_WEIGHT * word_chars + DIGIT_WEIGHT * digits)
    if wide:
        estimate += wide
    return int(estimate) + 1
