"""Secret scrubbing: every pattern redacted with its structure kept, and planted secrets of
every kind found in no text column of any table after indexing a real repository."""

from __future__ import annotations

import dataclasses
import re
import string
from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextd.config.sections import SecurityConfig
from contextd.indexer import Indexer
from contextd.config.project import Project
from contextd.scrub.candidates import candidate_lines
from contextd.scrub.rules import KEYWORDS, STRONG_NAME, TOKEN_MARKERS, WEAK_NAME
from contextd.scrub.scrubber import (REDACTED, Scrubber, _assigns_a_name, get_scrubber,
                                    spellings)
from contextd.store.duckdb import DuckDBStore
from test_indexer import make_repo, open_indexer

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
PEM_BODY = "MIIEowIBAAKCAQEAx7secretkeymaterialZZ"
SECRETS = {
    "password": "super_secret_123",
    "api_key": "sk_live_api_value_42",
    "token": "tok_abcdef_987",
    "dbpass": "pgpass_hunter2",
    "aws": AWS_KEY,
    "pem": PEM_BODY,
    "yaml": "yaml_client_secret_55",
    "env": "env_password_77",
    "custom": "custom_pattern_value",
    "ts": "ts_api_key_value_31",
}

CODE = f'''"""Settings."""
password = "{SECRETS["password"]}"
API_KEY = '{SECRETS["api_key"]}'
access_token = "{SECRETS["token"]}"
DATABASE_URL = "postgres://admin:{SECRETS["dbpass"]}@db.example.com:5432/app"
AWS_ID = "{SECRETS["aws"]}"
PRIVATE = """-----BEGIN RSA PRIVATE KEY-----
{PEM_BODY}
-----END RSA PRIVATE KEY-----"""
SIGNING = "internal-{SECRETS["custom"]}"


def connect(password=None):
    """Uses the password."""
    return password
'''


@pytest.fixture(scope="module")
def scrubber() -> Scrubber:
    return get_scrubber(True, tuple(SecurityConfig().secret_patterns))


@pytest.mark.parametrize("before, after", [
    ('password = "super_secret_123"', f'password = "{REDACTED}"'),
    ("apiKey: 'abc123'", f"apiKey: '{REDACTED}'"),
    ('const apiKey: string = "abc123";', f'const apiKey: string = "{REDACTED}";'),
    ('{"client_secret": "s3cr3t"}', f'{{"client_secret": "{REDACTED}"}}'),
    ("url = 'mysql://root:pw123@localhost/db'", f"url = 'mysql://root:{REDACTED}@localhost/db'"),
    (f"key = {AWS_KEY}", f"key = {REDACTED}"),
    ("max_tokens = \"256\"", "max_tokens = \"256\""),
    ("token = get_token()", "token = get_token()"),
    # Issue 28: forms the rules missed ...
    ('c = "DefaultEndpointsProtocol=https;AccountName=logs;AccountKey=Zm9vYmFy+x7Q2w==;"',
     f'c = "DefaultEndpointsProtocol=https;AccountName=logs;AccountKey={REDACTED};"'),
    ("REDIS_URL = 'redis://:pw7Hq2x9@c:6379/0'", f"REDIS_URL = 'redis://:{REDACTED}@c:6379/0'"),
    ("curl -u deploy:Hq2x9pw7 https://ci", f"curl -u deploy:{REDACTED} https://ci"),
    ("curl --user=admin:Hq2x9pw7 localhost", f"curl --user=admin:{REDACTED} localhost"),
    ('r = requests.get(url, auth=("admin", "Hq2x9pw7"))',
     f'r = requests.get(url, auth=("admin", "{REDACTED}"))'),
    # ... and lines of real code they changed.
    ("  id-token: write", "  id-token: write"),
    ("quote, token = \"'\", token[0][1:-1]", "quote, token = \"'\", token[0][1:-1]"),
    ("credentials = '{0}:{1}'.format(user, pw)", "credentials = '{0}:{1}'.format(user, pw)"),
    ('u = urlsplit("http://u:p@host/x")', 'u = urlsplit("http://u:p@host/x")'),
    ("docker run -u 1000:1000 img", "docker run -u 1000:1000 img"),
    ('webhook_secret="my_secret_key"', 'webhook_secret="my_secret_key"'),
    ('api_key="hf_...",  # your token', 'api_key="hf_...",  # your token'),
    ("MLKEM768X25519PrivateKey = rust.MLKEM768X25519PrivateKey",
     "MLKEM768X25519PrivateKey = rust.MLKEM768X25519PrivateKey"),
])
def test_patterns_keep_structure(scrubber, before, after):
    assert scrubber.scrub(before, "x.py").text == after


def test_config_files_redact_unquoted_values(scrubber):
    text = "DB_PASSWORD=hunter2\nexport API_KEY=xyz # note\nname: bob\nsecret: abc\n"
    result = scrubber.scrub(text, ".env")
    assert result.text == (f"DB_PASSWORD={REDACTED}\nexport API_KEY={REDACTED} # note\n"
                           f"name: bob\nsecret: {REDACTED}\n")
    assert result.redactions == 3


