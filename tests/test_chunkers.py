"""The built-in chunkers: golden chunks per language, invariants over fixtures and real files
(the Python standard library), robustness on bad input, and the token estimator.

Invariants checked everywhere: ``text`` is exactly the decoded text between the byte offsets
and lines match them; every non-blank line lands in a chunk; no chunk passes the cap; the same
input gives the same chunks.
"""

from __future__ import annotations

import glob
import os
import random
import sysconfig
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextd.chunkers.chunking import (ChunkedFile, chunk_file, chunker_for, decode_text,
                               effective_settings, language_for)
from contextd.config.loading import config_from_dict
from contextd.config.sections import ContextConfig
from contextd.records import ChunkKind
from contextd.text.tokens import estimate_tokens

FIXTURES = Path(__file__).parent / "fixtures" / "chunkers"
# The running interpreter's own standard library: real code no one here wrote, on any machine.
STDLIB = sysconfig.get_paths()["stdlib"]
CONFIG = ContextConfig()

GOLDEN = {
    "sample.py": [
        (1, 4, "DOCSTRING", "sample"),
        (6, 9, "CODE_BLOCK", "module code"),
        (12, 16, "CODE_CLASS", "User"),
        (19, 24, "CODE_CLASS", "Pipeline"),
        (26, 30, "CODE_FUNCTION", "Pipeline.step_0"),
        (32, 36, "CODE_FUNCTION", "Pipeline.step_1"),
        (38, 42, "CODE_FUNCTION", "Pipeline.step_2"),
        (44, 48, "CODE_FUNCTION", "Pipeline.step_3"),
        (50, 54, "CODE_FUNCTION", "Pipeline.step_4"),
        (56, 60, "CODE_FUNCTION", "Pipeline.step_5"),
        (63, 66, "CODE_FUNCTION", "authenticate"),
        # split at statement starts, each piece as full as the cap allows
        *[(start, end, "CODE_FUNCTION", "long_function") for start, end in
          [(69, 75), *[(76 + 5 * n, 80 + 5 * n) for n in range(7)], (111, 112)]],
        (115, 116, "CODE_BLOCK", "module code"),
    ],
    "sample.ts": [
        (1, 2, "CODE_BLOCK", "imports"),
        (4, 8, "CODE_CLASS", "User"),
        (10, 10, "CODE_CLASS", "Role"),
        (12, 15, "CODE_CLASS", "Status"),
        (17, 31, "CODE_CLASS", "AuthService"),
        (33, 36, "CODE_FUNCTION", "hashPassword"),
        (38, 38, "CODE_FUNCTION", "toUser"),
        (40, 41, "CODE_BLOCK", "module code"),
    ],
    "sample.tsx": [
        (1, 1, "CODE_BLOCK", "imports"),
        (3, 6, "CODE_CLASS", "LoginProps"),
        (8, 12, "CODE_FUNCTION", "LoginForm"),
        (14, 14, "CODE_FUNCTION", "Badge"),
        (16, 16, "CODE_BLOCK", "module code"),
    ],
    "sample.js": [
        (1, 2, "CODE_BLOCK", "module code"),
        (4, 17, "CODE_CLASS", "SessionStore"),
        (19, 22, "CODE_FUNCTION", "newId"),
        (24, 26, "CODE_FUNCTION", "handler"),
        (28, 28, "CODE_BLOCK", "module code"),
    ],
    "sample.kt": [
        (1, 4, "CODE_BLOCK", "imports"),
        (6, 9, "CODE_CLASS", "User"),
        (11, 21, "CODE_CLASS", "TokenService"),
        (23, 25, "CODE_CLASS", "Service"),
        (27, 29, "CODE_CLASS", "Registry"),
        (31, 33, "CODE_FUNCTION", "hashPassword"),
    ],
    "Sample.java": [
        (1, 4, "CODE_BLOCK", "imports"),
        (6, 25, "CODE_CLASS", "TokenService"),
        (27, 29, "CODE_CLASS", "Validator"),
        (31, 31, "CODE_CLASS", "Role"),
    ],
    "sample.go": [
        (1, 10, "CODE_BLOCK", "module code"),
        (12, 16, "CODE_CLASS", "Token"),
        (18, 21, "CODE_FUNCTION", "Token.Valid"),
        (23, 29, "CODE_FUNCTION", "Issue"),
    ],
    "sample.rs": [
        (1, 2, "CODE_BLOCK", "imports"),
        (4, 9, "CODE_CLASS", "Token"),
        (11, 15, "CODE_CLASS", "AuthError"),
        (17, 19, "CODE_CLASS", "Validator"),
        (21, 30, "CODE_CLASS", "Token"),
        (32, 37, "CODE_FUNCTION", "hash_password"),
    ],
    "sample.c": [
        (1, 4, "CODE_BLOCK", "module code"),
        (6, 10, "CODE_CLASS", "token"),
        (12, 12, "CODE_CLASS", "token_t"),
        (14, 18, "CODE_FUNCTION", "token_valid"),
        (20, 24, "CODE_FUNCTION", "token_value"),
    ],
    "sample.cpp": [
        (1, 4, "CODE_BLOCK", "module code"),
        (6, 17, "CODE_CLASS", "TokenService"),
        (19, 21, "CODE_CLASS", "Token"),
        (23, 26, "CODE_FUNCTION", "hash_password"),
        (28, 28, "CODE_BLOCK", "module code"),
    ],
    "sample.md": [
        (1, 3, "MARKDOWN_SECTION", "contextd"),
        (5, 7, "MARKDOWN_SECTION", "contextd > Install"),
        (9, 11, "MARKDOWN_SECTION", "contextd > Install > From source"),
        (13, 15, "CODE_BLOCK", "bash code"),
        (17, 17, "MARKDOWN_SECTION", "contextd > Install > From source"),
        (19, 21, "MARKDOWN_SECTION", "contextd > Usage"),
        (23, 26, "CODE_BLOCK", "python code"),
    ],
    "sample.yaml": [
        (1, 2, "YAML_BLOCK", "version"),
        (4, 13, "YAML_BLOCK", "services"),
        (15, 16, "YAML_BLOCK", "volumes"),
    ],
    "sample.sql": [
        (1, 5, "SQL_STATEMENT", "CREATE TABLE users"),
        (7, 7, "SQL_STATEMENT", "CREATE INDEX idx_users_email"),
        (9, 10, "SQL_STATEMENT", "INSERT INTO users"),
        (12, 17, "SQL_STATEMENT", "CREATE FUNCTION touch"),
        (19, 19, "SQL_STATEMENT", "SELECT FROM users"),
        (20, 20, "COMMENT", "comment"),
    ],
    "sample.toml": [
        (1, 2, "CONFIG_BLOCK", "name"),
        (3, 3, "CONFIG_BLOCK", "version"),
        (5, 7, "CONFIG_BLOCK", "server"),
        (9, 14, "CONFIG_BLOCK", "plugins"),
    ],
    "sample.json": [
        (1, 2, "CONFIG_BLOCK", "name"),
        (3, 3, "CONFIG_BLOCK", "version"),
        (4, 7, "CONFIG_BLOCK", "scripts"),
        (8, 11, "CONFIG_BLOCK", "dependencies"),
    ],
    "sample.txt": [(1, 6, "PARAGRAPH", "Release notes")],
}

