"""The built-in embedders with the real model: ONNX agrees with the torch reference (where the
torch extra is installed), int8 stays close to fp32, the query path runs without torch, the
export is cached and written atomically.

The ONNX exports live in the user cache (as in real use) so a second run costs no export;
only the concurrency test uses a private cache directory.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from contextd.cli import cli
from contextd.config.sections import EmbeddingConfig
from contextd.embedders.common import embed_sorted
from contextd.embedders.registry import get_embedder
from contextd.errors import ConfigError, ModelUnavailableError
from benchmark_module import load_benchmark
from torch_extra import requires_torch, torch_installed

REPO = Path(__file__).resolve().parent.parent


BENCH = load_benchmark("bench_embedders")


def config(backend: str = "onnx", quantize: str = "int8", **kw) -> EmbeddingConfig:
    return dataclasses.replace(EmbeddingConfig(), backend=backend, quantize=quantize, **kw)


@pytest.fixture(scope="module")
def chunks() -> list[str]:
    texts = BENCH.stdlib_chunks(50)
    assert len(texts) == 50 and any(t.count("\n") > 30 for t in texts)  # some exceed 256 tokens
    return texts


ONNX_BACKENDS = ("onnx-fp32", "onnx-int8")


@pytest.fixture(scope="module")
def vectors(chunks) -> dict[str, np.ndarray]:
    return {name: get_embedder(BENCH.config_for(name)).embed(chunks) for name in ONNX_BACKENDS}


def _has_contract_shape(vecs: np.ndarray) -> bool:
    return (vecs.shape == (50, 384) and vecs.dtype == np.float32
            and np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5))


def test_vectors_have_the_contract_shape(vectors):
    assert all(_has_contract_shape(vecs) for vecs in vectors.values())


@requires_torch
def test_onnx_fp32_matches_torch(chunks, vectors):
    reference = get_embedder(BENCH.config_for("torch-fp32")).embed(chunks)
    assert _has_contract_shape(reference)
    cosine = np.sum(vectors["onnx-fp32"] * reference, axis=1)
    print(f"onnx fp32 vs torch: cosine min {cosine.min():.6f} mean {cosine.mean():.6f}")
    assert cosine.min() >= 0.999


def test_int8_stays_close_to_fp32(vectors):
    cosine = np.sum(vectors["onnx-int8"] * vectors["onnx-fp32"], axis=1)
    agreement = BENCH.top_k_agreement(vectors["onnx-int8"], vectors["onnx-fp32"])
    print(f"int8 vs fp32: cosine min {cosine.min():.4f} mean {cosine.mean():.4f}, "
          f"top-10 neighbour agreement {agreement:.3f}")
    assert cosine.min() >= 0.98
    assert agreement >= 0.8


def test_int8_vector_is_a_function_of_the_text_alone(chunks):
    """Issue 40: with one activation scale per batch, a text embedded alone and beside one
    other text had cosine 0.991, so a crash-resumed index (other batches) answered unlike a
    clean one. Per-token scales make the vector the text's alone: alone, in a pair, in the
    sorted batches of the whole list and as a query it is the same."""
    embedder = get_embedder(config())
    alone = np.stack([embedder.embed([text])[0] for text in chunks[:8]])
    paired = np.stack([embedder.embed([text, chunks[-1 - i]])[0]
                       for i, text in enumerate(chunks[:8])])
    batched = embedder.embed(chunks)[:8]
    queries = np.stack([embedder.embed_query(text) for text in chunks[:8]])
    for other in (paired, batched, queries):
        assert np.sum(alone * other, axis=1).min() >= 0.99999


def test_batching_keeps_input_order(chunks, vectors):
    embedder = get_embedder(config(quantize="none", batch_size=7))  # several sorted batches
    batched = embedder.embed(chunks)
    one_by_one = np.stack([embedder.embed_query(t) for t in chunks[:5]])
    assert np.allclose(batched[:5], one_by_one, atol=1e-4)
    assert np.allclose(batched, vectors["onnx-fp32"], atol=1e-4)
    assert embedder.embed([]).shape == (0, 384)


def test_batches_are_capped_in_padded_tokens():
    """Issue 26: long texts go in smaller batches (attention buffers grow with rows x
    length^2), short ones still fill the configured batch, and the order is kept."""
    lengths = [300, 5, 256, 10, 256, 7, 200, 3] * 4
    seen: list[list[int]] = []

    def run(indices):
        seen.append([lengths[i] for i in indices])
        return np.repeat(np.asarray(indices, dtype=np.float32)[:, None], 2, axis=1)

    out = embed_sorted(lengths, 16, 2, run, max_tokens=512)
    assert np.array_equal(out[:, 0], np.arange(len(lengths)))
    assert sum(map(len, seen)) == len(lengths) and len(seen[0]) == 16
    assert all(len(batch) * max(batch) <= 512 or len(batch) == 1 for batch in seen)


def test_identity_names_model_backend_and_quantisation():
    identities = {name: get_embedder(BENCH.config_for(name)).identity for name in ONNX_BACKENDS}
    assert identities == {"onnx-fp32": "all-MiniLM-L6-v2/onnx-fp32/256",
                          "onnx-int8": "all-MiniLM-L6-v2/onnx-int8-rows/256"}
    assert get_embedder(config()) is get_embedder(config())


@requires_torch
def test_torch_identity_names_the_reference_backend():
    identity = get_embedder(BENCH.config_for("torch-fp32")).identity
    assert identity == "all-MiniLM-L6-v2/torch-fp32/256"


def _run_python(code: str, env: dict[str, str] | None = None) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, cwd=REPO, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


QUERY_IN_FRESH_PROCESS = """
import json, sys
from contextd.config.sections import EmbeddingConfig
from contextd.embedders.registry import get_embedder
embedder = get_embedder(EmbeddingConfig())
vector = embedder.embed_query("where are tokens refreshed")
print(json.dumps({"torch": "torch" in sys.modules, "dim": len(vector),
                  "path": str(embedder.model_path),
                  "mtime": embedder.model_path.stat().st_mtime_ns}))
