"""The [engine], [storage] and [security] keys of the service: settings that cannot be
honoured are refused by name instead of being silently ignored."""

from __future__ import annotations

import pytest

from contextd.config import config_from_dict
from contextd.errors import ConfigError


def test_encrypt_db_is_refused_until_implemented() -> None:
    with pytest.raises(ConfigError) as raised:
        config_from_dict({"security": {"encrypt_db": True}}, "ctx.toml")
    text = str(raised.value)
    assert "security.encrypt_db" in text and "not implemented" in text


def test_tls_cert_needs_its_key() -> None:
    with pytest.raises(ConfigError, match="engine.tls_key"):
        config_from_dict({"engine": {"tls_cert": "/etc/ssl/c.pem"}}, "ctx.toml")
    config = config_from_dict({"engine": {"tls_cert": "c.pem", "tls_key": "k.pem"},
                               "storage": {"backup_keep": 3}})
    assert config.engine.tls_key == "k.pem" and config.storage.backup_keep == 3
