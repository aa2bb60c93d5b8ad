"""Every setting as (env var, default, description): for the README table and its test."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic_core import PydanticUndefined

from shared.settings import Settings


def _default(field: Any) -> Any:
    if field.default is not PydanticUndefined:
        return field.default
    if field.default_factory is not None:
        return field.default_factory()
    return None


def _show(value: Any) -> str:
    if isinstance(value, SecretStr):
        raw = value.get_secret_value()
        return raw if raw.startswith("mongodb://127.0.0.1") else "(secret)"
    if value is None:
        return "(unset)"
    if isinstance(value, dict):
        return json.dumps(
            {k: v.model_dump() if isinstance(v, BaseModel) else v for k, v in value.items()},
            separators=(",", ":"),
        )
    return str(value)


def rows() -> list[tuple[str, str, str]]:
    """(env var, default, description) for every leaf setting, in declaration order."""
    out: list[tuple[str, str, str]] = []
    for name, field in Settings.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            for sub, sf in ann.model_fields.items():
                out.append(
                    (
                        f"TZPUSH_{name.upper()}__{sub.upper()}",
                        _show(_default(sf)),
                        sf.description or "",
                    )
                )
        else:
            desc = field.description or (
                'JSON object: category -> {"grace_seconds": N}' if name == "categories" else ""
            )
            out.append((f"TZPUSH_{name.upper()}", _show(_default(field)), desc))
    return out


def markdown() -> str:
    lines = ["| env var | default | meaning |", "|---|---|---|"]
    lines += [f"| `{e}` | `{d}` | {m} |" for e, d, m in rows()]
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown())
