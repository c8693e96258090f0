"""``contextd chunks PATH``: how a file is chunked (kinds, labels, lines, token estimates)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click

from contextd.boundary.walk import SNIFF_BYTES, Boundary, RejectReason, looks_binary
from contextd.chunkers.chunking import ChunkedFile, chunk_file
from contextd.cli.common import CliState, emit, pass_state, user_path
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
@click.argument("path")
@pass_state
def chunks_command(state: CliState, path: str) -> None:
    """Show how PATH is chunked: one line per chunk with its lines, kind, tokens and label.
    A file the index leaves out (check-file says why) is refused; a file outside the project
    is chunked as it would be inside, with a warning.

    \b
    Examples:
      contextd chunks src/app.py
      contextd chunks README.md --json
    """
    project = state.project()
    absolute = user_path(path, project.root)
    if not Path(absolute).is_file():
        raise UsageError(f"{path}: no such file ({absolute})")
    decision = Boundary(project).check(absolute)
    warnings: tuple[str, ...] = ()
    if decision.reason is RejectReason.OUTSIDE_BOUNDARY:
        warnings = (f"{path} is outside the project root {project.root}; shown as it would "
                    "be chunked inside it",)
    elif not decision.indexable:
        raise UsageError(f"{path} is not indexed: {decision.reason.value} ({decision.detail}); "
                         "contextd check-file says the same")
    try:
        data = Path(absolute).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    config = project.config
    binary = looks_binary(data[:SNIFF_BYTES], config.indexing.binary_threshold)
    if binary:  # the indexer skips such a file; cutting it would show noise
        raise UsageError(f"{path} is binary ({binary}); it is not indexed")
    chunked: ChunkedFile = chunk_file(path, data, config)
    result = ChunksResult(path, chunked.language, warnings + tuple(chunked.warnings),
                          chunked.chunks)
    emit(state, result, _human)