"""


def test_query_path_reuses_the_cache_and_never_imports_torch():
    prepared = get_embedder(EmbeddingConfig())
    path = prepared.prepare()
    before = path.stat().st_mtime_ns
    for _ in range(2):
        result = _run_python(QUERY_IN_FRESH_PROCESS)
        assert result == {"torch": False, "dim": 384, "path": str(path), "mtime": before}


def test_importing_contextd_and_listing_backends_stays_light():
    result = _run_python(
        "import json, sys, contextd, contextd.embedders\n"
        "from contextd.embedders.registry import embedder_factories\n"
        "names = sorted(embedder_factories())\n"
        "heavy = [m for m in ('torch', 'onnxruntime', 'sentence_transformers', 'onnx',"
        " 'transformers', 'httpx2') if m in sys.modules]\n"
        "print(json.dumps({'names': names, 'heavy': heavy}))")
    assert result == {"names": ["ollama", "onnx", "openai", "torch"], "heavy": []}


def test_unknown_model_and_backend_fail_clearly(tmp_path):
    with pytest.raises(ModelUnavailableError, match="shipped with contextd") as err:
        get_embedder(config(model="someone/unknown-model"))
    assert "never downloads" in str(err.value)
    with pytest.raises(ModelUnavailableError, match="no config.json"):
        get_embedder(config(model=str(tmp_path)))
    with pytest.raises(ConfigError, match="choose from: ollama, onnx, openai, torch"):
        get_embedder(config(backend="tensorflow"))


PREPARE_FP32 = """
import json
from contextd.config.sections import EmbeddingConfig
from contextd.embedders.registry import get_embedder
embedder = get_embedder(EmbeddingConfig(quantize="none"))
print(json.dumps({"path": str(embedder.prepare()), "dim": len(embedder.embed_query("x"))}))
"""


@pytest.mark.slow
def test_two_processes_preparing_at_once_leave_one_valid_file(tmp_path):
    env = {**os.environ, "CONTEXTD_CACHE_DIR": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", PREPARE_FP32], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, env=env, cwd=REPO)
             for _ in range(2)]
    results = [json.loads(p.communicate(timeout=120)[0].strip().splitlines()[-1])
               for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert results[0] == results[1] and results[0]["dim"] == 384
    files = sorted(p.name for p in (tmp_path / "onnx").iterdir())
    name = Path(results[0]["path"]).name
    assert files == [name, name + ".blake3"]  # the model, its checksum, no temporary file


def test_cli_embedders_list_json_and_prepare():
    runner = CliRunner()
    listed = runner.invoke(cli, ["embedders", "list", "--json"], catch_exceptions=False)
    rows = {row["backend"]: row for row in json.loads(listed.stdout)}
    assert set(rows) == {"ollama", "onnx", "openai", "torch"}
    # Issue 27: remote backends nobody configured were listed "[prepared]".
    for remote in ("openai", "ollama"):
        assert not rows[remote]["configured"] and rows[remote]["identity"] is None
        assert rows[remote]["prepared"] is None and "not set up" in rows[remote]["status"]
    human = runner.invoke(cli, ["embedders", "list"], catch_exceptions=False).stdout
    for line in human.splitlines():
        if line[2:].startswith(("openai", "ollama")):
            assert "[remote, not set up" in line and "prepared" not in line, line
    assert rows["onnx"]["configured"] and rows["onnx"]["identity"].endswith("/onnx-int8-rows/256")
    if torch_installed():
        assert rows["torch"]["error"] is None and rows["torch"]["prepared"] is True
    else:  # the default install: one line naming the extra that brings the backend
        assert "pip install 'contextd[torch]'" in rows["torch"]["error"]

    prepared = runner.invoke(cli, ["--json", "embedders", "prepare"], catch_exceptions=False)
    result = json.loads(prepared.stdout)
    assert Path(result["path"]).is_file() and result["identity"] == rows["onnx"]["identity"]
    listed = runner.invoke(cli, ["embedders", "list", "--json"], catch_exceptions=False)
    assert {r["backend"]: r for r in json.loads(listed.stdout)}["onnx"]["prepared"] is True


CLI_QUERY_IN_FRESH_PROCESS = """
import json, sys
from contextd.cli import cli
try:
    cli(["--root", sys.argv[1], "--json", "query", "shipping price of a parcel"],
        standalone_mode=False)
