"""The wheel installs providers/, chunkers/ and schema.sql under the contextd namespace only,
and works once installed.

In the repository the top-level ``providers``, ``chunkers`` and ``schema.sql`` are symlinks into
contextd/ (the design card's layout); a wheel must never ship them as top-level names, or
``import providers`` would collide with anything else installed.
"""

from __future__ import annotations

import pytest

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Never copied: environments, caches, and build outputs whose stale files would end up in the
# wheel (setuptools does not clean build/).
_SKIP = shutil.ignore_patterns(".git", ".venv", ".venv-*", "build", "dist", "*.egg-info", ".cache",
                               "__pycache__", ".pytest_cache", ".contextd")


def test_top_level_entries_are_links_into_the_package() -> None:
    for name in ("providers", "chunkers", "schema.sql"):
        link = REPO / name
        assert link.is_symlink(), name
        assert link.resolve() == (REPO / "contextd" / name).resolve()


@pytest.mark.slow
def test_wheel_ships_everything_under_contextd(tmp_path: Path) -> None:
    # Built from a clean copy (links kept as links), so the checkout is not written to.
    source = tmp_path / "src"
    shutil.copytree(REPO, source, symlinks=True, ignore=_SKIP)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path / "wheels"), str(source)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    wheels = list((tmp_path / "wheels").glob("contextd-*.whl"))
    assert len(wheels) == 1
    names = zipfile.ZipFile(wheels[0]).namelist()
    assert "contextd/schema.sql" in names
    assert "contextd/providers/__init__.py" in names
    assert "contextd/chunkers/__init__.py" in names
    top_level = {name.split("/", 1)[0] for name in names}
    assert not top_level & {"providers", "chunkers", "schema.sql", "tests", "benchmarks"}
    assert {t for t in top_level if not t.endswith(".dist-info")} == {"contextd"}
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheels[0]).read(entry_points).decode()
    assert "contextd = contextd.__main__:main" in text
    assert {"contextd/migrations/001_initial.sql", "contextd/chunkers/queries/rust.scm",
            "contextd/sessions/templates/basic.md.j2", "contextd/sessions/templates/paper.json",
            "contextd/store/postgres/migrations/001_initial.sql"} <= set(names)
    # The embedding model ships inside (the default install has no model package, no torch).
    model = "contextd/models/all-MiniLM-L6-v2/"
    assert {model + "model.safetensors", model + "tokenizer.json", model + "config.json",
            model + "1_Pooling/config.json"} <= set(names)
    _installed_wheel_works(wheels[0], tmp_path / "site")


def _installed_wheel_works(wheel: Path, site: Path) -> None:
    """Install the wheel alone (dependencies come from this venv) and use it from another
    directory: the data files (tree-sitter queries, migrations) must load from the install."""
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                           "--target", str(site), str(wheel)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    script = ("import contextd, sys; from contextd.store.duckdb import DuckDBStore; "
              "print(contextd.__file__); "
              "DuckDBStore(sys.argv[1]).close()")
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.run([sys.executable, "-c", script, str(site.parent / "i.duckdb")],
                          cwd=site.parent, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(site / "contextd" / "__init__.py")
    fixture = REPO / "tests" / "fixtures" / "chunkers" / "sample.rs"
    proc = subprocess.run([sys.executable, "-m", "contextd", "--json", "chunks", str(fixture)],
                          cwd=site.parent, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["language"] == "rust" and "hash_password" in {
        c["label"] for c in result["chunks"]}
