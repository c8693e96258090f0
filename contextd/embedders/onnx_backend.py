"""The ONNX Runtime embedder: the shipped model turned into an ONNX graph once, then run
without torch.

Why not sentence-transformers' own ``backend="onnx"``: it needs optimum, which pins
transformers below the version sentence-transformers 6 needs, and it brings torch. The direct
route is small: the graph of a BERT model is built from its safetensors weights with
``onnx.helper`` (:mod:`contextd.embedders.bert_graph`; any other architecture falls back to
``torch.onnx.export``, which needs the ``torch`` extra), written once into the user cache with
a BLAKE3 checksum beside it (a missing or corrupt file is rebuilt), then run with onnxruntime
plus the ``tokenizers`` library, mean pooling and L2 normalisation in numpy. The default
install never imports torch, so a process is ready to embed a query in a fraction of a second
instead of the ~6 s that importing torch costs.

int8 has per-channel weight scales (ONNX Runtime's per-tensor default cost too much quality:
cosine ~0.93 to fp32) and per-token activation scales (:mod:`contextd.embedders.row_quantize`):
ONNX Runtime's dynamic quantisation scales activations per batch, which made a text's vector
depend on the texts batched with it (issue 40). The identity says ``int8-rows``, so vectors
of the per-batch scheme in an existing index are recomputed, not mixed with these.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from contextd.config.sections import EmbeddingConfig
from contextd.embedders.bert_graph import (
    INPUT_NAMES, WEIGHTS_FILE, build_bert_graph, unsupported_reason,
)
from contextd.embedders.common import (
    ModelSettings, cache_root, embed_sorted, mean_pool, require_extra,
)
from contextd.embedders.model_files import ModelFiles
from contextd.embedders.scratch_memory import release_scratch_memory
from contextd.embedders.row_quantize import quantize_rowwise
from contextd.embedders.safetensors_file import mapped_float32

OPSET = 17
# Bump when the export code changes what it writes, so stale cache files are not reused.
# 2: the graph is built from the safetensors weights without torch.
EXPORT_FORMAT = 2
CHECKSUM_SUFFIX = ".blake3"
# Padded tokens per batch at most (rows x the longest row): 2 chunks of 256 tokens, or the
# whole configured batch of short ones (contextd.embedders.common.embed_sorted). Measured
# on the loaded 2-core machine embedding 512 real chunks: peak RSS 504-537 MB at 4096,
# 346-378 MB at 2048, for the same CPU per chunk (24.4 against 23.4-25.8 ms); then on 600
# of fastapi's Python chunks, twice each: the peak above the loaded model +158/+196 MB at
# 2048, +94/+95 MB at 1024, +70 MB at 512, and CPU per chunk 14.7-15.2 ms at 2048, 10.1-10.5
# ms at 1024, 9.9 ms at 512 (smaller attention matrices stay in cache). A fixed glibc mmap
# threshold would cut the peak further but cost ~50% more CPU per chunk.
MAX_BATCH_TOKENS = 512
# The precision of the quantised model, in its identity and cache file name.
INT8 = "int8-rows"
# The word-embedding table, 47 MB of MiniLM's 56 MB of int8 weights (it stays float32): both
# sessions (batches and queries) read it from the weights file, memory-mapped, instead of
# each holding a copy on the heap (issue 37: two sessions 58 + 79 MB, then 15 + 32 MB).
SHARED_TABLE = "embeddings.word_embeddings.weight"

log = logging.getLogger(__name__)


def _versions(*distributions: str) -> dict[str, str]:
    """Installed versions, read from metadata so that computing a cache key imports nothing."""
    found = {}
    for dist in distributions:
        try:
            found[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            found[dist] = "absent"
    return found


def _exporter(files: ModelFiles) -> str:
    """``graph`` (built without torch) for the BERT models bert_graph writes, else ``torch``."""
    return "graph" if unsupported_reason(files) is None else "torch"


def _model_content(files: ModelFiles) -> str:
    """What names the model's content in the cache key: the bundled weights' digest, or the
    BLAKE3 of a model directory's config and weights (~5 ms warm). The key once held the
    model's path, so every clone or worktree of contextd (each with its own copy of the
    bundled model) exported its own 90 + 58 MB: ~7 GB of ~/.cache/contextd/onnx here."""
    if files.version.startswith("bundled:"):
        return files.version
    parts = [files.path / name for name in ("config.json", "model.safetensors",
                                            "pytorch_model.bin")
             if (files.path / name).is_file()]
    return "content:" + ",".join(f"{part.name}={_digest(part)}" for part in parts)


def _cache_file(settings: ModelSettings, precision: str) -> Path:
    """The cache file of one export: the name is a digest of everything that shapes it (the
    model by its content, not its place: copies of one model share one export)."""
    exporter = _exporter(settings.files)
    tools = ("onnx", "torch", "transformers") if exporter == "torch" else ("onnx",)
    key = {"format": EXPORT_FORMAT, "opset": OPSET, "model": _model_content(settings.files),
           "max_length": settings.max_length,
           "precision": precision, "exporter": exporter, **_versions(*tools)}
    if precision == INT8:
        key.update(per_channel=True, activation_scales="per-row")
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_root() / "onnx" / f"{settings.files.name}-{precision}-{digest}.onnx"


def _checksum_file(model: Path) -> Path:
    return model.with_name(model.name + CHECKSUM_SUFFIX)


def _digest(path: Path) -> str:
    """BLAKE3 of the file, memory-mapped and on all cores: ~5 ms for the int8 model warm, so
    checking it on every process's first use costs little against loading the model."""
    import blake3

    hasher = blake3.blake3(max_threads=blake3.blake3.AUTO)
    hasher.update_mmap(str(path))
    return hasher.hexdigest()