LANGUAGES = {"sample.py": "python", "sample.ts": "typescript", "sample.tsx": "tsx",
             "sample.js": "javascript", "sample.kt": "kotlin", "Sample.java": "java",
             "sample.go": "go", "sample.rs": "rust", "sample.c": "c", "sample.cpp": "cpp",
             "sample.md": "markdown", "sample.yaml": "yaml", "sample.sql": "sql",
             "sample.toml": "toml", "sample.json": "json", "sample.txt": "text"}


def chunk_path(path: Path | str, data: bytes | None = None,
               config: ContextConfig = CONFIG) -> ChunkedFile:
    data = Path(path).read_bytes() if data is None else data
    return chunk_file(str(path), data, config)


def check_invariants(path: str, data: bytes, result: ChunkedFile,
                     config: ContextConfig = CONFIG) -> None:
    """The promises of chunk_file, checked on one result."""
    text, _ = decode_text(data)
    encoded = text.encode("utf-8")
    lines = text.split("\n")
    cap = effective_settings(config, result.language).max_tokens
    covered: set[int] = set()
    for chunk in result.chunks:
        assert encoded[chunk.start_byte:chunk.end_byte].decode("utf-8") == chunk.text
        assert chunk.start_line == encoded[:chunk.start_byte].count(b"\n") + 1
        assert chunk.end_line == encoded[:max(chunk.start_byte, chunk.end_byte - 1)].count(
            b"\n") + 1
        assert chunk.tokens <= cap, (path, chunk.label, chunk.tokens)
        assert estimate_tokens(chunk.text) <= cap + 1, (path, chunk.label)
        covered.update(range(chunk.start_line, chunk.end_line + 1))
    missing = [n for n, line in enumerate(lines, 1) if line.strip() and n not in covered]
    assert not missing, (path, missing[:10])


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_chunks(name: str) -> None:
    result = chunk_path(FIXTURES / name)
    assert result.language == LANGUAGES[name]
    got = [(c.start_line, c.end_line, c.kind.value, c.label) for c in result.chunks]
    assert got == GOLDEN[name]
    assert result.warnings == ()
    check_invariants(name, (FIXTURES / name).read_bytes(), result)


