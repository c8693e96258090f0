"""Text from the images of scanned PDF pages, offline (``force_ocr``).

RapidOCR on ONNX Runtime (the ``rapidocr-onnxruntime`` wheel ships its detection,
orientation and recognition models, ~16 MB, so nothing is downloaded) reads each image a page
holds (pypdf extracts them). It is loaded once per process, on the first page that needs it,
and used under a lock (the engine is not documented as thread-safe). benchmarks/bench_ocr.py
measured ~1.2-1.8 s to load and 7-20 s per page on a loaded 2-core machine: a scanned PDF is
slow to add, never slow to search.
"""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_engine: Any = None
INSTALL_HINT = "install the ocr extra: pip install 'contextd[ocr]'"


def unavailable() -> str | None:
    """Why OCR cannot run here (None when it can)."""
    try:
        import rapidocr_onnxruntime  # noqa: F401
    except ImportError as exc:
        return f"the OCR engine is not installed ({exc}); {INSTALL_HINT}"
    return None


def _reader() -> Any:
    global _engine
    if _engine is None:
        from rapidocr_onnxruntime import RapidOCR

        _engine = RapidOCR()
    return _engine


def image_text(data: bytes) -> str:
    """The text lines of one image (PNG, JPEG...), top to bottom, left to right."""
    with _lock:
        found, _ = _reader()(data)
    if not found:
        return ""
    # Each item: (box corners, text, confidence); order by the box's top, then its left.
    boxes = sorted(found, key=lambda item: (round(min(p[1] for p in item[0]) / 10),
                                            min(p[0] for p in item[0])))
    return "\n".join(item[1] for item in boxes if item[1].strip())


def page_text(page: Any) -> str:
    """The OCR text of every image of a pypdf page, in the order the page holds them."""
    return "\n\n".join(t for t in (image_text(image.data) for image in page.images) if t)
