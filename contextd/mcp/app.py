"""The MCP tools of contextd (docs/MCP_TOOLS.md), on the SDK's :class:`MCPServer`.

Each tool is a thin layer over one Engine method: validate the arguments (the JSON Schema
comes from the typed signature and :mod:`contextd.mcp.schemas`), call the Engine in a
worker thread, and answer with structured content plus a readable text. Expected failures
(:class:`contextd.errors.ContextdError`) become tool errors whose text says what to do.
Importing this module must stay cheap: nothing here touches DuckDB or the model.
"""

from __future__ import annotations

import importlib.metadata
import functools
import inspect
import logging
import queue
import threading
from typing import Annotated, Any, Callable, Iterable

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from contextd.errors import ContextdError, JobConflictError
from contextd.boundary.path_args import RefusedPath, refusal_text
from contextd.mcp import render
from contextd.mcp.contextual_tools import ContextualTools
from contextd.mcp.knowledge_tools import KnowledgeTools
from contextd.mcp.admin_tools import AdminTools
from contextd.mcp.engine_handle import EngineHandle, start_after_handshake
from contextd.mcp.manager_tools import ManagerTools
from contextd.mcp.schemas import (
    Filters, JobStatusResult, QueryResult, RebuildOptions,
    RebuildResult, RefreshResult, Scope, StatsResult,
)
from contextd.mcp.stash_tools import StashTools
from contextd.records import to_dict
from contextd.mcp.offer import CORE, instructions, mcp_config, offered_groups
from contextd.mcp.tool_kinds import DELETE, READ, WRITE, DeclaredTool, tool, tools_of

log = logging.getLogger("contextd.mcp")

def _tool_errors(function: Callable) -> Callable:
    """Turn expected failures into tool errors that tell the agent what to fix."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except ContextdError as exc:
            raise ToolError(str(exc)) from None

    return wrapper


def _answer(model: BaseModel, text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=model.model_dump(mode="json", by_alias=True))


class ContextdTool(Tool):
    """A tool whose invalid arguments are answered in a sentence an agent can act on: which
    parameter, what is wrong, what it got. The SDK's own answer is pydantic's report, with
    the argument model's class name and a link to pydantic's web site for each error."""

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False
                  ) -> Any:
        try:
            self.fn_metadata.validate_arguments(arguments)
        except ValidationError as exc:
            raise ToolError(f"invalid arguments for {self.name}: "
                            f"{argument_problems(exc, self.parameters)}") from None
        return await super().run(arguments, context, convert_result)


def argument_problems(exc: ValidationError, schema: dict[str, Any]) -> str:
    """``confirm: missing (a required parameter); k: Input should be less than or equal to 50
    (got 500)``: one clause per error, without pydantic's links."""
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "arguments"
        if error["type"] == "missing":
            problems.append(f"{where}: missing (a required parameter)")
        elif error["type"] == "extra_forbidden":
            known = ", ".join(sorted(schema.get("properties", {}))) \
                if len(error["loc"]) == 1 else ""
            problems.append(f"{where}: unknown parameter"
                            + (f" (the parameters are: {known})" if known else ""))
        else:
            got = repr(error.get("input"))
            got = got if len(got) <= 80 else got[:77] + "..."
            problems.append(f"{where}: {error['msg']} (got {got})")
    return "; ".join(problems)


def _strict(tool: Tool) -> Tool:
    """Refuse unknown arguments instead of ignoring them: a misplaced or misspelt parameter
    (``maxTokens`` beside ``query`` instead of inside ``filters``) would otherwise be dropped
    without a word and the call would run with defaults. The schema says so too
    (``additionalProperties: false``), as the nested objects' schemas already do.

    And take each argument as the JSON type its schema names (pydantic's strict mode): a
    destructive flag is a JSON ``true``, never ``"yes"``, ``"1"`` or ``1``, and ``k`` is a
    number, not ``"5"`` or ``true``."""
    base = tool.fn_metadata.arg_model
    strict = type(base.__name__, (base,), {
        "__module__": base.__module__,
        "model_config": ConfigDict(**{**base.model_config, "extra": "forbid",
                                      "strict": True})})
    tool.fn_metadata.arg_model = strict
    tool.parameters = without_titles(strict.model_json_schema(by_alias=True))
    if tool.fn_metadata.output_schema is not None:
        tool.fn_metadata.output_schema = without_titles(tool.fn_metadata.output_schema)
    return tool


