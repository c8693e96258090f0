"""Code related to one place of the project: its near-copies and the code that calls alike.

``contextd related src/x.py:40`` (and the MCP tool ``find_related``) start from the chunk
that holds that line, the function or class an agent is looking at, and rank the other code
chunks of its language by three likenesses:

- **meaning**: the cosine of the vectors the index already holds for both chunks (no text
  is embedded again; a chunk without a vector yet is ranked on the other two);
- **shape**: how alike the two token sequences are once every name, number and string is
  replaced by a placeholder and only keywords and punctuation stay. A copy whose variables
  and function were renamed has the shape of its original, which neither the words (BM25) nor
  a text embedding sees fully;
- **calls**: the share of called names the two have in common (Jaccard): code that calls the
  same helpers in the same way, e.g. another handler of the same kind.

The shape is first estimated from sets of token 4-grams for every candidate, then measured
exactly (``difflib``) for the best :data:`SHAPE_EXACT` only, so a project of 50,000 chunks
costs one pass over the texts, not 50,000 sequence alignments.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from contextd.errors import UsageError

if TYPE_CHECKING:
    import numpy as np

# Weights of the three likenesses in the score (a missing one, such as meaning before the
# vectors exist, leaves the others' weights to share the score).
WEIGHTS = {"meaning": 0.4, "shape": 0.45, "calls": 0.15}
# A shape this alike makes a near-copy; calls this alike make "calls alike".
NEAR_COPY_SHAPE = 0.85
CALLS_ALIKE = 0.5
# Candidates whose shape is measured exactly, after the 4-gram estimate.
SHAPE_EXACT = 200
SHINGLE = 4
DEFAULT_K = 10
# Lines of each hit's text in the answer (its location says where the rest is).
SNIPPET_LINES = 12
CODE_KINDS = frozenset({"CODE_FUNCTION", "CODE_CLASS", "CODE_BLOCK"})

# Words that keep their place in a shape: the keywords that give code its structure in the
# languages contextd chunks (a name in one language that is a keyword in another costs a
# little precision, never a match).
KEYWORDS = frozenset("""
    and as assert async await break case catch class const continue def defer del do elif else
    except export extends finally fn for from func function go if impl import in interface is
    lambda let match new nil none not null or pass raise return self static struct super switch
    this throw try type var while with yield true false True False None
