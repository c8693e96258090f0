"""A symbol hit found only through a plain prose word votes with half trust in the fusion
(issue 36, category A): a change request whose word equals a method name defined in several
files no longer puts those guesses above the file it is about, while a guess that is
corroborated keeps its place: its name spells two of the message's words, or its name and kind
do (the table ``orders``), or another definition of its file does (``cancel_order`` beside
``class Order``); and an exact lookup keeps its place."""

from __future__ import annotations

import pytest

from contextd.providers.symbol import (
    PLAIN_WORD_FACTOR, Candidate, corroborated_by_neighbours, extract_candidates, query_stems,
    vote_trust,
)
from contextd.query.fusion import VOTE_TRUST, fuse
from contextd.query.records import QueryRequest
from contextd.records import ContextSnippet
from golden import indexed_module, write_files

COMMAND = '''
    """Management command: {what}."""
    from django.core.management.base import BaseCommand


    class Command(BaseCommand):
        help = "{what}"

        def handle(self, *args, **options):
            for item in self.{source}():
                self.stdout.write(str(item))
'''

FILES = {
    "app/management/commands/rebuild_index.py": COMMAND.format(what="rebuild the search index",
                                                                 source="pages"),
    "app/management/commands/clear_cache.py": COMMAND.format(what="clear the page cache",
                                                               source="caches"),
    "app/management/commands/send_reports.py": COMMAND.format(what="send the weekly reports",
                                                                source="reports"),
    "app/management/commands/import_users.py": COMMAND.format(what="import users from a file",
                                                                source="users"),
    "documents/editing.py": '''
        """Forms that edit documents, in full or in part."""


        class BaseDocumentForm:
            """A form over a document's fields; a partial form shows only some of them."""

            def __init__(self, document, fields=None):
                self.document = document
                # fields may be any iterable (a generator, a tuple): read it once, into a
                # list, so that a partial form can walk it more than once.
                self.fields = list(fields) if fields is not None else None

            def visible_fields(self):
                """The fields a partial form shows, in the order they were given."""
                if self.fields is None:
                    return list(self.document.fields)
                return [f for f in self.document.fields if f.name in self.fields]
    ''',
    "orm/relation_loader.py": '''
        """Loading a model's relations."""


        class RelationLoader:
            """Loads the related rows of a relation, lazily or eagerly."""

            def load(self, relation, rows, eager=False):
                """Rows of ``relation`` for ``rows``: one query per row, or one join when
                eager."""
                if eager:
                    return self.join(relation, rows)
                return [self.fetch(relation, row) for row in rows]
    ''',
    "orm/options.py": '''
        """Options of a query."""


        def eager_load(*relations):
            """An option that joins the given relations into the query."""
            return {"eager": True, "relations": relations}
    ''',
    "orm/strategy.py": '''
        """How a query is planned."""


        def pick_strategy(options):
            """The plan a query uses: eager joins when the options ask for them."""
            return "join" if options.get("eager") else "select"
    ''',
    "migrations/001_orders.sql": '''
        -- Orders and their line items.
        CREATE TABLE orders (
            order_id UUID PRIMARY KEY,
            status TEXT NOT NULL DEFAULT 'pending'
        );
    ''',
    "shop/orders.py": '''
        """The order lifecycle: placing orders and cancelling them."""
        from shop.payments import PaymentGateway


        class Order:
            """An order of a customer, with the payment that paid it."""

            def __init__(self, order_id, payment_id=None):
                self.order_id = order_id
                self.payment_id = payment_id
                self.status = "placed"


        def cancel_order(order, gateway):
            """Cancel an order that has not shipped and give its payment back."""
            if order.status == "shipped":
                raise ValueError("shipped orders cannot be cancelled")
            order.status = "cancelled"
    ''',
    "shop/payments.py": '''
        """The card payment provider's client."""


        class PaymentGateway:
            """Charges cards and refunds payments."""

            def refund(self, payment_id):
                """Refund a payment in full."""
                return {"refunded": payment_id}
    ''',
}


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    """A ContextModule over the project's lexical and symbol index (no vectors)."""
    with indexed_module(write_files(tmp_path_factory.mktemp("docs_app"), FILES)) as module:
        yield module


def files_of(module, text: str, k: int = 5) -> list[str]:
    return [f.file_path for f in module.query(QueryRequest(text, k=k, by_file=True)).files]


def test_a_prose_word_equal_to_a_method_name_does_not_outrank_the_file_the_request_is_about(
        module):
    """"handle" is the name of three ``Command.handle``; the message is about the forms."""
    query = "Handle iterators in partial document forms"
    assert module.query(QueryRequest(query, k=5)).hits[0].file_path == "documents/editing.py"
    assert files_of(module, query)[0] == "documents/editing.py"


