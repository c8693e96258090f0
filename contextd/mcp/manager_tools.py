"""The MCP tools of the web Index Manager: open it, list the running ones across
projects, stop one. The manager runs as its own process (it outlives this server); these
tools only start, find and stop it."""

from __future__ import annotations

from typing import Annotated

from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, ConfigDict, Field

from contextd.config.project import Project
from contextd.web import registry
from contextd.mcp.tool_kinds import READ, WRITE, tool


class ManagerInfo(BaseModel):
    """A running Index Manager."""

    model_config = ConfigDict(populate_by_name=True)

    workspace_id: str = Field(alias="workspaceId")
    root: str
    pid: int
    port: int
    url: str = Field(description="The page's address, access token included.")
    started_at: str = Field(alias="startedAt")

    @classmethod
    def of(cls, entry: registry.ManagerEntry) -> "ManagerInfo":
        return cls(workspace_id=entry.workspace_id, root=entry.root, pid=entry.pid,
                   port=entry.port, url=entry.url, started_at=entry.started_at)


class OpenManagerResult(BaseModel):
    """The answer of open_index_manager."""

    manager: ManagerInfo
    started: bool = Field(description="True when this call started it; false when it ran.")
    message: str


class ManagersResult(BaseModel):
    """The answer of list_index_managers."""

    managers: list[ManagerInfo]
    message: str


class StopManagerResult(BaseModel):
    """The answer of stop_index_manager."""

    manager: ManagerInfo
    message: str


def _answer(model: BaseModel, text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=model.model_dump(mode="json", by_alias=True))


class ManagerTools:
    """The tool functions; signatures and docstrings are the tools' schemas."""

    GROUP = "admin"  # the tool group (`serve --tools admin`)

    def __init__(self, root: str | None, config_path: str | None):
        self.root = root
        self.config_path = config_path

    @tool(WRITE)
    def open_index_manager(
        self,
        open_browser: Annotated[bool, Field(description=(
            "Also open the page in this machine's browser, where there is one."))] = False,
    ) -> Annotated[CallToolResult, OpenManagerResult]:
        """Start (or find) the web Index Manager of this project and return its URL.

        Give the URL to the user: in a browser it shows what is indexed, live indexing
        progress with rate and ETA, jobs (refresh, rebuild, cancel), files that failed,
        a search page and what contextd saved. It runs as its own process on 127.0.0.1,
        one per project, and keeps running after this session; stop it with
        stop_index_manager.
        """
        from contextd.web.launch import ensure_manager

        project = Project.open(self.root, self.config_path)
        entry, started = ensure_manager(project, self.config_path)
        if open_browser:
            import webbrowser

            webbrowser.open(entry.url)
        verb = "started" if started else "already running"
        return _answer(OpenManagerResult(manager=ManagerInfo.of(entry), started=started,
                                         message=f"Index Manager {verb}: {entry.url}"),
                       f"Index Manager {verb} for {entry.root}: {entry.url}")

    @tool(READ)
    def list_index_managers(self) -> Annotated[CallToolResult, ManagersResult]:
        """List the Index Managers running on this machine, for every project (workspace id,
        project root, pid, port, URL, start time)."""
        entries = registry.list_managers()
        lines = [f"{e.workspace_id} {e.root} pid {e.pid} {e.url}" for e in entries]
        text = "\n".join(lines) if lines else "No Index Manager is running."
        return _answer(ManagersResult(managers=[ManagerInfo.of(e) for e in entries],
                                      message=text), text)

    @tool(WRITE)
    def stop_index_manager(
        self,
        workspace_id: Annotated[str, Field(min_length=1, max_length=64, description=(
            "The workspace id from list_index_managers."))],
    ) -> Annotated[CallToolResult, StopManagerResult]:
        """Stop the Index Manager of a workspace (any project's; list_index_managers gives
        the ids). Its page stops answering; the index and its owner are not affected."""
        entry = registry.stop(workspace_id)
        text = f"Stopped the Index Manager of {entry.root} (pid {entry.pid})."
        return _answer(StopManagerResult(manager=ManagerInfo.of(entry), message=text), text)
