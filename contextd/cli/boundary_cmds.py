"""Configuration and project-boundary commands: init, validate-config,
list-indexable, check-file, project-stats.

Each command builds a typed record, printed as JSON with ``--json`` or as a short report for
people. The documented context.toml written by ``init`` is generated from the config
dataclasses, so the file's help text and defaults cannot drift from the code.
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from contextd.boundary.walk import Boundary, Decision, FileEntry, RejectReason, Rejection
from contextd.cli.common import CliState, emit, pass_state, shown, user_path
from contextd.config.loading import CONFIG_FILENAME, InvalidConfig, iter_documented_fields
from contextd.config.sections import PROVIDER_ONLY_KEYS, SECTIONS, ContextConfig
from contextd.config.checks import WARNING, check_project, config_file_name
from contextd.config.env import SettingOrigin, describe_embedding
from contextd.errors import ConfigError, ConfigIssue, ContextdError
from contextd.config.project import Project, detect_project_root

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_WIDTH = 96

HEADER = """\
# context.toml: the configuration of contextd, written by `contextd init`.
#
# Every key is listed with its default value and what it does; keys left out keep their
# defaults, so you may delete whatever you do not change. Strings may use ${VAR} or
# ${VAR:-default}. Sections may also be nested under [context] ([context.watcher], ...).
# Check a change with `contextd validate-config`.
"""

# [projects.NAME] has no default: init shows the shape, commented out.
PROJECTS_EXAMPLE = [
    "", "# Several projects in one index: name a part of the tree, then",
    "# query it alone or with others (`contextd query --project backend --project frontend`).",
    "# [projects.backend]", '# watch_paths = ["backend/src/", "backend/docs/"]',
    '# ignore_patterns = ["backend/node_modules"]',
]

# ---------------------------------------------------------------------------- init

def _toml_value(value: Any, indent: str = "") -> str:
    """TOML text for a config value (JSON strings are valid TOML basic strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        items = ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items())
        return f"{{ {items} }}" if items else "{}"
    items = [_toml_value(v) for v in value]
    one_line = f"[{', '.join(items)}]"
    if len(indent) + len(one_line) <= _WIDTH:
        return one_line
    lines, current = [], ""
    for item in items:
        if current and len(current) + len(item) + 6 > _WIDTH:
            lines.append(current.rstrip())
            current = ""
        current += f"{item}, "
    lines.append(current.rstrip())
    return "[\n" + "".join(f"    {line}\n" for line in lines) + "]"


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key)


def _section_text(title: str, instance: Any, with_help: bool = True,
                  provider: str | None = None) -> list[str]:
    """One table; a provider's leaves out the keys only other providers read."""
    lines = ["", f"[{title}]"]
    for name, _, help_text in iter_documented_fields(type(instance)):
        if provider is not None and provider not in PROVIDER_ONLY_KEYS.get(name, (provider,)):
            continue
        if with_help and help_text:
            lines += textwrap.wrap(help_text, _WIDTH, initial_indent="# ",
                                   subsequent_indent="# ")
        lines.append(f"{name} = {_toml_value(getattr(instance, name), name + ' = ')}")
    return lines


def render_documented_config() -> str:
    """A complete, commented context.toml holding every default (what ``init`` writes)."""
    defaults = ContextConfig()
    lines = [HEADER.rstrip("\n")]
    for name in SECTIONS:
        value = getattr(defaults, name)
        if name == "projects":
            lines += PROJECTS_EXAMPLE
        elif isinstance(value, dict):  # chunking per language, providers per id
            for i, (sub, instance) in enumerate(value.items()):
                lines += _section_text(f"{_toml_key(name)}.{_toml_key(sub)}", instance,
                                       with_help=i == 0 or name == "providers",
                                       provider=sub if name == "providers" else None)
        else:
            lines += _section_text(name, value)
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class InitResult:
    path: str
    overwritten: bool


@click.command("init")
@click.option("--force", is_flag=True, help="Overwrite an existing context.toml.")
@pass_state
def init_cmd(state: CliState, force: bool) -> None:
    """Write a documented context.toml (every key, its default and its meaning)."""
    root = Path(state.root).resolve() if state.root else detect_project_root(Path.cwd())
    target = Path(state.config_path) if state.config_path else root / CONFIG_FILENAME
    existed = target.exists()
    if existed and not force:
        raise ContextdError(f"{target} already exists; use --force to overwrite it")
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(render_documented_config(), encoding="utf-8")
    os.replace(tmp, target)
    emit(state, InitResult(str(target), existed),
         lambda r: click.echo(f"{'Overwrote' if r.overwritten else 'Wrote'} {r.path}"))


# ---------------------------------------------------------------------------- validate