def test_private_key_keeps_line_count(scrubber):
    text = "a\n-----BEGIN PRIVATE KEY-----\nAAA\nBBB\nCCC\n-----END PRIVATE KEY-----\nz\n"
    result = scrubber.scrub(text, "k.pem")
    assert "AAA" not in result.text and REDACTED in result.text
    assert result.text.count("\n") == text.count("\n")


@pytest.mark.parametrize("before, after", [
    ('db = connect(password="", database="prod")', 'db = connect(password="", database="prod")'),
    ('db = connect(password="Pw7-hq2x9", database="prod")',
     f'db = connect(password="{REDACTED}", database="prod")'),
    ('cfg = dict(password="Pw7-hq2x9", region="eu-west-1")',
     f'cfg = dict(password="{REDACTED}", region="eu-west-1")'),
    ('cfg = dict(password="secret", region="eu-west-1")',
     'cfg = dict(password="secret", region="eu-west-1")'),
    ("f(password='Pw7-hq2x9', db_password='Other-9q2x', token='Tk3n-9q2x')",
     f"f(password='{REDACTED}', db_password='{REDACTED}', token='{REDACTED}')"),
])
def test_default_patterns_redact_exactly_the_value(scrubber, before, after):
    """Issue 40: the default ``password\\s*=\\s*["'].*["']`` pattern reached the last quote
    of the line and redacted the literals after the value (``password=""[REDACTED]"prod"``),
    or the neighbour instead of the value. A value of ``"secret"`` is a stand-in word, as
    for every other rule."""
    assert scrubber.scrub(before, "x.py").text == after


@pytest.mark.parametrize("text", [
    'KEY = "-----BEGIN RSA PRIVATE KEY-----\\nMIIEowIBAAKCAQEAx7Hq2x9\\nZm9vYmFyQ2x9pw7\\n'
    '-----END RSA PRIVATE KEY-----\\n"\nx = 1\n',
    'a\n-----BEGIN PRIVATE KEY-----\nMIIEowIBAAKCAQEAx7Hq2x9\nZm9vYmFyQ2x9pw7\n'
    '-----END PRIVATE KEY-----\nz\n',
])
def test_private_key_redaction_keeps_lines_and_columns_around_it(scrubber, text):
    """Issue 40: a key written on one line with ``\\n`` escapes gained two lines."""
    result = scrubber.scrub(text, "keys.py")
    assert "MIIEow" not in result.text and "Zm9vYm" not in result.text
    assert result.text.count("\n") == text.count("\n")
    assert result.redactions == 1
    for before, after in zip(text.split("\n"), result.text.split("\n")):
        if "PRIVATE KEY" not in before:
            assert after == before or after == REDACTED


def test_private_key_in_a_notebook_keeps_its_json(scrubber):
    """A key pasted into a notebook cell: each line is a JSON string of its own."""
    import json

    cell = {"cell_type": "code", "metadata": {}, "source": [
        'KEY = """-----BEGIN RSA PRIVATE KEY-----\n', "MIIEowIBAAKCAQEAx7Hq2x9Zm9vYmFy\n",
        "Q2x9pw7Hq2x9pw7Hq2x9pw7==\n", '-----END RSA PRIVATE KEY-----"""\n', "sign(KEY)"]}
    text = json.dumps({"cells": [cell]}, indent=1)
    result = scrubber.scrub(text, "demo.ipynb")
    assert "MIIEow" not in result.text and "Q2x9pw7" not in result.text
    assert result.text.count("\n") == text.count("\n")
    source = json.loads(result.text)["cells"][0]["source"]
    assert source[0] == cell["source"][0] and source[-1] == "sign(KEY)"
    assert source[1] == f"{REDACTED}\n"


def test_switch_off():
    assert Scrubber(enabled=False).scrub('password = "x1"').text == 'password = "x1"'


def test_planted_secrets_appear_in_no_table(tmp_path):
    root = make_repo(tmp_path / "repo", {
        "settings.py": CODE,
        "deploy.yaml": f"service:\n  client_secret: {SECRETS['yaml']}\n  replicas: 2\n",
        ".env.example": f"ADMIN_PASSWORD={SECRETS['env']}\n",
        "client.ts": f"export const apiKey: string = '{SECRETS['ts']}';\n",
    })
    (root / "context.toml").write_text(
        '[security]\nsecret_patterns = ["internal-[a-z_]+"]\n'
        '[indexing]\nallowed_extensions = [".py", ".yaml", ".ts", ".example"]\n')
    indexer = open_indexer(root)
    report = indexer.ensure_indexed()
    assert report.files_indexed == 4 and report.secrets_redacted >= len(SECRETS)
    indexer.store.close()
    con = duckdb.connect(str(indexer.project.db_path), read_only=True)
    columns = con.execute("SELECT table_name, column_name FROM information_schema.columns "
                          "WHERE data_type IN ('VARCHAR', 'VARCHAR[]', 'JSON')").fetchall()
    assert len(columns) > 20
    for table, column in columns:
        values = " ".join(str(v) for (v,) in con.execute(
            f'SELECT "{column}" FROM "{table}"').fetchall())
        for name, secret in SECRETS.items():
            assert secret not in values, f"{name} found in {table}.{column}"
    stored = " ".join(t for (t,) in con.execute("SELECT text FROM chunks").fetchall())
    assert f'password = "{REDACTED}"' in stored and "connect(password=None)" in stored
    assert con.execute("SELECT sum(secrets_redacted) FROM file_state").fetchone()[0] >= 10
    con.close()


