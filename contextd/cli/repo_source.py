"""``contextd query --repo GIT_URL_OR_PATH``: answer from another repository than this one.

For a dependency's source or a repository the agent has not cloned. The repository's index
lives in the cache (``$XDG_CACHE_HOME/contextd/repos/<name>-<digest>/``), never in the
repository itself: a local path (a checkout, a package's source in a virtual environment) is
indexed where it is, with the index and its settings in the cache, and a git URL is cloned
there first (``git clone --depth 1``; a later query reuses the clone). The cache folder holds
a context.toml naming the index file, so every later command and the background owner find
the same index; the repository's own context.toml, written for its authors' machines, is not
read.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from contextd.errors import ContextdError, UsageError

CACHE_FOLDER = "repos"
# A clone that takes longer than this is given up (a huge repository, a stalled network).
CLONE_TIMEOUT_S = 600
URL = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|[\w.-]+@[\w.-]+:)")


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "contextd" / CACHE_FOLDER


def prepared_repository(source: str) -> tuple[Path, Path]:
    """(project root, context.toml) of the repository ``source`` names: a local folder as it
    is, a git URL cloned into the cache on first use."""
    local = Path(source).expanduser()
    if local.is_dir():
        root = local.resolve()
        folder = _cache_folder(str(root), root.name)
    elif URL.match(source):
        name = re.sub(r"\.git$", "", source.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1])
        folder = _cache_folder(source, name or "repository")
        root = folder / "src"
        if not root.is_dir():
            _clone(source, root)
    else:
        raise UsageError(f"--repo {source}: neither a folder nor a git URL (https://..., "
                         "ssh://..., git@host:owner/name)")
    config = folder / "context.toml"
    if not config.is_file():
        index = folder / "index" / "context.duckdb"
        config.write_text("# The index of a repository queried with `contextd query --repo`.\n"
                          f"[storage]\ndb_path = {_toml_string(str(index))}\n",
                          encoding="utf-8")
    return root, config


def _cache_folder(key: str, name: str) -> Path:
    digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.") or "repository"
    folder = cache_root() / f"{slug}-{digest}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _clone(url: str, destination: Path) -> None:
    partial = destination.with_name(destination.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)  # an earlier clone that was interrupted
    try:
        done = subprocess.run(["git", "clone", "--depth", "1", "--quiet", url, str(partial)],
                              capture_output=True, text=True, timeout=CLONE_TIMEOUT_S,
                              stdin=subprocess.DEVNULL,
                              env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
    except FileNotFoundError:
        raise ContextdError("--repo with a URL needs git, which is not installed") from None
    except subprocess.TimeoutExpired:
        raise ContextdError(f"git clone {url} took over {CLONE_TIMEOUT_S} s; clone it "
                            "yourself and pass the folder to --repo") from None
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise ContextdError(f"git clone {url} failed: {reason}")
    partial.rename(destination)


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
