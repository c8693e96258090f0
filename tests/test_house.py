"""The house rules CI enforces, as pyproject.toml configures them: ``ruff check`` over the
repository and ``mypy`` over the core packages. Each runs from this test's own venv (the dev
extra installs both) and a finding fails the test with the tool's own report."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent


def run_tool(name: str, *args: str) -> subprocess.CompletedProcess:
    tool = VENV_BIN / name
    assert tool.exists(), f"{name} is not in {VENV_BIN}: pip install -e '.[dev]'"
    return subprocess.run([str(tool), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_ruff_finds_nothing():
    proc = run_tool("ruff", "check", "--output-format", "concise", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_passes_on_the_core_packages():
    proc = run_tool("mypy")
    assert proc.returncode == 0, proc.stdout + proc.stderr
