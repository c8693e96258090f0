"""The administration tools: ``reload_config`` for everyone, and the compatibility names some
agents call the index administration tools by (``[mcp] compatibility = "seed002"``, the name
of that set of tools; docs/MCP.md).

Why a profile rather than aliases always on: every tool's name, description and schema is
sent to the agent and read on every turn, so five more names that do what ``rebuild_context``,
``get_context_stats``, ``cancel_rebuild`` and ``create_rag_report`` already do would cost
every agent context for the few that use those names. Those set one line in context.toml.
Each compatibility tool is a thin layer over the same Engine methods as ours.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from contextd.errors import ContextdError
from contextd.mcp.engine_handle import EngineHandle
from contextd.mcp.offer import SEED002
from contextd.mcp.tool_kinds import APPEND, DELETE, READ, WRITE, tool


class AdminTools:
    """Tools that act on the server's configuration and schema."""

    GROUP = "admin"  # the tool group (`serve --tools admin`)

    def __init__(self, handle: EngineHandle):
        self.handle = handle

    @tool(WRITE)
    def reload_config(self) -> dict[str, Any]:
        """Apply an edited context.toml (and the project's .env) without restarting the
        server: search, ranking, providers, sessions and the indexing boundary use the new
        settings from the next call. A file with errors is refused and the running settings
        stay. Returns the keys that changed, those that need a restart (storage), and
        whether the index will be re-chunked at the next catch-up.
        """
        result = self.handle.get().reload_config()
        changed = result["changed"]
        text = (f"Reloaded {result['config_file'] or 'the defaults'}: "
                + (f"{len(changed)} setting(s) changed: {', '.join(changed)}." if changed
                   else "nothing changed."))
        if result["restart"]:
            text += f" Needs a restart to apply: {', '.join(result['restart'])}."
        if result["reindex"]:
            text += " Chunking or redaction changed: the next catch-up re-indexes every file."
        return {**result, "message": text}

    # ----- the compatibility names (compatibility = "seed002") ---------------------------
    @tool(DELETE, profile=SEED002)
    def rebuild_index(
        self,
        reindex_all: Annotated[bool, Field(description=(
            "true: drop and rebuild the whole index (a job: poll index_status); false: "
            "index what changed and wait for it."))] = False,
    ) -> dict[str, Any]:
        """Seed 002 name. Update the index (reindex_all=false: the changed files, like
        refresh_context ['.']) or rebuild it from scratch (reindex_all=true, like
        rebuild_context with confirm=true). Returns files processed and chunks written, or
        the rebuild's job id."""
        engine = self.handle.get()
        if not reindex_all:
            report = engine.refresh(paths=None)
            return {"mode": "update", "processedFiles": report.files_indexed,
                    "removedFiles": report.files_removed, "chunks": report.chunks_written,
                    "message": report.summary}
        result = engine.rebuild(wait=False, created_by="mcp")
        return {"mode": "rebuild", "jobId": result.job_id, "status": result.status,
                "message": f"rebuild {result.job_id} started; index_status shows its progress"}

    @tool(READ, profile=SEED002)
    def index_status(self) -> dict[str, Any]:
        """Seed 002 name. Whether the index is initialised and current: status (No Index,
        Updating, Cancelling, Needs Update, Up to Date), files in the project, indexed, not
        indexed and deleted, last update, embedding model, and the store's figures."""
        engine = self.handle.get()
        health = engine.schema_status()
        storage = engine.stats().storage
        return {"isInitialized": health["status"] != "No Index", **health,
                "totalFiles": health["project"]["totalFilesInProject"],
                "indexedFiles": health["project"]["indexedFiles"],
                "lastUpdated": storage.get("last_indexed"),
                "embeddingModel": health["schema"]["embeddingModel"],
                "stats": {k: storage.get(k) for k in ("total_files", "total_chunks",
                                                      "db_size_mb")}}

    @tool(WRITE, profile=SEED002)
    def cancel_index_generation(self) -> dict[str, Any]:
        """Seed 002 name. Stop the running rebuild after its current batch (cancel_rebuild
        without a job id). The files already indexed stay."""
        engine = self.handle.get()
        running = engine.stats().indexing.get("current_job")
        if running is None:
            return {"cancelled": False, "message": "no indexing job is running"}
        status = engine.cancel_job(running["job_id"])
        return {"cancelled": True, "jobId": status.job_id, "status": status.status,
                "message": f"job {status.job_id}: stops after its current batch"}

    @tool(DELETE, profile=SEED002)
    def reinitialize_schema(
        self,
        confirm: Annotated[bool, Field(description=(
            "Must be true: every indexed file of this project is dropped."))],
    ) -> dict[str, Any]:
        """Seed 002 name. DESTRUCTIVE: drop this project's index (this workspace only) and
        start it afresh at the current schema version, e.g. after changing the embedding
        model's dimension. The knowledge base and agent memory stay. The next query or
        refresh_context indexes the project again."""
        if not confirm:
            raise ContextdError("reinitialize_schema drops this project's whole index: call "
                                "it again with confirm=true")
        result = self.handle.get().reinitialize_schema()
        return {**result, "message": (
            f"dropped {result['files_dropped']:,} indexed file(s); schema version "
            f"{result['schema_version']}; the next query or refresh_context re-indexes")}

    @tool(APPEND, profile=SEED002)
    def generate_report(
        self,
        session_id: Annotated[str, Field(min_length=1, description=(
            "The search session (search_knowledge) the report answers; its query becomes "
            "the report's question."))],
        overall_summary: Annotated[str, Field(min_length=1, description="The answer.")],
        sections: Annotated[list[dict[str, Any]], Field(description=(
            "Findings, each citing 'file' with 'start_line'/'end_line' and a 'summary'."))],
        template: Annotated[str | None, Field(description="Template name.")] = None,
        output_dir: Annotated[str | None, Field(description="Folder of the report.")] = None,
        file_name: Annotated[str | None, Field(max_length=200, description=(
            "Name of the file."))] = None,
    ) -> dict[str, Any]:
        """DEPRECATED: use create_rag_report. Writes the same cited Markdown
        report from a search session's query, a summary and sections."""
        from contextd.sessions.records import ReportRequest
        from contextd.sessions.reports import create_report

        engine = self.handle.get()
        found = engine.get_search_results([session_id], 1)
        if not found.sessions:
            raise ContextdError(f"no search session {session_id!r}: list_search_results "
                                "names the live ones")
        result = create_report(engine.project, ReportRequest(
            variables={"query": found.sessions[0].query, "overall_summary": overall_summary,
                       "sections": sections},
            template=template, output_dir=output_dir, file_name=file_name))
        return {"path": result.path, "template": result.template,
                "citations": result.citations, "warnings": list(result.warnings),
                "deprecated": "generate_report is kept for older agents; use "
                              "create_rag_report", "preview": result.preview}