@dataclass(frozen=True)
class ReasonCount:
    reason: str
    files: int
    dirs: int


@dataclass
class ValidationReport:
    valid: bool
    config_file: str | None
    errors: list[ConfigIssue] = field(default_factory=list)
    warnings: list[ConfigIssue] = field(default_factory=list)
    watch_paths: list[str] = field(default_factory=list)
    indexable: int = 0
    excluded: list[ReasonCount] = field(default_factory=list)
    embedding: list[SettingOrigin] = field(default_factory=list)


def _counted(files: int, dirs: int) -> str:
    parts = [f"{files:,} file{'s' * (files != 1)}" if files else "",
             f"{dirs:,} director{'ies' if dirs != 1 else 'y'}" if dirs else ""]
    return " and ".join(p for p in parts if p)


def _exit_failed() -> None:
    """Exit 1 after the result was printed: the command answered, and the answer is "no"."""
    raise SystemExit(1)


def _reason_counts(rejected: list[Rejection]) -> list[ReasonCount]:
    files = collections.Counter(r.reason for r in rejected if not r.is_dir)
    dirs = collections.Counter(r.reason for r in rejected if r.is_dir)
    return [ReasonCount(reason.value, files[reason], dirs[reason])
            for reason in RejectReason if files[reason] or dirs[reason]]


def _validate(state: CliState) -> ValidationReport:
    try:
        project = state.project()
        issues = []
    except InvalidConfig as exc:
        # Bad names/types/ranges: check the disk with the valid rest, to list every problem.
        root = Path(state.root).resolve() if state.root else detect_project_root(Path.cwd())
        project = Project(root=root, config=exc.partial)
        issues = exc.issues
    except ConfigError as exc:
        source = state.config_path or exc.issues[0].file
        return ValidationReport(False, source, errors=exc.issues)
    from contextd.embedders.registry import configuration_issues

    issues = issues + check_project(project) + configuration_issues(
        project.config.embedding, config_file_name(project))
    embedding = describe_embedding(project.config, project.root)
    report = ValidationReport(
        valid=True, config_file=project.config.source,
        errors=[i for i in issues if i.severity != WARNING],
        warnings=[i for i in issues if i.severity == WARNING], embedding=embedding)
    if report.errors:
        report.valid = False
        return report
    boundary = Boundary(project)
    result = boundary.scan()
    report.watch_paths = boundary.watch_rels
    report.indexable = len(result.accepted)
    report.excluded = _reason_counts(result.rejected)
    return report


def _print_report(report: ValidationReport) -> None:
    def issue_line(mark: str, issue: ConfigIssue) -> None:
        click.echo(f"{mark} {issue.file}: {issue.key}: {issue.message}")

    if not report.valid:
        click.echo(f"✗ Configuration invalid: {len(report.errors)} error(s), "
                   f"{len(report.warnings)} warning(s)")
        for issue in report.errors:
            issue_line("  ✗", issue)
        for issue in report.warnings:
            issue_line("  ⚠", issue)
        return
    click.echo(f"✓ Configuration valid ({report.config_file or 'defaults, no context.toml'})")
    for issue in report.warnings:
        issue_line("⚠", issue)
    for setting in report.embedding:
        click.echo(f"✓ {setting.key} = {setting.value} ({setting.origin})")
    click.echo(f"✓ {len(report.watch_paths)} watch path(s) found: "
               f"{', '.join(report.watch_paths)}")
    click.echo(f"✓ {report.indexable:,} indexable files detected")
    for count in report.excluded:
        click.echo(f"✓ {_counted(count.files, count.dirs)} excluded: {count.reason}")
    click.echo("✓ No security issues detected")


@click.command("validate-config")
@pass_state
def validate_config_cmd(state: CliState) -> None:
    """Check context.toml and the project boundary, reporting every problem at once.

    Exit code 1 when there are errors; warnings alone exit 0."""
    report = _validate(state)
    emit(state, report, _print_report)
    if not report.valid:
        _exit_failed()


# ---------------------------------------------------------------------------- list / check

def _entry_record(entry: FileEntry) -> dict[str, Any]:
    return {"path": entry.path, "size": entry.size, "mtime_ns": entry.mtime_ns}


@click.command("list-indexable")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="Stop after this many files.")
@pass_state
def list_indexable_cmd(state: CliState, limit: int | None) -> None:
    """List the files that would be indexed, one path per line (relative to the root)."""
    files = Boundary(state.project()).iter_files()
    entries = list(itertools.islice(files, limit + 1) if limit else files)
    truncated = limit is not None and len(entries) > limit
    entries = entries[:limit] if limit else entries
    result = {"files": [_entry_record(e) for e in entries], "count": len(entries),
              "truncated": truncated}

    def human(_: Any) -> None:
        for entry in entries:
            click.echo(shown(entry.path))
        if truncated:
            click.echo(f"(first {limit} files shown)", err=True)

    emit(state, result, human)


