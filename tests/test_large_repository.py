"""Large, messy repositories answered right from the first query (issue 26).

- a cold first query on a never-queried index of a few thousand generated files has lexical
  hits and leaves no provider out: building the BM25 and symbol indexes is not cut off by
  the providers' answer timeout (it used to be: ``provider full_text timed out after 2000 ms``
  and one irrelevant hit), and its note claims nothing about providers left out;
- the BM25 arrays are saved beside the index, and the next process loads them instead of
  tokenising every chunk again, answering the same;
- translations of one page (fastapi's ``docs/<lang>/``) do not fill the top 5, and a query in
  one language prefers the page in that language;
- where prose outnumbers code (fastapi's documentation and examples), the lexical provider's
  answer still holds source chunks, within its limit, so the hybrid that cuts its fused list
  there keeps them;
- copies of one docstring (fastapi's ``APIRouter.get``, ``.put``, ``.post``...) do not use up
  the lexical provider's candidates.

Real parts throughout: generated files in a tmp directory, the real indexer and DuckDB store,
the real ContextModule; lexical and symbol providers only (no model needed).
"""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

from contextd import ContextModule
from contextd.config.loading import config_from_dict
from contextd.config.project import Project
from contextd.indexer import Indexer
from contextd.providers.fulltext import SAVED_INDEX
from contextd.query.left_out import left_out_providers
from contextd.query.records import QueryRequest
from contextd.runtime.indexing_notes import ready_results
from contextd.store import open_store

GENERATED_FILES = 3000
LEXICAL = ("full_text", "symbol")
# Far below what building the indexes of 3,000 files takes, far above answering from them.
TIGHT_TIMEOUT_MS = 150

_MODULE = '''"""Inventory service number {i}: keeps the {noun} records of warehouse {i}."""


class {cls}Repository:
    """Stores {noun} rows for shelf {i}."""

    def load_{noun}_batch(self, shelf_id: int) -> list[dict]:
        rows = self.cursor.execute("SELECT * FROM {noun} WHERE shelf = ?", [shelf_id])
        return [dict(r) for r in rows]

    def reconcile_{noun}_counts(self, expected: int) -> bool:
        return self.count_{noun}() == expected
'''
_NOUNS = ("pallet", "crate", "bin", "tote", "carton", "drum", "sack", "reel")


def _generated_repository(root: Path) -> Path:
    for i in range(GENERATED_FILES):
        noun = _NOUNS[i % len(_NOUNS)]
        folder = root / "services" / f"area{i // 100:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"inventory_{i:04d}.py").write_text(
            _MODULE.format(i=i, noun=noun, cls=f"{noun.title()}{i}"))
    (root / "services" / "refunds.py").write_text(
        "def compute_refund_for_damaged_shipment(order, damage_report):\n"
        "    \"\"\"Refund the damaged share of a shipment to the customer.\"\"\"\n"
        "    return order.total * damage_report.damaged_share\n")
    return root


def _config(tmp_path: Path, timeout_ms: int):
    return config_from_dict({
        "storage": {"db_path": str(tmp_path / "index" / "context.duckdb")},
        "providers": {pid: {"timeout_ms": timeout_ms} for pid in LEXICAL}})


def _cold_module(root: Path, config) -> ContextModule:
    project = Project(root=root, config=config)
    return ContextModule(project, open_store(project))


@contextlib.contextmanager
def _lexical_module(tmp_path, root, embed: bool = False):
    """A ContextModule over ``root`` indexed without vectors (the lexical and symbol
    indexes only; ``embed``: with the real model's vectors too), shut down and closed after
    the block."""
    project = Project(root=root, config=_config(tmp_path, 10_000))
    store = open_store(project)
    Indexer(project, store, embed=embed).ensure_indexed()
    module = ContextModule(project, store)
    try:
        yield module
    finally:
        module.shutdown()
        store.close()


