"""The engine's operations, each declared once: its handler, request and result records and
the surfaces that expose it (:mod:`contextd.operations.declare` says how).

The Engine, the SharedEngine (owner socket) and the checks of the MCP tools, HTTP routes and
CLI commands all read :data:`OPERATIONS`; adding an operation is one decorated handler in one
of these modules. docs/ARCHITECTURE.md follows one operation from each surface to its
handler.
"""

from __future__ import annotations

from contextd.operations import activity, answers, indexing, knowledge, memory  # noqa: F401
from contextd.operations.declare import OPERATIONS, Operation, expose, operation, wire_shape

__all__ = ["OPERATIONS", "Operation", "expose", "operation", "wire_shape"]
