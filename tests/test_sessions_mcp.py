"""Search sessions, reports and template resources over MCP, with the SDK's stdio client.

search_knowledge → get_search_results (one and several sessions) → create_rag_report with
every template, checking the written file: each citation's link names a real file, and the
lines it points at hold the quoted text. Then resources/list and resources/read, every bad
input of the issue, and a CLI subprocess reading a session the server made.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from knowledge_docs import make_pdf
from test_mcp_server import error_text, make_repo, mcp_session, server_env, structured

USER_TEMPLATE = """# {{ query }}
{% for s in sections %}
* {{ s.summary }} — {{ s.link }}
{% endfor %}
"""
BROKEN_TEMPLATE = """# {{ query }}

Summary: {{ overal_summary }}
"""
CONFIG = """
[sessions]
max_sessions = 4

[reports]
templates_dir = "report-templates"
default_template = "paper"
"""
LINK = re.compile(r"\[(?P<label>[^\]]+)\]\((?P<uri>file://[^)#]+)#L(?P<start>\d+)(?:-L(?P<end>\d+))?\)")


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    base = tmp_path_factory.mktemp("sessions")
    root = make_repo(base / "repo")
    (root / "context.toml").write_text(CONFIG)
    templates = root / "report-templates"
    templates.mkdir()
    (templates / "short.md.j2").write_text(USER_TEMPLATE)
    (templates / "broken.md.j2").write_text(BROKEN_TEMPLATE)
    (templates / "broken.json").write_text(json.dumps({"variables": {
        "query": {"type": "string", "required": True}}}))
    return base, root


@pytest.fixture(scope="module")
def served(project):
    base, root = project
    env = server_env(base / "run")
    with mcp_session(root, env, base / "server.log", "reports,knowledge") as session:
        assert structured(session.call("refresh_context",
                                       {"paths": ["."], "async": False}))["status"] == "completed"
        session.env = env
        session.root = root
        yield session


def search(served, query: str, **arguments) -> dict:
    return structured(served.call("search_knowledge", {"query": query, **arguments}))


def cited_lines(report: Path, root: Path) -> list[tuple[str, str]]:
    """(cited text, quoted text) of every citation link of a report, read from the files."""
    text = report.read_text()
    found = []
    for match in LINK.finditer(text):
        path = Path(unquote(urlparse(match["uri"]).path))
        assert path.is_file() and root.resolve() in path.parents, match.group(0)
        start, end = int(match["start"]), int(match["end"] or match["start"])
        lines = path.read_text().splitlines()
        assert 1 <= start <= end <= len(lines), match.group(0)
        assert match["label"] == f"{path.relative_to(root.resolve()).as_posix()}:" + (
            f"{start}-{end}" if end != start else str(start))
        found.append(("\n".join(lines[start - 1:end]), text[match.end():]))
    return found


@pytest.mark.slow
def test_search_then_results_of_one_and_several_sessions(served):
    first = search(served, "total of the invoice lines", scope={"folders": ["billing"]})
    session = first["session"]
    assert re.fullmatch(r"search_[0-9a-f]{8}", session["session_id"])
    assert 0 < session["result_count"] <= 20
    assert 0 < len(first["preview"]) <= 5
    assert first["preview"][0]["file_path"] == "src/billing/invoice.py"
    assert all(hit["file_path"].startswith("src/billing/") for hit in first["preview"])
    second = search(served, "monthly reminders", scope={"folders": ["/docs"]})
    assert {h["file_path"] for h in second["preview"]} == {"docs/billing.md"}

    one = structured(served.call("get_search_results",
                                 {"session_id": session["session_id"], "limit": 2}))
    assert [s["session_id"] for s in one["sessions"]] == [session["session_id"]]
    assert len(one["results"]) == min(2, session["result_count"])
    hit = one["results"][0]
    path = Path(unquote(urlparse(hit["file_uri"]).path))
    lines = path.read_text().splitlines()[hit["start_line"] - 1:hit["end_line"]]
    assert hit["text"].strip() == "\n".join(lines).strip()  # full chunk, real lines

    both = structured(served.call("get_search_results", {
        "session_ids": [session["session_id"], second["session"]["session_id"]]}))
    assert [s["query"] for s in both["sessions"]] == ["total of the invoice lines",
                                                     "monthly reminders"]
    assert {r["session_id"] for r in both["results"]} == {
        session["session_id"], second["session"]["session_id"]}

    listed = structured(served.call("list_search_results", {}))["sessions"]
    assert [s["session_id"] for s in listed[:2]] == [second["session"]["session_id"],
                                                     session["session_id"]]


def test_search_over_a_knowledge_context_cites_its_pages(served):
    make_pdf(served.root / "manuals" / "psp.pdf",
             ["Webhooks are signed with an HMAC of the raw request body.",
              "Refunds settle within five business days after approval."])
    structured(served.call("knowledge_context_create", {"name": "psp-manual",
                                                        "description": "the PSP's manual"}))
    added = structured(served.call("knowledge_add", {"paths": ["manuals/psp.pdf"],
                                                     "contexts": ["psp-manual"]}))
    assert added["added"] == 1, added
    found = search(served, "how long do refunds take to settle", contexts=["psp-manual"])
    top = found["preview"][0]
    assert top["document"].endswith("manuals/psp.pdf") and top["pages"] == [2]
    assert top["contexts"] == ["psp-manual"]
    results = structured(served.call("get_search_results",
                                     {"session_id": found["session"]["session_id"]}))
    assert "five business days" in results["results"][0]["text"]


def test_scope_files_and_folders_narrow_together(served):
    only_tax = search(served, "amount", scope={"files": ["src/billing/tax.py"]})
    assert {h["file_path"] for h in only_tax["preview"]} == {"src/billing/tax.py"}
    nothing = search(served, "amount", scope={"files": ["src/billing/tax.py"],
                                              "folders": ["docs"]})
    assert nothing["session"]["result_count"] == 0 and nothing["notes"]


@pytest.mark.parametrize("template", ["basic", "paper", "bullet_points", "short"])
def test_report_from_search_results_cites_real_lines(served, template):
    session = search(served, "invoice total reminder tax")["session"]
    results = structured(served.call("get_search_results", {
        "session_id": session["session_id"], "limit": 3}))["results"]
    sections = [{"file": r["file_path"], "start_line": r["start_line"],
                 "end_line": r["end_line"], "summary": f"Finding about {r['label']}."}
                for r in results]
    # One citation by quote only: the writer finds its lines.
    sections.append({"file": "src/billing/tax.py", "quote": "return round(amount * rate, 2)",
                     "summary": "VAT is rounded to cents."})
    variables = {"query": "How does billing work?", "title": "Billing", "abstract": "A.",
                 "overall_summary": "Invoices, tax and reminders.", "sections": sections}
    written = structured(served.call("create_rag_report", {
        "variables": variables, "template": template, "file_name": f"billing {template}"}))
    report = Path(written["path"])
    assert report.parent == served.root / "rag-reports"
    assert re.fullmatch(rf"\d{{8}}_\d{{6}}_billing_{template}\.md", report.name)
    text = report.read_text()
    assert "How does billing work?" in text or "Billing" in text
    citations = cited_lines(report, served.root)
    assert len(citations) >= len({(s["file"], s.get("start_line")) for s in sections})
    assert any("return round(amount * rate, 2)" in lines for lines, _ in citations)
    if template in ("basic", "paper"):  # these quote the lines under each link
        for lines, after in citations:
            quoted = after.split("```", 2)[1].split("\n", 1)[1]
            assert quoted.strip().splitlines()[0].strip() in lines
    if template == "paper":
        assert re.search(r"\. \[1\]", text) and "\n[1] [" in text and "## References" in text
    assert written["citations"] == len({(s["file"], s.get("start_line")) for s in sections})


def test_report_with_the_default_template_and_a_moved_quote(served):
    answer = structured(served.call("create_rag_report", {"variables": {
        "title": "T", "query": "q", "abstract": "a",
        "sections": [{"file": "src/billing/invoice.py", "start_line": 1, "end_line": 2,
                      "quote": "def invoice_total", "summary": "s"}]}}))
    assert answer["template"] == "paper"  # reports.default_template
    assert any("not 1-2" in w for w in answer["warnings"])
    (lines, _), = cited_lines(Path(answer["path"]), served.root)
    assert "def invoice_total" in lines


def test_resources_are_listed_and_read(served):
    portal, session = served.portal, served.session
    uris = {str(r.uri) for r in portal.call(session.list_resources).resources}
    assert uris == {f"template://{n}/schema" for n in
                    ("current", "basic", "paper", "bullet_points", "short", "broken")}
    templates = portal.call(session.list_resource_templates).resource_templates
    assert [t.uri_template for t in templates] == ["template://{name}/schema"]
    current = json.loads(portal.call(session.read_resource, "template://current/schema")
                         .contents[0].text)
    assert current["name"] == "paper" and current["default"] is True
    assert current["variables"]["sections"]["items"]["file"]["required"] is True
    basic = portal.call(session.read_resource, "template://basic/schema").contents[0]
    assert basic.mime_type == "application/json"
    assert json.loads(basic.text)["example"]["sections"]
    short = json.loads(portal.call(session.read_resource, "template://short/schema")
                       .contents[0].text)
    assert set(short["variables"]) == {"query", "sections"}  # derived from the template
    # Always current: a template added now is listed and readable at once.
    (served.root / "report-templates" / "later.md.j2").write_text("{{ query }}\n")
    uris = {str(r.uri) for r in portal.call(session.list_resources).resources}
    assert "template://later/schema" in uris
    with pytest.raises(Exception, match="unknown template 'nope'"):
        portal.call(session.read_resource, "template://nope/schema")
    (served.root / "report-templates" / "later.md.j2").unlink()


def test_get_template_schema_tool(served):
    schema = structured(served.call("get_template_schema", {"template": "bullet_points"}))
    assert schema["name"] == "bullet_points" and "sections" in schema["variables"]
    assert set(schema["available"]) >= {"basic", "paper", "bullet_points", "short"}
    assert structured(served.call("get_template_schema", {}))["name"] == "paper"


GOOD = {"query": "q", "overall_summary": "s",
        "sections": [{"file": "src/billing/tax.py", "start_line": 1, "summary": "x"}]}


@pytest.mark.parametrize("tool, arguments, hints", [
    ("get_search_results", {"session_id": "search_00000000"},
     ["unknown search session(s) search_00000000", "run search_knowledge again"]),
    ("get_search_results", {}, ["session_id or session_ids"]),
    ("search_knowledge", {"query": "x", "contexts": ["papers"]},
     ["unknown context(s) papers"]),
    ("search_knowledge", {"query": "x", "scope": {"folders": ["../up"]}}, ["leaves the project"]),
    ("search_knowledge", {"query": "x", "scope": {"paths": ["src"]}}, ["paths"]),
    ("search_knowledge", {"query": "x", "min_similarity": 2}, ["min_similarity"]),
    ("create_rag_report", {"variables": {"query": "q"}, "template": "paper"},
     ["missing required variable(s): title, abstract, sections"]),
    ("create_rag_report", {"variables": {"query": "q", "sections": [{"summary": "x"}]},
                           "template": "basic"},
     ["overall_summary", "sections[0].file"]),
    ("create_rag_report", {"variables": {"query": "q"}, "template": "broken"},
     ["template 'broken' line 3", "overal_summary"]),
    ("create_rag_report", {"variables": GOOD, "template": "nope"}, ["unknown template 'nope'"]),
    ("create_rag_report", {"variables": GOOD, "template": "basic", "output_dir": "/tmp"},
     ["outside the project root"]),
    ("create_rag_report", {"variables": GOOD, "template": "basic", "output_dir": "../out"},
     ["outside the project root"]),
    ("create_rag_report", {"variables": GOOD, "template": "basic", "output_dir": ".git/x"},
     [".git"]),
    ("create_rag_report", {"variables": {**GOOD, "sections": [
        {"file": "../../etc/passwd", "start_line": 1, "summary": "x"},
        {"file": "src/billing/tax.py", "start_line": 40, "end_line": 50, "summary": "y"},
        {"file": "nope.py", "start_line": 1, "summary": "z"}]}, "template": "basic"},
     ["sections[0].file", "outside the project root", "sections[1]: line(s) 40-50 are not in",
      "sections[2].file: nope.py does not exist"]),
    ("create_rag_report", {"variables": GOOD, "template": "basic", "ascii_filename": "日本語"},
     ["ASCII"]),
])
def test_bad_input_is_one_clear_tool_error(served, tool, arguments, hints):
    message = error_text(served.call(tool, arguments))
    for hint in hints:
        assert hint in message, message


def test_file_names_are_sanitised_and_never_overwritten_silently(served):
    arguments = {"variables": GOOD, "template": "basic", "file_name": "../../escape/../x.md"}
    first = structured(served.call("create_rag_report", arguments))
    path = Path(first["path"])
    assert path.parent == served.root / "rag-reports" and path.name.endswith("_escape_x.md")
    again = served.call("create_rag_report", arguments)
    if not again.is_error:  # the clock moved on to the next second: a new name, no clash
        Path(again.structured_content["path"]).unlink()
        again = served.call("create_rag_report", {**arguments, "file_name": path.name[16:]})
    assert "exists; pass overwrite=true" in error_text(again)
    replaced = structured(served.call("create_rag_report", {
        **arguments, "file_name": path.name[16:], "overwrite": True}))
    assert Path(replaced["path"]).is_file()
    generated = [structured(served.call("create_rag_report", {
        "variables": GOOD, "template": "basic", "ascii_filename": "Größe über"}))["path"]
        for _ in range(2)]
    assert len(set(generated)) == 2 and all("Grosse_uber" in p for p in generated)
    inside = served.root / "notes"
    answer = structured(served.call("create_rag_report", {
        "variables": GOOD, "template": "basic", "output_dir": "notes"}))
    assert Path(answer["path"]).parent == inside


def test_reports_are_not_indexed(served):
    structured(served.call("create_rag_report", {
        "variables": {**GOOD, "overall_summary": "zebra unicorn"}, "template": "basic"}))
    structured(served.call("refresh_context", {"paths": ["."], "async": False}))
    hits = structured(served.call("query_context", {"query": "zebra unicorn"}))["hits"]
    assert not any(h["filePath"].startswith("rag-reports/") for h in hits)


@pytest.mark.slow
def test_a_cli_process_sees_sessions_made_over_mcp_and_the_last_n_are_kept(served):
    made = [search(served, f"invoice query {n}")["session"]["session_id"] for n in range(5)]
    command = [sys.executable, "-m", "contextd", "--root", str(served.root), "--json",
               "search"]
    shown = subprocess.run([*command, "--show", made[-1], "--limit", "1"], env=served.env,
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    answer = json.loads(shown.stdout)
    assert answer["sessions"][0]["query"] == "invoice query 4"
    assert len(answer["results"]) == 1
    listed = subprocess.run([*command, "--list"], env=served.env, capture_output=True,
                            text=True, timeout=120)
    ids = [s["session_id"] for s in json.loads(listed.stdout)["sessions"]]
    assert ids == made[:0:-1]  # newest first; max_sessions = 4 pushed the oldest out
    gone = subprocess.run([*command, "--show", made[0]], env=served.env,
                          capture_output=True, text=True, timeout=120)
    assert gone.returncode == 2 and "unknown search session(s)" in gone.stderr
    assert gone.stderr.count("\n") == 1 and not gone.stdout
    # And the other way: a session made by the CLI is read over MCP.
    cli = subprocess.run([*command, "vat rate"], env=served.env, capture_output=True,
                         text=True, timeout=120)
    cli_id = json.loads(cli.stdout)["session"]["session_id"]
    read = structured(served.call("get_search_results", {"session_id": cli_id}))
    assert read["sessions"][0]["query"] == "vat rate"


@pytest.mark.slow
def test_report_cli(served, tmp_path):
    command = [sys.executable, "-m", "contextd", "--root", str(served.root), "report"]

    def run(*args, stdin=None):
        return subprocess.run([*command, *args], env=served.env, input=stdin,
                              capture_output=True, text=True, timeout=120)

    listed = run("--templates", "--json")
    assert {t["name"] for t in json.loads(listed.stdout)} >= {"basic", "paper", "short"}
    schema = json.loads(run("--schema", "--template", "basic", "--json").stdout)
    assert schema["variables"]["overall_summary"]["required"] is True
    written = run("--vars", "-", "--template", "basic", "--file-name", "cli", "--json",
                  stdin=json.dumps(GOOD))
    assert written.returncode == 0, written.stderr
    path = Path(json.loads(written.stdout)["path"])
    assert path.name.endswith("_cli.md") and cited_lines(path, served.root)
    bad = run("--vars", "-", "--template", "basic", stdin="{not json")
    assert bad.returncode == 2 and "not valid JSON" in bad.stderr
    missing = run("--vars", "-", "--template", "paper", stdin="{}")
    assert missing.returncode == 2 and "title, query, abstract, sections" in missing.stderr
    usage = run()
    assert usage.returncode == 2 and "--vars FILE, --schema or --templates" in usage.stderr
    search = subprocess.run([*command[:-1], "search"], env=served.env, capture_output=True,
                            text=True, timeout=120)
    assert search.returncode == 2 and "QUERY, --list or --show" in search.stderr
