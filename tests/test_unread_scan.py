"""The text scan of files not indexed yet (contextd.query.unread_scan): the query's words are
searched and weighed by their rarity, a scanned window never ranks above an indexed chunk
that measures as much, and the note says how many files were searched. Real files on disk, a real
BM25 index for the document frequencies of the part indexed."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from contextd.config.sections import RankingConfig
from contextd.providers.fulltext import BM25Index, code_tokens
from contextd.query.duplicates import collapse_near_duplicates
from contextd.query.path_words import PathFactor, PathWords
from contextd.query.literals import query_literals
from contextd.query.unread_scan import (
    PROVIDER_ID, place_scanned, scan_order, scan_priors, scan_unread, search_terms,
)
from contextd.query.understanding import boost_factor, path_factor, understand
from contextd.records import ChunkKind, ContextSnippet
from contextd.text.stemming import light_stem

HANDLER = 'def handle():\n    """Handle one request."""\n    return 1\n'
INVOICE = ('def invoice_total(lines):\n    """Sum quantity times unit price over the invoice '
           'lines."""\n    return sum(q * p for q, p in lines)\n')


def _indexed(texts: dict[str, str]) -> tuple[int, dict[str, int]]:
    """(documents, df of every stem) of a real BM25 index over ``texts``."""
    index = BM25Index.build((cid, code_tokens(text)) for cid, text in texts.items())
    terms = {t for text in texts.values() for t in code_tokens(text)}
    return len(index), {t: index.df(t) for t in terms}


def _chunk(path: str, text: str, score: float) -> ContextSnippet:
    return ContextSnippet(chunk_id=f"{path}:1", score=score, file_path=path, label="",
                          kind=ChunkKind.CODE_FUNCTION.value, text=text, language="python",
                          start_line=1, end_line=text.count("\n") + 1, tokens=20,
                          providers=("full_text",))


def _write(root: Path, files: dict[str, str]) -> list[str]:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return sorted(files)


def test_a_word_common_in_the_indexed_part_weighs_next_to_nothing(tmp_path):
    """Every word of the query is searched, weighed by its rarity over the indexed chunks and
    the files scanned: 'handle' and 'request', in every handler, weigh next to nothing, so
    the handlers not indexed yet hold too little of the query to be shown."""
    texts = {f"h{i}": HANDLER for i in range(200)}
    texts["invoice"] = INVOICE
    indexed, frequency = _indexed(texts)
    pending = _write(tmp_path, {**{f"gen/handler_{i}.py": HANDLER for i in range(20)},
                                "billing/credit.py": "def credit(invoice):\n    return -1\n"})
    query = "handle the invoice request"
    terms = search_terms(query, query_literals(query, (), ()))
    assert [t.written for t in terms] == ["handle", "invoice", "request"]
    scan = scan_unread(str(tmp_path), pending, query, terms, indexed, frequency,
                       lambda text, _path: text)
    weight = dict(zip([t.written for t in terms], scan.weights))
    assert weight["handle"] < weight["invoice"] / 20 and weight["request"] < weight["invoice"] / 20
    assert [s.file_path for s in scan.snippets] == ["billing/credit.py"]


def test_a_window_of_common_words_is_not_fused_above_the_indexed_answer(tmp_path):
    """The Index Manager's project: 5,000 look-alike handlers, some not indexed yet, and the
    indexed invoice module. A query with the handlers' words beside 'invoice' scans for
    'invoice' alone: no handler is fused in, the indexed chunk stays first."""
    pending = _write(tmp_path, {f"src/generated/handler_{i}.py": HANDLER for i in range(300)})
    texts = {f"h{i}": HANDLER for i in range(300)}
    texts["invoice"] = INVOICE
    indexed, frequency = _indexed(texts)
    query = "invoice total of the lines handle one request"
    terms = search_terms(query, query_literals(query, (), ()))
    scan = scan_unread(str(tmp_path), pending, query, terms, indexed, frequency,
                       lambda text, _path: text)
    assert scan.snippets == []
    placed = place_scanned([_chunk("src/billing/invoice.py", INVOICE, 0.9)], scan)
    assert [s.file_path for s in placed] == ["src/billing/invoice.py"]
    assert scan.note().startswith("300 of the 300 files not indexed yet were searched")