def by_label(name: str) -> dict[str, object]:
    return {c.label: c for c in reversed(chunk_path(FIXTURES / name).chunks)}


def test_python_symbols_context_and_references() -> None:
    chunks = by_label("sample.py")
    assert [(d.name, d.kind, d.line) for d in chunks["User"].defines] == [
        ("User", "class", 12), ("User.__init__", "method", 15)]
    assert chunks["sample"].kind is ChunkKind.DOCSTRING
    pipeline = chunks["Pipeline"]
    assert pipeline.text.startswith("# The pipeline applies numbered steps.\n@register")
    assert {"BasePipeline", "mixins.Logged", "register"} <= set(pipeline.references)
    step = chunks["Pipeline.step_0"]
    assert step.context == "class Pipeline(BasePipeline, mixins.Logged):"
    assert step.parent == "Pipeline"
    assert [(d.name, d.kind) for d in step.defines] == [("Pipeline.step_0", "method")]
    assert "transform" in step.references
    assert chunks["authenticate"].text.startswith("@cached\ndef authenticate")
    assert "os" in chunks["module code"].references or "print" in chunks["module code"].references


def test_long_python_function_is_split_with_overlap_and_signature_context() -> None:
    pieces = [c for c in chunk_path(FIXTURES / "sample.py").chunks if c.label == "long_function"]
    assert len(pieces) > 2
    assert pieces[0].defines and pieces[0].text.startswith("def long_function(items):")
    assert all(p.context == "def long_function(items):" for p in pieces[1:])
    assert pieces[-1].text.rstrip().endswith("return total")
    body = FIXTURES.joinpath("sample.py").read_text().split("\n")
    # each cut falls on a statement start, never inside one
    assert all(body[p.start_line - 1].startswith("    total") for p in pieces[1:])


def test_code_symbols_per_language() -> None:
    assert [d.name for d in by_label("sample.ts")["AuthService"].defines] == [
        "AuthService", "AuthService.constructor", "AuthService.validate"]
    assert by_label("sample.ts")["AuthService"].text.startswith("/**\n * Issues")
    assert by_label("sample.ts")["toUser"].defines[0].kind == "function"
    assert {"createHash", "crypto"} <= set(by_label("sample.ts")["imports"].references)
    kotlin = by_label("sample.kt")
    assert kotlin["TokenService"].text.startswith("/** Validates")
    assert {"Service", "expired", "now", "verify"} <= set(kotlin["TokenService"].references)
    assert {"java.time.Instant", "com.example.crypto.Hasher"} <= set(
        kotlin["imports"].references)
    assert [d.name for d in kotlin["TokenService"].defines] == [
        "TokenService", "TokenService.validate", "TokenService.expired"]
    assert by_label("Sample.java")["TokenService"].text.startswith("/**\n * Issues")
    assert {"BaseService", "Validator"} <= set(by_label("Sample.java")["TokenService"].references)
    assert by_label("sample.go")["Token.Valid"].defines[0].name == "Token.Valid"
    assert by_label("sample.go")["Token"].defines[0].kind == "struct"
    rust = by_label("sample.rs")
    assert rust["Token"].text.startswith("impl Token") or rust["Token"].defines
    assert [d.name for d in rust["hash_password"].defines] == ["hash_password"]
    assert rust["hash_password"].text.startswith("/// Hashes a password.")
    assert "strlen" in by_label("sample.c")["token_valid"].references
    assert "Service" in by_label("sample.cpp")["TokenService"].references


