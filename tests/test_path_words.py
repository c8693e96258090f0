"""The path boost: a query that names a module's folder or file finds that module (issue 26's
change-request localization), on path words alone and through the real query pipeline."""

from __future__ import annotations

import dataclasses

import pytest

from golden import open_indexed
from contextd import ContextModule
from contextd.config.sections import RankingConfig
from contextd.query.path_words import PathWords, path_stems
from contextd.query.records import QueryRequest
from contextd.query.understanding import boost_factor, understand
from contextd.records import ContextSnippet
from contextd.text.stemming import light_stem

SETTINGS = RankingConfig()


def test_path_stems_read_folders_and_file_name_without_extension():
    assert path_stems("wagtail/documents/api/v3/router.py") == (
        "wagtail", "document", "api", "v3", "router")
    assert path_stems("client/src/components/Draftail/Document.js") == (
        "client", "src", "component", "draftail", "document")
    assert path_stems("users/views/api_tokens.py") == ("user", "view", "api", "token")
    assert path_stems("actions/copy_for_translation.py") == ("action", "copy", "translation")
    assert path_stems("Makefile") == ("makefil",)


def test_words_in_many_paths_are_not_distinctive():
    paths = [f"shop/module_{i}/code.py" for i in range(30)] + ["shop/redirects/api.py"]
    words = PathWords(paths)
    assert {light_stem(w) for w in ("shop", "code", "module")} <= words.common
    assert "redirect" not in words.common
    query = understand("Add filters and ordering to the redirects API", SETTINGS)
    # shop is everywhere: redirects and api are the whole of the path's distinctive words.
    assert words.share("shop/redirects/api.py", query.word_stems) == 1.0
    assert words.share("shop/module_3/code.py", query.word_stems) == 0.0


def test_a_topic_across_a_small_projects_layers_stays_distinctive():
    """In 15 files, "order" names four (the module, its page, its docs, its migration): over
    10% of the paths, yet the word still tells the orders module from the payments one."""
    paths = ["src/shop/orders.py", "src/shop/payments.py", "web/orders.ts", "docs/orders.md",
             "migrations/001_orders.sql", *(f"src/shop/m{i}.py" for i in range(10))]
    words = PathWords(paths)
    assert "order" not in words.common and "src" in words.common
    query = understand("cancelling an order does not refund the payment", SETTINGS)
    assert words.share("src/shop/orders.py", query.word_stems) == 1.0
    assert words.share("src/shop/payments.py", query.word_stems) == 1.0


def test_names_in_the_query_count_by_their_parts():
    query = understand("how is an HTTPException turned into an error response", SETTINGS)
    words = PathWords(["app/exception_handlers.py", *(f"app/m{i}.py" for i in range(10))])
    assert words.share("app/exception_handlers.py", query.word_stems) == 0.5


def _snippet(path: str, language: str) -> ContextSnippet:
    return ContextSnippet(chunk_id=path, score=0.5, file_path=path, label="x",
                          kind="CODE_BLOCK", text="...", language=language, start_line=1,
                          end_line=2, tokens=3)


def test_only_code_paths_are_boosted():
    """A document's headings already say its topic to BM25; its file name, written in words,
    would echo the question (fastapi's docs page on status codes outranked the code)."""
    query = understand("which status codes may have a response body", SETTINGS)
    words = PathWords(["app/status_codes.py", "docs/status_codes.md",
                       *(f"app/module_{i}.py" for i in range(20))])
    code = boost_factor(_snippet("app/status_codes.py", "python"), query, SETTINGS, words)
    doc = boost_factor(_snippet("docs/status_codes.md", "markdown"), query, SETTINGS, words)
    assert code == pytest.approx(1 + SETTINGS.path_words_boost)
    assert doc == boost_factor(_snippet("docs/status_codes.md", "markdown"), query, SETTINGS)


def test_a_test_files_path_does_not_step_a_change_request_forward():
    """saleor's "fix(clearorders): crash when ..." named core/tests/commands/test_clearorders.py
    as plainly as management/commands/clearorders.py: the test's path names the code it
    tests, so for a change request only the source's path counts (a question still reads
    both)."""
    words = PathWords(["core/commands/clearorders.py", "core/tests/test_clearorders.py",
                       *(f"core/module_{i}.py" for i in range(20))])
    test = _snippet("core/tests/test_clearorders.py", "python")
    change = understand("fix(clearorders): clearorders crashes on an assigned delivery",
                        SETTINGS)
    source = boost_factor(_snippet("core/commands/clearorders.py", "python"), change,
                          SETTINGS, words)
    assert source > 1.0
    assert boost_factor(test, change, SETTINGS, words) == boost_factor(test, change, SETTINGS)
    question = understand("clearorders deletes the orders", SETTINGS)
    assert boost_factor(test, question, SETTINGS, words) > boost_factor(test, question,
                                                                         SETTINGS)


