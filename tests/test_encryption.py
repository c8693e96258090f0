"""Encryption at rest (``[security] encrypt_db``) through the real CLI: the index file and
its backups hold no plaintext, a wrong or missing key is one clear error, the key rotates,
and a backup restores."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from contextd.crypto import plaintext_dir, side_file
from contextd.crypto.sealed_file import WrongKey, verify_key
from contextd.web.feed import ProgressFeed
from contextd.config.project import Project
from service_helpers import cli, env_for, make_project

KEY = "correct horse battery staple 42"
SECRET_TEXTS = (b"refresh_token", b"Refresh an expired JWT", b"InvoiceTotals", b"ledger")


def _no_plaintext(path: Path) -> None:
    data = path.read_bytes()
    assert data.startswith(b"CTXDENC1") and b"DUCK" not in data[:4096]
    assert not any(text in data for text in SECRET_TEXTS)


def _query(root, env) -> list[str]:
    done = cli(root, env, "--json", "query", "refresh an expired JWT token", "--k", "2")
    assert done.returncode == 0, done.stderr
    return [h["file_path"] for h in json.loads(done.stdout)["hits"]]


@pytest.mark.slow
def test_sealed_index_keys_backups_and_rotation(tmp_path) -> None:
    root = make_project(tmp_path / "proj", "[security]\nencrypt_db = true\n")
    env = env_for(tmp_path / "run", CONTEXTD_DB_KEY=KEY)
    db = Project.open(str(root)).db_path
    assert cli(root, env, "refresh").returncode == 0
    _no_plaintext(db)
    assert not list(plaintext_dir(db).glob("context.duckdb*"))  # nothing left decrypted
    assert _query(root, env)[0] == "auth/tokens.py"

    for bad_env, message in (({**env, "CONTEXTD_DB_KEY": "another key entirely"}, "wrong key"),
                             ({**env, "CONTEXTD_DB_KEY": ""}, "missing")):
        done = cli(root, bad_env, "query", "tokens")
        assert done.returncode == 1 and message in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    _no_plaintext(db)

    backup = json.loads(cli(root, env, "--json", "backup").stdout)["path"]
    _no_plaintext(Path(backup))

    new_env = {**env, "NEW_DB_KEY": "a brand new key of ours"}
    refused = cli(root, new_env, "keys", "rotate-db-key")
    assert refused.returncode == 2
    rotated = cli(root, new_env, "--json", "keys", "rotate-db-key", "--new-key-env", "NEW_DB_KEY")
    assert rotated.returncode == 0, rotated.stderr
    assert json.loads(rotated.stdout)["reencrypted"] == [str(db.resolve()), backup]
    assert "wrong key" in cli(root, env, "query", "tokens").stderr
    env = {**env, "CONTEXTD_DB_KEY": "a brand new key of ours"}
    assert _query(root, env)[0] == "auth/tokens.py"

    db.unlink()
    restored = cli(root, env, "--json", "restore", backup)
    assert restored.returncode == 0, restored.stderr
    _no_plaintext(db)
    assert _query(root, env)[0] == "auth/tokens.py"


@pytest.mark.slow
def test_writes_survive_an_owner_killed_before_it_sealed(tmp_path) -> None:
    root = make_project(tmp_path / "proj", "[security]\nencrypt_db = true\n")
    env = env_for(tmp_path / "run", CONTEXTD_DB_KEY=KEY)
    assert cli(root, env, "refresh").returncode == 0
    (root / "docs" / "late.md").write_text("# Late\n\nThe wombat migration runbook.\n")
    # An owner indexes the new file and dies without closing (no seal since its start).
    script = ("import os\nfrom contextd.runtime.engine import Engine\n"
              f"engine = Engine.open({str(root)!r})\nengine.refresh()\nos._exit(0)\n")
    assert subprocess.run([sys.executable, "-c", script], env=env, timeout=120).returncode == 0
    assert b"wombat" not in Project.open(str(root)).db_path.read_bytes()
    done = cli(root, env, "--json", "query", "wombat migration runbook", "--k", "1")
    assert json.loads(done.stdout)["hits"][0]["file_path"] == "docs/late.md"
    _no_plaintext(Project.open(str(root)).db_path)


def _crash_after_indexing(root: Path, env: dict, name: str, text: str) -> None:
    """An owner indexes a new file and dies without closing: its decrypted copy, newer than
    the sealed file, stays in /dev/shm."""
    (root / "docs" / name).write_text(text)
    script = ("import os\nfrom contextd.runtime.engine import Engine\n"
              f"engine = Engine.open({str(root)!r})\nengine.refresh()\nos._exit(0)\n")
    assert subprocess.run([sys.executable, "-c", script], env=env, timeout=120).returncode == 0


@pytest.mark.slow
def test_a_crashed_owners_copy_opens_only_with_the_right_key(tmp_path) -> None:
    """Issue 28: the leftover copy was reopened with any key, and sealed with it on exit."""
    root = make_project(tmp_path / "proj", "[security]\nencrypt_db = true\n")
    env = env_for(tmp_path / "run", CONTEXTD_DB_KEY=KEY)
    db = Project.open(str(root)).db_path
    assert cli(root, env, "refresh").returncode == 0
    _crash_after_indexing(root, env, "late.md", "# Late\n\nThe wombat migration runbook.\n")
    assert list(plaintext_dir(db).glob("context.duckdb"))  # the leftover copy
    wrong = {**env, "CONTEXTD_DB_KEY": "another key entirely"}
    done = cli(root, wrong, "--json", "query", "wombat migration runbook", "--k", "1")
    assert done.returncode == 1 and "wrong key" in done.stderr, done.stdout
    verify_key(db, KEY.encode())  # still sealed with the owner's key
    done = cli(root, env, "--json", "query", "wombat migration runbook", "--k", "1")
    assert json.loads(done.stdout)["hits"][0]["file_path"] == "docs/late.md"
    verify_key(db, KEY.encode())
    with pytest.raises(WrongKey):
        verify_key(db, b"another key entirely")


def test_a_copy_left_before_the_first_seal_opens_only_with_the_right_key(tmp_path) -> None:
    """Issue 40: the first owner of a new index dies before its first seal, so its decrypted
    copy has no sealed file beside it to try a key on; a wrong key read the copy and sealed
    it, locking the right key out (12 of 12 tries)."""
    from contextd.store.encrypted import EncryptedDuckDBStore

    sealed = tmp_path / "index" / "context.duckdb"
    # The first owner writes, then dies at the moment of its first seal.
    script = ("import os\nfrom contextd.store.encrypted import EncryptedDuckDBStore\n"
              "def die(store):\n    store.set_meta('first_owner', 'wrote this')\n"
              "    os._exit(0)\n"
              f"EncryptedDuckDBStore.seal = die\nEncryptedDuckDBStore({str(sealed)!r}, "
              f"{KEY.encode()!r})\n")
    assert subprocess.run([sys.executable, "-c", script], timeout=60).returncode == 0
    assert not sealed.exists() and (plaintext_dir(sealed) / "context.duckdb").exists()
    with pytest.raises(WrongKey, match="wrong key"):
        EncryptedDuckDBStore(sealed, b"another key entirely")
    assert not sealed.exists()  # nothing was sealed with the wrong key
    store = EncryptedDuckDBStore(sealed, KEY.encode())
    assert store.get_meta("first_owner") == "wrote this"
    store.close()
    verify_key(sealed, KEY.encode())
    with pytest.raises(WrongKey):
        EncryptedDuckDBStore(sealed, b"another key entirely")
    store = EncryptedDuckDBStore(sealed, KEY.encode())
    assert store.get_meta("first_owner") == "wrote this"
    store.close()


@pytest.mark.slow
def test_rotation_reencrypts_the_database_a_restore_replaced(tmp_path) -> None:
    root = make_project(tmp_path / "proj", "[security]\nencrypt_db = true\n")
    env = env_for(tmp_path / "run", CONTEXTD_DB_KEY=KEY, NEW_DB_KEY="a brand new key of ours")
    db = Project.open(str(root)).db_path
    assert cli(root, env, "refresh").returncode == 0
    backup = json.loads(cli(root, env, "--json", "backup").stdout)["path"]
    assert cli(root, env, "restore", backup).returncode == 0
    replaced = db.with_name(db.name + ".before-restore")
    verify_key(replaced, KEY.encode())
    rotated = cli(root, env, "--json", "keys", "rotate-db-key", "--new-key-env", "NEW_DB_KEY")
    assert rotated.returncode == 0, rotated.stderr
    assert str(replaced.resolve()) in json.loads(rotated.stdout)["reencrypted"]
    verify_key(replaced, b"a brand new key of ours")
    with pytest.raises(WrongKey):
        verify_key(replaced, KEY.encode())


def test_side_files_stay_off_the_disk_while_encrypted(tmp_path) -> None:
    """progress.jsonl and the process logs name files and jobs: with encrypt_db on they go
    to the private memory-backed directory, never beside the sealed database."""
    sealed = Project.open(str(make_project(tmp_path / "a", "[security]\nencrypt_db = true\n")))
    plain = Project.open(str(make_project(tmp_path / "b")))
    for name in ("progress.jsonl", "owner.log", "index-manager.log"):
        assert side_file(sealed, name).parent == plaintext_dir(sealed.db_path)
        assert side_file(plain, name) == plain.db_path.parent / name
    feed = ProgressFeed(None, side_file(sealed, "progress.jsonl"), 100)
    feed._append([{"event": "start", "file": "src/secret_plans.py"}])
    assert feed.entries()[0]["file"] == "src/secret_plans.py"
    assert not list(sealed.db_path.parent.glob("progress*"))
