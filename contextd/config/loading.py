"""context.toml: typed, immutable configuration with their defaults.

The file is optional: no file means every default, so contextd works with zero configuration
in any directory. Sections may be written at the top level (``[watcher]``) or under a
``[context]`` table (``[context.watcher]``, as in the spec's examples). String values may use
``${VAR}`` or ``${VAR:-default}``. Loading reports *every* problem at once, each naming the
file and the dotted key (see :class:`contextd.errors.ConfigError`); checks that need the file
system (watch paths, globs) live in :mod:`contextd.config.checks`; the sections and their
defaults in :mod:`contextd.config.sections`.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import typing
from pathlib import Path
from typing import Any

import tomli

from contextd.config.sections import (
    PROVIDER_ONLY_KEYS, SECTIONS, ContextConfig, LanguageChunking, ProjectScopeConfig,
    ProviderConfig, default_chunking, default_providers,
)
from contextd.errors import ConfigError, ConfigIssue

CONFIG_FILENAME = "context.toml"


class InvalidConfig(ConfigError):
    """A config file with errors in names, types or ranges. ``partial`` is the config built
    from its valid keys (defaults elsewhere), so that ``validate-config`` can run the file-system
    checks too and report every problem of the file at once, not in two rounds."""

    def __init__(self, issues: list[ConfigIssue], partial: ContextConfig):
        super().__init__(issues)
        self.partial = partial

# Other spellings of keys that configuration files in the wild use, accepted beside ours
# with a note: (section, key) -> ours.
# "chunking" stands for every [chunking.LANGUAGE] table.
SPEC_ALIASES = {
    ("chunking", "preserve_kdoc"): ("chunking", "preserve_docstrings"),
    ("chunking", "preserve_jsdoc"): ("chunking", "preserve_docstrings"),
    ("watcher", "max_file_size_mb"): ("indexing", "max_file_size_mb"),
}
# [core]'s settings written at the top of a [context] table (``enabled = true``), as
# files in the wild do.
CORE_AT_TOP = ("enabled", "mode", "fallback_enabled")
# Keys contextd no longer has: a file that sets one still loads, with this note.
REMOVED_KEYS = {
    ("metrics", "export_interval_minutes"):
        "removed: usage metrics are written as each query is answered (the usage_metrics "
        "table); read them with `contextd stats --json` or get_context_stats",
    ("owner", "background_min_chunks"):
        "removed: replaced by [owner] answer_within_seconds (a command hands the vectors to the "
        "background owner by the time they would take, whatever their number)",
}

_ENV_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def find_config(root: Path) -> Path | None:
    """The context.toml of a project root, if there is one."""
    candidate = root / CONFIG_FILENAME
    return candidate if candidate.is_file() else None


def load_config(path: Path | None) -> ContextConfig:
    """Load and validate a config file; ``None`` gives all defaults.

    Raises :class:`ConfigError` listing every problem (file and dotted key for each).
    """
    if path is None:
        return ContextConfig()
    fname = str(path)
    try:
        with open(path, "rb") as fh:
            raw = tomli.load(fh)
    except FileNotFoundError:
        raise ConfigError([ConfigIssue(fname, "<file>", "file not found")]) from None
    except OSError as exc:
        raise ConfigError([ConfigIssue(fname, "<file>", f"cannot read: {exc.strerror}")]) from None
    except tomli.TOMLDecodeError as exc:
        raise ConfigError([ConfigIssue(fname, "<file>", f"not valid TOML: {exc}")]) from None
    return config_from_dict(raw, fname)


def config_from_dict(raw: dict[str, Any], fname: str = "<dict>") -> ContextConfig:
    """Build a ContextConfig from parsed TOML, collecting every issue before raising."""
    if set(raw) == {"context"} and isinstance(raw["context"], dict):
        raw = raw["context"]
        prefix = "context."
    else:
        prefix = ""
    issues: list[ConfigIssue] = []
    raw = _substitute_env(raw, fname, prefix.rstrip("."), issues)
    notes: list[ConfigIssue] = []
    raw = _spec_spellings(raw, prefix, fname, notes)
    values: dict[str, Any] = {}
    for key, value in raw.items():
        dotted = prefix + key
        if key not in SECTIONS:
            issues.append(ConfigIssue(fname, dotted, _unknown(key, SECTIONS)))
            continue
        if not isinstance(value, dict):
            issues.append(ConfigIssue(fname, dotted, f"must be a table ([{dotted}]), "
                                                     f"got {_type_name(value)}"))
            continue
        sec_field = SECTIONS[key]
        if key == "chunking":
            values[key] = {**default_chunking(),
                           **_build_map(LanguageChunking, value, dotted, fname, issues)}
        elif key == "providers":
            merged = default_providers()
            for pid, sub in _build_map(ProviderConfig, value, dotted, fname, issues,
                                       base=merged).items():
                merged[pid] = sub
            values[key] = merged
            notes += _provider_only_notes(value, dotted, fname)
        elif key == "projects":
            values[key] = _build_map(ProjectScopeConfig, value, dotted, fname, issues)
        else:
            values[key] = _build(sec_field.default_factory, value, dotted, fname, issues)
    explicit = frozenset(f"{section}.{key}" for section, table in raw.items()
                         if isinstance(table, dict) for key in table)
    config = ContextConfig(source=None if fname == "<dict>" else fname,
                           explicit_keys=explicit, notes=tuple(notes), **values)
    if bool(config.engine.tls_cert) != bool(config.engine.tls_key):
        issues.append(ConfigIssue(fname, f"{prefix}engine.tls_key", "tls_cert and tls_key "
                                  "must be given together"))
    if issues:
        raise InvalidConfig(issues, config)
    return config


def _spec_spellings(raw: dict[str, Any], prefix: str, fname: str,
                    notes: list[ConfigIssue]) -> dict[str, Any]:
    """``raw`` with the other spellings (SPEC_ALIASES, CORE_AT_TOP) turned into ours and
    removed keys taken out, a note
    for each (the file loads either way; ours wins where both are given)."""
    raw = {k: (dict(v) if isinstance(v, dict) else v) for k, v in raw.items()}

    def note(key: str, message: str) -> None:
        notes.append(ConfigIssue(fname, prefix + key, message, "warning"))

    def move(table: dict, old: str, target: dict, new: str, where: str, ours: str) -> None:
        value = table.pop(old)
        if new in target:
            note(where, f"ignored: {ours} is set too, and wins")
        else:
            target[new] = value
            note(where, f"another spelling of {ours}; accepted")

    for old in CORE_AT_TOP:
        if old in raw and not isinstance(raw[old], dict):
            core = raw.setdefault("core", {})
            if isinstance(core, dict):
                move(raw, old, core, old, old, f"core.{old}")
    for (section, old), (target_section, new) in SPEC_ALIASES.items():
        tables = raw.get(section)
        if not isinstance(tables, dict):
            continue
        if section == "chunking":
            for language, table in tables.items():
                if isinstance(table, dict) and old in table:
                    tables[language] = table = dict(table)
                    move(table, old, table, new, f"chunking.{language}.{old}",
                         f"chunking.{language}.{new}")
        elif old in tables:
            target = raw.setdefault(target_section, {})
            if isinstance(target, dict):
                move(tables, old, target, new, f"{section}.{old}", f"{target_section}.{new}")
    for (section, old), message in REMOVED_KEYS.items():
        table = raw.get(section)
        if isinstance(table, dict) and old in table:
            del table[old]
            note(f"{section}.{old}", message)
    return raw


def _provider_only_notes(providers: dict, dotted: str, fname: str) -> list[ConfigIssue]:
    """A note for each provider-specific key set on a provider that does not read it."""
    return [ConfigIssue(fname, f"{dotted}.{pid}.{key}", f"has no effect here: {key} applies "
                        f"to [providers.{' / '.join(PROVIDER_ONLY_KEYS[key])}] only", "warning")
            for pid, table in providers.items() if isinstance(table, dict)
            for key in table if pid in default_providers()
            and pid not in PROVIDER_ONLY_KEYS.get(key, (pid,))]


def _build_map(cls, table: dict, dotted: str, fname: str, issues: list[ConfigIssue],
               base: dict | None = None) -> dict[str, Any]:
    out = {}
    for name, sub in table.items():
        if not isinstance(sub, dict):
            issues.append(ConfigIssue(fname, f"{dotted}.{name}",
                                      f"must be a table, got {_type_name(sub)}"))
            continue
        start = (base or {}).get(name)
        out[name] = _build(cls, sub, f"{dotted}.{name}", fname, issues, start)
    return out


def _build(cls, table: dict, dotted: str, fname: str, issues: list[ConfigIssue],
           start: Any = None) -> Any:
    """Overlay a TOML table on a dataclass's defaults, checking names, types and ranges."""
    fields = {f.name: f for f in dataclasses.fields(cls) if not f.metadata.get("internal")}
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for key, value in table.items():
        key_path = f"{dotted}.{key}"
        if key not in fields:
            issues.append(ConfigIssue(fname, key_path, _unknown(key, fields)))
            continue
        problem = _check_value(value, hints[key], fields[key].metadata)
        if problem:
            issues.append(ConfigIssue(fname, key_path, problem))
            continue
        kwargs[key] = value
    base = start if start is not None else cls()
    return dataclasses.replace(base, **kwargs)