def test_a_scanned_window_ranks_below_indexed_chunks_with_as_much_evidence(tmp_path):
    """A file not indexed yet holding both rare words ranks above an indexed chunk holding
    one, and below an indexed chunk holding both; its snippet is the file's lines on disk."""
    refunds = ("def rule(claim):\n    return claim.amount\n\n\n"
               'def settle(claim):\n    """A damaged parcel is refunded once the courier '
               'confirms."""\n    return claim.amount\n')
    pending = _write(tmp_path, {"pkg/claims/refunds.py": refunds,
                                "pkg/other.py": "def other():\n    return 2\n"})
    both = _chunk("pkg/parcels.py", "def courier_parcel():\n    return 'damaged parcel'\n", 0.9)
    one = _chunk("pkg/shipping.py", "def parcel():\n    return 1\n", 0.5)
    texts = {"parcels": both.text, "shipping": one.text, **{f"h{i}": HANDLER for i in range(50)}}
    indexed, frequency = _indexed(texts)
    query = "damaged parcel courier"
    terms = search_terms(query, ())
    assert {t.written for t in terms} == {"damaged", "parcel", "courier"}
    scan = scan_unread(str(tmp_path), pending, query, terms, indexed, frequency,
                       lambda text, _path: text)
    assert [s.file_path for s in scan.snippets] == ["pkg/claims/refunds.py"]
    hit = scan.snippets[0]
    lines = refunds.splitlines()[hit.start_line - 1:hit.end_line]
    assert hit.text == "\n".join(lines) and "damaged parcel" in hit.text
    placed = place_scanned([one, both], scan)
    assert [s.file_path for s in placed] == ["pkg/parcels.py", "pkg/claims/refunds.py",
                                             "pkg/shipping.py"]
    assert placed[1].providers == (PROVIDER_ID,)
    assert placed[0].score > placed[1].score > placed[2].score


def test_the_note_says_how_many_files_were_not_searched_within_the_budget(tmp_path):
    pending = _write(tmp_path, {f"src/m{i}.py": f"def m{i}():\n    return {i}\n"
                                for i in range(10)})
    query = "zqtok61x7229008"
    terms = search_terms(query, query_literals(query, (), ()))
    scan = scan_unread(str(tmp_path), pending, query, terms, 0, {}, lambda text, _p: text,
                       budget_s=0.0)
    assert scan.searched == 0
    assert scan.note() == ("0 of the 10 files not indexed yet were searched as text for "
                           "'zqtok61x7229008' (none matched); 10 not searched")


def test_a_name_written_as_code_outweighs_a_rare_plain_word(tmp_path):
    """fastapi: HTTPException is in hundreds of example files, "turned" in a README line. The
    name the question writes as code still decides: the handler module ranks first."""
    files = {f"docs_src/ex_{i:03d}.py": "raise HTTPException(status_code=404)\n"
             for i in range(150)}
    files["fastapi/exception_handlers.py"] = (
        "async def http_exception_handler(request, exc: HTTPException):\n"
        "    return JSONResponse({'detail': exc.detail}, status_code=exc.status_code)\n")
    files["README.md"] = "# Docs\n\nYour code turned into an API.\n"
    pending = _write(tmp_path, files)
    query = "how is an HTTPException turned into a JSON error response"
    terms = search_terms(query, ())
    assert [t.written for t in terms if t.identifier] == ["HTTPException"]
    scan = scan_unread(str(tmp_path), pending, query, terms, 0, {}, lambda text, _p: text)
    assert scan.snippets[0].file_path == "fastapi/exception_handlers.py"
    assert "README.md" not in [s.file_path for s in scan.snippets[:1]]


