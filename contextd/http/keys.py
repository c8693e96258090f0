"""API keys of the standalone service: created, listed and revoked with ``contextd keys``.

A key is ``ctxd_<id>_<secret>``: ``id`` (8 hex digits) names it in listings and logs, the
secret is 32 random bytes. Only the SHA-256 of the whole key is stored, in
``<db dir>/api_keys.json`` (mode 0600); the plaintext is shown once, at creation. A salted
slow hash (scrypt) protects low-entropy passwords; a 256-bit random key cannot be guessed
from its SHA-256, and a fast hash keeps the check off every request's latency. The hash is
compared with :func:`hmac.compare_digest` (constant time).

Scopes: ``read`` (query, stats, MCP) and ``write`` (also add/delete context and backups).
The service re-reads the file when it changes, so a revoked key stops working at once.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import threading
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from contextd.errors import ContextdError, UsageError

KEYS_FILENAME = "api_keys.json"
KEY_PREFIX = "ctxd_"
SCOPES = ("read", "write")


@dataclass(frozen=True)
class ApiKey:
    """One stored key (never its plaintext)."""

    key_id: str
    name: str
    scope: str
    sha256: str
    created_at: str

    def allows(self, needed: str) -> bool:
        """Whether this key may do what needs ``needed`` (write implies read)."""
        return self.scope == "write" or needed == "read"

    def public(self) -> dict[str, Any]:
        """What ``keys list`` shows: everything but the hash."""
        return {"key_id": self.key_id, "name": self.name, "scope": self.scope,
                "created_at": self.created_at}


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class KeyRing:
    """The keys file of one project, re-read when it changes on disk."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._keys: dict[str, ApiKey] = {}

    @classmethod
    def of(cls, project: Any) -> "KeyRing":
        """The key ring beside a project's database."""
        return cls(Path(project.db_path).resolve().parent / KEYS_FILENAME)

    # ----- reading ---------------------------------------------------------------------
    def keys(self) -> list[ApiKey]:
        """Every key, oldest first."""
        with self._lock:
            self._reload()
            return sorted(self._keys.values(), key=lambda k: k.created_at)

    def _reload(self) -> None:
        try:
            info = self.path.stat()
        except FileNotFoundError:
            self._keys, self._stamp = {}, None
            return
        stamp = (info.st_mtime_ns, info.st_size)
        if stamp == self._stamp:
            return
        try:
            rows = json.loads(self.path.read_text(encoding="utf-8")).get("keys", [])
            self._keys = {row["key_id"]: ApiKey(**row) for row in rows}
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ContextdError(f"{self.path} is not a valid keys file ({exc}); fix or delete "
                                "it and create keys again") from None
        self._stamp = stamp

    def check(self, presented: str) -> ApiKey | None:
        """The key matching a presented plaintext, or None. The id is looked up, then the
        hashes compared in constant time (an unknown id still costs one comparison)."""
        parts = presented.split("_")
        key_id = parts[1] if len(parts) == 3 and presented.startswith(KEY_PREFIX) else ""
        with self._lock:
            self._reload()
            stored = self._keys.get(key_id)
        expected = stored.sha256 if stored else "0" * 64
        ok = hmac.compare_digest(_digest(presented), expected)
        return stored if ok and stored is not None else None

    # ----- writing ---------------------------------------------------------------------
    def create(self, name: str, scope: str) -> tuple[ApiKey, str]:
        """A new key; returns it and its plaintext (shown once, never stored)."""
        if scope not in SCOPES:
            raise UsageError(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
        key_id = secrets.token_hex(4)
        plaintext = f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32).replace('_', '-')}"
        key = ApiKey(key_id=key_id, name=name, scope=scope, sha256=_digest(plaintext),
                     created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
        with self._lock:
            self._reload()
            self._keys[key_id] = key
            self._write()
        return key, plaintext

    def revoke(self, key_id: str) -> ApiKey:
        """Remove a key by id (or by its unique name)."""
        with self._lock:
            self._reload()
            found = self._keys.get(key_id) or next(
                (k for k in self._keys.values() if k.name == key_id), None)
            if found is None:
                raise UsageError(f"no API key {key_id!r}; see `contextd keys list`")
            del self._keys[found.key_id]
            self._write()
            return found

    def _write(self) -> None:
        """Replace the file atomically, private to this user."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"keys": [asdict(k) for k in self._keys.values()]}, fh, indent=2)
        os.replace(tmp, self.path)
        self._stamp = None
