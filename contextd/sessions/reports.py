"""create_rag_report: a Markdown report from a template, written where it is allowed to go.

The steps, each reporting every problem it finds at once rather than the first:
variables against the template's schema (missing required ones, wrong types), citations
against the files (:mod:`contextd.sessions.citations`), rendering in the sandbox
(:mod:`contextd.sessions.templates`), then the file: ``YYYYMMDD_HHMMSS_<name>.md`` in an output
folder under the project root or the configured reports folder, with a sanitised name, never
replacing a report unless asked to.
"""

from __future__ import annotations

import os
import re
import tempfile
import unicodedata
from datetime import datetime
from pathlib import Path
from typing import Any

from contextd.errors import UsageError
from contextd.sessions.citations import CitationResolver
from contextd.sessions.records import ReportRequest, ReportResult
from contextd.sessions.templates import TemplateCatalog

# Longest <name> part of a report's file name, in characters.
MAX_NAME_CHARS = 80
# Generated names that collide (same name, same second) get _2 ... _N; then it is an error.
MAX_NUMBERED = 99
# Lines of the written report returned as its preview.
PREVIEW_LINES = 40
# Folders inside the project a report may never be written to.
FORBIDDEN_PARTS = (".git", ".contextd")
_TYPES = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
          "array": (list,), "object": (dict,)}
_UNSAFE = re.compile(r"[^\w.-]+", re.UNICODE)
# Letters NFKD does not split into an ASCII base and accents.
_ASCII_FORMS = str.maketrans({"ß": "ss", "æ": "ae", "Æ": "AE", "ø": "o", "Ø": "O", "œ": "oe",
                              "Œ": "OE", "đ": "d", "Đ": "D", "ł": "l", "Ł": "L", "þ": "th"})


def create_report(project: Any, request: ReportRequest, now: datetime | None = None
                  ) -> ReportResult:
    """Validate, render and write one report (see the module docstring)."""
    catalog = TemplateCatalog(project)
    info = catalog.find(request.template)
    schema = catalog.schema(info.name)
    if not isinstance(request.variables, dict):
        raise UsageError("variables must be an object of the template's variables")
    problems, warnings = check_variables(request.variables, schema["variables"])
    if problems:
        raise UsageError(f"template {info.name!r}: " + "; ".join(problems)
                         + " (get_template_schema lists its variables)")
    resolver = CitationResolver(project.root, project.config.reports.max_quote_lines)
    variables = resolver.resolve_all(with_defaults(request.variables, schema["variables"]))
    if resolver.check.errors:
        raise UsageError("bad citation(s): " + "; ".join(resolver.check.errors))
    now = now or datetime.now().astimezone()
    context = {**variables,
               "generated_at": now.isoformat(timespec="seconds"),
               "project": project.root.name, "template": info.name,
               "references": resolver.check.references}
    text = catalog.render(info, context)
    folder = output_folder(project, request.output_dir)
    name = report_name(request, variables)
    path = write_report(folder, f"{now:%Y%m%d_%H%M%S}_{name}", text, request.overwrite,
                        numbered=not request.file_name)
    return ReportResult(path=str(path), file_uri=path.as_uri(), template=info.name,
                        citations=len(resolver.check.references),
                        size_bytes=len(text.encode()), warnings=tuple(warnings
                                                                      + resolver.check.warnings),
                        preview="\n".join(text.splitlines()[:PREVIEW_LINES]))


# ----- variables ------------------------------------------------------------------------
def check_variables(variables: dict[str, Any], spec: dict[str, Any]
                    ) -> tuple[list[str], list[str]]:
    """(problems, warnings) of ``variables`` against a schema's ``variables``: every missing
    required variable in one list (array items included, as ``sections[2].summary``), wrong
    types, and unknown names as warnings."""
    missing, wrong, warnings = [], [], []
    _check_object(variables, spec, "", missing, wrong)
    unknown = [key for key in variables if key not in spec]
    if unknown and spec:
        warnings.append(f"the template does not use {', '.join(sorted(unknown))}")
    problems = []
    if missing:
        problems.append(f"missing required variable(s): {', '.join(missing)}")
    problems += wrong
    return problems, warnings


def _check_object(values: dict[str, Any], spec: dict[str, Any], prefix: str,
                  missing: list[str], wrong: list[str]) -> None:
    for name, field in spec.items():
        if not isinstance(field, dict):
            continue
        value = values.get(name)
        where = f"{prefix}{name}"
        if value is None or value == "" or value == []:
            if field.get("required"):
                missing.append(where)
            continue
        expected = _TYPES.get(field.get("type", "any"))
        if expected and (not isinstance(value, expected)
                         or isinstance(value, bool) and bool not in expected):
            wrong.append(f"{where} must be {field['type']}, got {type(value).__name__}")
            continue
        items = field.get("items")
        if isinstance(value, list) and isinstance(items, dict):
            for number, item in enumerate(value):
                if not isinstance(item, dict):
                    wrong.append(f"{where}[{number}] must be an object")
                else:
                    _check_object(item, items, f"{where}[{number}].", missing, wrong)


