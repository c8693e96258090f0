"""Chunking throughput (lines/s, one process = one core) per language on code no one here wrote,
with the chunks and symbols (definitions) found, which a grammar change moves.

Times are CPU seconds of this process (``time.process_time``), so a busy shared machine
skews them less than wall-clock time would. Corpora: the Python standard library, the sources of packages installed in this venv, and
TypeScript/JavaScript from the npm package rxjs (``npm pack`` into benchmarks/.cache/, done once;
the registry is only needed for that first run). Each corpus is also timed as tree-sitter
parse + top-level walk alone, the floor our chunker is compared to.

    .venv/bin/python benchmarks/bench_chunkers.py                # throughput table
    .venv/bin/python benchmarks/bench_chunkers.py --calibrate    # estimate_tokens vs WordPiece
    # other code instead of the default corpora (a recursive glob per name):
    .venv/bin/python benchmarks/bench_chunkers.py --corpus 'fastapi=/src/fastapi/**/*.py'

``--calibrate`` runs the real all-MiniLM-L6-v2 tokenizer (truncation and padding off) over the
chunks of the corpora and prints the mean ratio real/estimate and how often real > estimate.
"""

from __future__ import annotations

import argparse
import glob
import random
import subprocess
import sys
import sysconfig
import tarfile
import time
from pathlib import Path

from contextd.chunkers.chunking import chunk_file, chunker_for
from contextd.chunkers.grammars import get_parser
from contextd.config.sections import ContextConfig

ROOT = Path(__file__).resolve().parent
CACHE = ROOT / ".cache" / "chunkers"
NPM_PACKAGE = "rxjs@7.8.1"
STDLIB = Path(sysconfig.get_paths()["stdlib"])
SITE = Path(sysconfig.get_paths()["purelib"])
MAX_FILES = 1500


def npm_tree() -> Path | None:
    """The unpacked npm package, fetched with ``npm pack`` on first use."""
    target = CACHE / "rxjs"
    if target.is_dir():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    try:
        out = subprocess.run(["npm", "pack", NPM_PACKAGE, "--silent"], cwd=CACHE, check=True,
                             capture_output=True, text=True, timeout=300).stdout.split()[-1]
    except (OSError, subprocess.SubprocessError, IndexError) as exc:
        print(f"skipping TypeScript/JavaScript: npm pack failed: {exc}", file=sys.stderr)
        return None
    with tarfile.open(CACHE / out) as tar:
        tar.extractall(target, filter="data")
    return target


def corpora(given: list[str] | None = None) -> dict[str, list[Path]]:
    """name -> files, each list sampled deterministically to at most MAX_FILES; ``given``
    (``NAME=GLOB`` strings) replaces the default corpora."""
    if given:
        found = {name: glob.glob(pattern, recursive=True)
                 for name, pattern in (item.split("=", 1) for item in given)}
        return _sample(found)
    found = {
        "python (stdlib)": glob.glob(f"{STDLIB}/**/*.py", recursive=True),
        "python (site-packages)": glob.glob(f"{SITE}/**/*.py", recursive=True),
        "markdown (site-packages)": glob.glob(f"{SITE}/**/*.md", recursive=True),
    }
    tree = npm_tree()
    if tree is not None:
        found["typescript (rxjs src)"] = [p for p in glob.glob(f"{tree}/**/src/**/*.ts",
                                                                   recursive=True)
                                          if not p.endswith(".d.ts")]
        found["javascript (rxjs dist/cjs)"] = glob.glob(f"{tree}/**/dist/cjs/**/*.js",
                                                        recursive=True)
    return _sample(found)


def _sample(found: dict[str, list[str]]) -> dict[str, list[Path]]:
    rng = random.Random(7)
    return {name: sorted(rng.sample(sorted(files), min(MAX_FILES, len(files))))
            for name, files in found.items() if files}


def load(files: list[Path]) -> list[tuple[str, bytes]]:
    out = []
    for path in files:
        try:
            out.append((str(path), Path(path).read_bytes()))
        except OSError:
            continue
    return out


def parse_only(datas: list[tuple[str, bytes]]) -> float:
    """Seconds to parse every file and walk the root's children (the tree-sitter floor)."""
    parsers = {}
    start = time.process_time()
    for path, data in datas:
        chunker = chunker_for(path)
        grammar = getattr(getattr(chunker, "spec", None), "grammar", None)
        if grammar is None:
            continue
        if grammar not in parsers:
            parsers[grammar] = get_parser(grammar)
        for child in parsers[grammar].parse(data).root_node.children:
            _ = child.type  # reading each top-level node is what the floor times
    return time.process_time() - start


def best_of(fn, repeats: int) -> float:
    return min(fn() for _ in range(repeats))


def throughput(repeats: int, given: list[str] | None = None) -> None:
    config = ContextConfig()
    print(f"{'corpus':30} {'files':>6} {'lines':>9} {'chunks':>8} {'symbols':>8} "
          f"{'chunk lines/s':>14} {'parse-only lines/s':>19}")
    for name, files in corpora(given).items():
        datas = load(files)
        lines = sum(data.count(b"\n") + 1 for _, data in datas)
        chunked = [chunk_file(p, d, config).chunks for p, d in datas]  # also warms caches
        chunks = sum(len(c) for c in chunked)
        symbols = sum(len(chunk.defines) for c in chunked for chunk in c)

        def run(datas=datas) -> float:
            start = time.process_time()
            for path, data in datas:
                chunk_file(path, data, config)
            return time.process_time() - start

        seconds = best_of(run, repeats)
        floor = best_of(lambda datas=datas: parse_only(datas), repeats)
        floor_text = f"{lines / floor:>19,.0f}" if floor > 0.001 else f"{'-':>19}"
        print(f"{name:30} {len(datas):>6} {lines:>9,} {chunks:>8,} {symbols:>8,} "
              f"{lines / seconds:>14,.0f} {floor_text}")


def calibrate() -> None:
    from contextd.embedders.model_files import BUNDLED_MODEL, MODELS_DIR
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(MODELS_DIR / BUNDLED_MODEL / "tokenizer.json"))
    tok.no_truncation()  # the shipped tokenizer.json truncates and pads to 128
    tok.no_padding()
    config = ContextConfig()
    print(f"{'corpus':30} {'chunks':>7} {'mean real/est':>14} {'real > est':>11} "
          f"{'real > 1.1 est':>15} {'real > 256':>11}")
    for name, files in corpora().items():
        chunks = [c for p, d in load(files[:400]) for c in chunk_file(p, d, config).chunks]
        real = [len(e.ids) for e in tok.encode_batch([c.text for c in chunks],
                                                     add_special_tokens=False)]
        pairs = [(r, c.tokens) for r, c in zip(real, chunks) if c.tokens > 0]
        mean = sum(r / e for r, e in pairs) / len(pairs)
        under = sum(r > e for r, e in pairs) / len(pairs)
        far = sum(r > 1.1 * e for r, e in pairs) / len(pairs)
        over_window = sum(r + 2 > 256 for r in real)
        print(f"{name:30} {len(pairs):>7} {mean:>14.3f} {under:>10.1%} {far:>14.1%} "
              f"{over_window:>11}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calibrate", action="store_true",
                        help="compare estimate_tokens with the real tokenizer")
    parser.add_argument("--repeats", type=int, default=3, help="best of N timed runs")
    parser.add_argument("--corpus", action="append", metavar="NAME=GLOB",
                        help="time these files instead of the default corpora (repeatable)")
    args = parser.parse_args()
    calibrate() if args.calibrate else throughput(args.repeats, args.corpus)


if __name__ == "__main__":
    main()