def _print_decision(decision: Decision) -> None:
    if decision.indexable:
        click.echo(f"{shown(decision.path)}: indexable")
    else:
        click.echo(f"{shown(decision.path)}: not indexable: {decision.reason.value} ({decision.detail})")


@click.command("check-file")
@click.argument("path")
@pass_state
def check_file_cmd(state: CliState, path: str) -> None:
    """Say whether PATH would be indexed, and if not why (exit 0 if indexable, else 1).

    A relative PATH is relative to the current directory inside the project, else to the
    project root."""
    project = state.project()
    decision = Boundary(project).check(user_path(path, project.root))
    emit(state, decision, _print_decision)
    if not decision.indexable:
        _exit_failed()


# ---------------------------------------------------------------------------- stats

@dataclass(frozen=True)
class WatchPathStats:
    path: str
    files: int
    percent: float


@dataclass(frozen=True)
class ExcludedDir:
    path: str
    reason: str
    detail: str
    files: int


@dataclass
class ProjectStats:
    root: str
    indexable: int
    indexable_bytes: int
    watch_paths: list[WatchPathStats]
    excluded: list[ReasonCount]
    excluded_dirs: list[ExcludedDir]
    large_files: list[str]
    # [projects.NAME]: files of each named project (path is the project's name).
    projects: list[WatchPathStats] = field(default_factory=list)


def _count_files(path: Path) -> int:
    """Files below a pruned directory (for the report only; links are not followed)."""
    total, stack = 0, [str(path)]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        total += 1
        except OSError:
            continue
    return total


def _stats(state: CliState, top: int) -> ProjectStats:
    project = state.project()
    boundary = Boundary(project)
    result = boundary.scan()
    per_root = collections.Counter()
    for entry in result.accepted:
        per_root[next(r for r in boundary.watch_rels
                      if r == "." or entry.path.startswith(r + "/"))] += 1
    total = len(result.accepted) or 1
    from contextd.query.projects import Projects

    named = Projects(project.config.projects)
    per_project = collections.Counter(name for entry in result.accepted
                                      for name in named.of(entry.path))
    dirs = sorted((ExcludedDir(r.path + "/", r.reason.value, r.detail,
                               _count_files(project.root / r.path))
                   for r in result.rejected if r.is_dir), key=lambda d: -d.files)
    return ProjectStats(
        root=str(project.root), indexable=len(result.accepted),
        indexable_bytes=sum(e.size for e in result.accepted),
        watch_paths=[WatchPathStats(r, per_root[r], round(100 * per_root[r] / total, 1))
                     for r in boundary.watch_rels],
        excluded=_reason_counts(result.rejected), excluded_dirs=dirs[:top],
        large_files=result.large,
        projects=[WatchPathStats(name, per_project[name],
                                 round(100 * per_project[name] / total, 1))
                  for name in project.config.projects])


def _print_stats(stats: ProjectStats) -> None:
    click.echo(f"Project root: {stats.root}")
    click.echo(f"Indexable: {stats.indexable:,} files "
               f"({stats.indexable_bytes / 1048576:.1f} MB)")
    width = max((len(w.path) for w in stats.watch_paths), default=0) + 2
    click.echo("\nWatch paths:")
    for w in stats.watch_paths:
        click.echo(f"  {w.path:<{width}}→ {w.files:,} files ({w.percent:g}%)")
    if stats.projects:
        width = max(len(p.path) for p in stats.projects) + 2
        click.echo("\nProjects:")
        for p in stats.projects:
            click.echo(f"  {p.path:<{width}}→ {p.files:,} files ({p.percent:g}%)")
    click.echo("\nExcluded, by reason:")
    for count in stats.excluded:
        click.echo(f"  {count.reason:<24}{_counted(count.files, count.dirs)}")
    if stats.excluded_dirs:
        width = max(len(d.path) for d in stats.excluded_dirs) + 2
        click.echo("\nExcluded directories:")
        for d in stats.excluded_dirs:
            click.echo(f"  {d.path:<{width}}→ {d.files:,} files ({d.detail})")
    if stats.large_files:
        click.echo(f"\nAbove warn_file_size_mb ({len(stats.large_files)}):")
        for path in stats.large_files:
            click.echo(f"  {shown(path)}")


@click.command("project-stats")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True,
              help="Excluded directories listed.")
@pass_state
def project_stats_cmd(state: CliState, top: int) -> None:
    """Files per watch path and per exclusion reason."""
    emit(state, _stats(state, top), _print_stats)
