"""BM25 scores equal the reference rank_bm25.BM25Okapi on real text (the standard library's
own sources), also after documents are removed and added back incrementally."""

from __future__ import annotations

import inspect
import json
import textwrap

import pytest
from rank_bm25 import BM25Okapi

from contextd.providers.fulltext import BM25Index, code_tokens


def _corpus() -> list[list[str]]:
    docs = []
    for module in (json, textwrap, inspect):
        source = inspect.getsource(module)
        docs += [code_tokens(block) for block in source.split("\n\n") if code_tokens(block)]
    return docs[:600]


QUERIES = ["parse json string decoder", "wrap text width", "getsource of a function",
           "indent dedent lines", "signature parameters default", "JSONDecodeError"]


def _assert_same(index: BM25Index, ids: list[str], corpus: list[list[str]]) -> None:
    reference = BM25Okapi(corpus)
    for query in QUERIES:
        tokens = code_tokens(query)
        expected = reference.get_scores(tokens)
        ours = index.scores(tokens)
        assert [ours[i] for i in ids] == pytest.approx(list(expected), rel=1e-9, abs=1e-9)


def test_scores_match_rank_bm25():
    corpus = _corpus()
    index = BM25Index()
    ids = [str(i) for i in range(len(corpus))]
    for doc_id, tokens in zip(ids, corpus):
        index.add(doc_id, tokens)
    _assert_same(index, ids, corpus)


def test_incremental_updates_match_a_fresh_reference():
    corpus = _corpus()
    index = BM25Index()
    ids = [str(i) for i in range(len(corpus))]
    for doc_id, tokens in zip(ids, corpus):
        index.add(doc_id, tokens)
    removed = set(ids[::3])
    for doc_id in removed:
        index.remove(doc_id)
    index.add("new", code_tokens("def fresh_wrapper(text, width): return wrap(text, width)"))
    kept = [i for i in ids if i not in removed] + ["new"]
    docs = [corpus[int(i)] for i in kept[:-1]] + [
        code_tokens("def fresh_wrapper(text, width): return wrap(text, width)")]
    _assert_same(index, kept, docs)


def test_code_aware_tokens_keep_identifier_and_parts():
    tokens = code_tokens("parseHTTPResponse max_retries")
    assert "parsehttpresponse" in tokens and {"pars", "http", "respons"} <= set(tokens)
    assert "max_retries" in tokens and "retry" in tokens


def test_frozen_index_with_changes_saved_and_loaded_matches_a_fresh_reference(tmp_path):
    """The array form (built in one pass, persisted, loaded) scores as rank_bm25 does, also
    with documents removed from the arrays and added to the delta, and after a freeze."""
    corpus = _corpus()
    ids = [str(i) for i in range(len(corpus))]
    index = BM25Index.build(zip(ids, corpus))
    assert index.frozen_count == len(ids) and index.delta_count == 0
    _assert_same(index, ids, corpus)
    removed = set(ids[::3])
    for doc_id in removed:
        index.remove(doc_id)
    fresh = code_tokens("def fresh_wrapper(text, width): return wrap(text, width)")
    index.add("new", fresh)
    kept = [i for i in ids if i not in removed] + ["new"]
    docs = [corpus[int(i)] for i in kept[:-1]] + [fresh]
    _assert_same(index, kept, docs)
    incremental = BM25Index()
    for doc_id, tokens in zip(kept, docs):
        incremental.add(doc_id, tokens)
    query = code_tokens("wrap text width json")
    assert index.coverage(query, kept) == pytest.approx(incremental.coverage(query, kept))
    index.freeze()
    assert index.delta_count == 0 and index.frozen_count == len(kept)
    _assert_same(index, kept, docs)
    index.save(tmp_path / "bm25.npz", {}, {"generation": 7})
    loaded, meta, _arrays = BM25Index.load(tmp_path / "bm25.npz")
    assert meta["generation"] == 7 and len(loaded) == len(kept)
    _assert_same(loaded, kept, docs)


def test_term_count_is_safe_while_another_thread_adds_documents():
    """``stats`` reads the term count without the index lock (it must not wait for a
    bootstrap's sync), while the indexer adds documents on its thread: counting must not
    fail with "dictionary changed size during iteration" (issue 40: `contextd --json stats`
    exited 1 during a bootstrap)."""
    import threading

    index = BM25Index()
    for n in range(2000):
        index.add(f"seed{n}", [f"seed{n}", "common"])
    added = 20_000

    def writer() -> None:
        for n in range(added):
            index.add(f"doc{n}", [f"term{n}_{k}" for k in range(5)])

    thread = threading.Thread(target=writer)
    thread.start()
    counts = []
    while thread.is_alive():
        counts.append(index.term_count())
    thread.join()
    assert counts == sorted(counts)
    assert index.term_count() == 2001 + 5 * added


def test_code_tokens_read_identifiers_and_numbers_as_the_alternation_does():
    """Tokens come from runs of identifier characters (issue 37: faster than matching the
    identifier/number alternation); a run's leading digits must still be a number of their
    own and the rest an identifier, exactly as the alternation split the text."""
    import re

    from contextd.providers.fulltext import _identifier_tokens

    alternation = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")
    source = textwrap.dedent(inspect.getsource(BM25Index)) + (
        "\nraise HTTP404NotFound(2fa_code, 404NotFound, 0x1F, __init__, v2, 12_34, é9ab)\n")
    expected = [t for word in alternation.findall(source) for t in _identifier_tokens(word)]
    assert code_tokens(source) == expected
    assert code_tokens("404NotFound 2fa") == ["404", *_identifier_tokens("NotFound"), "fa"]


