"""Large, messy repositories answered right from the first query (issue 26), from the CLI.

Nothing is fetched at run time. The repositories are brought in once, beforehand, with the
session's ``fetch`` tool (a bare mirror of a public GitHub repository under
``/work/.mirror/<owner>+<name>/repo``) and cloned to a work tree:

    git clone -q /work/.mirror/fastapi+fastapi/repo /work/corpora/r/fastapi    # 3,139 files
    git clone -q /work/.mirror/wagtail+wagtail/repo /work/corpora/r/wagtail    # 5,302 files
    git clone -q /work/.mirror/saleor+saleor/repo /work/corpora/r/saleor      # 4,673 files

(django's mirror is over the fetch tool's 500 MB limit, so wagtail is the 5,000+-file one;
saleor has no written questions and serves the change requests only.)
The script then adds a git-ignored ``.venv`` of 20,000 folders inside each work tree (listed in
``.git/info/exclude``), the shape that melted the watcher in the issue.

Per repository it prints:

* **first answer**: wall ms of the first ``contextd query`` on a never-indexed copy (the index
  directory is removed first; chunking included), and whether any provider was left out;
* **right file in the top 5** for the questions of ``benchmarks/scale/questions_<repo>.json``
  (written from each repository's code before any tuning; a question counts when one of its
  gold files is among the files of the first 5 hits), every question asked through the CLI,
  and the wall ms of each: p50 / p95 / max once warm (target: every answer <= 3 s, >= 80%
  right);
* with ``--complete`` (and ``--questions 8``: issue 37's first eight answers): the same
  questions then asked in process over the complete lexical index (the owner stopped, the
  files left read), to compare the first answers' top 5 against;
* **change-request localization**: the latest ``--commits`` commits that changed 1-4 existing
  source files (``.py``, ``.go``, ``.ts``/``.js``; tests, docs, examples and vendored code
  left out by each language's path conventions: :func:`_is_source`), after the
  ``--commits-skip`` latest such commits (an older window, held out from any tuning),
  message as the query, the changed files as the answer, asked of an index of a checkout of
  the parent of the oldest of them (its history up to there, as a user has it; no answer
  leaks into it). Three systems on that tree: contextd's ``--files`` ranking and its hits
  (lexical and symbol providers), semble 0.7.0 BM25-only as a peer (``alpha=0``, in its own
  virtualenv, ``--semble``: benchmarks/scale/semble_peer.py) and BM25 over whole files. Per
  system: R@1, R@5, MRR@10 of the files, the median tokens read before the first hit in a
  changed file and the share of cases where one is reached within the first 10 hits; then
  the same figures for exact symbol lookups (60 names each defined in one source file of
  the tree, the name alone as the query);
* with ``--vectors``: seconds until ``contextd stats`` reports no chunk waiting for its vector
  (about 10 minutes for fastapi on a quiet 2-core machine), then the background owner's peak
  RSS (VmHWM) and its CPU over ``--idle`` seconds, read from ``/proc/<pid>``, the questions
  again (hybrid answers with every vector, from the warm owner: the wall ms a CLI query
  costs once the owner runs), and the owner's embedding rate against the embedder's own on
  a sample of the same texts.

The quality part runs first; the vector part is optional because of its length. On
2026-11-26 (before the watcher of issue 26's runtime half) the owner started by the first
answer looped on inotify overflows below the ``.venv`` and the next CLI query waited on it
for over 12 minutes: ``--no-venv`` measures the answers apart from that. Figures are
one run on whatever else the machine is doing: say so when quoting them.

    .venv/bin/python benchmarks/bench_scale.py /work/corpora/r/fastapi /work/corpora/r/wagtail
        [--commits 40] [--commits-skip 0] [--semble /work/venvs/semble/bin/python] [--vectors]
        [--idle 60] [--keep-index] [--in-process] [--no-venv] [--questions 8] [--complete]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

QUESTIONS = Path(__file__).parent / "scale"
VENV_FOLDERS = 20_000
TOP = 5
ANSWER_TARGET_MS = 3000
HISTORY_SCAN = 3000
MAX_GOLD_FILES = 4
MAX_QUERY_CHARS = 600
CONTEXTD = [sys.executable, "-m", "contextd"]
SEMBLE_PYTHON = Path("/work/venvs/semble/bin/python")


# ----- preparation -------------------------------------------------------------------------
def add_ignored_venv(root: Path, folders: int = VENV_FOLDERS) -> None:
    """A git-ignored ``.venv`` holding ``folders`` folders (site-packages shaped), made once."""
    venv = root / ".venv"
    marker = venv / ".made-by-bench-scale"
    exclude = root / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    if not exclude.exists() or ".venv/" not in exclude.read_text():
        with exclude.open("a") as out:
            out.write("\n.venv/\n")
    if marker.exists():
        return
    site = venv / "lib" / "python3.11" / "site-packages"
    for i in range(folders):
        package = site / f"pkg{i // 100:03d}" / f"mod{i % 100:02d}"
        package.mkdir(parents=True, exist_ok=True)
        if i % 10 == 0:
            (package / "__init__.py").write_text(f"VALUE = {i}\n")
    marker.write_text("")


def put_venv_aside(root: Path) -> None:
    """Move a ``.venv`` this script made out of the work tree (``--no-venv``: measure the
    ranking and latency apart from the watcher)."""
    venv = root / ".venv"
    if (venv / ".made-by-bench-scale").exists():
        aside = root.parent / f".{root.name}-venv-aside"
        shutil.rmtree(aside, ignore_errors=True)
        venv.rename(aside)


def questions(root: Path) -> list[dict]:
    """The written questions of a repository; none for one brought in only for its history
    (saleor: change requests only)."""
    path = QUESTIONS / f"questions_{root.name}.json"
    return json.loads(path.read_text())["questions"] if path.exists() else []


# ----- the CLI -------------------------------------------------------------------------------
def cli(root: Path, *args: str, timeout: float = 900) -> tuple[float, dict | None, str]:
    """(wall ms, parsed JSON or None, stderr) of one ``contextd --json`` command."""
    begin = time.perf_counter()
    done = subprocess.run([*CONTEXTD, "--root", str(root), "--json", *args],
                          capture_output=True, text=True, timeout=timeout)
    wall = (time.perf_counter() - begin) * 1000
    try:
        return wall, json.loads(done.stdout), done.stderr
    except json.JSONDecodeError:
        return wall, None, done.stderr + done.stdout


def hit_files(answer: dict | None) -> list[str]:
    """Distinct files of the first TOP hits, in order."""
    seen: dict[str, None] = {}
    for hit in (answer or {}).get("hits", [])[:TOP]:
        seen.setdefault(hit["file_path"], None)
    return list(seen)


def left_out(answer: dict | None) -> list[str]:
    return [n for n in (answer or {}).get("notes", []) if "left out" in n or "timed out" in n]


def owner_pid(root: Path) -> int | None:
    lock = root / ".contextd" / "owner.lock"
    try:
        pid = int(lock.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if Path(f"/proc/{pid}").exists() else None


def stop_owner(root: Path) -> None:
    pid = owner_pid(root)
    if pid is None:
        return
    os.kill(pid, 15)
    for _ in range(100):
        if not Path(f"/proc/{pid}").exists():
            return
        time.sleep(0.2)


# ----- figures -------------------------------------------------------------------------------
def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def first_answer(root: Path, keep_index: bool) -> None:
    if not keep_index:
        stop_owner(root)
        shutil.rmtree(root / ".contextd", ignore_errors=True)
    query = questions(root)[0]["query"]
    wall, answer, _err = cli(root, "query", query, "--k", str(TOP))
    files = hit_files(answer)
    what = "a cold process on the kept index" if keep_index else "chunking included"
    print(f"first answer: {wall:,.0f} ms ({what}), {len(files)} files in the top "
          f"{TOP}, providers left out: {left_out(answer) or 'none'}")


def ask_questions(root: Path, ask, limit: int | None = None) -> None:
    """Every question (the first ``limit``) through ``ask(text) -> (wall ms, answer as
    JSON)``."""
    if not questions(root):
        print(f"no written questions for {root.name}")
        return
    rows, walls, right = [], [], 0
    for q in questions(root)[:limit]:
        wall, answer = ask(q["query"])
        files = hit_files(answer)
        rank = next((i for i, f in enumerate(files, 1) if f in q["gold"]), None)
        right += rank is not None
        walls.append(wall)
        rows.append((rank, wall, q["query"], files[:3], left_out(answer), answer))
    for rank, wall, text, files, missing, answer in rows:
        mark = f"#{rank}" if rank else "--"
        print(f"  {mark:>3} {wall:6,.0f} ms  {text[:70]:<70} {', '.join(files)}"
              + (f"  LEFT OUT: {missing}" if missing else ""))
        if wall > ANSWER_TARGET_MS and answer:  # where the time went
            print(f"        timings_ms {answer.get('timings_ms')}; notes "
                  f"{[n[:90] for n in answer.get('notes', [])]}")
    print(f"right file in the top {TOP}: {right} / {len(rows)} ({100 * right / len(rows):.0f}%)"
          f"; answers p50 {statistics.median(walls):,.0f} ms, p95 {percentile(walls, .95):,.0f}"
          f" ms, max {max(walls):,.0f} ms ({sum(w > ANSWER_TARGET_MS for w in walls)} over "
          f"{ANSWER_TARGET_MS} ms)")


def ask_cli(root: Path):
    def ask(text: str) -> tuple[float, dict | None]:
        wall, answer, _err = cli(root, "query", text, "--k", str(TOP))
        return wall, answer
    return ask


class InProcess:
    """The questions asked of one ContextModule over a lexical and symbol index (no vectors,
    no owner, no CLI start-up): the quick loop for ranking work, the same pipeline."""

    def __init__(self, root: Path):
        from contextd import ContextModule
        from contextd.config.project import Project
        from contextd.indexer import Indexer
        from contextd.store import open_store

        self.project = Project.open(root)
        self.store = open_store(self.project)
        Indexer(self.project, self.store, embed=False).ensure_indexed()
        self.module = ContextModule(self.project, self.store)
        self.module.pipeline.warm_up(wait=True)
        semantic = self.module.pipeline.provider("semantic")
        share = semantic.share_indexed() if semantic is not None else 0.0
        print(f"in process: lexical and symbol indexes, vectors for {100 * share:.0f}% of "
              "the chunks (what earlier runs computed)")

    def __call__(self, text: str) -> tuple[float, dict]:
        from contextd.query.records import QueryRequest

        begin = time.perf_counter()
        answer = self.module.query(QueryRequest(text, k=TOP))
        wall = (time.perf_counter() - begin) * 1000
        return wall, {"hits": [{"file_path": h.file_path} for h in answer.hits],
                      "notes": list(answer.notes)}

    def close(self) -> None:
        self.module.shutdown()
        self.store.close()


def wait_for_vectors(root: Path, started: float, limit_s: float) -> None:
    while time.monotonic() - started < limit_s:
        _wall, stats, _err = cli(root, "stats")
        pending = ((stats or {}).get("indexing") or {}).get("embeddings_pending")
        if pending == 0:
            print(f"every vector computed after {time.monotonic() - started:,.0f} s")
            return
        time.sleep(10)
    print(f"vectors still pending after {limit_s:,.0f} s")


def owner_figures(root: Path, idle_s: float) -> None:
    pid = owner_pid(root)
    if pid is None:
        print("no background owner running: no RSS / idle CPU figure")
        return
    ticks = os.sysconf("SC_CLK_TCK")

    def cpu_s() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks

    before = cpu_s()
    time.sleep(idle_s)
    used = cpu_s() - before
    status = Path(f"/proc/{pid}/status").read_text()
    peak = next(int(line.split()[1]) for line in status.splitlines()
                if line.startswith("VmHWM"))
    print(f"owner pid {pid}: peak RSS {peak / 1024:,.0f} MB; CPU over {idle_s:.0f} idle s: "
          f"{100 * used / idle_s:.1f}% of a core")


def embedding_ratio(root: Path, sample: int) -> None:
    """The owner's embedding rate (texts per second over its whole run, which it keeps in the
    index) against the embedder alone, in this process, on a random sample of the same
    texts: rates in chunks/s differ by a factor of two between corpora (a stdlib function
    against a fastapi page), so the ratio is taken on one set of texts. Run after the owner
    stopped (the database is read while nothing writes it)."""
    import duckdb

    from contextd.config.project import Project
    from contextd.embedders.registry import get_embedder

    con = duckdb.connect(str(root / ".contextd" / "context.duckdb"), read_only=True)
    try:
        row = con.execute("SELECT value FROM index_meta WHERE key = "
                          "'embedding_texts_per_second'").fetchone()
        texts = [r[0] for r in con.execute(
            "SELECT any_value(coalesce(index_text, text)) FROM chunks GROUP BY embed_hash "
            f"USING SAMPLE {int(sample)} ROWS").fetchall()]
    finally:
        con.close()
    if row is None:
        print("the owner kept no embedding rate (fewer texts than it times)")
        return
    embedder = get_embedder(Project.open(root).config.embedding)
    embedder.embed_query("warm up")
    started = time.perf_counter()
    embedder.embed(texts)
    alone = len(texts) / (time.perf_counter() - started)
    owner = float(row[0])
    print(f"embedding: owner {owner:,.1f} texts/s, the embedder alone on {len(texts):,} of the "
          f"same texts {alone:,.1f} texts/s: {100 * owner / alone:.0f}% (target >= 90%)")


# ----- change-request localization -----------------------------------------------------------
def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True).stdout


# What a change request's answer is, per language: source files by extension, with tests,
# docs, examples and generated or vendored code left out by each language's path conventions
# (tests/ and test_*.py; *_test.go and testdata/; test/, *.spec.ts and *.test.ts).
SOURCE_EXTENSIONS = (".py", ".go", ".ts", ".tsx", ".js", ".jsx")
NON_SOURCE_FOLDERS = frozenset({"tests", "test", "testing", "testdata", "__tests__", "docs",
                                "docs_src", "doc", "examples", "example", "sample", "samples",
                                "migrations", "vendor", "node_modules", "fixtures"})
TEST_NAME_MARKS = ("_test.go", ".spec.ts", ".test.ts", ".spec.js", ".test.js", ".spec.tsx",
                   ".test.tsx", ".d.ts")


def _is_source(path: str) -> bool:
    parts = path.split("/")
    name = parts[-1]
    return (name.endswith(SOURCE_EXTENSIONS) and not name.startswith(("test_", "conftest"))
            and not name.endswith(TEST_NAME_MARKS)
            and not any(p in NON_SOURCE_FOLDERS for p in parts[:-1]))


# Lines of a commit message that are not its words: trailers (Signed-off-by:, Co-authored-by:,
# Change-Id:) and separators such as the DCO's row of dashes.
_TRAILER_RE = re.compile(r"^\s*(?:[A-Za-z][\w-]*-by|Change-Id|Link|Cc|Bug|Refs?)\s*:\s", re.I)
_NO_WORD_RE = re.compile(r"^\W*$")


def query_text(message: str) -> str:
    """A commit message as the query of its change request: its lines (one a line, as an
    agent pastes it: the first is its title), trailers and separators left out; empty for a
    merge ("Merge commit from fork" names no change)."""
    lines = [line.strip() for line in message.split("\n")
             if not _TRAILER_RE.match(line) and not _NO_WORD_RE.match(line)]
    if not lines or lines[0].lower().startswith("merge "):
        return ""
    return "\n".join(lines)[:MAX_QUERY_CHARS]


def sample_commits(root: Path, count: int, skip: int = 0
                   ) -> tuple[str, list[tuple[str, str, tuple]]]:
    """(snapshot commit, [(sha, message, gold files)]): the latest ``count`` commits that
    changed 1..MAX_GOLD_FILES source files, after the ``skip`` latest such commits (an older,
    held-out sample to check a ranking change on), and the parent of the oldest of them."""
    # --no-renames: a moved file's old path is the one the snapshot holds, and rename
    # detection reads blobs a partial mirror may lack.
    log = _git(root, "log", "--first-parent", "--no-merges", "--no-renames", "-n",
               str(HISTORY_SCAN), "--name-only", "--format=\x1e%H\x1f%P\x1f%B\x1f")
    picked = []
    for record in log.split("\x1e")[1:]:
        sha, parents, message, names = record.split("\x1f", 3)
        gold = tuple(f for f in names.split("\n") if f.strip() and _is_source(f.strip()))
        text = query_text(message)
        if gold and len(gold) <= MAX_GOLD_FILES and len(parents.split()) == 1 and text:
            picked.append((sha, parents.strip(), text, gold))
        if len(picked) >= skip + count:
            break
    picked = picked[skip:]
    snapshot = picked[-1][1]
    present = set(_git(root, "ls-tree", "-r", "--name-only", snapshot).split("\n"))
    tasks = [(sha, text, tuple(f for f in gold if f in present))
             for sha, _p, text, gold in picked]
    return snapshot, [t for t in tasks if t[2]]


def file_bm25(tree: Path, paths: list[str]):
    """A BM25 index with one document per whole file (the baseline), and each file's tokens
    (what reading it whole costs)."""
    from contextd.providers.fulltext import BM25Index, code_tokens
    from contextd.text.tokens import estimate_tokens

    index, tokens = BM25Index(), {}
    for path in paths:
        try:
            text = (tree / path).read_text("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        index.add(path, code_tokens(f"{path}\n{text}"))
        tokens[path] = estimate_tokens(text)
    return index, tokens


def reciprocal(rank: int | None) -> float:
    return 1 / rank if rank else 0.0


def checkout_tree(root: Path, commit: str) -> Path:
    """A detached work tree of ``commit``: the project as its users have it, with the
    history up to there (``git log`` from HEAD, which the git-history provider reads, shows
    nothing after it)."""
    target = root.parent / ".history" / f"{root.name}-{commit[:12]}-checkout"
    if target.exists():
        return target
    missing = missing_blobs(root, commit)
    if not missing:
        _git(root, "worktree", "add", "--quiet", "--detach", str(target), commit)
        return target
    # A mirror fetched with a size limit lacks some large blobs (prometheus:
    # tsdb/testdata/20kseries.json): those paths are left out of a sparse checkout.
    print(f"  checkout of {commit[:10]} without {len(missing)} file(s) whose blobs the "
          f"mirror lacks: {', '.join(missing[:3])}")
    _git(root, "worktree", "add", "--quiet", "--detach", "--no-checkout", str(target), commit)
    _git(target, "sparse-checkout", "set", "--no-cone", "/*", *(f"!/{p}" for p in missing))
    _git(target, "read-tree", "-mu", "HEAD")
    return target


def missing_blobs(root: Path, commit: str) -> list[str]:
    """Paths of ``commit``'s tree whose blobs the repository does not hold."""
    entries = [line.split("\t", 1) for line in
               _git(root, "ls-tree", "-r", "--full-tree", commit).splitlines()]
    blobs = [(meta.split()[2], path) for meta, path in entries if meta.split()[1] == "blob"]
    found = subprocess.run(["git", "-C", str(root), "cat-file", "--batch-check"],
                           input="".join(f"{sha}\n" for sha, _p in blobs),
                           capture_output=True, text=True, check=True).stdout.splitlines()
    return [path for (_sha, path), line in zip(blobs, found) if line.endswith(" missing")]


