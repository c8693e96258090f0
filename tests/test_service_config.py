"""The [engine], [storage] and [security] keys of the service: settings that cannot be
honoured are refused by name instead of being silently ignored."""

from __future__ import annotations

import pytest

from contextd.config.loading import config_from_dict
from contextd.errors import ConfigError


def test_encryption_without_a_key_is_one_clear_error(tmp_path, monkeypatch) -> None:
    from contextd.runtime.engine import Engine
    from contextd.errors import StoreError

    (tmp_path / "context.toml").write_text(
        '[security]\nencrypt_db = true\nkey_env = "NO_SUCH_CONTEXTD_KEY"\n')
    monkeypatch.delenv("NO_SUCH_CONTEXTD_KEY", raising=False)
    with pytest.raises(StoreError, match="NO_SUCH_CONTEXTD_KEY.* is missing"):
        Engine.open(str(tmp_path))
    assert not (tmp_path / ".contextd" / "context.duckdb").exists()


def test_tls_cert_needs_its_key() -> None:
    with pytest.raises(ConfigError, match="engine.tls_key"):
        config_from_dict({"engine": {"tls_cert": "/etc/ssl/c.pem"}}, "ctx.toml")
    config = config_from_dict({"engine": {"tls_cert": "c.pem", "tls_key": "k.pem"},
                               "storage": {"backup_keep": 3}})
    assert config.engine.tls_key == "k.pem" and config.storage.backup_keep == 3
