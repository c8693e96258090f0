"""ContextModule: task contexts, budgets, fallback, metrics, stats, JSON round trips."""

from __future__ import annotations

import json

import pytest

from contextd.query.budget import BudgetManager, TaskType
from contextd.config.loading import config_from_dict
from contextd.config.sections import BudgetConfig
from contextd import ContextModule
from contextd.config.project import Project
from contextd.query.records import FileResult, Hit, QueryRequest, QueryResponse
from contextd.query.understanding import understand
from contextd.records import ContextScope, ProviderType, TaskContext, to_dict


def test_budget_manager_adjustments():
    manager = BudgetManager(BudgetConfig(default_max_tokens=1000, reserve_for_prompt=200))
    assert manager.calculate(5).max_tokens == 1000
    assert manager.calculate(9).max_tokens == 1500
    assert manager.calculate(2).max_tokens == 700
    assert manager.calculate(9, "architecture").max_tokens == 1950
    assert manager.calculate(5, TaskType.BUGFIX).max_tokens == 800
    assert manager.available(manager.calculate(5)) == 800
    assert manager.log_usage(manager.calculate(5), 700)
    assert not manager.log_usage(manager.calculate(5), 100)


@pytest.mark.parametrize("task_type,complexity", [("BUGFIX", 2), ("ARCHITECTURE", 9), (None, 5)])
def test_task_context_respects_budget(golden_module, task_type, complexity):
    task = {"task_id": "T-1", "title": "Fix token refresh",
            "description": "Expired access tokens are not refreshed; check JwtValidator",
            "keywords": ["refresh_token"], "complexity": complexity, "task_type": task_type}
    context = golden_module.get_task_context(task)
    budget = golden_module.budgets.calculate(complexity, task_type)
    assert context.snippets and context.task_id == "T-1"
    assert context.total_tokens == sum(s.tokens for s in context.snippets)
    assert context.total_tokens <= budget.max_tokens - budget.reserve_for_prompt
    assert any(s.label.endswith("refresh_token") for s in context.snippets[:3])
    assert set(context.providers) <= {"semantic", "symbol", "full_text", "git_history"}
    assert "total" in context.timings_ms and "semantic" in context.timings_ms


@pytest.mark.parametrize("budget", [50, 200, 700])
def test_query_never_exceeds_budget(golden_module, budget):
    response = golden_module.query(QueryRequest("order payment refund cart", k=20,
                                                max_tokens=budget))
    assert response.hits and response.total_tokens <= budget
    assert sum(h.tokens for h in response.hits) == response.total_tokens


def test_scope_hints_of_a_task(golden_module):
    context = golden_module.get_task_context({"title": "retry failed requests",
                                              "paths": ["web/"], "languages": ["typescript"]})
    assert context.snippets and all(s.file_path.startswith("web/") for s in context.snippets)


def test_fallback_returns_empty_context(golden_module):
    for fallback in (True, False):
        config = config_from_dict({"core": {"fallback_enabled": fallback},
                                   "query": {"default_k": 5}})
        module = ContextModule(Project(golden_module.project.root, config), golden_module.store)
        task = {"title": "anything", "k": "not a number"}
        if fallback:
            context = module.get_task_context(task)
            assert context.snippets == () and "context unavailable" in context.notes[0]
        else:
            with pytest.raises(ValueError):
                module.get_task_context(task)


def test_pending_model_still_answers_lexically(golden_module):
    module = ContextModule(golden_module.project, golden_module.store)  # fresh embedder handle
    response = module.query(QueryRequest("RateLimiter.allow", k=3))
    if module.embedder.loading:  # the model loads in seconds; the answer did not wait for it
        assert "semantic results pending: model loading" in response.notes
    assert response.hits[0].label == "RateLimiter.allow"
    module.embedder.wait(60)
    module.shutdown()


