"""The planted-credential corpus (tests/secrets_corpus.py) indexed for real: no secret in any
column of any table of the DuckDB file, in any ``contextd query`` answer or in any MCP
query_context answer; look-alikes kept; secret files (.env, keys) never indexed, whatever
``allowed_extensions`` says. benchmarks/bench_scrub.py prints recall and false positives."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import duckdb
import pytest

from contextd.scrub.scrubber import REDACTED, scrub_secrets
from secrets_corpus import ISSUE_28_SECRETS, generate
from test_mcp_server import make_repo, mcp_session, server_env, structured

QUERIES = ("stripe api key", "Authorization Bearer token", "aws secret access key",
           "database password", "jwt", "private key", "client secret", "hmac signing key",
           "sendgrid mail api key", "anthropic openai client", "github token export",
           "twilio client", "firebase config google")
# Secret files next to the corpus: never indexed (their contents would be in clear).
SECRET_FILES = {".env": "DB_PASSWORD=envfile_clear_value_1\n",
                "config/.env.production": "STRIPE=prod_env_clear_value_2\n",
                "deploy/id_rsa": "ssh key material clear_value_3\n",
                "certs/server.key": "tls key clear_value_4\n",
                "certs/bundle.pem": "bundle clear_value_5\n"}


@pytest.fixture(scope="module")
def corpus():
    return generate(seed=1212)


@pytest.fixture(scope="module")
def served_corpus(tmp_path_factory, corpus):
    """The corpus in a git repository with every extension allowed, indexed by a real
    ``contextd serve``; yields (root, env, MCP answers, CLI answers)."""
    base = tmp_path_factory.mktemp("secrets")
    files = {**corpus.files, **SECRET_FILES,
             "context.toml": "[indexing]\nallowed_extensions = []\nblocked_extensions = []\n"}
    root = make_repo(base / "repo", files)
    env = server_env(base / "run")
    mcp_answers, cli_answers = [], []
    with mcp_session(root, env, base / "server.log") as session:
        report = structured(session.call("refresh_context", {"paths": ["."], "async": False}))
        assert report["status"] == "completed"
        for query in QUERIES:
            result = session.call("query_context", {"query": query, "k": 50,
                                                    "filters": {"maxTokens": 6000}})
            mcp_answers.append(json.dumps(structured(result)) + result.content[0].text)
        # An agent quoting a credential in its query: usage_metrics keeps it redacted.
        quoted = next(p.value for p in corpus.secrets if p.kind == "stripe")
        assert not structured(session.call("query_context", {
            "query": f"why is {quoted} rejected"}))["query"].count("[REDACTED]")
        for query in QUERIES[:2]:
            done = subprocess.run([sys.executable, "-m", "contextd", "--root", str(root),
                                   "query", query, "--k", "50", "--json"],
                                  capture_output=True, text=True, env=env, timeout=120)
            assert done.returncode == 0, done.stderr
            cli_answers.append(done.stdout + done.stderr)
    return root, mcp_answers, cli_answers


def test_corpus_is_large_and_varied(corpus):
    assert len(corpus.secrets) >= 100 and len(corpus.lookalikes) >= 100
    suffixes = {p.path.rsplit("/", 1)[-1].rsplit(".", 1)[-1] for p in corpus.secrets}
    assert len(suffixes) >= 10
    assert len({p.value for p in corpus.secrets}) == len(corpus.secrets)


def test_scrubber_removes_every_secret_and_keeps_lookalikes(corpus):
    scrubbed = {path: scrub_secrets(text, path).text for path, text in corpus.files.items()}
    missed = [(p.kind, p.path) for p in corpus.secrets if p.value in scrubbed[p.path]]
    assert missed == []
    changed = [(p.kind, p.value) for p in corpus.lookalikes if p.value not in scrubbed[p.path]]
    assert len(changed) <= 0.05 * len(corpus.lookalikes), changed


def test_no_secret_in_any_table(served_corpus, corpus):
    root, _, _ = served_corpus
    con = duckdb.connect(str(root / ".contextd" / "context.duckdb"), read_only=True)
    try:
        columns = con.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE data_type NOT LIKE 'FLOAT%' AND data_type NOT IN "
            "('BIGINT', 'INTEGER', 'DOUBLE', 'REAL', 'BOOLEAN', 'TIMESTAMP')").fetchall()
        dump = "\n".join(str(v) for table, column in columns for (v,) in con.execute(
            f'SELECT "{column}"::VARCHAR FROM "{table}"').fetchall())
        paths = {p for (p,) in con.execute("SELECT path FROM file_state").fetchall()}
    finally:
        con.close()
    assert set(corpus.files) <= paths  # .env.example, lockfiles and Dockerfile included
    assert not paths & set(SECRET_FILES)
    leaked = [(p.kind, p.path) for p in corpus.secrets if p.value in dump]
    assert leaked == []
    assert "why is [REDACTED] rejected" in dump  # the query quoting a key, in usage_metrics
    assert not [v for v in SECRET_FILES.values() if v.split()[-1] in dump]
    kept = sum(p.value in dump for p in corpus.lookalikes)
    assert kept >= 0.95 * len(corpus.lookalikes)


def test_no_secret_in_query_answers(served_corpus, corpus):
    _, mcp_answers, cli_answers = served_corpus
    for answers in (mcp_answers, cli_answers):
        text = "\n".join(answers)
        assert REDACTED in text  # the answers do show the redacted lines
        leaked = [(p.kind, p.path) for p in corpus.secrets if p.value in text
                  or json.dumps(p.value)[1:-1] in text]
        assert leaked == []


def test_check_file_names_secret_files(served_corpus):
    root, _, _ = served_corpus
    for rel in SECRET_FILES:
        done = subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), "--json",
                               "check-file", rel], capture_output=True, text=True, timeout=60,
                              cwd=root)
        verdict = json.loads(done.stdout)
        assert verdict["indexable"] is False and verdict["reason"] == "secret_file", verdict


@pytest.mark.parametrize("line", [
    "__all__ = ('Context', 'ContextVar', 'Token', 'copy_context')",
    "self.password = ''",
    "token = self._fp.read(1)[0]",
    "key = self.cmp_to_key(mycmp=cmp1)",
    "class pkcs7_signer_info_st(Structure):",
    "if key in ('__module__', '_member_map_', '_value2member_map_', '__doc__'):",
    "access=winreg.KEY_READ | winreg.KEY_WOW64_32KEY",
    "toolskey = \"VS%0.f0COMNTOOLS\" % version",
    "class CallSignaturePEP302(CallSignoreSuppressImportWarning):",
    "# OpenSSL's PKCS5_PBKDF2_HMAC requires OpenSSL 1.0+ with HMAC and SHA",
])
def test_real_code_on_key_and_token_lines_is_kept(line):
    """Lines of the Python standard library that earlier rules redacted."""
    assert scrub_secrets(line, "module.py").text == line


def test_commit_subjects_in_git_history_hits_are_scrubbed(tmp_path):
    """git_history answers name the commits behind a hit; their subjects are not indexed
    text, so they pass the scrubber on the way out."""
    from contextd.runtime.engine import Engine
    from contextd.config.project import Project
    from contextd.providers import ProviderQuery
    from contextd.records import ContextScope, TokenBudget

    key = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
    root = make_repo(tmp_path / "repo")
    (root / "src/billing/tax.py").write_text("def vat(amount):\n    return amount * 0.2\n")
    env = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com", "HOME": str(tmp_path),
           "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.com",
           "PATH": os.environ["PATH"]}
    subprocess.run(["git", "-C", str(root), "commit", "-qam", f"vat rounding with {key}"],
                   check=True, env=env)
    engine = Engine(Project.open(str(root)))
    try:
        engine.indexer.embed = False
        engine.ensure_indexed()
        hits = engine.module.pipeline.provider("git_history").query(ProviderQuery("vat rounding", 10),
                                                           ContextScope(), TokenBudget())
        subjects = [c["subject"] for h in hits for c in h.metadata.get("commits", [])]
        assert any("vat rounding with [REDACTED]" in s for s in subjects), subjects
        assert key not in json.dumps([h.metadata for h in hits])
    finally:
        engine.close()


def test_git_history_diff_context_lines_are_scrubbed(tmp_path):
    """A hit's ``recent_change`` diff shows the lines around the change: a credential there
    (issue 28's forms) is redacted like one on a changed line."""
    from contextd.runtime.engine import Engine
    from contextd.config.project import Project
    from contextd.providers import ProviderQuery
    from contextd.records import ContextScope, TokenBudget

    secrets = ISSUE_28_SECRETS
    lines = ['STORAGE = "DefaultEndpointsProtocol=https;AccountName=logs;'
             f'AccountKey={secrets["azure"]};EndpointSuffix=core.windows.net"',
             f'CACHE_URL = "redis://:{secrets["redis"]}@cache:6379/0"',
             f'DEPLOY = "curl -u deploy:{secrets["curl"]} https://ci.example.com/hooks"',
             f'SESSION_AUTH = ("reporting", "{secrets["auth"]}")',
             'def settle_ledger(amount):', '    return amount * 2']
    root = make_repo(tmp_path / "repo", {"src/ledger.py": "\n".join(lines) + "\n"})
    (root / "src/ledger.py").write_text("\n".join(lines[:-1] + ["    return amount * 3"]) + "\n")
    env = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com", "HOME": str(tmp_path),
           "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.com",
           "PATH": os.environ["PATH"]}
    subprocess.run(["git", "-C", str(root), "commit", "-qam", "triple the ledger"],
                   check=True, env={**env, "GIT_COMMITTER_DATE": "2099-01-01T00:00:00",
                                    "GIT_AUTHOR_DATE": "2099-01-01T00:00:00"})
    engine = Engine(Project.open(str(root)))
    try:
        engine.indexer.embed = False
        engine.ensure_indexed()
        hits = engine.module.pipeline.provider("git_history").query(
            ProviderQuery("settle ledger amount", 10), ContextScope(), TokenBudget())
        diffs = [h.metadata["recent_change"]["diff"] for h in hits
                 if "recent_change" in h.metadata]
        assert diffs and any("return amount * 3" in d for d in diffs), hits
        shown = json.dumps([h.metadata for h in hits]) + json.dumps([h.text for h in hits])
        for name, value in secrets.items():
            assert value not in shown, name
    finally:
        engine.close()