@dataclasses.dataclass
class Answer:
    """One system's answer to one query: files ranked (best first) and the hits an agent
    reads in order, each as (file path, tokens)."""

    files: list[str]
    hits: list[tuple[str, int]]


# Hits an agent reads at most (the depth of "reached within the first 10 hits").
READ_DEPTH = 10
# The contextd answer's token budget: room for READ_DEPTH hits, so the depth is not cut by
# the default budget of a prompt.
READ_BUDGET = 8000
# Definitions asked by name per repository (exact symbol lookups), and their shortest name.
SYMBOL_LOOKUPS = 60
MIN_SYMBOL_LENGTH = 6
_DEFINITION_RES = {
    ".py": re.compile(r"^(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)", re.M),
    ".go": re.compile(r"^(?:func(?:\s*\([^)]*\))?|type)\s+([A-Za-z_]\w*)", re.M),
    ".ts": re.compile(r"^export\s+(?:default\s+)?(?:abstract\s+)?(?:class|function|interface"
                      r"|enum)\s+([A-Za-z_$][\w$]*)", re.M),
}


class ContextdSystem:
    """contextd's ``--files`` ranking and its hits, from a lexical and symbol index of
    ``tree`` (no vectors), opened once for every query."""

    def __init__(self, tree: Path):
        from contextd import ContextModule
        from contextd.config.project import Project
        from contextd.indexer import Indexer
        from contextd.store import open_store

        project = Project.open(tree)
        self.store = open_store(project)
        Indexer(project, self.store, embed=False).ensure_indexed()
        self.module = ContextModule(project, self.store)
        self.module.pipeline.warm_up(wait=True)

    def indexed(self) -> list[str]:
        return list(self.store.file_states())

    def ask(self, texts: list[str]) -> list[Answer]:
        from contextd.query.records import QueryRequest

        answers = []
        for text in texts:
            response = self.module.query(QueryRequest(text, k=READ_DEPTH, by_file=True,
                                                      max_tokens=READ_BUDGET))
            answers.append(Answer([f.file_path for f in response.files],
                                  [(h.file_path, h.tokens) for h in response.hits]))
        return answers

    def close(self) -> None:
        self.module.shutdown()
        self.store.close()


