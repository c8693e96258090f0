"""The task prompt: the task's header, the ``<project_context>`` block and
the Guidelines an agent follows with it.

An orchestrator sends this to the agent instead of the bare task. Without context (nothing
found, or context disabled) the prompt is the spec's "before" form: the header and the plain
instruction, no empty block and no guidelines about a block that is not there.
"""

from __future__ import annotations

from typing import Any

from contextd.query.render import render_context
from contextd.query.task import task_field
from contextd.records import TaskContext

GUIDELINES = (
    "Prefer information from <project_context> over general knowledge",
    "Reference specific files/functions mentioned in context",
    "If context is insufficient, use query_context tool for more information",
    "Maintain consistency with existing patterns shown in context",
)
WITH_CONTEXT = "Please implement this task using the provided context."
WITHOUT_CONTEXT = "Please implement this task."


def task_header(task: Any) -> list[str]:
    """"You are executing task #id: title", then the description, type and complexity the
    task has (missing ones are left out)."""
    task_id = str(task_field(task, "task_id", "") or "")
    title = str(task_field(task, "title", "") or "").strip()
    head = f"You are executing task #{task_id}: {title}" if task_id else \
        f"You are executing task: {title}"
    lines = [head.rstrip(": ")]
    for label, name in (("Description", "description"), ("Type", "task_type"),
                        ("Complexity", "complexity")):
        value = task_field(task, name)
        if value not in (None, ""):
            lines.append(f"{label}: {str(value).strip()}")
    return lines


def render_task_prompt(task: Any, context: TaskContext, max_tokens: int | None = None) -> str:
    """The whole prompt for ``task`` with ``context`` (its block cut to ``max_tokens``
    when given)."""
    lines = task_header(task)
    if not context.snippets:
        return "\n".join([*lines, "", WITHOUT_CONTEXT])
    return "\n".join([*lines, "", render_context(context, max_tokens), "", "Guidelines:",
                      *(f"- {g}" for g in GUIDELINES), "", WITH_CONTEXT])
