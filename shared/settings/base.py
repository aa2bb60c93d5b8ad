"""What every settings group is built from: the group base and a bounded number field."""

from __future__ import annotations

import ipaddress
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Group(BaseModel):
    """A settings group: unknown keys are refused (a typo must not be silently ignored), and so
    are ``inf`` and ``nan`` (every number has a finite range)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def within(default: float, low: float, high: float, what: str, *, above: bool = False) -> Any:
    """A number setting with its bounds: ``low <= value <= high`` (``low < value`` if ``above``)."""
    if above:
        return Field(default=default, gt=low, le=high, description=what)
    return Field(default=default, ge=low, le=high, description=what)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback address (a name is not looked up)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
