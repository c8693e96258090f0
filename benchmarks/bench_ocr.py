"""OCR of scanned PDF pages (seed 000 force_ocr): how long the offline engine takes to load and
to read a page, and whether it reads the words back.

Each page is a 1400-pixel-wide image of a few lines of text (Pillow's default font, size 42)
in a PDF with no text layer (fpdf2), read through the knowledge base's PDF reader exactly as
``contextd kb add`` reads it. Prints the engine's load time, seconds per page and the share of
words read back.

    .venv/bin/python benchmarks/bench_ocr.py [--pages 3]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from knowledge_docs import make_image_pdf  # noqa: E402

from contextd.knowledge.readers import ocr, read_document  # noqa: E402

LINES = ["Invoice retention policy: keep invoices for", "ten years in the archive bucket.",
         "Refunds above 500 euros need a second approval."]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=3)
    args = parser.parse_args()
    started = time.perf_counter()
    ocr._reader()
    print(f"engine load: {time.perf_counter() - started:.2f} s")
    wanted = set(re.findall(r"\w+", " ".join(LINES).lower()))
    seconds, recall = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for page in range(args.pages):
            pdf = make_image_pdf(Path(tmp) / f"scan{page}.pdf", LINES)
            started = time.perf_counter()
            text = read_document(pdf.read_bytes(), pdf.name, "pdf").text
            seconds.append(time.perf_counter() - started)
            recall.append(len(wanted & set(re.findall(r"\w+", text.lower()))) / len(wanted))
    print(f"pages: {args.pages}; seconds per page: median {statistics.median(seconds):.2f}, "
          f"max {max(seconds):.2f}; words read back: {statistics.mean(recall):.0%}")


if __name__ == "__main__":
    main()
