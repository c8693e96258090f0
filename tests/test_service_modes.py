"""``ContextModule.open(mode=...)``: standalone (every call to the service, no database or
model in the caller) and hybrid (the local index, the service while the local one is held
by a process that does not answer, and back), against a real ``contextd server``."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from contextd import ContextModule
from contextd.runtime.election import lock_path
from contextd.config.project import Project
from contextd.api import remote as modes
from service_helpers import Server, cli, env_for, running_server

TASK = {"title": "Token refresh fails", "description": "refresh an expired JWT access token",
        "complexity": 3, "task_type": "BUGFIX", "task_id": "T-1"}


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("modes"),
                        "[engine]\nrate_limit_per_s = 0\n") as server:
        yield server


def caller_config(server: Server, mode: str) -> str:
    return (f'[core]\nmode = "{mode}"\n[engine]\nport = {server.port}\ntimeout_ms = 1500\n'
            "retry_attempts = 1\nbackoff_ms = 50\n")


def test_standalone_imports_no_database_or_model(service, tmp_path) -> None:
    caller = tmp_path / "caller"
    caller.mkdir()
    (caller / "context.toml").write_text(caller_config(service, "standalone"))
    script = textwrap.dedent(f"""
        import json, sys
        from contextd import ContextModule
        module = ContextModule.open({str(caller)!r})
        context = module.get_task_context({TASK!r})
        stats = module.stats()
        module.shutdown()
        print(json.dumps({{"files": [s.file_path for s in context.snippets],
                          "tokens": context.total_tokens,
                          "indexed": stats["storage"]["total_files"],
                          "heavy": sorted(m for m in ("duckdb", "onnxruntime", "torch",
                                          "tree_sitter") if m in sys.modules)}}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=service.env, timeout=120)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["heavy"] == []
    assert answer["files"][0] == "auth/tokens.py" and answer["tokens"] > 0
    assert answer["indexed"] == 4
    # Nothing was created in the caller's directory: no index there.
    assert not (caller / ".contextd").exists()


def test_standalone_without_a_service_falls_back_to_empty_context(tmp_path) -> None:
    (tmp_path / "context.toml").write_text(
        '[core]\nmode = "standalone"\n[engine]\nport = 9\ntimeout_ms = 300\n'
        "retry_attempts = 0\n")
    module = ContextModule.open(str(tmp_path))
    context = module.get_task_context(TASK)
    assert context.snippets == () and "unreachable" in context.notes[0]
    module.shutdown()


def test_hybrid_uses_the_service_while_the_local_index_is_held(service, tmp_path, caplog,
                                                               monkeypatch) -> None:
    local = tmp_path / "local"
    shutil.copytree(service.root, local, ignore=shutil.ignore_patterns(".contextd"))
    (local / "context.toml").write_text(caller_config(service, "hybrid"))
    env = env_for(tmp_path / "run")
    monkeypatch.setenv("XDG_RUNTIME_DIR", env["XDG_RUNTIME_DIR"])
    assert cli(local, env, "refresh").returncode == 0
    # Another process holds the owner lock and serves nothing (hung, or another machine's).
    lock = lock_path(Project.open(str(local)).db_path)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(600)\n")],
        stdout=subprocess.PIPE, text=True)
    monkeypatch.setattr(modes, "LOCAL_RETRY_S", 0.5)
    module = None
    try:
        assert holder.stdout.readline().strip() == "held"
        caplog.set_level(logging.WARNING, logger="contextd.modes")
        module = ContextModule.open(str(local))
        first = module.get_task_context(TASK)
        assert module.mode == "standalone"
        assert first.snippets[0].file_path == "auth/tokens.py"
        second = module.get_task_context(TASK)
        assert [s.chunk_id for s in second.snippets] == [s.chunk_id for s in first.snippets]
        switches = [r.getMessage() for r in caplog.records if "hybrid" in r.getMessage()]
        assert len(switches) == 1 and "standalone" in switches[0]
        holder.kill()
        holder.wait()
        time.sleep(0.6)
        back = module.get_task_context(TASK)
        assert module.mode == "embedded"
        assert back.snippets[0].file_path == "auth/tokens.py"
        switches = [r.getMessage() for r in caplog.records if "hybrid" in r.getMessage()]
        assert len(switches) == 2 and "embedded" in switches[1]
    finally:
        if holder.poll() is None:
            holder.kill()
        if module is not None:
            module.shutdown()