def test_a_plain_word_guess_whose_name_spells_two_of_the_words_keeps_its_place(module):
    """"load" and "relation" both spell a part of ``RelationLoader.load``: its hit keeps full
    trust (no ``vote_trust``), unlike the module ``strategy`` that only the word "strategy"
    names, and its file stays first."""
    query = "eager load relation strategy"
    assert files_of(module, query)[0] == "orm/relation_loader.py"
    hits = {h.label: h for h in module.query(QueryRequest(query, k=8)).hits}
    assert VOTE_TRUST not in hits["RelationLoader"].metadata
    assert hits["strategy"].metadata[VOTE_TRUST] == PLAIN_WORD_FACTOR


def test_an_exact_symbol_lookup_still_ranks_its_definition_first(module):
    for name, defined_in in (("RelationLoader.load", "orm/relation_loader.py"),
                             ("BaseDocumentForm", "documents/editing.py"),
                             ("pick_strategy", "orm/strategy.py")):
        hits = module.query(QueryRequest(name, k=5)).hits
        assert hits[0].file_path == defined_in
        assert files_of(module, name)[0] == defined_in


def test_a_table_found_by_a_plain_word_that_the_query_calls_a_table_keeps_its_place(module):
    """"orders" alone names the table ``orders`` and the module ``shop/orders.py``; the table's
    kind spells "table" too, so only the module's hit is doubted and the migration is the
    first file (at half trust, as doubted as the module, it came second)."""
    query = "orders table schema"
    assert files_of(module, query)[0] == "migrations/001_orders.sql"
    by_path = {h.file_path: h for h in module.query(QueryRequest(query, k=8)).hits}
    assert VOTE_TRUST not in by_path["migrations/001_orders.sql"].metadata


def test_a_plain_word_guess_beside_a_definition_spelling_the_message_keeps_full_trust(module):
    """"order" alone names ``class Order``; its file also defines ``cancel_order``, which
    spells "cancelling" and "order": the file is about the message and comes before the
    payments file, whose ``PaymentGateway.refund`` spells "payment" and "refund"."""
    query = "Fix: cancelling an order does not refund the payment"
    assert files_of(module, query)[0] == "shop/orders.py"
    hits = {h.label: h for h in module.query(QueryRequest(query, k=8)).hits}
    assert VOTE_TRUST not in hits["Order"].metadata


def trust_of(query: str, name: str, kind: str = "method") -> float:
    candidates, _files = extract_candidates(query, frozenset({".py"}), 32)
    short = name.rsplit(".", 1)[-1].lower()
    best = max(candidates, key=lambda c: c.lower in (name.lower(), short))
    return vote_trust(best, name, kind, query_stems(query))


def test_only_an_uncorroborated_plain_word_is_doubted():
    assert trust_of("Handle iterators in partial document forms",
                    "Command.handle") == PLAIN_WORD_FACTOR
    assert trust_of("eager load relation strategy", "RelationLoader.load") == 1.0
    assert trust_of("handle", "Command.handle") == 1.0  # a one-word query is a lookup
    assert trust_of("fix handle_iterators in forms", "handle_iterators") == 1.0  # code
    assert vote_trust(Candidate("handle", 0.8), "Command.handle", "method",
                      query_stems("a handle b")) == 1.0
    assert trust_of("orders table schema", "orders", "table") == 1.0  # the kind is a word
    assert trust_of("orders table schema", "orders", "module") == PLAIN_WORD_FACTOR


def test_a_neighbour_corroborates_when_it_spells_two_of_the_words_by_itself():
    stems = query_stems("Fix: cancelling an order does not refund the payment")
    assert corroborated_by_neighbours(["Order", "cancel_order"], stems)  # cancell ~ cancel
    assert not corroborated_by_neighbours(["Order", "OrderLine", "refund"], stems)
    assert not corroborated_by_neighbours(["Command", "Command.handle"],
                                          query_stems("Handle iterators in partial forms"))


def test_the_fusion_scales_a_doubted_vote_and_keeps_the_full_trust_scale():
    def hit(cid: str, **meta) -> ContextSnippet:
        return ContextSnippet(chunk_id=cid, score=1.0, file_path=f"{cid}.py", label=cid,
                              kind="CODE", text=cid, language="python", start_line=1,
                              end_line=2, tokens=5, metadata=meta)

    ranked = {"symbol": [hit("guess", **{VOTE_TRUST: 0.5}), hit("named")],
              "fulltext": [hit("named"), hit("guess")]}
    fused = {s.chunk_id: s.score for s in fuse(ranked, {})}
    best = 2 / 61
    assert fused["guess"] == pytest.approx((0.5 / 61 + 1 / 62) / best)
    assert fused["named"] == pytest.approx((1 / 62 + 1 / 61) / best)
    assert [s.chunk_id for s in fuse(ranked, {})] == ["named", "guess"]