def without_titles(schema: Any) -> Any:
    """A JSON Schema without pydantic's ``title`` keywords (``"title": "Maxtokens"`` beside
    ``maxTokens``): they say nothing the property name does not, and an agent reads every
    schema of ``tools/list`` on every request. A property *named* title is kept."""
    if isinstance(schema, list):
        return [without_titles(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    lean = {}
    for key, value in schema.items():
        if key in ("properties", "$defs"):  # names of properties or definitions, not keywords
            lean[key] = {name: without_titles(sub) for name, sub in value.items()}
        elif key != "title":
            lean[key] = without_titles(value)
    return lean


def declared_tools(handle: EngineHandle) -> list[DeclaredTool]:
    """Every tool the server can offer (all groups) under the project's compatibility
    profile, in the order ``tools/list`` answers them: the context tools here, then each
    capability's own (Index Manager, agent memory, knowledge base, contextual retrieval,
    search sessions and reports, administration)."""
    from contextd.mcp.session_tools import SessionTools

    owners = (ContextTools(handle), ManagerTools(handle.root, handle.config_path),
              StashTools(handle), KnowledgeTools(handle), ContextualTools(handle),
              SessionTools(handle), AdminTools(handle))
    profile = mcp_config(handle.root, handle.config_path).compatibility
    return [found for owner in owners for found in tools_of(owner, profile)]


def registered_tools(handle: EngineHandle, tools: Iterable[str] | None = None) -> list[Tool]:
    """The tools of the groups :func:`offered_groups` names, all with the same error
    handling and strictness. The reference in docs/MCP_TOOLS.md is generated from the full
    list (:mod:`contextd.mcp.reference`)."""
    groups = offered_groups(mcp_config(handle.root, handle.config_path), tools)
    # Descriptions without the docstrings' indentation: agents pay for every space.
    return [_strict(ContextdTool.from_function(_tool_errors(found.function), name=found.name,
                                               description=inspect.cleandoc(
                                                   found.function.__doc__ or ""),
                                               annotations=found.annotations))
            for found in declared_tools(handle) if found.group in groups]


def build_app(handle: EngineHandle, log_level: str = "WARNING",
              tools: Iterable[str] | None = None) -> MCPServer:
    """The server with the tools of :func:`registered_tools` (``tools``: the groups of
    ``serve --tools``; None: ``[mcp] tools``) and the template resources, talking to the
    engine behind ``handle``."""
    from contextd.mcp import session_tools

    groups = offered_groups(mcp_config(handle.root, handle.config_path), tools)
    resources = session_tools.template_resources(handle)
    app = session_tools.ListingServer("contextd", version=importlib.metadata.version("contextd"),
                                      instructions=instructions(groups),
                                      log_level=log_level,
                                      middleware=[start_after_handshake(handle)],
                                      tools=registered_tools(handle, tools),
                                      listers=(resources.listing,))
    session_tools.register_resources(app, resources)
    return app


class ContextTools:
    """The tool functions; their signatures and docstrings are the tools' schemas and
    descriptions, written for the agent that calls them."""

    GROUP = CORE  # the rebuild jobs are in the admin group

    def __init__(self, handle: EngineHandle):
        self.handle = handle
        self._refreshes = RefreshQueue()

    @tool(READ)
    def query_context(
        self,
        query: Annotated[str, Field(min_length=1, max_length=2000, description=(
            "What you are looking for, in natural language or code terms, e.g. 'where are "
            "JWT tokens validated' or 'RetryPolicy backoff'."))],
        k: Annotated[int | None, Field(ge=1, description=(
            "Most hits to return (default: [query] default_k of context.toml, usually 12; "
            "at most [query] max_k, usually 50)."))] = None,
        scope: Annotated[Scope | None, Field(description="Restrict the search.")] = None,
        filters: Annotated[Filters | None, Field(description="Score and budget cut-offs.")]
        = None,
        contexts: Annotated[list[str] | None, Field(description=(
            "Knowledge contexts to search beside the project (knowledge_context_list names "
            "them; ['*'] = all); omitted: the project only."))] = None,
        projects: Annotated[list[str] | None, Field(description=(
            "Projects of this monorepo ([projects.NAME] in context.toml) to search, each on "
            "its own, their best hits fused under one budget; ['*'] = all. Each hit names "
            "its project. Omitted: the whole index."))] = None,
    ) -> Annotated[CallToolResult, QueryResult]:
        """Find the code and docs of this project that answer a question, ranked and cut
        to a token budget.

        Prefer it to grep and to opening files when you look for a concept, a behaviour, or
        where something is implemented, defined, called, configured or documented; grep is
        for an exact string you already know. Returns snippets (file path, line range,
        symbol, kind, language, score 0-1, text) that fit together in filters.maxTokens
        (default from context.toml, at most 6000), often enough to answer without reading
        whole files. Lexical matches answer at once; semantic ones join when the embedding
        model has loaded (a note says so).
        """
        engine = self.handle.get()
        filters = filters or Filters()
        budget = filters.max_tokens or render.default_budget(engine.project.config)
        response = engine.query(render.query_request(query, k, scope or Scope(), budget,
                                                     filters.min_score, contexts, projects))
        result = render.query_result(query, response, budget, filters.min_score)
        return _answer(result, render.query_text(result))

    @tool(WRITE)
    def refresh_context(
        self,
        paths: Annotated[list[str], Field(min_length=1, max_length=1000, description=(
            "Files or directories to re-index, relative to the project root (or absolute "
            "inside it); ['.'] means the whole project."))],
        force: Annotated[bool, Field(description=(
            "Re-index even files whose content did not change."))] = False,
        run_async: Annotated[bool, Field(validation_alias="async", description=(
            "true: queue the refresh and return at once; false: wait until it is done."))]
        = True,
    ) -> Annotated[CallToolResult, RefreshResult]:
        """Re-index files you just changed, so query_context sees the new text.

        A file watcher normally does this within a second; call it when answers look stale,
        after a bulk change (checkout, code generation), or with force=true to re-chunk.
        Deleted paths leave the index. Returns status 'queued' (async, the default) or
        'completed' with the indexing report; paths it cannot use (outside the root,
        missing...) are listed in 'refused' with a reason each.
        """
        engine = self.handle.get()
        # The owner's check (it knows what is indexed): both forms refuse alike, before queuing.
        checked = engine.check_refresh_paths(list(paths))
        accepted = checked["accepted"]
        refused = [RefusedPath(**row) for row in checked["refused"]]
        if not accepted:
            raise ToolError(f"nothing to refresh: {refusal_text(refused)}")
        files = render.files_under(engine.project.root, accepted)
        if run_async:
            self._refreshes.put(engine, accepted, force)
            result = RefreshResult(status="queued", filesQueued=files, message=(
                f"Refresh of {files} file(s) queued; query_context sees them in a moment."))
        else:
            result = render.refresh_result(engine.refresh(paths=accepted, force=force))
        return _answer(render.with_refused(result, refused), result.message
                       + (f" Refused: {refusal_text(refused)}" if refused else ""))

    @tool(READ)
    def get_context_stats(self) -> Annotated[CallToolResult, StatsResult]:
        """Say what this project's index holds and whether it is ready.

        Call it when query_context answers look empty, stale or wrong. Returns the files,
        chunks and embeddings indexed, indexing progress ("N / M files", embeddings
        pending, problem files), each provider's availability (semantic search waits for
        the embedding model), chunks per language, recent jobs, query figures, and the
        process that owns the index.
        """
        engine = self.handle.get()
        result = render.stats_result(engine.stats(), engine.project.config)
        return _answer(result, render.stats_text(result))

    @tool(DELETE, group="admin")
    def rebuild_context(
        self,
        confirm: Annotated[bool, Field(description=(
            "Must be true: the rebuild deletes the indexed data before re-indexing. (A dry "
            "run with options.validateOnly=true changes nothing and accepts false.)"))],
        run_async: Annotated[bool, Field(validation_alias="async", description=(
            "true: return at once with a jobId to poll; false: wait until done."))] = True,
        paths: Annotated[list[str] | None, Field(description=(
            "Rebuild only these directories or files (relative to the root); omit for a "
            "full rebuild."))] = None,
        options: Annotated[RebuildOptions | None, Field(description="How to rebuild.")]
        = None,
    ) -> Annotated[CallToolResult, RebuildResult]:
        """DESTRUCTIVE: delete and re-create the index from scratch (all, or some paths).

        Use only when the index is corrupt or badly stale, after changing the embedding
        model or chunking settings, or when asked to. Ordinary edits never need it (the
        watcher and refresh_context handle them). Queries keep working during a rebuild but
        see fewer results until it finishes. Requires confirm=true; try
        options.validateOnly=true first for the file count and time estimate. Runs as a
        job: returns a jobId for get_rebuild_status / cancel_rebuild. One rebuild at a time.
        """
        options = options or RebuildOptions()
        if not confirm and not options.validate_only:
            raise ToolError("rebuild_context deletes the index and re-creates it: call it "
                            "again with confirm=true to proceed, or with "
                            "options.validateOnly=true for a dry run")
        engine = self.handle.get()
        try:
            result = engine.rebuild(paths=paths or None, dry_run=options.validate_only,
                                    vacuum=options.vacuum, keep_errors=not options.clear_errors,
                                    wait=not run_async, created_by="mcp")
        except JobConflictError as exc:
            raise ToolError(f"{exc} Poll it with get_rebuild_status, or stop it with "
                            "cancel_rebuild.") from None
        answer = render.rebuild_result(result, partial=bool(paths))
        return _answer(answer, answer.message)

    @tool(READ, group="admin")
    def get_rebuild_status(
        self,
        job_id: Annotated[str, Field(validation_alias="jobId", min_length=1, description=(
            "The jobId returned by rebuild_context."))],
        include_logs: Annotated[bool, Field(validation_alias="includeLogs", description=(
            "Also return the job's log lines."))] = False,
    ) -> Annotated[CallToolResult, JobStatusResult]:
        """Check a rebuild job: queued, in_progress (with files processed of total,
        percent, current file and estimated completion), completed (with the final
        report), failed (with the error) or cancelled. Poll every few seconds while it runs.
        """
        status = self.handle.get().job_status(job_id, include_logs=include_logs)
        answer = render.job_status_result(status, include_logs)
        return _answer(answer, answer.message)

    @tool(WRITE, group="admin")
    def cancel_rebuild(
        self,
        job_id: Annotated[str, Field(validation_alias="jobId", min_length=1, description=(
            "The jobId returned by rebuild_context."))],
    ) -> Annotated[CallToolResult, JobStatusResult]:
        """Stop a running rebuild after its current batch. The files already re-indexed
        stay; run refresh_context with ['.'] (or a new rebuild) to complete the index.
        """
        status = self.handle.get().cancel_job(job_id)
        answer = render.job_status_result(status, include_logs=False)
        return _answer(answer, answer.message)


    @tool(READ, group="related")
    def find_related(
        self,
        path: Annotated[str, Field(min_length=1, description=(
            "File relative to the project root, e.g. 'src/billing/invoice.py'."))],
        line: Annotated[int, Field(ge=1, description=(
            "A line inside the function or chunk to start from."))],
        k: Annotated[int, Field(ge=1, le=100, description="Most results.")] = 10,
    ) -> dict[str, Any]:
        """Find the code most like the function (or chunk) at path:line, across the project.

        Use it before changing a function, to find its near-copies (the same shape under
        other names) that need the same change, and code calling the same helpers alike.
        Returns the target and hits best first: location, label, score, shape, calls and
        meaning likeness (0-1), why (near-copy, calls alike, similar) and the first lines.
        """
        return to_dict(self.handle.get().related(path, line, k))


class RefreshQueue:
    """refresh_context(async=true) runs here: one refresh at a time, in order, in a daemon
    thread (a queued refresh must not keep the process alive once the client has gone)."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()

    def put(self, engine: Any, paths: list[str], force: bool) -> None:
        with self._guard:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="contextd-refresh",
                                                daemon=True)
                self._thread.start()
        self._queue.put((engine, paths, force))

    def _run(self) -> None:
        while True:
            engine, paths, force = self._queue.get()
            try:
                engine.refresh(paths=paths, force=force)
            except ContextdError as exc:  # expected (a path deleted meanwhile): one line
                log.warning("queued refresh of %s: %s", paths, exc)
            except Exception:  # nobody is waiting for the answer: the log (stderr) gets it
                log.exception("queued refresh of %s failed", paths)
