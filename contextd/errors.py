"""The error hierarchy of contextd.

Every class here is *user-facing*: its message is shown as one line on stderr by the CLI's
error boundary (``contextd.cli``) or as a tool error by the MCP server, so messages must say
what went wrong and what to do about it. Anything else that escapes is a bug and is re-raised
with its traceback when ``CONTEXTD_RAISE_ERRORS=1``.
"""

from __future__ import annotations

from dataclasses import dataclass


class ContextdError(Exception):
    """Base of all expected failures; the message is shown to the user as is.

    A message that tells what to do next names the MCP tool or parameter (an agent reads it);
    ``cli`` is the same message in the command line's words (``--yes``, ``contextd search``),
    shown by the CLI instead."""

    exit_code = 1

    def __init__(self, message: str = "", *, cli: str | None = None):
        super().__init__(message)
        self.cli = cli

    def for_cli(self) -> str:
        """The message as the command line shows it."""
        return self.cli or str(self)


class UsageError(ContextdError):
    """The command line or a tool call was malformed (exit code 2, like click's usage errors)."""

    exit_code = 2


@dataclass(frozen=True)
class ConfigIssue:
    """One problem found in a configuration file, named by file and dotted key."""

    file: str
    key: str
    message: str
    # "error" makes the configuration unusable; "warning" is reported but accepted.
    severity: str = "error"

    def __str__(self) -> str:
        label = "warning: " if self.severity == "warning" else ""
        return f"{self.file}: {self.key}: {label}{self.message}"


class ConfigError(ContextdError):
    """The configuration is invalid; ``issues`` carries every issue found, not only the first.

    The message is one line (the first issue and how many more), like every CLI error;
    ``contextd validate-config`` lists them all."""

    def __init__(self, issues: list[ConfigIssue]):
        self.issues = list(issues)
        more = f" (and {len(self.issues) - 1} more)" if len(self.issues) > 1 else ""
        first = self.issues[0] if self.issues else "invalid configuration"
        super().__init__(f"{first}{more}; run 'contextd validate-config'")


class BoundaryError(ContextdError):
    """The project boundary cannot be established (dangerous root, no watch path exists...)."""


class StoreError(ContextdError):
    """The index database cannot be opened or used (newer schema, corruption, disk full)."""


class ModelUnavailableError(ContextdError):
    """The embedding model cannot be loaded from installed packages (nothing is downloaded)."""


class MissingExtraError(ModelUnavailableError):
    """A feature needs packages that only a pip extra installs (``contextd[torch]``); the
    message names the extra."""


class TemplateError(ContextdError):
    """A report template cannot be loaded or fails to render; the message names the template,
    the line and the variable at fault."""


class JobConflictError(ContextdError):
    """A job (rebuild) was refused because another one is already running."""


class StashFullError(ContextdError):
    """Agent memory reached its size cap (``[stash] max_segments``); gc or delete first."""


class KnowledgeError(ContextdError):
    """A knowledge-base request was refused: unknown or duplicate context, a bad name,
    deleting ``default``, a path outside the allowed roots or refused, a document that
    cannot be read (the message names it and why)."""
class RemoteEmbeddingError(ContextdError):
    """An embedding server refused or failed a request for good: a wrong API key, an unknown
    model, vectors of the wrong dimension, or a server still unreachable after the retries."""