def test_the_package_code_comes_before_its_docs_examples_at_equal_evidence(tmp_path):
    """fastapi's docs_src/ holds a thousand example modules using the names its package
    defines: at equal evidence the package's module is shown first, the shorter example's
    higher term density notwithstanding (the ranking's docs factor)."""
    pending = _write(tmp_path, {
        "docs_src/models/tutorial001.py": "@app.get('/', response_model=Item)\n",
        "fastapi/routing.py": "def serialize(response_model, content):\n    return content\n"})
    query = "where is response_model used"
    terms = search_terms(query, ())
    scan = scan_unread(str(tmp_path), pending, query, terms, 0, {}, lambda text, _p: text,
                       priors=scan_priors(RankingConfig()))
    assert [s.file_path for s in scan.snippets] == ["fastapi/routing.py",
                                                    "docs_src/models/tutorial001.py"]


def test_the_window_shown_opens_on_the_first_place_holding_most_of_the_terms(tmp_path):
    """The window holding the most terms wins over one holding fewer, earlier or later; it
    opens on the line holding its first term, line numbers counted right past a line that
    lower-cases longer ('İ')."""
    lines = [f"filler line {n}" for n in range(120)]
    lines[3] = "İstanbul: ledger entries"        # one term, early
    lines[40] = "the ledger is balanced"          # two terms within twelve lines ...
    lines[47] = "reconcile the ledger nightly"
    lines[90] = "reconcile once more"             # one term, late
    paths = _write(tmp_path, {"books/ledger_tools.py": "\n".join(lines) + "\n"})
    query = "reconcile ledger"
    terms = search_terms(query, [])
    scan = scan_unread(str(tmp_path), paths, query, terms, 0, {}, lambda text, _path: text)
    [hit] = scan.snippets
    assert (hit.start_line, hit.end_line) == (41, 52)
    assert hit.text.split("\n")[0] == "the ledger is balanced"


def test_only_the_best_files_are_kept_in_rank_order(tmp_path):
    """Of many files holding the terms, the SCAN_KEEP best by evidence are kept, best
    first, whole-term files before partial ones."""
    files = {f"pkg/partial_{n:02d}.py": f"def f{n}():\n    return 'ledger'\n" for n in range(30)}
    files.update({f"pkg/full_{n:02d}.py": f"def g{n}():\n    return 'ledger reconcile'\n"
                  for n in range(5)})
    paths = _write(tmp_path, files)
    query = "reconcile ledger"
    scan = scan_unread(str(tmp_path), paths, query, search_terms(query, []), 0, {},
                       lambda text, _path: text)
    shown = [hit.file_path for hit in scan.snippets]
    assert shown[:5] == [f"pkg/full_{n:02d}.py" for n in range(5)]
    assert len(shown) == len(set(shown)) <= 20


SWAGGER = '''"""The interactive API documentation pages."""


def get_swagger_ui_html(openapi_url, title):
    """The Swagger UI page: its HTML, with the Swagger UI bundle and its CSS."""
    html = f"""<!DOCTYPE html><html><head><title>{title}</title>
    <link href="swagger-ui.css" rel="stylesheet"></head>
    <body><div id="swagger-ui"></div>
    <script src="swagger-ui-bundle.js"></script>
    <script>SwaggerUIBundle({{url: '{openapi_url}', dom_id: '#swagger-ui'}})</script>
    </body></html>"""
    return HTMLResponse(html)


def get_redoc_html(openapi_url, title):
    """The ReDoc page: its HTML."""
    return HTMLResponse(f"<html><title>{title}</title><redoc spec-url='{openapi_url}'></html>")
'''
# A docs page per language that says each word of the question once, as fastapi's do.
GUIDE = ("# {lang}: the docs\n\nThe app serves a Swagger UI page, an HTML page built at "
         "startup.\n\nSee the tutorial for more.\n")


