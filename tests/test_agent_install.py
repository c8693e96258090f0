"""`contextd install` / `uninstall` as a user runs them (``python -m contextd`` in a
subprocess) in a temporary HOME and project: each agent's file and format, idempotence, and
uninstall restoring every file byte for byte, other servers included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomli

from contextd.agents import plan as planning
from contextd.agents.catalog import AGENTS
from contextd.agents.launch import serve_command


def run(home: Path, root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTD_")}
    env.pop("XDG_CONFIG_HOME", None)
    env["HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), *args],
                          env=env, capture_output=True, text=True, timeout=60)


def run_json(home: Path, root: Path, *args: str) -> dict:
    proc = run(home, root, "--json", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def snapshot(*folders: Path) -> dict[str, bytes]:
    """Every file under the folders, backups aside."""
    return {str(path): path.read_bytes() for folder in folders for path in folder.rglob("*")
            if path.is_file() and not path.name.endswith(planning.BACKUP_SUFFIX)}


@pytest.fixture()
def places(tmp_path: Path) -> tuple[Path, Path]:
    home, root = tmp_path / "home", tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    home.mkdir()
    (root / "app.py").write_text("def main():\n    return 1\n")
    return home, root


OTHER_SERVER = {"command": "npx", "args": ["-y", "other-server"]}


def test_install_three_agents_is_idempotent_and_uninstall_restores_bytes(places):
    home, root = places
    # Files a user already has: another server (4-space JSON), notes, a Codex config.
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"other": OTHER_SERVER}},
                                               indent=4))
    (root / "AGENTS.md").write_text("# Notes\nRun make test.")  # no final newline
    (root / ".codex").mkdir()
    codex_text = '# mine\nmodel = "o4"\n\n[mcp_servers.other]\ncommand = "npx"\n'
    (root / ".codex" / "config.toml").write_text(codex_text)
    before = snapshot(home, root)

    agents = ["--agent", "claude-code", "--agent", "cursor", "--agent", "codex"]
    first = run_json(home, root, "install", *agents, "--yes")
    actions = {(c["agent"], c["role"]): c["action"] for c in first["changes"]}
    assert actions == {("claude-code", "config"): "updated",
                       ("claude-code", "instructions"): "created",
                       ("cursor", "config"): "created", ("cursor", "instructions"): "created",
                       ("codex", "config"): "updated", ("codex", "instructions"): "updated"}
    command = serve_command(root.resolve())
    assert command[-3:] == ["--root", str(root.resolve()), "serve"]

    claude = json.loads((root / ".mcp.json").read_text())["mcpServers"]
    assert claude == {"other": OTHER_SERVER,
                      "contextd": {"command": command[0], "args": command[1:]}}
    assert json.loads((root / ".cursor" / "mcp.json").read_text())["mcpServers"]["contextd"][
        "args"] == command[1:]
    codex = tomli.loads((root / ".codex" / "config.toml").read_text())
    assert codex["model"] == "o4" and set(codex["mcp_servers"]) == {"other", "contextd"}
    assert codex["mcp_servers"]["contextd"] == {"command": command[0], "args": command[1:]}
    assert (root / ".codex" / "config.toml").read_text().startswith(codex_text)
    for guide in (root / "CLAUDE.md", root / "AGENTS.md", root / ".cursor/rules/contextd.mdc"):
        assert "<!-- contextd:begin" in guide.read_text() and "query_context" in guide.read_text()
    assert (root / "AGENTS.md").read_text().startswith("# Notes\nRun make test.\n\n<!--")
    assert (root / ".cursor/rules/contextd.mdc").read_text().startswith("---\ndescription:")
    assert (root / (".mcp.json" + planning.BACKUP_SUFFIX)).read_bytes() == \
        before[str(root / ".mcp.json")]

    installed = snapshot(home, root)
    second = run_json(home, root, "install", *agents, "--yes")
    assert {c["action"] for c in second["changes"]} == {"unchanged"}
    assert snapshot(home, root) == installed

    run_json(home, root, "uninstall", *agents, "--yes")
    assert snapshot(home, root) == before
    assert not list(root.rglob("*" + planning.BACKUP_SUFFIX))
    assert not (root / ".cursor").exists()  # the folders install made go too


def test_uninstall_after_a_later_edit_takes_out_only_contextd(places):
    home, root = places
    run_json(home, root, "install", "--agent", "claude-code", "--yes")
    config = root / ".mcp.json"
    data = json.loads(config.read_text())
    data["mcpServers"]["added-later"] = OTHER_SERVER
    config.write_text(json.dumps(data, indent=2) + "\n")
    (root / "CLAUDE.md").write_text("# Mine\n\n" + (root / "CLAUDE.md").read_text())

    result = run_json(home, root, "uninstall", "--agent", "claude-code", "--yes")
    assert {c["action"] for c in result["changes"]} == {"updated"}
    assert json.loads(config.read_text()) == {"mcpServers": {"added-later": OTHER_SERVER}}
    assert (root / "CLAUDE.md").read_text() == "# Mine\n"


def test_user_scope_codex_keeps_the_users_config(places):
    home, root = places
    (home / ".codex").mkdir()
    original = 'model = "o4"  # keep me\n\n[mcp_servers.other]\ncommand = "npx"\nargs = ["x"]\n'
    (home / ".codex" / "config.toml").write_text(original)
    run_json(home, root, "install", "--agent", "codex", "--scope", "user", "--yes")
    data = tomli.loads((home / ".codex" / "config.toml").read_text())
    args = data["mcp_servers"]["contextd"]["args"]
    assert args[-1] == "serve" and "--root" not in args  # found from the agent's folder
    assert data["model"] == "o4" and data["mcp_servers"]["other"] == {"command": "npx",
                                                                       "args": ["x"]}
    assert "<!-- contextd:begin" in (home / ".codex" / "AGENTS.md").read_text()
    run_json(home, root, "uninstall", "--agent", "codex", "--scope", "user", "--yes")
    assert (home / ".codex" / "config.toml").read_text() == original
    assert not (home / ".codex" / "AGENTS.md").exists()


def test_dry_run_prints_the_diff_and_writes_nothing(places):
    home, root = places
    proc = run(home, root, "install", "--agent", "gemini", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert '+    "contextd": {' in proc.stdout and "GEMINI.md (after)" in proc.stdout
    assert not (root / ".gemini").exists() and not (root / "GEMINI.md").exists()


def test_a_jsonc_file_is_refused_in_one_line_and_left_alone(places):
    home, root = places
    (root / ".zed").mkdir()
    settings = '{\n  // my theme\n  "theme": "One Dark",\n}\n'
    (root / ".zed" / "settings.json").write_text(settings)
    proc = run(home, root, "install", "--agent", "zed", "--yes")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "not plain JSON" in proc.stderr and '"context_servers": "contextd": {' in proc.stderr
    assert (root / ".zed" / "settings.json").read_text() == settings


def test_windsurf_has_no_project_scope(places):
    home, root = places
    proc = run(home, root, "install", "--agent", "windsurf", "--yes")
    assert proc.returncode == 2 and "--scope user" in proc.stderr
    assert "Traceback" not in proc.stderr


# Every agent, every scope it has: (config file, keys down to the servers, entry form,
# instructions file), relative to the project (project scope) or HOME (user scope).
LINUX_EXPECTED = {
    ("claude-code", "project"): (".mcp.json", ["mcpServers"], "standard", "CLAUDE.md"),
    ("claude-code", "user"): (".claude.json", ["mcpServers"], "standard", ".claude/CLAUDE.md"),
    ("cursor", "project"): (".cursor/mcp.json", ["mcpServers"], "standard",
                            ".cursor/rules/contextd.mdc"),
    ("cursor", "user"): (".cursor/mcp.json", ["mcpServers"], "standard", None),
    ("codex", "project"): (".codex/config.toml", ["mcp_servers"], "toml", "AGENTS.md"),
    ("codex", "user"): (".codex/config.toml", ["mcp_servers"], "toml", ".codex/AGENTS.md"),
    ("vscode", "project"): (".vscode/mcp.json", ["servers"], "vscode",
                            ".github/copilot-instructions.md"),
    ("vscode", "user"): (".config/Code/User/mcp.json", ["servers"], "vscode", None),
    ("gemini", "project"): (".gemini/settings.json", ["mcpServers"], "standard", "GEMINI.md"),
    ("gemini", "user"): (".gemini/settings.json", ["mcpServers"], "standard",
                         ".gemini/GEMINI.md"),
    ("windsurf", "user"): (".codeium/windsurf/mcp_config.json", ["mcpServers"], "standard",
                           ".codeium/windsurf/memories/global_rules.md"),
    ("zed", "project"): (".zed/settings.json", ["context_servers"], "zed", "AGENTS.md"),
    ("zed", "user"): (".config/zed/settings.json", ["context_servers"], "zed", None),
    ("opencode", "project"): ("opencode.json", ["mcp"], "opencode", "AGENTS.md"),
    ("opencode", "user"): (".config/opencode/opencode.json", ["mcp"], "opencode",
                           ".config/opencode/AGENTS.md"),
}


@pytest.mark.skipif(sys.platform != "linux", reason="VS Code's user folder differs by OS")
def test_every_agent_and_scope_is_declared_as_expected():
    declared = {(name, scope) for name, agent in AGENTS.items() for scope in agent.config}
    assert declared == set(LINUX_EXPECTED)


@pytest.mark.skipif(sys.platform != "linux", reason="VS Code's user folder differs by OS")
@pytest.mark.parametrize("agent_scope", sorted(LINUX_EXPECTED))
def test_each_agent_writes_its_file_in_its_format(tmp_path, agent_scope):
    name, scope = agent_scope
    config_rel, keys, form, guide_rel = LINUX_EXPECTED[agent_scope]
    home, root = tmp_path / "home", tmp_path / "proj"
    home.mkdir()
    root.mkdir()
    base = root if scope == "project" else home
    command = serve_command(root if scope == "project" else None)
    changes = planning.plan([AGENTS[name]], scope, root, home, command, install=True)
    planning.apply(changes)
    written = sorted(str(c.path.relative_to(base)) for c in changes)
    assert written == sorted(filter(None, [config_rel, guide_rel]))

    text = (base / config_rel).read_text()
    node = tomli.loads(text) if form == "toml" else json.loads(text)
    for key in keys:
        node = node[key]
    entry = node["contextd"]
    if form == "opencode":
        assert entry == {"type": "local", "command": command, "enabled": True}
    else:
        assert [entry["command"], *entry["args"]] == command
        assert entry.get("type") == ("stdio" if form == "vscode" else None)
        assert entry.get("source") == ("custom" if form == "zed" else None)
    if guide_rel:
        assert "<!-- contextd:end -->" in (base / guide_rel).read_text()

    planning.apply(planning.plan([AGENTS[name]], scope, root, home, command, install=False),
                   (root, home))
    assert not list(home.iterdir()) and not list(root.iterdir())  # its folders too


def test_without_agent_it_asks_which_and_confirms(places):
    """Interactive: a terminal on stdin, agents chosen by number and by name, one confirm."""
    import pty

    home, root = places
    controller, terminal = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTD_")}
    env["HOME"] = str(home)
    proc = subprocess.Popen([sys.executable, "-m", "contextd", "--root", str(root), "install"],
                            stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, text=True)
    os.close(terminal)
    os.write(controller, b"1,codex\ny\n")
    out, err = proc.communicate(timeout=60)
    os.close(controller)
    assert proc.returncode == 0, err
    assert "1. claude-code" in err and "Write these changes?" in err
    assert {line.split()[1] for line in out.splitlines() if line.startswith("created")} == {
        str(root / name) for name in (".mcp.json", "CLAUDE.md", ".codex/config.toml",
                                      "AGENTS.md")}