""".split())

TOKEN = re.compile(r"""[A-Za-z_][A-Za-z0-9_]*|\d[\d_.xXa-fA-F]*|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|\S""")
CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")


@dataclass(frozen=True)
class RelatedHit:
    """One chunk like the target: where it is, the score and each likeness (meaning is None
    when one of the two has no vector yet), and why it is listed."""

    file_path: str
    start_line: int
    end_line: int
    label: str
    kind: str
    score: float
    shape: float
    calls: float
    meaning: float | None
    why: str
    snippet: str


@dataclass(frozen=True)
class RelatedResult:
    """What ``contextd related`` answers: the chunk found at the location, then its likes."""

    file_path: str
    line: int
    target_label: str
    target_lines: tuple[int, int]
    hits: tuple[RelatedHit, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Candidate:
    """A chunk as the ranking reads it (from the catalog's rows)."""

    chunk_id: str
    file_path: str
    start_line: int
    end_line: int
    label: str
    kind: str
    language: str
    text: str


def shape_tokens(text: str) -> list[str]:
    """The text's tokens with every name, number and string replaced by a placeholder."""
    shaped = []
    for token in TOKEN.findall(text):
        first = token[0]
        if first.isalpha() or first == "_":
            shaped.append(token if token in KEYWORDS else "v")
        elif first.isdigit():
            shaped.append("0")
        elif first in "\"'" and len(token) > 1:
            shaped.append("s")
        else:
            shaped.append(token)
    return shaped


def called_names(text: str) -> frozenset[str]:
    """Names followed by an opening parenthesis, keywords and the chunk's own name (its
    definition) left out."""
    names = [name for name in CALL.findall(text) if name not in KEYWORDS]
    own = defined_name(text)
    return frozenset(name for name in names if name != own)


def defined_name(text: str) -> str | None:
    """The name a definition chunk defines (``def total(``, ``function total(``,
    ``func (r *T) Total(``): the first called-looking name after a defining keyword."""
    match = re.search(r"\b(?:def|function|func|fn|class|struct|interface)\b[^(\n]*?"
                      r"([A-Za-z_][A-Za-z0-9_]*)\s*[(<:{]", text)
    return match.group(1) if match else None


def chunk_at(rows: Sequence[Candidate], line: int) -> Candidate | None:
    """The smallest code chunk holding ``line`` (a method rather than its class), else the
    smallest chunk of any kind holding it."""
    holding = [row for row in rows if row.start_line <= line <= row.end_line]
    code = [row for row in holding if row.kind in CODE_KINDS] or holding
    return min(code, key=lambda row: row.end_line - row.start_line, default=None)


def _shingles(tokens: Sequence[str]) -> frozenset[tuple[str, ...]]:
    if len(tokens) < SHINGLE:
        return frozenset([tuple(tokens)])
    return frozenset(tuple(tokens[i:i + SHINGLE]) for i in range(len(tokens) - SHINGLE + 1))


def _jaccard(a: frozenset, b: frozenset) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def rank_related(target: Candidate, candidates: Iterable[Candidate],
                 vectors: Mapping[str, np.ndarray], k: int = DEFAULT_K) -> list[RelatedHit]:
    """The ``k`` candidates most like ``target``, best first. Candidates overlapping the
    target in its own file (its class, its own methods) are left out."""
    target_tokens = shape_tokens(target.text)
    target_shingles = _shingles(target_tokens)
    # Imported here: the operations declare this module's records, and a CLI command that
    # only asks the owner over its socket should not pay numpy's import.
    import numpy as np

    target_calls = called_names(target.text)
    target_vector = vectors.get(target.chunk_id)
    pool = []
    for cand in candidates:
        if cand.chunk_id == target.chunk_id or (
                cand.file_path == target.file_path and cand.start_line <= target.end_line
                and target.start_line <= cand.end_line):
            continue
        tokens = shape_tokens(cand.text)
        pool.append((_jaccard(target_shingles, _shingles(tokens)), cand, tokens))
    pool.sort(key=lambda entry: -entry[0])
    hits = []
    for rank, (estimate, cand, tokens) in enumerate(pool):
        shape = (difflib.SequenceMatcher(None, target_tokens, tokens, autojunk=False).ratio()
                 if rank < SHAPE_EXACT else estimate)
        calls = _jaccard(target_calls, called_names(cand.text))
        vector = vectors.get(cand.chunk_id)
        meaning = (None if target_vector is None or vector is None
                   else float(np.dot(target_vector, vector)
                              / ((np.linalg.norm(target_vector) * np.linalg.norm(vector))
                                 or 1.0)))
        parts = {"shape": shape, "calls": calls, "meaning": meaning}
        used = {name: WEIGHTS[name] for name, value in parts.items() if value is not None}
        score = sum(WEIGHTS[name] * max(0.0, parts[name] or 0.0) for name in used) / sum(
            used.values())
        why = ("near-copy" if shape >= NEAR_COPY_SHAPE
               else "calls alike" if calls >= CALLS_ALIKE else "similar")
        hits.append(RelatedHit(cand.file_path, cand.start_line, cand.end_line, cand.label,
                               cand.kind, round(score, 4), round(shape, 4), round(calls, 4),
                               None if meaning is None else round(meaning, 4), why,
                               "\n".join(cand.text.splitlines()[:SNIPPET_LINES])))
    hits.sort(key=lambda hit: (-hit.score, hit.file_path, hit.start_line))
    return hits[:k]


def related_in(catalog, vectors_of, path: str, line: int, k: int = DEFAULT_K,
               notes: Sequence[str] = ()) -> RelatedResult:
    """:func:`rank_related` over the index: ``catalog`` is the chunk catalog the providers
    share (:class:`contextd.providers.catalog.ChunkCatalog`), ``vectors_of(chunk_ids)`` the
    stored vectors of those chunks (empty before the model has loaded)."""
    file_id = catalog.file_paths().get(path)
    if file_id is None:
        raise UsageError(f"{path} is not indexed (contextd check-file {path} says why); "
                         "give a path relative to the project root")
    own = [_candidate(row) for row in catalog.chunks_for_files([file_id])]
    target = chunk_at(own, line)
    if target is None:
        last = max((row.end_line for row in own), default=0)
        raise UsageError(f"{path}:{line}: no indexed chunk holds that line (the file's chunks "
                         f"end at line {last})")
    # A function is compared with functions and classes; top-level statements (imports,
    # constants) only with their like.
    kinds = CODE_KINDS if target.kind == "CODE_BLOCK" else CODE_KINDS - {"CODE_BLOCK"}
    candidates = [_candidate(row) for row in catalog.iter_chunks()
                  if row.kind in kinds and row.language == target.language]
    vectors = vectors_of([target.chunk_id, *(c.chunk_id for c in candidates)])
    notes = list(notes)
    if target.chunk_id not in vectors:
        notes.append("meaning not compared: the target has no vector yet (the embedding "
                     "model is loading or its vectors are being computed)")
    hits = rank_related(target, candidates, vectors, k)
    return RelatedResult(path, line, target.label, (target.start_line, target.end_line),
                         tuple(hits), tuple(notes))


def _candidate(row) -> Candidate:
    return Candidate(row.chunk_id, row.file_path, row.start_line, row.end_line, row.label,
                     row.kind, row.language, row.text)