def test_scrubbing_can_be_switched_off_in_config(tmp_path):
    root = make_repo(tmp_path / "repo", {"settings.py": 'password = "kept_value"\n'})
    project = open_indexer(root).project
    config = dataclasses.replace(project.config, security=SecurityConfig(scrub_secrets=False))
    indexer = Indexer(Project(root, config), DuckDBStore(tmp_path / "off.duckdb"), embed=False)
    indexer.ensure_indexed()
    assert "kept_value" in indexer.store.chunks_for_files()[0].text


def test_text_that_lower_casing_lengthens_is_scrubbed_and_ends(scrubber):
    """Turkish "İ" lower-cases to two characters: keyword offsets found in the lower-cased
    copy then ran past the text, and the scan for candidate lines looped for ever (issue 37:
    an owner stuck on fastapi's docs/tr/docs/virtual-environments.md)."""
    text = "İ" * 20 + "\nİstanbul notes\npassword = \"super_secret_123\"\nthe key"
    result = scrubber.scrub(text, "notes.py")
    assert f'password = "{REDACTED}"' in result.text and "super_secret_123" not in result.text
    assert result.text.startswith("İ" * 20)


def _lines_holding_a_word(text: str) -> list[tuple[tuple[int, int], bool]]:
    """The reference: every line holding a keyword (ASCII letters in any case) or a marker
    (exact case), found word by word with str.find, and whether it holds a marker."""
    lower = text.translate(str.maketrans(string.ascii_uppercase, string.ascii_lowercase))
    spans: dict[tuple[int, int], bool] = {}
    for haystack, words, is_marker in ((lower, KEYWORDS, False), (text, TOKEN_MARKERS, True)):
        for word in words:
            found = haystack.find(word)
            while found >= 0:
                start = text.rfind("\n", 0, found) + 1
                end = text.find("\n", found)
                end = len(text) if end < 0 else end
                spans[(start, end)] = spans.get((start, end), False) or is_marker
                found = haystack.find(word, end)
    return sorted(spans.items())


# Pieces that make texts full of words, near-words, both cases, line ends and non-ASCII.
_PIECES = st.sampled_from([*KEYWORDS, *TOKEN_MARKERS, *(w.upper() for w in KEYWORDS),
                           "pas", "to", "k", "S", "-", "u", "\n", "\n\n", " ", "x", "İ", "é",
                           "漢", "\ud800", "\t", "=", ":", "A", "tokn", "kex"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("".join))
def test_candidate_lines_are_the_lines_a_word_by_word_search_finds(text):
    """The one-pass scan (issue 37) finds exactly the lines, and marker flags, that a
    str.find per keyword and marker finds: at the text's ends, across cases, beside
    non-ASCII characters and lone surrogates."""
    assert candidate_lines(text) == _lines_holding_a_word(text)


def test_candidate_lines_of_every_file_of_a_project_match_the_word_by_word_search():
    """The same on this repository's own files (code, docs, tests full of planted secrets)."""
    root = Path(__file__).resolve().parent.parent
    texts = [p.read_text("utf-8") for p in sorted(root.glob("*/*.py")) + sorted(
        root.glob("docs/*.md"))]
    assert len(texts) > 50
    for text in texts:
        assert candidate_lines(text) == _lines_holding_a_word(text)


_ASSIGNED_NAME_FORWARD = re.compile(rf"""(?i)(?:{STRONG_NAME}|{WEAK_NAME})\b["']?\s*[:=]""")
_ASSIGNMENT_PIECES = st.sampled_from([
    *spellings(f"{STRONG_NAME}|{WEAK_NAME}"), "PASSWORD", "Api-Key", "x", "_", "-", " ", "\t",
    "'", '"', ":", "=", "=>", ":=", "é", "İ", "K", "\u212a", "ſ", "1", "(", ".", "\n"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_ASSIGNMENT_PIECES, max_size=12).map("".join))
def test_the_backwards_search_for_an_assigned_name_finds_what_the_forward_one_finds(line):
    """The reversed search (issue 37) answers as the forward pattern it replaced, for every
    spelling of every name, quotes, blanks, other cases and look-alike letters."""
    assert _assigns_a_name(line) == (_ASSIGNED_NAME_FORWARD.search(line) is not None)


def test_spellings_lists_every_string_of_a_finite_pattern_and_refuses_others():
    assert sorted(spellings("ab[_-]?c(?:d|ef)?")) == sorted(
        f"ab{sep}c{end}" for sep in ("", "_", "-") for end in ("", "d", "ef"))
    with pytest.raises(ValueError, match="not a finite set"):
        spellings("a+b")
