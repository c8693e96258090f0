"""The MCP tools and resources of search sessions and reports (docs/MCP.md).

Tools: search_knowledge, get_search_results, list_search_results (through the Engine, so
every process of the project sees the same sessions), get_template_schema and
create_rag_report (in this process: they need the project's files and configuration, not the
database). Parameter names are snake_case, as the clients of these tools expect.

Resources: ``template://current/schema`` (the workspace default) and
``template://{name}/schema`` for every template. resources/list is computed at each call and
every read goes back to the files, so a template added to ``reports.templates_dir`` or a new
``reports.default_template`` shows at once. The configuration is read again for each report
and resource for the same reason (it is a small TOML file).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Callable

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp_types import CallToolResult, Resource as MCPResource, TextContent
from pydantic import BaseModel, ConfigDict, Field

from contextd.errors import ContextdError
from contextd.records import to_dict
from contextd.mcp.engine_handle import EngineHandle
from contextd.sessions.records import (
    ReportResult, SearchRequest, SearchResults, SearchSession, SessionHit, SessionList,
)
from contextd.mcp.tool_kinds import APPEND, READ, tool

SCHEMA_MIME = "application/json"
RESOURCE_URI = "template://{name}/schema"


class KnowledgeScope(BaseModel):
    """Seed 002's search scope; empty lists mean no restriction."""

    model_config = ConfigDict(extra="forbid")

    files: list[str] = Field(default_factory=list, description=(
        "Exact files, relative to the project root, e.g. ['src/auth/jwt.py']."))
    folders: list[str] = Field(default_factory=list, description=(
        "Folders: a bare name is any folder of that name ('hooks' matches src/hooks/ and "
        "lib/hooks/), a leading slash starts at the root ('/src/hooks'), a glob is used as "
        "it is ('src/*/hooks'). With files too, a file must also lie in one of the folders."))


def _answer(record: Any, text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=to_dict(record))