def test_references_through_the_grammars_misreadings() -> None:
    """Calls the pinned grammars parse as something else still count as references:
    tree-sitter-kotlin reads ``f<T> { }`` as comparisons and wraps ``!f(x)``'s name in the
    operator; tree-sitter-cpp reads ``T b(std::move(a));`` as a function declaration."""
    kotlin = chunk_file("t.kt", b"fun t() {\n    assertFailsWith<IOException> { read() }\n"
                        b"    check(!exists(path))\n}\n", ContextConfig()).chunks
    assert {"assertFailsWith", "read", "check", "exists"} <= set(kotlin[0].references)
    cpp = chunk_file("t.cpp", b"void f(Buffer a) {\n    Buffer b(std::move(a));\n}\n",
                     ContextConfig()).chunks
    assert "std::move" in cpp[0].references


def test_text_formats_details() -> None:
    md = chunk_path(FIXTURES / "sample.md").chunks
    fence = next(c for c in md if c.label == "bash code")
    assert fence.text == "```bash\npip install -e .\n```"
    assert fence.parent == "contextd > Install > From source"
    sql = by_label("sample.sql")
    assert [(d.name, d.kind) for d in sql["CREATE TABLE users"].defines] == [("users", "table")]
    assert sql["CREATE TABLE users"].text.startswith("-- Users of the system.")
    assert "semi;colon" in sql["INSERT INTO users"].text
    assert "$$ LANGUAGE plpgsql;" in sql["CREATE FUNCTION touch"].text
    assert "value = not a key" in by_label("sample.toml")["plugins"].text


def test_long_markdown_section_is_cut_at_paragraphs_into_full_pieces() -> None:
    para = "Paragraph {n} " + "lorem ipsum dolor sit amet " * 12  # ~85 tokens each
    text = "# Title\n\n" + "\n\n".join(para.format(n=n) for n in range(40)) + "\n"
    data = text.encode()
    result = chunk_path("long.md", data)
    check_invariants("long.md", data, result)
    lines = text.split("\n")
    assert all(lines[c.start_line - 1].startswith(("# Title", "Paragraph"))
               for c in result.chunks)
    # two paragraphs fit under the cap, so a piece never holds just one (but the last)
    assert all(c.text.count("Paragraph") == 2 for c in result.chunks[:-1])
    assert len(result.chunks) == 20


def test_large_yaml_and_json_keys_split_by_key_path() -> None:
    services = "\n".join(f"  svc{n}:\n    image: registry.example.com/team/app-{n}:1.{n}\n"
                         f"    command: run --port {8000 + n} --workers 4 --verbose"
                         for n in range(30))
    result = chunk_path("big.yaml", f"services:\n{services}\nother: 1\n".encode())
    labels = [c.label for c in result.chunks]
    assert "services.svc0" in labels and "services.svc29" in labels and "other" in labels
    pairs = ",\n".join(f'    "k{n}": "value number {n} with some words"' for n in range(60))
    result = chunk_path("big.json", ('{\n  "outer": {\n' + pairs + "\n  }\n}\n").encode())
    assert {"outer.k0", "outer.k59"} <= {c.label for c in result.chunks}
    for path, data in (("big.yaml", f"services:\n{services}\nother: 1\n".encode()),):
        check_invariants(path, data, chunk_path(path, data))


def test_dispatch_by_filename_and_extension() -> None:
    assert language_for("a/b/c.PY") == "python"
    assert language_for("x.tsx") == "tsx"
    assert language_for("Pipfile") == "toml"
    assert language_for("notes.unknownext") is None
    assert chunker_for("x.unknownext") is None
    assert chunk_path("notes.unknownext", b"hello\n\nworld\n").language == "text"