def _check_value(value: Any, hint: Any, meta: typing.Mapping[str, Any]) -> str | None:
    """Return a message if ``value`` does not fit the field, else None."""
    origin = typing.get_origin(hint)
    if hint is bool:
        if not isinstance(value, bool):
            return f"expected true or false, got {_type_name(value)} {value!r}"
    elif hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"expected an integer, got {_type_name(value)} {value!r}"
    elif hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"expected a number, got {_type_name(value)} {value!r}"
    elif hint is str:
        if not isinstance(value, str):
            return f"expected a string, got {_type_name(value)} {value!r}"
    elif origin is list:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return f"expected a list of strings, got {value!r}"
    elif origin is dict:
        if not isinstance(value, dict):
            return f"expected a table, got {_type_name(value)}"
    lo, hi = meta.get("min"), meta.get("max")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if lo is not None and value < lo or hi is not None and value > hi:
            return f"{value!r} is out of range; allowed {_range_text(lo, hi)}"
    choices = meta.get("choices")
    if choices:  # for a list, every entry must be one of them
        wrong = [v for v in (value if isinstance(value, list) else [value]) if v not in choices]
        if wrong:
            return f"{wrong[0]!r} is not one of: {', '.join(choices)}"
    return None


def _range_text(lo: float | None, hi: float | None) -> str:
    if lo is not None and hi is not None:
        return f"{lo} to {hi}"
    return f">= {lo}" if lo is not None else f"<= {hi}"