def with_defaults(values: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """``values`` with empty values for the optional variables left out (inside array items
    too), so a template may test them (``{% if x %}``) under StrictUndefined."""
    filled = dict(values)
    for name, field in spec.items():
        if not isinstance(field, dict):
            continue
        if filled.get(name) is None:
            filled[name] = {"array": [], "string": ""}.get(field.get("type"))
        items = field.get("items")
        if isinstance(items, dict) and isinstance(filled[name], list):
            filled[name] = [with_defaults(item, items) if isinstance(item, dict) else item
                            for item in filled[name]]
    return filled


# ----- the file ---------------------------------------------------------------------------
def output_folder(project: Any, output_dir: str | None) -> Path:
    """The folder to write in: ``output_dir`` (relative to the root, or absolute) or
    ``reports.output_dir``; it must lie under the project root or the configured reports
    folder, outside .git and the index's folder, after symbolic links are followed."""
    root = Path(os.path.realpath(project.root))
    configured = Path(project.config.reports.output_dir).expanduser()
    configured = Path(os.path.realpath(configured if configured.is_absolute()
                                       else root / configured))
    wanted = Path(output_dir).expanduser() if output_dir else configured
    folder = Path(os.path.realpath(wanted if wanted.is_absolute() else root / wanted))
    allowed = [base for base in (configured, root) if folder == base or base in folder.parents]
    if not allowed:
        raise UsageError(f"output_dir {output_dir} is outside the project root {root} and "
                         f"the reports folder {configured}; write reports under one of them")
    inside = folder.relative_to(allowed[0]).parts
    if allowed[0] == root and any(part in FORBIDDEN_PARTS for part in inside):
        raise UsageError(f"output_dir {output_dir} is inside {'/'.join(FORBIDDEN_PARTS)}; "
                         "choose another folder")
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"output_dir {folder} is a file, not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def report_name(request: ReportRequest, variables: dict[str, Any]) -> str:
    """The ``<name>`` of the file: file_name, else ascii_filename, else the title or query,
    made safe (no separators or traversal, no leading dot, at most MAX_NAME_CHARS)."""
    if request.file_name:
        name = sanitise(request.file_name, ascii_only=False)
    elif request.ascii_filename:
        name = sanitise(request.ascii_filename, ascii_only=True)
        if not name:
            raise UsageError(f"ascii_filename {request.ascii_filename!r} has no ASCII "
                             "letters or digits to name the file by")
    else:
        name = sanitise(str(variables.get("title") or variables.get("query") or ""),
                        ascii_only=False)
    if request.file_name and not name:
        raise UsageError(f"file_name {request.file_name!r} has no letters or digits to name "
                         "the file by")
    return name or "report"


def sanitise(text: str, ascii_only: bool) -> str:
    """A file-name-safe form of ``text`` (letters, digits, '-', '_', '.'); ``ascii_only``
    transliterates accents away and drops what has no ASCII form."""
    text = unicodedata.normalize("NFKC", text).strip()
    if text.lower().endswith(".md"):
        text = text[:-3]
    if ascii_only:
        text = unicodedata.normalize("NFKD", text.translate(_ASCII_FORMS))
        text = text.encode("ascii", "ignore").decode()
    text = _UNSAFE.sub("_", text.replace("..", "_"))
    text = re.sub(r"_+", "_", text).strip("._-")
    return text[:MAX_NAME_CHARS].rstrip("._-")


def write_report(folder: Path, stem: str, text: str, overwrite: bool,
                 numbered: bool = False) -> Path:
    """Write ``<stem>.md``; an existing file is replaced only with ``overwrite`` (atomically,
    through a temporary file), else refused, or, for a ``numbered`` (generated) name, the
    report goes to ``<stem>_2.md``, ``<stem>_3.md``..."""
    path = folder / f"{stem}.md"
    if not overwrite:
        for number in range(2, MAX_NUMBERED + 2):
            try:
                with open(path, "x", encoding="utf-8") as handle:
                    handle.write(text)
                return path
            except FileExistsError:
                if not numbered:
                    break
                path = folder / f"{stem}_{number}.md"
        raise UsageError(f"{path} exists; pass overwrite=true to replace it, or another "
                         "file_name")
    fd, temp = tempfile.mkstemp(dir=folder, prefix=".report-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise
    return path
