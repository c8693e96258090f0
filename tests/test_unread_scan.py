"""The text scan of files not indexed yet (contextd.query.unread_scan): the query's words are
searched and weighed by their rarity, a scanned window never ranks above an indexed chunk
that measures as much, and the note says how many files were searched. Real files on disk, a real
BM25 index for the document frequencies of the part indexed."""

from __future__ import annotations

from pathlib import Path

from contextd.config.sections import RankingConfig
from contextd.providers.fulltext import BM25Index, code_tokens
from contextd.query.literals import query_literals
from contextd.query.unread_scan import (
    PROVIDER_ID, place_scanned, scan_priors, scan_unread, search_terms,
)
from contextd.records import ChunkKind, ContextSnippet

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
