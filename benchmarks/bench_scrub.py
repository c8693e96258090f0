"""Secret scrubber: recall and false-positive rate on the planted corpus, and throughput.

Recall: the share of planted secrets (tests/secrets_corpus.py, real formats in 16 file types)
absent from the scrubbed text. False positives: the share of look-alikes (lockfile hashes,
UUIDs, git SHAs, base64 images, dummy test tokens, CSS colours) whose line the scrubber
changed; the target is <= 5 %. Both are printed per kind, over several seeds.

Ordinary lines: the lines of real code and documentation the scrubber changed, per 100k
lines; the target is <= 1. The corpus is the tracked files of the real repositories given
with ``--repos`` (by default those of /work/corpora/r: fastapi, wagtail, saleor, prometheus,
typeorm, pydantic, in every language and configuration format they hold), else the venv's
site-packages. Such code holds a few real test credentials, so each changed line is printed
(``--show``) for a person to judge: the figure is an upper bound of the false positives.

Throughput: MB/s of :func:`contextd.scrub.scrubber.scrub_secrets` over the Python standard library's
source (real code, the common case: few secrets, many lines holding "key" or "token"), and
over the corpus itself (the worst case: a secret on nearly every line). Median of three runs.

    .venv/bin/python benchmarks/bench_scrub.py [--seeds 5] [--runs 3] [--stdlib-mb 20]
        [--ordinary-lines 1000000] [--repos DIR ...] [--show 40]
"""

from __future__ import annotations

import argparse
import collections
import re
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from secrets_corpus import generate  # noqa: E402

from contextd.scrub.rules import STRONG_NAME  # noqa: E402
from contextd.scrub.scrubber import REDACTED, scrub_secrets  # noqa: E402


def quality(seeds: int) -> None:
    found, missed = collections.Counter(), collections.Counter()
    kept, changed = collections.Counter(), collections.Counter()
    for seed in range(seeds):
        corpus = generate(seed)
        out = {path: scrub_secrets(text, path).text for path, text in corpus.files.items()}
        for planted in corpus.secrets:
            (missed if planted.value in out[planted.path] else found)[planted.kind] += 1
        for planted in corpus.lookalikes:
            (kept if planted.value in out[planted.path] else changed)[planted.kind] += 1
    secrets = sum(found.values()) + sum(missed.values())
    lookalikes = sum(kept.values()) + sum(changed.values())
    print(f"secrets: {secrets} planted over {seeds} seeds, recall "
          f"{100 * sum(found.values()) / secrets:.1f}%")
    for kind in sorted(found | missed):
        if missed[kind]:
            print(f"  missed {kind}: {missed[kind]} of {found[kind] + missed[kind]}")
    print(f"look-alikes: {lookalikes}, false-positive rate "
          f"{100 * sum(changed.values()) / lookalikes:.1f}% (target <= 5%)")
    for kind in sorted(kept | changed):
        if changed[kind]:
            print(f"  changed {kind}: {changed[kind]} of {kept[kind] + changed[kind]}")


ORDINARY_SUFFIXES = (".py", ".yml", ".yaml", ".toml", ".md", ".rst", ".sh", ".cfg", ".ini",
                     ".txt")
# The text files of a real repository the index reads: code, configuration and prose.
REPOSITORY_SUFFIXES = ORDINARY_SUFFIXES + (
    ".go", ".ts", ".tsx", ".js", ".jsx", ".json", ".html", ".xml", ".ipynb", ".properties",
    ".conf", ".env", ".example", ".sql", ".mdx", ".j2", ".jinja", ".tf", ".dockerfile")
DEFAULT_REPOSITORIES = tuple(Path("/work/corpora/r") / name for name in (
    "fastapi", "wagtail", "saleor", "prometheus", "typeorm", "pydantic"))


def read_texts(root: Path, suffixes: tuple[str, ...], limit: float,
               measure: Callable[[str], float], skip: str | None = None
               ) -> list[tuple[str, str]]:
    """UTF-8 files under ``root`` with one of ``suffixes``, sorted by path, until their
    ``measure`` (bytes, lines) adds up to ``limit``; folders named ``skip`` left out."""
    texts, total = [], 0.0
    for path in sorted(root.rglob("*")):
        if path.suffix not in suffixes or skip in path.parts or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        texts.append((str(path.relative_to(root)), text))
        total += measure(text)
        if total >= limit:
            break
    return texts


def ordinary_texts(limit_lines: int) -> list[tuple[str, str]]:
    """Files of the running venv's site-packages (real code and docs) until
    ``limit_lines`` lines."""
    return read_texts(Path(sysconfig.get_paths()["purelib"]), ORDINARY_SUFFIXES, limit_lines,
                      lambda text: text.count("\n"))