def test_usage_metrics_and_stats(golden_module):
    before = golden_module.stats()["storage"]["queries"]  # stats() writes queued usage first
    golden_module.query(QueryRequest("cache eviction", k=2))
    stats = golden_module.stats()
    assert stats["storage"]["queries"] == before + 1
    ids = {p["id"]: p for p in stats["providers"]}
    assert {"semantic", "symbol", "full_text", "git_history", "hybrid"} <= set(ids)
    assert ids["semantic"]["available"] and ids["semantic"]["stats"]["vectors"] > 0
    assert stats["performance"]["avg_ms"]["total"] > 0
    assert stats["languages"]["python"] > 0


def test_request_and_response_round_trip_through_json(golden_module):
    request = QueryRequest("x", k=3, scope=ContextScope(paths=("src",), kinds=("CODE_CLASS",)),
                           max_tokens=100, min_score=0.1, providers=("symbol",), task_id="t",
                           by_file=True)
    assert QueryRequest.from_dict(json.loads(json.dumps(to_dict(request)))) == request
    response = golden_module.query(QueryRequest("LRUCache", k=3, by_file=True))
    again = QueryResponse.from_dict(json.loads(json.dumps(to_dict(response))))
    assert again == response and isinstance(again.hits[0], Hit)
    assert isinstance(again.files[0], FileResult)


def test_unknown_provider_is_a_usage_error(golden_module):
    from contextd.errors import UsageError

    with pytest.raises(UsageError, match="choose from: .*full_text"):
        golden_module.query(QueryRequest("x", providers=("nope",)))


def test_render_of_a_task_context(golden_module):
    context = golden_module.get_task_context({"title": "database connection retry"})
    block = golden_module.render(context)
    assert block.startswith("<project_context>") and block.endswith("</project_context>")
    assert isinstance(context, TaskContext) and 'path="src/shoptrack/db.py"' in block


# An issue as an agent pastes it: tracker boilerplate, an issue number, Markdown, prose.
ISSUE_TASK = {"task_id": "T-42", "title": "Fix: refreshing fails with an access token (#42)",
              "description": "`JwtValidator.refresh_token` should raise TokenError when it is "
                             "given an access token instead of a refresh token."}


def embedded_texts(module: ContextModule) -> set[str]:
    """The query texts the semantic provider embedded (its query-vector cache)."""
    return {text for _model, text in module.pipeline.provider("semantic")._query_vectors}


def test_issue_style_task_reaches_its_file_through_query_understanding(golden_module):
    raw = golden_module.build_query(ISSUE_TASK)
    texts = understand(raw, golden_module.config.ranking).texts_by_kind()
    assert all(texts[kind] != raw for kind in (ProviderType.SEMANTIC, ProviderType.FULL_TEXT,
                                               ProviderType.SYMBOL))
    assert texts[ProviderType.SYMBOL] == "JwtValidator.refresh_token TokenError"
    context = golden_module.get_task_context(ISSUE_TASK)
    top = context.snippets[0]
    assert (top.file_path, top.label) == ("src/shoptrack/auth.py", "JwtValidator.refresh_token")
    assert {"semantic", "symbol", "full_text"} <= set(top.providers)
    assert texts[ProviderType.SEMANTIC] in embedded_texts(golden_module)  # the dense query
    assert raw not in embedded_texts(golden_module)
    assert context.query == raw  # reported and recorded as asked


def test_understanding_switch_sends_every_provider_the_raw_text(golden_module):
    config = config_from_dict({"query": {"understanding_enabled": False}})
    module = ContextModule(Project(golden_module.project.root, config), golden_module.store)
    module.embedder.wait(60)
    try:
        context = module.get_task_context(ISSUE_TASK)
        assert context.snippets and embedded_texts(module) == {module.build_query(ISSUE_TASK)}
    finally:
        module.shutdown()


def test_by_file_ranks_the_files_of_the_whole_candidate_pool(golden_module):
    request = QueryRequest("Fix: cancelling an order does not refund the payment", k=4,
                           max_tokens=60, by_file=True)
    response = golden_module.query(request)
    paths = [f.file_path for f in response.files]
    assert len(paths) == 4 == len(set(paths))
    assert set(paths[:2]) == {"src/shoptrack/orders.py", "src/shoptrack/payments.py"}
    assert [f.score for f in response.files] == sorted((f.score for f in response.files),
                                                       reverse=True)
    # more files than the 60-token budget has room for snippets: files are not cut by it
    assert len({h.file_path for h in response.hits}) < len(paths)
    assert all(start <= end for f in response.files for start, end in f.ranges)
    assert golden_module.query(QueryRequest(request.query, k=4)).files == ()


