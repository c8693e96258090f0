"""Which workspace of a shared database a project is, and the advisory-lock keys it uses.

The id must be the same on every machine of a team, so it hashes what the clones share: the
git remote (credentials stripped, ``git@host:org/repo.git`` and ``https://host/org/repo`` made
equal) plus the project's place inside the repository (a monorepo may hold several
projects). A project without a remote is identified by its absolute path, which is all it has.
``storage.workspace`` names the workspace explicitly instead.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

WORKSPACE_ID_LENGTH = 16

_SCP_LIKE_RE = re.compile(r"^(?:[^@/]+@)?([^:/]+):(?!//)(.+)$")
_SCHEME_RE = re.compile(r"^[a-z][a-z0-9+.-]*://(?:[^@/]*@)?([^/]+)(/.*)?$", re.I)


def normalise_remote(url: str) -> str:
    """``host/org/repo`` of a git remote URL: scheme, user, password, port-less ssh syntax and
    a trailing ``.git`` or ``/`` dropped, the host lower-cased."""
    url = url.strip()
    match = _SCHEME_RE.match(url)
    if match:
        host, path = match.group(1), match.group(2) or ""
    else:
        match = _SCP_LIKE_RE.match(url)
        if not match:
            return url.rstrip("/").removesuffix(".git")
        host, path = match.group(1), "/" + match.group(2)
    path = path.rstrip("/").removesuffix(".git").rstrip("/")
    return f"{host.lower()}{path}"


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


def project_identity(root: Path, name: str = "") -> str:
    """What the workspace id hashes (also shown by ``contextd workspaces list``)."""
    if name:
        return f"name:{name}"
    root = Path(root).resolve()
    remote = _git(root, "config", "--get", "remote.origin.url")
    top = _git(root, "rev-parse", "--show-toplevel")
    if remote and top:
        inside = root.relative_to(Path(top).resolve()).as_posix() if root != Path(top).resolve() \
            else "."
        return f"git:{normalise_remote(remote)}:{inside}"
    return f"path:{root.as_posix()}"


def workspace_id(identity: str) -> str:
    """A short stable id of an identity (16 hex characters of its SHA-256)."""
    return hashlib.sha256(identity.encode("utf-8")).hexdigest()[:WORKSPACE_ID_LENGTH]


def lock_key(workspace: str, purpose: str) -> int:
    """A signed 64-bit advisory-lock key for ``purpose`` (``rebuild``, ``file:<path>``) in a
    workspace; distinct workspaces never share a key in practice (a 64-bit hash)."""
    digest = hashlib.blake2b(f"{workspace}\0{purpose}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)
