"""The embedded ContextModule's hold on a project's index.

An orchestrator that imports contextd runs the query pipeline in its own process, so that
process must own the index (:mod:`contextd.runtime.owner`): it takes the owner lock and
serves the socket, so a CLI command or an MCP server started meanwhile asks it instead of
opening the database beside it. The owner a CLI command leaves behind
(:mod:`contextd.runtime.background`) exists only to answer later commands and finish their
indexing, so it is stopped and this process takes the work over; an owner with a user of
its own (an MCP server, ``contextd watch``, another module) is not, and the error names it.
"""

from __future__ import annotations

import logging

from contextd.config.project import Project
from contextd.errors import ContextdError
from contextd.runtime.background import owner_command_line, stop_owner
from contextd.runtime.election import OwnerLock, lock_path
from contextd.runtime.owner import SharedEngine

log = logging.getLogger("contextd.runtime.embedded")


def own_index(project: Project, context_type: type) -> SharedEngine:
    """The project's Engine in this process, built with ``context_type`` as its module and
    serving other processes; raises ContextdError naming the process that keeps it."""
    shared = SharedEngine(project, serve=True, context_type=context_type)
    if shared.try_own():
        return shared
    pid = OwnerLock(lock_path(project.db_path)).holder_pid()
    command = owner_command_line(pid) if pid else ""
    if command.split()[-1:] == ["owner"]:
        log.info("stopping the background owner (pid %s) to take its index over", pid)
        stop_owner(project)
        if shared.try_own():
            return shared
    raise ContextdError(
        f"the index {project.db_path} is in use by pid {pid or '?'} "
        f"({command or 'another contextd process'}); an embedded ContextModule runs the "
        f"index in its own process: stop that process first, or open the module with "
        f"mode='standalone' against a contextd service")
