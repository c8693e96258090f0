"""int8 quantisation of an ONNX transformer whose activation scales are per token, so a
text's vector is a function of the text alone.

ONNX Runtime's ``quantize_dynamic`` computes one activation scale per tensor, that is per
batch: the same text embedded alone and beside another got vectors 0.991 apart in cosine,
so a crash-resumed index (other batches) answered differently from a clean one (issue 40).
Here every MatMul with a weight matrix becomes: the input's largest magnitude per row
(token), a symmetric uint8 code of the row around 128, ``MatMulInteger`` with the int8
weights (scales per output channel, as before), and the int32 result scaled back by the
row's and the channel's scales. A token's codes depend on its own activations only, and an
integer product has no rounding order; padded tokens are masked out of attention, so the
vector of a text no longer depends on its neighbours or on the batch's width.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

# Symmetric codes: 127 steps each side of the zero point 128 (0 is never used, so codes
# stay in uint8 and the weights' int8 range matches).
LEVELS = 127.0
ZERO_POINT = 128
# Rows of zeros (never in practice) get this scale instead of 0, which would divide by 0.
MIN_SCALE = 1e-12


def quantize_rowwise(source: Path, out: Path) -> None:
    """Write ``source`` (an fp32 ONNX model) to ``out`` with every MatMul by a 2-D weight
    initializer quantised: int8 weights per output channel, uint8 activations per row."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    weights = {init.name: init for init in graph.initializer}
    consts = [numpy_helper.from_array(np.array(LEVELS, dtype=np.float32), "rowq_levels"),
              numpy_helper.from_array(np.array(MIN_SCALE, dtype=np.float32), "rowq_min"),
              numpy_helper.from_array(np.array(float(ZERO_POINT), dtype=np.float32),
                                      "rowq_shift"),
              numpy_helper.from_array(np.array(ZERO_POINT, dtype=np.uint8), "rowq_zero"),
              numpy_helper.from_array(np.array(0.0, dtype=np.float32), "rowq_lo"),
              numpy_helper.from_array(np.array(255.0, dtype=np.float32), "rowq_hi")]
    quantised: dict[str, tuple[str, str]] = {}  # activation -> (codes, row scales)
    nodes, dropped = [], set()
    for node in graph.node:
        weight = weights.get(node.input[1]) if node.op_type == "MatMul" else None
        if weight is None or len(weight.dims) != 2:
            nodes.append(node)
            continue
        activation = node.input[0]
        if activation not in quantised:
            quantised[activation] = _quantise_rows(activation, len(quantised), nodes, helper)
        codes, row_scale = quantised[activation]
        w = numpy_helper.to_array(weight).astype(np.float32)
        w_scale = np.maximum(np.abs(w).max(axis=0) / LEVELS, MIN_SCALE).astype(np.float32)
        w_int8 = np.clip(np.rint(w / w_scale), -LEVELS, LEVELS).astype(np.int8)
        name = node.name or node.output[0]
        consts += [numpy_helper.from_array(w_int8, f"{name}_w_int8"),
                   numpy_helper.from_array(w_scale, f"{name}_w_scale")]
        dropped.add(weight.name)
        nodes += [
            helper.make_node("MatMulInteger", [codes, f"{name}_w_int8", "rowq_zero"],
                             [f"{name}_int32"]),
            helper.make_node("Cast", [f"{name}_int32"], [f"{name}_acc"],
                             to=onnx.TensorProto.FLOAT),
            helper.make_node("Mul", [f"{name}_acc", row_scale], [f"{name}_rows"]),
            helper.make_node("Mul", [f"{name}_rows", f"{name}_w_scale"], [node.output[0]]),
        ]
    still_used = {i for n in nodes for i in n.input}
    kept = [init for init in graph.initializer
            if init.name not in dropped or init.name in still_used]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept + consts)
    onnx.save(model, str(out))


def _quantise_rows(activation: str, index: int, nodes: list, helper) -> tuple[str, str]:
    """Nodes computing the uint8 codes of ``activation`` and its per-row scales."""
    import onnx

    p = f"rowq{index}"
    nodes += [
        helper.make_node("Abs", [activation], [f"{p}_abs"]),
        helper.make_node("ReduceMax", [f"{p}_abs"], [f"{p}_max"], axes=[-1], keepdims=1),
        helper.make_node("Div", [f"{p}_max", "rowq_levels"], [f"{p}_raw_scale"]),
        helper.make_node("Max", [f"{p}_raw_scale", "rowq_min"], [f"{p}_scale"]),
        helper.make_node("Div", [activation, f"{p}_scale"], [f"{p}_scaled"]),
        helper.make_node("Round", [f"{p}_scaled"], [f"{p}_rounded"]),
        helper.make_node("Add", [f"{p}_rounded", "rowq_shift"], [f"{p}_shifted"]),
        helper.make_node("Clip", [f"{p}_shifted", "rowq_lo", "rowq_hi"], [f"{p}_clipped"]),
        helper.make_node("Cast", [f"{p}_clipped"], [f"{p}_codes"], to=onnx.TensorProto.UINT8),
    ]
    return f"{p}_codes", f"{p}_scale"
