"""``contextd kb``: the knowledge base (named contexts of documents) from the command line.

Every subcommand goes through the project's owner process like ``contextd query`` (an MCP
server or watcher running on the project answers it), prints a readable result or, with
``--json``, the same record the MCP tools and the Python API return.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

import click

from contextd.cli.common import CliState, emit, open_engine, pass_state, shown

# Lines of each hit's snippet shown in the readable search listing.
PREVIEW_LINES = 3


def _run(state: CliState, call: Callable[[Any], Any], human: Callable[[Any], None]) -> Any:
    """Call the engine, print the result, close the engine."""
    engine = open_engine(state)
    try:
        result = call(engine)
    finally:
        engine.close()
    emit(state, result, human)
    return result


_context_option = click.option("--context", "-c", "contexts", multiple=True, help=(
    "Context name (repeatable, or comma-separated)."))


@click.group("kb")
def kb_group() -> None:
    """Knowledge base: named contexts of documents (PDF, DOCX, HTML, Markdown, text, reST,
    code) searched alone or together with the project.

    \b
    Examples:
      contextd kb create payments-rfc --description "Payments RFCs"
      contextd kb add docs/rfc-12.pdf docs/design/ --context payments-rfc
      contextd kb search "idempotency keys" --context payments-rfc
      contextd kb search "retry policy" --with-project
      contextd kb list
    """


def _print_context(info: Any) -> None:
    mark = " (default)" if info.is_default else ""
    click.echo(f"{info.name:<24} {info.documents:>5} docs {info.chunks:>7} chunks "
               f"{info.size_bytes / 2**20:>8.2f} MB  updated {info.updated_at[:19]}{mark}")
    if info.description:
        click.echo(f"  {info.description}")


@kb_group.command("create")
@click.argument("name")
@click.option("--description", "-d", default="", help="What the context holds.")
@pass_state
def create_cmd(state: CliState, name: str, description: str) -> None:
    """Create the context NAME (letters, digits, '-' and '_'; case-insensitive)."""
    _run(state, lambda e: e.knowledge_create_context(name, description),
         lambda info: click.echo(f"created context {info.name}"))


@kb_group.command("list")
@pass_state
def list_cmd(state: CliState) -> None:
    """List every context with its documents, chunks and size."""
    def human(result: Any) -> None:
        for info in result.contexts:
            _print_context(info)
    _run(state, lambda e: e.knowledge_list_contexts(), human)


@kb_group.command("show")
@click.argument("name")
@pass_state
def show_cmd(state: CliState, name: str) -> None:
    """Show the context NAME and its documents."""
    def human(detail: Any) -> None:
        _print_context(detail.context)
        click.echo(f"embedding model: {detail.embedding_model}")
        for doc in detail.documents:
            pages = f", {doc.pages} pages" if doc.pages else ""
            others = [c for c in doc.contexts if c != detail.context.name.lower()]
            also = f"  (also in {', '.join(others)})" if others else ""
            click.echo(f"  {shown(doc.document)}  [{doc.format}{pages}, {doc.chunks} chunks]{also}")
    _run(state, lambda e: e.knowledge_show_context(name), human)


@kb_group.command("delete")
@click.argument("name")
@click.option("--yes", "confirm", is_flag=True, help="Confirm the deletion.")
@pass_state
def delete_cmd(state: CliState, name: str, confirm: bool) -> None:
    """Delete the context NAME (never 'default'); documents no other context holds leave
    the index (files on disk are not touched). Needs --yes."""
    def human(result: Any) -> None:
        click.echo(f"deleted context {result.name}: {result.documents_unlinked} document "
                   f"link(s) removed, {len(result.documents_deleted)} document(s) deleted")
    _run(state, lambda e: e.knowledge_delete_context(name, confirm), human)


@kb_group.command("add")
@click.argument("paths", nargs=-1, required=True)
@_context_option
@click.option("--include", multiple=True, help="Only files of folders matching this glob "
              "(repeatable), e.g. '*.pdf'.")
@click.option("--exclude", multiple=True, help="Leave out files matching this glob "
              "(repeatable).")
@click.option("--metadata", "metadata_pairs", multiple=True, metavar="KEY=VALUE",
              help="Kept with each document added; search hits carry it (repeatable).")
@click.option("--force-ocr", is_flag=True, help="Read PDFs by OCR even where they have a "
              "text layer (scanned pages are always read by OCR).")
@pass_state
def add_cmd(state: CliState, paths: tuple[str, ...], contexts: tuple[str, ...],
            include: tuple[str, ...], exclude: tuple[str, ...],
            metadata_pairs: tuple[str, ...], force_ocr: bool) -> None:
    """Add files or folders (recursively) to contexts ('default' when none is named).
    Exit code 1 when a file could not be added (each is named with its reason)."""
    metadata = {}
    for pair in metadata_pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.UsageError(f"--metadata {pair!r}: write KEY=VALUE")
        metadata[key.strip()] = value
    def human(report: Any) -> None:
        for doc in report.documents:
            if doc.status == "failed":
                click.echo(f"contextd: {shown(doc.document)}: {doc.reason}", err=True)
            elif doc.status == "skipped":
                if state.verbose:
                    click.echo(f"contextd: skipped {shown(doc.document)}: {doc.reason}", err=True)
            else:
                pages = f", {doc.pages} pages" if doc.pages else ""
                held = ", already indexed" if doc.status == "unchanged" else ""
                click.echo(f"{doc.status:<9} {shown(doc.document)}  [{doc.format}{pages}, "
                           f"{doc.chunks} chunks{held}]")
        names = " (-v names them)" if report.skipped and not state.verbose else ""
        click.echo(f"{report.added} added, {report.updated} updated, {report.unchanged} "
                   f"unchanged, {report.failed} failed, {report.skipped} skipped{names} in "
                   f"{', '.join(report.contexts)} ({report.chunks_embedded} chunks embedded, "
                   f"{report.elapsed_ms / 1000:.1f} s)")
    report = _run(state, lambda e: e.knowledge_add(
        list(paths), list(contexts) or None, list(include), list(exclude),
        metadata=metadata or None, force_ocr=force_ocr), human)
    if report.failed:
        sys.exit(1)


@kb_group.command("remove")
@click.argument("paths", nargs=-1, required=True)
@_context_option
@pass_state
def remove_cmd(state: CliState, paths: tuple[str, ...], contexts: tuple[str, ...]) -> None:
    """Take documents (named by their file or folder) out of contexts (all when none is
    named); a document left in no context leaves the index."""
    def human(report: Any) -> None:
        where = ", ".join(report.contexts) or "every context"
        click.echo(f"removed {len(report.documents)} document(s) from {where} "
                   f"({report.links_removed} link(s)); {len(report.documents_deleted)} "
                   "deleted from the index")
    _run(state, lambda e: e.knowledge_remove(list(paths),
                                                      list(contexts) or None), human)


@kb_group.command("search")
@click.argument("query")
@_context_option
@click.option("--k", "k", type=click.IntRange(min=1), help="Results wanted.")
@click.option("--with-project", "include_project", is_flag=True,
              help="Search the project's own files too.")
@click.option("--budget", type=click.IntRange(min=1), help="Token budget of all snippets.")
@click.option("--folder", "folders", multiple=True, help="Only documents in this folder: a "
              "name anywhere, /path from the project root, or a glob (repeatable).")
@click.option("--file", "files", multiple=True, help="Only this document (exact path, "
              "repeatable).")
@click.option("--min-relevance", type=click.FloatRange(0.0, 1.0),
              help="Drop hits scoring below this (0-1).")
@pass_state
def search_cmd(state: CliState, query: str, contexts: tuple[str, ...], k: int | None,
               include_project: bool, budget: int | None, folders: tuple[str, ...],
               files: tuple[str, ...], min_relevance: float | None) -> None:
    """Search knowledge contexts (all when none is named) for QUERY."""
    from contextd.knowledge.hits import preview
    from contextd.knowledge.scope import knowledge_request, search_result
    from contextd.records import ContextScope

    request = knowledge_request(query, list(contexts), k, include_project, budget,
                                ContextScope(files=files, folders=folders), task_id="cli",
                                wait_for_model=True, min_relevance=min_relevance)

    def call(engine: Any) -> Any:
        if include_project:
            engine.ensure_indexed()
        return search_result(request, engine.query(request))

    def human(result: Any) -> None:
        for number, hit in enumerate(result.hits, start=1):
            page = f" p.{hit.page}" if hit.page else ""
            where = f"[{', '.join(hit.contexts)}]" if hit.contexts else "[project]"
            click.echo(f"{number:>2}. {hit.score:.3f}  {shown(hit.document)}{page}  lines "
                       f"{hit.start_line}-{hit.end_line}  {where}  {hit.label}")
            for line in preview(hit.snippet, hit.start_line, hit.metadata, PREVIEW_LINES,
                                query):
                click.echo(f"      {line}")
        click.echo(f"{len(result.hits)} of {result.total} found, {result.total_tokens} tokens")
        for note in result.notes:
            click.echo(f"contextd: {note}", err=True)
    _run(state, call, human)


@kb_group.command("docs")
@click.option("--context", "context", help="Only this context's documents (default: all "
              "contexts).")
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True,
              help="Most documents listed.")
@pass_state
def docs_cmd(state: CliState, context: str | None, limit: int) -> None:
    """List knowledge documents across every context (or of one), with the contexts
    holding each and the metadata it was added with."""
    def human(result: Any) -> None:
        for doc in result.documents:
            pages = f", {doc.pages} pages" if doc.pages else ""
            meta = f"  {doc.metadata}" if doc.metadata else ""
            click.echo(f"{shown(doc.document)}  [{doc.format}{pages}, {doc.chunks} chunks]  "
                       f"contexts: {', '.join(doc.contexts)}{meta}")
        click.echo(f"{len(result.documents)} of {result.total} document(s)", err=True)
    _run(state, lambda e: e.knowledge_list_documents(context, limit), human)