def _unknown(key: str, known: typing.Iterable[str]) -> str:
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    hint = f"; did you mean '{close[0]}'?" if close else f"; known keys: {', '.join(sorted(known))}"
    return f"unknown key '{key}'{hint}"


def _type_name(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "list",
            dict: "table"}.get(type(value), type(value).__name__)


def _substitute_env(value: Any, fname: str, dotted: str, issues: list[ConfigIssue]) -> Any:
    """Replace ${VAR} and ${VAR:-default} in every string; an unset VAR without default is
    an issue naming the key."""
    if isinstance(value, dict):
        return {k: _substitute_env(v, fname, f"{dotted}.{k}" if dotted else k, issues)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute_env(v, fname, dotted, issues) for v in value]
    if not isinstance(value, str):
        return value

    def replace(match: re.Match) -> str:
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        issues.append(ConfigIssue(fname, dotted, f"environment variable ${{{name}}} is not set"))
        return match.group(0)

    return _ENV_RE.sub(replace, value)


def iter_documented_fields(cls) -> typing.Iterator[tuple[str, Any, str]]:
    """(name, default, help) of every field of a section class, for writing a documented file."""
    for f in dataclasses.fields(cls):
        if f.metadata.get("internal"):
            continue
        default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        yield f.name, default, f.metadata.get("help", "")