def _intact(model: Path) -> bool:
    """Whether ``model`` and its checksum file exist and agree (a truncated or damaged cache
    file, or one whose writer died before the checksum, is rebuilt rather than loaded)."""
    checksum = _checksum_file(model)
    if not (model.is_file() and checksum.is_file()):
        return False
    if checksum.read_text(encoding="ascii").strip() == _digest(model):
        return True
    log.warning("the cached ONNX model %s does not match its checksum; building it again", model)
    return False


def _write_atomically(target: Path, produce: Callable[[Path], None]) -> None:
    """Let ``produce`` write a temporary file beside ``target``, then rename it into place
    and write its checksum beside it: readers (and a second process preparing at the same
    time) see the whole file or none, and a file without a matching checksum is not used."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.stem}-",
                                    suffix=".tmp.onnx")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        produce(tmp)
        digest = _digest(tmp)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; the cache is a plain shared file
        os.replace(tmp, target)
        tmp.write_text(digest + "\n", encoding="ascii")
        os.replace(tmp, _checksum_file(target))
    finally:
        tmp.unlink(missing_ok=True)


def _export_fp32(files: ModelFiles, out: Path) -> None:
    """Write the transformer (up to its last hidden state) as ONNX with dynamic batch and
    sequence axes: built from the weights for a BERT model, else traced with torch."""
    reason = unsupported_reason(files)
    if reason is None:
        import onnx

        onnx.save(build_bert_graph(files, OPSET), str(out))
        return
    require_extra(f"exporting {files.name} to ONNX ({reason})", "torch", "torch", "transformers")
    from contextd.embedders.torch_export import export_with_torch

    export_with_torch(files, out, OPSET)


class OnnxEmbedder:
    """Embeds with ONNX Runtime; ``quantize = "int8"`` selects the quantised model.

    Building the object only locates the model; the ONNX file is exported (if the cache
    lacks it) and loaded on the first ``embed``/``embed_query`` or an explicit ``prepare()``.
    """

    def __init__(self, config: EmbeddingConfig):
        precision = INT8 if config.quantize == "int8" else "fp32"
        self.settings = ModelSettings.resolve(config, "onnx", precision)
        self.identity = self.settings.identity
        self.dimension = self.settings.dimension
        self.model_path = _cache_file(self.settings, precision)
        self._lock = threading.RLock()
        self._session = None
        self._single = None  # the one-thread session for queries
        self._tokenizer = None
        self._verified = False  # the cache file's checksum was checked by this object
        self._shared: dict | None = None  # initializers the sessions share (_shared_values)

    @property
    def prepared(self) -> bool:
        """Whether the ONNX file and its checksum are in the cache (so first use needs no
        export); the checksum itself is verified by ``prepare``."""
        return self.model_path.is_file() and _checksum_file(self.model_path).is_file()

    def prepare(self, force: bool = False) -> Path:
        """Build (and quantise) the model into the cache unless an intact copy is there."""
        with self._lock:
            if not force and (self._verified or _intact(self.model_path)):
                self._verified = True
                return self.model_path
            fp32 = _cache_file(self.settings, "fp32")
            if force or not _intact(fp32):
                _write_atomically(fp32, lambda tmp: _export_fp32(self.settings.files, tmp))
            if self.model_path != fp32:
                _write_atomically(self.model_path, lambda tmp: quantize_rowwise(fp32, tmp))
            self._verified = True
            return self.model_path

    def _load(self):
        """The batch session (``threads`` intra-op threads) and the tokenizer."""
        with self._lock:
            if self._session is None:
                from tokenizers import Tokenizer

                session = self._new_session(self.settings.threads)
                tokenizer = Tokenizer.from_file(str(self.settings.files.path / "tokenizer.json"))
                # The shipped tokenizer.json truncates at 128 and pads to a fixed 128; the model
                # reads max_length tokens, and padding is done per batch in _run.
                tokenizer.enable_truncation(max_length=self.settings.max_length)
                tokenizer.no_padding()
                self._tokenizer, self._session = tokenizer, session
            return self._session, self._tokenizer

    def _query_session(self):
        """A session of one thread for queries: a query is a dozen tokens, where handing work
        to a second thread costs more than it saves (warm query 1.1 vs 1.5 ms here; 0.7 vs
        0.9 ms each with four queries at once), and a service runs queries side by side."""
        with self._lock:
            if self._single is None:
                self._single = (self._session if self.settings.threads == 1
                                else self._new_session(1))
            return self._single

    def _new_session(self, threads: int):
        import onnxruntime

        options = onnxruntime.SessionOptions()
        # No arena: ONNX Runtime's CPU arena keeps the largest buffers a batch ever needed
        # for the life of the process (1.25 GB RSS after a few thousand chunks, against
        # ~0.45 GB without it, at the same speed).
        options.enable_cpu_mem_arena = False
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Idle workers sleep instead of spinning: the cores are shared with chunking and
        # other processes, and spinning cost ~20% throughput here under contention.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        for name, value in self._shared_values().items():
            options.add_initializer(name, value)
        return onnxruntime.InferenceSession(str(self.prepare()), options,
                                            providers=["CPUExecutionProvider"])

    def _shared_values(self) -> dict:
        """The initializers every session of this embedder reads from the weights file
        (SHARED_TABLE) rather than from its own copy: only for a graph built here from those
        weights (bert_graph; a checkpoint's "bert." prefix is dropped there), where the table
        is float32 and its bytes are the graph's."""
        with self._lock:
            if self._shared is None:
                import onnxruntime

                files = self.settings.files
                table = (mapped_float32(files.path / WEIGHTS_FILE,
                                        (SHARED_TABLE, "bert." + SHARED_TABLE))
                         if _exporter(files) == "graph" else None)
                # The OrtValue reads the array where it lies; both live as long as this object.
                self._shared = ({SHARED_TABLE: onnxruntime.OrtValue.ortvalue_from_numpy(table)}
                                if table is not None else {})
            return self._shared

    def _run(self, encodings: Sequence, session=None) -> np.ndarray:
        """One forward pass over encodings padded to the longest among them (on the batch
        session unless another is given)."""
        session = session or self._load()[0]
        width = max(len(e.ids) for e in encodings)
        arrays = {name: np.zeros((len(encodings), width), dtype=np.int64) for name in INPUT_NAMES}
        for row, enc in enumerate(encodings):
            n = len(enc.ids)
            arrays["input_ids"][row, :n] = enc.ids
            arrays["attention_mask"][row, :n] = enc.attention_mask
            arrays["token_type_ids"][row, :n] = enc.type_ids
        hidden = session.run(None, arrays)[0]
        return mean_pool(hidden, arrays["attention_mask"], self.settings.normalize)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of ``texts``: float32, shape (len(texts), dimension), in input order."""
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        _, tokenizer = self._load()
        encodings = tokenizer.encode_batch(list(texts))
        try:
            return embed_sorted([len(e.ids) for e in encodings], self.settings.batch_size,
                                self.dimension, lambda idx: self._run([encodings[i] for i in idx]),
                                max_tokens=MAX_BATCH_TOKENS)
        finally:
            if len(texts) > self.settings.batch_size:
                release_scratch_memory()

    def embed_query(self, text: str) -> np.ndarray:
        """The vector of one query: float32, shape (dimension,)."""
        _, tokenizer = self._load()
        return self._run([tokenizer.encode(text)], self._query_session())[0]
