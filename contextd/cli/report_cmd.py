"""``contextd report``: a cited Markdown report from a template, like the MCP tool
create_rag_report; or a template's schema, or the list of templates."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from contextd.cli.common import CliState, emit, pass_state
from contextd.errors import UsageError
from contextd.records import to_dict


@click.command("report")
@click.option("--vars", "vars_file", type=click.File("r", encoding="utf-8"),
              help="JSON file of the template's variables ('-' reads stdin).")
@click.option("--template", help="Template name (default: reports.default_template).")
@click.option("--output-dir", help="Folder under the project root or the reports folder "
              "(default: reports.output_dir).")
@click.option("--file-name", help="File name; the timestamp goes in front, '.md' at the "
              "end.")
@click.option("--ascii-filename", help="An ASCII name, used when --file-name is not given.")
@click.option("--overwrite", is_flag=True, help="Replace a report of the same name.")
@click.option("--schema", "show_schema", is_flag=True, help="Print the template's schema "
              "(variables, descriptions, example) instead of writing a report.")
@click.option("--templates", "list_templates", is_flag=True, help="List the templates.")
@pass_state
def report_command(state: CliState, vars_file, template: str | None, output_dir: str | None,
                   file_name: str | None, ascii_filename: str | None, overwrite: bool,
                   show_schema: bool, list_templates: bool) -> None:
    """Write a Markdown report whose citations link the files and lines they quote.

    \b
    Examples:
      contextd report --templates
      contextd report --schema --template paper
      contextd report --vars findings.json --template paper --file-name vat
      echo '{"query": "...", ...}' | contextd report --vars -
    """
    from contextd.sessions.templates import TemplateCatalog

    if sum((vars_file is not None, show_schema, list_templates)) != 1:
        raise click.UsageError("give --vars FILE, --schema or --templates (one of them)")
    project = state.project()
    if list_templates:
        catalog = TemplateCatalog(project)
        rows = [{"name": name, "origin": info.origin, "path": str(info.path),
                 "default": name == catalog.config.default_template}
                for name, info in catalog.templates().items()]
        emit(state, rows, _print_templates)
    elif show_schema:
        schema = TemplateCatalog(project).schema(template)
        emit(state, schema, lambda data: click.echo(json.dumps(data, indent=2,
                                                               ensure_ascii=False)))
    else:
        from contextd.sessions.records import ReportRequest
        from contextd.sessions.reports import create_report

        result = create_report(project, ReportRequest(
            variables=_read_variables(vars_file), template=template, output_dir=output_dir,
            file_name=file_name, ascii_filename=ascii_filename, overwrite=overwrite))
        for warning in result.warnings:
            click.echo(f"contextd: warning: {warning}", err=True)
        emit(state, to_dict(result), lambda data: click.echo(data["path"]))


def _read_variables(handle) -> dict[str, Any]:
    try:
        data = json.load(handle)
    except ValueError as exc:
        raise UsageError(f"--vars {handle.name}: not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"--vars {handle.name}: expected a JSON object of variables")
    return data


def _print_templates(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        mark = "  (default)" if row["default"] else ""
        click.echo(f"{row['name']:<16} {row['origin']:<8} {row['path']}{mark}")
    sys.stdout.flush()
