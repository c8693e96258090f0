"""A provider's share of source chunks (contextd.providers.source_share) keeps the order it
is given: translations and near-copies moved behind stay behind. Real catalog rows and the
real translation groups of a fastapi-like docs tree."""

from __future__ import annotations

from contextd.providers.source_share import with_source_share
from contextd.query.duplicates import TranslationGroups, own_language_first
from contextd.store.base import ChunkRow


def _row(path: str, language: str) -> ChunkRow:
    return ChunkRow(chunk_id=path, file_id=0, file_path=path, ordinal=0, kind="code",
                    label="", language=language, start_line=1, end_line=1, tokens=10,
                    text="", index_text="", embed_hash="", parent="")


def test_translations_moved_behind_stay_behind_when_source_chunks_are_added():
    """fastapi's "how are the operation ids of the OpenAPI operations generated": BM25
    scored the Hindi and Ukrainian pages above the English one; the provider moves them
    behind, then adds source chunks up to its share. It used to sort the answer by score
    again, which put the translations back in front, and the code that generates the ids
    out of the fused candidates. The source chunk added goes before the first hit that
    scores less than it."""
    pages = [f"docs/{lang}/docs/advanced/generate-clients.md" for lang in ("hi", "uk", "en")]
    source = ["fastapi/openapi/utils.py", "fastapi/utils.py"]
    rows = {p: _row(p, "markdown") for p in pages} | {p: _row(p, "python") for p in source}
    groups = TranslationGroups(pages)
    bm25 = [(pages[0], 9.0), (pages[1], 8.5), (pages[2], 8.0), (source[0], 3.0)]
    ordered = own_language_first(bm25, lambda hit: hit[0], groups,
                                 "how are the operation ids generated", 4)
    assert [cid for cid, _ in ordered] == [pages[2], source[0], pages[0], pages[1]]

    added = with_source_share(ordered, rows, 8, lambda n, seen: [(source[1], 5.0)][:n])
    assert [cid for cid, _ in added] == [pages[2], source[1], source[0], pages[0], pages[1]]
