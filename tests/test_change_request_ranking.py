"""Ranking that knows a change request (issue 36), on a small real project: its source
before its test and its docs page, a definition named by the query before a file that only
mentions it, exact lookups still first, several files in the default top 5, and semantic
hits that add evidence without pushing out the lexical answer."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest

from contextd import ContextModule
from contextd.config.sections import RankingConfig
from contextd.query.evidence import quotation_tier
from contextd.query.fusion import FusionStrategy, fuse
from contextd.query.generated_files import GENERATED_MIN_BYTES, GeneratedFiles
from contextd.query.literals import Literal, lift_rare_literals, query_literals
from contextd.query.records import QueryRequest
from contextd.query.semantic_adds import keep_lexical_floor
from contextd.query.understanding import apply_boosts, understand
from contextd.records import ContextSnippet
from golden import indexed_module, open_indexed, write_files

FILES = {
    "shop/retry.py": '''
        """Retrying failed HTTP calls."""
        import email.utils
        import time


        def retry_after_delay(headers, now=None):
            """Seconds to wait from the Retry-After header: a number of seconds or an
            HTTP date."""
            value = headers.get("Retry-After")
            if value is None:
                return None
            if value.isdigit():
                return float(value)
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - (now or time.time()))


        class RetryPolicy:
            """How often and how long to retry a failed call."""

            def __init__(self, attempts=3, backoff=0.5):
                self.attempts = attempts
                self.backoff = backoff

            def next_delay(self, attempt, headers):
                """The wait before the next attempt: the server's Retry-After when it
                sends one, else exponential backoff."""
                delay = retry_after_delay(headers)
                return delay if delay is not None else self.backoff * 2 ** attempt

            def should_retry(self, attempt, status):
                """Retry on 429 and 503 until the attempts are spent."""
                return attempt < self.attempts and status in (429, 503)
    ''',
    "shop/client.py": '''
        """The shop's HTTP client."""
        from shop.retry import RetryPolicy, retry_after_delay


        class ShopClient:
            def __init__(self, session, policy=None):
                self.session = session
                self.policy = policy or RetryPolicy()

            def get(self, url):
                attempt = 0
                while True:
                    response = self.session.get(url)
                    if not self.policy.should_retry(attempt, response.status):
                        return response
                    self.session.sleep(self.policy.next_delay(attempt, response.headers))
                    attempt += 1

            def log_wait(self, response):
                """Logs how long retry_after_delay says to wait."""
                print("waiting", retry_after_delay(response.headers))
    ''',
    "shop/orders.py": '''
        """Orders of the shop."""


        class Order:
            def __init__(self, items):
                self.items = items

            def total(self):
                return sum(item.price * item.quantity for item in self.items)

            def cancel(self):
                self.cancelled = True
    ''',
    "shop/invoices.py": '''
        """Invoices: the total of an order with its taxes."""


        def invoice_total(order, tax_rate):
            """The order's total with the tax added."""
            return order.total() * (1 + tax_rate)
    ''',
    "tests/test_retry.py": '''
        from shop.retry import RetryPolicy, retry_after_delay


        def test_retry_after_header_in_seconds():
            assert retry_after_delay({"Retry-After": "3"}) == 3.0


        def test_retry_after_header_as_a_date_is_not_ignored():
            headers = {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}
            assert retry_after_delay(headers, now=0) > 0


        def test_retries_use_retry_after_before_backoff():
            policy = RetryPolicy(backoff=1.0)
            assert policy.next_delay(0, {"Retry-After": "7"}) == 7.0
            assert policy.next_delay(2, {}) == 4.0
    ''',
    "docs/retries.md": '''
        # Retries

        Failed calls are retried: the client retries on 429 and 503. When the server sends
        a Retry-After header the retries wait that long, else they back off exponentially.
        A Retry-After header may hold seconds or a date.
    ''',
}


def write_project(root: Path) -> Path:
    return write_files(root, FILES)


@pytest.fixture(scope="module")
def lexical(tmp_path_factory):
    """A ContextModule over the project's lexical and symbol index (no vectors)."""
    with indexed_module(write_project(tmp_path_factory.mktemp("shop"))) as module:
        yield module


def files_of(module, text: str, k: int = 5) -> list[str]:
    return [f.file_path for f in module.query(QueryRequest(text, k=k, by_file=True)).files]


def test_a_change_requests_source_outranks_its_test_and_its_docs_page(lexical):
    files = files_of(lexical, "Fix: retries ignore the Retry-After header when it holds a date")
    assert files[0] == "shop/retry.py"
    assert files.index("shop/retry.py") < files.index("tests/test_retry.py")
    assert files.index("shop/retry.py") < files.index("docs/retries.md")


def test_a_definition_named_by_the_query_outranks_a_file_that_only_mentions_it(lexical):
    """client.py calls retry_after_delay in two places and names it in a docstring; retry.py
    defines it."""
    hits = lexical.query(QueryRequest("retry_after_delay returns None for a date", k=5)).hits
    assert (hits[0].file_path, hits[0].label) == ("shop/retry.py", "retry_after_delay")
    assert files_of(lexical, "retry_after_delay returns None for a date")[0] == "shop/retry.py"


def test_an_exact_symbol_lookup_ranks_its_definition_first(lexical):
    for name, defined_in in (("retry_after_delay", "shop/retry.py"),
                             ("RetryPolicy", "shop/retry.py"), ("invoice_total",
                                                                "shop/invoices.py")):
        hits = lexical.query(QueryRequest(name, k=5)).hits
        assert hits[0].file_path == defined_in and hits[0].label.endswith(name)
        assert files_of(lexical, name)[0] == defined_in


def test_the_default_top_5_holds_two_files_when_two_match(lexical):
    """retry.py has four chunks about retries and delays, client.py one that uses them: the
    first five snippets name both files, not five chunks of one."""
    hits = lexical.query(QueryRequest("retry delay policy attempts", k=5)).hits
    assert len({h.file_path for h in hits}) >= 2
    assert hits[0].file_path == "shop/retry.py"


def snip(cid: str, path: str) -> ContextSnippet:
    return ContextSnippet(chunk_id=cid, score=1.0, file_path=path, label=cid, kind="CODE",
                          text=cid, language="python", start_line=1, end_line=2, tokens=5)


def test_semantic_hits_never_push_out_what_the_other_providers_agree_on():
    """BM25 and the symbol provider both rank head.py first; three remote-write chunks come
    second to fourth in both and first in the semantic ranking, which misses head.py.
    Fused plainly, all three pass head.py (it drops to two thirds of the best score); with
    the floor head.py keeps its place (the Prometheus question of issue 36)."""
    head = snip("head", "tsdb/head.py")
    others = [snip(f"remote{i}", f"storage/remote/w{i}.py") for i in range(3)]
    ranked = {"full_text": [head, *others, *[snip(f"f{i}", f"x{i}.py") for i in range(6)]],
              "symbol": [head, *others],
              "semantic": [*others, *[snip(f"s{i}", f"y{i}.py") for i in range(20)]]}
    weights = {"full_text": 1.0, "symbol": 1.0, "semantic": 1.0}
    fused = fuse(ranked, weights, FusionStrategy.RRF, 60)
    assert [s.chunk_id for s in fused].index("head") == 3  # what happened before
    kept = keep_lexical_floor(fused, ranked, weights, 60)
    assert kept[0].chunk_id == "head"
    # semantic hits still add: the chunks all three found come next
    assert [s.chunk_id for s in kept][1:4] == ["remote0", "remote1", "remote2"]
    # without a semantic answer nothing changes
    lexical_only = {p: items for p, items in ranked.items() if p != "semantic"}
    plain = fuse(lexical_only, weights, FusionStrategy.RRF, 60)
    assert keep_lexical_floor(plain, lexical_only, weights, 60) == plain


def test_the_floor_holds_only_what_two_providers_rank_high():
    """BM25 ranks one chunk first and the symbol provider fifth: not a chunk both rank in
    their first three, so it gets no floor, and the semantic ranking's first chunk, which
    BM25 ranks second, stays ahead of it. Floored, the BM25 pick would take the lead (a floor
    for every chunk cost the hybrid 0.05 MRR@10 on bench_retrieval's docstring questions)."""
    bm25_pick, model_pick = snip("bm25", "a.py"), snip("model", "c.py")
    ranked = {"full_text": [bm25_pick, model_pick, *[snip(f"g{i}", f"g{i}.py") for i in range(6)]],
              "symbol": [*[snip(f"h{i}", f"h{i}.py") for i in range(4)], bm25_pick],
              "semantic": [model_pick, *[snip(f"s{i}", f"y{i}.py") for i in range(20)]]}
    weights = {"full_text": 1.0, "symbol": 1.0, "semantic": 1.0}
    fused = fuse(ranked, weights, FusionStrategy.RRF, 60)
    assert [s.chunk_id for s in fused[:2]] == ["model", "bm25"]
    assert keep_lexical_floor(fused, ranked, weights, 60) == fused


def test_a_name_spelt_as_code_lifts_its_holder_and_a_plain_word_in_backticks_does_not():
    """Of twelve candidates, the ninth holds ``manifest_url`` and the sixth ``True``, each the
    only holder: the code name decides the order (issue 37's rare literal), the plain word in
    backticks leaves the fused order as it was (lifting such words cost bench_retrieval's
    docstring questions, where ``True`` or ``reversed`` is what a function returns or
    extends, not a string to find)."""
    texts = [f"def step_{i}(value):\n    return value + {i}\n" for i in range(12)]
    texts[5] = "def accept(value):\n    return True\n"
    texts[8] = "class App:\n    manifest_url = URLField(max_length=2048)\n"
    candidates = [dataclasses.replace(snip(f"c{i}", f"m{i}.py"), text=text, score=1 - i / 20)
                  for i, text in enumerate(texts)]
    query = "Raise the length limit of `manifest_url` and return ``True`` when it is valid"
    understood = understand(query, RankingConfig())
    literals = query_literals(query, understood.quoted, understood.symbols)
    assert {lit.text for lit in literals} >= {"manifest_url", "True"}
    lifted = [s.chunk_id for s in lift_rare_literals(candidates, literals)]
    assert lifted == ["c8", *[f"c{i}" for i in range(12) if i != 8]]


def test_the_lexical_answer_stays_in_the_top_5_once_vectors_exist(tmp_path):
    """The same change request before and after every chunk has its vector: the file the
    lexical and symbol providers find first stays among the first five files."""
    root = write_project(tmp_path / "shop")
    text = "Fix: retries ignore the Retry-After header when it holds a date"
    module = ContextModule.open(str(root))
    try:
        module.embedder.wait(120)
        semantic = module.pipeline.provider("semantic")
        assert semantic.share_indexed() == 1.0
        response = module.query(QueryRequest(text, k=5, by_file=True))
        assert "semantic" in response.providers or any(
            "semantic" in h.providers for h in response.hits)
        assert "shop/retry.py" in [f.file_path for f in response.files][:5]
        assert "shop/retry.py" in [h.file_path for h in response.hits]
    finally:
        module.shutdown()



GENERATED_SCHEMA = '''
    # Code generated by tools/dump_schema.py from the shop's types. DO NOT EDIT.
    SCHEMA = """
    type Mutation {
      retryAfterDelay(headers: Headers!): Float
      invoiceTotal(order: ID!, taxRate: Float!): Money
    }
    """
