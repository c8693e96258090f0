"""Query understanding: per-provider queries from task descriptions, the named ranking boosts
and file aggregation, on real task texts and real snippet records."""

from __future__ import annotations

import pytest

from contextd.config.loading import config_from_dict
from contextd.config.sections import RankingConfig
from contextd.providers import ProviderQuery
from contextd.query.understanding import (
    aggregate_files, apply_boosts, boost_factor, dense_query, split_identifier, understand,
)
from contextd.query.intent import QueryIntent
from contextd.records import ContextSnippet, ProviderType

SETTINGS = RankingConfig()


def snippet(path: str, label: str, score: float, language: str = "python") -> ContextSnippet:
    return ContextSnippet(chunk_id=f"{path}:{label}", score=score, file_path=path, label=label,
                          kind="CODE_FUNCTION", text="...", language=language, start_line=1,
                          end_line=2, tokens=3)


def test_commit_style_task_becomes_three_queries():
    q = understand("Fix: retries ignore the Retry-After header when `max_retries` is set in "
                   "HTTPAdapter.send() (see #123) in src/requests/adapters.py", SETTINGS)
    assert q.dense.startswith("retries ignore the Retry-After header")
    assert "#123" not in q.dense and "Fix:" not in q.dense
    assert q.symbols[:2] == ("max_retries", "HTTPAdapter.send")
    assert q.files == ("src/requests/adapters.py",)
    assert q.quoted == ("max_retries",)
    lexical = q.lexical.split()
    for word in ("retries", "max_retries", "max", "http", "adapter", "send", "header"):
        assert word in lexical
    for stop in ("the", "when", "is", "in", "fix", "see"):
        assert stop not in lexical
    assert not q.about_tests


def test_identifiers_split_and_prose_words_are_not_symbols():
    assert split_identifier("RetryAfterParser.parse_value()") == \
        ["retry", "after", "parser", "parse", "value"]
    q = understand("The progress bar shows a wrong ETA", SETTINGS)
    assert q.symbols == () and "progress" in q.lexical and "eta" in q.lexical
    assert understand("`LRUCache`", SETTINGS).lexical.split() == ["lrucache", "lru", "cache"]
    assert dense_query("feat(cli)!: **Bold** support") == "Bold support"
    assert dense_query("Fix: send() drops headers (#42)") == "send() drops headers"


def test_each_provider_kind_gets_its_own_text():
    q = understand("Fix: `merge_cookies` drops cookies in sessions.py (#7)", SETTINGS)
    texts = q.texts_by_kind()
    assert texts[ProviderType.SEMANTIC] == q.dense == "merge_cookies drops cookies in sessions.py"
    assert texts[ProviderType.FULL_TEXT] == q.lexical
    assert texts[ProviderType.SYMBOL] == "merge_cookies sessions.py"
    assert texts[ProviderType.GIT_HISTORY] == q.dense
    prose = understand("the progress bar is slow", SETTINGS).texts_by_kind()
    assert prose[ProviderType.SYMBOL] == "progress bar slow"  # no names: the words
    assert understand("Fix: #12", SETTINGS).texts_by_kind() == {}  # nothing left: raw text


def test_provider_query_hands_each_kind_its_text():
    texts = {ProviderType.SEMANTIC: "dense", ProviderType.SYMBOL: "names"}
    query = ProviderQuery("raw", 10, 0.1, 3, texts)
    assert query.for_kind(ProviderType.SEMANTIC) == ProviderQuery("dense", 10, 0.1, 3, texts)
    assert query.for_kind(ProviderType.SYMBOL).text == "names"
    assert query.for_kind(ProviderType.HYBRID) is query  # passes the texts on unchanged
    assert query.for_kind(None) is query  # a duck-typed plugin without a type
    assert ProviderQuery("raw").for_kind(ProviderType.SEMANTIC).text == "raw"


def test_symbol_candidates_are_capped_by_config():
    settings = config_from_dict({"ranking": {"max_symbol_candidates": 2}}).ranking
    q = understand("rename foo_a, foo_b and foo_c", settings)
    assert q.symbols == ("foo_a", "foo_b")


def test_boosts_prefer_definitions_and_source_over_tests_and_vendored():
    q = understand("merge_cookies crashes on a plain dict", SETTINGS)
    definition = snippet("src/requests/cookies.py", "merge_cookies", 0.5)
    reference = snippet("src/requests/sessions.py", "Session.prepare_request", 0.5)
    in_tests = snippet("tests/test_requests.py", "test_merge", 0.5)
    vendored = snippet("src/_vendor/cookies.py", "helper", 0.3)
    assert boost_factor(definition, q, SETTINGS) == SETTINGS.definition_over_reference
    # "crashes" makes it a change request: tests lose both factors.
    assert boost_factor(in_tests, q, SETTINGS) == pytest.approx(
        SETTINGS.source_over_tests * SETTINGS.implementation_test_factor)
    assert boost_factor(vendored, q, SETTINGS) == SETTINGS.vendored_penalty
    ranked = apply_boosts([in_tests, vendored, reference, definition], q, SETTINGS)
    assert [s.label for s in ranked] == ["merge_cookies", "Session.prepare_request",
                                         "test_merge", "helper"]
    about_tests = understand("Add a test for merge_cookies", SETTINGS)
    assert boost_factor(in_tests, about_tests, SETTINGS) == 1.0