def _never_indexed(root: Path):
    """A store over ``root`` whose bootstrap was cancelled before it read a file: every file
    is pending, so answers come from the scan of the files not read yet."""
    from contextd.config.project import Project
    from contextd.indexer import Indexer
    from contextd.store import open_store

    project = Project.open(root)
    store = open_store(project)
    cancelled = threading.Event()
    cancelled.set()
    Indexer(project, store, embed=False).ensure_indexed(cancel=cancelled, embed=False)
    return project, store


def test_the_first_answer_ranks_unread_files_as_the_complete_index_does(tmp_path):
    """A project never indexed: the module about the Swagger UI page holds "swagger" and
    "html" many times but never "built"; each language's docs page says every word of the
    question once. Ranked by the share of the words held, the docs pages came first; ranked
    as BM25 ranks files (occurrences, rarity, the docs factor), the module does, as it does
    once the whole project is indexed."""
    from contextd import ContextModule
    from contextd.indexer import Indexer
    from contextd.query.records import QueryRequest

    files = {"app/openapi/docs.py": SWAGGER,
             **{f"docs/{lang}/index.md": GUIDE.format(lang=lang)
                for lang in ("en", "de", "fr", "es", "ko")},
             **{f"app/part_{n}.py": f"def part_{n}(built):\n    return built + {n}\n"
                for n in range(4)}}
    _write(tmp_path, files)
    question = "how is the Swagger UI HTML page built"
    project, store = _never_indexed(tmp_path)
    try:
        assert len(store.progress_pending()[1]) == len(files)
        module = ContextModule(project, store)
        first = module.query(QueryRequest(question, k=5))
        assert first.hits[0].file_path == "app/openapi/docs.py", \
            [h.file_path for h in first.hits]
        assert first.hits[0].providers == ("text_scan",)
        module.shutdown()
        Indexer(project, store, embed=False).ensure_indexed(embed=False)
        module = ContextModule(project, store)
        complete = module.query(QueryRequest(question, k=5))
        assert not store.progress_pending()[1]
        assert complete.hits[0].file_path == "app/openapi/docs.py"
        module.shutdown()
    finally:
        store.close()


def _readme(text: str) -> ContextSnippet:
    return ContextSnippet(chunk_id="README.md:1", score=0.8, file_path="README.md", label="",
                          kind=ChunkKind.MARKDOWN_SECTION.value, text=text, language="markdown",
                          start_line=1, end_line=text.count("\n") + 1, tokens=30,
                          providers=("full_text",))


def test_a_scanned_module_is_placed_above_an_indexed_readme_that_says_each_word_once(
        tmp_path):
    """The README is indexed (a few hundred files are, early on), the module about the
    question is not. The README's chunk holds every word of the question once; the module
    holds most of them many times. Placed by the share of the words held, the module went
    below the README; placed by the same BM25 measure as the files scanned (occurrences,
    the docs factor), it goes above, as the complete index ranks them."""
    pending = _write(tmp_path, {"app/openapi/docs.py": SWAGGER,
                                **{f"app/part_{n}.py": f"def part_{n}(built):\n    return {n}\n"
                                   for n in range(4)}})
    readme = _readme(GUIDE.format(lang="en"))
    indexed, frequency = _indexed({"readme": readme.text,
                                   **{f"h{i}": HANDLER for i in range(20)}})
    query = "how is the Swagger UI HTML page built"
    scan = scan_unread(str(tmp_path), pending, query, search_terms(query, ()), indexed,
                       frequency, lambda text, _path: text, priors=scan_priors(RankingConfig()))
    assert scan.snippets[0].file_path == "app/openapi/docs.py"
    placed = place_scanned([readme], scan)
    assert [s.file_path for s in placed][:2] == ["app/openapi/docs.py", "README.md"]
    assert placed[0].score > placed[1].score


