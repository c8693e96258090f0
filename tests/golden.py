"""The golden repository as the tests and benchmarks use it: copied to a temporary directory,
made a git repository with a short history (so the git-history provider has something to
read), and indexed by the real indexer. Its fixtures are in conftest.py.
"""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping

GOLDEN_REPO = Path(__file__).parent / "fixtures" / "golden_repo"
GIT_ENV = {"GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.com",
           "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.com",
           "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1", "PATH": "/usr/bin:/bin"}


def git(root: Path, *args: str) -> str:
    """Run git in ``root`` with a fixed identity and no user configuration."""
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True, env=GIT_ENV).stdout


def make_golden_copy(target: Path) -> Path:
    """A copy of the golden repository with a git history: an initial import, then two
    commits that change auth and orders together (co-change neighbours)."""
    shutil.copytree(GOLDEN_REPO, target)
    git(target, "init", "-q", "-b", "main")
    git(target, "add", "-A")
    git(target, "commit", "-q", "-m", "Initial import of shoptrack")
    for message in ("Refund payments when an order is cancelled",
                    "Charge cards with an idempotency key so retries are safe"):
        for rel in ("src/shoptrack/orders.py", "src/shoptrack/payments.py"):
            with open(target / rel, "a") as fh:
                fh.write(f"# {message}\n")
        git(target, "commit", "-q", "-am", message)
    return target


def open_indexed(root: Path):
    """(project, store) of the project at ``root``, indexed by the real indexer without
    vectors (the caller closes the store)."""
    from contextd.config.project import Project
    from contextd.indexer import Indexer
    from contextd.store import open_store

    project = Project.open(root)
    store = open_store(project)
    Indexer(project, store, embed=False).ensure_indexed()
    return project, store


def write_files(root: Path, files: Mapping[str, str]) -> Path:
    """A small project at ``root``: each relative path with its (dedented) text."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return root


@contextmanager
def indexed_module(root: Path) -> Iterator:
    """A warm ContextModule over the project at ``root`` (lexical and symbol index, no
    vectors), shut down with its store afterwards."""
    from contextd import ContextModule

    project, store = open_indexed(root)
    module = ContextModule(project, store)
    module.pipeline.warm_up(wait=True)
    try:
        yield module
    finally:
        module.shutdown()
        store.close()
