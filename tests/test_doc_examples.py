"""Every shell and Python example of README.md and docs/ runs as written, and prints what the
text around it promises (tests/doc_examples.py says how examples are found and run).

To add an example: put it in a ```bash or ```python block, name it on the line before
(``<!-- example: NAME -->``, flags there if it needs them), and add ``CHECKS[NAME]`` below:
a function that gets the :class:`Run` (or, for a ``daemon`` block, the running process) and
asserts what the text says it does.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from doc_examples import (
    REPO, RUNNABLE, TRACE, Environment, Example, Run, collect, free_port, interrupt, wait_http,
)

EXAMPLES = collect()


# --- checks, one per named example -----------------------------------------------------------

def check_query_cli(run: Run) -> None:
    ranked = run.output("contextd query where are JWT tokens validated")
    assert re.search(r"^ 1\. [\d.]+  src/auth/jwt\.py:\d+-\d+  validate_token", ranked, re.M)
    hits = json.loads(run.output("contextd --json query retry backoff"))["hits"]
    assert 1 <= len(hits) <= 5 and hits[0]["file_path"] == "src/http/retry.py"
    assert {hit["language"] for hit in hits} == {"python"}
    block = run.output("contextd query token refresh --render")
    assert block.lstrip().startswith("<project_context>") and "</project_context>" in block
    assert 'label="refresh_token"' in block
    files = run.output("--files")
    assert re.search(r"^ 1\. [\d.]+  src/http/retry\.py  \(lines", files, re.M)
    sources = run.output("--role source")
    assert "src/http/retry.py" in sources.splitlines()[0]
    assert "tests/" not in sources and "docs/" not in sources
    stats = run.output("contextd stats")
    for promised in ("files:", "chunks:", "providers:", "languages:", "indexing:"):
        assert promised in stats


def check_index_cli(run: Run) -> None:
    assert re.search(r"refresh: \d+ files indexed, 1 unchanged", run.output("contextd refresh"))
    assert "No changes made" in run.output("contextd rebuild --dry-run")
    chunks = run.output("contextd chunks")
    assert "src/auth/jwt.py: python" in chunks
    assert re.search(r"CODE_FUNCTION .* validate_token", chunks)


def check_python_module(run: Run) -> None:
    lines = run.stdout.splitlines()
    assert lines[0].startswith("<project_context>")
    assert any(re.match(r"src/auth/jwt\.py \d+ refresh_token [\d.]+ \(.*.semantic.", line) for line in lines)
    assert "src/auth/jwt.py" in lines  # the first hit of the QueryRequest
    assert "Guidelines:" in lines and any("Fix token refresh" in line for line in lines)
    assert lines[-1] == "None"  # no reduction until a run without contextd is reported too


def check_knowledge_cli(run: Run) -> None:
    assert "created context payments-rfc" in run.output("contextd kb create")
    added = run.output("contextd kb add")
    assert re.search(r"added .*psp-manual\.pdf  \[pdf, 1 pages", added)
    assert re.search(r"2 added, .* in payments-rfc", added)
    found = run.output("contextd kb search idempotency keys")
    first = found.splitlines()[0]
    assert "0001-idempotency.md" in first and "[payments-rfc]" in first and "lines" in first
    assert re.search(r"psp-manual\.pdf p\.1 ", found)  # documents name their page
    mixed = run.output("contextd kb search retry policy --with-project")
    assert "[project]" in mixed and "[payments-rfc]" in mixed
    # The project side of a query with a context; knowledge hits under --folder are issue
    # 27's fix on another branch.
    assert "src/payments/refunds.py" in run.output("contextd query refund flow --context")
    assert re.search(r"^payments-rfc +2 docs", run.output("contextd kb list"), re.M)
    assert "psp-manual.pdf  [pdf, 1 pages" in run.output("contextd kb show payments-rfc")
    assert "1 deleted from the index" in run.output("contextd kb remove")
    assert "deleted context payments-rfc" in run.output("contextd kb delete")


def check_stash_cli(run: Run) -> None:
    segment = run.output("contextd stash add").split()[0]
    assert segment.startswith("seg-")
    found = json.loads(run.output("contextd stash search"))
    assert found["segments"][0]["segment_id"] == segment
    assert "KeyError: 'platinum'" in run.output("contextd stash show")
    assert re.search(r"removed \d+ expired", run.output("contextd stash gc"))


def check_python_memory(run: Run) -> None:
    printed = run.stdout.strip()
    assert printed.startswith("Traceback (most recent call last):")
    assert printed.endswith("KeyError: 'platinum'")


def check_sessions_cli(run: Run) -> None:
    kept = run.output("contextd search how are invoices totalled")
    assert "src/billing/invoices.py" in kept
    session = re.search(r"session (search_[0-9a-f]{8}): \d+ results", kept).group(1)
    assert session in run.output("contextd search --list").splitlines()[0]
    report = Path(run.output("contextd report").strip().splitlines()[-1])
    assert report.parent.name == "rag-reports" and report.name.endswith(".md")
    text = report.read_text()
    assert "How invoices are totalled" in text and "src/billing/invoices.py:4" in text
    assert "file://" in text  # every citation linked to its lines


def check_service_calls(run: Run) -> None:
    answer = json.loads(run.output("curl -s localhost"))
    assert answer["hits"] and answer["hits"][0]["file_path"] == "src/auth/jwt.py"
    assert len(answer["hits"]) <= 5
    assert run.output("contextd keys create fleet").strip().startswith("ctxd_")
    assert ".contextd/backups/context-" in run.output("contextd backup")
    assert "revoked" in run.output("contextd keys revoke fleet")


def check_service_keys(run: Run) -> None:
    assert '"providers"' in run.output("curl -s localhost")
    assert run.output("-w %{http_code}").strip() == "401"
    assert '"providers"' in run.output("Authorization: Bearer")
    assert "revoked" in run.output("contextd keys revoke ci")


def check_daemon_server(process: subprocess.Popen, port: int, project: Path) -> None:
    ready = json.loads(wait_http(f"http://127.0.0.1:{port}/readyz", process))
    assert ready.get("ready", True)
    spec = json.loads(wait_http(f"http://127.0.0.1:{port}/openapi.json", process))
    assert "/query_context" in spec["paths"]


def check_index_manager(process: subprocess.Popen, port: int, project: Path) -> None:
    url = process.stdout.readline().strip()  # the first line is the page's URL
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=\S+", url), url
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    page = wait_http(url, process, opener=browser)  # the token becomes a cookie
    assert "<html" in page.lower() and "Overview" in page
    with pytest.raises(urllib.error.HTTPError):  # without the token: refused
        urllib.request.urlopen(url.split("?")[0], timeout=10)


def check_config_cli(run: Run) -> None:
    assert "Wrote" in run.output("contextd init") and (run.project / "context.toml").is_file()
    assert "Configuration valid" in run.output("contextd validate-config")
    listed = run.output("contextd list-indexable").split()
    assert "src/auth/jwt.py" in listed and "vendor/psp-manual.pdf" not in listed
    assert run.output("contextd check-file").strip() == "src/auth/jwt.py: indexable"
    kept = run.output("contextd project-stats")
    assert "Indexable: " in kept and "Excluded, by reason:" in kept
    assert re.search(r"^\* onnx ", run.output("contextd embedders list"), re.M)
    plugins = json.loads(run.output("contextd plugins"))
    assert any(plugin["builtin"] and plugin["hooks"] for plugin in plugins)


def check_agent_install(run: Run) -> None:
    first, second, third = (part.split("\n", 1)[1] for part in run.stdout.split(TRACE)[1:])
    written = {line.split()[0]: line for line in first.splitlines()}
    assert set(written) == {"created"} or "updated" in written, first
    for name in (".mcp.json", "CLAUDE.md", ".codex/config.toml", "AGENTS.md"):
        assert f"{run.project}/{name}" in first
    assert {line.split()[0] for line in second.splitlines()[:-1]} == {"unchanged"}, second
    assert "nothing to do" in second
    assert {line.split()[0] for line in third.splitlines()} <= {"removed", "restored"}, third
    assert not (run.project / ".mcp.json").exists() and not (run.project / ".codex").exists()


def check_quickstart(run: Run) -> None:
    assert re.search(r"^ 1\. [\d.]+  contextd/", run.stdout, re.M)


CHECKS = {
    "quickstart": check_quickstart,
    "agent-install": check_agent_install,
    "query-cli": check_query_cli,
    "index-cli": check_index_cli,
    "python-module": check_python_module,
    "knowledge-cli": check_knowledge_cli,
    "stash-cli": check_stash_cli,
    "python-memory": check_python_memory,
    "sessions-cli": check_sessions_cli,
    "service-start": check_daemon_server,
    "service-start-root": check_daemon_server,
    "service-calls": check_service_calls,
    "service-keys": check_service_keys,
    "index-manager": check_index_manager,
    "config-cli": check_config_cli,
}


# --- the tests ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def environment(tmp_path_factory) -> Environment:
    return Environment(tmp_path_factory.mktemp("doc-examples"))


def _param(example: Example):
    marks = []
    if "slow" in example.flags:
        marks.append(pytest.mark.slow)
    if example.flags & {"server", "daemon"}:
        marks.append(pytest.mark.server)
    if "network" in example.flags:
        marks.append(pytest.mark.network)
        marks.append(pytest.mark.skipif(not os.environ.get("CONTEXTD_TEST_NETWORK"),
                                        reason="needs the network (CONTEXTD_TEST_NETWORK=1)"))
    return pytest.param(example, id=example.id, marks=marks)


RUN_EXAMPLES = [e for e in EXAMPLES if e.language in RUNNABLE and e.skip is None]


@pytest.mark.parametrize("example", [_param(e) for e in RUN_EXAMPLES])
def test_example_does_what_the_text_says(example: Example, environment: Environment) -> None:
    assert example.problem is None, example.problem
    assert example.name, (f"{example.id}: name this example (<!-- example: NAME --> on the "
                          "line before it) and add CHECKS[NAME] in tests/test_doc_examples.py")
    check = CHECKS.get(example.name)
    assert check, f"{example.id}: add CHECKS[{example.name!r}] in tests/test_doc_examples.py"
    if "network" in example.flags:
        _run_in_fresh_clone(example, environment, check)
    elif "daemon" in example.flags:
        port = free_port()
        process = environment.start(example.code.replace("9090", str(port)), port)
        try:
            check(process, port, environment.project)
        finally:
            status = interrupt(process)
        assert status in (0, 130), f"Ctrl-C ended it with {status}"
    else:
        port = free_port() if "server" in example.flags else None
        server = environment.server(port) if port else None
        try:
            run = environment.run(example, port)
        finally:
            if server is not None:
                interrupt(server)
        assert run.returncode == 0, run.describe()
        try:
            check(run)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{run.describe()}") from None


def _run_in_fresh_clone(example: Example, environment: Environment, check) -> None:
    """The quick start, as a new user runs it: in a fresh clone, with a new virtualenv."""
    clone = environment.project.parent / f"clone-{example.line}"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=300)
    env = {key: value for key, value in os.environ.items()
           if key != "PYTHONPATH" and not key.startswith("CONTEXTD_")}
    done = subprocess.run(["bash", "-c", example.code], cwd=clone, env=env,
                          capture_output=True, text=True, timeout=3600)
    run = Run(example.code, done.returncode, done.stdout, done.stderr, clone)
    assert run.returncode == 0, run.describe()
    check(run)


@pytest.mark.parametrize("example", [pytest.param(e, id=e.id) for e in EXAMPLES
                                     if e.language not in RUNNABLE and e.skip is None])
def test_configuration_example_is_valid(example: Example, monkeypatch) -> None:
    """JSON blocks parse; TOML blocks are context.toml settings that contextd accepts (an
    unknown or renamed key, a bad value fails here), the variables they name set."""
    from doc_examples import PARSED

    parsed = PARSED[example.language](example.code)
    if example.language == "toml":
        from contextd.config.loading import config_from_dict

        for variable in re.findall(r"\$\{(\w+)\}", example.code):
            monkeypatch.setenv(variable, f"postgresql://docs@localhost/{variable.lower()}")
        config_from_dict(parsed, example.id)


def test_every_check_has_its_example_and_skips_say_why() -> None:
    named = {e.name for e in EXAMPLES if e.name}
    assert set(CHECKS) <= named | {None}, f"checks without an example: {set(CHECKS) - named}"
    for example in EXAMPLES:
        if example.skip is not None:
            assert example.problem is None, f"{example.id}: {example.problem}"


def test_collection_reads_directives(tmp_path) -> None:
    """The extraction itself: named, flagged, skipped and unnamed blocks."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (tmp_path / "README.md").write_text(
        "<!-- example: first slow server -->\n```bash\necho hi\n```\n\n"
        "<!-- example: skip: draws a diagram, nothing to run -->\n```python\nimport x\n```\n"
        "```sh\necho unnamed\n```\n```text\nnot an example\n```\n"
        "<!-- example: bad sloww -->\n```bash\ntrue\n```\n")
    found = collect(tmp_path)
    assert [(e.name, sorted(e.flags), e.skip is not None, e.line) for e in found] == [
        ("first", ["server", "slow"], False, 2), (None, [], True, 7),
        (None, [], False, 10), ("bad", [], False, 17)]
    assert "unknown flags" in found[-1].problem