def test_cold_first_query_on_thousands_of_files_has_lexical_hits_and_no_timeout(tmp_path):
    root = _generated_repository(tmp_path / "repo")
    config = _config(tmp_path, TIGHT_TIMEOUT_MS)
    project = Project(root=root, config=config)
    store = open_store(project)
    Indexer(project, store, embed=False).ensure_indexed()
    store.close()

    module = _cold_module(root, config)  # nothing built in memory yet
    try:
        response = module.query(QueryRequest("refund for a damaged shipment", k=5,
                                             providers=LEXICAL))
        assert not left_out_providers(response.notes), response.notes
        assert response.hits and response.hits[0].file_path == "services/refunds.py"
        assert {"full_text"} <= set(response.providers)
        assert ready_results(response.notes) == "lexical and symbol results are complete"
    finally:
        module.shutdown()
        module.store.close()

    saved = tmp_path / "index" / SAVED_INDEX
    assert saved.exists(), "the BM25 arrays are kept beside the index"
    again = _cold_module(root, config)
    try:
        full_text = again.pipeline.provider("full_text")
        second = again.query(QueryRequest("refund for a damaged shipment", k=5,
                                          providers=LEXICAL))
        bm25 = full_text.index.bm25
        # Loaded, not rebuilt: every chunk sits in the frozen arrays read from the file.
        assert bm25.frozen_count == len(bm25) == len(again.pipeline.catalog.rows)
        assert [h.chunk_id for h in second.hits] == [h.chunk_id for h in response.hits]
    finally:
        again.shutdown()
        again.store.close()


def test_a_note_never_claims_complete_results_when_a_provider_was_left_out():
    notes = ("provider full_text left out: timed out after 2000 ms",)
    assert "complete" not in ready_results(notes) and "full_text" in ready_results(notes)


_PAGE_CODE = """
```python
from fastapi import FastAPI, HTTPException

app = FastAPI()

@app.get("/items/{item_id}")
async def read_item(item_id: str):
    if item_id not in items:
        raise HTTPException(status_code=404, detail="Item not found")
    return {"item": items[item_id]}
```
"""
_PROSE = {
    "en": "Use HTTPException to return an error response with a status code to the client.",
    "de": "Verwenden Sie HTTPException, um dem Client eine Fehlerantwort zu senden.",
    "fr": "Utilisez HTTPException pour renvoyer une réponse d'erreur au client.",
    "es": "Use HTTPException para devolver una respuesta de error al cliente.",
    "pt": "Use HTTPException para retornar uma resposta de erro ao cliente.",
    "ja": "HTTPException を使ってクライアントにエラーレスポンスを返します。",
    "zh": "使用 HTTPException 向客户端返回错误响应。",
    "ko": "HTTPException 을 사용하여 클라이언트에 오류 응답을 반환합니다.",
    "ru": "Используйте HTTPException, чтобы вернуть клиенту ответ с ошибкой.",
    "tr": "İstemciye bir hata yanıtı döndürmek için HTTPException kullanın.",
}


