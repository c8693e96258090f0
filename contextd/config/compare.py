"""Which settings differ between two configurations (``reload_config`` says what it changed)."""

from __future__ import annotations

import dataclasses
from typing import Any

from contextd.config.sections import SECTIONS, ContextConfig


def _flat(value: Any, prefix: str) -> dict[str, Any]:
    if dataclasses.is_dataclass(value):
        return {k: v for f in dataclasses.fields(value) if not f.metadata.get("internal")
                for k, v in _flat(getattr(value, f.name), f"{prefix}.{f.name}").items()}
    if isinstance(value, dict) and value and all(dataclasses.is_dataclass(v)
                                                 for v in value.values()):
        return {k: v for name, sub in value.items()
                for k, v in _flat(sub, f"{prefix}.{name}").items()}
    return {prefix: value}


def changed_keys(old: ContextConfig, new: ContextConfig) -> list[str]:
    """Dotted keys whose value differs (a key present on one side only counts too)."""
    before = {k: v for name in SECTIONS for k, v in _flat(getattr(old, name), name).items()}
    after = {k: v for name in SECTIONS for k, v in _flat(getattr(new, name), name).items()}
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
