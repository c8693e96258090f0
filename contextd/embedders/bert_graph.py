"""The ONNX graph of a BERT encoder, built from its config and safetensors weights without torch.

Why build it by hand: the only other route, ``torch.onnx.export``, makes every install carry
PyTorch (754 MB of a 2.2 GB virtualenv) for a step that runs once. A BERT encoder is a short,
fixed recipe, written here node by node with ``onnx.helper`` exactly as transformers' eager
``BertModel`` computes it:

- embeddings: word + token type + absolute position (positions 0 .. sequence-1), then
  LayerNorm;
- per layer: query/key/value projections split into heads, scores scaled by 1/sqrt(head
  size) plus the additive attention-mask bias (0 kept, float32 minimum padded), softmax, the
  output projection, residual + LayerNorm, then the feed-forward block with exact (erf) GELU,
  residual + LayerNorm.

The output is the last hidden state, with dynamic batch and sequence axes and the same
input and output names as the torch export; pooling stays outside the graph so that it
follows the model's pooling config (:func:`contextd.embedders.common.mean_pool`). Linear
layers are MatMul with the transposed weight plus Add, the shape onnxruntime's dynamic
quantiser turns into per-channel int8, as it did the torch export.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from contextd.embedders.model_files import ModelFiles
from contextd.embedders.safetensors_file import read_safetensors
from contextd.errors import ModelUnavailableError

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "last_hidden_state"
WEIGHTS_FILE = "model.safetensors"
# Checkpoints saved from BertForMaskedLM and friends prefix the encoder's names with this.
_PREFIX = "bert."


def unsupported_reason(files: ModelFiles) -> str | None:
    """Why this builder cannot produce the model's graph (None when it can): only BERT
    encoders with absolute positions, exact GELU and safetensors weights are written here."""
    config = files.read_json("config.json")
    if config.get("model_type") != "bert":
        return f"its model_type is {config.get('model_type')!r}, not 'bert'"
    if config.get("hidden_act", "gelu") != "gelu":
        return f"its hidden_act is {config['hidden_act']!r}, not 'gelu'"
    if config.get("position_embedding_type", "absolute") != "absolute":
        return f"its position_embedding_type is {config['position_embedding_type']!r}"
    if not (files.path / WEIGHTS_FILE).is_file():
        return f"it has no {WEIGHTS_FILE} (only safetensors weights are read without torch)"
    return None


class _GraphBuilder:
    """Collects nodes and initializers; every node output gets a fresh unique name."""

    def __init__(self, weights: dict[str, np.ndarray], source: Path):
        self.weights, self.source = weights, source
        self.nodes: list = []
        self.initializers: dict[str, object] = {}

    def const(self, name: str, array: np.ndarray) -> str:
        from onnx import numpy_helper

        if name not in self.initializers:
            self.initializers[name] = numpy_helper.from_array(np.ascontiguousarray(array), name)
        return name

    def weight(self, name: str, transpose: bool = False) -> str:
        """A model tensor as float32 initializer (transposed for a MatMul's right side)."""
        if name not in self.weights:
            raise ModelUnavailableError(f"{self.source} lacks the tensor {name!r} of a BERT model")
        array = self.weights[name].astype(np.float32, copy=False)
        return self.const(f"{name}.T" if transpose else name, array.T if transpose else array)

    def op(self, op_type: str, *inputs: str, **attributes) -> str:
        from onnx import helper

        output = f"{op_type}_{len(self.nodes)}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [output], **attributes))
        return output

    def linear(self, x: str, prefix: str) -> str:
        return self.op("Add", self.op("MatMul", x, self.weight(f"{prefix}.weight", True)),
                       self.weight(f"{prefix}.bias"))

    def heads(self, x: str, prefix: str, shape: str, perm: list[int]) -> str:
        """A projection split into heads: batch × heads × sequence × head size (``perm``
        [0, 2, 1, 3]), or with the last two axes swapped ([0, 2, 3, 1], for the keys)."""
        return self.op("Transpose", self.op("Reshape", self.linear(x, prefix), shape), perm=perm)

    def layer_norm(self, x: str, prefix: str, epsilon: float) -> str:
        return self.op("LayerNormalization", x, self.weight(f"{prefix}.weight"),
                       self.weight(f"{prefix}.bias"), axis=-1, epsilon=epsilon)

    def gelu(self, x: str) -> str:
        """Exact GELU, 0.5 · x · (1 + erf(x / √2)), as torch's default ``gelu``."""
        erf = self.op("Erf", self.op("Div", x, self.const("sqrt2", np.array(math.sqrt(2.0),
                                                                            np.float32))))
        one = self.const("one", np.array(1.0, np.float32))
        half = self.const("half", np.array(0.5, np.float32))
        return self.op("Mul", self.op("Mul", x, self.op("Add", erf, one)), half)


def _encoder_weights(files: ModelFiles) -> dict[str, np.ndarray]:
    weights = read_safetensors(files.path / WEIGHTS_FILE)
    if not any(name.startswith("embeddings.") for name in weights):
        weights = {name.removeprefix(_PREFIX): array for name, array in weights.items()}
    return weights


def build_bert_graph(files: ModelFiles, opset: int):
    """The ``onnx.ModelProto`` of the encoder in ``files``: inputs ``input_ids``,
    ``attention_mask``, ``token_type_ids`` (int64, batch × sequence), output
    ``last_hidden_state`` (float32, batch × sequence × hidden). Raises ModelUnavailableError
    when the model is not a BERT this builder supports, or a tensor is missing."""
    from onnx import TensorProto, helper

    reason = unsupported_reason(files)
    if reason:
        raise ModelUnavailableError(f"cannot build the ONNX graph of {files.path}: {reason}")
    config = files.read_json("config.json")
    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    head_size, epsilon = hidden // heads, float(config.get("layer_norm_eps", 1e-12))
    g = _GraphBuilder(_encoder_weights(files), files.path / WEIGHTS_FILE)

    # Embeddings: position ids 0 .. sequence-1 (shape 1 × sequence, sliced from a constant
    # row) looked up with a Gather, as in the torch export, so the int8 quantiser treats the
    # position table as it did there.
    table = g.weight("embeddings.position_embeddings.weight")
    row = g.const("position_ids", np.arange(int(config["max_position_embeddings"]),
                                            dtype=np.int64)[None, :])
    sequence = g.op("Shape", "input_ids", start=1, end=2)
    positions = g.op("Slice", row, g.const("zero_1d", np.array([0], np.int64)), sequence,
                     g.const("one_1d", np.array([1], np.int64)))
    positions = g.op("Gather", table, positions)
    x = g.op("Add", g.op("Add", g.op("Gather", g.weight("embeddings.word_embeddings.weight"),
                                     "input_ids"),
                         g.op("Gather", g.weight("embeddings.token_type_embeddings.weight"),
                              "token_type_ids")),
             positions)
    x = g.layer_norm(x, "embeddings.LayerNorm", epsilon)

    # Additive mask bias, batch × 1 × 1 × sequence: 0 where attended, float32 min on padding.
    keep = g.op("Cast", "attention_mask", to=TensorProto.BOOL)
    bias = g.op("Where", keep, g.const("bias_keep", np.array(0.0, np.float32)),
                g.const("bias_pad", np.array(np.finfo(np.float32).min, np.float32)))
    bias = g.op("Unsqueeze", bias, g.const("axes_1_2", np.array([1, 2], np.int64)))

    split = g.const("shape_heads", np.array([0, 0, heads, head_size], np.int64))
    merge = g.const("shape_hidden", np.array([0, 0, hidden], np.int64))
    scale = g.const("sqrt_head_size", np.array(math.sqrt(head_size), np.float32))
    for layer in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{layer}"

        query = g.heads(x, f"{p}.attention.self.query", split, [0, 2, 1, 3])
        key = g.heads(x, f"{p}.attention.self.key", split, [0, 2, 3, 1])  # transposed for Q·Kᵀ
        value = g.heads(x, f"{p}.attention.self.value", split, [0, 2, 1, 3])
        scores = g.op("Add", g.op("Div", g.op("MatMul", query, key), scale), bias)
        context = g.op("MatMul", g.op("Softmax", scores, axis=-1), value)
        context = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), merge)
        x = g.layer_norm(g.op("Add", g.linear(context, f"{p}.attention.output.dense"), x),
                         f"{p}.attention.output.LayerNorm", epsilon)
        inner = g.gelu(g.linear(x, f"{p}.intermediate.dense"))
        x = g.layer_norm(g.op("Add", g.linear(inner, f"{p}.output.dense"), x),
                         f"{p}.output.LayerNorm", epsilon)
    g.nodes.append(helper.make_node("Identity", [x], [OUTPUT_NAME]))

    axes = ["batch", "sequence"]
    graph = helper.make_graph(
        g.nodes, "bert_encoder",
        [helper.make_tensor_value_info(name, TensorProto.INT64, axes) for name in INPUT_NAMES],
        [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, [*axes, hidden])],
        initializer=list(g.initializers.values()))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="contextd")
    # onnxruntime reads IR versions up to its own; the newest onnx may write a later one.
    model.ir_version = min(model.ir_version, 8)
    return model