def semble_answers(tree: Path, texts: list[str], python: Path) -> list[Answer] | None:
    """semble BM25-only (:mod:`benchmarks.scale.semble_peer`, in its own virtualenv), or
    None when that virtualenv is missing."""
    from contextd.text.tokens import estimate_tokens

    if not python.exists():
        print(f"  (no semble row: {python} is missing; see benchmarks/scale/semble_peer.py)")
        return None
    done = subprocess.run([str(python), str(QUESTIONS / "semble_peer.py")], check=True,
                          input=json.dumps({"tree": str(tree), "queries": texts,
                                            "top_k": 3 * READ_DEPTH}),
                          capture_output=True, text=True)
    answers = []
    for results in json.loads(done.stdout):
        hits = [(r["file_path"], estimate_tokens(r["text"])) for r in results]
        answers.append(Answer(list(dict.fromkeys(path for path, _t in hits)), hits))
    return answers


def symbol_lookups(tree: Path, indexed: list[str], count: int) -> list[tuple[str, tuple]]:
    """(name, (defining file,)) for up to ``count`` definitions of source files, each name
    defined in one file only and at least MIN_SYMBOL_LENGTH long, picked by a hash of the
    name (the same sample on every run)."""
    defined: dict[str, set[str]] = {}
    for path in indexed:
        pattern = _DEFINITION_RES.get(Path(path).suffix.replace(".tsx", ".ts"))
        if pattern is None or not _is_source(path):
            continue
        try:
            text = (tree / path).read_text("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for name in pattern.findall(text):
            defined.setdefault(name, set()).add(path)
    unique = [(name, tuple(paths)) for name, paths in defined.items()
              if len(paths) == 1 and len(name) >= MIN_SYMBOL_LENGTH]
    unique.sort(key=lambda item: hashlib.blake2b(item[0].encode(), digest_size=8).digest())
    return unique[:count]


def figures(answers: list[Answer], golds: list[tuple]) -> str:
    """R@1, R@5 and MRR@10 of the files; the median tokens read before the first hit in a
    gold file (over the cases where one is reached) and the share reached within the first
    READ_DEPTH hits."""
    ranks = [next((i for i, f in enumerate(a.files[:READ_DEPTH], 1) if f in gold), None)
             for a, gold in zip(answers, golds)]
    before = []
    for answer, gold in zip(answers, golds):
        read = 0
        for path, tokens in answer.hits[:READ_DEPTH]:
            if path in gold:
                before.append(read)
                break
            read += tokens
    n = len(ranks)
    reached = f"{statistics.median(before):5,.0f}" if before else "    -"
    return (f"R@1 {100 * sum(r == 1 for r in ranks) / n:5.1f}  "
            f"R@5 {100 * sum(r is not None and r <= 5 for r in ranks) / n:5.1f}  "
            f"MRR@10 {100 * sum(reciprocal(r) for r in ranks) / n:5.1f}  "
            f"tokens before {reached}  reached@10 {100 * len(before) / n:5.1f}%")


def change_requests(root: Path, count: int, skip: int = 0, semble: Path | None = None) -> None:
    """Change requests and exact symbol lookups asked of contextd (a checkout: history up to
    the snapshot), semble BM25-only and BM25 over whole files, on the same tree."""
    from contextd.providers.fulltext import code_tokens

    snapshot, tasks = sample_commits(root, count, skip)
    try:
        tree = checkout_tree(root, snapshot)
    except subprocess.CalledProcessError as exc:  # a partial clone lacking some blobs
        print(f"change requests: no checkout of {snapshot[:10]} ({exc.stderr.strip()[:200]}); "
              "try another --commits-skip")
        return
    system = ContextdSystem(tree)
    try:
        indexed = system.indexed()
        lookups = symbol_lookups(tree, indexed, SYMBOL_LOOKUPS)
        texts = [text for _sha, text, _gold in tasks] + [name for name, _f in lookups]
        answers = {"contextd": system.ask(texts)}
    finally:
        system.close()
    if semble is not None:
        peer = semble_answers(tree, texts, semble)
        if peer is not None:
            answers["semble-bm25"] = peer
    baseline, file_tokens = file_bm25(tree, indexed)  # the files contextd indexed, each whole
    answers["bm25-files"] = [Answer(files, [(f, file_tokens[f]) for f in files])
                             for files in ([p for p, _s in baseline.top(code_tokens(t), 10)]
                                           for t in texts)]
    golds = [gold for _sha, _text, gold in tasks] + [files for _n, files in lookups]
    print(f"change requests: {len(tasks)} commits after the {skip} latest, index of "
          f"{snapshot[:10]} (lexical and symbol providers; no vectors); "
          f"{len(lookups)} symbol lookups")
    for name, ranked in answers.items():
        print(f"  {name:<12} {figures(ranked[:len(tasks)], golds[:len(tasks)])}")
    for name, ranked in answers.items():
        print(f"  lookups {name:<12} {figures(ranked[len(tasks):], golds[len(tasks):])}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repos", nargs="+", type=Path)
    parser.add_argument("--commits", type=int, default=40,
                        help="commits sampled for change-request localization (0: skip)")
    parser.add_argument("--commits-skip", type=int, default=0,
                        help="sample older commits, after this many of the latest (a held-out "
                             "window to check a ranking change on)")
    parser.add_argument("--semble", type=Path, default=SEMBLE_PYTHON,
                        help="the Python of a virtualenv holding semble 0.7.0, for its "
                             "BM25-only peer row of the change requests")
    parser.add_argument("--no-semble", action="store_true",
                        help="without the semble row (its figures do not change with "
                             "contextd's ranking: rerun contextd alone after a change)")
    parser.add_argument("--vectors", action="store_true",
                        help="also wait until every vector is computed, then measure the owner")
    parser.add_argument("--vector-limit", type=float, default=3600)
    parser.add_argument("--idle", type=float, default=60.0)
    parser.add_argument("--rate-sample", type=int, default=2000,
                        help="texts the embedder alone embeds for the rate ratio")
    parser.add_argument("--keep-index", action="store_true",
                        help="reuse the existing index instead of a never-indexed start")
    parser.add_argument("--no-venv", action="store_true",
                        help="without the git-ignored 20,000-folder .venv (moved aside when "
                             "an earlier run made it)")
    parser.add_argument("--in-process", action="store_true",
                        help="only the questions and change requests, asked in this process "
                             "of a lexical and symbol index (the quick loop for ranking work)")
    parser.add_argument("--questions", type=int, default=None,
                        help="ask only the first N questions (issue 37: the first eight "
                             "answers on a never-indexed project, while the owner reads)")
    parser.add_argument("--complete", action="store_true",
                        help="after the CLI answers, the same questions in process over the "
                             "complete lexical index (issue 37: the first answers against it)")
    args = parser.parse_args(argv)
    for root in args.repos:
        root = root.resolve()
        print(f"\n## {root.name} ({len(_git(root, 'ls-files').splitlines()):,} files)")
        if args.no_venv:
            put_venv_aside(root)
        else:
            add_ignored_venv(root)
        if args.in_process:
            stop_owner(root)
            ask = InProcess(root)
            ask_questions(root, ask, args.questions)
            ask.close()
            if args.commits:
                change_requests(root, args.commits, args.commits_skip,
                                None if args.no_semble else args.semble)
            continue
        started = time.monotonic()
        first_answer(root, args.keep_index)
        ask_questions(root, ask_cli(root), args.questions)
        if args.complete:
            stop_owner(root)
            print("the same questions over the complete lexical index:")
            ask = InProcess(root)
            ask_questions(root, ask, args.questions)
            ask.close()
        if args.commits:
            change_requests(root, args.commits, args.commits_skip,
                            None if args.no_semble else args.semble)
        if args.vectors:
            wait_for_vectors(root, started, args.vector_limit)
            owner_figures(root, args.idle)
            print("the questions again, the owner warm with every vector:")
            ask_questions(root, ask_cli(root))
        stop_owner(root)
        if args.vectors:
            embedding_ratio(root, args.rate_sample)
    return 0


if __name__ == "__main__":
    sys.exit(main())