class SessionTools:
    """The tool functions; signatures and docstrings are the tools' schemas and
    descriptions, written for the agent that calls them."""

    GROUP = "reports"  # the tool group (`serve --tools reports`)

    def __init__(self, handle: EngineHandle):
        self.handle = handle

    def project(self):
        """The project with its configuration as it is now on disk."""
        from contextd.config.project import Project

        return Project.open(self.handle.root, self.handle.config_path)

    @tool(APPEND)
    def search_knowledge(
        self,
        query: Annotated[str, Field(min_length=1, max_length=2000, description=(
            "What to research, in natural language or code terms."))],
        min_similarity: Annotated[float | None, Field(ge=0.0, le=1.0, description=(
            "Keep only results scoring at least this (0-1, the fused relevance score; "
            "default from sessions.min_similarity, 0)."))] = None,
        scope: Annotated[KnowledgeScope | None, Field(description=(
            "Limit the search to files and/or folders."))] = None,
        contexts: Annotated[list[str] | None, Field(description=(
            "Knowledge contexts to search as well as the project index."))] = None,
    ) -> Annotated[CallToolResult, SearchSession]:
        """Search the project and keep the results in a session, answering with a preview.

        Use it to research a question in steps: the best 20 results are kept under a
        session_id (search_ + 8 characters); the answer shows the top 5 shortened. Read the
        full text of the results with get_search_results (one session or several at
        once), then write a cited report with create_rag_report. Sessions are shared by
        every contextd process of the project, keep the last few (list_search_results) and
        expire after a day by default.
        """
        scope = scope or KnowledgeScope()
        request = SearchRequest(query=query, min_similarity=min_similarity,
                                files=tuple(scope.files), folders=tuple(scope.folders),
                                contexts=tuple(contexts or ()))
        session = self.handle.get().search_knowledge(request)
        return _answer(session, search_text(session))

    @tool(READ)
    def get_search_results(
        self,
        session_id: Annotated[str | None, Field(description=(
            "One session id from search_knowledge."))] = None,
        session_ids: Annotated[list[str] | None, Field(max_length=20, description=(
            "Several session ids, read together (results grouped by session)."))] = None,
        limit: Annotated[int | None, Field(ge=1, le=100, description=(
            "Results per session (default 5, from sessions.default_limit)."))] = None,
    ) -> Annotated[CallToolResult, SearchResults]:
        """Get the full results of one or several search sessions.

        Each result has its file (relative path), start_line and end_line (pages for
        documents), a file:// URI, label, kind, score and full text, which is what a report
        cites. Give session_id, or session_ids to combine sessions. An unknown or expired
        id is an error that lists the current sessions.
        """
        ids = ([session_id] if session_id else []) + list(session_ids or [])
        results = self.handle.get().get_search_results(ids, limit)
        return _answer(results, results_text(results))

    @tool(READ)
    def list_search_results(self) -> Annotated[CallToolResult, SessionList]:
        """List the live search sessions, newest first: session_id, query, created_at,
        expires_at and result_count of each."""
        listing = self.handle.get().list_search_results()
        lines = [f"{len(listing.sessions)} session(s) (the last {listing.max_sessions} are "
                 "kept):"]
        lines += [f"- {s.session_id}  {s.created_at}  {s.result_count} results  {s.query!r}"
                  for s in listing.sessions]
        return _answer(listing, "\n".join(lines))

    @tool(READ)
    def get_template_schema(
        self,
        template: Annotated[str | None, Field(description=(
            "Template name: basic, paper, bullet_points or one of the project's own; "
            "omit for the workspace default."))] = None,
    ) -> dict[str, Any]:
        """Describe a report template: its variables (type, required, description), the
        variables filled in automatically, what each citation gains, and an example of the
        variables to pass to create_rag_report. Also lists every template available."""
        from contextd.sessions.templates import TemplateCatalog

        catalog = TemplateCatalog(self.project())
        return {**catalog.schema(template), "available": list(catalog.templates())}

    @tool(APPEND)
    def create_rag_report(
        self,
        variables: Annotated[dict[str, Any], Field(description=(
            "The template's variables (get_template_schema). Citations are objects with "
            "'file' (relative path), 'start_line', 'end_line' (or 'pages'), inside an array "
            "such as 'sections'; each is checked against the file and linked to it."))],
        template: Annotated[str | None, Field(description=(
            "Template name; omit for the workspace default (recommended)."))] = None,
        output_dir: Annotated[str | None, Field(description=(
            "Folder under the project root (or the configured reports folder); default "
            "reports.output_dir, 'rag-reports'."))] = None,
        file_name: Annotated[str | None, Field(max_length=200, description=(
            "Name of the file; the timestamp is added in front and '.md' at the end."))]
        = None,
        ascii_filename: Annotated[str | None, Field(max_length=200, description=(
            "A descriptive English (ASCII) name, used when file_name is not given; useful "
            "when the query is not in English."))] = None,
        overwrite: Annotated[bool, Field(description=(
            "Replace a report of the same file name."))] = False,
    ) -> Annotated[CallToolResult, ReportResult]:
        """Write a Markdown report from a template, with every citation linked to its file
        and lines: writes YYYYMMDD_HHMMSS_<name>.md and answers with its path and preview.

        Research first (search_knowledge, get_search_results), then pass what you found as
        the template's variables. Missing variables are listed together; a citation whose
        lines do not exist is refused; a quote found elsewhere in the file moves the
        citation there (with a warning); a citation without a quote quotes the file.
        """
        from contextd.sessions.reports import create_report
        from contextd.sessions.records import ReportRequest

        result = create_report(self.project(), ReportRequest(
            variables=variables, template=template, output_dir=output_dir,
            file_name=file_name, ascii_filename=ascii_filename, overwrite=overwrite))
        text = [f"Report written: {result.path} (template {result.template}, "
                f"{result.citations} citation(s))"]
        text += [f"Warning: {w}" for w in result.warnings]
        return _answer(result, "\n".join(text + ["", result.preview]))