def test_configured_max_tokens_is_used_and_capped_at_model_window() -> None:
    small = config_from_dict({"chunking": {"python": {"max_tokens": 64}}})
    assert effective_settings(small, "python").max_tokens == 64
    big = config_from_dict({"chunking": {"python": {"max_tokens": 4000}}})
    assert effective_settings(big, "python").max_tokens == 256 - 32
    result = chunk_path(FIXTURES / "sample.py", config=small)
    check_invariants("sample.py", (FIXTURES / "sample.py").read_bytes(), result, small)
    assert max(c.tokens for c in result.chunks) <= 64


def stdlib_files(count: int) -> list[str]:
    files = sorted(glob.glob(os.path.join(STDLIB, "**", "*.py"), recursive=True))
    return random.Random(3).sample(files, count)


@pytest.mark.skipif(not os.path.isdir(STDLIB), reason="needs the CPython standard library")
@pytest.mark.slow
def test_invariants_and_determinism_over_real_stdlib_files() -> None:
    for path in [*stdlib_files(300), *glob.glob(os.path.join(STDLIB, "**", "*.txt"),
                                                  recursive=True)[:20]]:
        data = Path(path).read_bytes()
        first = chunk_path(path, data)
        check_invariants(path, data, first)
        assert chunk_path(path, data) == first


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_fixture_invariants_under_a_tiny_cap(name: str) -> None:
    tiny = config_from_dict({"chunking": {LANGUAGES[name]: {"max_tokens": 16}}})
    data = (FIXTURES / name).read_bytes()
    check_invariants(name, data, chunk_path(FIXTURES / name, data, tiny), tiny)


def test_syntax_error_file_still_chunks() -> None:
    data = b"def ok():\n    return 1\n\ndef broken(:\n    x = = 2\n  )) ]\n\nclass C:\n    pass\n"
    result = chunk_path("broken.py", data)
    check_invariants("broken.py", data, result)
    assert "ok" in [c.label for c in result.chunks]
    garbage = b")))]]]}}} {{{ ((( " * 400
    check_invariants("garbage.py", garbage, chunk_path("garbage.py", garbage))


def test_minified_one_line_js_of_200kb() -> None:
    body = "".join(f"function f{n}(a,b){{return a*b+{n}}}var v{n}=f{n}(1,2);" for n in range(5000))
    data = body.encode()[:200_000]
    result = chunk_path("bundle.min.js", data)
    check_invariants("bundle.min.js", data, result)
    assert len(result.chunks) > 50
    assert all(c.start_line == 1 for c in result.chunks)


def test_ten_thousand_line_file() -> None:
    data = "".join(f"def f{n}(x):\n    return x + {n}\n\n" for n in range(3400)).encode()
    assert data.count(b"\n") > 10_000
    result = chunk_path("big.py", data)
    check_invariants("big.py", data, result)
    assert sum(1 for c in result.chunks if c.kind is ChunkKind.CODE_FUNCTION) == 3400


def test_crlf_mixed_endings_bom_and_invalid_utf8() -> None:
    crlf = b"def a():\r\n    return 1\r\n\r\ndef b():\r\n    return 2\r\n"
    result = chunk_path("crlf.py", crlf)
    assert [(c.label, c.start_line, c.end_line) for c in result.chunks] == [
        ("a", 1, 2), ("b", 4, 5)]
    assert result.warnings == ()
    mixed = b"# one\r\nx = 1\ny = 2\rz = 3\n"
    result = chunk_path("mixed.py", mixed)
    assert any("mixed line endings" in w for w in result.warnings)
    check_invariants("mixed.py", mixed, result)
    bom = b"\xef\xbb\xbfdef a():\n    return 1\n"
    result = chunk_path("bom.py", bom)
    assert result.chunks[0].text.startswith("def a():") and result.chunks[0].start_byte == 0
    bad = b"x = 1\ny = '\xff\xfe'\n\ndef f():\n    return 'caf\xc3\xa9'\n"
    result = chunk_path("bad.py", bad)
    assert any("invalid UTF-8" in w for w in result.warnings)
    assert "\ufffd" in result.chunks[0].text
    check_invariants("bad.py", bad, result)


