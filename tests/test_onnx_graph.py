"""The ONNX graph built without torch (contextd/embedders/bert_graph.py): it equals the
``torch.onnx.export`` reference (vectors and top-10 neighbours, fp32 and int8) where the torch
extra is installed; everywhere it is built with torch unimportable, cached with a checksum,
and rebuilt when the cache file is missing its checksum or corrupt.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from contextd.config.sections import EmbeddingConfig
from contextd.embedders import onnx_backend
from contextd.embedders.model_files import BUNDLED_WEIGHTS_SHA256, locate_model
from contextd.embedders.onnx_backend import OnnxEmbedder
from contextd.embedders.row_quantize import quantize_rowwise
from contextd.embedders.safetensors_file import read_safetensors
from contextd.errors import ModelUnavailableError
from benchmark_module import load_benchmark
from torch_extra import block_torch, requires_torch

REPO = Path(__file__).resolve().parent.parent


BENCH = load_benchmark("bench_embedders")


def config(quantize: str = "none", **kw) -> EmbeddingConfig:
    return dataclasses.replace(EmbeddingConfig(), backend="onnx", quantize=quantize, **kw)


def _embed_with(model: Path, precision: str, texts: list[str]) -> np.ndarray:
    """Vectors of ``texts`` from the ONNX file ``model``, through the embedder's own
    tokenisation, batching and pooling."""
    embedder = OnnxEmbedder(config("int8" if precision == "int8" else "none"))
    embedder.model_path, embedder._verified = model, True
    return embedder.embed(texts)


def _top10(queries: np.ndarray, chunks: np.ndarray) -> list[list[int]]:
    return np.argsort(-(queries @ chunks.T), axis=1, kind="stable")[:, :10].tolist()


@requires_torch
def test_graph_equals_the_torch_export_in_vectors_and_top10(tmp_path):
    from contextd.embedders.torch_export import export_with_torch

    files = locate_model(EmbeddingConfig().model)
    reference = {"fp32": tmp_path / "torch-fp32.onnx", "int8": tmp_path / "torch-int8.onnx"}
    export_with_torch(files, reference["fp32"], onnx_backend.OPSET)
    quantize_rowwise(reference["fp32"], reference["int8"])
    chunks, queries = BENCH.stdlib_chunks(120), BENCH.QUERIES
    for precision in ("fp32", "int8"):
        ours = OnnxEmbedder(config("int8" if precision == "int8" else "none"))
        built = ours.embed(chunks), ours.embed(queries)
        theirs = (_embed_with(reference[precision], precision, chunks),
                  _embed_with(reference[precision], precision, queries))
        cosine = np.sum(built[0] * theirs[0], axis=1)
        print(f"{precision}: cosine to the torch export min {cosine.min():.7f}")
        assert cosine.min() >= 0.9999
        assert BENCH.top_k_agreement(built[0], theirs[0]) == 1.0
        assert _top10(built[1], built[0]) == _top10(theirs[1], theirs[0])


BUILD_WITHOUT_TORCH = """
import json, sys
for name in ("torch", "transformers", "sentence_transformers"):
    sys.modules[name] = None  # as in a default install: not importable
from contextd.config.sections import EmbeddingConfig
from contextd.embedders.onnx_backend import OnnxEmbedder
embedder = OnnxEmbedder(EmbeddingConfig())
vector = embedder.embed_query("where are tokens refreshed")
print(json.dumps({"dim": len(vector), "norm": float((vector ** 2).sum()),
                  "files": sorted(p.name for p in embedder.model_path.parent.iterdir())}))