# ----- readable texts ------------------------------------------------------------------
def _hit_text(hit: SessionHit) -> list[str]:
    label = f" {hit.label}" if hit.label else ""
    fence = "````" if "```" in hit.text else "```"
    return [f"\n## {hit.rank}. {hit.location()}{label} ({hit.kind}, score {hit.score:.2f})",
            hit.file_uri, f"{fence}{hit.language}\n{hit.text.rstrip()}\n{fence}"]


def search_text(session: SearchSession) -> str:
    """search_knowledge's answer for people and agents: the id first, then the preview."""
    info = session.session
    lines = [f"Session {info.session_id}: {info.result_count} result(s) for {info.query!r} "
             f"(expires {info.expires_at or 'never'}). Full text: get_search_results with "
             f"session_id={info.session_id}."]
    lines += [f"Note: {note}" for note in session.notes]
    for hit in session.preview:
        lines += _hit_text(hit)
    return "\n".join(lines)


def results_text(results: SearchResults) -> str:
    """get_search_results' answer: a header per session, then its results."""
    lines: list[str] = []
    for info in results.sessions:
        hits = [h for h in results.results if h.session_id == info.session_id]
        lines.append(f"# {info.session_id}: {info.query!r} ({len(hits)} of "
                     f"{info.result_count} results)")
        for hit in hits:
            lines += _hit_text(hit)
    lines += [f"Note: {note}" for note in results.notes]
    return "\n".join(lines)


class TemplateResources:
    """``template://current/schema`` and ``template://{name}/schema``, from the files as
    they are at each call."""

    def __init__(self, tools: SessionTools):
        self.tools = tools

    def read(self, name: str) -> str:
        from contextd.sessions.templates import TemplateCatalog

        try:
            return json.dumps(TemplateCatalog(self.tools.project()).schema(name), indent=2,
                              ensure_ascii=False)
        except ContextdError as exc:
            raise ResourceError(str(exc)) from None

    def listing(self) -> list[MCPResource]:
        from contextd.sessions.templates import CURRENT, TemplateCatalog

        try:
            catalog = TemplateCatalog(self.tools.project())
            templates = catalog.templates()
            default = catalog.config.default_template
        except ContextdError:
            return []  # a broken configuration: reading a resource says what is wrong
        entries = [(CURRENT, f"Schema of the workspace default template ({default})")]
        entries += [(name, f"Schema of the {info.origin} report template {name!r}")
                    for name, info in templates.items()]
        return [MCPResource(uri=RESOURCE_URI.format(name=name), name=f"template-{name}",
                            title=f"{name} template schema", description=description,
                            mime_type=SCHEMA_MIME) for name, description in entries]


class ListingServer(MCPServer):
    """An MCPServer whose resources/list adds resources computed at each call: the SDK
    lists only resources registered up front, which would miss a template added later."""

    def __init__(self, *args: Any, listers: tuple[Callable[[], list[MCPResource]], ...] = (),
                 **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._listers = listers

    async def list_resources(self) -> list[MCPResource]:
        listed = await super().list_resources()
        return listed + [resource for lister in self._listers for resource in lister()]


def template_resources(handle: EngineHandle) -> TemplateResources:
    """The template schema resources of the project behind ``handle``."""
    return TemplateResources(SessionTools(handle))


def register_resources(app: MCPServer, resources: TemplateResources) -> None:
    """Serve every template schema read through one resource template; the listing comes
    from ``resources.listing`` (pass it to :class:`ListingServer`)."""
    app.resource(RESOURCE_URI, name="template-schema", title="Report template schema",
                 description="The variables, descriptions and example of a report template "
                             "('current' is the workspace default).",
                 mime_type=SCHEMA_MIME)(resources.read)