def test_scanned_windows_score_as_far_apart_as_their_files_measure(tmp_path):
    """MMR reads each score against the best one: scanned windows that scored 1% apart each
    left the choice to word overlap alone. A window's score is the one above it times the
    ratio of their measures (fastapi's openapi/utils.py, second of the scan at 91% of the
    first, was dropped for a file at 40%)."""
    files = {"pkg/ledger.py": "def reconcile(ledger):\n    '''Reconcile the ledger.'''\n"
                              "    return ledger.reconcile()\n",
             "pkg/books.py": "def close(ledger):\n    return ledger\n",
             **{f"pkg/other_{n}.py": f"def other_{n}():\n    return {n}\n" for n in range(8)}}
    paths = _write(tmp_path, files)
    query = "reconcile the ledger"
    scan = scan_unread(str(tmp_path), paths, query, search_terms(query, ()), 0, {},
                       lambda text, _path: text)
    assert [s.file_path for s in scan.snippets] == ["pkg/ledger.py", "pkg/books.py"]
    measures = [s.metadata["scan_score"] for s in scan.snippets]
    placed = place_scanned([], scan)
    assert placed[1].score / placed[0].score == pytest.approx(measures[1] / measures[0],
                                                              rel=0.01)
    assert placed[1].score / placed[0].score < 0.8


def test_files_whose_paths_spell_most_of_the_query_are_searched_first():
    """The budget may end before the last source file: the paths that spell most of the
    question's words go first, source code before docs and tests, not every path spelling
    some term alike (wagtail's ``import_redirects.py`` spelt 'port' as much as
    ``models/sites.py`` spelt 'site'); the module searched first is the one the question is
    about, wherever the listing put it."""
    paths = ["wagtail/contrib/redirects/management/commands/import_redirects.py",
             "wagtail/admin/reports/audit.py", "wagtail/admin/views/request_log.py",
             "wagtail/tests/test_sites.py", "docs/reference/sites.md",
             *[f"wagtail/admin/part_{n}.py" for n in range(5)], "wagtail/models/sites.py"]
    stems = frozenset(light_stem(w) for w in ("site", "matched", "request", "hostname", "port"))
    order = scan_order(paths, PathFactor(PathWords(paths), stems))
    assert order[0] == "wagtail/models/sites.py"
    assert order.index("docs/reference/sites.md") > order.index("wagtail/admin/part_4.py")
    assert order[-1] == "wagtail/tests/test_sites.py"


# One parameter docstring that two modules carry (fastapi's applications.py and routing.py).
RESPONSE_DOC = '''    """
    The response model of the path operation: the response data is filtered by it.
    Fields the model does not declare are left out of what is sent back to the client,
    and the values are converted to the declared types, validated, and serialized.
    Read more in the tutorial about the response model, the status codes it may carry,
    the headers that go with it, and how extra models inherit from a base model.
    A model may be a list of models, a dictionary of them, or a union of several.
    The OpenAPI schema of the operation shows it, with examples where they are given.
    When no model is given the return annotation of the function is read instead.
    """
'''


def test_a_window_that_copies_a_better_file_s_window_gives_way_to_the_file_s_own(tmp_path):
    """Both modules' best window for the question is the docstring they share; the answer's
    near-duplicate step keeps one file of the two, so the second module shows its next best
    window that is no copy, and both files are shown."""
    applications = "".join(f"def {verb}(path, response_model=None):\n{RESPONSE_DOC}"
                           f"    return route(path, response_model)\n\n\n"
                           for verb in ("get", "put", "post", "patch", "delete", "head"))
    routing = (f"def get(path, response_model=None):\n{RESPONSE_DOC}"
               "    return route(path, response_model)\n\n\n"
               + "".join(f"def helper_{n}(value):\n    return value + {n}\n\n\n"
                         for n in range(4))
               + "def serialize_response(field, data):\n"
               "    # the response data, validated by the response model's fields\n"
               "    return field.validate(data)\n")
    paths = _write(tmp_path, {"pkg/applications.py": applications, "pkg/routing.py": routing,
                              **{f"pkg/other_{n}.py": f"def other_{n}():\n    return {n}\n"
                                 for n in range(6)}})
    query = "where is response_model used to filter the response data"
    scan = scan_unread(str(tmp_path), paths, query, search_terms(query, ()), 0, {},
                       lambda text, _path: text)
    assert [s.file_path for s in scan.snippets] == ["pkg/applications.py", "pkg/routing.py"]
    assert scan.snippets[1].start_line > 1  # not the docstring the two files share
    shown = collapse_near_duplicates(place_scanned([], scan))
    assert [s.file_path for s in shown] == ["pkg/applications.py", "pkg/routing.py"]