def repository_texts(roots: list[Path]) -> list[tuple[str, str]]:
    """The UTF-8 text files git tracks in each of ``roots`` (``Dockerfile`` and
    ``Makefile`` included), named ``repository/path``."""
    texts = []
    for root in roots:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], check=True,
                                capture_output=True).stdout.decode().split("\0")
        for rel in sorted(filter(None, listed)):
            path = root / rel
            if not (path.suffix in REPOSITORY_SUFFIXES
                    or path.name in ("Dockerfile", "Makefile")) or not path.is_file():
                continue
            try:
                texts.append((f"{root.name}/{rel}", path.read_text(encoding="utf-8")))
            except (UnicodeDecodeError, OSError):
                continue
    return texts


# A changed line whose every redaction is a credential by the scrubber's policy: a literal
# assigned to a name that says password, token or secret (test fixtures' ``password="hello"``
# included), a URL's password, an Authorization header's or an auth tuple's value, a
# private key's body. The rest are the false positives.
_CREDENTIAL_SLOT = re.compile(
    rf"""(?i)(?:(?:{STRONG_NAME})\w*["'`]?\s*(?:[:=]|=>|,)\s*[bru]?["'`]?|:|(?:bearer|basic)\s+"""
    rf"""|auth=\(["'][^"']*["'],\s*["']|<add\s+key=\S+\s+value=["']){re.escape(REDACTED)}""")


def is_named_credential(scrubbed: str) -> bool:
    """Whether each redaction of ``scrubbed`` stands where a credential's value goes."""
    if scrubbed.strip() == REDACTED:  # a private key's body line
        return True
    return scrubbed.count(REDACTED) == len(_CREDENTIAL_SLOT.findall(scrubbed))


def ordinary_changes(texts: list[tuple[str, str]], label: str, show: int) -> None:
    """Lines of ordinary code changed per 100k lines, split into named credentials (test
    passwords and keys, redacted on purpose) and the others (the false positives); the
    others are printed up to ``show``."""
    total, changed, other = 0, 0, []
    for path, text in texts:
        before = text.split("\n")
        after = scrub_secrets(text, path).text.split("\n")
        total += len(before)
        for line, new in zip(before, after):
            if line != new:
                changed += 1
                if not is_named_credential(new):
                    other.append((path, line))
    per_100k = 100_000 / max(total, 1)
    print(f"ordinary lines: {total:,} lines of {len(texts):,} files of {label}: "
          f"{changed} changed = {changed * per_100k:.2f} per 100k lines, of which "
          f"{changed - len(other)} named credentials (a literal assigned to a password/token/"
          f"secret name, a URL password, a key body) and {len(other)} others = "
          f"{len(other) * per_100k:.2f} per 100k (target <= 1; an upper bound of the false "
          "positives, see --show)")
    for path, line in other[:show]:
        print(f"  {path}: {line.strip()[:150]}")


def throughput(label: str, texts: list[tuple[str, str]], runs: int) -> None:
    size = sum(len(text.encode()) for _, text in texts)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        redactions = sum(scrub_secrets(text, path).redactions for path, text in texts)
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    print(f"{label}: {size / 2**20:.1f} MB in {len(texts):,} files, {seconds:.2f} s -> "
          f"{size / 2**20 / seconds:.1f} MB/s, {redactions:,} redactions")


def stdlib_texts(limit_mb: float) -> list[tuple[str, str]]:
    return read_texts(Path(sysconfig.get_paths()["stdlib"]), (".py",), limit_mb * 2**20, len,
                      skip="site-packages")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--stdlib-mb", type=float, default=20.0)
    parser.add_argument("--ordinary-lines", type=int, default=1_000_000)
    parser.add_argument("--repos", type=Path, nargs="*", help="git repositories for the "
                        "ordinary-lines figure (default: /work/corpora/r/..., else "
                        "site-packages)")
    parser.add_argument("--show", type=int, default=40, help="changed ordinary lines shown")
    args = parser.parse_args()
    quality(args.seeds)
    repos = args.repos or [r for r in DEFAULT_REPOSITORIES if (r / ".git").exists()]
    if repos:
        ordinary_changes(repository_texts(repos), ", ".join(r.name for r in repos), args.show)
    else:
        ordinary_changes(ordinary_texts(args.ordinary_lines), "site-packages", args.show)
    throughput("stdlib source", stdlib_texts(args.stdlib_mb), args.runs)
    corpus = generate(0, rounds=20)
    throughput("secrets corpus", list(corpus.files.items()), args.runs)


if __name__ == "__main__":
    main()