def _translated_repository(root: Path) -> Path:
    for language, prose in _PROSE.items():
        page = root / "docs" / language / "docs" / "tutorial" / "handling-errors.md"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(f"# Handling errors\n\n{prose}\n{_PAGE_CODE}\n{prose}\n")
    source = root / "app" / "exception_handlers.py"
    source.parent.mkdir(parents=True)
    source.write_text(
        "from starlette.responses import JSONResponse\n\n\n"
        "async def http_exception_handler(request, exc: HTTPException) -> JSONResponse:\n"
        "    \"\"\"Turn an HTTPException raised by an endpoint into its JSON error response.\"\"\"\n"
        "    return JSONResponse({\"detail\": exc.detail}, status_code=exc.status_code,\n"
        "                        headers=getattr(exc, \"headers\", None))\n")
    (root / "app" / "exceptions.py").write_text(
        "class HTTPException(Exception):\n"
        "    \"\"\"An error with an HTTP status code, returned to the client as a response.\"\"\"\n\n"
        "    def __init__(self, status_code: int, detail=None, headers=None):\n"
        "        self.status_code, self.detail, self.headers = status_code, detail, headers\n")
    (root / "app" / "routing.py").write_text(
        "from app.exceptions import HTTPException\n\n\n"
        "def error_response_for(exc: HTTPException):\n"
        "    \"\"\"The error response of an HTTPException raised while routing.\"\"\"\n"
        "    return {\"status\": exc.status_code, \"detail\": exc.detail}\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def test_translated_copies_of_a_page_do_not_fill_the_top_5(tmp_path):
    root = _translated_repository(tmp_path / "repo")
    with _lexical_module(tmp_path, root) as module:
        english = module.query(QueryRequest(
            "how is an HTTPException turned into an error response", k=5, providers=LEXICAL))
        files = [h.file_path for h in english.hits]
        pages = [f for f in files if f.startswith("docs/")]
        assert "app/exception_handlers.py" in files, files
        assert {f.split("/")[1] for f in pages} <= {"en"}, f"translations in the top 5: {files}"

        japanese = module.query(QueryRequest(
            "HTTPException のエラーレスポンスはどう返しますか", k=5, providers=LEXICAL))
        first_page = next(h.file_path for h in japanese.hits if h.file_path.startswith("docs/"))
        assert first_page.startswith("docs/ja/"), [h.file_path for h in japanese.hits]


def _other_files_and_git(folder: Path, name: str) -> None:
    """30 small modules beside the files a test is about, so that the question's words are
    rare (BM25's IDF), and the repository made a git repository."""
    for i in range(30):
        (folder / f"{name}_{i}.py").write_text(
            f"def {name}_{i}(request):\n    return render_page(request, {i})\n")
    subprocess.run(["git", "init", "-q", str(folder.parent)], check=True)


def test_a_readme_repeating_the_question_does_not_outrank_the_code(tmp_path):
    """The project's README shows its main command with the very question as the example;
    the code that answers the question comes first."""
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    question = "how does the indexer resume an interrupted bootstrap"
    (root / "README.md").write_text(
        "# tool\n\nIndex this repository and answer a query:\n\n```bash\n"
        f'tool query "{question}"\n```\n\nThe first run builds the index.\n')
    (root / "src" / "indexer.py").write_text(
        "class Indexer:\n"
        "    def resume_bootstrap(self, job):\n"
        "        \"\"\"Resume an interrupted bootstrap from the files its job has not done.\"\"\"\n"
        "        pending = [f for f in job.files if f not in job.done]\n"
        "        return self.index_files(pending)\n")
    _other_files_and_git(root / "src", "handler")
    with _lexical_module(tmp_path, root) as module:
        answer = module.query(QueryRequest(question, k=5, providers=LEXICAL))
        assert [h.file_path for h in answer.hits][:1] == ["src/indexer.py"], answer.hits


_LIMITER = '''class TokenBucketLimiter:
    """Allow a burst of requests, then refill the bucket at a steady rate per second."""

    def __init__(self, capacity: int, refill_per_second: float):
        self.capacity, self.refill_per_second = capacity, refill_per_second
        self.tokens, self.updated = capacity, 0.0

    def allow(self, now: float) -> bool:
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.refill_per_second)
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False
'''


def test_copies_of_a_file_collapse_into_one_hit(tmp_path):
    """A generated mirror and a copied-in package repeat the source: one hit, naming them."""
    root = tmp_path / "repo"
    for folder in ("src/app", "generated/app", "third_party/app"):
        (root / folder).mkdir(parents=True)
        (root / folder / "limiter.py").write_text(_LIMITER)
    for i in range(30):
        (root / "src" / "app" / f"view_{i}.py").write_text(
            f"def view_{i}(request):\n    return render_page(request, {i})\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    with _lexical_module(tmp_path, root) as module:
        answer = module.query(QueryRequest("token bucket limiter refill rate", k=5,
                                           providers=LEXICAL))
        limiters = [h for h in answer.hits if h.file_path.endswith("limiter.py")]
        assert len({h.file_path for h in limiters}) == 1, [h.file_path for h in answer.hits]
        assert len(limiters[0].metadata.get("duplicates", ())) == 2


def _pages_and_one_function(root: Path) -> str:
    """Sixty pages about upload retries and the one function computing the delay; the
    question whose answer is that function."""
    (root / "docs").mkdir(parents=True)
    (root / "src").mkdir()
    for i in range(60):
        (root / "docs" / f"guide_{i:02d}.md").write_text(
            f"# Uploads, part {i}\n\nA failed upload is retried: the retry delay of failed "
            f"uploads grows after each attempt (step {i}), so the retry delay of uploads that "
            f"failed {i} times is longer.\n")
    (root / "src" / "uploader.py").write_text(
        "def next_retry_delay(attempt: int) -> float:\n"
        "    \"\"\"Seconds to wait before retrying an upload: doubled per attempt.\"\"\"\n"
        "    return min(60.0, 0.5 * 2 ** attempt)\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return "how is the retry delay of failed uploads computed"


def test_source_chunks_reach_the_fused_list_where_prose_outnumbers_code(tmp_path):
    """Sixty documentation pages match the question's words better than the code that
    implements it; the full-text provider keeps a share of its answer for source chunks
    and stays within its limit (it used to append them past it, and the hybrid provider,
    which cuts its fused list at that limit, dropped every one)."""
    root = tmp_path / "repo"
    question = _pages_and_one_function(root)
    with _lexical_module(tmp_path, root) as module:
        _source_within_limit(module, "full_text", question)
        answer = module.query(QueryRequest(question, k=5, by_file=True))
        assert "src/uploader.py" in [f.file_path for f in answer.files], answer.files


def test_the_semantic_provider_keeps_source_among_its_candidates_too(tmp_path):
    """With every vector computed, the pages are nearer the question's meaning than the
    code (fastapi's questions answered from pages alone): the semantic provider keeps a
    share of its answer for source chunks as well, within its limit."""
    root = tmp_path / "repo"
    question = _pages_and_one_function(root)
    with _lexical_module(tmp_path, root, embed=True) as module:
        hits = _source_within_limit(module, "semantic", question)
        assert sum(h.file_path.startswith("docs/") for h in hits) >= len(hits) // 2


def _source_within_limit(module, provider_id: str, question: str, limit: int = 20) -> list:
    """The provider's answer of at most ``limit`` hits, the source file among them."""
    from contextd.providers.base import ProviderQuery
    from contextd.records import ContextScope, TokenBudget

    module.pipeline.warm_up(wait=True)
    hits = module.pipeline.provider(provider_id).query(
        ProviderQuery(question, limit=limit), ContextScope(), TokenBudget())
    assert len(hits) <= limit
    assert "src/uploader.py" in [h.file_path for h in hits]
    return hits


_METHOD = '''
    def {method}(self, path: str, operation_id: str | None = None):
        """Add a {upper} path operation. The OpenAPI schema of the routes lists it: the
        OpenAPI operation generated for it from the routes holds the operation id, the
        OpenAPI parameters generated from the routes and the OpenAPI responses generated
        from the response model of the routes, in the OpenAPI schema of the routes.
        The OpenAPI schema generated from the routes keeps its tags, the OpenAPI schema
        generated from the routes keeps its summary, description, callbacks, servers,
        security, deprecation, webhooks, extensions and links: OpenAPI routes, OpenAPI schema,
        generated."""
        return self.add_route(path, "{upper}", operation_id)
'''


def test_copies_of_a_docstring_do_not_use_up_the_lexical_candidates(tmp_path):
    """Eight methods carry the same long docstring; the code that answers the question is
    still among the full-text provider's first few candidates (the copies step back)."""
    from contextd.providers.base import ProviderQuery
    from contextd.records import ContextScope, TokenBudget

    root = tmp_path / "repo"
    (root / "app").mkdir(parents=True)
    methods = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
    (root / "app" / "routing.py").write_text("class Router:\n" + "".join(
        _METHOD.format(method=m, upper=m.upper()) for m in methods))
    (root / "app" / "schema.py").write_text(
        "def get_openapi(routes):\n"
        "    \"\"\"The OpenAPI schema generated from the routes.\"\"\"\n"
        "    return {\"paths\": {route.path: route.operation() for route in routes}}\n")
    _other_files_and_git(root / "app", "view")
    with _lexical_module(tmp_path, root) as module:
        module.pipeline.warm_up(wait=True)
        hits = module.pipeline.provider("full_text").query(
            ProviderQuery("where is the OpenAPI schema generated from the routes", limit=4),
            ContextScope(), TokenBudget())
        files = [h.file_path for h in hits]
        assert "app/schema.py" in files, [(h.file_path, h.label) for h in hits]
        assert len(hits) == 4


def test_two_similar_functions_of_one_module_are_not_copies():
    """Small functions of one module share most of their words and do different things
    (with the docstrings stripped, toolz's ``merge`` and ``merge_with``): only near-identical
    texts step back, and copies in other files stay candidates for the pipeline to merge."""
    from contextd.query.duplicates import copies_last

    merge = ("def merge(*dicts, **kwargs):\n    factory = _get_factory(merge, kwargs)\n"
             "    rv = factory()\n    for d in dicts:\n        rv.update(d)\n    return rv\n"
             "# keys of later dictionaries win over the earlier ones in the result\n")
    # 91% of their words in common: a copy by the pipeline's cross-file rule (80%)
    merge_with = merge.replace("def merge(", "def merge_with(func, ").replace(
        "rv.update(d)", "rv.update(func(d))")
    hits = [("a", 1.0, "toolz/dicttoolz.py", merge), ("b", 0.995, "toolz/dicttoolz.py", merge_with),
            ("c", 0.99, "toolz/curried.py", merge), ("d", 0.5, "toolz/other.py", "x = 1\n")]
    kept = copies_last(hits, lambda h: h[1], lambda h: h[3], lambda h: h[2], limit=3)
    assert [h[0] for h in kept] == ["a", "b", "c"]
    copy = ("e", 0.999, "toolz/dicttoolz.py", merge)  # the same text twice in one file
    kept = copies_last([hits[0], copy, *hits[1:]], lambda h: h[1], lambda h: h[3],
                       lambda h: h[2], limit=3)
    assert [h[0] for h in kept] == ["a", "b", "c"]
