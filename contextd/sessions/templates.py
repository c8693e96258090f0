"""Report templates: Jinja2 files with a JSON schema of their variables.

A template is ``NAME.md.j2`` with an optional ``NAME.json`` beside it: name, description,
language, ``variables`` (each with type, required, description; an array's ``items`` describe
its objects) and an ``example``. The built-in ones (basic, paper, bullet_points) live in this
package; ``reports.templates_dir`` adds the user's, which win over a built-in of the same name.
A user template without a schema gets one derived from the variables it uses.

Templates are rendered by Jinja2's :class:`SandboxedEnvironment` (a template cannot reach
Python internals or the file system) with :class:`StrictUndefined` (a misspelt variable is an
error naming it and the template line, never an empty gap in the report). Nothing is cached:
an edited template or schema, or a new default in context.toml, counts at the next call.
"""

from __future__ import annotations

import json
import re
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta
from jinja2.sandbox import SandboxedEnvironment

from contextd.errors import ConfigError, ConfigIssue, TemplateError, UsageError

BUILTIN_DIR = Path(__file__).resolve().parent / "templates"
TEMPLATE_SUFFIX = ".md.j2"
SCHEMA_SUFFIX = ".json"
# The name every client may use for the workspace's default template.
CURRENT = "current"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
# Variables the report writer supplies itself; a schema does not ask for them.
AUTOMATIC = {
    "generated_at": "When the report was written (ISO 8601, local time).",
    "project": "The project's directory name.",
    "template": "The template's name.",
    "references": "Every distinct citation once, numbered in order of first use: number, "
                  "file, lines, pages, location, uri, link, quote.",
}
# What the writer adds to every citation (an object with a 'file' in an array variable).
CITATION_FIELDS = {
    "number": "Its number in references (paper-style [n]).",
    "location": "path:start-end (or 'path p.N' for documents).",
    "uri": "file:// URI of the file with #Lstart-Lend (or #page=N).",
    "file_uri": "file:// URI of the file.",
    "link": "Markdown link: [location](uri).",
    "quote": "The quoted text (taken from the file's cited lines when not given).",
    "fence": "A code fence longer than any inside the quote.",
}


@dataclass(frozen=True)
class TemplateInfo:
    """Where a template lives: ``builtin`` or ``user``."""

    name: str
    origin: str
    path: Path
    schema_path: Path | None


