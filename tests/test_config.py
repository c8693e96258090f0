"""context.toml: loading, every validation message, ${ENV}, the [context] wrapper, defaults, and
the file-system checks of contextd.config.checks."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from contextd.config.loading import config_from_dict, load_config
from contextd.config.sections import ContextConfig, ProviderConfig
from contextd.config.checks import check_project
from contextd.errors import ConfigError
from contextd.config.project import Project


def issues_of(raw: dict, fname: str = "ctx.toml") -> dict[str, str]:
    """{dotted key: message} of every issue ``raw`` raises."""
    with pytest.raises(ConfigError) as info:
        config_from_dict(raw, fname)
    assert all(i.file == fname for i in info.value.issues)
    return {i.key: i.message for i in info.value.issues}


# ---------------------------------------------------------------------------- loading

def test_no_file_means_all_defaults(tmp_path: Path) -> None:
    assert load_config(None) == ContextConfig()
    project = Project.open(tmp_path)
    assert project.config == ContextConfig()
    assert project.config.source is None
    assert project.db_path == tmp_path.resolve() / ".contextd" / "context.duckdb"


def test_file_values_overlay_defaults(tmp_path: Path) -> None:
    path = tmp_path / "context.toml"
    path.write_text('[query]\nmmr_lambda = 0.7\n[providers.semantic]\nweight = 0.9\n'
                    '[providers.my_plugin]\ntimeout_ms = 10\n')
    cfg = load_config(path)
    assert cfg.query.mmr_lambda == 0.7 and cfg.query.default_k == 12
    assert cfg.provider("semantic").weight == 0.9
    assert cfg.provider("symbol").weight == 0.3  # untouched defaults survive
    assert cfg.provider("my_plugin") == ProviderConfig(timeout_ms=10)
    assert cfg.provider("unconfigured") == ProviderConfig()
    assert cfg.source == str(path)


def test_context_wrapper_is_accepted_and_prefixes_keys() -> None:
    cfg = config_from_dict({"context": {"watcher": {"debounce_ms": 100}}})
    assert cfg.watcher.debounce_ms == 100
    assert issues_of({"context": {"watcher": {"debounce": 1}}}) == {
        "context.watcher.debounce": "unknown key 'debounce'; did you mean 'debounce_ms'?"}


def test_config_is_immutable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        ContextConfig().query.default_k = 3  # type: ignore[misc]


def test_env_substitution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTX_DB", "/data/idx.duckdb")
    monkeypatch.delenv("CTX_UNSET", raising=False)
    cfg = config_from_dict({"storage": {"db_path": "${CTX_DB}"},
                            "engine": {"host": "${CTX_UNSET:-10.0.0.1}"},
                            "watcher": {"watch_paths": ["${CTX_UNSET:-src}", "x${CTX_DB}"]}})
    assert cfg.storage.db_path == "/data/idx.duckdb"
    assert cfg.engine.host == "10.0.0.1"
    assert cfg.watcher.watch_paths == ["src", "x/data/idx.duckdb"]
    assert issues_of({"engine": {"host": "${CTX_UNSET}"}}) == {
        "engine.host": "environment variable ${CTX_UNSET} is not set"}


# ---------------------------------------------------------------------------- messages

def test_unknown_keys_with_and_without_suggestion() -> None:
    found = issues_of({"watchr": {}, "watcher": {"ignore_pattern": []}, "zzz": {}})
    assert found["watchr"] == "unknown key 'watchr'; did you mean 'watcher'?"
    assert found["watcher.ignore_pattern"] == ("unknown key 'ignore_pattern'; did you mean "
                                               "'ignore_patterns'?")
    assert found["zzz"].startswith("unknown key 'zzz'; known keys: ")
    assert "watcher" in found["zzz"]


@pytest.mark.parametrize("section,key,value,message", [
    ("core", "enabled", "yes", "expected true or false, got string 'yes'"),
    ("engine", "port", True, "expected an integer, got boolean True"),
    ("engine", "port", 80.5, "expected an integer, got number 80.5"),
    ("query", "mmr_lambda", "high", "expected a number, got string 'high'"),
    ("engine", "host", 1, "expected a string, got integer 1"),
    ("watcher", "watch_paths", "src", "expected a list of strings, got 'src'"),
    ("watcher", "ignore_patterns", [1], "expected a list of strings, got [1]"),
    ("providers.semantic", "options", 3, "expected a table, got integer"),
    ("query", "mmr_lambda", 1.5, "1.5 is out of range; allowed 0.0 to 1.0"),
    ("engine", "port", 0, "0 is out of range; allowed 1 to 65535"),
    ("budget", "default_max_tokens", 0, "0 is out of range; allowed >= 1"),
    ("core", "mode", "cloud", "'cloud' is not one of: embedded, standalone, hybrid"),
    ("indexing", "binary_detection", "magic", "'magic' is not one of: extension, mime, content, all"),
])
def test_value_messages(section: str, key: str, value: object, message: str) -> None:
    raw: dict = {}
    node = raw
    for part in section.split("."):
        node = node.setdefault(part, {})
    node[key] = value
    assert issues_of(raw) == {f"{section}.{key}": message}


def test_tables_required() -> None:
    found = issues_of({"watcher": 3, "chunking": {"python": "big"}})
    assert found == {"watcher": "must be a table ([watcher]), got integer",
                     "chunking.python": "must be a table, got string"}


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    path = tmp_path / "context.toml"
    path.write_text('[query]\nmmr_lambda = 1.5\ndefault_k = "many"\n[storag]\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    keys = [i.key for i in info.value.issues]
    assert keys == ["query.mmr_lambda", "query.default_k", "storag"]
    assert str(info.value) == (f"{path}: query.mmr_lambda: 1.5 is out of range; allowed 0.0 "
                               "to 1.0 (and 2 more); run 'contextd validate-config'")


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[query\n")
    with pytest.raises(ConfigError) as info:
        load_config(bad)
    assert info.value.issues[0].key == "<file>"
    assert info.value.issues[0].message.startswith("not valid TOML: ")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "missing.toml")
    assert info.value.issues[0].message == "file not found"


# ---------------------------------------------------------------------------- file system

def project_with(root: Path, **sections: dict) -> Project:
    fname = str(root / "context.toml")
    return Project(root=root.resolve(), config=config_from_dict(sections, fname))


def checked(project: Project) -> dict[str, tuple[str, str]]:
    """{key: (severity, message)} of check_project."""
    return {i.key: (i.severity, i.message) for i in check_project(project)}


def test_defaults_pass_the_file_system_checks(tmp_path: Path) -> None:
    assert check_project(Project(root=tmp_path, config=ContextConfig())) == []


def test_watch_path_problems(tmp_path: Path) -> None:
    (tmp_path / "src" / "main").mkdir(parents=True)
    (tmp_path / "file.txt").write_text("x")
    found = checked(project_with(tmp_path, watcher={
        "watch_paths": ["src", "missing", "file.txt", "src/main", "/etc", "../"]}))
    root = tmp_path.resolve()
    assert found["watcher.watch_paths[1]"] == (
        "error", f"watch path does not exist: {root / 'missing'}")
    assert found["watcher.watch_paths[2]"] == (
        "error", f"watch path is not a directory: {root / 'file.txt'}")
    assert found["watcher.watch_paths[3]"] == (
        "warning", "'src/main' is inside watcher.watch_paths[0] ('src'); its files are "
                   "indexed once")
    assert found["watcher.watch_paths[4]"] == (
        "error", "/etc is a system directory (/etc); refusing to index it")
    assert found["watcher.watch_paths[5]"][1].startswith(
        f"watch path {root.parent} is outside the project root {root}")
    assert "watcher.watch_paths[0]" not in found
    same = checked(project_with(tmp_path, watcher={"watch_paths": ["src", "./src/"]}))
    assert same == {"watcher.watch_paths[1]": (
        "warning", "'./src/' names the same directory as watcher.watch_paths[0] ('src')")}


def test_auto_cannot_mix_with_paths(tmp_path: Path) -> None:
    found = checked(project_with(tmp_path, watcher={"watch_paths": ["auto", "."]}))
    assert found["watcher.watch_paths"] == (
        "error", '"auto" cannot be combined with explicit paths; it stands for the whole '
                 "project root")


@pytest.mark.parametrize("root,message", [
    ("/", "/ is far too broad a root; name the project's directories instead"),
    ("/usr", "/usr is far too broad a root; name the project's directories instead"),
    ("/proc/self", "is a system directory (/proc); refusing to index it"),
])
def test_dangerous_auto_roots(root: str, message: str) -> None:
    found = checked(Project(root=Path(root).resolve(), config=ContextConfig()))
    severity, text = found["watcher.watch_paths"]
    assert severity == "error" and text.endswith(message)


def test_home_is_refused_unless_named_absolutely() -> None:
    home = Path.home().resolve()
    found = checked(Project(root=home, config=ContextConfig()))
    assert found["watcher.watch_paths"] == ("error", f"{home} is your home directory; refusing "
                                            "to index it unless it is named explicitly as an "
                                            "absolute watch path")
    assert "error" in checked(project_with(home, watcher={"watch_paths": ["~"]})).get(
        "watcher.watch_paths[0]", ("",))[0]
    explicit = checked(project_with(home, watcher={"watch_paths": [str(home)]}))
    assert "watcher.watch_paths[0]" not in explicit


def test_tilde_warns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "proj").mkdir()
    found = checked(project_with(tmp_path, watcher={"watch_paths": ["~/proj"]}))
    assert found["watcher.watch_paths[0]"] == (
        "warning", "'~/proj' depends on the home directory; prefer an explicit absolute path")


def test_bad_globs_extensions_and_sizes(tmp_path: Path) -> None:
    found = checked(project_with(
        tmp_path, watcher={"ignore_patterns": ["*.log", "[z-a]", "build[", "[]]x", r"\[x"]},
        indexing={"size_exceptions": ["docs/*.md", "\\"], "allowed_extensions": ["py", ".md"],
                  "blocked_extensions": [".md", "*.exe", ". x"], "warn_file_size_mb": 9.0,
                  "max_file_size_mb": 4.0}))
    assert found["watcher.ignore_patterns[1]"][0] == "error"
    assert found["watcher.ignore_patterns[1]"][1].startswith("invalid pattern '[z-a]': ")
    assert found["watcher.ignore_patterns[2]"] == (
        "error", "invalid pattern 'build[': '[' without a closing ']' matches nothing "
                 "(write '\\[' for a literal bracket)")
    assert "watcher.ignore_patterns[3]" not in found and "watcher.ignore_patterns[4]" not in found
    assert found["indexing.size_exceptions[1]"][1].startswith("invalid pattern '\\\\': ")
    assert found["indexing.allowed_extensions[0]"] == (
        "error", "extension 'py' must start with '.' (write '.py')")
    assert found["indexing.blocked_extensions[1]"] == (
        "error", "extension '*.exe' must start with '.' (write '.exe')")
    assert found["indexing.blocked_extensions[2]"] == (
        "error", "extension '. x' is not a file extension like '.py'")
    assert found["indexing.blocked_extensions"] == (
        "warning", "also allowed: .md; blocking wins")
    assert found["indexing.warn_file_size_mb"] == (
        "warning", "9.0 is above max_file_size_mb (4.0); no file will ever trigger the warning")
    assert "watcher.ignore_patterns[0]" not in found


def test_no_ignore_patterns_warns(tmp_path: Path) -> None:
    found = checked(project_with(tmp_path, watcher={"ignore_patterns": []}))
    assert found == {"watcher.ignore_patterns": (
        "warning", "no ignore patterns: everything not git-ignored will be indexed")}


def test_issues_name_defaults_when_there_is_no_file() -> None:
    issues = check_project(Project(root=Path("/"), config=ContextConfig()))
    assert issues and all(i.file == "<defaults>" for i in issues)
    assert str(issues[0]).startswith("<defaults>: watcher.watch_paths: ")


def _dotted_keys(table: dict, prefix: str = "") -> set[str]:
    out = set()
    for key, value in table.items():
        dotted = f"{prefix}{key}"
        out |= _dotted_keys(value, dotted + ".") if isinstance(value, dict) else {dotted}
    return out


def test_the_repository_context_toml_is_valid_and_names_every_key() -> None:
    """The repo's own context.toml is the documented reference (issue 2): it must load and
    list every key ``contextd init`` writes, so a new key cannot be left undocumented."""
    import tomli

    from contextd.cli.boundary_cmds import render_documented_config

    repo_file = Path(__file__).resolve().parent.parent / "context.toml"
    load_config(repo_file)
    written = tomli.loads(repo_file.read_text())
    assert _dotted_keys(tomli.loads(render_documented_config())) <= _dotted_keys(
        written.get("context", written))
