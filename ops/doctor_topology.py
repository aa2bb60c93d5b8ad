"""What the database deployment is, for ``tzpush doctor``: standalone or replica set, its default
write concern, and whether a failover could roll back a send guard.

Exactly-once rests on the send guards, the journal, the terminal writes and the creators'
leases (``shared.store.db.critical``). On a replica set those are written with
``TZPUSH_MONGO__WRITE_CONCERN`` (majority by default): a write acknowledged by the primary alone
is rolled back when that primary fails over before a secondary copied it, and a guard rolled
back lets a redelivered wake-up send the same push again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pymongo.database import Database

from shared.domain.messages import Doc
from shared.settings import Settings

NAME = "database topology"


@dataclass(frozen=True)
class Verdict:
    """One row of ``tzpush doctor`` (``ops.doctor_db.Check`` takes the same fields)."""

    status: str  # ok | warn
    detail: str
    fix: str = ""


def describe(hello: dict[str, Any]) -> str:
    """``standalone``, ``replica set NAME (N members)`` or ``sharded (mongos)`` from ``hello``."""
    if hello.get("msg") == "isdbgrid":
        return "sharded (mongos)"
    if hello.get("setName"):
        members = len(hello.get("hosts", [])) + len(hello.get("passives", []))
        return f"replica set {hello['setName']!r} ({members} member{'s' * (members != 1)})"
    return "standalone"


def judge(hello: dict[str, Any], default_concern: Any, setting: str) -> Verdict:
    """The topology row: ``warn`` where a rollback could lose a guard (a replica set of more
    than one member written with ``w:1``), ``warn`` for a standalone server (no copy at all:
    its disk is the guard's only home), ``ok`` otherwise."""
    shape = describe(hello)
    default = f"default write concern {default_concern or 'unknown'}"
    detail = f"{shape}; {default}; guards written with w:{setting}"
    if shape == "standalone":
        return Verdict(
            "warn",
            f"{detail}: one copy, no failover (nothing to roll back, nothing to take over)",
            "run a replica set in production (Atlas, or 3 members)",
        )
    members = len(hello.get("hosts", [])) + len(hello.get("passives", []))
    if setting != "majority" and members > 1 and int(setting) <= members // 2:
        return Verdict(
            "warn",
            f"{detail}: a primary failover can roll back a guard, and the push go out twice",
            "set TZPUSH_MONGO__WRITE_CONCERN=majority",
        )
    return Verdict("ok", detail)


def check_topology(database: Database[Doc], settings: Settings) -> Verdict:
    """Ask the server (``hello``, ``getDefaultRWConcern``) and judge it (``judge``)."""
    admin = database.client.admin
    hello = admin.command("hello")
    try:
        rw = admin.command("getDefaultRWConcern")
        concern = rw.get("defaultWriteConcern") or {"w": "majority (implicit)"}
    except Exception:
        concern = None
    return judge(hello, _concern_text(concern), settings.mongo.write_concern)


def _concern_text(concern: Any) -> str | None:
    if not isinstance(concern, dict):
        return None
    return "w:" + str(concern.get("w", "?"))
