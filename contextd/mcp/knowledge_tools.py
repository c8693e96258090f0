"""The knowledge-base MCP tools: knowledge_context_create/list/show/delete, knowledge_add,
knowledge_remove, knowledge_search (some knowledge-base clients spell them with hyphens; ours
keep the underscore style of every other contextd tool, see docs/MCP.md).

Each is a thin layer over an Engine method (through the owner, like every tool); structured
answers are the same records ``contextd kb ... --json`` prints. Adds over MCP are limited to
``knowledge.allowed_roots`` (the project root by default).
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp_types import CallToolResult, TextContent
from pydantic import Field

from contextd.knowledge.records import (
    AddReport, ContextDeleted, ContextDetail, ContextInfo, ContextList, DocumentList,
    KnowledgeSearchResult, RemoveReport,
)
from contextd.records import ContextScope, to_dict
from contextd.mcp.render import listing
from contextd.mcp.render import default_budget
from contextd.mcp.tool_kinds import DELETE, READ, WRITE, tool

_CONTEXTS = ("Context names; each entry may also be comma-separated "
             "('aws-architecture,healthcare-compliance').")


def _answer(record: Any, text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=to_dict(record))


def _context_line(info: ContextInfo) -> str:
    default = " (default)" if info.is_default else ""
    about = f": {info.description}" if info.description else ""
    return (f"- {info.name}{default}: {info.documents} document(s), {info.chunks} chunk(s), "
            f"{info.size_bytes / 2**20:.2f} MB{about}")


class KnowledgeTools:
    """The tool functions; signatures and docstrings are the schemas and descriptions."""

    GROUP = "knowledge"  # the tool group (`serve --tools knowledge`)

    def __init__(self, handle):
        self.handle = handle

    @tool(WRITE)
    def knowledge_context_create(
        self,
        name: Annotated[str, Field(min_length=1, max_length=64, description=(
            "Context name: 1-64 letters, digits, '-' or '_'; unique ignoring case."))],
        description: Annotated[str, Field(max_length=2000, description=(
            "What the context holds."))] = "",
    ) -> Annotated[CallToolResult, ContextInfo]:
        """Create a named knowledge context (e.g. 'aws-architecture') to add documents to
        and search separately. 'default' always exists; reserved names are refused."""
        info = self.handle.get().knowledge_create_context(name, description)
        return _answer(info, f"Created context {info.name}.")

    @tool(READ)
    def knowledge_context_list(self) -> Annotated[CallToolResult, ContextList]:
        """List every knowledge context with its document and chunk counts, size and
        dates, sorted by name ('default' included)."""
        result = self.handle.get().knowledge_list_contexts()
        lines = [f"{len(result.contexts)} context(s):"] + [_context_line(c)
                                                            for c in result.contexts]
        return _answer(result, "\n".join(lines))

    @tool(READ)
    def knowledge_context_show(
        self,
        name: Annotated[str, Field(min_length=1, description="Context name.")],
    ) -> Annotated[CallToolResult, ContextDetail]:
        """Show one context: its figures, the embedding model, and every document in it
        (file, format, pages, chunks, the other contexts holding it)."""
        detail = self.handle.get().knowledge_show_context(name)
        lines = [_context_line(detail.context), f"Embedding model: {detail.embedding_model}"]
        for doc in detail.documents:
            pages = f", {doc.pages} pages" if doc.pages else ""
            lines.append(f"- {doc.document} ({doc.format}{pages}, {doc.chunks} chunks; "
                         f"contexts: {', '.join(doc.contexts)})")
        return _answer(detail, "\n".join(lines))

    @tool(DELETE)
    def knowledge_context_delete(
        self,
        name: Annotated[str, Field(min_length=1, description="Context to delete.")],
        confirm: Annotated[bool, Field(description=(
            "Must be true: the context and its document links are removed; documents in "
            "no other context leave the index (files on disk are never touched)."))],
    ) -> Annotated[CallToolResult, ContextDeleted]:
        """DESTRUCTIVE: delete a context (never 'default'). Documents that other contexts
        hold stay there. Requires confirm=true."""
        result = self.handle.get().knowledge_delete_context(name, confirm)
        return _answer(result, f"Deleted context {result.name}: {result.documents_unlinked} "
                               f"link(s) removed, {len(result.documents_deleted)} document(s) "
                               "deleted from the index.")

    @tool(WRITE)
    def knowledge_add(
        self,
        paths: Annotated[list[str], Field(min_length=1, max_length=1000, description=(
            "Files or folders (recursive) to add, absolute or relative to the project root; "
            "only under the allowed roots (the project root unless configured)."))],
        contexts: Annotated[list[str] | None, Field(description=(
            _CONTEXTS + " Omitted: 'default'."))] = None,
        include: Annotated[list[str] | None, Field(description=(
            "Only files of folders matching one of these globs, e.g. ['*.pdf']."))] = None,
        exclude: Annotated[list[str] | None, Field(description=(
            "Leave out files matching these globs."))] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description=(
            "Kept with every document added (e.g. {'team': 'payments', 'version': '2'}); "
            "knowledge_search hits carry it as document_metadata."))] = None,
        force_ocr: Annotated[bool, Field(description=(
            "Read PDFs by OCR (offline) even where they have a text layer; pages without "
            "one (scans) are always read by OCR."))] = False,
    ) -> Annotated[CallToolResult, AddReport]:
        """Add documents (PDF, DOCX, HTML, Markdown, text, reST, code) to one or several
        contexts. A document is stored once whatever the number of contexts; re-adding an
        unchanged file costs nothing, a changed one is re-read. Scanned PDF pages are read
        by OCR. Files that cannot be read (corrupt or encrypted PDF, unknown format) are
        listed with the reason while the others are added."""
        engine = self.handle.get()
        root = engine.project.root
        absolute = [p if p.startswith("/") else str(root / p) for p in paths]
        report = engine.knowledge_add(absolute, contexts or None, include or [],
                                      exclude or [], via_mcp=True, metadata=metadata,
                                      force_ocr=force_ocr)
        lines = [f"{report.added} added, {report.updated} updated, {report.unchanged} "
                 f"unchanged, {report.failed} failed in {', '.join(report.contexts)}."]
        lines += [f"- {d.document}: {d.status}" + (f" ({d.reason})" if d.reason else "")
                  for d in report.documents if d.status != "skipped"]
        return _answer(report, "\n".join(lines))

    @tool(DELETE)
    def knowledge_remove(
        self,
        paths: Annotated[list[str], Field(min_length=1, max_length=1000, description=(
            "Documents to remove, by the file or folder they were added from."))],
        contexts: Annotated[list[str] | None, Field(description=(
            _CONTEXTS + " Omitted: every context (the documents leave the index)."))] = None,
    ) -> Annotated[CallToolResult, RemoveReport]:
        """Take documents out of contexts. A document left in no context is deleted from
        the index; the files themselves are never touched."""
        engine = self.handle.get()
        root = engine.project.root
        absolute = [p if p.startswith(("/", "kb://")) else str(root / p) for p in paths]
        report = engine.knowledge_remove(absolute, contexts or None)
        return _answer(report, f"Removed {len(report.documents)} document(s) from "
                               f"{', '.join(report.contexts) or 'every context'}; "
                               f"{len(report.documents_deleted)} deleted from the index.")

    @tool(READ)
    def knowledge_search(
        self,
        query: Annotated[str, Field(min_length=1, max_length=2000, description=(
            "What you are looking for, in natural language."))],
        contexts: Annotated[list[str] | None, Field(description=(
            _CONTEXTS + " Omitted: every context."))] = None,
        k: Annotated[int, Field(ge=1, description=(
            "Most hits to return (at most [query] max_k of context.toml, usually 50)."))] = 10,
        include_project: Annotated[bool, Field(description=(
            "Also search this project's own files, ranked together with the documents."))]
        = False,
        files: Annotated[list[str] | None, Field(description=(
            "Only these documents/files (exact paths)."))] = None,
        folders: Annotated[list[str] | None, Field(description=(
            "Only under these folders: 'hooks' = any folder of that name, '/src/hooks' = "
            "from the project root, 'src/*/hooks' = a glob."))] = None,
        max_tokens: Annotated[int | None, Field(ge=50, description=(
            "Token budget of all snippets together (at most [query] max_budget_tokens, "
            "usually 6000)."))] = None,
        min_relevance: Annotated[float | None, Field(ge=0.0, le=1.0, description=(
            "Drop hits scoring below this (0-1; scores mean the same across queries)."))]
        = None,
    ) -> Annotated[CallToolResult, KnowledgeSearchResult]:
        """Search the knowledge base: one context, several, or all (the default), with the
        project's files too when include_project=true. Each hit names its document, the
        contexts holding it, its page (PDFs) and lines."""
        from contextd.knowledge.scope import knowledge_request, search_result

        engine = self.handle.get()
        budget = max_tokens or default_budget(engine.project.config)
        request = knowledge_request(query, contexts or [], k, include_project, budget,
                                    ContextScope(files=tuple(files or ()),
                                                 folders=tuple(folders or ())), task_id="mcp",
                                    min_relevance=min_relevance)
        result = search_result(request, engine.query(request))
        return _answer(result, search_text(result))


    @tool(READ)
    def knowledge_show(
        self,
        context: Annotated[str | None, Field(min_length=1, description=(
            "Only the documents of this context; omitted: every document of every "
            "context."))] = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="Most documents listed.")]
        = 100,
        offset: Annotated[int, Field(ge=0, description="Skip this many.")] = 0,
    ) -> Annotated[CallToolResult, DocumentList]:
        """List knowledge documents across all contexts (or of one): file, format, pages,
        chunks, the contexts holding each, and the metadata it was added with."""
        result = self.handle.get().knowledge_list_documents(context, limit, offset)
        lines = [f"{result.total} document(s)" + (f" in {context}" if context else "")]
        lines += [f"- {d.document} ({d.format}, {d.chunks} chunks; contexts: "
                  f"{', '.join(d.contexts)})" + (f" {d.metadata}" if d.metadata else "")
                  for d in result.documents]
        return _answer(result, "\n".join(lines))


def search_text(result: KnowledgeSearchResult) -> str:
    """The hits as a readable list: document, page, lines, contexts, then the snippet."""
    entries = []
    for hit in result.hits:
        page = f" page {hit.page}" if hit.page else ""
        where = f" [{', '.join(hit.contexts)}]" if hit.contexts else " [project]"
        entries.append((f"{hit.document}{page} lines {hit.start_line}-{hit.end_line}{where} "
                        f"(score {hit.score:.2f})", hit.snippet, ""))
    return listing(f"{len(result.hits)} result(s) for {result.query!r} "
                   f"({result.total_tokens} tokens).", result.notes,
                   "Nothing matched: try other words or other contexts "
                   "(knowledge_context_list shows what each holds).", entries)