finally:
    print(json.dumps({"torch": sorted(m for m in ("torch", "sentence_transformers")
                                      if m in sys.modules)}), file=sys.stderr)
"""


def rates_repository(root: Path) -> Path:
    """A one-function git repository whose function answers "shipping price of a parcel"
    in words a model matches (its docstring) and the query does not share (its name)."""
    (root / "src").mkdir(parents=True)
    (root / "src/rates.py").write_text(
        'def shipping_rate(weight_kg: float) -> float:\n'
        '    """Price of shipping a parcel of the given weight."""\n'
        '    return 4.5 + 1.2 * weight_kg\n')
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def test_cli_query_indexes_and_answers_without_torch(tmp_path):
    """The whole query path of a cold process (ContextModule, indexing with embeddings, the
    semantic provider) runs on ONNX without importing torch."""
    get_embedder(EmbeddingConfig()).prepare()
    root = rates_repository(tmp_path / "repo")
    done = subprocess.run([sys.executable, "-c", CLI_QUERY_IN_FRESH_PROCESS, str(root)],
                          capture_output=True, text=True, cwd=REPO, timeout=300,
                          env={**os.environ, "XDG_RUNTIME_DIR": str(tmp_path / "run")})
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["hits"][0]["file_path"] == "src/rates.py"
    assert "semantic" in answer["hits"][0]["providers"], answer  # the model did embed
    assert json.loads(done.stderr.strip().splitlines()[-1]) == {"torch": []}


def test_cli_embedders_list_says_what_a_configured_remote_backend_lacks(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    (tmp_path / "context.toml").write_text(
        '[embedding]\nbackend = "openai"\nmodel = "text-embedding-3-small"\ndimension = 1536\n')
    listed = CliRunner().invoke(cli, ["--root", str(tmp_path), "--json", "embedders", "list"],
                                catch_exceptions=False)
    rows = {row["backend"]: row for row in json.loads(listed.stdout)}
    assert rows["openai"]["configured"] and rows["openai"]["identity"].startswith("openai:")
    assert rows["openai"]["status"] == "remote, API key missing: set OPENAI_API_KEY"


def test_the_sessions_read_the_word_table_from_the_weights_file(chunks):
    """Issue 37: each ONNX session (batches, queries) held its own 47 MB copy of the word
    embedding table. Both now read it memory-mapped from model.safetensors, and the vectors
    are those of a session that holds its own copy."""
    import onnxruntime

    from contextd.embedders.onnx_backend import SHARED_TABLE, OnnxEmbedder

    for quantize in ("int8", "none"):
        embedder = get_embedder(config(quantize=quantize))
        assert isinstance(embedder, OnnxEmbedder)
        address = embedder._shared_values()[SHARED_TABLE].data_ptr()
        assert _mapped_file(address).name == "model.safetensors"
        own_copy = onnxruntime.InferenceSession(str(embedder.prepare()),
                                                providers=["CPUExecutionProvider"])
        tokenizer = embedder._load()[1]
        encodings = [tokenizer.encode(text) for text in chunks[:6]]
        shared = embedder._run(encodings)
        assert np.allclose(embedder._run(encodings, own_copy), shared, atol=1e-6)
        assert np.allclose(np.stack([embedder.embed_query(t) for t in chunks[:6]]), shared,
                           atol=1e-5)


def _mapped_file(address: int) -> Path:
    """The file mapped at ``address`` in this process (/proc/self/maps)."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        start, end = (int(part, 16) for part in fields[0].split("-"))
        if start <= address < end:
            return Path(fields[5].strip() if len(fields) > 5 else "")
    raise AssertionError(f"nothing is mapped at {address:#x}")


def test_copies_of_a_model_share_one_onnx_export(tmp_path):
    """The export cache is keyed by the model's content, not its place: every clone or
    worktree of contextd (each with its own copy of the bundled model) exported its own
    90 + 58 MB before. A model whose content differs gets an export of its own."""
    import shutil

    from contextd.embedders.model_files import BUNDLED_MODEL, MODELS_DIR
    from contextd.embedders.onnx_backend import OnnxEmbedder

    copies = [tmp_path / "one" / BUNDLED_MODEL, tmp_path / "two" / BUNDLED_MODEL]
    for copy in copies:  # the same files, by links: the weights are 90 MB
        shutil.copytree(MODELS_DIR / BUNDLED_MODEL, copy, copy_function=os.symlink)
    exports = [OnnxEmbedder(EmbeddingConfig(model=str(c), quantize="int8")).model_path
               for c in copies]
    assert exports[0] == exports[1]
    config = copies[1] / "config.json"
    changed = json.loads(config.read_text()) | {"layer_norm_eps": 1e-6}
    config.unlink()
    config.write_text(json.dumps(changed))
    assert OnnxEmbedder(EmbeddingConfig(model=str(copies[1]), quantize="int8")).model_path \
        != exports[0]
