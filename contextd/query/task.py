"""A task as an orchestrator hands it over (a dict or an object with title, description,
keywords, paths...), read the same way by every module that takes one."""

from __future__ import annotations

from typing import Any

from contextd.records import ContextScope


def task_field(task: Any, name: str, default: Any = None) -> Any:
    """A field of a task given as a dict or as an object (dataclass, pydantic model...)."""
    value = task.get(name, default) if isinstance(task, dict) else getattr(task, name, default)
    return default if value is None else value


def build_query(task: Any) -> str:
    """Title, description and keywords of a task as one query text."""
    keywords = task_field(task, "keywords", ())
    if isinstance(keywords, str):
        keywords = [keywords]
    parts = [str(task_field(task, "title", "")), str(task_field(task, "description", "")),
             " ".join(map(str, keywords))]
    return "\n".join(p.strip() for p in parts if p and p.strip())


def task_scope(task: Any) -> ContextScope:
    """The project part of a task's scope: paths, languages, kinds, exclusions, files,
    folders, roles and the memory it asks for."""
    return ContextScope(
        paths=tuple(task_field(task, "paths", ())),
        languages=tuple(task_field(task, "languages", ())),
        kinds=tuple(task_field(task, "kinds", ())),
        exclude_patterns=tuple(task_field(task, "exclude_patterns", ())),
        files=tuple(task_field(task, "files", ())),
        folders=tuple(task_field(task, "folders", ())),
        memory=task_field(task, "memory"),
        memory_min_similarity=task_field(task, "memory_min_similarity"),
        roles=tuple(task_field(task, "roles", ())))
