"""Remote embedding settings from the environment and the project's ``.env``.

Teams that already run an embedding server configure their tools with variables such as
``EMBEDDING_MODEL`` and ``OLLAMA_BASE_URL``, often in a ``.env`` file at the project root.
contextd reads the same names, in this order (first found wins):

1. ``context.toml`` — an explicit key there always wins;
2. the process environment;
3. ``<root>/.env`` (read here only; the boundary never indexes it);
4. the built-in default.

Only ``EMBEDDING_BACKEND`` can select a remote backend: an ambient ``OPENAI_API_KEY`` in a
shell never sends a project's code to a server on its own. The other variables fill the
settings of a remote backend once one is selected (a local ONNX model is never renamed by an
``EMBEDDING_MODEL`` meant for a server). Secrets never enter the configuration: only the
*name* of the key's variable is kept, and the key is read when a request is made.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from contextd.config.sections import ContextConfig, EmbeddingConfig
from contextd.errors import ConfigError, ConfigIssue

DOTENV_FILENAME = ".env"
REMOTE_BACKENDS = ("openai", "ollama")
OPENAI_BASE_URL = "https://api.openai.com/v1"
OLLAMA_BASE_URL = "http://localhost:11434"

# [embedding] key -> variables read for it, first set wins; "{backend}" keys are per backend.
ENV_VARIABLES: dict[str, tuple[str, ...]] = {
    "backend": ("EMBEDDING_BACKEND",),
    "model": ("EMBEDDING_MODEL",),
    "dimension": ("EMBEDDING_DIMENSION",),
    "api_key_env": ("EMBEDDING_API_KEY_ENV",),
}
BASE_URL_VARIABLES: dict[str, tuple[str, ...]] = {
    "openai": ("EMBEDDING_BASE_URL", "OPENAI_COMPATIBLE_BASE_URL", "OPENAI_BASE_URL"),
    "ollama": ("EMBEDDING_BASE_URL", "OLLAMA_BASE_URL"),
}
# Dimensions of models the seed names, so a team need not look them up.
KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
    "nomic-embed-text": 768,
    "all-minilm": 384,
    "all-MiniLM-L6-v2": 384,
    "sentence-transformers/all-MiniLM-L6-v2": 384,
}

_LINE_RE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")


@dataclass(frozen=True)
class Origin:
    """Where one setting came from: ``kind`` is context.toml, environment, .env, known model
    or default; ``variable`` names the variable that supplied it."""

    kind: str
    variable: str | None = None

    def __str__(self) -> str:
        return f"{self.kind} {self.variable}" if self.variable else self.kind


def read_dotenv(path: Path) -> dict[str, str]:
    """The assignments of a ``.env`` file (``KEY=value``, optional ``export``, quotes,
    ``#`` comments); {} when there is none. Values are not expanded."""
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([ConfigIssue(str(path), "<file>", f"cannot read: {exc}")]) from None
    found = {}
    for line in text.splitlines():
        match = _LINE_RE.match(line)
        if not match or line.lstrip().startswith("#"):
            continue
        name, value = match.groups()
        if value[:1] in ("'", '"') and value.endswith(value[0]) and len(value) >= 2:
            value = value[1:-1]
        else:
            value = value.split(" #", 1)[0].rstrip()
        found[name] = value
    return found


class _Lookup:
    """Variables from the environment, then the .env file, remembering which supplied each."""

    def __init__(self, environ: Mapping[str, str], dotenv: Mapping[str, str]):
        self.environ = environ
        self.dotenv = dotenv

    def first(self, names: tuple[str, ...]) -> tuple[str, Origin] | None:
        for name in names:
            if self.environ.get(name):
                return self.environ[name], Origin("environment", name)
        for name in names:
            if self.dotenv.get(name):
                return self.dotenv[name], Origin(DOTENV_FILENAME, name)
        return None


def resolve_embedding(config: ContextConfig, root: Path,
                      environ: Mapping[str, str] | None = None
                      ) -> tuple[EmbeddingConfig, dict[str, Origin]]:
    """The [embedding] section with the environment and ``.env`` applied, and the origin of
    every key that did not keep its default. Raises ConfigError naming the variable when
    one holds a value of the wrong type."""
    environ = os.environ if environ is None else environ
    dotenv_path = root / DOTENV_FILENAME
    lookup = _Lookup(environ, read_dotenv(dotenv_path))
    embedding = config.embedding
    origins: dict[str, Origin] = {}
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(EmbeddingConfig):
        if f"embedding.{f.name}" in config.explicit_keys:
            origins[f.name] = Origin("context.toml")

    def take(key: str, names: tuple[str, ...], convert=str) -> None:
        if key in origins:
            return
        found = lookup.first(names)
        if found is None:
            return
        value, origin = found
        try:
            changes[key] = convert(value)
        except ValueError:
            raise ConfigError([ConfigIssue(str(origin), f"embedding.{key}",
                                           f"expected an integer, got {value!r}")]) from None
        origins[key] = origin

    take("backend", ENV_VARIABLES["backend"])
    backend = str(changes.get("backend", embedding.backend))
    if backend in REMOTE_BACKENDS:
        take("model", ENV_VARIABLES["model"])
        take("dimension", ENV_VARIABLES["dimension"], int)
        take("api_key_env", ENV_VARIABLES["api_key_env"])
        take("base_url", BASE_URL_VARIABLES[backend])
        model = str(changes.get("model", embedding.model))
        if "dimension" not in origins and model in KNOWN_DIMENSIONS:
            changes["dimension"] = KNOWN_DIMENSIONS[model]
            origins["dimension"] = Origin("known model", model)
    if dotenv_path.is_file():
        changes["env_file"] = str(dotenv_path)
    return dataclasses.replace(embedding, **changes), origins


def with_environment(config: ContextConfig, root: Path,
                     environ: Mapping[str, str] | None = None) -> ContextConfig:
    """``config`` with :func:`resolve_embedding` applied to its [embedding] section."""
    embedding, _ = resolve_embedding(config, root, environ)
    return config if embedding == config.embedding else \
        dataclasses.replace(config, embedding=embedding)


def default_api_key_variable(config: EmbeddingConfig) -> str | None:
    """The variable holding the API key: ``api_key_env``, else OPENAI_API_KEY for OpenAI's
    own API and OPENAI_COMPATIBLE_API_KEY for other OpenAI-compatible servers (an OpenAI key
    is never sent to a third-party server by default); None for Ollama."""
    if config.api_key_env:
        return config.api_key_env
    if config.backend != "openai":
        return None
    base = config.base_url or OPENAI_BASE_URL
    return "OPENAI_API_KEY" if "api.openai.com" in base else "OPENAI_COMPATIBLE_API_KEY"


def api_key(config: EmbeddingConfig, environ: Mapping[str, str] | None = None
            ) -> tuple[str | None, Origin | None]:
    """The API key of a remote backend and where it was found (environment first, then the
    project's .env), or (None, None)."""
    name = default_api_key_variable(config)
    if name is None:
        return None, None
    environ = os.environ if environ is None else environ
    dotenv = read_dotenv(Path(config.env_file)) if config.env_file else {}
    found = _Lookup(environ, dotenv).first((name,))
    return (found[0], found[1]) if found else (None, None)


@dataclass(frozen=True)
class SettingOrigin:
    """One [embedding] setting as validate-config shows it: secrets appear as set/not set."""

    key: str
    value: str
    origin: str


def describe_embedding(config: ContextConfig, root: Path,
                       environ: Mapping[str, str] | None = None) -> list[SettingOrigin]:
    """Every [embedding] setting that does not keep its default, with where it came from,
    and for a remote backend whether its API key is set (never the key itself)."""
    embedding, origins = resolve_embedding(config, root, environ)
    rows = [SettingOrigin(f"embedding.{key}", str(getattr(embedding, key)), str(origin))
            for key, origin in sorted(origins.items())]
    variable = default_api_key_variable(embedding)
    if variable is not None:
        key, origin = api_key(embedding, environ)
        rows.append(SettingOrigin(f"API key ${variable}", "set" if key else "not set",
                                  str(origin) if origin else "nowhere"))
    return rows
