"""``contextd embedders``: which embedding backends exist, preparing one ahead of time, and
probing the configured one.

``prepare`` exists so the one-off ONNX build (the graph written from the bundled weights, then
quantised: seconds, no torch) can run at install or CI time instead of inside the first query. ``probe`` embeds one text with the
configured backend and says what came back, so a wrong key, an unknown model or a wrong
dimension of a remote server shows up as one line before any indexing.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import click

from contextd.cli.common import CliState, emit, pass_state
from contextd.errors import ContextdError


@dataclass(frozen=True)
class EmbedderInfo:
    """One registered backend as the current configuration would build it."""

    backend: str
    plugin: str
    configured: bool
    identity: str | None
    prepared: bool | None
    path: str | None
    error: str | None
    # What a person reads: prepared / not prepared (a local model); for a remote server,
    # whether the project is set up to use it.
    status: str = ""


@dataclass(frozen=True)
class PrepareResult:
    """What ``prepare`` did: ``seconds`` is 0-ish when the cache already held the model."""

    identity: str
    path: str | None
    was_prepared: bool
    seconds: float


def _describe(name: str, factory, plugin: str, config) -> EmbedderInfo:
    from contextd.embedders.remote.embedder import RemoteEmbedder

    configured = name == config.backend
    try:
        embedder = factory(dataclasses.replace(config, backend=name))
    except ContextdError as exc:
        return EmbedderInfo(name, plugin, configured, None, None, None, str(exc),
                            "unavailable")
    path = getattr(embedder, "model_path", None)
    prepared = getattr(embedder, "prepared", None)
    if isinstance(embedder, RemoteEmbedder):
        # Nothing to prepare: the server holds the model. The [embedding] settings name a
        # server and model only for the configured backend.
        prepared = None
        status = (_remote_status(embedder, config) if configured else
                  f"remote, not set up (set [embedding] backend = \"{name}\", model and "
                  "base_url)")
        if not configured:
            return EmbedderInfo(name, plugin, False, None, None, None, None, status)
    else:
        status = "prepared" if prepared else "not prepared"
    return EmbedderInfo(name, plugin, configured, embedder.identity, prepared,
                        str(path) if path else None, None, status)


def _remote_status(embedder, config) -> str:
    """``remote, API key from OPENAI_API_KEY`` or what is missing."""
    from contextd.config.env import default_api_key_variable

    variable = default_api_key_variable(config)
    if variable is None:
        return "remote (no API key needed)"
    return (f"remote, API key from {variable}" if embedder.client.has_key
            else f"remote, API key missing: set {variable}")


@click.group("embedders")
def embedders_group() -> None:
    """Embedding backends: list them, prepare (export/quantise) one ahead of first use."""


@embedders_group.command("list")
@pass_state
def list_command(state: CliState) -> None:
    """List registered backends with the identity, readiness and model file each would use
    under the project's [embedding] settings."""
    from contextd.embedders.registry import embedder_factories

    config = state.project().config.embedding
    rows = [_describe(name, factory, plugin, config)
            for name, (factory, plugin) in sorted(embedder_factories().items())]

    def human(items: list[EmbedderInfo]) -> None:
        for row in items:
            mark = "*" if row.configured else " "
            if row.error:
                click.echo(f"{mark} {row.backend:<8} unavailable: {row.error}")
                continue
            where = f"  {row.path}" if row.path else ""
            click.echo(f"{mark} {row.backend:<8} {row.identity or '-'}  [{row.status}]{where}")

    emit(state, rows, human)


@embedders_group.command("prepare")
@click.option("--backend", help="Backend to prepare (default: [embedding] backend).")
@click.option("--quantize", type=click.Choice(["int8", "none"]),
              help="Quantisation to prepare (default: [embedding] quantize).")
@click.option("--force", is_flag=True, help="Build again even if the cache holds the model.")
@pass_state
def prepare_command(state: CliState, backend: str | None, quantize: str | None,
                    force: bool) -> None:
    """Build (and quantise) the configured model's ONNX file into the user cache now, and say
    how long it took; later processes only load it."""
    from contextd.embedders.registry import get_embedder

    config = state.project().config.embedding
    overrides = {k: v for k, v in (("backend", backend), ("quantize", quantize)) if v}
    embedder = get_embedder(dataclasses.replace(config, **overrides))
    was_prepared = bool(getattr(embedder, "prepared", False)) and not force
    started = time.perf_counter()
    prepare = getattr(embedder, "prepare", None)
    path = prepare(force=force) if prepare else None
    result = PrepareResult(embedder.identity, str(path) if path else None, was_prepared,
                           round(time.perf_counter() - started, 3))

    def human(r: PrepareResult) -> None:
        verb = "already prepared" if r.was_prepared else "prepared"
        click.echo(f"{r.identity}: {verb} in {r.seconds:.2f} s: {r.path}")

    emit(state, result, human)


@dataclass(frozen=True)
class ProbeResult:
    """One probe text embedded by the configured backend."""

    identity: str
    dimension: int
    seconds: float
    query_backend: str


@embedders_group.command("probe")
@pass_state
def probe_command(state: CliState) -> None:
    """Embed one text with the configured backend (a remote server: one request) and print
    the identity, dimension, time taken and which backend embeds queries. Exit 1 with one
    line when the server refuses (key, model, dimension) or cannot be reached."""
    from contextd.embedders.registry import embedding_stats, get_embedder

    config = state.project().config.embedding
    embedder = get_embedder(config)
    started = time.perf_counter()
    vector = embedder.embed_query("contextd probe: where is the configuration validated?")
    result = ProbeResult(embedder.identity, int(vector.shape[0]),
                         round(time.perf_counter() - started, 3),
                         str(embedding_stats(config).get("query_backend")))

    def human(r: ProbeResult) -> None:
        click.echo(f"{r.identity}: {r.dimension} dimensions in {r.seconds * 1000:.0f} ms; "
                   f"queries: {r.query_backend}")

    emit(state, result, human)
