"""A project's declared dependencies, read from its manifests: pyproject.toml (PEP 621,
optional dependencies, dependency groups, Poetry), requirements*.txt, package.json, go.mod and
Cargo.toml. Each declaration keeps the manifest, the line and the group it came from, and the
names code imports it by (``PyYAML`` is imported as ``yaml`` only by convention: the
normalised name and its usual import spellings are tried)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

import tomli

# PEP 508: the name at the start of a requirement.
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_GO_REQUIRE = re.compile(r"^\s*(?:require\s+)?([\w.\-~/]+\.[\w.\-~/]+)\s+(v[\w.\-+]+)")


@dataclass(frozen=True)
class Dependency:
    """One declared dependency."""

    name: str
    spec: str
    manifest: str
    line: int
    group: str  # runtime, dev, optional:<extra>, build, ...
    ecosystem: str  # python, npm, go, cargo

    @property
    def key(self) -> str:
        return normalise(self.name)

    def import_names(self) -> tuple[str, ...]:
        """Names an import statement may use for it, likeliest first (the provider takes
        the first one some code imports): ``PyYAML`` is tried as ``pyyaml``, then ``yaml``."""
        if self.ecosystem == "go":
            return (self.name, self.name.rstrip("/").rsplit("/", 1)[-1])
        if self.ecosystem == "npm":
            return (self.name,)
        base = self.name.lower()
        names = [base.replace("-", "_"), base.replace(".", "_"), base]
        for prefix in ("python-", "py"):
            if base.startswith(prefix) and len(base) > len(prefix) + 2:
                names.append(base[len(prefix):].replace("-", "_"))
        return tuple(dict.fromkeys(names))


def normalise(name: str) -> str:
    """PEP 503 normalisation, also used to match a query's words: lower case, runs of
    ``-_.`` as one ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


MANIFEST_NAMES = ("pyproject.toml", "package.json", "go.mod", "Cargo.toml")


def is_manifest(path: str) -> bool:
    name = path.rpartition("/")[2]  # the name, without a PurePosixPath per path
    return name in MANIFEST_NAMES or (name.startswith("requirements") and name.endswith(".txt"))


def parse_manifest(path: str, text: str) -> list[Dependency]:
    """The dependencies a manifest declares (a file that does not parse declares none)."""
    name = PurePosixPath(path).name
    try:
        if name == "pyproject.toml":
            found = _pyproject(tomli.loads(text))
        elif name == "package.json":
            found = _package_json(json.loads(text))
        elif name == "Cargo.toml":
            found = _cargo(tomli.loads(text))
        elif name == "go.mod":
            return _go_mod(path, text)
        else:
            found = [(_requirement(line), line.strip(), "runtime") for line in text.splitlines()
                     if line.strip() and not line.lstrip().startswith(("#", "-"))]
    except (ValueError, tomli.TOMLDecodeError, AttributeError, TypeError):
        return []
    ecosystem = {"package.json": "npm", "Cargo.toml": "cargo"}.get(name, "python")
    lines = text.splitlines()
    return [Dependency(dep, spec, path, _line_of(lines, dep), group, ecosystem)
            for dep, spec, group in found if dep]


def _requirement(text: str) -> str:
    match = _REQUIREMENT_NAME.match(text)
    return match.group(1) if match else ""


def _line_of(lines: list[str], name: str) -> int:
    """1-based line of the first line naming the dependency (1 when none does)."""
    pattern = re.compile(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", re.IGNORECASE)
    return next((i for i, line in enumerate(lines, 1) if pattern.search(line)), 1)


def _pyproject(data: dict) -> list[tuple[str, str, str]]:
    project = data.get("project") or {}
    found = [(_requirement(r), r, "runtime") for r in project.get("dependencies") or []]
    for extra, reqs in (project.get("optional-dependencies") or {}).items():
        found += [(_requirement(r), r, f"optional:{extra}") for r in reqs]
    for group, reqs in (data.get("dependency-groups") or {}).items():
        found += [(_requirement(r), r, group) for r in reqs if isinstance(r, str)]
    poetry = (data.get("tool") or {}).get("poetry") or {}
    for table, group in (("dependencies", "runtime"), ("dev-dependencies", "dev")):
        found += [(dep, json.dumps(spec) if not isinstance(spec, str) else spec, group)
                  for dep, spec in (poetry.get(table) or {}).items() if dep != "python"]
    return found


def _package_json(data: dict) -> list[tuple[str, str, str]]:
    groups = (("dependencies", "runtime"), ("devDependencies", "dev"),
              ("peerDependencies", "peer"), ("optionalDependencies", "optional"))
    return [(dep, str(spec), group) for table, group in groups
            for dep, spec in (data.get(table) or {}).items()]


def _cargo(data: dict) -> list[tuple[str, str, str]]:
    groups = (("dependencies", "runtime"), ("dev-dependencies", "dev"),
              ("build-dependencies", "build"))
    return [(dep, spec if isinstance(spec, str) else str(spec.get("version", "")), group)
            for table, group in groups for dep, spec in (data.get(table) or {}).items()]


def _go_mod(path: str, text: str) -> list[Dependency]:
    found, in_block = [], False
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.split("//", 1)[0].strip()
        if stripped.startswith("require ("):
            in_block = True
            continue
        if in_block and stripped == ")":
            in_block = False
            continue
        if in_block or stripped.startswith("require "):
            match = _GO_REQUIRE.match(stripped)
            if match:
                group = "indirect" if "// indirect" in line else "runtime"
                found.append(Dependency(match.group(1), match.group(2), path, number, group,
                                        "go"))
    return found
