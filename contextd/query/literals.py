"""Rare literals: a chunk holding the query's rare identifier or quoted string verbatim ranks
above every chunk that does not.

Fusion ranks by agreement between providers. In a 200-file project holding 20 similar tokens
the one chunk containing ``zqtok61x7229008`` was ranked 1st by full text, 21st by semantic
search (an embedding sees twenty look-alikes), and 14th once fused; the answer then said "no
strong match". An identifier that only one or two chunks hold is the strongest evidence a
query can give, so it decides the order, and the fused score only orders the rest.

A *literal* of a query is what a person writes when pasting from code or a log:

- a quoted string (``"Value added tax"``, ```retry_after```), matched as written;
- a word mixing letters and digits, at least LITERAL_MIN_LENGTH long (an id, a hash, an error
  code: ``zqtok61x7229008``, ``E1103``), matched case-insensitively as a whole word;
- a name written as code (``snake_case``, ``camelCase``, ``Dotted.name``), matched as written
  as a whole word.

A chunk that *defines* a rare name holds it too, however it spells it (``CheckoutCreate``,
``checkout_create`` for ``checkoutCreate``): an API's public name is often written in one case
by callers, tests and commit messages and defined in another, and without this saleor's test
files, whose GraphQL strings write the mutation's name, were lifted above the class to change.

A literal counts only when it is *rare among the candidates*: held by at most
RARE_MAX_CHUNKS of them and by at most RARE_SHARE of them. A name most candidates share
(``send`` in a query about ``Session.send``) tells them apart no better than the fused score,
and lifting its holders would undo what the other ranking signals decided.

Only a literal distinctive by its form *lifts*: a string in double or single quotes (pasted),
an id-like word, and a name whose spelling only code has (``snake_case``, ``camelCase``,
``Dotted.name``), quoted in backticks or not. A plain word in backticks (```True```,
```reversed```, ```Sequence```) or a backtick run's leftover between two quotes (`` or ``)
names what a question is about, not a string to find: the chunks that happen to spell it are
rarely the answer. Those still reach the symbol provider, the definition boosts and the scan
of unread files (``Literal.lifts`` is false for them). Lifting them, together with a lexical
floor given to every chunk (:mod:`contextd.query.semantic_adds`), took the hybrid's MRR@10 on
three libraries' docstring questions (``bench_retrieval.py``) from 0.601 to 0.547; with both
narrowed it is 0.592. Lifting no names at all (0.598) cost change requests that name
``App.manifest_url`` or ``attributeUpdate`` (saleor's skip-0 window, R@1 63.2 -> 57.9).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Callable, Sequence

from contextd.records import ContextSnippet

LITERAL_MIN_LENGTH = 5
# A literal held by more candidates than this (or than this share of them) is not rare.
RARE_MAX_CHUNKS = 5
RARE_SHARE = 0.2
# metadata key of a lifted candidate: the share of the query's rare literals it holds
# (calibration counts it as direct evidence).
LITERAL_KEY = "rare_literals"
_WORD_RE = re.compile(r"[A-Za-z0-9_]+")
# A spelling only code has: a case change inside a word, an underscore joined to a word, two
# names joined by a dot.
_CODE_FORM_RE = re.compile(r"[a-z0-9][A-Z]|\w_|_\w|\w{2}\.[A-Za-z_]\w")
# A plain name as code writes it: what a definition's label can spell.
_NAME_RE = re.compile(r"[A-Za-z_$][\w$]*")
# Two capitals in a row beside a lower-case letter: an acronym inside a word, as product
# names spell them (PromQL, GraphQL, OAuth2); a constant's capitals (EXPORT_COMPLETED) are not.
_ACRONYM_RE = re.compile(r"(?<=[a-z])[A-Z]{2}|[A-Z]{2}(?=[a-z])")


@dataclasses.dataclass(frozen=True)
class Literal:
    """One literal: its text, whether it is matched case-insensitively and whether holding
    it lifts a chunk above those that do not (see the module docstring)."""

    text: str
    fold_case: bool
    lifts: bool = True

    def defined_by(self, label: str) -> bool:
        """Whether a chunk labelled ``label`` defines the name this literal writes, spelt
        in any case, with or without underscores (``checkoutCreate`` -> the class
        ``CheckoutCreate`` or a method ``Mutations.checkout_create``). Only a plain name
        spelt as code is defined anywhere; a quoted string or an id is not. A dotted name
        (``Checkout.safe_update``) is not either: a change request writes the methods it
        calls that way, and lifting their definitions put saleor's ``checkout/models.py``
        before the file that changed. Nor is a plain word (a quoted ``'metric'`` lifted
        prometheus's TypeScript ``Metric`` types) or a name with an acronym (``PromQL``,
        ``GraphQL``: a language's name in prose, which lifted the UI's ``promQL`` methods)."""
        if not (self.lifts and not self.fold_case and label and _NAME_RE.fullmatch(self.text)
                and _CODE_FORM_RE.search(self.text) and not _ACRONYM_RE.search(self.text)):
            return False
        return _squashed(label.rsplit(".", 1)[-1]) == _squashed(self.text)

    def held_by(self, text: str) -> bool:
        """Whether ``text`` holds the literal as a whole word (or, quoted, as written)."""
        haystack, needle = (text.lower(), self.text.lower()) if self.fold_case \
            else (text, self.text)
        start = haystack.find(needle)
        while start != -1:
            end = start + len(needle)
            before = haystack[start - 1] if start else " "
            after = haystack[end] if end < len(haystack) else " "
            if not _joins(before, needle[0]) and not _joins(after, needle[-1]):
                return True
            start = haystack.find(needle, start + 1)
        return False


def _squashed(name: str) -> str:
    return name.replace("_", "").lower()


def _joins(neighbour: str, edge: str) -> bool:
    """Whether ``neighbour`` continues a word that the literal's ``edge`` character ends."""
    return (edge.isalnum() or edge == "_") and (neighbour.isalnum() or neighbour == "_")


