"""What part a file plays in a project: source, test, doc or config.

Decided from path conventions shared across ecosystems and from the file's language, never
from lists kept per repository, so it holds for a project nobody here has seen:

- test: a file under ``tests/``, ``test/``, ``__tests__/``, ``spec/``, or named like a test
  (``test_x.py``, ``x_test.go``, ``x.test.ts``, ``x.spec.js``, ``XTest.java``, ``conftest.py``);
- doc: prose (Markdown, reStructuredText, plain text, AsciiDoc), anything under ``docs/``,
  ``doc/``, ``examples/`` or ``samples/``, or a folder named so before a ``_``/``-``
  (``docs_src/``, ``examples-js/``: usage shown, not implemented), and the project's letters to its
  readers (README, CHANGES, CHANGELOG, HISTORY, NEWS, CONTRIBUTING, LICENSE, AUTHORS);
- config: data and build files (YAML, TOML, JSON, INI, XML, properties, ``.cfg``) and CI
  directories (``.github/``, ``.circleci/``);
- source: everything else (code in a programming language).

The ranking uses roles to put source first when a query asks for an implementation or a
change, and a scope may keep only some roles (``ContextScope.roles``, ``--role``); the
bootstrap reads source first (:func:`contextd.indexer.plan.priority`).
"""

from __future__ import annotations

import enum
import functools
import re
from typing import Iterable

from contextd.errors import UsageError
from contextd.text.languages import CONFIG, DOC, extensions_with_role, ids_with_role


class FileRole(str, enum.Enum):
    """The part a file plays (see the module docstring)."""

    SOURCE = "source"
    TEST = "test"
    DOC = "doc"
    CONFIG = "config"


ROLE_NAMES = tuple(role.value for role in FileRole)

_TEST_DIRS = frozenset({"test", "tests", "__tests__", "spec", "specs", "testing_utils"})
_DOC_DIRS = frozenset({"docs", "doc", "documentation", "examples", "example", "samples",
                       "sample"})
_FOLDER_HEAD_RE = re.compile(r"[-_]")
_CONFIG_DIRS = frozenset({".github", ".circleci", ".gitlab", ".devcontainer"})
_TEST_NAME_RE = re.compile(
    r"^(?:test_.*\.py|conftest\.py|.*_test\.(?:py|go|rb|rs|exs?)|.*\.(?:test|spec)\.[cm]?[jt]sx?"
    r"|.*(?:Test|Tests|Spec|IT)\.(?:java|kt|scala|cs|swift)|.*_spec\.rb)$")
_DOC_NAME_RE = re.compile(
    r"^(?:readme|changes|changelog|history|news|contributing|license|licence|authors|notice"
    r"|code_of_conduct|security)(?:\.[a-z0-9]+)?$", re.I)
_DOC_LANGUAGES = ids_with_role(DOC)
_CONFIG_LANGUAGES = ids_with_role(CONFIG)
# Lock files are build data too, though no language claims them.
_CONFIG_SUFFIXES = extensions_with_role(CONFIG) + (".lock",)


def checked_roles(roles: Iterable[str]) -> frozenset[str]:
    """The role names of a scope, lower-cased; an unknown one is a usage error naming the
    choices."""
    wanted = frozenset(role.lower() for role in roles)
    unknown = sorted(wanted.difference(ROLE_NAMES))
    if unknown:
        raise UsageError(f"unknown file role(s) {', '.join(unknown)}; choose from: "
                         f"{', '.join(ROLE_NAMES)}")
    return wanted


@functools.lru_cache(maxsize=65_536)
def file_role(path: str, language: str = "") -> FileRole:
    """The role of a root-relative POSIX ``path`` in ``language`` (see the module docstring)."""
    parts = path.split("/")
    name = parts[-1]
    folders = {p.lower() for p in parts[:-1]}
    if folders & _TEST_DIRS or _TEST_NAME_RE.match(name):
        return FileRole.TEST
    if _DOC_NAME_RE.match(name) or language.lower() in _DOC_LANGUAGES or any(
            _FOLDER_HEAD_RE.split(folder, 1)[0] in _DOC_DIRS for folder in folders):
        return FileRole.DOC
    if (folders & _CONFIG_DIRS or language.lower() in _CONFIG_LANGUAGES
            or name.lower().endswith(_CONFIG_SUFFIXES)):
        return FileRole.CONFIG
    return FileRole.SOURCE
