"""Queries that describe what code does, the way its docstring would (an agent paraphrasing
what it read, issue 14's "no drop on docstring figures"): such a description asks for the
implementation, a definition whose name its words spell ranks above its class header and
its callers, and docstring cross-reference markup (``:class:`Name```, ``{@link Name}``) is
read as the name it points to, not as the words "class" or "func".

On real code: click's help formatter and option parser (installed with contextd) as chunked
by the real chunker, and indexed with the real embedding model for the end-to-end case.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import click.formatting
import click.parser
import pytest

from contextd.chunkers.chunking import chunk_file
from contextd.config.sections import ContextConfig, RankingConfig
from contextd.query.evidence import ExactQuery
from contextd.query.intent import QueryIntent, classify
from contextd import ContextModule
from contextd.query.records import QueryRequest
from contextd.query.understanding import (
    boost_factor, name_words_share, plain_cross_references, understand,
)
from contextd.records import ContextSnippet

SETTINGS = RankingConfig()


def real_chunks(module_file: str) -> dict[str, ContextSnippet]:
    """The chunks of a real file as ranking candidates (equal fused scores), by label."""
    path = Path(module_file)
    found = {}
    for n, c in enumerate(chunk_file(str(path), path.read_bytes(), ContextConfig()).chunks):
        found.setdefault(c.label, ContextSnippet(
            f"c{n}", 0.5, f"src/{path.name}", c.label, c.kind.value, c.text, c.language,
            c.start_line, c.end_line, c.tokens))
    return found


# ----- intent ----------------------------------------------------------------------------------
@pytest.mark.parametrize("query, intent", [
    ("Prepares the given HTTP headers.", QueryIntent.IMPLEMENTATION),
    ("Closes all adapters and as such the session", QueryIntent.IMPLEMENTATION),
    ("This function launches the given URL in the default viewer", QueryIntent.IMPLEMENTATION),
    ("Options for the parser", QueryIntent.NEUTRAL),             # a plural noun, not a verb
    ("Headers are case-insensitive", QueryIntent.NEUTRAL),
    ("Process the queue", QueryIntent.NEUTRAL),                  # "-ss" is no third person
    ("how do I prepare the headers", QueryIntent.USAGE),
])
def test_a_description_of_what_code_does_asks_for_its_implementation(query, intent):
    assert classify(query, about_tests=False) is intent


def test_a_described_function_outranks_the_guide_that_explains_it():
    settings = RankingConfig()
    doc = ContextSnippet("d", 0.5, "docs/parser.md", "Parsing", "MARKDOWN_SECTION", "...",
                         "markdown", 1, 9, 40)
    query = understand("Parses the given arguments and returns the leftovers", settings)
    assert query.intent is QueryIntent.IMPLEMENTATION
    assert boost_factor(doc, query, settings) == settings.implementation_doc_factor


# ----- cross-reference markup -------------------------------------------------------------------
def test_cross_references_become_the_names_they_point_to():
    assert plain_cross_references("Creates the :class:`~click.HelpFormatter` for it") == \
        "Creates the `click.HelpFormatter` for it"
    assert plain_cross_references("see :py:meth:`the invoker <Context.invoke>`") == \
        "see `Context.invoke`"
    assert plain_cross_references("like {@link Reaction.track | track} does") == \
        "like `Reaction.track` does"
    assert plain_cross_references("a `plain` quote and a dict: {'a': 1}") == \
        "a `plain` quote and a dict: {'a': 1}"


def test_role_words_are_not_query_words_but_a_quotation_keeps_its_markup():
    text = "Sends a DELETE request. Returns :class:`Response` object."
    query = understand(text, SETTINGS)
    assert query.symbols == ("Response",)
    assert "class" not in query.lexical.split()
    assert query.dense == "Sends a DELETE request. Returns Response object."
    assert query.original == text
    assert query.exact == ExactQuery.of(text, query.symbols)  # verbatim matching as written


# ----- names spelled by the query ---------------------------------------------------------------
def test_name_words_share_on_real_definitions():
    chunks = real_chunks(click.parser.__file__)
    prose = understand("Adds a new option named dest to the parser", SETTINGS).prose_stems
    assert name_words_share(chunks["_OptionParser.add_option"].label, prose) == 1.0
    assert name_words_share(chunks["_OptionParser.add_argument"].label, prose) == 0.5
    # Stop words do not count ("get"), and only the last part of a dotted label does.
    assert name_words_share("Command.get_usage", understand("the usage line", SETTINGS)
                            .prose_stems) == 1.0
    assert name_words_share("OptionParser.parse_args",
                            understand("the option parser", SETTINGS).prose_stems) == 0.0


def test_the_definition_the_description_names_outranks_its_class_header():
    chunks = real_chunks(click.formatting.__file__)
    # A paraphrase: the docstring's own words would be exact evidence, another factor.
    query = understand("Write a section heading to the buffer", SETTINGS)
    heading = boost_factor(chunks["HelpFormatter.write_heading"], query, SETTINGS)
    header = boost_factor(chunks["HelpFormatter"], query, SETTINGS)
    sibling = boost_factor(chunks["HelpFormatter.write_paragraph"], query, SETTINGS)
    assert heading == pytest.approx(1 + SETTINGS.name_words_boost)
    assert heading > sibling > header == 1.0
    # Names the query writes as code are the definition boost's, not this one's.
    coded = understand("Writes `HelpFormatter` output", SETTINGS)
    assert "helpformatter" not in coded.prose_stems
    off = RankingConfig(name_words_boost=0.0)
    assert boost_factor(chunks["HelpFormatter.write_heading"], query, off) == 1.0


# ----- end to end ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def module(tmp_path_factory):
    root = tmp_path_factory.mktemp("descriptions") / "proj"
    (root / "src").mkdir(parents=True)
    for source in (click.parser.__file__, click.formatting.__file__):
        shutil.copy(source, root / "src" / Path(source).name)
    module = ContextModule.open(str(root))
    yield module
    module.shutdown()


def test_a_description_finds_the_function_it_names_not_its_caller(module):
    # Measured: with ranking.name_words_boost = 0 the caller that loops over the options
    # (_OptionParser._process_opts) ranks first and the matcher second.
    answer = module.query(QueryRequest("Match a long option against the known options", k=3,
                                       wait_for_model=True))
    assert answer.hits[0].label == "_OptionParser._match_long_opt"