MMR_FILES = {
    "loader/config.py": '''def load_config(path):
    """Read the TOML configuration file and return its settings as a dict."""
    with open(path, "rb") as fh:
        return tomllib.load(fh)
''',
    # Reworded, not copied word for word: a verbatim copy of another file collapses into the
    # original before MMR (contextd.query.duplicates), which is tested elsewhere.
    "backup/config_copy.py": '''def read_config_file(filename):
    """Read a TOML config file from disk and give back its settings as a dictionary."""
    with open(filename, "rb") as handle:
        data = tomllib.load(handle)
    return data
''',
    "settings/env.py": '''def settings_from_environment(prefix):
    """Build the settings dict from environment variables that start with prefix."""
    return {k[len(prefix):].lower(): v for k, v in os.environ.items() if k.startswith(prefix)}
''',
    "net/http.py": '''def fetch(url):
    """Download a web page over HTTP and return its body."""
    return http_client.get(url).body
''',
}


@pytest.mark.parametrize("mmr_lambda, keeps_duplicate", [(1.0, True), (0.5, False)])
def test_mmr_on_real_embeddings_drops_a_copied_function(tmp_path, mmr_lambda,
                                                        keeps_duplicate):
    """Two versions of one function rank side by side on relevance alone (lambda 1); with
    diversity weighed as much as relevance (0.5) the real model's vectors show the second
    adds nothing, and the next different answer takes its place."""
    root = tmp_path / "repo"
    for rel, text in MMR_FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    # Relevance is the model's alone here: the path boost would lift settings/env.py, whose
    # folder the query names (tests/test_path_words.py).
    (root / "context.toml").write_text(f"[query]\nmmr_lambda = {mmr_lambda}\n"
                                       "[ranking]\npath_words_boost = 0.0\n")
    module = ContextModule.open(str(root))
    try:
        hits = module.query(QueryRequest("read the settings from the configuration file", k=2,
                                         providers=("semantic",))).hits
    finally:
        module.shutdown()
    paths = {h.file_path for h in hits}
    assert "loader/config.py" in paths or "backup/config_copy.py" in paths
    both_copies = {"loader/config.py", "backup/config_copy.py"} <= paths
    assert both_copies == keeps_duplicate
    assert keeps_duplicate or "settings/env.py" in paths


def test_an_embedded_module_takes_over_from_a_background_owner(tmp_path):
    """The owner a CLI command leaves behind holds the index's lock: ContextModule.open stops
    it and owns the index, and a CLI query meanwhile is answered by the module's process."""
    import os
    import subprocess
    import sys
    import time

    from golden import git

    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "jwt.py").write_text("def validate_jwt(token):\n    return token\n")
    git(root, "init", "-q")
    env = dict(os.environ, CONTEXTD_LOAD_PLUGINS="")
    owner = subprocess.Popen([sys.executable, "-m", "contextd", "--root", str(root), "owner"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        lock = root / ".contextd" / "owner.lock"
        deadline = time.monotonic() + 60
        while not (lock.exists() and lock.read_text().strip() == str(owner.pid)):
            assert owner.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        module = ContextModule.open(str(root))
        try:
            assert owner.wait(timeout=30) is not None
            hits = module.query(QueryRequest("validate_jwt", k=3)).hits
            assert hits[0].file_path == "src/jwt.py"
            cli = subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), "--json",
                                  "stats"], capture_output=True, text=True, env=env, timeout=120)
            assert cli.returncode == 0, cli.stderr
            assert json.loads(cli.stdout)["owner"]["pid"] == os.getpid()
        finally:
            module.shutdown()
    finally:
        if owner.poll() is None:
            owner.kill()