def test_a_build_counted_in_several_batches_scores_as_the_reference(monkeypatch):
    """build counts its documents a batch at a time (issue 37): batches that end mid-corpus,
    and an empty last batch, change no score, and each term's slots stay in order."""
    import contextd.providers.fulltext as fulltext

    corpus = _corpus()[:98]  # 14 batches of 7, the last one then empty
    ids = [str(i) for i in range(len(corpus))]
    monkeypatch.setattr(fulltext, "BUILD_BATCH_DOCS", 7)
    index = BM25Index.build(zip(ids, corpus))
    assert index.frozen_count == len(ids)
    _assert_same(index, ids, corpus)
    rows = zip(index.indptr[:-1], index.indptr[1:])
    assert all((index.frozen_slots[a:b][1:] > index.frozen_slots[a:b][:-1]).all()
               for a, b in rows)


def _synthetic_documents(count: int, terms_each: int, vocabulary: int = 20_000
                         ) -> list[tuple[str, list[str]]]:
    """``count`` documents of ``terms_each`` distinct terms drawn from a fixed vocabulary (a
    seeded generator: the same documents every run), each held twice by its document."""
    import random

    rng = random.Random(37)
    words = [f"w{n}" for n in range(vocabulary)]
    return [(f"d{n}", rng.sample(words, terms_each) * 2) for n in range(count)]


def test_the_delta_holds_its_postings_in_arrays_not_dictionaries():
    """After a far ``git checkout`` most documents are re-added to the delta (wagtail: 25k
    documents, 1.4M postings). Held as per-term dictionaries they took ~57 bytes a posting
    (78 MB there, issue 37); the delta's log takes 12, with the documents' own ids and
    slots beside them."""
    import tracemalloc

    documents = _synthetic_documents(4000, 60)
    index = BM25Index.build(documents[:100])
    tracemalloc.start()
    try:
        for doc_id, tokens in documents[100:]:
            index.add(doc_id, tokens)
        held, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    postings = 3900 * 60
    assert index.delta_count == 3900
    assert held / postings < 30, f"{held / postings:.1f} bytes per delta posting"


def test_rewriting_one_document_again_and_again_does_not_grow_the_delta():
    """A file re-written many times (an agent editing it) re-adds the same few documents,
    never enough for a fold: a block of the delta's log whose documents were all removed is
    handed back."""
    import tracemalloc

    from contextd.providers.fulltext import LOG_BLOCK_ENTRIES

    documents = _synthetic_documents(200, 200)
    index = BM25Index.build(documents)
    doc_id, tokens = documents[7]
    index.add(doc_id, tokens)
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for _ in range(2000):  # 400k postings written in all: 4.8 MB, 6 blocks
            index.add(doc_id, tokens)
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    block = LOG_BLOCK_ENTRIES * 12
    assert after - before < 2 * block, f"the delta grew by {(after - before) / 1024:.0f} KB"
    assert index.df(tokens[0]) >= 1 and index.holds(tokens[0], index.slot_of[doc_id])
    reference = BM25Index.build(documents)
    query = [tokens[0], tokens[1], "w5"]
    assert index.scores(query) == pytest.approx(reference.scores(query), rel=1e-12)


def test_a_fold_in_pieces_scores_as_the_reference_and_holds_one_piece_of_scratch(monkeypatch):
    """The fold writes the new arrays a piece of terms at a time (issue 37: sorting every
    posting at once took +61 MB beside the index on wagtail after a far checkout): with
    pieces of a few postings the folded index still scores as rank_bm25, every row's slots
    ascend, terms no document holds any more are dropped, and the fold's peak beside the
    index is about the new arrays (8 bytes a posting), not a sort of all of them (32)."""
    import tracemalloc

    import contextd.providers.fulltext as fulltext

    corpus = _corpus()
    ids = [str(i) for i in range(len(corpus))]
    index = BM25Index.build(zip(ids, corpus))
    removed = set(ids[::3])
    for doc_id in removed:
        index.remove(doc_id)
    for doc_id in ids[1::3]:  # re-added: their postings move to the delta
        index.add(doc_id, corpus[int(doc_id)])
    index.add("gone", ["only_in_a_removed_document"])
    index.remove("gone")
    monkeypatch.setattr(fulltext, "FOLD_PIECE_POSTINGS", 37)
    index.fold()
    assert index.delta_count == 0 and "only_in_a_removed_document" not in index.terms
    kept = [i for i in ids if i not in removed]
    _assert_same(index, kept, [corpus[int(i)] for i in kept])
    assert all((index.frozen_slots[a:b][1:] > index.frozen_slots[a:b][:-1]).all()
               for a, b in zip(index.indptr[:-1], index.indptr[1:]))

    monkeypatch.setattr(fulltext, "FOLD_PIECE_POSTINGS", 16_384)
    documents = _synthetic_documents(4000, 60)  # 240k postings
    large = BM25Index.build(documents)
    for doc_id, tokens in documents[::2]:  # half of them re-written: in the delta
        large.add(doc_id, tokens)
    postings = len(large.frozen_slots)
    tracemalloc.start()
    try:
        large.fold()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak / postings < 24, f"the fold's peak: {peak / postings:.1f} bytes a posting"