"""


def test_default_int8_model_is_built_and_used_with_torch_unimportable(tmp_path):
    done = subprocess.run([sys.executable, "-c", BUILD_WITHOUT_TORCH], capture_output=True,
                          text=True, cwd=REPO, timeout=300,
                          env={**os.environ, "CONTEXTD_CACHE_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["dim"] == 384 and abs(result["norm"] - 1.0) < 1e-4
    names = result["files"]  # fp32 (the quantiser's input) and int8, each with its checksum
    assert len(names) == 4 and sum(n.endswith(".onnx.blake3") for n in names) == 2


@pytest.fixture
def private_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("CONTEXTD_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.mark.slow
def test_a_corrupt_or_unchecked_cache_file_is_rebuilt(private_cache, monkeypatch):
    block_torch(monkeypatch)
    first = OnnxEmbedder(config())
    path = first.prepare()
    expected = first.embed_query("retry a request with backoff")
    checksum = path.with_name(path.name + ".blake3")
    intact = path.read_bytes()

    damaged = bytearray(intact)
    damaged[len(damaged) // 2:len(damaged) // 2 + 4096] = bytes(4096)  # inside the weights
    path.write_bytes(bytes(damaged))
    assert OnnxEmbedder(config()).prepare() == path
    assert path.read_bytes() == intact

    checksum.unlink()  # a writer that died between the model and its checksum
    again = OnnxEmbedder(config())
    assert not again.prepared
    again.prepare()
    assert checksum.is_file() and path.read_bytes() == intact
    assert np.allclose(again.embed_query("retry a request with backoff"), expected, atol=1e-6)


def test_torch_backend_without_the_extra_is_one_line_naming_it(monkeypatch):
    from contextd.embedders import torch_factory

    block_torch(monkeypatch)
    with pytest.raises(ModelUnavailableError) as err:
        torch_factory(EmbeddingConfig())
    message = str(err.value)
    assert "\n" not in message and "pip install 'contextd[torch]'" in message


def test_validate_config_blames_the_backend_when_its_extra_is_missing(tmp_path, monkeypatch):
    from contextd.embedders.registry import configuration_issues

    block_torch(monkeypatch)
    issues = configuration_issues(config(), "context.toml")
    assert issues == []  # the default backend needs no extra
    issues = configuration_issues(dataclasses.replace(config(), backend="torch"), "context.toml")
    assert [issue.key for issue in issues] == ["embedding.backend"]
    assert "pip install 'contextd[torch]'" in issues[0].message


def test_a_model_the_builder_cannot_write_needs_the_extra(tmp_path, private_cache,
                                                          monkeypatch):
    block_torch(monkeypatch)
    (tmp_path / "model").mkdir()
    (tmp_path / "model/config.json").write_text(json.dumps(
        {"model_type": "roberta", "hidden_size": 384, "max_position_embeddings": 514}))
    embedder = OnnxEmbedder(config(model=str(tmp_path / "model")))
    with pytest.raises(ModelUnavailableError, match=r"model_type is 'roberta'.*contextd\[torch\]"):
        embedder.prepare()


def test_the_bundled_weights_are_the_published_ones():
    """The cache key names the weights by this digest; a changed file must change it too."""
    files = locate_model(EmbeddingConfig().model)
    weights = (files.path / "model.safetensors").read_bytes()
    assert hashlib.sha256(weights).hexdigest() == BUNDLED_WEIGHTS_SHA256
    assert files.version == f"bundled:{BUNDLED_WEIGHTS_SHA256[:16]}"


def _safetensors(tensors: dict[str, tuple[str, list[int], bytes]]) -> bytes:
    """A safetensors file written by hand from the format's definition."""
    header, offset, body = {"__metadata__": {"format": "pt"}}, 0, b""
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset, body = offset + len(data), body + data
    encoded = json.dumps(header).encode()
    return struct.pack("<Q", len(encoded)) + encoded + body


def test_safetensors_reader_follows_the_format(tmp_path):
    floats = np.array([[1.5, -2.0], [0.25, 3.0]], np.float32)
    bf16 = (floats.view(np.uint32) >> 16).astype("<u2")  # these values are exact in bfloat16
    file = tmp_path / "w.safetensors"
    file.write_bytes(_safetensors({"a": ("F32", [2, 2], floats.tobytes()),
                                   "b": ("BF16", [2, 2], bf16.tobytes()),
                                   "c": ("I64", [3], np.arange(3, dtype="<i8").tobytes())}))
    read = read_safetensors(file)
    assert np.array_equal(read["a"], floats) and np.array_equal(read["b"], floats)
    assert read["b"].dtype == np.float32 and read["c"].tolist() == [0, 1, 2]

    file.write_bytes(file.read_bytes()[:-8])  # truncated: the last tensor lies past the end
    with pytest.raises(ModelUnavailableError, match="past the file's end"):
        read_safetensors(file)
    file.write_bytes(b"\xff" * 16)
    with pytest.raises(ModelUnavailableError, match="bad header length"):
        read_safetensors(file)
