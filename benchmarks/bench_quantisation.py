"""int8 activation scales per batch (ONNX Runtime's ``quantize_dynamic``, the scheme before
issue 40) against per token (:mod:`contextd.embedders.row_quantize`, the default now), on the
same real code chunks (functions of the Python stdlib), with fp32 as the reference.

Prints for each: chunks/s, cosine to fp32 (mean, min), top-10 neighbour agreement with fp32
(bench_embedders.top_k_agreement), and the lowest cosine between a text embedded alone and
the same text embedded beside one other text (1.0 means the vector is the text's alone).
The models are timed in turns on the same machine; it is shared, so treat speed as +-30%.

    .venv/bin/python benchmarks/bench_quantisation.py [--limit 200]
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import numpy as np

from bench_embedders import stdlib_chunks, top_k_agreement
from contextd.config.sections import EmbeddingConfig
from contextd.embedders.onnx_backend import OnnxEmbedder, _cache_file
from contextd.embedders.row_quantize import quantize_rowwise


def per_batch_scales(source: Path, out: Path) -> None:
    """The scheme before issue 40: ONNX Runtime's dynamic quantisation, per-channel weights."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(source), str(out), per_channel=True, weight_type=QuantType.QInt8)


def embedder_for(model: Path) -> OnnxEmbedder:
    embedder = OnnxEmbedder(dataclasses.replace(EmbeddingConfig(), quantize="int8"))
    embedder.model_path, embedder._verified = model, True
    return embedder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=200)
    args = parser.parse_args()
    texts = stdlib_chunks(args.limit)
    fp32 = _cache_file(OnnxEmbedder(EmbeddingConfig()).settings, "fp32")
    OnnxEmbedder(dataclasses.replace(EmbeddingConfig(), quantize="none")).prepare()
    with tempfile.TemporaryDirectory() as tmp:
        models = {"fp32": fp32, "int8 per-batch scales": Path(tmp) / "batch.onnx",
                  "int8 per-token scales": Path(tmp) / "rows.onnx"}
        per_batch_scales(fp32, models["int8 per-batch scales"])
        quantize_rowwise(fp32, models["int8 per-token scales"])
        vectors = {}
        for name, model in models.items():
            embedder = embedder_for(model)
            embedder.embed(texts[:4])  # load
            start = time.perf_counter()
            vectors[name] = embedder.embed(texts)
            seconds = time.perf_counter() - start
            alone = np.stack([embedder.embed([t])[0] for t in texts[:20]])
            paired = np.stack([embedder.embed([t, texts[-1 - i]])[0]
                               for i, t in enumerate(texts[:20])])
            cosine = np.sum(vectors[name] * vectors["fp32"], axis=1)
            print(f"{name}: {len(texts) / seconds:.1f} chunks/s; cosine to fp32 mean "
                  f"{cosine.mean():.4f} min {cosine.min():.4f}; top-10 agreement with fp32 "
                  f"{top_k_agreement(vectors[name], vectors['fp32']):.3f}; alone vs beside "
                  f"another: cosine min {np.sum(alone * paired, axis=1).min():.6f}, "
                  f"bit-identical {int(np.all(alone == paired, axis=1).sum())}/20")


if __name__ == "__main__":
    main()
