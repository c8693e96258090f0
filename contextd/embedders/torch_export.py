"""``torch.onnx.export`` of a transformer: the ONNX route for models the torch-free graph
builder (:mod:`contextd.embedders.bert_graph`) does not cover, and the reference its graph is
checked against. Needs the ``torch`` extra (``pip install 'contextd[torch]'``).
"""

from __future__ import annotations

import warnings
from pathlib import Path

from contextd.embedders.bert_graph import INPUT_NAMES, OUTPUT_NAME
from contextd.embedders.common import require_extra
from contextd.embedders.model_files import ModelFiles, forbid_downloads


def export_with_torch(files: ModelFiles, out: Path, opset: int) -> None:
    """Trace the transformer (up to its last hidden state) to ONNX with dynamic batch and
    sequence axes. Pooling stays outside the graph so it follows the model's pooling config."""
    require_extra("exporting this model to ONNX", "torch", "torch", "transformers")
    forbid_downloads()
    import torch
    from transformers import AutoModel

    # Eager attention traces to plain MatMul/Softmax, which quantisation and ORT fuse well.
    model = AutoModel.from_pretrained(str(files.path), attn_implementation="eager").eval()

    class LastHiddenState(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    dummy = torch.ones((2, 16), dtype=torch.long)
    axes = {name: {0: "batch", 1: "sequence"} for name in (*INPUT_NAMES, OUTPUT_NAME)}
    with torch.no_grad(), warnings.catch_warnings():
        # The tracer warns about Python-side shape checks that do not affect this graph.
        warnings.simplefilter("ignore")
        torch.onnx.export(LastHiddenState(model), (dummy, dummy, torch.zeros_like(dummy)),
                          str(out), dynamo=False, external_data=False, opset_version=opset,
                          input_names=list(INPUT_NAMES), output_names=[OUTPUT_NAME],
                          dynamic_axes=axes)
