"""The knowledge base through the Engine (the object the CLI, the MCP tools and the owner
socket call), with real documents, a real DuckDB file and the real embedding model: five usage
scenarios, documents shared by contexts, the BLAKE3 re-add rules, folder adds,
scope folders, every bad input, and a property test of context isolation."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextd.runtime.engine import Engine
from contextd.errors import KnowledgeError
from contextd.knowledge.scope import knowledge_request
from contextd.query.records import QueryRequest
from contextd.records import ContextScope
from contextd.store.base import KNOWLEDGE_PREFIX
from knowledge_docs import (
    make_docx, make_encrypted_pdf, make_html, make_markdown, make_pdf, make_scanned_pdf,
)

PROJECT_FILES = {
    "src/hooks/auth_hook.py": "def refresh_session_token(user):\n"
                              "    '''Refresh the session token of a signed-in user.'''\n"
                              "    return user.token\n",
    "lib/hooks/cache_hook.py": "def warm_cache_entries(keys):\n"
                               "    '''Preload cache entries for the given keys.'''\n"
                               "    return list(keys)\n",
    "src/api/tests/test_routes.py": "def test_health_route_answers_ok():\n"
                                    "    assert True\n",
    "src/api/routes.py": "def health_route():\n    '''Answer the health check.'''\n"
                         "    return 'ok'\n",
}


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """A project with a few source files, indexed, and a folder of documents."""
    base = tmp_path_factory.mktemp("kb")
    root = base / "project"
    _write(root, PROJECT_FILES)
    docs = root / "library"
    make_pdf(docs / "wafr.pdf", [
        "Operational excellence pillar: runbooks, observability and small reversible changes",
        "Security pillar: identity and access management, detective controls, data "
        "protection in transit and at rest",
        "Reliability pillar: recover from failure, test recovery procedures, scale "
        "horizontally"])
    make_pdf(docs / "medicaid.pdf", [
        "Medicaid eligibility: income limits and household size determine coverage",
        "HIPAA privacy rule: protected health information of patients must stay "
        "confidential"])
    make_pdf(docs / "fin-lens.pdf", [
        "Financial services lens: regulatory reporting, market data retention and "
        "fraud detection controls"])
    engine = Engine.open(str(root))
    engine.ensure_indexed()
    yield engine, root, docs
    engine.close()


def _docs_of(response) -> set[str]:
    return {h.metadata.get("document", h.file_path) for h in response.hits}


def _search(engine, query, contexts=None, **kw):
    return engine.query(knowledge_request(query, contexts, wait_for_model=True, **kw))


def test_default_context_exists_and_is_never_deleted(env):
    engine, _, _ = env
    names = [c.name for c in engine.knowledge_list_contexts().contexts]
    assert "default" in names and names == sorted(names)
    with pytest.raises(KnowledgeError, match="'default' context cannot be deleted"):
        engine.knowledge_delete_context("default", confirm=True)
    with pytest.raises(KnowledgeError, match="reserved"):
        engine.knowledge_create_context("DEFAULT")


def test_scenario_1_separate_contexts_do_not_mix(env):
    engine, _, docs = env
    engine.knowledge_create_context("aws-architecture", "AWS architecture and WAFR documents")
    engine.knowledge_create_context("healthcare-compliance")
    engine.knowledge_add([str(docs / "wafr.pdf")], ["aws-architecture"])
    engine.knowledge_add([str(docs / "medicaid.pdf")], ["healthcare-compliance"])
    response = _search(engine, "security pillar", ["aws-architecture"])
    assert response.hits and _docs_of(response) == {str(docs / "wafr.pdf")}
    best = response.hits[0]
    assert best.metadata["page"] == 2 and "Security pillar" in best.snippet
    assert best.metadata["contexts"] == ["aws-architecture"]
    assert best.file_path == KNOWLEDGE_PREFIX + "library/wafr.pdf"
    health = _search(engine, "patient privacy", ["healthcare-compliance"])
    assert _docs_of(health) == {str(docs / "medicaid.pdf")}
    assert health.hits[0].metadata["page"] == 2


def test_scenario_2_one_document_in_two_contexts_is_stored_once(env):
    engine, _, docs = env
    report = engine.knowledge_add([str(docs / "fin-lens.pdf")],
                                  ["aws-architecture,healthcare-compliance"])
    assert report.added == 1 and set(report.contexts) == {"aws-architecture",
                                                          "healthcare-compliance"}
    for context in ("aws-architecture", "healthcare-compliance"):
        found = _search(engine, "fraud detection in financial services", [context])
        assert str(docs / "fin-lens.pdf") in _docs_of(found)
        shown = engine.knowledge_show_context(context)
        assert str(docs / "fin-lens.pdf") in {d.document for d in shown.documents}
    path = KNOWLEDGE_PREFIX + "library/fin-lens.pdf"
    assert list(engine.store.file_states(path)) == [path]
    assert len(engine.store.kb_documents(paths=[path])) == 1


def test_scenario_3_search_without_context_covers_every_context(env):
    engine, _, docs = env
    response = _search(engine, "security and compliance controls", k=20)
    contexts = {c for h in response.hits for c in h.metadata["contexts"]}
    assert {"aws-architecture", "healthcare-compliance"} <= contexts
    assert all(h.file_path.startswith(KNOWLEDGE_PREFIX) for h in response.hits)


def test_scenario_4_context_management(env):
    engine, _, _ = env
    listed = {c.name: c for c in engine.knowledge_list_contexts().contexts}
    aws = engine.knowledge_show_context("AWS-Architecture")  # names ignore case
    assert listed["aws-architecture"].documents == len(aws.documents) == 2
    assert listed["aws-architecture"].chunks == sum(d.chunks for d in aws.documents) > 0
    assert aws.embedding_model and aws.context.description.startswith("AWS architecture")
    engine.knowledge_create_context("test-context")
    with pytest.raises(KnowledgeError, match="confirm"):
        engine.knowledge_delete_context("test-context")
    deleted = engine.knowledge_delete_context("test-context", confirm=True)
    assert deleted.documents_deleted == ()
    assert "test-context" not in {c.name for c in engine.knowledge_list_contexts().contexts}


def test_scenario_5_no_context_means_default(env):
    engine, root, _ = env
    note = make_markdown(root / "notes" / "onboarding.md",
                         {"Laptop setup": "Install the VPN client and request repository "
                                          "access from the platform team."})
    report = engine.knowledge_add([str(note)])
    assert report.contexts == ("default",) and report.added == 1
    response = _search(engine, "VPN client for new laptops")
    assert response.hits[0].metadata["document"] == str(note)
    assert response.hits[0].metadata["contexts"] == ["default"]


def test_a_shared_document_is_found_from_both_and_removed_cleanly(env):
    engine, root, _ = env
    engine.knowledge_create_context("ctx-a")
    engine.knowledge_create_context("ctx-b")
    doc = make_docx(root / "shared" / "runbook.docx",
                    {"Incident response": "Page the on-call engineer, open an incident "
                                          "channel and post status updates every hour."})
    engine.knowledge_add([str(doc)], ["ctx-a", "ctx-b"])
    query = "how to run an incident and page on-call"
    for context in ("ctx-a", "ctx-b"):
        assert str(doc) in _docs_of(_search(engine, query, [context]))
    removed = engine.knowledge_remove([str(doc)], ["ctx-a"])
    assert removed.links_removed == 1 and removed.documents_deleted == ()
    assert str(doc) not in _docs_of(_search(engine, query, ["ctx-a"]))
    assert str(doc) in _docs_of(_search(engine, query, ["ctx-b"]))
    removed = engine.knowledge_remove([str(doc)], ["ctx-b"])
    path = KNOWLEDGE_PREFIX + "shared/runbook.docx"
    assert removed.documents_deleted == (path,)
    assert engine.store.file_states(path) == {} and engine.store.kb_documents(paths=[path]) == []
    assert not [r for r in engine.store.chunks_for_files() if r.file_path == path]
    assert str(doc) not in _docs_of(_search(engine, query, k=30))
    assert doc.exists()  # the file itself is never touched


def test_unchanged_readd_costs_nothing_and_a_change_reembeds_only_changed_chunks(env):
    engine, root, _ = env
    engine.knowledge_create_context("readd")
    sections = {f"Topic {n}": f"Paragraph about subject number {n}: " + "detail " * 20
                for n in range(4)}
    doc = make_markdown(root / "readd" / "guide.md", sections)
    first = engine.knowledge_add([str(doc)], ["readd"])
    assert first.added == 1 and first.chunks_embedded >= 4
    again = engine.knowledge_add([str(doc)], ["readd"])
    # Issue 27: re-adding said "unchanged … 0 chunks"; it holds what the first add made.
    assert (again.unchanged, again.chunks_embedded) == (1, 0)
    assert again.documents[0].chunks == first.documents[0].chunks >= 4
    sections["Topic 2"] = "A rewritten paragraph about deployment freezes in December."
    make_markdown(doc, sections)
    changed = engine.knowledge_add([str(doc)], ["readd"])
    assert changed.updated == 1 and changed.chunks_embedded == 1
    found = _search(engine, "deployment freeze in December", ["readd"])
    assert "deployment freezes" in found.hits[0].snippet


def test_folder_add_records_each_failure_and_goes_on(env):
    engine, root, _ = env
    folder = root / "mixed"
    make_markdown(folder / "ok.md", {"Caching": "Cache invalidation by version tag."})
    make_html(folder / "sub" / "page.html", "Queue guide", {"Dead letters": "Retry then park."})
    make_encrypted_pdf(folder / "locked.pdf")
    make_scanned_pdf(folder / "scan.pdf")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.7 truncated")
    (folder / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    make_markdown(folder / "drafts" / "skip.md", {"Draft": "not this one"})
    report = engine.knowledge_add([str(folder)], exclude=["drafts/*"])
    status = {Path(d.document).name: (d.status, d.reason) for d in report.documents}
    assert status["ok.md"][0] == status["page.html"][0] == "added"
    assert "encrypted" in status["locked.pdf"][1]
    assert "no text layer" in status["scan.pdf"][1]
    assert "corrupt" in status["broken.pdf"][1]
    assert status["photo.png"][0] == "skipped" and "skip.md" not in status
    assert (report.added, report.failed, report.skipped) == (2, 3, 1)
    only_md = engine.knowledge_add([str(folder)], include=["*.md"])
    assert {Path(d.document).name for d in only_md.documents} == {"ok.md", "skip.md"}


@pytest.mark.parametrize("paths, contexts, message", [
    (["{root}/missing.pdf"], None, "no such file or folder"),
    (["{root}/library/wafr.pdf"], ["no-such-context"], "unknown context"),
    (["{root}/library/wafr.pdf"], ["bad name!"], "invalid context name"),
    (["/etc/hostname"], None, "refused: /etc is never read"),
    ([], None, "at least one"),
])
def test_bad_adds_are_refused_with_one_clear_reason(env, paths, contexts, message):
    engine, root, _ = env
    before = engine.store.kb_documents()
    with pytest.raises(KnowledgeError, match=message):
        engine.knowledge_add([p.format(root=root) for p in paths], contexts)
    assert engine.store.kb_documents() == before  # nothing lost, nothing half-added


def test_an_explicit_file_of_unknown_format_fails_with_its_reason(env):
    engine, root, _ = env
    odd = root / "data.xyz"
    odd.write_text("whatever")
    report = engine.knowledge_add([str(odd)])
    assert report.failed == 1 and "unknown format (.xyz)" in report.documents[0].reason


def test_credentials_are_refused_everywhere_and_mcp_adds_stay_in_allowed_roots(env, tmp_path,
                                                                              monkeypatch):
    engine, root, _ = env
    monkeypatch.setenv("HOME", str(tmp_path))
    key = tmp_path / ".ssh" / "id_rsa"
    key.parent.mkdir()
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n")
    with pytest.raises(KnowledgeError, match="~/.ssh is never read"):
        engine.knowledge_add([str(key.parent)])
    link = root / "innocent.md"
    link.symlink_to(key)
    with pytest.raises(KnowledgeError, match="refused"):
        engine.knowledge_add([str(link)])
    link.unlink()
    outside = make_markdown(tmp_path / "elsewhere.md", {"x": "outside the project"})
    with pytest.raises(KnowledgeError, match="outside the folders an agent may add from"):
        engine.knowledge_add([str(outside)], via_mcp=True)
    assert engine.knowledge_add([str(outside)]).added == 1  # the CLI may


def test_secrets_in_documents_are_scrubbed(env):
    engine, root, _ = env
    doc = make_markdown(root / "ops" / "db.md", {
        "Database access": 'Connect with password = "Sup3rS3cretValue!" to the primary.'})
    report = engine.knowledge_add([str(doc)])
    assert report.documents[0].secrets_redacted >= 1
    found = _search(engine, "database access password primary", k=20)
    texts = "".join(h.snippet for h in found.hits)
    assert "Database access" in texts and "Sup3rS3cretValue" not in texts
    # Issue 28's forms, as pasted into a runbook.
    from secrets_corpus import ISSUE_28_SECRETS, ISSUE_28_TRACE

    runbook = make_markdown(root / "ops" / "sync.md", {"Sync outage": ISSUE_28_TRACE})
    assert engine.knowledge_add([str(runbook)]).documents[0].secrets_redacted >= 4
    texts = "".join(h.snippet for h in _search(engine, "sync outage traceback", k=20).hits)
    assert "Sync outage" in texts
    for name, value in ISSUE_28_SECRETS.items():
        assert value not in texts, name


def test_project_queries_stay_project_only_and_reindexing_keeps_documents(env):
    engine, _, _ = env
    before = engine.store.kb_documents()
    response = engine.query(QueryRequest("security pillar identity access", k=20,
                                         wait_for_model=True))
    assert response.hits and not any(h.file_path.startswith(KNOWLEDGE_PREFIX)
                                     for h in response.hits)
    engine.refresh()
    engine.rebuild(wait=True)
    assert engine.store.kb_documents() == before
    both = engine.query(QueryRequest("security pillar identity access", k=20,
                                     contexts=("aws-architecture",), wait_for_model=True))
    assert {h.file_path.startswith(KNOWLEDGE_PREFIX) for h in both.hits} == {True, False}


@pytest.mark.parametrize("folders, expected", [
    (("hooks",), {"src/hooks/auth_hook.py", "lib/hooks/cache_hook.py"}),
    (("/src/hooks",), {"src/hooks/auth_hook.py"}),
    (("src/*/tests",), {"src/api/tests/test_routes.py"}),
    (("/lib/hooks", "src/*/tests"), {"lib/hooks/cache_hook.py",
                                     "src/api/tests/test_routes.py"}),
    (("nowhere",), set()),
])
def test_scope_folders_three_forms_on_the_project(env, folders, expected):
    engine, _, _ = env
    response = engine.query(QueryRequest("hook cache session token health route", k=30,
                                         wait_for_model=True,
                                         scope=ContextScope(folders=folders)))
    assert {h.file_path for h in response.hits} == expected


def test_scope_files_and_folders_on_documents(env):
    engine, _, docs = env
    files = engine.query(knowledge_request("controls", None, k=30, scope=ContextScope(
        files=("library/medicaid.pdf",)), wait_for_model=True))
    assert _docs_of(files) == {str(docs / "medicaid.pdf")}
    by_absolute = engine.query(knowledge_request("controls", None, k=30, scope=ContextScope(
        files=(str(docs / "fin-lens.pdf"),)), wait_for_model=True))
    assert _docs_of(by_absolute) == set()  # exact paths are root-relative inside the root
    folder = engine.query(knowledge_request("controls", None, k=30, wait_for_model=True,
                                            scope=ContextScope(folders=("library",))))
    assert _docs_of(folder) and all(d.startswith(str(docs)) for d in _docs_of(folder))


def test_unknown_context_in_a_search_is_refused(env):
    engine, _, _ = env
    with pytest.raises(KnowledgeError, match="unknown context"):
        _search(engine, "x", ["nope"])


TOPICS = ["kubernetes pod autoscaling", "postgres vacuum tuning", "oauth token refresh",
          "kafka consumer lag", "terraform state locking", "react hydration errors"]
CONTEXTS = ["c0", "c1", "c2"]


@pytest.fixture(scope="module")
def isolation(env):
    """Six documents kept in an 'anchor' context (so none is deleted while the property
    test moves them between the three contexts under test)."""
    engine, root, _ = env
    for name in ["anchor", *CONTEXTS]:
        engine.knowledge_create_context(name)
    paths = []
    for n, topic in enumerate(TOPICS):
        doc = make_markdown(root / "iso" / f"doc{n}.md", {topic.title(): f"All about {topic}."})
        engine.knowledge_add([str(doc)], ["anchor"])
        paths.append(KNOWLEDGE_PREFIX + f"iso/doc{n}.md")
    return engine, paths


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(memberships=st.lists(st.sets(st.sampled_from(CONTEXTS)), min_size=len(TOPICS),
                            max_size=len(TOPICS)),
       searched=st.sets(st.sampled_from(CONTEXTS), min_size=1),
       query=st.sampled_from(TOPICS + ["database", "errors in production"]),
       include_project=st.booleans())
def test_scoped_search_never_returns_another_contexts_chunk(isolation, memberships, searched,
                                                            query, include_project):
    engine, paths = isolation
    engine.store.kb_unlink(paths, CONTEXTS)
    for path, contexts in zip(paths, memberships):
        engine.store.kb_link([path], sorted(contexts))
    allowed = {p for p, contexts in zip(paths, memberships) if contexts & searched}
    request = knowledge_request(query, sorted(searched), k=20, include_project=include_project)
    response = engine.query(dataclasses.replace(request, wait_for_model=True))
    for hit in response.hits:
        if hit.file_path.startswith(KNOWLEDGE_PREFIX):
            assert hit.file_path in allowed
            assert set(hit.metadata["contexts"]) & searched
        else:
            assert include_project
    if query in TOPICS and paths[TOPICS.index(query)] in allowed:
        # the scope is not simply empty: the document about the query is found
        assert paths[TOPICS.index(query)] in {h.file_path for h in response.hits}


def test_migrated_database_has_the_default_context(tmp_path):
    """A database of schema version 2 (before contexts) gets the tables and 'default'."""
    import duckdb

    from contextd.store.duckdb.store import DuckDBStore, _migrations, _sql_resource

    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute(_sql_resource("migrations/001_initial.sql"))
    con.execute([sql for number, sql in _migrations() if number == 2][0])
    con.execute("CREATE TABLE schema_version (version INTEGER NOT NULL, applied_at TIMESTAMP "
                "DEFAULT now()); INSERT INTO schema_version (version) VALUES (2)")
    con.close()
    store = DuckDBStore(path)
    try:
        assert [c["name"] for c in store.kb_contexts()] == ["default"]
    finally:
        store.close()
    assert os.path.exists(path)


def test_python_api_and_stats(env):
    """The knowledge operations and the module's search (what an orchestrator calls) and
    the figures of get_context_stats: project totals stay the project's, documents are
    counted apart."""
    engine, root, _ = env
    module = engine.module
    engine.knowledge_create_context("python-api")
    doc = make_markdown(root / "py" / "queue.md", {"Backpressure": "Bounded queues shed load "
                                                                  "when consumers fall behind."})
    assert engine.knowledge_add([str(doc)], ["python-api"]).added == 1
    hits = module.knowledge_search("shedding load under backpressure", ["python-api"]).hits
    assert hits[0].metadata["document"] == str(doc)
    task = module.get_task_context({"title": "backpressure in queues", "contexts": ["python-api"]})
    assert any(s.file_path == KNOWLEDGE_PREFIX + "py/queue.md" for s in task.snippets)
    plain = module.get_task_context({"title": "backpressure in queues"})
    assert not any(s.file_path.startswith(KNOWLEDGE_PREFIX) for s in plain.snippets)
    storage = engine.stats().storage
    assert storage["total_files"] == len(engine.store.file_states())
    assert storage["knowledge_documents"] == len(engine.store.kb_documents()) > 0
    assert engine.knowledge_remove([str(doc)]).documents_deleted
    assert engine.knowledge_delete_context("python-api", confirm=True).name == "python-api"


def test_knowledge_settings_are_validated(tmp_path):
    from contextd.config.loading import load_config
    from contextd.errors import ConfigError

    path = tmp_path / "context.toml"
    path.write_text('[knowledge]\nformats = ["pdf", "epub"]\nmax_pages = 0\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    messages = [f"{i.key}: {i.message}" for i in caught.value.issues]
    assert any(m.startswith("knowledge.formats: 'epub' is not one of") for m in messages)
    assert any(m.startswith("knowledge.max_pages") for m in messages)



def test_knowledge_search_scores_each_hit_by_its_evidence_and_cuts_the_unrelated(env):
    """Issue 27: ``kb search`` returned every chunk of the context, scored by rank alone
    (0.656, 0.646, 0.635 … the same for every query)."""
    from contextd.knowledge.scope import search_result

    engine, root, _ = env
    engine.knowledge_create_context("office")
    notes = {"Office wifi": "The guest network password rotates every Monday.",
             "Coffee machine": "It is descaled on Fridays with filtered water.",
             "Parking": "Permits are renewed every January at the front desk.",
             "Holidays": "Vacation requests go through the HR portal two weeks ahead."}
    engine.knowledge_add([str(make_markdown(root / "office" / "notes.md", notes))], ["office"])
    results = {}
    for query in ("when does the guest wifi password change", "descaling the coffee machine"):
        request = knowledge_request(query, ["office"], k=20, wait_for_model=True)
        results[query] = search_result(request, engine.query(request))
    wifi, coffee = results.values()
    assert "guest network password" in wifi.hits[0].snippet
    assert "descaled" in coffee.hits[0].snippet
    for result in (wifi, coffee):
        assert len(result.hits) < 5  # the notes' heading chunk and four sections
        assert any("left out" in note for note in result.notes)
        scores = [h.score for h in result.hits]
        assert scores == sorted(scores, reverse=True)
    assert [h.score for h in wifi.hits] != [h.score for h in coffee.hits][:len(wifi.hits)]


def test_html_hits_name_the_lines_of_the_html_file(env):
    """Issue 27: an HTML hit gave lines of the extracted text ("lines 9-11" of a 6-line
    file)."""
    from contextd.knowledge.scope import search_result

    engine, root, _ = env
    page = root / "web" / "guide.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text("<html>\n<head><title>Release guide</title></head>\n<body>\n"
                    "<h1>Release guide</h1>\n<p>Intro.</p>\n"
                    "<p>Canary releases send a small share of traffic to the new version.</p>"
                    "\n</body>\n</html>\n")
    engine.knowledge_create_context("web")
    engine.knowledge_add([str(page)], ["web"])
    request = knowledge_request("canary release traffic share", ["web"], wait_for_model=True)
    hit = search_result(request, engine.query(request)).hits[0]
    lines = page.read_text().splitlines()
    assert 1 <= hit.start_line <= hit.end_line <= len(lines)
    assert "Canary releases" in "\n".join(lines[hit.start_line - 1:hit.end_line])


def test_a_project_query_with_a_context_and_a_folder_keeps_the_knowledge_hits(env):
    """Issue 27: ``query --context X --folder /pkg/middleware`` (a README example) dropped
    every knowledge hit: the folder was applied to the documents too."""
    engine, _, _ = env
    both = engine.query(QueryRequest(
        "security pillar identity access session token", k=20, wait_for_model=True,
        contexts=("aws-architecture",), scope=ContextScope(folders=("/src/hooks",))))
    paths = {h.file_path for h in both.hits}
    assert any(p.startswith(KNOWLEDGE_PREFIX) for p in paths), paths
    project = {p for p in paths if not p.startswith(KNOWLEDGE_PREFIX)}
    assert project and all(p.startswith("src/hooks/") for p in project), paths