def test_empty_and_blank_files() -> None:
    assert chunk_path("empty.py", b"").chunks == []
    assert chunk_path("blank.md", b"\n\n   \n").chunks == []


LINE = st.sampled_from([
    "def f(x):", "    return x", "class A(B):", "    def m(self):", "        pass",
    "# comment", "", "   ", "import os", "x = [1, 2,", "  3]", '"""doc', 'string"""',
    "# Heading", "## Sub heading", "```python", "```", "key: value", "  child: 1",
    "- item", "SELECT * FROM t;", "-- note", "[table]", "a = 1", "{", "}", "ünïcödé 漢字 text",
    "x" * 300, "word " * 80,
])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(LINE, max_size=40),
       ext=st.sampled_from([".py", ".ts", ".md", ".yaml", ".sql", ".toml", ".json", ".txt",
                            ".go", ".rs"]),
       newline=st.sampled_from(["\n", "\r\n"]))
def test_property_coverage_cap_determinism(lines: list[str], ext: str, newline: str) -> None:
    data = newline.join(lines).encode("utf-8")
    path = "generated" + ext
    result = chunk_path(path, data)
    check_invariants(path, data, result)
    assert chunk_path(path, data) == result


def test_estimate_tokens_is_conservative_on_code() -> None:
    tokenizer = pytest.importorskip("tokenizers").Tokenizer
    from contextd.embedders.model_files import BUNDLED_MODEL, MODELS_DIR

    tok = tokenizer.from_file(str(MODELS_DIR / BUNDLED_MODEL / "tokenizer.json"))
    tok.no_truncation()  # the shipped tokenizer.json truncates and pads to 128
    tok.no_padding()
    chunks = [c for name in GOLDEN for c in chunk_path(FIXTURES / name).chunks]
    real = [len(tok.encode(c.text, add_special_tokens=False).ids) for c in chunks]
    under = sum(r > c.tokens for r, c in zip(real, chunks))
    assert under <= len(chunks) * 0.1
    assert all(r <= c.tokens * 1.25 for r, c in zip(real, chunks))
    assert estimate_tokens("") == 0


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab_9 \n\t(é½²日本０😀𝐀") + ["\u2e80", "\uffff"]),
               min_size=1, max_size=60), st.data())
def test_source_tokens_match_estimator_on_non_ascii_spans(text: str, data) -> None:
    """Source.tokens keeps running counts for non-ASCII files: any span at character
    boundaries must give exactly what estimate_tokens gives for its text."""
    from contextd.chunkers.core import Source

    src = Source(text + "é", "x.py", "python")
    starts = [i for i in range(len(src.data) + 1)
              if i == len(src.data) or src.data[i] & 0xC0 != 0x80]
    start = data.draw(st.sampled_from(starts))
    end = data.draw(st.sampled_from([i for i in starts if i >= start]))
    assert src.tokens(start, end) == estimate_tokens(src.data[start:end].decode("utf-8"))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80) | st.text(alphabet=st.sampled_from(list("ab_9 \n\t(é日")),
                                        max_size=60).map(lambda t: t.encode("utf-8")))
def test_the_cost_prefix_is_the_running_sum_of_each_bytes_weight(data: bytes) -> None:
    """The byte costs cuts are made on (issue 37 reads them two bytes at a time): each byte
    weighs its own weight plus a word's where a word starts, summed in order, exactly."""
    from contextd.chunkers.core import _BYTE_WEIGHTS, _IS_WORD, Source
    from contextd.text.tokens import WORD_WEIGHT

    src = Source("", "x.py", "python")
    src.data = data
    b = np.frombuffer(data, dtype=np.uint8)
    word = _IS_WORD[b]
    weights = _BYTE_WEIGHTS[b]
    weights[1:] += WORD_WEIGHT * (word[1:] & ~word[:-1])
    if len(word):
        weights[0] += WORD_WEIGHT * word[0]
    assert np.array_equal(src.cost_prefix(), np.concatenate(([0.0], np.cumsum(weights))))