def query_literals(query: str, quoted: Sequence[str], symbols: Sequence[str]
                   ) -> tuple[Literal, ...]:
    """The literals a query writes (see the module docstring), each once."""
    found: dict[str, Literal] = {}
    for word in _WORD_RE.findall(query):
        if len(word) >= LITERAL_MIN_LENGTH and re.search(r"\d", word) \
                and re.search(r"[A-Za-z]", word):
            found.setdefault(word, Literal(word, fold_case=True))
    for text in quoted:
        if text.strip():
            pasted = f'"{text}"' in query or f"'{text}'" in query
            found.setdefault(text, Literal(text, fold_case=False,
                                           lifts=pasted or _code_form(text)))
    for name in symbols:
        found.setdefault(name, Literal(name, fold_case=False, lifts=_code_form(name)))
    return tuple(found.values())


def _code_form(text: str) -> bool:
    """Whether ``text`` is spelt as only code is (see _CODE_FORM_RE), without the spaces that
    a run between two backtick quotes starts or ends with."""
    return text == text.strip() and _CODE_FORM_RE.search(text) is not None


def lift_rare_literals(candidates: Sequence[ContextSnippet], literals: Sequence[Literal],
                       exempt: Callable[[str], bool] | None = None) -> list[ContextSnippet]:
    """The candidates, those holding more of the query's rare literals first (the order
    among equals kept), scores rescaled into [0, 1]; unchanged when no literal that lifts is
    rare. A chunk of a file that ``exempt`` names (a generated file, for a change request:
    :mod:`contextd.query.generated_files`) neither holds nor is lifted."""
    literals = [lit for lit in literals if lit.lifts]
    if not candidates or not literals:
        return list(candidates)
    held = [[False] * len(literals) if exempt is not None and exempt(c.file_path)
            else [lit.held_by(c.text) for lit in literals] for c in candidates]
    limit = min(RARE_MAX_CHUNKS, max(1, int(RARE_SHARE * len(candidates))))
    rare = [i for i in range(len(literals))
            if 0 < sum(row[i] for row in held) <= limit]
    if not rare:
        return list(candidates)
    # The definition of a rare name holds it too, however it spells it (Literal.defined_by):
    # otherwise the test whose GraphQL string writes `checkoutCreate` is lifted above the
    # class CheckoutCreate that a change to the mutation edits. Rarity is the text's alone:
    # a name no chunk writes lifts nothing (a message naming the mutations where an error
    # surfaced, `transactionProcess`, would lift them over the helper that changed).
    for row, candidate in zip(held, candidates):
        if not (exempt is not None and exempt(candidate.file_path)):
            for i in rare:
                row[i] = row[i] or literals[i].defined_by(candidate.label)
    top = max(c.score for c in candidates) or 1.0
    scored = []
    for snippet, row in zip(candidates, held):
        count = sum(1 for i in rare if row[i])
        if count:
            snippet = dataclasses.replace(
                snippet, metadata={**snippet.metadata, LITERAL_KEY: round(count / len(rare), 4)})
        scored.append((snippet, snippet.score + top * count))
    best = max(score for _, score in scored) or 1.0
    lifted = [dataclasses.replace(s, score=score / best) for s, score in scored]
    return sorted(lifted, key=lambda s: -s.score)