def test_an_indexed_module_is_measured_by_its_whole_file_as_the_scanned_ones_are(tmp_path):
    """fastapi's security/http.py was indexed; its chunk the index found says "bearer" and
    "authorization" once, while the tests not read yet say them throughout. Measured by that
    chunk, the module went below a dozen scanned tests; measured by its file on disk, as a
    scanned file is, it stays above them."""
    header = ('class HTTPBearer:\n    """The bearer token of the Authorization header."""\n\n'
              + "".join(f"    option_{n} = {n}\n" for n in range(16)))
    module = header + "".join(
        f"    def step_{n}(self, request):\n"
        f"        authorization = request.headers.get('Authorization')  # the header\n"
        f"        scheme, token = authorization.split()  # bearer {n}\n" for n in range(8))
    test = ("def test_bearer(client):\n    token, scheme = 'bearer token', 'bearer'\n"
            "    header = {'Authorization': f'{scheme} {token}'}\n"
            "    assert client.get('/', headers=header).json() == {'scheme': scheme}\n")
    _write(tmp_path, {"pkg/security/http.py": module})
    pending = _write(tmp_path, {f"tests/test_bearer_{n}.py": test for n in range(6)})
    chunk = _chunk("pkg/security/http.py", header, 0.9)
    indexed, frequency = _indexed({"http": chunk.text, **{f"h{i}": HANDLER for i in range(30)}})
    query = "how does the bearer token scheme read the Authorization header"
    scan = scan_unread(str(tmp_path), pending, query, search_terms(query, ()), indexed,
                       frequency, lambda text, _path: text, priors=scan_priors(RankingConfig()))
    assert len(scan.snippets) == 6
    placed = place_scanned([chunk], scan)
    assert placed[0].file_path == "pkg/security/http.py", [s.file_path for s in placed]


def test_a_scanned_file_takes_the_path_factor_the_index_gives_it(tmp_path):
    """The first answers rank a scanned file as the complete index would: the same path
    factor (path words tempered by the query's length, and the area a title names before
    its colon), not the scan's own. Two files of the same text, one in the title's area:
    their measures differ by the index's ranking factor of their paths."""
    text = ("// Write adds a flag overriding the remote write path.\n"
            "func Write(path string) error {\n\treturn remoteWrite(path)\n}\n")
    files = {"cmd/promtool/main.go": text, "web/api/v1/openapi_paths.go": text,
             **{f"pkg/module_{i}/code.go": "func other() {}\n" for i in range(20)}}
    paths = _write(tmp_path, files)
    query = "promtool: Add a flag for overriding the remote write path"
    settings = RankingConfig()
    understood = understand(query, settings)
    factor = path_factor(understood, settings, PathWords(paths))
    scan = scan_unread(str(tmp_path), paths, query, search_terms(query, ()), 0, {},
                       lambda text, _path: text, path_factor=factor)
    scores = {s.file_path: s.metadata["scan_score"] for s in scan.snippets}
    assert list(scores)[0] == "cmd/promtool/main.go"

    def ranked(path: str) -> float:
        return boost_factor(_chunk(path, text, 1.0), understood, settings, PathWords(paths))

    assert scores["cmd/promtool/main.go"] / scores["web/api/v1/openapi_paths.go"] == \
        pytest.approx(ranked("cmd/promtool/main.go") / ranked("web/api/v1/openapi_paths.go"),
                      rel=0.01)
    assert factor.evidence("cmd/promtool/main.go")[1] == 1.0