SHOP = {
    # The module the request is about: its code never writes "redirect".
    "shop/redirects/api.py": '''"""Endpoints of one kind of record."""


class RecordViewSet:
    def list(self, request):
        return self.queryset.all()
''',
    # A module that writes the request's other words many times.
    "shop/api/listing.py": '''"""Filters and ordering for the API listings."""


class OrderingFilter:
    """Ordering of API listings: filters by field, ordering by column."""

    def filter_queryset(self, request, queryset):
        ordering = request.GET.get("ordering")
        return queryset.order_by(ordering) if ordering else queryset
''',
    **{f"shop/module_{i}/code.py": f"def helper_{i}():\n    return {i}\n" for i in range(12)},
}


def test_a_request_naming_a_folder_finds_its_module(tmp_path):
    for rel, text in SHOP.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    project, store = open_indexed(tmp_path)
    request = QueryRequest("Add filters and ordering to the redirects API", k=5, by_file=True)
    ranked = {}
    try:
        for boost in (0.0, SETTINGS.path_words_boost):
            config = dataclasses.replace(project.config, ranking=dataclasses.replace(
                project.config.ranking, path_words_boost=boost))
            module = ContextModule(dataclasses.replace(project, config=config), store)
            try:
                ranked[boost] = [f.file_path for f in module.query(request).files]
            finally:
                module.shutdown()
    finally:
        store.close()
    assert ranked[0.0][0] == "shop/api/listing.py"
    assert ranked[SETTINGS.path_words_boost][0] == "shop/redirects/api.py"


def test_the_area_a_titles_colon_names_steps_its_files_forward():
    """prometheus's "promtool: Add `--remote-write.path` ..." changed cmd/promtool/main.go,
    while web/api/v1/openapi_paths.go spelt more of the message's words (path, api, v1):
    the area before the colon says where the change is, as a Conventional Commits scope
    does (``fix(clearorders): ...``); a type alone (``fix:``, ``chore:``) names no area."""
    words = PathWords(["cmd/promtool/main.go", "web/api/v1/openapi_paths.go",
                       *(f"pkg/module_{i}/code.go" for i in range(20))])
    change = understand("promtool: Add `--remote-write.path` for overriding the url path "
                        "(flag --remote-write.path=/api/v1/write)", SETTINGS)
    assert change.area_stems == {"promtool"}

    def factor(query, path, settings=SETTINGS):
        return boost_factor(_snippet(path, "go"), query, settings, words)

    unaware = dataclasses.replace(SETTINGS, area_path_boost=0.0)
    assert factor(change, "web/api/v1/openapi_paths.go", unaware) > \
        factor(change, "cmd/promtool/main.go", unaware)
    assert factor(change, "cmd/promtool/main.go") > factor(change, "web/api/v1/openapi_paths.go")
    assert understand("fix(clearorders): crash on delivery", SETTINGS).area_stems == \
        {light_stem("clearorders")}
    for typed in ("fix: crash on delivery", "chore: fix typos in comments",
                  "Fix products overwriting attributes"):
        assert understand(typed, SETTINGS).area_stems == frozenset()


def test_one_word_of_a_long_message_does_not_spell_a_whole_path():
    """saleor's long message about SQS and Pub/Sub retries wrote
    ``botocore.exceptions.BotoCoreError`` once: ``exceptions`` spelt the whole of
    core/exceptions.py, which then outranked the transport module that changed. A path's
    words count fully only as 10% or more of the query's; a short query naming the path
    keeps the full share."""
    words = PathWords(["core/exceptions.py", "webhook/transport/utils.py",
                       *(f"pkg/module_{i}/code.py" for i in range(20))])
    long = understand("Make logic sending messages to AWS SQS and Google PubSub more tolerant "
                      "to prevent a task giving up without retries: catch all client errors, "
                      "include botocore.exceptions.BotoCoreError, add a test case for sending "
                      "a message and extend the cloud logic tests", SETTINGS)
    assert words.share("core/exceptions.py", long.word_stems) == 1.0
    assert words.evidence("core/exceptions.py", long.word_stems) < 0.75
    short = understand("where are the core exceptions defined", SETTINGS)
    assert words.evidence("core/exceptions.py", short.word_stems) == 1.0