class TemplateCatalog:
    """The templates of one project (built-in plus ``reports.templates_dir``)."""

    def __init__(self, project: Any):
        self.project = project
        self.config = project.config.reports

    # ----- finding ---------------------------------------------------------------------
    def user_dir(self) -> Path | None:
        """The configured folder of the user's templates, checked to exist."""
        if not self.config.templates_dir:
            return None
        path = Path(self.config.templates_dir).expanduser()
        path = path if path.is_absolute() else self.project.root / path
        if not path.is_dir():
            raise ConfigError([ConfigIssue(self.project.config.source or "<defaults>",
                                           "reports.templates_dir",
                                           f"{path} is not a directory")])
        return path

    def templates(self) -> dict[str, TemplateInfo]:
        """Every template by name, sorted; a user template hides a built-in namesake."""
        found: dict[str, TemplateInfo] = {}
        for origin, folder in (("builtin", BUILTIN_DIR), ("user", self.user_dir())):
            if folder is None:
                continue
            for path in sorted(folder.glob("*" + TEMPLATE_SUFFIX)):
                name = path.name[:-len(TEMPLATE_SUFFIX)]
                if NAME_RE.match(name) and name != CURRENT:
                    schema = path.with_name(name + SCHEMA_SUFFIX)
                    found[name] = TemplateInfo(name, origin, path,
                                               schema if schema.is_file() else None)
        return dict(sorted(found.items()))

    def default_name(self) -> str:
        """The workspace default template (``reports.default_template``), checked to exist."""
        name = self.config.default_template
        if name not in self.templates():
            raise ConfigError([ConfigIssue(
                self.project.config.source or "<defaults>", "reports.default_template",
                f"no template named {name!r}; choose from: {', '.join(self.templates())}")])
        return name

    def find(self, name: str | None) -> TemplateInfo:
        """A template by name; None or 'current' is the workspace default."""
        if name is None or name == CURRENT:
            name = self.default_name()
        templates = self.templates()
        if name not in templates:
            raise UsageError(f"unknown template {name!r}; choose from: "
                             f"{', '.join(templates)} (or '{CURRENT}' for the default, "
                             f"{self.config.default_template})")
        return templates[name]

    # ----- schemas ---------------------------------------------------------------------
    def schema(self, name: str | None) -> dict[str, Any]:
        """A template's schema: name, description, language, variables, automatic variables,
        citation fields, example, origin; the default's when ``name`` is None/'current'."""
        info = self.find(name)
        if info.schema_path is not None:
            try:
                data = json.loads(info.schema_path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise TemplateError(f"schema {info.schema_path} of template {info.name!r} is "
                                    f"not readable JSON: {exc}") from None
            if not isinstance(data, dict) or not isinstance(data.get("variables", {}), dict):
                raise TemplateError(f"schema {info.schema_path}: expected an object with a "
                                    "'variables' object")
        else:
            data = {"description": f"User template {info.name} (no schema file: variables "
                                   "derived from the template)",
                    "variables": {var: {"type": "any", "required": True, "description": ""}
                                  for var in sorted(self._used_variables(info))}}
        return {"name": info.name, "description": data.get("description", ""),
                "language": data.get("language", "en"),
                "variables": data.get("variables", {}), "automatic": AUTOMATIC,
                "citation_fields": CITATION_FIELDS, "example": data.get("example", {}),
                "origin": info.origin,
                "default": info.name == self.config.default_template}

    def _used_variables(self, info: TemplateInfo) -> set[str]:
        source = self._source(info)
        try:
            tree = _environment().parse(source, info.name, str(info.path))
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"template {info.name!r} line {exc.lineno}: {exc.message}"
                                ) from None
        return jinja2.meta.find_undeclared_variables(tree) - set(AUTOMATIC)

    @staticmethod
    def _source(info: TemplateInfo) -> str:
        try:
            return info.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TemplateError(f"template {info.name!r} ({info.path}) cannot be read: {exc}"
                                ) from None

    # ----- rendering -------------------------------------------------------------------
    def render(self, info: TemplateInfo, context: dict[str, Any]) -> str:
        """The template filled with ``context``; a failure names the template, the line and
        (Jinja2's message) the variable."""
        environment = _environment(jinja2.FileSystemLoader(info.path.parent))
        try:
            return environment.get_template(info.path.name).render(context)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"template {info.name!r} line {exc.lineno}: {exc.message}"
                                ) from None
        except Exception as exc:  # undefined variables, sandbox refusals, filter errors
            line = _template_line(exc)
            where = f" line {line}" if line else ""
            message = getattr(exc, "message", None) or str(exc)
            raise TemplateError(f"template {info.name!r}{where}: {message}") from None


def _environment(loader: jinja2.BaseLoader | None = None) -> SandboxedEnvironment:
    """The sandbox; with a loader over the template's folder, so a template may include or
    extend its neighbours (and nothing outside that folder)."""
    return SandboxedEnvironment(loader=loader, undefined=jinja2.StrictUndefined,
                                autoescape=False,
                                keep_trailing_newline=True, trim_blocks=True,
                                lstrip_blocks=True)


def _template_line(exc: BaseException) -> int | None:
    """The template line a render error happened on: Jinja2 rewrites the traceback so the
    template's frames carry its file name and line numbers."""
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename.endswith(TEMPLATE_SUFFIX):
            line = frame.lineno
    return line
