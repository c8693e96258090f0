"""A share of a provider's candidates kept for source files.

On a project whose prose outnumbers its code ten to one (fastapi's documentation and
examples, most of them translated), the words and the meaning of a question match the pages
about a feature better than the code that implements it: with every vector computed, the
semantic provider's candidates for "how are dependencies with yield cleaned up" were all
pages. The ranking's file-role factors (``[ranking] implementation_*``) can only put source
first if some source reaches it, so the full-text and semantic providers keep at least
:data:`SOURCE_SHARE` of their candidates for source chunks when the index has them.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from contextd.boundary.roles import FileRole, file_role

SOURCE_SHARE = 0.25

Hit = tuple[str, float]


def is_source(rows: Mapping[str, object], chunk_id: str) -> bool:
    """Whether a chunk (its catalog entry in ``rows``) is in a source file."""
    row = rows.get(chunk_id)
    return row is not None and file_role(row.file_path, row.language) is FileRole.SOURCE


def with_source_share(hits: Sequence[Hit], rows: Mapping[str, object], limit: int,
                      more: Callable[[int, set[str]], list[Hit]]) -> list[Hit]:
    """``hits`` (best first) holding at least SOURCE_SHARE of ``limit`` source chunks:
    ``more(n, seen)`` gives the provider's best ``n`` source chunks not in ``seen``.

    The source chunks take the places of the last others: the answer stays within
    ``limit``, where a hybrid cuts its fused list, so source chunks appended past it would
    never be seen. The hits keep their order, which need not be their scores' (translations
    the query did not ask for and near-copies are moved behind:
    :func:`contextd.query.duplicates.own_language_first`, ``copies_last``); each source
    chunk added goes before the first hit scoring less. Sorting them all by score put
    fastapi's Hindi and Ukrainian pages about operation ids back in front of the English
    one and of the code that generates the ids (issue 36)."""
    wanted = int(SOURCE_SHARE * limit)
    held = sum(1 for cid, _ in hits if is_source(rows, cid))
    if held >= wanted:
        return list(hits)
    added = more(wanted - held, {cid for cid, _ in hits})
    others = [cid for cid, _ in hits if not is_source(rows, cid)]
    overflow = max(0, len(hits) + len(added) - limit)
    dropped = set(others[len(others) - overflow:]) if overflow else set()
    merged = [hit for hit in hits if hit[0] not in dropped]
    for hit in sorted(added, key=lambda h: -h[1]):
        at = next((i for i, kept in enumerate(merged) if kept[1] < hit[1]), len(merged))
        merged.insert(at, hit)
    return merged