'''


def test_a_change_request_ranks_the_code_before_the_generated_file_that_spells_its_name(
        tmp_path):
    """Only the generated schema writes ``retryAfterDelay`` as the change request does; the
    code to change defines ``retry_after_delay``. A chunk that holds a rare name is lifted above
    the rest, but not a generated file's when the query asks for a change; a plain lookup of
    the name still finds the schema."""
    root = write_project(tmp_path / "shop")
    (root / "shop" / "api_schema.py").write_text(textwrap.dedent(GENERATED_SCHEMA).lstrip())
    project, store = open_indexed(root)
    module = ContextModule(project, store)
    try:
        module.pipeline.warm_up(wait=True)
        files = files_of(module, "Fix retryAfterDelay returning None when the header is a date")
        assert files[0] == "shop/retry.py", files
        assert "shop/api_schema.py" in files_of(module, "where is retryAfterDelay declared")
    finally:
        module.shutdown()
        store.close()


def test_a_generated_file_is_known_by_its_header_or_its_size_not_its_name(tmp_path):
    """Go's, Django's and the @generated header mark a file generated, and so does a size no
    hand-written file reaches; a docstring that mentions generated tokens does not, nor does a
    name like schema.graphql of a small hand-written schema."""
    files = {"api.pb.go": "// Code generated by protoc-gen-go. DO NOT EDIT.\npackage api\n",
             "migrations/0002_auto.py": "# Generated by Django 5.2 on 2026-01-01 10:00\n",
             "bundle.ts": "/**\n * @generated\n */\nexport const x = 1;\n",
             "lexer.py": '"""Tokens generated by the lexer are cached."""\n',
             "schema.graphql": "type Query {\n  shop: Shop\n}\n",
             "big.graphql": "type Query {\n  shop: Shop\n}\n" * (GENERATED_MIN_BYTES // 20)}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    generated = GeneratedFiles(tmp_path)
    assert {name for name in files if generated(name)} == {
        "api.pb.go", "migrations/0002_auto.py", "bundle.ts", "big.graphql"}
    (tmp_path / "lexer.py").write_text("# Code generated by tools/lex.py. DO NOT EDIT.\n")
    assert generated("lexer.py")  # looked at again once the file changed


MUTATION_PROJECT = {
    "shop/graphql/checkout_create.py": '''
        """The checkout mutations of the shop's API."""
        from shop.graphql.core import BaseMutation, Field, List


        class CheckoutCreate(BaseMutation):
            """Create a new checkout from the given lines and addresses."""

            lines = List("CheckoutLineInput", required=True)
            email = Field(str)

            @classmethod
            def perform_mutation(cls, root, info, lines, email=None):
                checkout = cls.new_checkout(email)
                for line in lines:
                    checkout.add(line["variant"], line["quantity"])
                return checkout
    ''',
    "shop/graphql/core.py": '''
        """Building blocks of the API's types."""


        class BaseMutation:
            @classmethod
            def new_checkout(cls, email):
                return {"email": email, "lines": []}


        def Field(kind):
            return kind


        def List(kind, required=False):
            return [kind, required]
    ''',
    "shop/checkout/lines.py": '''
        """Checkout lines: optional lines, lines to make, lines of a checkout."""


        def make_optional_lines(checkout, lines=None):
            """Make the checkout's lines optional: a checkout without lines keeps no lines
            until lines are added; optional lines make an empty checkout."""
            checkout["lines"] = list(lines or [])
            return checkout["lines"]
    ''',
    "tests/test_checkout_create.py": '''
        MUTATION = """
        mutation checkoutCreate($lines: [CheckoutLineInput!]!) {
          checkoutCreate(input: {lines: $lines}) {
            checkout { id lines { quantity } }
            errors { field message }
          }
        }
        """


        def test_checkout_create_with_lines(api_client):
            lines = [{"variant": "v1", "quantity": 2}]
            data = api_client.post(MUTATION, {"lines": lines})["data"]
            assert data["checkout"]["lines"] == [{"quantity": 2}]


        def test_checkout_create_without_lines_fails(api_client):
            data = api_client.post(MUTATION, {"lines": []})["data"]
            assert data["errors"][0]["field"] == "lines"
    ''',
}


def test_a_change_request_naming_a_mutation_ranks_its_definition_before_the_test_spelling_it(
        tmp_path):
    """Only the test's GraphQL string writes ``checkoutCreate`` as the change request does;
    the class to change is ``CheckoutCreate``, and a helper writes the query's words more
    often than the class does. The rare name lifts the chunk that writes it, and the
    definition that spells it in another case with it: without that the test's chunk came
    first (saleor's checkoutCreate and confirmAccount commits, whose test files came first)."""
    for rel, text in MUTATION_PROJECT.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(textwrap.dedent(text).lstrip())
    project, store = open_indexed(tmp_path)
    module = ContextModule(project, store)
    try:
        module.pipeline.warm_up(wait=True)
        text = "feat(checkout): make lines optional in checkoutCreate"
        hits = module.query(QueryRequest(text, k=5)).hits
        assert (hits[0].file_path, hits[0].label) == ("shop/graphql/checkout_create.py",
                                                      "CheckoutCreate"), hits[0]
        assert files_of(module, text)[0] == "shop/graphql/checkout_create.py"
    finally:
        module.shutdown()
        store.close()


def test_a_definition_of_a_name_that_no_candidate_writes_is_not_lifted():
    """``transactionProcess`` is written by no candidate: the class ``TransactionProcess``
    keeps its fused place (a message naming where an error surfaced, not what changed);
    ``checkoutCreate``, written by one chunk, lifts that chunk and the class defining it."""
    texts = {"helper": "def safe_update(checkout):\n    checkout.save()\n",
             "process": "class TransactionProcess(BaseMutation):\n    pass\n",
             "create": "class CheckoutCreate(BaseMutation):\n    pass\n",
             "test": 'QUERY = "mutation { checkoutCreate { id } }"\n'}
    candidates = [dataclasses.replace(snip(cid, f"{cid}.py"), text=text, score=1 - i / 10,
                                      label={"process": "TransactionProcess",
                                             "create": "CheckoutCreate"}.get(cid, cid))
                  for i, (cid, text) in enumerate(texts.items())]
    for query, order in (("Fix transactionProcess failing on deleted checkouts",
                          ["helper", "process", "create", "test"]),
                         ("Make lines optional in checkoutCreate",
                          ["create", "test", "helper", "process"])):
        understood = understand(query, RankingConfig())
        literals = query_literals(query, understood.quoted, understood.symbols)
        assert [s.chunk_id for s in lift_rare_literals(candidates, literals)] == order


def test_a_definition_holds_a_code_name_in_another_spelling_but_not_a_word_or_an_acronym():
    """``checkoutCreate`` is defined by ``CheckoutCreate`` and ``checkout_create``, not by a
    longer name, and a constant's name by the method spelt in lower case; a plain word (prometheus's ``'metric'`` and its ``Metric`` types), a
    language's name (``PromQL`` and the UI's ``promQL`` methods) and a dotted call are
    defined by nothing."""
    name = Literal("checkoutCreate", fold_case=False)
    assert name.defined_by("CheckoutCreate") and name.defined_by("Mutations.checkout_create")
    assert not name.defined_by("CheckoutCreateInput")
    assert Literal("EXPORT_COMPLETED", fold_case=False).defined_by("Plugin.export_completed")
    assert not Literal("metric", fold_case=False).defined_by("Metric")
    assert not Literal("PromQL", fold_case=False).defined_by("HybridComplete.promQL")
    assert not Literal("Checkout.safe_update", fold_case=False).defined_by("Checkout.safe_update")


def test_a_change_request_spelling_a_files_name_and_folder_ranks_that_file_first():
    """"Support partial document forms" names ``documents/forms.py``, whose chunk the
    providers fused below a view that mentions documents and forms (wagtail): the share of
    the message's keywords its stem and folder spell is added and lifts it first. With the
    boost off, and for an exact symbol lookup, the fused order stays."""
    form = dataclasses.replace(snip("form", "wagtail/documents/forms.py"), score=0.30)
    view = dataclasses.replace(snip("view", "wagtail/images/views.py"), score=0.37)
    test = dataclasses.replace(snip("test", "wagtail/documents/tests/test_forms.py"),
                               score=0.33)

    def order(query: str, settings: RankingConfig) -> list[str]:
        return [s.chunk_id for s in apply_boosts([view, test, form],
                                                 understand(query, settings), settings)]

    message = "Support partial document forms"
    assert order(message, RankingConfig())[0] == "form"
    assert order(message, RankingConfig(file_stem_share_boost=0.0))[0] == "view"
    assert order("forms", RankingConfig())[0] == "view"


def test_a_chunk_quoting_the_query_stays_above_a_file_its_name_lifts():
    """The file-stem share is added before the quotation tiers: a chunk quoting the query
    keeps its place above a file whose name and folder spell the query's words, at any
    weight of the share."""
    query = "retry budget exhausted for the billing gateway"
    named = dataclasses.replace(snip("named", "billing/gateway.py"), score=0.9)
    quoting = dataclasses.replace(snip("quoting", "src/errors.py"), score=0.2,
                                  text=f"# {query}\nclass BudgetError(Exception): ...")
    settings = RankingConfig(file_stem_share_boost=10.0)  # the most it may be set to
    understood = understand(query, settings)
    assert quotation_tier(understood.exact, quoting.text) > 0
    ranked = apply_boosts([named, quoting], understood, settings)
    assert [s.chunk_id for s in ranked] == ["quoting", "named"]
