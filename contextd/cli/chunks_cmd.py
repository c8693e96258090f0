"""``contextd chunks PATH``: how a file is chunked (kinds, labels, lines, token estimates)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click

from contextd.boundary.walk import SNIFF_BYTES, looks_binary
from contextd.chunkers.chunking import ChunkedFile, chunk_file
from contextd.cli.common import CliState, emit, pass_state
from contextd.errors import UsageError
from contextd.records import Chunk


@dataclass(frozen=True)
class ChunksResult:
    """What ``contextd chunks --json`` prints."""

    path: str
    language: str
    warnings: tuple[str, ...]
    chunks: list[Chunk]


def _human(result: ChunksResult) -> None:
    for warning in result.warnings:
        click.echo(f"contextd: warning: {warning}", err=True)
    click.echo(f"{result.path}: {result.language}, {len(result.chunks)} chunks")
    for chunk in result.chunks:
        lines = f"{chunk.start_line}-{chunk.end_line}"
        click.echo(f"{lines:>11}  {chunk.kind.value:<16} {chunk.tokens:>4} tok  {chunk.label}")


@click.command("chunks")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@pass_state
def chunks_command(state: CliState, path: str) -> None:
    """Show how PATH is chunked: one line per chunk with its lines, kind, tokens and label.

    \b
    Examples:
      contextd chunks src/app.py
      contextd chunks README.md --json
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    config = state.project().config
    binary = looks_binary(data[:SNIFF_BYTES], config.indexing.binary_threshold)
    if binary:  # the indexer skips such a file; cutting it would show noise
        raise UsageError(f"{path} is binary ({binary}); it is not indexed")
    chunked: ChunkedFile = chunk_file(path, data, config)
    result = ChunksResult(path, chunked.language, chunked.warnings, chunked.chunks)
    emit(state, result, _human)