def test_a_lookup_lifts_the_definition_it_names_whole_above_methods_of_that_name():
    """saleor's lookup ``order_created``: the plugins' methods so named had a third
    provider's vote (git history) and outranked the function in ``order/actions.py``; an
    import block naming ``resolve_checkout_lines`` outranked its definition."""
    lookup = understand("order_created", SETTINGS)
    function = snippet("order/actions.py", "order_created", 0.6)
    method = snippet("plugins/webhook.py", "WebhookPlugin.order_created", 1.0)
    imports = snippet("graphql/schema.py", "imports", 0.9)
    ranked = apply_boosts([method, imports, function], lookup, SETTINGS)
    assert [s.file_path for s in ranked] == ["order/actions.py", "plugins/webhook.py",
                                             "graphql/schema.py"]
    assert boost_factor(method, lookup, SETTINGS) == pytest.approx(
        SETTINGS.definition_over_reference ** 0.5)
    dotted = understand("WebhookPlugin.order_created", SETTINGS)
    assert apply_boosts([function, method], dotted, SETTINGS)[0].file_path == \
        "plugins/webhook.py"


def test_tests_named_in_a_commit_body_leave_the_change_about_its_source():
    """saleor's checkoutCreate commit lists "Add tests for ..." in its body: its tests still
    step back; a title that names tests asks for them."""
    message = ("feat(checkout): make lines optional in checkoutCreate\n"
               "The `lines` input field is no longer required.\n"
               "- Add tests for omitted and explicitly empty `lines`")
    change = understand(message, SETTINGS)
    assert not change.about_tests and change.intent is QueryIntent.IMPLEMENTATION
    in_tests = snippet("tests/test_checkout_create.py", "test_lines", 0.5)
    assert boost_factor(in_tests, change, SETTINGS) < SETTINGS.source_over_tests
    assert understand("Add tests for omitted checkout lines", SETTINGS).about_tests
    assert understand("test_checkout_create is flaky", SETTINGS).about_tests


def test_file_aggregation_rewards_several_relevant_chunks():
    hits = aggregate_files([snippet("a.py", "x", 0.9), snippet("b.py", "y", 0.8),
                            snippet("b.py", "z", 0.7), snippet("b.py", "w", 0.1)], SETTINGS)
    assert [h.file_path for h in hits] == ["b.py", "a.py"]
    # b.py holds the largest mass of further chunks (each weighed by its relevance, its score
    # over the best candidate's 0.9): it steps forward by the whole coherence share.
    assert hits[0].score == pytest.approx(0.8 + SETTINGS.file_coherence_share * 0.9)
    assert [s.label for s in hits[0].snippets] == ["y", "z", "w"]


def test_weak_chunks_from_the_tail_do_not_outweigh_strong_ones():
    """Rank-fused scores are flat (a candidate from the tail keeps half the score of the
    first): a file with one good chunk and three weak ones must not beat the file holding
    two good ones (wagtail: api/v2/router.py over contrib/redirects/api.py for "Add
    redirects find endpoint in API v3")."""
    pool = [snippet("other.py", "best", 1.0),
            snippet("router.py", "get_model_endpoint", 0.78),
            snippet("api.py", "find_object", 0.72), snippet("api.py", "module code", 0.72),
            snippet("router.py", "register_endpoint", 0.46),
            snippet("router.py", "listing_urlpath", 0.42),
            snippet("router.py", "detail_urlpath", 0.42)]
    hits = aggregate_files(pool, SETTINGS)
    assert [h.file_path for h in hits][1:] == ["api.py", "router.py"]


def test_references_in_many_chunks_do_not_outrank_the_definition():
    """File coherence is bounded: a caller's file whose many chunks mention a name steps
    forward, but not past the chunk that defines it when that chunk is clearly stronger
    (fastapi: dependencies/utils.py over _compat/v2.py for is_scalar_field)."""
    pool = [snippet("compat/v2.py", "is_scalar_field", 1.0),
            *(snippet("dependencies/utils.py", f"caller_{i}", 0.65 - 0.02 * i)
              for i in range(6))]
    assert [h.file_path for h in aggregate_files(pool, SETTINGS)] == [
        "compat/v2.py", "dependencies/utils.py"]


def test_a_link_in_the_task_is_not_read_as_words_or_names():
    """A commit message citing a specification by URL: its host and path segments
    ("swagger.io", "v3_0") are neither code names nor content words."""
    q = understand("Rename 'features' hint: extensions must start with x- "
                   "https://swagger.io/docs/specification/v3_0/openapi-extensions/", SETTINGS)
    assert q.symbols == ("features",)
    assert not {"swagger", "io", "specification", "v3_0", "https"} & set(q.lexical.split())
    assert "swagger" not in q.dense
